"""One-hot encoding with public categories, or categories chosen by DP partition selection."""
from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.validation import _check_feature_names_in

from dpfast._base import (
    RANDOM_STATE,
    Interval,
    PrivateEstimator,
    StrOptions,
    check_fitted,
    validate_X,
)
from dpfast._validation import check_delta, check_epsilon
from dpfast.accounting import ApproxDP
from dpfast.budget import detached
from dpfast.calibrate import laplace_scale
from dpfast.mechanisms import laplace_noise
from dpfast.preprocessing._privacy import ACCOUNTANT
from dpfast.random import check_random_state
from dpfast.tables import selection_threshold

__all__ = ["OneHotEncoder"]


def _column(Xa: np.ndarray, j: int) -> list:
    return Xa[:, j].tolist()  # Python scalars: numpy and Python values of equal value hash alike


def _type_name(v) -> str:
    """The sort group of a value: "" for real numbers (first, in numeric order), else its type."""
    if isinstance(v, Real):
        return ""
    t = type(v)
    return f"{t.__module__}.{t.__qualname__}"


def _canonical_order(values: list) -> list:
    """``values`` (distinct, hashable) in an order that is a function of the set alone.

    Their natural order when they are mutually comparable (numbers, or strings: the order
    scikit-learn's encoder releases); otherwise numbers first, then the other values grouped by
    type name, each group by value, or by ``repr`` where values of one group do not compare
    (e.g. None and str, or str and int in one object column)."""
    try:
        return sorted(values)
    except TypeError:
        pass
    try:
        return sorted(values, key=lambda v: (_type_name(v), v))
    except TypeError:
        return sorted(values, key=lambda v: (_type_name(v), repr(v)))


def _canonical_number(v):
    """One representative per numeric value: an integral real as ``int``, any other real as
    ``float``; anything else (str, None, ...) as is.

    In an object column 1, 1.0, True (and Decimal(1)) compare and hash equal, so they are one
    category; which of them represents it must not depend on which ones the data holds (one row
    holding 1.0 among ints would otherwise change the released category's type and name)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v  # exact, also beyond 2**53
    if isinstance(v, (Real, Decimal)):
        try:
            i = int(v)
        except (OverflowError, ValueError):  # inf
            return float(v)
        if i == v:
            return i
        try:
            return float(v)
        except OverflowError:  # a Fraction beyond the double range stays exact
            return v
    return v


def _category_counts(col: list, object_column: bool) -> tuple[list, np.ndarray]:
    """The distinct values of ``col`` (in :func:`_canonical_order`) and their counts.

    Hash-based, so it works for any hashable values, mixed types and None included: a private
    selection must not fail on the data after its charge (issue 21, item 8).  In an object
    column numbers are counted by value (:func:`_canonical_number`); a numeric column (its dtype
    is public schema) holds one type and is counted as is."""
    if object_column:
        col = [_canonical_number(v) for v in col]
    counts = Counter(col)
    values = _canonical_order(list(counts))
    return values, np.array([counts[v] for v in values], dtype=np.float64)


def _object_array(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)  # filled element by element: tuples stay scalars
    for i, v in enumerate(values):
        out[i] = v
    return out


class OneHotEncoder(TransformerMixin, PrivateEstimator):
    """One-hot encoder whose categories are public, or selected privately.

    * ``categories=[list per feature]`` (public): nothing is learned from the data; ``fit``
      costs no privacy (``event_ = None``, ``epsilon_ = delta_ = 0``) and charges nothing.
    * ``categories="private"``: the categories of each feature are chosen from the data by
      Laplace-thresholding partition selection (Korolova, Kenthapadi, Mishra & Ntoulas 2009;
      Desfontaines, Voss, Gipson & Mandayam 2022, "Differentially private partition
      selection", PoPETs, Sec. 3; Wilson et al. 2020, Sec. 4): a category is kept iff its count
      plus ``Lap(d / epsilon)`` exceeds ``tau = 1 + (d / epsilon) ln(d / (2 delta))``
      (:func:`dpfast.tables.selection_threshold` with ``l0 = d``).  One row contributes one
      value to each of the d features, so the count vector has l1 sensitivity d; counts of
      categories present in both neighbours are epsilon-DP, and a category only the added row
      has (count 1) is kept with probability ``exp(-(tau - 1) epsilon / d) / 2``, at most
      ``delta`` over the <= d such categories (union bound).  Hence ``(epsilon, delta)``-DP
      under add/remove neighbours; only the kept categories are released, never the counts,
      sorted (mixed types, e.g. str and int or None in one object column: numbers first, then
      grouped by type name), so their order is a function of the kept set alone.  Any
      hashable values work: nothing about the data can make the selection fail after its
      charge.  In an object column numbers are categories by value (1, 1.0 and True are one,
      released as int 1; other reals as float), so a record's numeric type changes nothing
      released.  Needs ``delta > 0``: no pure-DP mechanism can release values it has never seen.
      Rare categories are dropped (``handle_unknown="ignore"`` then encodes them as all zeros).

    Parameters
    ----------
    categories : list of array-likes, or "private"
        Public categories (one list per feature), or ``"private"``.
    epsilon, delta : float or None
        The budget of the private selection (required with ``categories="private"``,
        must be None otherwise).
    handle_unknown : {"ignore", "error"}
        A value outside the categories at ``transform``: all-zero columns, or ValueError.
    dtype : numpy dtype of the output (default float64).
    random_state : None, int, numpy Generator or dpfast.random.SecureRandom

    Attributes
    ----------
    categories_ : list of ndarray (one per feature)
    event_ : None (public categories) or the ``ApproxDP(epsilon, delta)`` event of the selection.
    epsilon_, delta_ : the guarantee of ``fit``: 0 for public categories; otherwise the
        accountant's epsilon for ``event_`` at ``delta_``.
    accountant_ : None (public categories: nothing learned) or ``"pld"``, the accountant.
    """

    _parameter_constraints = {
        "categories": [StrOptions({"private"}), list, tuple],
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "handle_unknown": [StrOptions({"ignore", "error"})],
        "dtype": "no_validation",  # a numpy dtype, checked by numpy
        "random_state": RANDOM_STATE,
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False  # a transformer: fit(X) reads no target
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags

    def _validate_X(self, X, *, reset: bool) -> np.ndarray:
        # dtype=None: categories may be strings or numbers; NaN is refused (it is not a category)
        return validate_X(self, X, reset=reset, dtype=None)

    def __init__(self, categories: Any = "private", *, epsilon: float | None = None,
                 delta: float | None = None, handle_unknown: str = "ignore", dtype=np.float64,
                 random_state: Any = None):
        self.categories = categories
        self.epsilon = epsilon
        self.delta = delta
        self.handle_unknown = handle_unknown
        self.dtype = dtype
        self.random_state = random_state

    def _check_params(self):
        # (called after _validate_params: types and ranges are already checked)
        if isinstance(self.categories, str):  # "private", the only string allowed
            if self.epsilon is None or self.delta is None:
                raise ValueError("categories='private' needs epsilon (> 0) and delta (in (0, 1))")
            eps = check_epsilon(self.epsilon, allow_array=False)
            delta = check_delta(self.delta, allow_zero=False)  # in (0, 1) by the constraints
            return eps, delta
        if self.epsilon is not None or self.delta is not None:
            raise ValueError("epsilon and delta apply to categories='private' only (public categories cost nothing)")
        try:
            cats = [list(c) for c in self.categories]
        except TypeError:
            raise TypeError("categories must be 'private' or a list with one sequence of categories per feature") from None
        for j, c in enumerate(cats):
            if len(set(c)) != len(c):
                raise ValueError(f"categories[{j}] has duplicate values")
        return cats

    def fit(self, X, y=None, *, budget: Any = None) -> "OneHotEncoder":
        """Set ``categories_`` (public: no privacy cost; private: see the class docstring)."""
        self._validate_params()  # declarative constraints, before any private value is read
        self._reset_fit()
        params = self._check_params()
        Xa = self._validate_X(X, reset=True)
        d = Xa.shape[1]
        if isinstance(params, list):
            if len(params) != d:
                raise ValueError(f"categories has {len(params)} entries but X has {d} features")
            self.categories_ = [np.array(c, dtype=object) for c in params]
            self._record_release(None, 0.0, 0.0, None)
        else:
            eps, delta = params
            tau = selection_threshold(d, eps, delta)  # the one home of the formula (dpfast.tables)
            scale = float(laplace_scale(eps, d))  # a row adds 1 to <= d counts: l1 sensitivity d
            if not (math.isfinite(scale) and math.isfinite(tau)):  # e.g. epsilon = 5e-324: before the charge
                raise ValueError(f"epsilon={eps!r} is too small for {d} features: the noise scale d / epsilon "
                                 "overflows a double")
            event = ApproxDP(eps, delta)
            gen = check_random_state(self.random_state)
            self._charge(event, budget)
            cats = []
            with detached():  # samplers charge nothing today; the fit's event covers them anyway
                for j in range(d):
                    values, counts = _category_counts(_column(Xa, j), Xa.dtype == object)
                    keep = counts + laplace_noise(scale, counts.size, rng=gen) > tau
                    # the kept set in its canonical order: a function of the released values only
                    cats.append(_object_array(_canonical_order([v for v, k in zip(values, keep) if k])))
            self.categories_ = cats
            self._record_accounted(event, delta, ACCOUNTANT)
        return self

    def transform(self, X) -> np.ndarray:
        """One column per category, feature by feature (dense)."""
        check_fitted(self)
        Xa = self._validate_X(X, reset=False)
        n = Xa.shape[0]
        sizes = [len(c) for c in self.categories_]
        out = np.zeros((n, sum(sizes)), dtype=self.dtype)
        start = 0
        for j, cats in enumerate(self.categories_):
            lookup = {v: i for i, v in enumerate(cats.tolist())}
            idx = np.fromiter((lookup.get(v, -1) for v in _column(Xa, j)), dtype=np.int64, count=n)
            unknown = idx < 0
            if unknown.any() and self.handle_unknown == "error":
                # the value itself is not named: X may be private data (issue 21, item 10)
                raise ValueError(f"feature {j} has values outside categories_ (handle_unknown='error')")
            rows = np.nonzero(~unknown)[0]
            out[rows, start + idx[rows]] = 1
            start += sizes[j]
        return out

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        check_fitted(self)
        names = _check_feature_names_in(self, input_features)
        return np.array([f"{names[j]}_{c}" for j, cats in enumerate(self.categories_) for c in cats.tolist()],
                        dtype=object)

