"""Private array statistics with NumPy's signatures.

Neighbouring relation (all functions): **add/remove one row**, so the number of rows ``n`` is
private.  A *row* is one index along axis 0 of ``a`` (a 1-d array: one element); for
``histogramdd`` one sample (a row of the ``(N, D)`` sample).  ``axis`` may be ``None`` (all
elements) or ``0`` (one output entry per column): every output entry is computed from the rows,
so one row touches every entry and the release over all entries is calibrated for the whole
output (l1 sensitivity summed over the entries; the per-entry noise is that of the whole
release, never a per-entry epsilon).  Other axes would release one entry per row, whose number
is private: refused.

Bounds are public: every value is clamped to ``bounds = (lower, upper)`` (a missing bound is an
error).  With ``d`` elements per row and ``r = (upper - lower) / 2``:

* ``sum``: clamped sum, l1 sensitivity ``d * max(|lower|, |upper|)`` (Laplace, Dwork, McSherry,
  Nissim & Smith 2006).
* ``mean``: the centred ratio ``c + S / N`` with ``c`` the midpoint, ``S`` the noisy sum of
  ``x - c`` (l1 sensitivity ``d r``) and ``N`` the noisy count (sensitivity 1, times ``k``
  elements per entry), epsilon split equally; clamped to the bounds (post-processing).  This is
  the add/remove "noisy sum / noisy count" estimator (Dwork & Roth 2014, §3.3; Awan's notes
  §3); diffprivlib instead treats ``n`` as public (replace-one, sensitivity
  ``(upper-lower)/n``), which is not a guarantee for add/remove neighbours.
* ``var``/``std``: count, centred sum and the centred sum of squares shifted by ``r^2/2``
  (l1 sensitivity ``d r^2/2``), epsilon split in three; ``var = Q/N - (S/N)^2`` clamped to
  ``[0, r^2]`` (the largest variance on the bounds).
* ``nan*``: NaN elements contribute nothing; the counts become per-entry counts of non-NaN
  elements (l1 sensitivity ``d`` over the entries, instead of one count of rows of sensitivity
  1); the sum sensitivities are unchanged (a NaN only lowers a row's contribution).
* ``count_nonzero``: l1 sensitivity ``d``.
* ``quantile``/``percentile``/``median``: :func:`dpfast.mechanisms.private_quantile` (Smith
  2011) on each output column, at ``epsilon / d`` per column (a row moves ``d`` elements of the
  count in its utility, so ``d`` columns of one element each, or one column of ``d``
  elements, each cost ``epsilon / d`` per element); ``m`` levels split it further.
* ``histogram*``: public bins (edges, or ``bins`` with a ``range``); a row adds 1 to one bin, so
  the counts have l1 sensitivity 1: Laplace(1/epsilon) on every bin.  Counts are real (not
  rounded), ``density=True`` normalises the counts clipped at 0 (post-processing).

Exact sums: the sums behind ``sum``/``mean``/``var``/``std`` (and the nan forms) are computed
exactly on a fixed-point grid: each clamped (and centred) term ``t``, ``|t| <= B`` with ``B`` the
public per-element bound (``max(|lower|, |upper|)`` for ``sum``, ``r`` for the centred sums,
``r^2`` for the squares), becomes the integer ``round(t 2^50 / B)`` (monotone, never beyond the
bound: the sensitivities above hold for the grid values, and a value at the bound is exactly
the bound), the integers are added exactly and the total is rounded once, correctly, to a double
(:mod:`dpfast._fixed`).  The statistic is thus a function of the multiset of values alone: the
same bits for any thread count, memory layout, chunking or Dask partitioning.

Every function charges one event for its whole release (``dpfast.budget.charge``) after the
checks and before any draw.  The noise is Laplace, drawn for the whole release in one call of
:func:`dpfast.random.draw_into` (the native dispatch behind
:func:`dpfast.mechanisms.laplace_noise`; output ``i`` is a function of the stream's ``i``-th
word, so one draw of the concatenated noise equals the per-part draws in order); the scales are
checked as ``laplace_noise`` checks them, and the output allocated, before the charge.  The
Laplace noise is not floating-point safe (see :mod:`dpfast.mechanisms.continuous`).

Input types: an array's dtype is public schema, but the dtype NumPy infers from a list, or for
a nullable pandas column, depends on the values (``[1, 2]`` is int64, ``[1, 2, 2**70]`` object;
a ``boolean`` column is bool, object with one ``pd.NA``): a list is converted element by element,
a real number beyond a double saturated to the largest double (then clamped), a missing value
(None, ``pandas.NA``) read as NaN; a pandas object whose dtypes are all numeric or boolean is
read as floats with NaN for a missing value.  An object ndarray, and a pandas object with an
object, string, category or datetime column, are refused whatever their values (dtypes the
caller chose, public); see :func:`_object_reals`.  A list's element that is not a real number or
a bool (a string, bytes, a complex number, a date) is refused whatever the other elements
(:func:`_values`; ``count_nonzero`` too, which counts a string array's non-empty strings).

Non-finite data (NaN or inf; ``nan*``: inf) are found by the native pass itself, which runs
before the charge on in-memory data: the error (a fixed message, naming no record or value)
comes before any charge or draw.  Dask input is charged first and raises the same message after
the charge.
"""
from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, Optional, Tuple

import numpy as np

from dpfast import _fixed, _stats, budget as _budget
from dpfast._dask_utils import declared_blocks, frame_values, is_dask_collection, is_frame, sum_by_partitions
from dpfast._threads import default_threads
from dpfast._validation import Bounds, Epsilon, as_array, check_bounds, validate_params
from dpfast.accounting import Composed, ExponentialMechanism, Laplace, SelfComposed
from dpfast.mechanisms import private_quantile
from dpfast.random import RNG, allocate_output, draw_into

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["mean", "var", "std", "sum", "nanmean", "nanvar", "nanstd", "nansum", "count_nonzero",
           "quantile", "median", "percentile", "histogram", "histogram2d", "histogramdd"]


# ----------------------------------------------------------------------------- helpers
def _refuse_masked(a) -> None:
    """np.asarray drops a mask, so a masked array's hidden values would be released (clamped):
    refuse the type (public) rather than silently ignore what the user meant."""
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError("a must not be a masked array (its mask would be ignored); pass "
                        "a.filled(np.nan) to the nan* functions")


_BIG = float(np.finfo(np.float64).max)


def _real(v) -> float:
    """One element of an object array as a float64: a real number (a Python int beyond a double,
    a Fraction, a longdouble: saturated to the largest double, as :func:`_data` saturates a
    longdouble array), a missing value (None, ``pandas.NA``) as NaN; anything else TypeError."""
    if v is None or type(v).__name__ == "NAType":
        return math.nan
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if not isinstance(v, numbers.Real):
        raise TypeError("a must be an array of real numbers")
    w: Any = v  # (a Real: int, Fraction, numpy scalar; compared and tested as it is)
    try:
        f = float(w)
    except OverflowError:
        return _BIG if w > 0 else -_BIG
    if math.isinf(f):
        try:
            finite = bool(np.isfinite(w))
        except TypeError:
            finite = False
        if finite:
            return math.copysign(_BIG, f)
    return f


def _object_reals(a, x: np.ndarray) -> np.ndarray:
    """``x = np.asarray(a)`` of dtype object, as float64; TypeError for what is not real numbers.

    The dtype is public when the caller chose it: an object ndarray is refused, whatever its
    values, and so is a pandas object whose dtypes are not all numeric or boolean (object,
    string, category, datetime columns), while one whose dtypes all are (nullable ``Int64``,
    ``boolean``, mixed with float columns) is read as floats, a missing value as NaN -- NumPy
    makes a ``boolean`` column with one ``pd.NA`` an object array, and the complete column a
    bool one.  A list's dtype is inferred from its values (``[1, 2]`` is int64, ``[1, 2, 2**70]``
    object): its elements are converted one by one (:func:`_real`)."""
    if isinstance(a, np.ndarray):
        raise TypeError("a must be an array of real numbers")
    if type(a).__module__.split(".")[0] == "pandas" and hasattr(a, "to_numpy"):
        import pandas as pd

        dtypes = list(a.dtypes) if getattr(a, "ndim", 1) == 2 else [a.dtype]
        if not all((pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t))
                   and not isinstance(t, pd.CategoricalDtype) for t in dtypes):
            raise TypeError("a must be an array of real numbers")
        try:
            return a.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):  # (complex columns)
            raise TypeError("a must be an array of real numbers") from None
    return np.fromiter((_real(v) for v in x.ravel().tolist()), dtype=np.float64, count=x.size).reshape(x.shape)


def _pandas_category(a) -> bool:
    """A pandas object with a ``category`` column: NumPy reads one of numbers as its categories'
    dtype, which pandas infers from the values (``[0, 1]`` int64, ``[0, 2**70]`` object), so the
    declared dtype decides (refused), before any conversion."""
    if type(a).__module__.split(".")[0] != "pandas":
        return False
    import pandas as pd

    dtypes = list(a.dtypes) if getattr(a, "ndim", 1) == 2 and hasattr(a, "dtypes") else [getattr(a, "dtype", None)]
    return any(isinstance(t, pd.CategoricalDtype) for t in dtypes)


def _values(a) -> np.ndarray:
    """``np.asarray(a)`` where its dtype is the caller's (an array, a pandas object: public), or
    ``a``'s elements converted one by one (:func:`_object_reals`) where NumPy infers the dtype
    from the values: an object array, or anything without a dtype of its own (a list; a pandas
    object has its declared dtypes) that is not read as bools or real numbers.  NumPy writes every number of a list holding one string
    as text (``[0, "a"]`` is ``["0", "a"]``: ``count_nonzero`` counted the 0), and ``[0, "a",
    None]`` is an object array: one rule for the element, whatever the others."""
    if _pandas_category(a):
        raise TypeError("a must be an array of real numbers")
    x = as_array(a, "a")  # (a ragged list: refused without NumPy's detected shape, which is n)
    declared = hasattr(a, "dtype") or type(a).__module__.split(".")[0] == "pandas"  # (a DataFrame: dtypes)
    if x.dtype == object or (x.dtype.kind not in "biufm" and not declared):
        x = _object_reals(a, x)
    return x


def _data(a, allow_nan: bool, check: bool = True) -> np.ndarray:
    """``a`` as a C-order float64 array (Dask: a row-chunked dask Array).  ``check``: refuse
    non-finite values here (NaN too unless ``allow_nan``); False for the statistics whose native
    pass counts them itself (:func:`_finite`) before the charge, so that the data are read once."""
    if not check and type(a) is np.ndarray and a.dtype == np.float64 and a.ndim and a.flags.c_contiguous:
        return a  # the common case: what the general path below returns, unchanged
    if is_dask_collection(a):
        return _dask_data(a)
    if isinstance(a, (str, bytes)):
        raise TypeError("a must be an array of numbers")
    _refuse_masked(a)
    x = _values(a)  # (a list's dtype, or a nullable pandas column's, is inferred from the values)
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        raise TypeError("a must be an array of real numbers")
    if np.iscomplexobj(x):
        raise TypeError("a must be an array of real numbers")
    if x.ndim == 0:
        x = x.reshape(1)
    if x.dtype.kind == "f" and x.dtype.itemsize > 8:
        # a finite value beyond float64's range (longdouble) is data like any other: saturate it to
        # the largest double (the bounds clamp it further) instead of letting the cast make it inf,
        # which would refuse the call for one record's magnitude; inf and NaN stay what they are
        big = np.finfo(np.float64).max
        x = np.where(np.isfinite(x), np.clip(x, -big, big), x)
    # C order: NumPy's reductions sum in an order that depends on the layout; one layout makes
    # the release a function of the values alone (bit-identical for C, F and strided input)
    x = np.ascontiguousarray(x, dtype=np.float64)
    if not check:
        return x
    if allow_nan:
        if np.isinf(x).any():
            raise ValueError("a must not contain inf")
    elif not np.isfinite(x).all():
        raise ValueError("a must be finite (no NaN or inf; the nan* functions ignore NaN)")
    return x


def _axis(axis, ndim: int):
    if axis is None:
        return None
    if isinstance(axis, tuple):
        if len(axis) == 1:
            axis = axis[0]
        else:
            raise ValueError("axis must be None or 0: rows (axis 0) are the privacy unit")
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis must be None or an int, got {type(axis).__name__}")
    if int(axis) not in (0, -ndim):
        raise ValueError("axis must be None or 0: rows (axis 0) are the privacy unit, and any "
                         "other axis would release one entry per (private) row")
    return 0


def _shape(x: np.ndarray, axis, keepdims: bool):
    """(output shape, elements per row d, elements of a row per output entry k)."""
    d = math.prod(x.shape[1:])
    if axis is None:
        shape = (1,) * x.ndim if keepdims else ()
        return shape, d, d
    shape = (1,) + x.shape[1:] if keepdims else x.shape[1:]
    return shape, d, 1


def _reduce(v: np.ndarray, axis, keepdims: bool) -> np.ndarray:
    return np.sum(v, axis=axis, keepdims=keepdims)


def _out(v, dtype):
    v = np.asarray(v, dtype=np.float64 if dtype is None else dtype)
    return v[()] if v.ndim == 0 else v


def _check_dtype(dtype):
    if dtype is None:
        return None
    dt = np.dtype(dtype)
    if not np.issubdtype(dt, np.floating):
        raise TypeError(f"dtype must be a floating dtype (the release is real-valued), got {dt}")
    return dt


_MAX_SCALE = float(np.finfo(np.float64).max) / 40.0  # as dpfast.mechanisms.continuous refuses
_F64 = np.dtype(np.float64)
_NATIVE_FLOATS = (np.dtype(np.float32), _F64)  # what the native pass reads as it is


def _scales(*scales: float) -> None:
    """Refuse, before the charge, a noise scale the sampler would refuse after it."""
    for b in scales:
        if not (0.0 < b <= _MAX_SCALE):
            raise ValueError("the noise scale sensitivity / epsilon is not a positive finite double "
                             "(epsilon too small or too large for these bounds)")


class _Noise:
    """The Laplace noise of one release, planned before its charge: parts ``(scale, shape)``
    drawn after it, in order, by ONE native draw (:func:`dpfast.random.draw_into`, the dispatch
    of :func:`dpfast.mechanisms.laplace_noise`: output ``i`` is ``scale_i`` times a function of
    the stream's ``i``-th word, so the concatenated draw equals one ``laplace_noise(scale,
    shape)`` call per part, in order, and leaves the generator in the same state).  The plan
    checks the scales (:func:`_scales`) and allocates the output: nothing is refused after the
    charge."""

    __slots__ = ("parts", "out", "scale", "ones")

    def __init__(self, *parts) -> None:
        scales = [b for b, _ in parts]
        _scales(*scales)
        self.parts = parts
        sizes = [math.prod(shape) for _, shape in parts]
        self.ones = all(m == 1 for m in sizes)  # one value per part (axis=None, or one output entry)
        if self.ones:
            self.scale = np.array(scales, dtype=np.float64)
        else:
            self.scale = np.repeat(np.array(scales, dtype=np.float64), sizes)
        self.out = allocate_output(self.scale.shape, _F64)

    def draw(self, gen) -> list:
        """The noise of every part: a float for shape (), else an array of that shape."""
        draw_into(gen, "laplace", self.out, None, self.scale)
        if self.ones:
            return [v if shape == () else np.array(v).reshape(shape)
                    for v, (_, shape) in zip(self.out.tolist(), self.parts)]
        res, at = [], 0
        for _, shape in self.parts:
            if shape == ():
                res.append(float(self.out[at]))
                at += 1
            else:
                m = math.prod(shape)
                res.append(self.out[at:at + m].reshape(shape))
                at += m
        return res


def _midpoint(lo, hi):
    """``(lo + hi) / 2`` without overflow: bounds near the largest double (both of one sign) would
    make ``lo + hi`` inf and every released value inf (after the charge); the same double as
    ``0.5 * (lo + hi)`` whenever that is finite, so ordinary bounds keep their bits."""
    with np.errstate(over="ignore"):
        s = np.add(lo, hi)
    return np.where(np.isfinite(s), 0.5 * s, 0.5 * np.asarray(lo) + 0.5 * np.asarray(hi)) \
        if np.ndim(s) else (0.5 * float(s) if math.isfinite(s) else 0.5 * lo + 0.5 * hi)


def _clip(v: float, lo: float, hi: float) -> float:
    """``numpy.clip`` on a float (the same double: its max returns the bound on ties)."""
    v = v if v > lo else lo
    return v if v < hi else hi


def _check_keepdims(keepdims) -> bool:
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims must be a bool, got {type(keepdims).__name__}")
    return bool(keepdims)


def _moments(a, epsilon, bounds, axis, keepdims, gen, budget, *, nan: bool, order: int, name: str,
             ddof: float = 0.0):
    """The count/centred-sum(/centred-square-sum) release shared by mean and var."""
    keepdims = _check_keepdims(keepdims)
    lo, hi = bounds
    x = _data(a, nan, check=False)  # the native pass refuses non-finite values (before the charge)
    axis = _axis(axis, x.ndim)
    shape, d, k = _shape(x, axis, keepdims)
    c, r = _midpoint(lo, hi), 0.5 * (hi - lo)
    eps_part = epsilon / (order + 1)
    # calibration: l1 sensitivities over the whole output (one row touches every entry)
    count_sens = float(d) if nan else 1.0
    sens = (count_sens, d * r) if order == 1 else (count_sens, d * r, d * r * r / 2)
    scales = [t / eps_part for t in sens]
    noise = _Noise((scales[0], shape if nan else ()), *[(b, shape) for b in scales[1:]])

    B1 = _fixed.check_bound(r)
    B2 = _fixed.check_bound(r * r) if order == 2 else None

    def event():
        return Composed(tuple(Laplace(scale=b, sensitivity=t) for b, t in zip(scales, sens)))

    exact = _release_statistic(x, budget, event, name, _moment_sums, bool(nan),
                               args=(lo, hi, axis, keepdims, nan, order), out_dtype=object)
    rows, counts, s, q = _moment_floats(exact, B1, B2, shape)
    draws = noise.draw(gen)
    if shape == ():  # one output entry: the same double arithmetic on floats
        n_hat = float(counts) + draws[0] if counts is not None else k * (rows + draws[0])
        n_hat = n_hat if n_hat > 1.0 else 1.0
        m1 = _clip((float(s) + draws[1]) / n_hat, -r, r)
        if order == 1:
            return m1 + c, shape
        m2 = (float(q) + draws[2] + n_hat * r * r / 2) / n_hat  # the centred second moment
        v = _clip(m2 - m1 * m1, 0.0, r * r)
        if ddof:
            den = n_hat - ddof
            v = _clip(v * n_hat / (den if den > 1.0 else 1.0), 0.0, r * r)
        return v, shape
    n_hat = counts + draws[0] if counts is not None else k * (rows + draws[0])
    n_hat = np.maximum(n_hat, 1.0)
    m1 = np.clip((s + draws[1]) / n_hat, -r, r)
    if order == 1:
        return m1 + c, shape
    assert q is not None  # order 2
    m2 = (q + draws[2] + n_hat * r * r / 2) / n_hat  # the centred second moment
    v = np.clip(m2 - m1 * m1, 0.0, r * r)
    if ddof:
        v = np.clip(v * n_hat / np.maximum(n_hat - ddof, 1.0), 0.0, r * r)
    return v, shape


def _moment_sums(x: np.ndarray, lo: float, hi: float, axis, keepdims: bool, nan: bool, order: int):
    """The exact statistics of mean/var/std and their nan forms on rows x (float64, C order), as
    integers (exact: a Dask release adds the partitions' values in any order and gets the same
    numbers): ``(rows, counts, T1, T2)`` -- the number of rows, the per-entry non-NaN counts (nan
    forms, else None), the fixed-point sums (:mod:`dpfast._fixed`) of ``y = clip(x) - c`` (capped
    to [-r, r] after rounding: the sensitivity assumes |y| <= r; grid bound ``r``) and (order 2)
    of ``y^2 - r^2/2`` (grid bound ``r^2``: ``sum q(y^2) - 2**49 m``, each term in [-r^2/2,
    r^2/2]; else None), flat per output entry (object arrays of Python ints).  One native pass
    (:func:`_column_sums`); :func:`_moment_floats` rounds them once."""
    c, r = _midpoint(lo, hi), 0.5 * (hi - lo)
    t1, t2, cnt = _column_sums(x, axis, lo, hi, c, r, r, nan, order)
    counts = None if cnt is None else cnt.astype(object)
    q = None
    if order == 2:
        m = counts if counts is not None else (x.shape[0] if axis == 0 else x.size)
        q = _fixed.centred_squares(t2, m)
    return x.shape[0], counts, t1, q


def _moment_floats(exact, B1: float, B2, shape):
    """The released statistics from :func:`_moment_sums`' integers: ``(rows, counts, s, q)`` as
    floats, each rounded once (:func:`dpfast._fixed.to_float`) and shaped like the output."""
    rows, counts, t1, t2 = exact
    counts = None if counts is None else np.asarray(counts).astype(np.float64).reshape(shape)
    s = _fixed.to_float(t1, B1).reshape(shape)
    q = None if t2 is None else _fixed.to_float(t2, B2).reshape(shape)
    return float(rows), counts, s, q


def _finite(bad: int, allow_nan: bool) -> None:
    """Raise when the native pass saw non-finite elements."""
    if bad:
        if allow_nan:
            raise ValueError("a must not contain inf")
        raise ValueError("a must be finite (no NaN or inf; the nan* functions ignore NaN)")


def _column_sums(x: np.ndarray, axis, lo: float, hi: float, c: float, cap: float, B: float, nan: bool, order: int):
    """One native pass (``dpfast._stats.moments``): per output entry, the exact fixed-point sums
    (:mod:`dpfast._fixed`, grid bound ``B``, ``B*B`` for the squares) of ``y = clip(x, lo, hi) - c``
    (capped to ``[-cap, cap]``; ``|y| <= B``), of ``y^2`` (order 2) and, in the nan forms, the
    number of non-NaN elements (NaN elements contribute nothing).  Returns flat per-entry
    arrays ``(T1, T2 or None, counts or None)``, T as object arrays of Python ints."""
    x = np.ascontiguousarray(x) if x.dtype in _NATIVE_FLOATS else np.ascontiguousarray(x, np.float64)
    cols = x.reshape(-1, 1) if axis is None else x.reshape(x.shape[0], math.prod(x.shape[1:]))
    s1, s2, cnt, bad = _stats.moments(cols, float(lo), float(hi), float(c), float(cap), float(B), bool(nan),
                                      int(order), default_threads())
    _finite(bad, nan)
    return _fixed.ints(s1), None if s2 is None else _fixed.ints(s2), cnt


def _check_ddof(ddof) -> float:
    if isinstance(ddof, (bool, np.bool_)) or not isinstance(ddof, numbers.Real):
        raise TypeError(f"ddof must be a number, got {type(ddof).__name__}")
    if not 0 <= ddof < 10**6:  # type: ignore[operator]  # (exact for any Real, no float())
        raise ValueError(f"ddof must be a non-negative number below 10**6, got {ddof!r}")
    return float(ddof)


_COMMON = dict(epsilon=Epsilon(allow_array=False), bounds=Bounds(), rng=RNG)


# ----------------------------------------------------------------------------- sums
def _sum(a, epsilon, bounds, axis, dtype, keepdims, gen, budget, nan):
    keepdims = _check_keepdims(keepdims)
    dtype = _check_dtype(dtype)
    lo, hi = bounds
    x = _data(a, nan, check=False)  # the native pass refuses non-finite values (before the charge)
    axis = _axis(axis, x.ndim)
    shape, d, _ = _shape(x, axis, keepdims)
    B = _fixed.check_bound(max(abs(lo), abs(hi)))
    sens = d * B
    noise = _Noise((sens / epsilon, shape))
    t = _release_statistic(x, budget, lambda: Laplace(scale=sens / epsilon, sensitivity=sens),
                           "nansum" if nan else "sum", _clipped_sum, nan, args=(lo, hi, axis, nan), out_dtype=object)
    s = _fixed.to_float(t, B).reshape(shape)
    return _out(s + noise.draw(gen)[0], dtype)


def _clipped_sum(x: np.ndarray, lo: float, hi: float, axis, nan: bool) -> np.ndarray:
    """The exact statistic of sum/nansum: the fixed-point sum (:mod:`dpfast._fixed`, grid bound
    ``max(|lo|, |hi|)``, Python ints) over ``axis`` of x clamped to [lo, hi] (NaN as 0), flat per
    output entry; one native pass (:func:`_column_sums`)."""
    return _column_sums(x, axis, lo, hi, 0.0, np.inf, max(abs(lo), abs(hi)), nan, 1)[0]


@validate_params(**_COMMON)
def sum(a, epsilon: float, bounds: Tuple[float, float], axis=None, dtype=None, keepdims: bool = False,
        rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.sum``: the clamped sum plus Laplace noise; epsilon-DP (add/remove one row).

    l1 sensitivity ``d * max(|lower|, |upper|)`` for ``d`` elements per row, over the whole
    output (Dwork, McSherry, Nissim & Smith 2006, Laplace mechanism).  ``axis``: None or 0.
    Event: ``Laplace(scale=sensitivity/epsilon, sensitivity)``.
    """
    return _sum(a, epsilon, bounds, axis, dtype, keepdims, rng, budget, False)


@validate_params(**_COMMON)
def nansum(a, epsilon: float, bounds: Tuple[float, float], axis=None, dtype=None, keepdims: bool = False,
           rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.nansum``: as :func:`sum`, NaN elements counting as 0 (same sensitivity)."""
    return _sum(a, epsilon, bounds, axis, dtype, keepdims, rng, budget, True)


@validate_params(**_COMMON)
def mean(a, epsilon: float, bounds: Tuple[float, float], axis=None, dtype=None, keepdims: bool = False,
         rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.mean``: ``c + S/N``, noisy centred sum over noisy count; epsilon-DP.

    Add/remove one row (``n`` private): ``S`` = sum of ``clip(x) - c`` (``c`` the midpoint of
    ``bounds``, l1 sensitivity ``d (upper-lower)/2``) and ``N`` = the noisy number of rows
    (sensitivity 1), each with Laplace noise at ``epsilon/2`` (Dwork & Roth 2014, Thm 3.6 and
    basic composition).  ``N`` is floored at 1 and the result clamped to ``bounds``.  Event:
    ``Composed((Laplace count, Laplace sum))``.
    """
    dtype = _check_dtype(dtype)
    m, _ = _moments(a, epsilon, bounds, axis, keepdims, rng, budget, nan=False, order=1, name="mean")
    return _out(m, dtype)


@validate_params(**_COMMON)
def nanmean(a, epsilon: float, bounds: Tuple[float, float], axis=None, dtype=None, keepdims: bool = False,
            rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.nanmean``: as :func:`mean` over the non-NaN elements; the count becomes
    per-entry non-NaN counts (l1 sensitivity ``d`` over the entries)."""
    dtype = _check_dtype(dtype)
    m, _ = _moments(a, epsilon, bounds, axis, keepdims, rng, budget, nan=True, order=1, name="nanmean")
    return _out(m, dtype)


@validate_params(**_COMMON)
def var(a, epsilon: float, bounds: Tuple[float, float], axis=None, dtype=None, ddof=0,
        keepdims: bool = False, rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.var``; epsilon-DP (add/remove one row).

    Three Laplace releases at ``epsilon/3`` each: the count (sensitivity 1), the centred sum
    (``d r``) and the centred sum of squares shifted by ``r^2/2`` (``d r^2/2``), ``r`` the
    half-width of ``bounds``; ``var = Q/N - (S/N)^2`` clamped to ``[0, r^2]``.  ``ddof``
    rescales by ``N/(N - ddof)`` (post-processing).
    """
    dtype = _check_dtype(dtype)
    ddof = _check_ddof(ddof)
    v, _ = _moments(a, epsilon, bounds, axis, keepdims, rng, budget, nan=False, order=2, name="var",
                    ddof=ddof)
    return _out(v, dtype)


@validate_params(**_COMMON)
def nanvar(a, epsilon: float, bounds: Tuple[float, float], axis=None, dtype=None, ddof=0,
           keepdims: bool = False, rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.nanvar``: :func:`var` over the non-NaN elements (per-entry counts)."""
    dtype = _check_dtype(dtype)
    ddof = _check_ddof(ddof)
    v, _ = _moments(a, epsilon, bounds, axis, keepdims, rng, budget, nan=True, order=2, name="nanvar",
                    ddof=ddof)
    return _out(v, dtype)


@validate_params(**_COMMON)
def std(a, epsilon: float, bounds: Tuple[float, float], axis=None, dtype=None, ddof=0,
        keepdims: bool = False, rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.std``: the square root of :func:`var` (post-processing); epsilon-DP."""
    dtype = _check_dtype(dtype)
    ddof = _check_ddof(ddof)
    v, _ = _moments(a, epsilon, bounds, axis, keepdims, rng, budget, nan=False, order=2, name="std",
                    ddof=ddof)
    return _out(np.sqrt(v), dtype)


@validate_params(**_COMMON)
def nanstd(a, epsilon: float, bounds: Tuple[float, float], axis=None, dtype=None, ddof=0,
           keepdims: bool = False, rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.nanstd``: the square root of :func:`nanvar`."""
    dtype = _check_dtype(dtype)
    ddof = _check_ddof(ddof)
    v, _ = _moments(a, epsilon, bounds, axis, keepdims, rng, budget, nan=True, order=2, name="nanstd",
                    ddof=ddof)
    return _out(np.sqrt(v), dtype)


@validate_params(epsilon=Epsilon(allow_array=False), rng=RNG)
def count_nonzero(a, epsilon: float, axis=None, *, keepdims: bool = False, rng=None,
                  budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.count_nonzero``: counts plus Laplace(d/epsilon); epsilon-DP.

    A row changes each of the output entries by at most its number of elements in it; l1
    sensitivity ``d`` (elements per row) over the whole output.  Event: ``Laplace``.
    """
    keepdims = _check_keepdims(keepdims)
    _refuse_masked(a)
    try:  # (a list: its elements one by one, as _data reads them)
        x = _dask_data(a, numeric=False) if is_dask_collection(a) else _values(a)
    except TypeError:
        raise TypeError("a must be an array of numbers or bools") from None
    if x.ndim == 0:
        x = x.reshape(1)
    axis = _axis(axis, x.ndim)
    shape, d, _ = _shape(x, axis, keepdims)
    noise = _Noise((d / epsilon, shape))
    c = _release_statistic(x, budget, lambda: Laplace(scale=d / epsilon, sensitivity=float(d)), "count_nonzero",
                           _nonzero_counts, None, args=(axis, keepdims))
    return _out(c + noise.draw(rng)[0], None)


def _nonzero_counts(x: np.ndarray, axis, keepdims: bool) -> np.ndarray:
    """The exact statistic of count_nonzero: the number of non-zero elements over ``axis`` (NumPy's
    integer count_nonzero: exact, so any order gives the same numbers)."""
    return np.asarray(np.count_nonzero(x, axis=axis, keepdims=keepdims), dtype=np.float64)


def _check_row_size(d: int) -> None:
    """Refuse rows of no element (``d = 0``, a public shape fact: the same refusal for any
    number of rows), before the charge; the exponential mechanism's epsilon / d needs d >= 1."""
    if d == 0:
        raise ValueError("a has no elements per row (a.shape[1:] has a 0): nothing to release")


def _levels(q, scale: float) -> np.ndarray:
    if isinstance(q, (str, bytes)):
        raise TypeError("q must be a number or an array of numbers")
    qa = as_array(q, "q", np.float64) / scale  # (a number beyond a double: ValueError)
    if qa.size == 0 or not np.all((qa >= 0) & (qa <= 1)):
        raise ValueError("quantile levels must be in [0, 1] (percentiles in [0, 100])")
    return qa


def _quantile(a, qa, epsilon, bounds, axis, keepdims, gen, budget, label):
    if is_dask_collection(a):
        raise TypeError(f"{label} does not take Dask input: the exponential mechanism ranks every value, which "
                        "is not a sum over partitions (the statistics and histograms of dpfast.tools are); "
                        "a private histogram on public bins gives approximate quantiles in one pass")
    keepdims = _check_keepdims(keepdims)
    x = _data(a, False)
    axis = _axis(axis, x.ndim)
    _, d, _ = _shape(x, axis, keepdims)
    _check_row_size(d)
    m = qa.size
    if axis is None:
        cols = [x.ravel()]
        per = epsilon / d  # d elements of one row in one column: the utility moves by <= d
    else:
        # d (public), never -1: NumPy cannot infer -1 from 0 rows, which refused n = 0 only
        flat = x.reshape(x.shape[0], d)
        cols = [flat[:, j] for j in range(flat.shape[1])]
        per = epsilon / d  # d columns, one element each: basic composition
    lo, hi = bounds
    if not np.isfinite(hi - lo):
        raise ValueError(f"bounds must have a finite width upper - lower, got {bounds!r}")
    if not per > 0.0:
        raise ValueError("epsilon / d underflows to 0: epsilon is too small")
    # each column's private_quantile is (per)-DP per element, i.e. per * d = epsilon/len(cols) per row
    event = SelfComposed(ExponentialMechanism(epsilon / (m * len(cols))), m * len(cols))
    _budget.charge(budget, event, label)
    with _budget.detached():
        res = [np.asarray(private_quantile(col, qa.ravel(), per, bounds, gen)) for col in cols]
    out = np.stack(res, axis=-1)  # (m, columns)
    out = out.reshape(qa.shape + (() if axis is None else x.shape[1:]))
    if keepdims:
        out = np.expand_dims(out, tuple(range(qa.ndim, qa.ndim + x.ndim))) if axis is None \
            else np.expand_dims(out, qa.ndim)
    return _out(out, None)


@validate_params(**_COMMON)
def quantile(a, q, epsilon: float, bounds: Tuple[float, float], axis=None, keepdims: bool = False,
             rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.quantile`` by the exponential mechanism (Smith 2011;
    :func:`dpfast.mechanisms.private_quantile`); epsilon-DP for the whole output (add/remove).

    ``m`` levels and ``c`` output columns: ``m c`` draws of ``ExponentialMechanism(epsilon/(m c))``
    per row (the utility has sensitivity 1 per element of a row; ``axis=None`` gathers the
    ``d`` elements of a row in one column, costing ``d`` times its per-element epsilon).
    """
    return _quantile(a, _levels(q, 1.0), epsilon, bounds, axis, keepdims, rng, budget, "quantile")


@validate_params(**_COMMON)
def percentile(a, q, epsilon: float, bounds: Tuple[float, float], axis=None, keepdims: bool = False,
               rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.percentile``: :func:`quantile` at ``q / 100``."""
    return _quantile(a, _levels(q, 100.0), epsilon, bounds, axis, keepdims, rng, budget, "percentile")


@validate_params(**_COMMON)
def median(a, epsilon: float, bounds: Tuple[float, float], axis=None, keepdims: bool = False,
           rng=None, *, budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.median``: :func:`quantile` at 0.5."""
    return _quantile(a, np.array(0.5), epsilon, bounds, axis, keepdims, rng, budget, "median")


# ----------------------------------------------------------------------------- histograms
_MAX_BINS = 1 << 26  # 64 Mi cells (512 MiB of float64 counts): refused before any allocation


def _edges(bins, range_, k: int) -> list:
    """Public bin edges for k dimensions; ``range`` is required with integer bins."""
    if isinstance(bins, (str, bytes)):
        raise ValueError("bins must be an int, a sequence of edges, or a sequence of those "
                         "(data-dependent bin rules would read the data)")
    if isinstance(bins, numbers.Integral) and not isinstance(bins, (bool, np.bool_)):
        bins = [int(bins)] * k
    elif k == 1 and np.ndim(bins) == 1:
        bins = [bins]
    try:
        bins = list(bins)
    except TypeError:
        raise TypeError("bins must be an int, a sequence of edges, or a sequence of those") from None
    if len(bins) != k:
        raise ValueError(f"bins must describe {k} dimension(s)")
    if range_ is not None:
        if k == 1 and np.ndim(range_) == 1:
            range_ = [range_]
        try:
            range_ = list(range_)
        except TypeError:
            raise TypeError("range must be a (lower, upper) pair, or one pair (or None) per dimension") from None
        if len(range_) != k:
            raise ValueError(f"range must give one (lower, upper) pair (or None) per dimension ({k})")
    out = []
    total = 1
    for j, b in enumerate(bins):
        if isinstance(b, numbers.Integral) and not isinstance(b, (bool, np.bool_)):
            if not 1 <= int(b) <= _MAX_BINS:
                raise ValueError(f"bins must be between 1 and {_MAX_BINS}")
            if range_ is None or range_[j] is None:
                raise ValueError("integer bins need a public range=(lower, upper): the range "
                                 "is never read off the data")
            lo, hi = check_bounds(range_[j], "range")
            with np.errstate(over="ignore", invalid="ignore"):
                e = np.linspace(lo, hi, int(b) + 1)
            # public, so refused here, before any charge: a range too narrow for its bins (equal
            # edges) or too wide for a double (hi - lo overflows: inf/NaN edges)
            if not (np.all(np.isfinite(e)) and np.all(np.diff(e) > 0)):
                raise ValueError(f"range {(lo, hi)!r} with {int(b)} bins does not give finite, "
                                 "strictly increasing bin edges (too narrow or too wide for doubles)")
            out.append(e)
        else:
            e = as_array(b, "bins", np.float64)
            if e.ndim != 1 or e.size < 2 or not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
                raise ValueError("bin edges must be a finite, strictly increasing 1-d sequence")
            out.append(e)
        total *= out[-1].size - 1
        if total > _MAX_BINS:
            raise ValueError(f"the histogram would have more than {_MAX_BINS} bins")
    return out


def _hist_counts(sample: np.ndarray, edges, bins=None, range_=None) -> np.ndarray:
    """The exact statistic of the histograms: the counts (float64) of the rows of the (N, D)
    ``sample`` in the public bins ``edges`` (a sum over rows: a Dask release adds the partitions').
    Native integer counts (``dpfast._stats.histogram``: NumPy's bins, the last one closed; a first
    guess by arithmetic for equally spaced edges, corrected on the edges)."""
    uniform = [bool(np.allclose(np.diff(e), (e[-1] - e[0]) / (e.size - 1), rtol=1e-9, atol=0.0)) for e in edges]
    icounts, bad = _stats.histogram(np.asarray(sample, dtype=np.float64), list(edges), uniform, default_threads())
    _finite(bad, False)
    return icounts.astype(np.float64)


def _hist(sample, edges, epsilon, density, gen, budget, label, bins=None, range_=None):
    noise = _Noise((1.0 / epsilon, tuple(e.size - 1 for e in edges)))
    counts = _release_statistic(sample, budget, lambda: Laplace(scale=1.0 / epsilon, sensitivity=1.0), label,
                                _hist_counts, False, args=(edges, bins, range_))
    noisy = counts + noise.draw(gen)[0]
    if density:
        pos = np.maximum(noisy, 0.0)
        total = pos.sum()
        widths = np.ones(())
        for j, e in enumerate(edges):
            shp = [1] * len(edges)
            shp[j] = -1
            widths = widths * np.diff(e).reshape(shp)
        noisy = pos / widths / total if total > 0 else np.zeros_like(pos)
    return noisy


@validate_params(epsilon=Epsilon(allow_array=False), rng=RNG)
def histogram(a, epsilon: float, bins=10, range=None, density: bool = False, rng=None, *,
              budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.histogram``: every bin count plus Laplace(1/epsilon); epsilon-DP.

    Each element of ``a`` is a row (add/remove): it adds 1 to at most one bin, so the counts
    have l1 sensitivity 1 (Dwork, McSherry, Nissim & Smith 2006, §3; Dwork & Roth 2014, Ex.
    3.2).  Bins are public: edges, or ``bins`` with ``range`` (required).  Values outside the
    edges are dropped as NumPy does.  Returns ``(counts, edges)`` with real counts.
    """
    x = _data(a, False, check=False)  # (the native pass checks the values)
    edges = _edges(bins, range, 1)
    h = _hist(_column(x), edges, epsilon, bool(density), rng, budget, "histogram", bins, range)
    return h, edges[0]


@validate_params(epsilon=Epsilon(allow_array=False), rng=RNG)
def histogram2d(x, y, epsilon: float, bins=10, range=None, density: bool = False, rng=None, *,
                budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.histogram2d``: the 2-d counts plus Laplace(1/epsilon); epsilon-DP
    (a row ``(x_i, y_i)`` lands in at most one bin).  Returns ``(H, xedges, yedges)``."""
    xa, ya = _data(x, False, check=False).ravel(), _data(y, False, check=False).ravel()
    if is_dask_collection(xa) or is_dask_collection(ya):
        xa, ya = _dask_pair(xa, ya)
    elif xa.shape != ya.shape:
        raise ValueError("x and y must have the same length")
    edges = _edges(bins, range, 2)
    h = _hist(_stack(xa, ya), edges, epsilon, bool(density), rng, budget, "histogram2d")
    return h, edges[0], edges[1]


@validate_params(epsilon=Epsilon(allow_array=False), rng=RNG)
def histogramdd(sample, epsilon: float, bins=10, range=None, density: bool = False, rng=None, *,
                budget: Optional["PrivacyBudget"] = None):
    """Private ``numpy.histogramdd``: ``sample`` of shape ``(N, D)``, one row per point; the
    counts plus Laplace(1/epsilon), epsilon-DP.  Returns ``(H, edges)``."""
    s = _data(sample, False, check=False)
    if s.ndim == 1:
        s = _column(s)
    if s.ndim != 2:
        raise ValueError("sample must be an (N, D) array")
    edges = _edges(bins, range, s.shape[1])
    h = _hist(s, edges, epsilon, bool(density), rng, budget, "histogramdd")
    return h, edges


# ----------------------------------------------------------------------------- Dask input
# Every function above except the quantiles takes a Dask Array (or DataFrame/Series: their
# values) for its data.  The public checks (dtype, shape beyond the rows, bins, bounds, epsilon)
# read metadata only; the charge comes next; then ONE pass in which every partition (a block of
# rows; the other axes are rechunked to one chunk, lazily) returns the same exact statistic as
# the in-memory code (_moment_sums, _clipped_sum, _nonzero_counts, _hist_counts), the partials
# are added on the client, and the noise is drawn on the client.  The sums of mean/var/std/sum
# and their nan forms are exact integers on a fixed-point grid (dpfast._fixed), rounded once on
# the client; the histograms and counts are integers: so the release is BIT-IDENTICAL to the
# in-memory one for the same data and rng, for every partitioning (a partitioning chosen from
# the data, e.g. by set_index/shuffle divisions, cannot move a bit of it).  NaN or inf found in
# the pass raise ValueError after the charge, naming no row or value.

def _dask_data(a, numeric: bool = True):
    """A Dask collection as a dask Array chunked by rows only (public checks on metadata)."""
    if is_frame(a):  # (by the declared dtypes: nullable columns as float64, NaN for a missing value)
        a = frame_values(a, "a", message="a must be an array of real numbers" if numeric
                         else "a must be an array of numbers or bools")
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError("a must be an array of real numbers" if numeric else "a must be an array of numbers or bools")
    a = declared_blocks(a, "a")  # (a block of another dtype than the array's: a fixed message)
    if any(np.isnan(c) for c in a.chunks[0]):  # a frame's partitions: their lengths (not their values)
        a = a.compute_chunk_sizes()
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim > 1 and any(len(c) != 1 for c in a.chunks[1:]):
        a = a.rechunk({j: -1 for j in range(1, a.ndim)})
    return a.astype(np.float64) if numeric else a


def _dask_pair(xa, ya):
    """histogram2d's x and y (either Dask) as two 1-d dask Arrays with the same chunks."""
    import dask.array as da

    if not is_dask_collection(xa):
        xa, ya = ya, xa
        swap = True
    else:
        swap = False
    if not is_dask_collection(ya):
        if np.shape(ya) != xa.shape:
            raise ValueError("x and y must have the same length")
        ya = da.from_array(np.asarray(ya), chunks=xa.chunks)
    elif ya.shape != xa.shape and not (np.isnan(ya.shape[0]) or np.isnan(xa.shape[0])):
        raise ValueError("x and y must have the same length")
    elif ya.chunks != xa.chunks:
        ya = ya.rechunk(xa.chunks)
    return (ya, xa) if swap else (xa, ya)


def _block_column(b: np.ndarray) -> np.ndarray:
    return b.reshape(-1, 1)


def _column(x):
    """Every element of ``x`` as one column ``(N, 1)``, in C order.  A Dask array (chunked by rows
    only, :func:`_dask_data`) block by block: Dask's own reshape of a row-chunked array of one row
    split with empty chunks (chunks ``(1, 0)``: a filter that empties a partition) builds a graph
    with a missing key, and its ravel of ``(n, d)`` chunked ``(1, 0, 2)`` fails at compute -- a
    ValueError after the charge that the neighbour with one more row in that partition does not
    raise.  Flattening each block in place keeps the rows' order (C order, one block of whole
    rows at a time)."""
    if not is_dask_collection(x):
        return x.reshape(-1, 1)
    m = math.prod(x.shape[1:])  # public: only the rows are chunked
    kw: dict = {"new_axis": [1]} if x.ndim == 1 else {"drop_axis": list(range(2, x.ndim))} if x.ndim > 2 else {}
    return x.map_blocks(_block_column, chunks=(tuple(c * m for c in x.chunks[0]), (1,)), dtype=x.dtype, **kw)


def _stack(xa, ya):
    if is_dask_collection(xa):
        import dask.array as da

        return da.stack([xa, ya], axis=1)
    return np.stack([xa, ya], axis=1)


def _release_statistic(x, budget, event, label, statistic, allow_nan, *, args=(), out_dtype=np.float64):
    """``statistic(x, *args)`` and the charge of ``event`` (a DpEvent, or a callable building it
    when a budget applies): in memory the statistic first (its native pass refuses non-finite
    data with a fixed message, so before the charge), on Dask the charge first, then one pass of
    the statistic per row partition added in partition order (``allow_nan``: None keeps the
    partitions' dtype, else float64; ``out_dtype``: that of the partials' sum, object for the
    exact integer statistics, which then add exactly)."""
    if not is_dask_collection(x):
        out = statistic(x, *args)
        _budget.charge(budget, event, label)
        return out
    if x.ndim > 1 and any(len(c) != 1 for c in x.chunks[1:]):  # whole rows in every partition
        x = x.rechunk({j: -1 for j in range(1, x.ndim)})
    _budget.charge(budget, event, label)
    # the statistics check the values in their native pass: their fixed messages are passed on
    return sum_by_partitions(statistic, x, args=args, dtype=None if allow_nan is None else "float64", check=None,
                             fixed_errors=True, out_dtype=out_dtype)
