"""The public 64-bit key of a unit or group value (:func:`value_keys`).

A key is the input of the bounding's keyed-hash priorities (``csrc/tables/aggregate.hpp``) and
of the Dask bucket routing.  The add/remove analysis needs the priorities of one unit's rows to
depend on that unit's rows only; so a key must be a function of the *value alone* -- never of
the dtype a column (or a Dask partition, or a group index built from every partition) happens
to read it in, which depends on the other rows: one NA group turns an ``Int64`` or ``uint8``
column into float64 or object, one string unit turns an int column into object.  Hence:

* numbers are keyed by their value: integral values (bool, int, uint, float, Decimal, Fraction,
  complex with zero imaginary part, in any dtype, NumPy or nullable or categorical or object)
  by the integer itself in [-2^63, 2^63) (two's complement, so int64 7, float64 7.0, ``Int64``
  7, ``uint8`` 7, categorical 7 and ``True``/1 are one key, as ``pd.factorize`` counts them as
  one value), by a salted mix of it in [2^63, 2^64), by a hash of its digits beyond; other floats by the bits
  of ``float64(x) + 0.0`` (-0.0 and 0.0 one key);
* every missing value (None, NaN, ``pd.NA``, NaT) by one constant;
* strings (and bytes) by pandas' fixed-key SipHash of the string;
* datetimes by the instant (nanoseconds since the epoch, modulo 2^64, any resolution; a
  tz-aware one by its UTC instant), timedeltas by the duration, each salted apart from numbers;
* tuples by a mix of their items' keys; any other object by a hash of its type and ``repr``.

Keys may collide (two values, one key): that costs balance in the shuffle and ties in the
priorities (broken by the canonical group order, a function of the values), never the
bound on one unit's contribution.
"""
from __future__ import annotations

import datetime
import functools
import numbers

import numpy as np
import pandas as pd

__all__ = ["value_keys", "mix_keys", "BoolLabel", "bools_apart"]

_NA_KEY = np.uint64(0x6E2D_4E41_0000_0001)  # every missing value: one group / one key
_SALT_BIG = np.uint64(0x5EC0DE5EC0DE5EC0)  # integers outside [-2^63, 2^64)
_SALT_HIGH = np.uint64(0xBB67AE8584CAA73B)  # integers in [2^63, 2^64): apart from the negative int64
_SALT_TIME = np.uint64(0x7F4A7C159E3779B9)  # datetimes: apart from numbers
_SALT_DELTA = np.uint64(0x3C6EF372FE94F82B)  # timedeltas
_SALT_TUPLE = np.uint64(0xA54FF53A5F1D36F1)
_TWO63, _TWO64 = 2.0 ** 63, 2.0 ** 64
# nanoseconds per tick of each numpy time unit (months and years are converted to days first)
_NS_PER = {"W": 7 * 86400 * 10 ** 9, "D": 86400 * 10 ** 9, "h": 3600 * 10 ** 9, "m": 60 * 10 ** 9, "s": 10 ** 9,
           "ms": 10 ** 6, "us": 10 ** 3, "ns": 1}
_PER_NS = {"ps": 10 ** 3, "fs": 10 ** 6, "as": 10 ** 9}  # finer than ns: floored to ns (a collision at worst)


def _fmix(k: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser on uint64 arrays (wrapping arithmetic)."""
    k = np.array(k, dtype=np.uint64, copy=True, ndmin=1)
    with np.errstate(over="ignore"):
        k ^= k >> np.uint64(33)
        k *= np.uint64(0xFF51AFD7ED558CCD)
        k ^= k >> np.uint64(33)
        k *= np.uint64(0xC4CEB93FE53EC2CB)
        k ^= k >> np.uint64(33)
    return k


def mix_keys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Keyed combination of two key arrays (the key of a pair: several ``by`` columns, tuples)."""
    with np.errstate(over="ignore"):
        return _fmix(np.asarray(a, dtype=np.uint64) ^ _fmix(np.asarray(b, dtype=np.uint64)
                                                           + np.uint64(0x9E3779B97F4A7C15)))


def _hash_strings(v) -> np.ndarray:
    return pd.util.hash_array(np.asarray(v, dtype=object), categorize=True)


def _big_int_key(n: int) -> int:
    return int(_hash_strings([f"int:{n}"])[0] ^ _SALT_BIG)


def _high_keys(u: np.ndarray) -> np.ndarray:
    """Keys of integers in [2^63, 2^64) (as uint64): mixed and salted, so that 2^64 - 1 and -1
    (the same 64 bits) get different keys."""
    return _fmix(u) ^ _SALT_HIGH


def _integer_key(n: int) -> int:
    if -2 ** 63 <= n < 2 ** 63:
        return n % 2 ** 64
    if 2 ** 63 <= n < 2 ** 64:
        return int(_high_keys(np.array([n], dtype=np.uint64))[0])
    return _big_int_key(n)


def _float_bits(f: float) -> int:
    return int(np.float64(f + 0.0).view(np.uint64))


def _number_key(x) -> int:
    """The key of one number (Python or NumPy bool, int, float; Decimal, Fraction; complex)."""
    if isinstance(x, (complex, np.complexfloating)):
        if x.imag != 0:
            return int(mix_keys(np.uint64(_float_bits(float(x.real))), np.uint64(_float_bits(float(x.imag))))[0])
        x = x.real
    if isinstance(x, (bool, np.bool_, int, np.integer)):
        return _integer_key(int(x))
    if x != x:  # NaN (float, Decimal)
        return int(_NA_KEY)
    try:
        f = float(x)
    except OverflowError:  # a Decimal or Fraction beyond float's range
        f = float("inf") if x > 0 else float("-inf")
    if f in (float("inf"), float("-inf")):
        try:
            return _integer_key(int(x)) if x == int(x) else _float_bits(f)
        except (OverflowError, ValueError):
            return _float_bits(f)
    integral = f == int(f) if isinstance(x, (float, np.floating)) else x == int(x)
    return _integer_key(int(x)) if integral else _float_bits(f)


def _object_key(v) -> int:
    """The key of one value of an object column (mixed types); never raises (a value whose
    comparison or repr fails gets the key of its type: a collision at worst)."""
    try:
        return _object_key_of(v)
    except Exception:
        return int(_hash_strings([f"{type(v).__module__}.{type(v).__qualname__}"])[0])


def _object_key_of(v) -> int:
    if isinstance(v, BoolLabel):  # the key of the bool it stands for (the bounding is unchanged)
        return _integer_key(int(v.value))
    if isinstance(v, str):
        return int(_hash_strings([v])[0])
    if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, (float, np.floating)) and v != v):
        return int(_NA_KEY)
    if isinstance(v, (numbers.Number, np.bool_)):
        return _number_key(v)
    if isinstance(v, bytes):
        return int(_hash_strings([v])[0])
    if isinstance(v, datetime.datetime):  # Timestamp included; tz-aware: its UTC instant
        t = pd.Timestamp(v)
        v = (t.tz_convert("UTC").tz_localize(None) if t.tzinfo is not None else t).to_datetime64()
    elif isinstance(v, datetime.timedelta):
        v = pd.Timedelta(v).to_timedelta64()
    elif isinstance(v, datetime.date):
        v = np.datetime64(v, "D")
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return int(value_keys(np.array([v]))[0])
    if isinstance(v, tuple):
        k = np.array([_SALT_TUPLE], dtype=np.uint64)
        for item in v:
            k = mix_keys(k, np.array([_object_key(item)], dtype=np.uint64))
        return int(k[0])
    return int(_hash_strings([f"{type(v).__module__}.{type(v).__qualname__}:{v!r}"])[0])


@functools.total_ordering
class BoolLabel:
    """A bool group value of an object ``by`` column, kept apart from the number 1 (or 0).

    ``True == 1`` and ``hash(True) == hash(1)`` in Python, so ``pd.factorize`` of an object
    column counts ``True`` and ``1`` as one group and labels it with whichever the first row
    holds: the released label would then depend on the row order (and, through the other
    units' rows, on data the release does not protect).  Under private partition selection the
    groups of an object column are formed from these labels instead: a ``BoolLabel`` equals
    only a ``BoolLabel`` of the same value, so ``True`` and ``1`` are two groups, each labelled
    by its own type whatever the order or the other rows.  Its key (:func:`value_keys`) is the
    bool's, and it orders like the bool among ``BoolLabel``; the released index turns it back
    into the bool (``tables._labels``).
    """
    __slots__ = ("value",)

    def __init__(self, value) -> None:
        object.__setattr__(self, "value", bool(value))

    def __setattr__(self, name, value):
        raise AttributeError("BoolLabel is immutable")

    def __reduce__(self):
        return (BoolLabel, (self.value,))

    def __eq__(self, other):
        return isinstance(other, BoolLabel) and other.value == self.value

    def __lt__(self, other):
        if not isinstance(other, BoolLabel):
            return NotImplemented
        return self.value < other.value

    def __hash__(self):
        return hash(("dpfast.BoolLabel", self.value))

    def __repr__(self):
        return f"BoolLabel({self.value})"


def bools_apart(values: pd.Index) -> pd.Index:
    """``values`` with every bool of an object-dtype index replaced by a :class:`BoolLabel`
    (other dtypes unchanged: a bool column holds no numbers, a numeric one no bools)."""
    if values.dtype != object or len(values) == 0:
        return values
    raw = values.to_numpy()
    if pd.api.types.infer_dtype(raw, skipna=True) == "string":  # the common case: nothing to do
        return values
    isb = np.fromiter((isinstance(v, (bool, np.bool_)) for v in raw), dtype=bool, count=raw.size)
    if not isb.any():
        return values
    out = raw.copy()
    out[isb] = [BoolLabel(v) for v in raw[isb]]
    return pd.Index(out, dtype=object, name=values.name)


def _time_keys(raw: np.ndarray) -> np.ndarray:
    """Keys of datetime64 / timedelta64 values: the instant (duration) in ns modulo 2^64, salted."""
    kind = raw.dtype.kind
    unit, _ = np.datetime_data(raw.dtype)
    nat = np.isnat(raw)
    if unit in ("Y", "M"):
        raw = raw.astype("M8[D]" if kind == "M" else "m8[D]")  # calendar units: days (exact)
        unit = "D"
    ticks = raw.view(np.int64)
    with np.errstate(over="ignore"):
        if unit in _PER_NS:
            ns = (ticks // _PER_NS[unit]).view(np.uint64)
        else:
            ns = ticks.view(np.uint64) * np.uint64(_NS_PER.get(unit, 1))
    keys = ns ^ (_SALT_TIME if kind == "M" else _SALT_DELTA)
    keys[nat] = _NA_KEY
    return keys


def _numpy_keys(raw: np.ndarray) -> np.ndarray:
    kind = raw.dtype.kind
    if kind == "b":
        return raw.astype(np.uint64)
    if kind == "i":
        return raw.astype(np.int64).view(np.uint64)
    if kind == "u":
        keys = raw.astype(np.uint64)
        high = keys >= np.uint64(2 ** 63)
        if high.any():
            keys[high] = _high_keys(keys[high])
        return keys
    if kind == "f":
        x = raw.astype(np.float64) + 0.0
        keys = x.view(np.uint64).copy()  # not integral (or inf): the float's bits
        integral = np.isfinite(x) & (np.floor(x) == x)
        low = integral & (x >= -_TWO63) & (x < _TWO63)
        high = integral & (x >= _TWO63) & (x < _TWO64)
        keys[low] = x[low].astype(np.int64).view(np.uint64)
        keys[high] = _high_keys(x[high].astype(np.uint64))
        big = np.flatnonzero(integral & ~low & ~high)
        keys[big] = [_big_int_key(int(x[i])) for i in big]
        keys[np.isnan(x)] = _NA_KEY
        return keys
    if kind == "c":
        re, im = raw.real.astype(np.float64), raw.imag.astype(np.float64)
        keys = _numpy_keys(re)
        cplx = im != 0
        if cplx.any():
            keys[cplx] = mix_keys((re[cplx] + 0.0).view(np.uint64), (im[cplx] + 0.0).view(np.uint64))
        keys[np.isnan(re) | np.isnan(im)] = _NA_KEY
        return keys
    if kind in "mM":
        return _time_keys(raw)
    if kind in "US":
        return _hash_strings(raw.astype(object))
    if kind == "O":
        inferred = pd.api.types.infer_dtype(raw, skipna=True) if raw.size else "empty"
        if inferred in ("string", "bytes", "empty"):
            miss = pd.isna(raw)
            if not miss.any():
                return _hash_strings(raw)
            keys = np.full(raw.size, _NA_KEY, dtype=np.uint64)
            keys[~miss] = _hash_strings(raw[~miss])
            return keys
    # objects (mixed types) and any other dtype: per value.  Never an error: group keys are
    # computed after the charge (in the kernel's call), so this must not fail on any value.
    return np.fromiter((_object_key(v) for v in raw.astype(object, copy=False).ravel()), dtype=np.uint64,
                       count=raw.size)


def value_keys(values) -> np.ndarray:
    """One public 64-bit key per value (uint64 array; see the module docstring): a function of
    each value alone, equal for the values ``pd.factorize`` counts as one whatever the dtype
    (NumPy, nullable, Arrow, categorical, object) they are read in; all missing values one key."""
    if isinstance(values, (pd.Series, pd.Index)):
        values = values.array if isinstance(values.dtype, pd.api.extensions.ExtensionDtype) else values.to_numpy()
    if isinstance(values, pd.Categorical):
        cat = value_keys(values.categories)
        codes = np.asarray(values.codes, dtype=np.int64)
        keys = np.full(codes.size, _NA_KEY, dtype=np.uint64)
        keys[codes >= 0] = cat[codes[codes >= 0]]
        return keys
    if isinstance(values, pd.api.extensions.ExtensionArray) and not isinstance(values, np.ndarray):
        miss = np.asarray(pd.isna(values), dtype=bool)
        if miss.any():
            keys = np.full(len(values), _NA_KEY, dtype=np.uint64)
            keys[~miss] = value_keys(values[~miss])
            return keys
        dt = values.dtype
        if isinstance(dt, pd.DatetimeTZDtype):  # the UTC instant
            return _time_keys(pd.DatetimeIndex(values).tz_convert("UTC").tz_localize(None).to_numpy())
        np_dt = getattr(dt, "numpy_dtype", None)
        if np_dt is not None and np.dtype(np_dt).kind in "biufcmM":
            return _numpy_keys(values.to_numpy(dtype=np_dt))
        return _numpy_keys(np.asarray(values, dtype=object))
    return _numpy_keys(np.asarray(values))
