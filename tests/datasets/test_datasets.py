"""dpfast.datasets.load_adult: the official split, one-hot encoding, row normalisation."""
import gzip
from importlib import resources

import numpy as np
import pytest

from dpfast.datasets import load_adult


@pytest.mark.slow
def test_shapes_labels_and_class_balance():
    X_train, y_train, X_test, y_test = load_adult()
    # adult.names: train=32561, test=16281; 48842 instances with 23.93% positives overall
    assert X_train.shape[0] == 32561 and X_test.shape[0] == 16281
    assert X_train.shape[1] == X_test.shape[1]
    assert X_train.dtype == np.float64 and y_train.dtype == np.int64
    assert set(np.unique(y_train)) == {0, 1} and set(np.unique(y_test)) == {0, 1}
    pos = (y_train.sum() + y_test.sum()) / (len(y_train) + len(y_test))
    assert pos == pytest.approx(0.2393, abs=5e-5)


def test_positive_counts_match_raw_files():
    data = resources.files("dpfast.datasets").joinpath("data")
    for name, y in (("adult.data.gz", load_adult()[1]), ("adult.test.gz", load_adult()[3])):
        text = gzip.decompress(data.joinpath(name).read_bytes()).decode("ascii")
        assert int(y.sum()) == text.count(">50K")


@pytest.mark.slow
def test_rows_unit_norm_and_one_hot_structure():
    X_train, _, X_test, _, names = load_adult(return_feature_names=True)
    assert len(names) == X_train.shape[1]
    np.testing.assert_allclose(np.linalg.norm(X_train, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(X_test, axis=1), 1.0, rtol=1e-12)
    raw_train, _, raw_test, _ = load_adult(normalize=False)
    # 6 numeric columns scaled into [0, 1] (training range), then one-hot blocks
    assert raw_train[:, :6].min() == 0.0 and raw_train[:, :6].max() == 1.0
    assert raw_test[:, :6].min() >= 0.0 and raw_test[:, :6].max() <= 1.0
    # every training row has exactly one category per categorical attribute (8 of them)
    np.testing.assert_array_equal(raw_train[:, 6:].sum(axis=1), 8.0)
    assert set(np.unique(raw_train[:, 6:])) == {0.0, 1.0}
    # normalisation is a per-row rescaling of the raw representation
    scale = np.linalg.norm(raw_train, axis=1, keepdims=True)
    np.testing.assert_allclose(X_train, raw_train / scale, rtol=1e-12)


def test_read_only_and_cached():
    a = load_adult()[0]
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    assert load_adult()[0] is a
