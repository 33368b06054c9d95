"""Private selection: report-noisy-max, the exponential mechanism, one-shot top-k, streaming.

See: :doc:`/theory/mechanisms` sections "Report-noisy-max" and "Exponential mechanism";
:doc:`/theory/mechanisms` (RNM with Laplace noise), B7 (Gumbel-max = exponential mechanism) and
B8 (exponential mechanism).

All selections run in log space: candidate ``i`` gets the log-weight
``z_i = c * u_i (+ log mu_i)`` with ``c = epsilon / (2 * sensitivity)``
(``epsilon / sensitivity`` for monotonic utilities) and the output is
``argmax_i (z_i + N_i)`` with i.i.d. standard noise ``N_i``.  Nothing is ever exponentiated,
so utilities of magnitude 1e6 and more are fine, and the native kernel reads each candidate
once, so 10^8 candidates cost O(chunk) memory when streamed.

Neighbouring relation: ``sensitivity`` is the largest change of any single utility
``|u(X, r) - u(X', r)|`` between neighbouring data sets X, X' under whichever relation the
caller uses (add/remove or replace-one, see :doc:`/theory/conventions` Conventions); the epsilon-DP
guarantee holds for that same relation.  "Monotonic" means that for every pair of
neighbours, all utilities move in the same direction (e.g. counts under add/remove).

Randomness: every candidate consumes exactly one 64-bit word of the ``rng`` stream, in
candidate order (rows in C order of the remaining axes), so a seed fixes the result, and
the streaming interface returns the same index as the one-shot call over the concatenated
chunks.

Large offsets: the keys are formed relative to the row's largest (selectable) utility U,
``c * (u_i - U) + log mu_i + N_i``, which has the same law (a common shift) but keeps the
noise's precision: with utilities ``[0, 16, 32] + 1e17`` the spacing of doubles at ``c * u``
would otherwise round the noise away and bias the selection.  Streams use the largest utility
seen so far and move the running record when it grows; the streamed index equals the one-shot
index for the same seed except when two keys are within a few ulps of each other.

Floating point: the noise is computed in double precision from 52 random bits per
candidate, so, like the continuous Laplace mechanism, these samplers are not
floating-point safe in the sense of Mironov 2012 (see Ilvento 2020, "Implementing the
exponential mechanism with base-2 differential privacy") even under
``dpfast.random.SecureRandom``, and the stated laws are exact up to the discretization of
the uniforms to a grid of 2^52 points.
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Iterable, Optional, Union

import numpy as np

from dpfast import _selection
from dpfast._validation import Bool, Epsilon, Positive, as_array, validate_params
from dpfast.mechanisms import _events
from dpfast.random import RNG, RandomLike

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = [
    "report_noisy_max",
    "exponential_mechanism",
    "top_k",
    "ExponentialMechanismStream",
    "exponential_mechanism_stream",
]

_NOISE = {
    "gumbel": _selection.GUMBEL,
    "exponential": _selection.EXPONENTIAL,
    "laplace": _selection.LAPLACE,
}

ArrayLike = Union[np.ndarray, list, tuple, float, int]


# ----------------------------------------------------------------------------- validation
def _check_utilities(utilities, name: str) -> np.ndarray:
    """A float32/float64 array (float32 stays float32); NaN/inf and overflow of
    epsilon * u / sensitivity are checked by the native kernel before it draws anything."""
    if isinstance(utilities, (str, bytes)):
        raise TypeError(f"{name} must be numeric, got {type(utilities).__name__}")
    try:
        arr = np.asarray(utilities)
    except ValueError:  # ragged nested lists
        raise TypeError(f"{name} must be a rectangular array of numbers (got ragged nested sequences)") from None
    if arr.dtype != np.float64 and arr.dtype != np.float32:
        if arr.dtype.kind in "biuf":
            arr = arr.astype(np.float64)
        else:
            raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    return arr


#: The checks every selection shares (the ``monotonic`` and ``rng`` ones where it has them).
_SCALARS = dict(epsilon=Epsilon(allow_array=False), sensitivity=Positive(allow_array=False))


def _scale(epsilon: float, sensitivity: float, monotonic: bool, k: int = 1) -> float:
    """The log-weight factor c = epsilon / (2 k sensitivity) (no 2 when monotonic), for checked
    parameters; refused when it overflows or underflows."""
    c = epsilon / (sensitivity * k) if monotonic else epsilon / (2.0 * sensitivity * k)
    if not (np.isfinite(c) and c > 0):
        raise ValueError(
            f"epsilon / sensitivity = {epsilon} / {sensitivity} is not a positive finite number"
        )
    return float(c)


def _normalize_axis(axis, ndim: int) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an int, got {type(axis).__name__}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for utilities with {ndim} dimension(s)")
    return int(axis) % ndim


def _to_rows(u: np.ndarray, axis: int, name: str):
    """(rows, candidates) C-contiguous view/copy and the output shape of the other axes."""
    if u.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension (the candidates)")
    ax = _normalize_axis(axis, u.ndim)
    n = u.shape[ax]
    if n == 0:
        raise ValueError(f"{name} has no candidates along axis {axis}")
    if u.ndim == 1:
        return np.ascontiguousarray(u).reshape(1, n), (), 0
    moved = np.moveaxis(u, ax, -1)
    out_shape = moved.shape[:-1]
    return np.ascontiguousarray(moved.reshape(-1, n)), out_shape, ax


def _check_base_measure(base_measure) -> np.ndarray:
    """A float64 array of finite, non-negative weights (one home for the one-shot and the
    streaming selections)."""
    if isinstance(base_measure, (str, bytes)):
        raise TypeError("base_measure must be numeric")
    mu = as_array(base_measure, "base_measure", np.float64)  # beyond a double: ValueError
    if not np.isfinite(mu).all():
        raise ValueError("base_measure must be finite (no NaN or inf entries)")
    if (mu < 0).any():
        raise ValueError("base_measure must be non-negative")
    return mu


def _log_base_measure(base_measure, shape, ax: int, n: int) -> Optional[np.ndarray]:
    """log of a non-negative base measure broadcast to the utilities, as (rows, n); None for a
    constant positive measure (a scalar, say), which is the uniform one: the law is invariant
    under a common factor, so nothing of the utilities' size is allocated for it."""
    mu = _check_base_measure(base_measure)
    try:
        np.broadcast_shapes(mu.shape, shape)
        if mu.size and np.broadcast_shapes(mu.shape, shape) != tuple(shape):
            raise ValueError
    except ValueError as exc:
        raise ValueError(
            f"base_measure of shape {np.shape(base_measure)} does not broadcast to the "
            f"utilities' shape {shape}"
        ) from exc
    if mu.size and int(np.prod(shape)) and (mu == mu.flat[0]).all():
        if mu.flat[0] > 0:
            return None  # uniform
        raise ValueError("base_measure must have a positive entry for every selection (row)")
    try:
        mu = np.broadcast_to(mu, shape)
    except ValueError as exc:
        raise ValueError(
            f"base_measure of shape {np.shape(base_measure)} does not broadcast to the "
            f"utilities' shape {shape}"
        ) from exc
    mu = np.moveaxis(mu, ax, -1).reshape(-1, n)
    if mu.shape[0] and not (mu > 0).any(axis=1).all():
        raise ValueError("base_measure must have a positive entry for every selection (row)")
    with np.errstate(divide="ignore"):
        return np.ascontiguousarray(np.log(mu))


def _check_noise(noise) -> int:
    try:
        return _NOISE[noise]
    except (KeyError, TypeError):
        raise ValueError(
            f"noise must be one of 'gumbel', 'exponential', 'laplace'; got {noise!r}"
        ) from None


def _select_plan(utilities, sensitivity, epsilon, axis, monotonic, base_measure, noise, name,
                 label, event="ExponentialMechanism") -> _events.Plan:
    kind = _check_noise(noise)
    c = _scale(epsilon, sensitivity, monotonic)
    u = _check_utilities(utilities, name)
    rows, out_shape, ax = _to_rows(u, axis, name)
    logw = None if base_measure is None else _log_base_measure(base_measure, u.shape, ax, rows.shape[1])

    def draw(gen):
        bg = gen.bit_generator
        with bg.lock:  # what dpfast.random.native_stream does, without contextlib's overhead
            idx = _selection.argmax_rows(bg.capsule, rows, logw, c, kind, name)
        if not out_shape:
            return int(idx[0])
        return idx.reshape(out_shape)

    # one selection per row: rows.shape[0] compositions of the epsilon-DP selection
    return _events.Plan(label, _events.exponential_event, (epsilon, max(rows.shape[0], 1), event), draw)


# ----------------------------------------------------------------------------- public API
@validate_params(**_SCALARS, monotonic=Bool(), rng=RNG)
def report_noisy_max(
    scores: ArrayLike,
    sensitivity: float,
    epsilon: float,
    axis: int = -1,
    noise: str = "gumbel",
    monotonic: bool = False,
    rng: RandomLike = None,
    *,
    budget: Optional["PrivacyBudget"] = None,
):
    """Index of the largest noisy score along ``axis`` (report-noisy-max), epsilon-DP.

    Each score gets i.i.d. noise of scale ``b = 2 * sensitivity / epsilon``
    (``sensitivity / epsilon`` when ``monotonic``) and only the argmax is released
    (see :doc:`/theory/mechanisms` "Report-noisy-max"; :doc:`/theory/mechanisms`):

    * ``noise="gumbel"``: Gumbel(0, b) -- exactly the exponential mechanism,
      ``P(i) = softmax(epsilon * scores / (2 * sensitivity))_i`` (Gumbel-max trick, AW §7.2
      Prop 7.1; ``epsilon * scores / sensitivity`` when monotonic);
    * ``noise="exponential"``: one-sided Exponential(b) -- the permute-and-flip mechanism
      (McKenna & Sheldon 2020; the equivalence is Ding et al. 2021, arXiv:2105.07260), epsilon-DP and
      never worse in expected utility than the exponential mechanism.  Its law is
      ``P(i) = p_i * integral_0^1 prod_{j != i} (1 - p_j t) dt`` with
      ``p_j = exp((s_j - max s) / b)``; it is *not* the softmax law;
    * ``noise="laplace"``: Laplace(0, b) (AW §5.1 Prop 5.1, Dwork & Roth 2014 Claim 3.9).

    The factor 2 dropped for monotonic scores is valid for all three: the survival function
    of each noise satisfies ``S(x + d) >= exp(-d / b) S(x)``, which is all the monotone proof
    (Dwork & Roth, Claim 3.9) uses.

    Parameters
    ----------
    scores : array_like, at least 1-D
        Real, finite scores; the candidates run along ``axis``; one selection is made for
        every position of the other axes (batched).
    sensitivity : float
        ``max |score(X, i) - score(X', i)|`` over candidates i and neighbours X, X' (the
        l-infinity sensitivity of the score vector), > 0.
    epsilon : float
        Privacy budget of one selection (> 0, finite; nats).
    axis : int
        Axis of the candidates.
    noise : {"gumbel", "exponential", "laplace"}
    monotonic : bool
        True when on every pair of neighbours all scores move in the same direction.
    rng : None, int, numpy.random.Generator or dpfast.random.SecureRandom
    budget : PrivacyBudget, optional
        Charged before any randomness is drawn (default: the ``with budget:`` default, if
        any) with one event for the call: ``ReportNoisyMax(epsilon)``, composed R times for R selections (the positions of the other axes); ``BudgetExceededError`` when it does not
        fit (nothing drawn, ``rng`` untouched).

    Returns
    -------
    int or ndarray of int64
        The selected index: an ``int`` for 1-D scores, else an array of the other axes' shape.
    """
    return _rnm_plan(scores, sensitivity, epsilon, axis, noise, monotonic).release(rng, budget)


@_events.planned_by(report_noisy_max)
def _rnm_plan(scores, sensitivity, epsilon, axis, noise, monotonic) -> _events.Plan:
    return _select_plan(scores, sensitivity, epsilon, axis, monotonic, None, noise, "scores",
                        "report_noisy_max", "ReportNoisyMax")


@validate_params(**_SCALARS, monotonic=Bool(), rng=RNG)
def exponential_mechanism(
    utilities: ArrayLike,
    sensitivity: float,
    epsilon: float,
    axis: int = -1,
    monotonic: bool = False,
    base_measure: Optional[ArrayLike] = None,
    rng: RandomLike = None,
    *,
    budget: Optional["PrivacyBudget"] = None,
):
    """The exponential mechanism over a finite set of candidates, epsilon-DP.

    Samples ``i`` with ``P(i) proportional to mu_i * exp(epsilon * u_i / (2 * sensitivity))``
    (``exp(epsilon * u_i / sensitivity)`` when ``monotonic``) -- see :doc:`/theory/mechanisms`
    "Exponential mechanism", :doc:`/theory/mechanisms` (McSherry & Talwar 2007) -- exactly, by the
    Gumbel-max trick in log space (:doc:`/theory/mechanisms`):
    ``argmax_i [c u_i + log mu_i + G_i]`` with ``G_i`` standard Gumbel.  Utilities are never
    exponentiated; the kernel skips, with one integer comparison, every candidate whose
    random word provably cannot beat the running maximum.

    Parameters
    ----------
    utilities : array_like, at least 1-D
        Finite utilities; candidates along ``axis``; batched over the other axes.
    sensitivity : float
        ``Delta u = max |u(X, i) - u(X', i)|`` over candidates and neighbours (> 0).
    epsilon : float
        Privacy budget of one selection (> 0, finite).
    axis : int
    monotonic : bool
        True when the utilities of all candidates move in the same direction between any
        neighbours; the mechanism is then epsilon-DP with ``epsilon * u / sensitivity``.
    base_measure : array_like, optional
        Non-negative weights ``mu`` broadcastable to ``utilities`` (default: uniform); a
        candidate with weight 0 is never selected; each selection needs a positive weight.
    rng : None, int, numpy.random.Generator or dpfast.random.SecureRandom
    budget : PrivacyBudget, optional
        Charged before any randomness is drawn (default: the ``with budget:`` default, if
        any) with one event for the call: ``ExponentialMechanism(epsilon)``, composed R times for R selections (the positions of the other axes); ``BudgetExceededError`` when it does not
        fit (nothing drawn, ``rng`` untouched).

    Returns
    -------
    int or ndarray of int64
    """
    return _em_plan(utilities, sensitivity, epsilon, axis, monotonic, base_measure).release(rng, budget)


@_events.planned_by(exponential_mechanism)
def _em_plan(utilities, sensitivity, epsilon, axis, monotonic, base_measure) -> _events.Plan:
    return _select_plan(utilities, sensitivity, epsilon, axis, monotonic, base_measure, "gumbel",
                        "utilities", "exponential_mechanism")


@validate_params(**_SCALARS, monotonic=Bool(), rng=RNG)
def top_k(
    utilities: ArrayLike,
    k: int,
    sensitivity: float,
    epsilon: float,
    axis: int = -1,
    monotonic: bool = False,
    base_measure: Optional[ArrayLike] = None,
    rng: RandomLike = None,
    *,
    budget: Optional["PrivacyBudget"] = None,
) -> np.ndarray:
    """Private top-k by one-shot Gumbel noise; epsilon-DP in total (``epsilon`` is the whole budget).

    Adds i.i.d. Gumbel noise of scale ``2 k sensitivity / epsilon`` (``k sensitivity / epsilon``
    when ``monotonic``) to every utility (plus ``log mu``) and returns the indices of the k
    largest noisy values, largest first.

    Guarantee (Durfee & Rogers 2019, "Practical differentially private top-k selection with
    pay-what-you-get composition", NeurIPS; see :doc:`/theory/mechanisms` "One-shot top-k"): the
    ordered output has exactly the law of k rounds of the *peeling* exponential mechanism,
    each round an ``(epsilon / k)``-DP exponential mechanism over the candidates not yet
    chosen.  Basic composition makes the released ordered k-tuple epsilon-DP (pure), under
    the neighbouring relation that ``sensitivity`` refers to.  For a tighter (eps', delta)
    statement, account the k rounds of ``(epsilon / k)``-DP exponential mechanisms with an
    accountant (e.g. bounded-range composition, Dong, Durfee & Rogers 2020).

    Parameters
    ----------
    utilities : array_like, at least 1-D
    k : int
        1 <= k <= number of candidates (with positive base measure).
    sensitivity, epsilon, axis, monotonic, base_measure, rng
        As in :func:`exponential_mechanism`; ``epsilon`` is the total budget of the k picks.
    budget : PrivacyBudget, optional
        Charged before any randomness is drawn (default: the ``with budget:`` default, if
        any) with one event for the call: the k rounds of ``ExponentialMechanism(epsilon / k)`` of every row (the peeling law above), composed k R times for R rows; ``BudgetExceededError`` when it does not
        fit (nothing drawn, ``rng`` untouched).

    Returns
    -------
    ndarray of int64, shape ``other_axes + (k,)``
    """
    return _top_k_plan(utilities, k, sensitivity, epsilon, axis, monotonic, base_measure).release(rng, budget)


@_events.planned_by(top_k)
def _top_k_plan(utilities, k, sensitivity, epsilon, axis, monotonic, base_measure) -> _events.Plan:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    k = int(k)
    c = _scale(epsilon, sensitivity, monotonic, k=max(k, 1))
    u = _check_utilities(utilities, "utilities")
    rows, out_shape, ax = _to_rows(u, axis, "utilities")
    n = rows.shape[1]
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the number of candidates ({n}), got {k}")
    logw = None
    if base_measure is not None:
        logw = _log_base_measure(base_measure, u.shape, ax, n)
        if logw is not None and rows.shape[0] and int(np.isfinite(logw).sum(axis=1).min()) < k:
            raise ValueError(f"base_measure must have at least k = {k} positive entries in every row")

    def draw(gen):
        bg = gen.bit_generator
        with bg.lock:
            idx = _selection.topk_rows(bg.capsule, rows, logw, c, k)
        return idx.reshape(out_shape + (k,))

    return _events.Plan("top_k", _events.exponential_event, (Fraction(epsilon) / k, k * max(rows.shape[0], 1)),
                        draw)


class ExponentialMechanismStream:
    """Exponential mechanism (or report-noisy-max) over candidates arriving in chunks.

    Memory is O(chunk): the state is the running maximum of the noisy log-weights and its
    index (see :doc:`/theory/mechanisms`, "Streaming: keep the running (max, argmax) over chunks").
    The result has the same law as :func:`exponential_mechanism` (or
    :func:`report_noisy_max` with the same ``noise``) over the concatenation of all chunks,
    and with the same seed it is the same index.  The guarantee is the one of the one-shot
    call: epsilon-DP for the single index released by :meth:`result`.  Releasing
    intermediate results is a separate release each time (compose them).

    ``budget`` (keyword): charged with ``ExponentialMechanism(epsilon)`` when the stream is
    created, before any chunk is read (default: the ``with budget:`` default, if any);
    ``BudgetExceededError`` when it does not fit (nothing drawn, ``rng`` untouched).

    Examples
    --------
    >>> s = ExponentialMechanismStream(sensitivity=1.0, epsilon=1.0, rng=0)
    >>> for chunk in chunks:          # doctest: +SKIP
    ...     s.update(chunk)
    >>> s.result()                    # doctest: +SKIP
    """

    @validate_params(**_SCALARS, monotonic=Bool(), rng=RNG)
    def __init__(
        self,
        sensitivity: float,
        epsilon: float,
        *,
        monotonic: bool = False,
        noise: str = "gumbel",
        rng: RandomLike = None,
        budget: Optional["PrivacyBudget"] = None,
    ) -> None:
        self._kind, self._c, self._gen = _stream_plan(sensitivity, epsilon, monotonic, noise).release(rng, budget)
        self._best = -np.inf
        self._index = -1
        self._seen = 0
        self._shift = -np.inf  # utility the record key is relative to (see csrc/samplers/selection.hpp)

    @property
    def n_candidates(self) -> int:
        """Number of candidates consumed so far."""
        return self._seen

    def update(self, utilities: ArrayLike, base_measure: Optional[ArrayLike] = None):
        """Consume one 1-D chunk of utilities (optionally with its base measure); returns self."""
        u = _check_utilities(utilities, "utilities")
        if u.ndim != 1:
            raise ValueError(f"a chunk of utilities must be 1-D, got shape {u.shape}")
        if u.size == 0:
            return self
        u = np.ascontiguousarray(u)
        logw = None
        if base_measure is not None:
            mu = _check_base_measure(base_measure)
            if mu.ndim == 0:
                mu = np.broadcast_to(mu, u.shape)
            if mu.shape != u.shape:
                raise ValueError(
                    f"base_measure chunk of shape {mu.shape} does not match the utilities chunk {u.shape}"
                )
            with np.errstate(divide="ignore"):
                logw = np.ascontiguousarray(np.log(mu))
        bg = self._gen.bit_generator
        with bg.lock:
            self._best, self._index, self._seen, self._shift = _selection.argmax_chunk(
                bg.capsule, u, logw, self._c, self._kind, self._best, self._index, self._seen, self._shift
            )
        return self

    def result(self) -> int:
        """The selected global index (0-based position in the concatenated stream)."""
        if self._index < 0:
            if self._seen == 0:
                raise ValueError("no candidates were given to the stream (chunks / utilities were all empty)")
            raise ValueError("base_measure must have a positive entry (all candidates had weight 0)")
        return int(self._index)


@_events.planned_by(ExponentialMechanismStream,
                     lambda *args, **kwargs: ExponentialMechanismStream.__init__.validate(None, *args, **kwargs))
def _stream_plan(sensitivity, epsilon, monotonic, noise) -> _events.Plan:
    """The stream's plan: its parameters and event; the draws come with the chunks."""
    kind = _check_noise(noise)
    c = _scale(epsilon, sensitivity, monotonic)
    return _events.Plan("ExponentialMechanismStream", _events.exponential_event, (epsilon,),
                        lambda gen: (kind, c, gen))


@validate_params(**_SCALARS, monotonic=Bool(), rng=RNG)
def exponential_mechanism_stream(
    chunks: Iterable,
    sensitivity: float,
    epsilon: float,
    monotonic: bool = False,
    rng: RandomLike = None,
    noise: str = "gumbel",
    *,
    budget: Optional["PrivacyBudget"] = None,
) -> int:
    """Exponential mechanism over an iterable of 1-D utility chunks, O(chunk) memory.

    Each item of ``chunks`` is a 1-D array of utilities or a pair ``(utilities,
    base_measure)``.  Returns the selected index in the concatenation of the chunks; same law
    (and, for the same seed, same index) as :func:`exponential_mechanism` over the
    concatenated utilities.  epsilon-DP as the one-shot mechanism (see :doc:`/theory/mechanisms`,
    "Exponential mechanism", streaming).  ``noise`` as in :func:`report_noisy_max`.
    ``budget`` (keyword): charged with ``ExponentialMechanism(epsilon)`` before the first chunk
    is read (default: the ``with budget:`` default, if any); ``BudgetExceededError`` when it
    does not fit (nothing drawn, ``rng`` untouched).
    """
    _check_chunks(chunks)
    # the stream charges the budget (before the first chunk is read)
    stream = ExponentialMechanismStream(sensitivity, epsilon, monotonic=monotonic, noise=noise, rng=rng,
                                        budget=budget)
    for i, item in enumerate(chunks):
        try:
            if isinstance(item, tuple):
                if len(item) != 2:
                    raise ValueError("a chunk must be an array of utilities or a (utilities, base_measure) pair")
                stream.update(item[0], item[1])
            else:
                stream.update(item)
        except (TypeError, ValueError) as exc:  # say which argument (and chunk) was bad
            raise type(exc)(f"chunks[{i}]: {exc}") from None
    return stream.result()


def _check_chunks(chunks) -> None:
    if (isinstance(chunks, (str, bytes)) or not isinstance(chunks, Iterable)
            or (isinstance(chunks, np.ndarray) and chunks.ndim < 2)):
        # (a 2-D array is a sequence of rows, i.e. chunks; a 0-d or 1-D one is not)
        raise TypeError(f"chunks must be an iterable of 1-D utility arrays or (utilities, base_measure) "
                        f"pairs, got {type(chunks).__name__}")


@_events.planned_by(exponential_mechanism_stream)
def _stream_fn_plan(chunks, sensitivity, epsilon, monotonic, noise) -> _events.Plan:
    _check_chunks(chunks)
    return _stream_plan(sensitivity, epsilon, monotonic, noise)
