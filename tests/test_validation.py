"""The shared input checks of dpfast._validation: accepted inputs, conversions, every error."""
import pathlib
from fractions import Fraction

import numpy as np
import pytest

from dpfast._validation import (
    check_bounds,
    check_delta,
    check_epsilon,
    check_int,
    check_label_set,
    check_neighbours,
    check_nonnegative,
    check_positive,
    check_real,
    check_size,
    check_values,
    feature_bounds,
    public_classes,
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


def test_feature_bounds_forms():
    """The one parser of per-feature bounds (preprocessing, naive Bayes, k-means, PCA, trees)."""
    lo, hi = feature_bounds((-1, 2), 3)
    assert lo.dtype == hi.dtype == np.float64 and lo.tolist() == [-1.0] * 3 and hi.tolist() == [2.0] * 3
    lo, hi = feature_bounds({1: (0, 5), 0: (-1, 1)}, 2)  # by index, any key order
    assert lo.tolist() == [-1.0, 0.0] and hi.tolist() == [1.0, 5.0]
    lo, hi = feature_bounds({"b": (0, 5), "a": (-1, 1)}, 2, ["a", "b"])  # by column name
    assert lo.tolist() == [-1.0, 0.0] and hi.tolist() == [1.0, 5.0]
    lo, hi = feature_bounds([[0, 1, 2], [3, 4, 5]], 3, arrays=True)  # PCA: (lower array, upper array)
    assert lo.tolist() == [0.0, 1.0, 2.0] and hi.tolist() == [3.0, 4.0, 5.0]
    b = np.array([[0.0, 1.0], [2.0, 3.0]])
    lo, _ = feature_bounds(b, 2, arrays=True)
    lo[0] = 9.0
    assert b[0, 0] == 0.0  # a copy, not a view of the caller's array


@pytest.mark.parametrize("bounds,kw,exc,match", [
    (None, {}, ValueError, r"^bounds must be given: .* feature, from which x; reading it off"),
    ((1, 0), {}, ValueError, "lower < upper"),
    ((0, np.inf), {}, ValueError, "finite"),
    ([(0, 1), (0, 1)], {}, ValueError, "ambiguous"),
    ([(0, 1)] * 3, dict(arrays=True), ValueError, "shape"),
    ([[0, 0], [1, -1]], dict(arrays=True), ValueError, "lower < upper for every feature"),
    ({0: (0, 1)}, {}, ValueError, r"missing .* \[1\]"),
    ({0: (0, 1), 1: (0, 1), 2: (0, 1)}, {}, ValueError, "not features: \\[2\\]; the keys must be feature indices"),
    ({0: (0, 1), 1: (0, 1)}, dict(feature_names=["a", "b"]), ValueError, "column names"),
    ({0: (0, 1), 1: (2, 1)}, {}, ValueError, r"bounds\[1\] must satisfy lower < upper"),
    ((-1e308, 1e308), {}, ValueError, "finite width"),
    ((-1e308, 1e308), dict(width="none"), None, None),
    ((0, 5e-324), dict(width="half"), ValueError, "positive half-width"),
    ((0, 5e-324), dict(width="finite"), None, None),
    ((0, 1e-200), dict(width="half_squared"), ValueError, "square"),
    ((-1e200, 1e200), dict(width="half_squared"), ValueError, "square"),
    ((0, 1e-200), dict(width="half"), None, None),
    ("ab", {}, TypeError, "bounds"),
    ((0, 1), dict(width="wide"), ValueError, "width must be one of"),
])
def test_feature_bounds_errors(bounds, kw, exc, match):
    kw = dict(kw)
    names = kw.pop("feature_names", None)
    if exc is None:
        feature_bounds(bounds, 2, names, purpose=", from which x", **kw)
        return
    with pytest.raises(exc, match=match):
        feature_bounds(bounds, 2, names, purpose=", from which x", **kw)


def test_public_classes():
    assert public_classes(None).tolist() == [0, 1]
    assert public_classes(["b", "a", "c"]).tolist() == ["b", "a", "c"]
    with pytest.raises(ValueError, match="two distinct"):
        public_classes([1, 1])


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


# --- issue 21 item 15: numbers beyond a double, outputs beyond the process's memory limit ------

BEYOND_DOUBLE = [10**400, -(10**400), 2**1024, Fraction(10**400, 3)]


@pytest.mark.parametrize("x", BEYOND_DOUBLE, ids=["10**400", "-10**400", "2**1024", "Fraction(10**400,3)"])
def test_numbers_beyond_a_double_are_a_value_error(x):
    # The int fast paths called float(x) (OverflowError); check_real said TypeError "must be a
    # real number" for a real number that is merely too large.
    for check in (lambda v: check_positive(v, "x"), lambda v: check_epsilon(v), lambda v: check_delta(v),
                  lambda v: check_real(v, "x")):
        with pytest.raises(ValueError, match="too large for a double"):
            check(x)


def test_large_ints_within_a_double_keep_the_fast_path_result():
    assert check_positive(2**1023, "x") == float(2**1023)
    assert check_positive(2**1024 - 2**971, "x") == float(2**1024 - 2**971)  # the largest double
    assert check_real(10**300, "x") == 1e300


def test_check_int_exact_for_rationals_beyond_a_double():
    assert check_int(Fraction(3 * 10**400, 3), "n", 1, integral_reals=True) == 10**400
    with pytest.raises(ValueError, match="must be an integer"):
        check_int(Fraction(10**400, 3), "n", 1, integral_reals=True)
    assert check_int(4.0, "n", 1, integral_reals=True) == 4


def _with_data_limit(extra_bytes, fn):
    """fn() with the soft RLIMIT_DATA set to the current data size plus extra_bytes."""
    resource = pytest.importorskip("resource")
    if not pathlib.Path("/proc/self/status").exists():
        pytest.skip("the OS does not report the process's data size")
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    with open("/proc/self/status") as f:
        data = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmData:"))
    cap = data + extra_bytes if hard == resource.RLIM_INFINITY else min(hard, data + extra_bytes)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        return fn()
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def test_check_size_refuses_outputs_beyond_the_process_memory_limit():
    # 2 GiB of output under a 1 GiB limit: refused with the figure, before allocating
    with pytest.raises(ValueError, match="RLIMIT_DATA"):
        _with_data_limit(1 << 30, lambda: check_size(2**31, itemsize=1))
    # well inside the limit: accepted (a 64 MiB output under a 1 GiB limit)
    assert _with_data_limit(1 << 30, lambda: check_size(2**26, itemsize=1)) == (2**26,)
    assert check_size(2**31, itemsize=1) == (2**31,)  # no limit: physical memory only


def test_bernoulli_exp_beyond_the_memory_limit_fails_before_any_draw():
    # bernoulli_exp(size=2**31) under the fuzz suite's 2 GiB cap filled 2 GiB natively for
    # minutes (a hang); now refused before the generator is touched.
    from dpfast.mechanisms import bernoulli_exp

    gen = np.random.default_rng(5)
    state = gen.bit_generator.state
    with pytest.raises(ValueError, match="size"):
        _with_data_limit(1 << 30, lambda: bernoulli_exp(0.5, size=2**31, rng=gen))
    assert gen.bit_generator.state == state
    # the output is filled in place (no second array): same draws as before, bool dtype
    out = bernoulli_exp(0.5, size=(3, 4), rng=7)
    assert out.dtype == np.bool_ and out.shape == (3, 4) and out.flags.c_contiguous and out.base is None


#: array checks with no scalar ``check_*`` counterpart (file, start of the message); a scalar
#: parameter check goes through dpfast._validation
_INLINE_ARRAY_CHECKS = {("accounting/gdp.py", "every mu"), ("public/_oracles.py", "sample_weight")}


def test_no_inline_finite_checks_outside_validation():
    """One way to validate: "x must be finite and > 0" is written only in dpfast/_validation.py
    (check_positive, check_nonnegative, check_epsilon, ...); an inline copy elsewhere fails here."""
    import ast
    import re

    pattern = re.compile(r"(?<!which )must be (a )?finite( number)?( and)? >=? 0")  # (not a computed value)
    root = pathlib.Path(__file__).resolve().parents[1] / "dpfast"
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "_validation.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args
                    and isinstance(node.exc.func, ast.Name) and node.exc.func.id == "ValueError"):
                continue
            text = "".join(part.value for part in ast.walk(node.exc.args[0])
                           if isinstance(part, ast.Constant) and isinstance(part.value, str))
            if pattern.search(text) and not any(rel == f and text.startswith(s) for f, s in _INLINE_ARRAY_CHECKS):
                found.append(f"dpfast/{rel}:{node.lineno}: {text!r}")
    assert not found, "inline finite/positive checks; use dpfast._validation's check_*:\n" + "\n".join(found)


def test_positive_checks_carry_a_hint_and_refuse_bools():
    with pytest.raises(ValueError, match=r"^sigma_out must be > 0 \(use inf for no output noise\), got 0.0$"):
        check_positive(0.0, "sigma_out", hint="use inf for no output noise")
    with pytest.raises(ValueError, match=r"^tau must be finite and >= 0 \(the threshold\), got -1.0$"):
        check_nonnegative(-1.0, "tau", hint="the threshold")
    for flag in (True, np.bool_(True)):
        with pytest.raises(TypeError, match="x must be a real number > 0, got"):
            check_positive(flag, "x")


def test_check_bounds_fast_path_returns_what_the_general_path_returns():
    """check_bounds takes a tuple/list of two floats or ints without its general checks: the same
    (float, float) for the pairs it accepts, the general path's error for those it refuses."""
    import fractions

    from dpfast._validation import check_bounds

    for b in [(0, 1), [0.0, 1.0], (-3, 7.5), (-(2**1022), 2**1022), (1e-300, 2e-300), (-0.0, 0.0 + 5e-324)]:
        got = check_bounds(b)
        want = check_bounds(tuple(fractions.Fraction(v) for v in b))  # (the general path)
        assert got == want and all(type(v) is float for v in got)
    for b in [(1.0, 1.0), (2, 1), (0.0, float("inf")), (float("nan"), 1.0), (-float("inf"), 0)]:
        with pytest.raises(ValueError):
            check_bounds(b)
    with pytest.raises(ValueError, match="finite"):  # beyond a double (OverflowError before red team 32)
        check_bounds((0, 2**1100))
    with pytest.raises(ValueError, match="pair"):
        check_bounds((0.0, 1.0, 2.0))


def _label_index_by_search(y, classes):
    """The general path of check_label_set: each label's position in classes, by a dict."""
    pos = {c: i for i, c in enumerate(np.asarray(classes).tolist())}
    return np.array([pos[v] for v in np.asarray(y).tolist()], dtype=np.int64)


@pytest.mark.parametrize("y,classes", [
    (np.array([1, 0, 1, 1]), None), (np.array([1, 0, 1]), [1, 0]), (np.array([3, 5, 9, 9], dtype=np.uint8), [5, 3, 9]),
    (np.array([-2, 7, -2]), [7, -2]), (np.array([100, -100], dtype=np.int8), [-1000, 100, -100]),
    (np.array([0, 70000, 5]), [5, 0, 70000]),  # a span beyond the table: the general path
    (np.array([1, 0], dtype=np.uint64), None), (np.array([True, False]), None),
    (np.array([2.0, 1.0]), [1, 2]), (np.array(["b", "a"]), ["a", "b"]), (np.array([4]), [4, 6, 8])])
def test_label_index_fast_path_gives_the_general_indices(y, classes):
    """Integer labels take a look-up table (forest32: the forest's fit at 10^6 rows); the indices
    are those of the general path for every dtype and span."""
    got_classes, idx = check_label_set(y, classes)
    np.testing.assert_array_equal(idx, _label_index_by_search(y, got_classes))
    assert idx.dtype == np.int64


@pytest.mark.parametrize("y,classes", [(np.array([0, 2]), None), (np.array([0, -1]), None),
                                       (np.array([5, 4, 9]), [5, 3, 9]), (np.array([10]), [5, 3, 9]),
                                       (np.array([7], dtype=np.int8), [5, 3, 9])])
def test_label_index_fast_path_refuses_labels_outside_the_set(y, classes):
    with pytest.raises(ValueError, match="label"):
        check_label_set(y, classes)
