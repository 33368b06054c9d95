"""Validation at the public boundary: one place, clear messages (dpfast's design notes).

Native code asserts preconditions but never sees unvalidated input.

Public functions declare their parameter checks with :func:`validate_params` (in the spirit
of scikit-learn's ``validate_params``, whose home ``sklearn.utils._param_validation`` is
private): ``@validate_params(epsilon=Epsilon(), delta=Delta(allow_zero=False), rng=RNG)``.
Each constraint is a thin front for one ``check_*`` function below (the one home of each
check and of its message), and the checked, normalised value is what the function receives.
Estimators keep scikit-learn's ``_parameter_constraints``.
"""
from __future__ import annotations

import inspect
import math
import numbers
import operator
import os
from collections.abc import Mapping
from typing import Any, Callable, TypeVar

import numpy as np

__all__ = [
    "check_epsilon",
    "check_delta",
    "check_positive",
    "check_values",
    "check_bounds",
    "feature_bounds",
    "public_classes",
    "check_neighbours",
    "check_size",
    "check_int",
    "check_real",
    "check_nonnegative",
    "check_bool",
    "check_option",
    "as_array",
    "validate_params",
    "unchecked",
    "Constraint",
    "Positive",
    "Epsilon",
    "Delta",
    "NonNegative",
    "Int",
    "Real",
    "Bool",
    "Options",
    "Bounds",
    "Values",
]


def is_ragged_error(exc: BaseException) -> bool:
    """Whether ``exc`` is NumPy's refusal of ragged nested sequences ("setting an array element
    with a sequence. ... The detected shape was (3,) + inhomogeneous part."), whose text quotes
    the detected shape: the number of rows, private under add/remove neighbours."""
    return "inhomogeneous" in str(exc) or "sequence" in str(exc)


def ragged_message(name: str) -> str:
    """The one message for ragged nested sequences: names the argument, never its shape."""
    return f"{name} must be a rectangular array of numbers (got ragged nested sequences)"


def as_array(x, name: str, dtype=None) -> np.ndarray:
    """np.asarray(x, dtype) with ragged nested sequences and unconvertible objects refused as a
    TypeError naming the argument (NumPy's own message names neither, and a ragged one quotes the
    detected shape: :func:`is_ragged_error`)."""
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be numeric, got {type(x).__name__}")
    try:
        return np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    except ValueError as exc:
        if is_ragged_error(exc):
            raise TypeError(ragged_message(name)) from None
        raise TypeError(f"{name} must be a real number or array of real numbers: {exc}") from None
    except TypeError as exc:
        raise TypeError(f"{name} must be a real number or array of real numbers: {exc}") from None
    except OverflowError:  # e.g. Fraction(10**400, 3) or a huge int converted to float64
        raise ValueError(f"{name} is too large for a double (must be a finite real number)") from None


#: float(n) raises OverflowError for a Python int n that rounds beyond the largest double
#: (|n| >= 2**1024 - 2**970): ints outside +-2**1023 skip the fast paths below and go through
#: :func:`as_array`, which refuses the too large ones with a ValueError (as Fraction(10**400, 3)).
_INT_FLOAT_MAX = 2**1023


def _as_float_array(x, name: str) -> np.ndarray:
    return as_array(x, name, np.float64)


def _example(x, arr: np.ndarray, bad: np.ndarray) -> str:
    """repr of x for scalars; an offending entry for arrays (never the whole array)."""
    if arr.ndim == 0:
        return "None" if x is None else repr(x)
    return f"{arr[bad].flat[0]!r} (one of {int(np.count_nonzero(bad))} bad entries of an array of shape {arr.shape})"


def _hint(hint: str) -> str:
    return f" ({hint})" if hint else ""


def check_positive(x, name: str, *, allow_array: bool = True, allow_inf: bool = False, hint: str = ""):
    """``x > 0`` and finite (scalar or array); returns a float or a float64 array.

    A bool is refused (``TypeError``): True is not a scale.  ``hint`` is added to the
    message after the condition (``"use inf for no output noise"``)."""
    if type(x) is float or (type(x) is int and -_INT_FLOAT_MAX < x < _INT_FLOAT_MAX):  # fast path, same result as below
        v = float(x)
        if 0.0 < v < math.inf or (allow_inf and v == math.inf):
            return v
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number > 0, got {type(x).__name__}")
    arr = _as_float_array(x, name)
    if arr.ndim and not allow_array:
        raise ValueError(f"{name} must be a scalar, got an array of shape {arr.shape}")
    nan = np.isnan(arr)
    if nan.any():
        raise ValueError(f"{name} must be > 0{_hint(hint)}, got {'None' if x is None else 'NaN'}")
    inf = np.isinf(arr) if not allow_inf else np.zeros(arr.shape, dtype=bool)
    if inf.any():
        raise ValueError(f"{name} must be finite{_hint(hint)}, got {_example(x, arr, inf)}")
    nonpos = arr <= 0
    if nonpos.any():
        raise ValueError(f"{name} must be > 0{_hint(hint)}, got {_example(x, arr, nonpos)}")
    return float(arr) if arr.ndim == 0 else arr


def check_epsilon(epsilon, *, allow_array: bool = True, name: str = "epsilon"):
    """epsilon > 0 and finite."""
    return check_positive(epsilon, name, allow_array=allow_array)


def check_delta(delta, *, allow_zero: bool = True, allow_array: bool = False, name: str = "delta"):
    """0 <= delta < 1 (or 0 < delta < 1 when ``allow_zero`` is False)."""
    if type(delta) is float or (type(delta) is int and -_INT_FLOAT_MAX < delta < _INT_FLOAT_MAX):  # fast path
        v = float(delta)  # (same result as below; an int beyond a double's range goes below)
        if (0.0 <= v if allow_zero else 0.0 < v) and v < 1.0:
            return v
    arr = _as_float_array(delta, name)
    if arr.ndim and not allow_array:
        raise ValueError(f"{name} must be a scalar, got an array of shape {arr.shape}")
    lo_ok = (arr >= 0) if allow_zero else (arr > 0)
    bad = ~(lo_ok & (arr < 1))  # NaN compares False, so it is bad too
    if bad.any():
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise ValueError(f"{name} must be in {interval}, got {_example(delta, arr, bad)}")
    return float(arr) if arr.ndim == 0 else arr


def check_values(values, name: str = "values") -> np.ndarray:
    """A real array without NaN/inf; float32 stays float32, everything else becomes float64."""
    if type(values) is float and math.isfinite(values):  # fast path, same result as below
        return np.asarray(values)
    arr = as_array(values, name)
    if arr.dtype == np.float32 or arr.dtype == np.float64:
        pass
    elif arr.dtype.kind in "biu":
        arr = arr.astype(np.float64)
    elif arr.dtype.kind == "f":  # float16, longdouble
        arr = arr.astype(np.float64)
    else:
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite entries; DP mechanisms need finite, bounded data")
    return arr


def check_bounds(bounds, name: str = "bounds") -> tuple[float, float]:
    """A pair (lower, upper) of finite reals with lower < upper."""
    if type(bounds) is tuple or type(bounds) is list:  # fast path (floats, ints): the result below
        if len(bounds) == 2:
            lo, hi = bounds
            if (type(lo) is float or (type(lo) is int and -_INT_FLOAT_MAX < lo < _INT_FLOAT_MAX)) and (
                    type(hi) is float or (type(hi) is int and -_INT_FLOAT_MAX < hi < _INT_FLOAT_MAX)):
                lo, hi = float(lo), float(hi)
                if -math.inf < lo < hi < math.inf:  # (NaN compares False: the general path's message)
                    return lo, hi
    try:
        lo, hi = bounds
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a pair (lower, upper), got {bounds!r}") from exc
    if not all(isinstance(b, numbers.Real) or np.ndim(b) == 0 for b in (lo, hi)) or any(
        isinstance(b, (str, bytes)) for b in (lo, hi)
    ):
        raise TypeError(f"{name} must hold two real numbers, got {bounds!r}")
    try:
        lo, hi = float(lo), float(hi)
    except OverflowError as exc:  # an int or Fraction beyond float64's range: not finite
        raise ValueError(f"{name} must be finite, got {bounds!r}") from exc
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must hold two real numbers, got {bounds!r}") from exc
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"{name} must be finite, got {bounds!r}")
    if not lo < hi:
        raise ValueError(f"{name} must satisfy lower < upper, got {bounds!r}")
    return lo, hi


#: ``feature_bounds(..., width=...)``: what the range of every feature must allow beyond
#: ``lower < upper`` (each a double): nothing more, a finite width ``upper - lower``, a positive
#: finite half-width ``r = (upper - lower) / 2``, or a positive finite ``r * r``
_WIDTH_CHECKS = ("none", "finite", "half", "half_squared")


def feature_bounds(bounds, n_features: int, feature_names=None, *, name: str = "bounds", purpose: str = "",
                   arrays: bool = False, width: str = "finite") -> tuple[np.ndarray, np.ndarray]:
    """``bounds`` -> ``(lower, upper)``, two float64 arrays of length ``n_features``: the one
    parser of per-feature public bounds (preprocessing, naive Bayes, k-means, PCA, trees).

    One convention with :func:`dpfast.tables.aggregate`: a pair ``(lower, upper)`` of scalars for
    every feature, or a dict ``{feature: (lower, upper)}`` with one pair per feature, keyed by
    column name (``feature_names``, for a DataFrame with string column names) or by index
    ``0 .. n_features - 1``.  A 2-d array is refused: ``[(0, 10), (5, 20)]`` reads as (lower
    array, upper array) or as one pair per feature, and a silent choice between the two would clamp
    to the wrong ranges -- except with ``arrays=True`` (PCA's historical convention), where an
    array of shape ``(2, n_features)`` is the lower and the upper array.

    None is an error (its message says what the bounds are for: ``purpose``, e.g. ``", from which
    the random splits are drawn"``; a caller whose bounds are optional tests for None first).
    Every range must be finite with ``lower < upper``, plus ``width`` (one of ``"none"``, ``"finite"``: a
    finite ``upper - lower``; ``"half"``: a positive finite ``(upper - lower) / 2``;
    ``"half_squared"``: its square a positive finite double too).  Public values only: called
    before the charge; the messages may name them.
    """
    if width not in _WIDTH_CHECKS:
        raise ValueError(f"width must be one of {_WIDTH_CHECKS}, got {width!r}")
    if bounds is None:
        raise ValueError(f"{name} must be given: the public range (lower, upper) of every feature{purpose}; "
                         "reading it off the private data would not be private")
    d = int(n_features)
    if isinstance(bounds, Mapping):
        names = None if feature_names is None else [str(c) for c in feature_names]
        keys = names if names is not None else list(range(d))
        extra = [k for k in bounds if k not in keys]
        if extra:
            what = "the column names of X" if names is not None else f"feature indices 0..{d - 1}"
            raise ValueError(f"{name} has keys that are not features: {extra[:5]!r}; the keys must be {what}")
        missing = [k for k in keys if k not in bounds]
        if missing:
            raise ValueError(f"{name}: missing (lower, upper) for feature(s) {missing[:5]!r}; every feature needs "
                             "its public range")
        pairs = [check_bounds(bounds[k], f"{name}[{k!r}]") for k in keys]
        lo = np.array([p[0] for p in pairs], dtype=np.float64)
        hi = np.array([p[1] for p in pairs], dtype=np.float64)
    else:
        b = as_array(bounds, name, np.float64)
        if b.shape == (2,):
            lo_, hi_ = check_bounds((b[0], b[1]), name)
            lo, hi = np.full(d, lo_), np.full(d, hi_)
        elif arrays and b.shape == (2, d):
            lo, hi = b[0].copy(), b[1].copy()
            if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()):
                raise ValueError(f"{name} must be finite with lower < upper for every feature")
        elif arrays:
            raise ValueError(f"{name} must be a pair (lower, upper) of scalars, a pair of arrays of length "
                             f"n_features={d}, or a dict {{feature: (lower, upper)}} keyed by column name or "
                             f"index; got an array of shape {b.shape}")
        else:
            raise ValueError(
                f"{name} must be a pair (lower, upper) of scalars for every feature, or a dict {{feature: (lower, "
                f"upper)}} keyed by column name or index (as in dpfast.tables.aggregate); got an array of shape "
                f"{b.shape}. A 2-d array is ambiguous (a lower and an upper array, or one pair per feature): "
                "write dict(enumerate(pairs)) for one (lower, upper) pair per feature, or "
                "dict(enumerate(zip(lower, upper))) for a lower and an upper array")
    if width == "finite":
        with np.errstate(over="ignore"):
            ok = np.isfinite(hi - lo).all()
        if not ok:
            raise ValueError(f"{name} must have a finite width upper - lower (a double); rescale the feature first")
    elif width in ("half", "half_squared"):
        with np.errstate(over="ignore", under="ignore"):
            r = 0.5 * (hi - lo)
            r2 = r * r if width == "half_squared" else r
        if not (np.isfinite(r2).all() and (r2 > 0).all()):
            what = ("a half-width (upper - lower) / 2 whose square is a positive finite double (between about "
                    "1.5e-162 and 1.3e154)" if width == "half_squared" else
                    "a finite, positive half-width (upper - lower) / 2 in double precision")
            raise ValueError(f"{name} must have {what}; rescale the feature first")
    return lo, hi


def public_classes(classes) -> np.ndarray:
    """The public label set (``None``: ``[0, 1]``) checked by :func:`check_label_set` on no labels:
    what a fit on data it cannot look at before the charge (Dask) uses."""
    ref = np.array([0, 1]) if classes is None else np.asarray(classes)
    return check_label_set(ref[:0], classes)[0]


def check_neighbours(neighbours: str) -> str:
    """'add_remove' (default everywhere) or 'replace_one' (see :doc:`/theory/conventions`, Conventions)."""
    if neighbours not in ("add_remove", "replace_one"):
        raise ValueError(f"neighbours must be 'add_remove' or 'replace_one', got {neighbours!r}")
    return neighbours


def _integer_label_index(y: np.ndarray, classes: np.ndarray):
    """Integer labels and integer classes within a span of 2^16: each label's index in
    ``classes`` by a look-up table (two passes over ``y`` instead of a binary search per label),
    or None -- a label outside the classes, or other dtypes -- for the general path (which gives
    the same indices, or the error)."""
    def small(dt):  # signed, or unsigned that fits int64
        return dt.kind == "i" or (dt.kind == "u" and dt.itemsize < 8)

    if y.ndim != 1 or y.size == 0 or not small(y.dtype) or not small(classes.dtype):
        return None
    lo, hi = int(classes.min()), int(classes.max())
    if hi - lo > (1 << 16) or int(y.min()) < lo or int(y.max()) > hi:
        return None
    lut = np.full(hi - lo + 1, -1, dtype=np.int64)
    lut[classes.astype(np.int64) - lo] = np.arange(classes.size, dtype=np.int64)
    y = y.astype(np.int64, copy=False)  # y - lo in [0, 2^16]: no overflow
    idx = lut[y - lo if lo else y]
    return None if (classes.size < hi - lo + 1 and int(idx.min()) < 0) else idx


def check_label_set(y: np.ndarray, classes, *, name: str = "y") -> tuple[np.ndarray, np.ndarray]:
    """``(classes, indices)``: the public label set and each label's index in it.

    The label set is public schema, never read off the private labels: ``classes=None`` means
    ``[0, 1]``.  (Inferring it, e.g. by ``np.unique(y)``, lets a single record change the
    output's structure: an all-ones dataset and its neighbour with one label 2 would train
    models with different numbers of classes.)  Labels outside the set raise ``ValueError``.
    """
    if classes is None:
        classes = np.array([0, 1])
        implicit = True
    else:
        given = classes
        classes = np.asarray(classes)
        implicit = False
        if classes.dtype.kind in "US" and classes.ndim == 1 and not all(isinstance(c, (str, bytes)) for c in given):
            # numbers with strings ([1, "a"]): NumPy would turn 1 into "1", a label no record
            # carries; kept as declared (objects), as a label of either type is then found
            classes = np.array(list(given), dtype=object)
        try:
            distinct = np.unique(classes).size
        except TypeError:  # objects that do not sort: distinct by equality
            distinct = len(set(classes.tolist())) if classes.ndim == 1 else -1
        if classes.ndim != 1 or classes.size < 2 or distinct != classes.size:
            raise ValueError(f"classes must list at least two distinct labels, got {classes.tolist()!r}")
    y = np.asarray(y)
    idx = _integer_label_index(y, classes)
    if idx is not None:
        return classes, idx
    try:  # vectorized lookup (numbers, strings); falls back to a dict for mixed objects
        order = np.argsort(classes, kind="stable")
        sorted_classes = classes[order]
        at = np.clip(np.searchsorted(sorted_classes, y), 0, classes.size - 1)
        if np.all(sorted_classes[at] == y):
            idx = order[at].astype(np.int64)
    except TypeError:
        pos = {c: i for i, c in enumerate(classes.tolist())}
        try:
            idx = np.fromiter((pos[c] for c in y.tolist()), dtype=np.int64, count=y.size)
        except (KeyError, TypeError):
            idx = None
    if idx is None:
        # one message per public label set, whatever the labels (a hint chosen from the values,
        # or scikit-learn's "continuous"/"unknown" target types, would tell neighbours apart);
        # "Unknown label type" is scikit-learn's wording for a refused target
        if implicit:
            raise ValueError(f"with classes=None the label set is {{0, 1}}, but {name} has other labels "
                             "(Unknown label type: pass classes=[...], the public label set: all K labels for "
                             "multiclass, classes=[-1, 1] for labels in {-1, +1})")
        raise ValueError(f"{name} has labels outside classes={classes.tolist()} (Unknown label type: not in the "
                         "public label set)")
    return classes, idx


def check_real(x, name: str, *, allow_nan: bool = True) -> float:
    """A real scalar as a float: TypeError for a string, bytes, a bool, None or anything
    float() refuses; ValueError for a number beyond a double's range (``float()`` would raise
    OverflowError) and for NaN unless ``allow_nan`` (callers that range-check after this keep
    their own message for NaN).  Use it instead of a bare ``float(x)`` on a public parameter."""
    if isinstance(x, (str, bytes, bool, np.bool_)) or x is None:
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    try:
        v = float(x)
    except OverflowError:  # Fraction(10**400, 3), 10**400: a real number, but beyond a double
        raise ValueError(f"{name} is too large for a double (must be a finite real number)") from None
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}") from exc
    if not allow_nan and math.isnan(v):
        raise ValueError(f"{name} must not be NaN")
    return v


def check_nonnegative(x, name: str, *, allow_inf: bool = False, hint: str = "") -> float:
    """A real scalar ``x >= 0`` as a float (finite unless ``allow_inf``): ``TypeError`` for a
    non-number (bools included), ``ValueError`` for a negative value, NaN, or inf when it is
    not allowed.  A 0-d array is taken as its scalar."""
    if type(x) is float and 0.0 <= x and (allow_inf or x < math.inf):  # fast path, same result as below
        return x
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number >= 0, got {type(x).__name__}")
    v = check_real(x, name)
    if not (v >= 0 and (allow_inf or v < math.inf)):  # (False for NaN)
        raise ValueError(f"{name} must be {'' if allow_inf else 'finite and '}>= 0{_hint(hint)}, got {x!r}")
    return v


def check_bool(x, name: str) -> bool:
    """A bool (Python or NumPy) as a Python bool; ``TypeError`` otherwise (1 and "yes" too)."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(x).__name__}")
    return bool(x)


def check_option(x, name: str, options) -> str:
    """One of the strings ``options``: ``TypeError`` for a non-string, ``ValueError`` for
    another string; the message lists the options."""
    if not isinstance(x, str) or x not in options:
        alts = ", ".join(map(repr, options[:-1])) + f" or {options[-1]!r}" if len(options) > 1 else repr(options[0])
        if not isinstance(x, str):
            raise TypeError(f"{name} must be {alts}, got {type(x).__name__}")
        raise ValueError(f"{name} must be {alts}, got {x!r}")
    return x


def check_int(v, name: str, lo: int = 1, *, integral_reals: bool = False) -> int:
    """An integer >= ``lo`` (bools refused): TypeError for a non-integer, ValueError below ``lo``.

    ``integral_reals``: a real number is accepted when it is a finite integer (3.0), and any
    other real (2.5, inf, NaN) is a ValueError -- for counts that have always been taken that way.
    """
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer >= {lo}, got {v!r}")
    if integral_reals and isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
        if isinstance(v, numbers.Rational):  # exact: float(Fraction(10**400, 3)) would overflow
            integral = v.denominator == 1
        else:
            try:
                integral = math.isfinite(float(v)) and float(v).is_integer()
            except OverflowError:  # a Real type beyond a double's range
                integral = False
        if not integral:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        v = int(v)
    if not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {lo}, got {v!r}")
    if int(v) < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        return None


#: Outputs from this size on are also checked against the process's memory limits (reading
#: /proc costs ~20 us: small outputs, the common case, skip it).
_LIMIT_CHECK_BYTES = 1 << 26
#: Working memory a call needs beyond its output (native threads' stacks, temporaries).
_WORKING_MARGIN_BYTES = 1 << 26


def process_memory_headroom() -> int | None:
    """Bytes this process may still map under its soft ``RLIMIT_DATA``/``RLIMIT_AS`` limits
    (``ulimit -d``/``-v``, a container's or a test harness's cap); None where none is set or
    the OS does not say (non-Linux)."""
    try:
        import resource

        with open("/proc/self/status") as f:
            status = f.read()
    except (ImportError, OSError):  # pragma: no cover - non-POSIX
        return None
    room = None
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        limit = {"VmData": getattr(resource, "RLIMIT_DATA", None),
                 "VmSize": getattr(resource, "RLIMIT_AS", None)}.get(key)
        if limit is None:
            continue
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY:
            r = soft - (int(rest.split()[0]) << 10)  # the field is in kB
            room = r if room is None else min(room, r)
    return room


def _gib(nbytes: int) -> str:
    """``nbytes`` in GiB for a message (an int beyond a double's range does not overflow)."""
    return f"{nbytes / 2**30:.3g}" if nbytes < 2**1000 else f"about 2**{nbytes.bit_length() - 31}"


def check_allocation(shape: tuple, itemsize: int, name: str = "size") -> None:
    """``ValueError`` before allocating an output of ``shape`` that exceeds physical memory, or
    (for outputs of 64 MiB or more) what the process may still allocate under its memory limits
    (:func:`process_memory_headroom`, less a working margin).

    Counted with Python integers (no overflow); a request that cannot be met is refused with
    the figure instead of ending in a MemoryError, a ``std::bad_alloc`` from a native thread or
    an out-of-memory kill mid-way -- or, for the slower exact samplers, a native fill that runs
    for minutes before failing.  Called before any random draw and any budget charge.
    """
    nbytes = math.prod(shape) * int(itemsize)
    limit = physical_memory()
    if limit is not None and nbytes > limit:
        raise ValueError(f"{name}={shape!r} needs {_gib(nbytes)} GiB, more than this machine's "
                         f"{limit / 2**30:.3g} GiB of memory")
    if nbytes >= _LIMIT_CHECK_BYTES:
        room = process_memory_headroom()
        if room is not None and nbytes + _WORKING_MARGIN_BYTES > room:
            raise ValueError(f"{name}={shape!r} needs {_gib(nbytes)} GiB, more than the "
                             f"{max(room, 0) / 2**30:.3g} GiB this process may still allocate "
                             "(its RLIMIT_DATA/RLIMIT_AS memory limit)")


def check_size(size, name: str = "size", *, itemsize: int | None = None):
    """``None`` or a shape: an int or a sequence of ints, each >= 0, as a tuple.

    Sizes must be integers (``operator.index``): 2.7 or (2, 1.5) raise ``TypeError`` instead of
    being truncated; bools and strings are refused too.  With ``itemsize``, a shape whose output
    would not fit in memory is refused (:func:`check_allocation`).
    """
    if size is None:
        return None
    shape = _check_shape(size, name)
    if itemsize is not None:
        check_allocation(shape, itemsize, name)
    return shape


def _check_shape(size, name: str) -> tuple:

    def one(s):
        if isinstance(s, (bool, np.bool_, str, bytes)):
            raise TypeError(f"{name} must be None, an int or a tuple of ints, got {size!r}")
        try:
            v = operator.index(s)
        except TypeError:
            raise TypeError(f"{name} must be None, an int or a tuple of ints, got {size!r}") from None
        if v < 0:
            raise ValueError(f"{name} must be non-negative, got {size!r}")
        return v

    if isinstance(size, (str, bytes)):
        raise TypeError(f"{name} must be None, an int or a tuple of ints, got {size!r}")
    if not isinstance(size, (list, tuple)) and np.ndim(size) == 0:
        return (one(size),)
    try:
        return tuple(one(s) for s in size)
    except TypeError as exc:
        if "must be None" in str(exc):
            raise
        raise TypeError(f"{name} must be None, an int or a tuple of ints, got {size!r}") from None


# ----------------------------------------------------------------------------- validate_params


class Constraint:
    """A declarative check of one public parameter (see :func:`validate_params`).

    ``spec(name)`` returns ``(check, kwargs)``: ``check(value, **kwargs)`` checks a value of
    the parameter ``name`` and returns it normalised (``TypeError``/``ValueError`` naming
    ``name`` otherwise).  The constraints below call one ``check_*`` function each, so each
    message has one home; the wrapper calls it directly (no intermediate frame).
    """

    def spec(self, name: str) -> tuple[Callable, dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Positive(Constraint):
    """> 0 and finite (:func:`check_positive`): a float, or a float64 array if ``allow_array``."""

    def __init__(self, *, allow_array: bool = True, allow_inf: bool = False) -> None:
        self.allow_array, self.allow_inf = allow_array, allow_inf

    def spec(self, name):
        return check_positive, dict(name=name, allow_array=self.allow_array, allow_inf=self.allow_inf)


class Epsilon(Positive):
    """A privacy parameter epsilon: > 0 and finite (:func:`check_epsilon`)."""

    def __init__(self, *, allow_array: bool = True) -> None:
        super().__init__(allow_array=allow_array)

    def spec(self, name):
        return check_epsilon, dict(allow_array=self.allow_array, name=name)


class Delta(Constraint):
    """A privacy parameter delta in [0, 1), or (0, 1) without ``allow_zero`` (:func:`check_delta`)."""

    def __init__(self, *, allow_zero: bool = True, allow_array: bool = False) -> None:
        self.allow_zero, self.allow_array = allow_zero, allow_array

    def spec(self, name):
        return check_delta, dict(allow_zero=self.allow_zero, allow_array=self.allow_array, name=name)


class NonNegative(Constraint):
    """A real scalar >= 0, finite unless ``allow_inf`` (:func:`check_nonnegative`)."""

    def __init__(self, *, allow_inf: bool = False) -> None:
        self.allow_inf = allow_inf

    def spec(self, name):
        return check_nonnegative, dict(name=name, allow_inf=self.allow_inf)


class Int(Constraint):
    """An integer >= ``lo`` (:func:`check_int`)."""

    def __init__(self, lo: int = 1, *, integral_reals: bool = False) -> None:
        self.lo, self.integral_reals = lo, integral_reals

    def spec(self, name):
        return check_int, dict(name=name, lo=self.lo, integral_reals=self.integral_reals)


class Real(Constraint):
    """A real scalar as a float (:func:`check_real`)."""

    def __init__(self, *, allow_nan: bool = True) -> None:
        self.allow_nan = allow_nan

    def spec(self, name):
        return check_real, dict(name=name, allow_nan=self.allow_nan)


class Bool(Constraint):
    """A bool (:func:`check_bool`)."""

    def spec(self, name):
        return check_bool, dict(name=name)


class Options(Constraint):
    """One of the given strings (:func:`check_option`)."""

    def __init__(self, *options: str) -> None:
        self.options = options

    def spec(self, name):
        return check_option, dict(name=name, options=self.options)


class Bounds(Constraint):
    """A pair (lower, upper) of finite reals, lower < upper (:func:`check_bounds`)."""

    def spec(self, name):
        return check_bounds, dict(name=name)


class Values(Constraint):
    """A finite real array, float32 kept (:func:`check_values`)."""

    def spec(self, name):
        return check_values, dict(name=name)


_F = TypeVar("_F", bound=Callable[..., Any])


def unchecked(wrapper: _F) -> _F:
    """The function under a :func:`validate_params` wrapper, for a caller whose arguments have
    passed the same constraints already (a mechanism calling its calibration with the checked
    ``epsilon``/``sensitivity``: the checks are not paid twice per call in a tight loop).  Bind
    it once, at import."""
    return wrapper.__wrapped__  # type: ignore[attr-defined,no-any-return]


def validate_params(**constraints: Constraint) -> Callable[[_F], _F]:
    """Decorator: check (and normalise) the named parameters of a public function on every call.

    ``@validate_params(sensitivity=Positive(), epsilon=Epsilon(), rng=RNG)`` checks each
    named argument (given or defaulted) with its :class:`Constraint`, in the order of the
    keywords, and calls the function with the checked values: ``epsilon`` arrives as a float
    (or a float64 array), ``rng`` as a ``numpy.random.Generator``.  Parameters not named are
    passed through untouched (the function checks what depends on several of them, and the
    data).  The checks run before the function's body, hence before any budget charge and
    any draw.

    Cost: the wrapper is generated with the function's own signature, so Python binds the
    arguments (no ``inspect.Signature.bind`` per call); a call costs one extra frame plus
    the checks themselves (about 0.1 us for a float through a ``check_*`` fast path).
    ``rng``'s constraint, :data:`dpfast.random.RNG`, lives with ``check_random_state``.

    The wrapper keeps the function's name, docstring and signature (``__wrapped__`` is the
    function) and has ``validate(*args, **kwargs)``: the checked arguments of a call as an
    ``inspect.BoundArguments`` (defaults applied), without calling the function (what
    :func:`dpfast.mechanisms.event_of` uses).  :func:`unchecked` gives the function itself, for
    callers whose arguments have passed the same constraints already.
    """
    def decorate(func: _F) -> _F:
        sig = inspect.signature(func)
        params = sig.parameters
        unknown = [n for n in constraints if n not in params]
        if unknown:
            raise TypeError(f"validate_params: {func.__qualname__} has no parameter {unknown[0]!r}")
        bad = [n for n, c in constraints.items() if not isinstance(c, Constraint)]
        if bad:
            raise TypeError(f"validate_params: the constraint of {bad[0]!r} is not a Constraint")
        specs = {n: c.spec(n) for n, c in constraints.items()}
        checks = {n: (lambda v, f=f, kw=kw: f(v, **kw)) for n, (f, kw) in specs.items()}  # for validate()
        ns: dict = {"__vp_f": func}
        head, call = [], []
        star_done = False
        n_posonly = 0
        for p in params.values():
            default = ""
            if p.default is not p.empty:
                ns["__vp_d_" + p.name] = p.default
                default = "=__vp_d_" + p.name
            if p.kind is p.VAR_POSITIONAL:
                head.append("*" + p.name)
                call.append("*" + p.name)
                star_done = True
            elif p.kind is p.VAR_KEYWORD:
                head.append("**" + p.name)
                call.append("**" + p.name)
            elif p.kind is p.KEYWORD_ONLY:
                if not star_done:
                    head.append("*")
                    star_done = True
                head.append(p.name + default)
                call.append(f"{p.name}={p.name}")
            else:
                head.append(p.name + default)
                call.append(p.name)
            if p.kind is p.POSITIONAL_ONLY:
                n_posonly = len(head)
        if n_posonly:
            head.insert(n_posonly, "/")
        body = []
        for n, (f, kw) in specs.items():
            ns["__vp_c_" + n] = f
            args = "".join(f", {k}=__vp_k_{n}_{k}" for k in kw)
            ns.update({f"__vp_k_{n}_{k}": v for k, v in kw.items()})
            body.append(f"    {n} = __vp_c_{n}({n}{args})")
        src = (f"def {func.__name__}({', '.join(head)}):\n" + "\n".join(body)
               + f"\n    return __vp_f({', '.join(call)})\n")
        exec(compile(src, f"<validate_params {func.__module__}.{func.__qualname__}>", "exec"), ns)
        wrapper = ns[func.__name__]
        wrapper.__module__ = func.__module__
        wrapper.__qualname__ = func.__qualname__
        wrapper.__doc__ = func.__doc__
        wrapper.__annotations__ = func.__annotations__
        wrapper.__dict__.update(func.__dict__)
        wrapper.__wrapped__ = func
        wrapper.__signature__ = sig

        def validate(*args, **kwargs) -> inspect.BoundArguments:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            for n, check in checks.items():
                bound.arguments[n] = check(bound.arguments[n])
            return bound

        wrapper.validate = validate
        wrapper.constraints = dict(constraints)
        return wrapper  # type: ignore[no-any-return]  # (a function with func's signature)

    return decorate
