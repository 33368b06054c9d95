"""What an adversary observes of one run of a release: its structure and its numbers.

:func:`observe` walks any output (scalars, arrays, pandas objects, fitted estimators, tuples,
lists and dicts of them, or the exception a run raised) and returns two flat dicts keyed by a
path such as ``"[0].coef_[3]"``:

* ``facts``: everything that is not a released number -- Python types, dtypes, shapes, index and
  column values, dtypes, names, categories and order, ``attrs``, the names of an estimator's
  fitted attributes, strings and other non-numeric leaves, and the exception's type and message.
  Each is a hashable value compared exactly between the two neighbours.
* ``numbers``: the released numbers as floats (array coordinates, their l2 norm and sum,
  DataFrame cells keyed by row label and column, fitted attributes).  Missing entries (a group
  released in one run and not in another) are absent here; the presence of each index label is
  recorded as a 0/1 number so that partition selection is tested like the values.
"""
from __future__ import annotations

import numbers as _numbers
from typing import Any, Dict, Tuple

import numpy as np

_MAX_COORDS = 64      # coordinates of an array kept as separate numbers (norm and sum cover the rest)
_MAX_LABELS = 256     # index labels given a presence number and per-cell numbers
_MAX_FACT_REPR = 400  # characters of a fact's repr kept in reports


def _is_estimator(obj) -> bool:
    return hasattr(obj, "get_params") and hasattr(obj, "fit")


def _label_key(label) -> str:
    # repr keeps 1 and "1" and 1.0 apart: they are different observations
    return repr(label) if not isinstance(label, tuple) else "(" + ", ".join(map(repr, label)) + ")"


def _index_facts(idx, path: str, facts: dict) -> None:
    import pandas as pd
    facts[path + ".type"] = type(idx).__name__
    facts[path + ".names"] = tuple(map(repr, idx.names))
    if isinstance(idx, pd.MultiIndex):
        facts[path + ".dtypes"] = tuple(str(lv.dtype) for lv in idx.levels)
        for i, lv in enumerate(idx.levels):
            facts[f"{path}.levels[{i}]"] = tuple(map(_label_key, lv))
            if isinstance(lv.dtype, pd.CategoricalDtype):
                facts[f"{path}.levels[{i}].categories"] = tuple(map(_label_key, lv.categories))
    else:
        facts[path + ".dtype"] = str(idx.dtype)
        if isinstance(idx.dtype, pd.CategoricalDtype):
            facts[path + ".categories"] = tuple(map(_label_key, idx.dtype.categories))
            facts[path + ".ordered"] = bool(idx.dtype.ordered)
    facts[path + ".values"] = tuple(map(_label_key, idx))


def _array(arr: np.ndarray, path: str, facts: dict, nums: dict) -> None:
    facts[path + ".type"] = type(arr).__name__
    facts[path + ".dtype"] = str(arr.dtype)
    facts[path + ".shape"] = tuple(arr.shape)
    if arr.dtype.kind in "biuf":
        flat = np.asarray(arr, dtype=np.float64).ravel()
        for i, v in enumerate(flat[:_MAX_COORDS]):
            nums[f"{path}[{i}]"] = float(v)
        if flat.size > 1:
            finite = np.isfinite(flat)
            nums[path + ".norm"] = float(np.sqrt(np.sum(flat[finite] ** 2)))
            nums[path + ".sum"] = float(np.sum(flat[finite]))
        if not np.isfinite(flat).all():
            facts[path + ".nonfinite"] = tuple(np.flatnonzero(~np.isfinite(flat))[:_MAX_COORDS].tolist())
    elif arr.dtype.kind == "c":
        _array(arr.real, path + ".real", facts, nums)
        _array(arr.imag, path + ".imag", facts, nums)
    else:  # object, strings, datetimes: each element is a fact (a released label is a value too)
        facts[path + ".values"] = tuple(_label_key(v) for v in arr.ravel()[:_MAX_COORDS])


def _frame(obj, path: str, facts: dict, nums: dict) -> None:
    import pandas as pd
    facts[path + ".type"] = type(obj).__name__
    _index_facts(obj.index, path + ".index", facts)
    frame = obj.to_frame() if isinstance(obj, pd.Series) else obj
    if isinstance(obj, pd.Series):
        facts[path + ".name"] = repr(obj.name)
    else:
        _index_facts(obj.columns, path + ".columns", facts)
    facts[path + ".dtypes"] = tuple(str(t) for t in frame.dtypes)
    for c, t in zip(frame.columns, frame.dtypes):
        if isinstance(t, pd.CategoricalDtype):
            facts[f"{path}[{c!r}].categories"] = tuple(map(_label_key, t.categories))
    if obj.attrs:
        _walk(dict(obj.attrs), path + ".attrs", facts, nums, attrs=True)
    labels = list(obj.index[:_MAX_LABELS])
    for lab in labels:
        nums[f"{path}.has[{_label_key(lab)}]"] = 1.0
    nums[path + ".len"] = float(len(obj))
    if len(obj.index) != len(set(map(_label_key, obj.index))):
        facts[path + ".duplicate_labels"] = True
        return
    for c in frame.columns:
        col = frame[c]
        if col.dtype.kind in "biuf":
            vals = col.to_numpy(dtype=np.float64, na_value=np.nan)[:_MAX_LABELS]
            for lab, v in zip(labels, vals):
                nums[f"{path}[{_label_key(lab)}, {c!r}]"] = float(v)
        else:
            facts[f"{path}[{c!r}].values"] = tuple(_label_key(v) for v in col.iloc[:_MAX_LABELS])


def _walk(obj: Any, path: str, facts: dict, nums: dict, attrs: bool = False) -> None:
    if obj is None or isinstance(obj, (str, bytes)):
        facts[path] = _label_key(obj)
        return
    if isinstance(obj, (bool, np.bool_)):
        facts[path + ".type"] = type(obj).__name__
        nums[path] = float(obj)
        return
    if isinstance(obj, _numbers.Number) and not isinstance(obj, (complex, np.complexfloating)):
        facts[path + ".type"] = type(obj).__name__
        if attrs:  # attrs carry public parameters (scales, budgets): compared exactly
            facts[path] = repr(obj)
        else:
            nums[path] = float(obj)
        return
    if isinstance(obj, np.ndarray):
        if attrs:
            facts[path] = (str(obj.dtype), tuple(obj.shape), repr(obj.tolist())[:_MAX_FACT_REPR])
        else:
            _array(obj, path, facts, nums)
        return
    mod = type(obj).__module__ or ""
    if mod.startswith("pandas") and hasattr(obj, "index") and hasattr(obj, "dtypes") or \
            mod.startswith("pandas") and type(obj).__name__ == "Series":
        _frame(obj, path, facts, nums)
        return
    if mod.startswith("pandas") and hasattr(obj, "dtype") and hasattr(obj, "names"):  # an Index
        _index_facts(obj, path, facts)
        return
    if isinstance(obj, (tuple, list)):
        facts[path + ".type"] = type(obj).__name__
        facts[path + ".len"] = len(obj)
        for i, v in enumerate(obj[:_MAX_COORDS]):
            _walk(v, f"{path}[{i}]", facts, nums, attrs)
        return
    if isinstance(obj, dict):
        facts[path + ".type"] = type(obj).__name__
        facts[path + ".keys"] = tuple(map(_label_key, obj.keys()))
        for k, v in list(obj.items())[:_MAX_COORDS]:
            _walk(v, f"{path}[{_label_key(k)}]", facts, nums, attrs)
        return
    if _is_estimator(obj):
        facts[path + ".type"] = type(obj).__module__ + "." + type(obj).__qualname__
        fitted = sorted(k for k in vars(obj) if k.endswith("_") and not k.startswith("_"))
        facts[path + ".fitted_attributes"] = tuple(fitted)
        for k in fitted:
            _walk(getattr(obj, k), f"{path}.{k}", facts, nums)
        return
    # anything else (events, accountants, custom objects): its type and its repr, exactly
    facts[path + ".type"] = type(obj).__module__ + "." + type(obj).__qualname__
    facts[path] = repr(obj)[:_MAX_FACT_REPR]


def observe(output: Any = None, error: BaseException = None) -> Tuple[Dict[str, Any], Dict[str, float]]:
    """(facts, numbers) of one run: see the module docstring."""
    facts: Dict[str, Any] = {}
    nums: Dict[str, float] = {}
    if error is not None:
        facts["raises"] = f"{type(error).__module__}.{type(error).__qualname__}: {error}"[:_MAX_FACT_REPR]
        return facts, nums
    facts["raises"] = None
    _walk(output, "out", facts, nums)
    return facts, nums
