"""The shared input checks of dpfast._validation: accepted inputs, conversions, every error."""
import numpy as np
import pytest

from dpfast._validation import (
    check_bounds,
    check_delta,
    check_epsilon,
    check_neighbours,
    check_positive,
    check_values,
)


def test_check_positive_accepts_and_converts():
    assert check_positive(2, "x") == 2.0 and isinstance(check_positive(2, "x"), float)
    assert isinstance(check_positive(np.float32(0.5), "x"), float)
    arr = check_positive([1, 2.5], "x")
    assert arr.dtype == np.float64 and arr.tolist() == [1.0, 2.5]
    assert check_positive(np.inf, "x", allow_inf=True) == np.inf


@pytest.mark.parametrize("bad,msg", [
    (0.0, "> 0"), (-1, "> 0"), (np.nan, "NaN"), (None, "None"), (np.inf, "finite"),
    (-np.inf, "finite"), ([1.0, 0.0], "> 0"), ([1.0, np.nan], "NaN"),
])
def test_check_positive_rejects(bad, msg):
    with pytest.raises(ValueError, match=msg) as info:
        check_positive(bad, "thing")
    assert "thing" in str(info.value)


def test_check_positive_types_and_arrays():
    with pytest.raises(TypeError, match="numeric"):
        check_positive("1", "x")
    with pytest.raises(TypeError, match="real"):
        check_positive(object(), "x")
    with pytest.raises(ValueError, match="scalar"):
        check_positive([1.0, 2.0], "x", allow_array=False)
    with pytest.raises(ValueError, match="> 0"):
        check_positive(-np.inf, "x", allow_inf=True)


def test_check_epsilon():
    assert check_epsilon(0.1) == 0.1
    assert check_epsilon([0.1, 2]).tolist() == [0.1, 2.0]
    for bad in (0, -1e-9, np.inf, np.nan):
        with pytest.raises(ValueError, match="epsilon"):
            check_epsilon(bad)
    with pytest.raises(ValueError, match="scalar"):
        check_epsilon([1.0], allow_array=False)
    with pytest.raises(ValueError, match="eps_total"):
        check_epsilon(0.0, name="eps_total")


def test_check_delta():
    assert check_delta(0.0) == 0.0 and check_delta(1e-5) == 1e-5
    assert isinstance(check_delta(np.float32(0.25)), float)
    for bad in (1.0, -1e-12, 1.5, np.nan, np.inf):
        with pytest.raises(ValueError, match=r"delta must be in \[0, 1\)"):
            check_delta(bad)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        check_delta(0.0, allow_zero=False)
    with pytest.raises(ValueError, match="scalar"):
        check_delta([1e-5, 1e-6])
    np.testing.assert_array_equal(check_delta([0.0, 0.5], allow_array=True), [0.0, 0.5])
    with pytest.raises(ValueError, match="delta"):
        check_delta([0.5, 1.0], allow_array=True)
    with pytest.raises(TypeError):
        check_delta("0.1")


def test_check_values_dtypes():
    x32 = np.ones(3, np.float32)
    assert check_values(x32) is x32  # no copy, float32 kept
    x64 = np.ones((2, 2))
    assert check_values(x64) is x64
    assert check_values([1, 2]).dtype == np.float64
    assert check_values(np.array([True])).dtype == np.float64
    assert check_values(np.ones(2, np.uint8)).dtype == np.float64
    assert check_values(np.ones(2, np.float16)).dtype == np.float64
    assert check_values(3).shape == ()


@pytest.mark.parametrize("bad", [[np.nan], [1.0, np.inf], np.array([-np.inf], np.float32)])
def test_check_values_non_finite(bad):
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_values(bad)


def test_check_values_types():
    with pytest.raises(TypeError, match="numeric"):
        check_values("abc")
    with pytest.raises(TypeError, match="dtype"):
        check_values(np.array([1j]))
    with pytest.raises(TypeError, match="dtype"):
        check_values(np.array(["1"]))
    with pytest.raises(TypeError, match="data"):
        check_values([None], name="data")


def test_check_bounds():
    assert check_bounds((0, 1)) == (0.0, 1.0)
    assert check_bounds(np.array([-2.5, 3])) == (-2.5, 3.0)
    for bad in ((1, 1), (2, 1)):
        with pytest.raises(ValueError, match="lower < upper"):
            check_bounds(bad)
    with pytest.raises(ValueError, match="finite"):
        check_bounds((0, np.inf))
    with pytest.raises(ValueError, match="finite"):
        check_bounds((np.nan, 1))
    for bad in ((1,), (1, 2, 3), 5, None):
        with pytest.raises(ValueError, match="pair"):
            check_bounds(bad)
    with pytest.raises(TypeError, match="real"):
        check_bounds(("a", "b"))
    with pytest.raises(TypeError, match="real"):
        check_bounds(([0, 1], [2, 3]))


def test_check_neighbours():
    assert check_neighbours("add_remove") == "add_remove"
    assert check_neighbours("replace_one") == "replace_one"
    with pytest.raises(ValueError, match="add_remove"):
        check_neighbours("bounded")
