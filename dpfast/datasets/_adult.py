"""UCI Adult, prepared as in the objective-perturbation paper's experiments.

See :doc:`/theory/erm`, "Experiments to reproduce" (Adult preprocessing of Iyengar
et al. 2019: one-hot categorical features, numeric features scaled, the official train/test
split) and Section 5 (rows normalised to unit l2 norm).  The data files ship gzipped in
``dpfast/datasets/data/`` with their licence (CC BY 4.0).
"""
from __future__ import annotations

import gzip
from functools import lru_cache
from importlib import resources

import numpy as np

__all__ = ["load_adult", "ADULT_COLUMNS"]

ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country",
)
_NUMERIC = (0, 2, 4, 10, 11, 12)
_CATEGORICAL = (1, 3, 5, 6, 7, 8, 9, 13)


def _read(name: str):
    data = resources.files("dpfast.datasets").joinpath("data", name).read_bytes()
    rows, labels = [], []
    for line in gzip.decompress(data).decode("ascii").splitlines():
        line = line.strip()
        if not line or line.startswith("|"):
            continue  # blank lines and adult.test's comment line
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 15:
            raise ValueError(f"malformed Adult row in {name}: {line[:80]!r}")
        rows.append(fields[:14])
        label = fields[14].rstrip(".")  # adult.test labels end with '.'
        if label not in ("<=50K", ">50K"):
            raise ValueError(f"unexpected Adult label {fields[14]!r} in {name}")
        labels.append(1 if label == ">50K" else 0)
    return rows, np.asarray(labels, dtype=np.int64)


@lru_cache(maxsize=2)
def _load(normalize: bool):
    train_rows, y_train = _read("adult.data.gz")
    test_rows, y_test = _read("adult.test.gz")
    tr = np.array(train_rows, dtype=object).astype(str)
    te = np.array(test_rows, dtype=object).astype(str)
    # numeric columns: min-max scaled to [0, 1] with the training set's range (test clipped to it)
    num_train = tr[:, list(_NUMERIC)].astype(np.float64)
    num_test = te[:, list(_NUMERIC)].astype(np.float64)
    lo, hi = num_train.min(axis=0), num_train.max(axis=0)
    num_train = (num_train - lo) / (hi - lo)
    num_test = np.clip((num_test - lo) / (hi - lo), 0.0, 1.0)
    # categorical columns: one-hot over the training set's categories ('?' is a category)
    blocks_train, blocks_test, names = [num_train], [num_test], [ADULT_COLUMNS[j] for j in _NUMERIC]
    for j in _CATEGORICAL:
        cats, codes = np.unique(tr[:, j], return_inverse=True)
        blocks_train.append(np.eye(len(cats))[codes])
        pos = np.minimum(np.searchsorted(cats, te[:, j]), len(cats) - 1)
        known = cats[pos] == te[:, j]  # a test category unseen in training is all zeros
        blocks_test.append(np.eye(len(cats))[pos] * known[:, None])
        names.extend(f"{ADULT_COLUMNS[j]}={c}" for c in cats)
    X_train = np.hstack(blocks_train)
    X_test = np.hstack(blocks_test)
    if normalize:
        X_train /= np.linalg.norm(X_train, axis=1, keepdims=True)
        X_test /= np.linalg.norm(X_test, axis=1, keepdims=True)
    for a in (X_train, X_test, y_train, y_test):
        a.setflags(write=False)
    return X_train, y_train, X_test, y_test, tuple(names)


def load_adult(*, normalize: bool = True, return_feature_names: bool = False):
    """Load UCI Adult (Census Income) on its official split.

    Returns ``(X_train, y_train, X_test, y_test)`` as NumPy arrays (float64 features, int64
    labels in {0, 1}, 1 meaning income >50K): 32,561 training and 16,281 test rows.

    Preprocessing (see :doc:`/theory/erm`, "Experiments to reproduce" and Section 5):
    the 6 numeric attributes are min-max scaled to [0, 1] with the *training* set's range (test
    values clipped to it), the 8 categorical ones one-hot encoded over the training set's
    categories (a missing value '?' is its own category), and with ``normalize=True`` every row
    is scaled to unit l2 norm (a per-row map, which costs no privacy).  Add the bias feature
    with the estimators' ``fit_intercept=True``, giving ||x|| <= sqrt(2) as in the paper.
    The scaling ranges and category lists come from the training data, as in the paper's
    benchmark setup; they are treated as public.

    The arrays are read-only and cached; copy them before modifying.
    With ``return_feature_names=True`` a fifth element, the tuple of column names, is returned.
    """
    X_train, y_train, X_test, y_test, names = _load(bool(normalize))
    if return_feature_names:
        return X_train, y_train, X_test, y_test, names
    return X_train, y_train, X_test, y_test
