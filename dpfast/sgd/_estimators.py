"""DP-SGD estimators with native per-example clipping (see :doc:`/theory/erm`, DP-SGD).

Each step: sample a batch (Poisson at rate q = batch_size/n by geometric skips, or a uniform
fixed-size subset -- both O(batch)); compute every per-example gradient's norm from the
model's structure (GLM: |l'| ||x_i||; MLP: ghost norms per dense layer) without forming
per-example gradients; clip to ``clip_norm`` C; sum with one weighted matrix product per layer;
add N(0, (z S)^2 I) with S the sum's sensitivity (C for Poisson/add-remove, 2C for
fixed-size/replace-one), drawn natively by a ziggurat sampler from ``random_state``'s bit
generator (the continuous Gaussian, not floating-point safe; see ``dpfast.random``); divide by the *expected* batch size; one optimizer step.
The run's privacy is accounted in ``dpfast.sgd._privacy`` (see there for which description).

Guarantee: the released parameters (every iterate) are (epsilon_, delta)-DP for the stated
neighbouring relation, given that the hyperparameters (and ``classes``) do not depend on the
data.  The number of training examples n is treated as public, as in Opacus and TF Privacy: it
sets q = batch_size / n and the number of steps, which the accountant takes as fixed (under
add/remove neighbours n itself differs by one between neighbours).  ``loss_history_``,
``clipped_fraction_`` and ``train_seconds_`` are computed from the private training data and
are *not* private (nor is the loss shown by ``progress=True``): diagnostics for the user who
owns the data, not something to publish.

Exceptions after the data is read: ``fit`` raises ``FloatingPointError("training diverged")``
when the final parameters are not finite.  This leaks nothing beyond ``epsilon_``: the final
parameters are a function of the initialization, the hyperparameters and the released noisy
clipped sums (post-processing of the Gaussian mechanism, Abadi et al. 2016, "Deep Learning with
Differential Privacy"; Dwork & Roth 2014, Prop. 2.1), and whether they are finite is a function
of them, so the raise-or-return decision is post-processing as well.  Every other error is
raised by validation before any private value is read (or depends only on public shapes).
"""
from __future__ import annotations

import math
import time
from numbers import Integral, Real
from typing import Optional, Sequence

import numpy as np

from dpfast import _base, _clip, _loss_table, budget as _budget
from dpfast._base import (
    RANDOM_STATE,
    DaskDispatchMixin,
    DPClassifierMixin,
    DPRegressorMixin,
    Interval,
    PrivateEstimator,
    StrOptions,
    check_fitted,
    validate_X,
    validate_y,
)
from dpfast._threads import check_threads, default_threads, single_threaded_blas
from dpfast._validation import check_allocation, check_int, check_label_set
from dpfast.random import RandomLike, check_random_state, fill_noise, native_stream
from dpfast.sgd import _dask, _privacy

__all__ = ["DPSGDClassifier", "DPSGDRegressor", "DPMLPClassifier"]

_OPTIMIZERS = {"sgd": 0, "momentum": 1, "adam": 2}
#: a bound on |N(0, 1)| as drawn by the native ziggurat (csrc/random/distributions.hpp): the
#: tail draw r + E1/r is accepted only when 2 E2 > (E1/r)^2 with E2 <= 53 ln 2 (uniforms on the
#: 53-bit grid), so |N| < r + sqrt(2 * 53 ln 2) = 3.65 + 8.58 = 12.2; 16 leaves room (a power of 2)
_NORMAL_BOUND = 16.0
# Documented cap on the number of DP-SGD steps (epochs * ceil(n / batch_size)), checked before
# anything is allocated or accounted: 10**9 steps is far beyond any practical run (days at
# ~10 us a step) and keeps the step counter, the accountant's composition count and the loop
# bounded.
MAX_STEPS = 10**9
_LOGISTIC, _SQUARED, _SOFTMAX = (_loss_table.code(n) for n in ("logistic", "squared", "softmax"))


def _layout(a: np.ndarray) -> np.ndarray:
    """``a`` (validated, float32/float64) in a layout the kernels read as is, else a C copy.

    The kernels honour any non-negative row stride that is a multiple of the item size (0 for
    np.broadcast_to, < d for sliding_window_view: rows are read where the view puts them);
    anything else (byte-swapped, unaligned, column-strided, reversed) is copied."""
    if (not a.dtype.isnative or not a.flags.aligned
            or (a.shape[1] > 1 and a.strides[1] != a.itemsize)
            or a.strides[0] < 0 or a.strides[0] % a.itemsize):
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
    return a


#: Constraints of the parameters every DP-SGD estimator has.
_CONSTRAINTS = {
    "epsilon": [Interval(Real, 0, None, closed="neither"), None],
    "delta": [Interval(Real, 0, 1, closed="neither")],
    "noise_multiplier": [Interval(Real, 0, None, closed="left"), None],
    "clip_norm": [Interval(Real, 0, None, closed="neither")],
    "epochs": [Interval(Integral, 1, None, closed="left")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "learning_rate": [Interval(Real, 0, None, closed="neither")],
    "optimizer": [StrOptions(set(_OPTIMIZERS))],
    "momentum": [Interval(Real, 0, 1, closed="left")],
    "beta2": [Interval(Real, 0, 1, closed="left")],
    "adam_eps": [Interval(Real, 0, None, closed="neither")],
    "alpha": [Interval(Real, 0, None, closed="left")],
    "fit_intercept": ["boolean"],
    "sampling": [StrOptions({"poisson", "shuffle", "full"})],
    "accountant": [StrOptions({"pld", "rdp"})],
    "random_state": RANDOM_STATE,
    "progress": ["boolean"],
    "n_threads": [Interval(Integral, 1, None, closed="left"), None],
}


def _progress_bar_class():
    """tqdm's bar class for ``progress=True``; ImportError (before any charge) without tqdm."""
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:
        raise ImportError("progress=True needs the optional package tqdm (pip install tqdm); nothing was "
                          "charged") from exc
    return tqdm


class _DPSGDBase(PrivateEstimator):
    """Shared privacy calibration and the training loop (the parameters are each subclass's)."""

    _parameter_constraints = _CONSTRAINTS

    # -------------------------------------------------------------- validation / privacy
    def _check_run(self, n: int):
        """The run's shape from the (already constraint-checked) parameters and n; what the
        declarative constraints cannot say: one of epsilon / noise_multiplier, batch_size <= n,
        at most ``MAX_STEPS`` steps."""
        if (self.epsilon is None) == (self.noise_multiplier is None):
            raise ValueError("give exactly one of epsilon (noise calibrated by the accountant) or noise_multiplier")
        for name in ("epsilon", "noise_multiplier", "clip_norm", "learning_rate", "adam_eps"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"{name} must be finite, got {v!r}")
        epochs = check_int(self.epochs, "epochs")
        bs = check_int(self.batch_size, "batch_size")
        if self.sampling == "full":  # full-batch DP-GD: every step all n rows (batch_size unused)
            bs = n
        if bs > n:
            raise ValueError(f"batch_size ({bs}) must be <= the number of training examples ({n})")
        q = bs / n
        steps_per_epoch = -(-n // bs)
        if epochs > MAX_STEPS // steps_per_epoch:
            raise ValueError(
                f"epochs * ceil(n / batch_size) = {epochs} * {steps_per_epoch} steps exceeds the "
                f"supported maximum of {MAX_STEPS} steps; lower epochs or raise batch_size"
            )
        return float(self.delta), epochs, bs, q, steps_per_epoch

    def _sampling(self) -> str:
        """The sampling scheme as accounted: full batches are the q = 1 case of Poisson sampling
        (each step the Gaussian mechanism on the clipped sum, sensitivity C, add/remove)."""
        return "poisson" if self.sampling == "full" else self.sampling

    def _setup_privacy(self, n: int, budget=None, dtype=np.float64):
        """Calibrate (or take) the noise multiplier, account the run and charge its event to
        ``budget`` -- all before any randomness is drawn.  ``dtype``: the training precision
        (X's), in which the noise z * C * S * N(0, 1) must be representable."""
        delta, epochs, bs, q, spe = self._check_run(n)
        # optional tqdm and the thread count (n_threads <= 4096, DPFAST_NUM_THREADS) resolved here,
        # before the charge: a missing package or a bad setting must not cost budget
        bar_cls = _progress_bar_class() if self.progress else None
        n_threads = default_threads() if self.n_threads is None else check_threads(self.n_threads)
        steps = epochs * spe
        if self.noise_multiplier is not None:
            z = float(self.noise_multiplier)
        else:
            z = _privacy.calibrate_noise_multiplier(float(self.epsilon), delta, q, steps, self._sampling(), self.accountant)
        # A noise scale whose draws overflow the training dtype (noise_multiplier 1.797e308: every
        # draw is +-inf) makes the run diverge whatever the data: a public-parameter failure,
        # refused here before the charge instead of a FloatingPointError after the data is read.
        noise_std = z * float(self.clip_norm) * _privacy.sensitivity_factor(self._sampling())
        if not noise_std * _NORMAL_BOUND <= float(np.finfo(dtype).max):
            raise ValueError(f"noise_multiplier * clip_norm = {z!r} * {self.clip_norm!r} is too large: the Gaussian "
                             f"noise (up to {_NORMAL_BOUND:g} standard deviations) overflows {np.dtype(dtype).name}")
        self.noise_multiplier_ = z
        self.sample_rate_ = q
        self.steps_ = steps
        self.neighbours_ = "add_remove" if self._sampling() == "poisson" else "replace_one"
        if z == 0:
            event = None  # no noise: not private (epsilon_ = inf), nothing a budget could accept
            if _budget.resolve(budget) is not None:
                self._reset_fit()
                raise ValueError("noise_multiplier=0 releases the gradients without noise (epsilon = inf): "
                                 "it cannot be charged to a privacy budget")
            self._record_release(None, math.inf, delta, self.accountant)
        else:
            # T adaptive steps of the sampled Gaussian (Abadi et al. 2016; see dpfast.sgd._privacy)
            event = _privacy.run_event(z, q, steps, self._sampling())
            self._charge(event, budget)
            self._record_accounted(event, delta, self.accountant)  # the accountant's epsilon of event_
        return epochs, bs, q, spe, bar_cls, n_threads

    # ------------------------------------------------------------------------ training
    def _train(self, n: int, theta: np.ndarray, decay_end: int, step_fn, gen, run) -> None:
        epochs, bs, q, spe, bar_cls, n_threads = run  # from _setup_privacy, called (and charged) before any draw
        # The BLAS runs single-threaded (a scoped, re-entrant limit restored exactly on exit,
        # also with concurrent fits); the kernels split each product into fixed row blocks over
        # n_threads threads, so the result is bit-identical for every n_threads.
        with single_threaded_blas():
            t0, c0 = time.perf_counter(), time.process_time()
            self._loop(n, theta, decay_end, step_fn, gen, epochs, bs, q, spe, n_threads, bar_cls)
            self.train_seconds_ = time.perf_counter() - t0
            self._train_cpu_seconds = time.process_time() - c0  # benchmarks only

    def _loop(self, n, theta, decay_end, step_fn, gen, epochs, bs, q, spe, n_threads, bar_cls=None) -> None:
        dtype = theta.dtype
        P = theta.size
        C = float(self.clip_norm)
        z = self.noise_multiplier_
        noise_std = z * C * _privacy.sensitivity_factor(self._sampling())
        inv_batch = 1.0 / (q * n) if self._sampling() == "poisson" else 1.0 / bs
        full = np.arange(n, dtype=np.int64) if self.sampling == "full" else None
        opt = _OPTIMIZERS[self.optimizer]
        m = np.zeros(P, dtype) if opt >= 1 else None
        v = np.zeros(P, dtype) if opt == 2 else None
        gsum = np.empty(P, dtype)
        noise = np.empty(P, dtype) if noise_std > 0 else None
        mark = np.zeros(n, np.uint8) if self.sampling == "shuffle" else None
        ws = _clip.Workspace()
        ws.n_threads = n_threads
        history = []
        bar = None if bar_cls is None else bar_cls(total=epochs, desc=type(self).__name__, unit="epoch")
        t = 0
        n_clipped = 0
        n_seen = 0
        for _ in range(epochs):
            loss_sum = 0.0
            count = 0
            for _ in range(spe):
                with native_stream(gen) as cap:
                    if full is not None:
                        idx = full  # no sampling draw: every row, every step
                    elif mark is None:
                        idx = _clip.poisson_sample(cap, n, q)
                    else:
                        idx = _clip.fixed_sample(cap, n, bs, mark)
                    if noise is not None:
                        fill_noise(cap, "normal", noise, n_threads)  # N(0, 1), the one sampler family
                ls, nc = step_fn(ws, idx, gsum)
                loss_sum += ls
                count += idx.size
                n_clipped += nc
                t += 1
                _clip.optimizer_step(theta, gsum, noise, noise_std, inv_batch, float(self.alpha), decay_end,
                                     opt, float(self.learning_rate), float(self.momentum), float(self.beta2),
                                     float(self.adam_eps), t, m, v)
            n_seen += count
            history.append(loss_sum / max(count, 1))
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{history[-1]:.4f}")
        if bar is not None:
            bar.close()
        # Raised after private data was read, yet it leaks nothing beyond epsilon_: theta is
        # the released final iterate, a function of the initialization, the hyperparameters and
        # the noisy clipped sums (post-processing of the Gaussian mechanism outputs).  Whether
        # it is finite is a function of that released value, so the decision (raise or return)
        # is post-processing too.  (Raising withholds theta from the caller but reveals only
        # "theta has a non-finite entry", which anyone holding theta could compute.)
        if not np.isfinite(theta).all():
            raise FloatingPointError("training diverged (non-finite parameters); lower learning_rate")
        self.loss_history_ = np.asarray(history)
        self.clipped_fraction_ = n_clipped / max(n_seen, 1)
        self.n_iter_ = t


class _GLMBase(_DPSGDBase):
    _dask_fit = staticmethod(_dask.fit)  # DaskDispatchMixin: full-batch DP-GD on Dask collections

    def _fit_glm(self, X, yr, yl, K: int, loss: int, run):
        n, d = X.shape
        gen = check_random_state(self.random_state)
        dtype = X.dtype
        fi = bool(self.fit_intercept)
        P = d * K + (K if fi else 0)
        theta = np.zeros(P, dtype)
        gsum_views = {}

        def step(ws, idx, gsum):
            if "W" not in gsum_views:
                gsum_views["W"] = gsum[: d * K].reshape(d, K)
                gsum_views["b"] = gsum[d * K:] if fi else None
            W = theta[: d * K].reshape(d, K)
            b = theta[d * K:] if fi else None
            return _clip.glm_clipped_sum(ws, X, yr, yl, idx, W, b, loss, float(self.clip_norm),
                                         gsum_views["W"], gsum_views["b"], None, None)

        self._train(n, theta, d * K, step, gen, run)
        W = theta[: d * K].reshape(d, K)
        self.coef_ = np.ascontiguousarray(W.T)
        self.intercept_ = theta[d * K:].copy() if fi else np.zeros(K, dtype)
        return self

    def _scores(self, X) -> np.ndarray:
        check_fitted(self)
        X = validate_X(self, X, reset=False)
        # C-contiguous so that the product (NumPy's BLAS or its own loop) is the same for every
        # layout of X; intercept_ is a float for the regressor
        X = np.ascontiguousarray(X)
        coef = np.atleast_2d(np.asarray(self.coef_, dtype=X.dtype))
        return X @ coef.T + np.asarray(self.intercept_, dtype=X.dtype)


class DPSGDClassifier(DaskDispatchMixin, DPClassifierMixin, _GLMBase):
    """Differentially private linear classifier trained by DP-SGD.

    Two classes: binary logistic regression (one score, sigmoid); more: multinomial softmax
    regression.  Per-example gradients are (p_i - y_i) x_i (with the intercept, the row
    (x_i, 1)), so their norms ||p_i - y_i|| sqrt(||x_i||^2 + 1) are computed without forming
    them (see :doc:`/theory/erm`, DP-SGD, GLMs).

    Privacy: give ``epsilon`` (and ``delta``) to have the noise multiplier calibrated by the
    accountant, or ``noise_multiplier`` z directly; ``epsilon_`` is the run's epsilon at
    ``delta`` from ``dpfast.accounting`` (PLD by default, ``accountant="rdp"`` for RDP).
    ``sampling="poisson"`` (default; add/remove neighbours), ``"shuffle"`` (fixed-size uniform
    batches; replace-one) -- see ``dpfast.sgd._privacy`` -- or ``"full"``: full-batch DP-GD
    (every step all n rows, the Gaussian mechanism with sensitivity ``clip_norm``, T = ``epochs``
    steps, add/remove; ``batch_size`` unused), the only sampling offered on Dask input
    (:mod:`dpfast.sgd._dask`).  The label set is public schema:
    ``classes`` (all K labels for multinomial), default ``[0, 1]``; it is never read off the
    private labels (that would let one record change the model's shape).

    Parameters: ``clip_norm`` C, ``epochs``, ``batch_size`` (expected batch size under Poisson),
    ``learning_rate``, ``optimizer`` in {"sgd", "momentum", "adam"} (``momentum`` is Adam's
    beta1), ``alpha`` (L2 penalty (alpha/2)||W||^2, intercept unpenalized, data-independent so
    free), ``random_state`` (seed, Generator or SecureRandom: batches, noise and initialization are
    drawn from it, so a seed makes the fit reproducible), ``progress`` (tqdm bar per epoch; silent
    by default), ``n_threads`` (threads for the per-step matrix products during ``fit``, default
    1: per-step products are small and extra threads only pay on an idle machine; ``None``: the
    ``DPFAST_NUM_THREADS`` setting or min(usable CPUs, 4)).  The products are split into fixed
    row blocks, each one single-threaded BLAS call, so the fit is bit-identical for every
    ``n_threads``; while any dpfast fit runs, the BLAS is limited to one thread (a scoped,
    re-entrant limit through threadpoolctl that restores each BLAS's thread count exactly when
    the last concurrent fit ends).  Same seed => bit-identical fit for C/F-ordered, strided,
    read-only or unpickled ``X``.
    Steps: ``epochs * ceil(n / batch_size)``, at most ``MAX_STEPS`` = 10**9 (ValueError before
    anything is allocated).

    ``fit(X, y, *, budget=None)`` charges ``event_`` to ``budget`` (or to the budget of an
    enclosing ``with budget:`` block) before the first random draw; there is no
    ``sample_weight`` (per-example weights are not part of the clipped-sum kernels).

    Attributes after ``fit``: ``coef_`` (K', d) with K' = 1 for binary, ``intercept_``,
    ``classes_``, ``event_`` (``SelfComposed(PoissonSampled(q, Gaussian(z)), steps)``, or
    ``SampledWithoutReplacement`` with a replace-one Gaussian for ``sampling="shuffle"``; None
    when ``noise_multiplier=0``), ``epsilon_``, ``delta_``, ``accountant_`` ("pld" or "rdp"),
    ``noise_multiplier_``, ``sample_rate_``, ``steps_``,
    ``loss_history_`` (mean training loss per epoch, NOT private), ``clipped_fraction_`` (share of
    sampled examples whose gradient was clipped, NOT private), ``train_seconds_`` (training loop
    wall time, excluding validation and accounting; NOT private), ``neighbours_``.
    """

    def __init__(
        self,
        *,
        epsilon: Optional[float] = None,
        delta: float = 1e-5,
        noise_multiplier: Optional[float] = None,
        clip_norm: float = 1.0,
        epochs: int = 10,
        batch_size: int = 256,
        learning_rate: float = 0.1,
        optimizer: str = "sgd",
        momentum: float = 0.9,
        beta2: float = 0.999,
        adam_eps: float = 1e-8,
        alpha: float = 0.0,
        fit_intercept: bool = True,
        sampling: str = "poisson",
        accountant: str = "pld",
        random_state: RandomLike = None,
        progress: bool = False,
        n_threads: Optional[int] = 1,
        classes: Optional[Sequence] = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.clip_norm = clip_norm
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.beta2 = beta2
        self.adam_eps = adam_eps
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.sampling = sampling
        self.accountant = accountant
        self.random_state = random_state
        self.progress = progress
        self.n_threads = n_threads
        self.classes = classes

    _parameter_constraints = {**_CONSTRAINTS, "classes": ["array-like", None]}
    _expected_failures = {
        "check_classifiers_classes": _base.PUBLIC_LABELS,
        "check_classifiers_train": _base.PUBLIC_LABELS,
        "check_decision_proba_consistency": _base.PUBLIC_LABELS,
    }

    def fit(self, X, y, *, budget=None) -> "DPSGDClassifier":
        """Train privately; see the class docstring for the guarantee.  Returns self.

        ``budget``: a :class:`dpfast.PrivacyBudget` (None: the one of an enclosing
        ``with budget:`` block, if any) charged with ``event_`` before any randomness is drawn;
        ``BudgetExceededError`` leaves the estimator unfitted.  Dask input: full-batch DP-GD
        (``sampling="full"``) in :mod:`dpfast.sgd._dask`."""
        self._validate_params()
        self._reset_fit()
        X = _layout(validate_X(self, X, reset=True))
        y = validate_y(self, y, X.shape[0], classifier=True)
        classes, lab = check_label_set(y, self.classes)
        lab = np.ascontiguousarray(lab, dtype=np.int64)
        run = self._setup_privacy(X.shape[0], budget, X.dtype)
        self.classes_ = classes
        if classes.size == 2:
            yr = _loss_table.binary_labels("logistic", lab).astype(X.dtype)
            return self._fit_glm(X, yr, None, 1, _LOGISTIC, run)
        return self._fit_glm(X, None, lab, int(classes.size), _SOFTMAX, run)

    def decision_function(self, X) -> np.ndarray:
        """Scores x.coef + intercept: shape (n,) for binary, (n, K) for multinomial."""
        s = self._scores(X)
        return s[:, 0] if s.shape[1] == 1 else s

    def predict_proba(self, X) -> np.ndarray:
        """Sigmoid (binary) or softmax (multinomial) of the scores."""
        s = self.decision_function(X).astype(np.float64)
        if s.ndim == 1:
            p1 = 0.5 * (1.0 + np.tanh(0.5 * s))
            return np.column_stack([1.0 - p1, p1])
        s = s - s.max(axis=1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """The class of the largest score (post-processing of the released model)."""
        s = self.decision_function(X)
        k = (s > 0).astype(np.int64) if s.ndim == 1 else s.argmax(axis=1)
        return self.classes_[k]


class DPSGDRegressor(DaskDispatchMixin, DPRegressorMixin, _GLMBase):
    """Differentially private linear regression (squared loss (1/2)(x.w + b - y)^2) by DP-SGD.

    Per-example gradients (x_i.w + b - y_i)(x_i, 1) have norm |r_i| sqrt(||x_i||^2 + 1); they are
    clipped to ``clip_norm`` without being formed (see :doc:`/theory/erm`, DP-SGD, GLMs).
    Parameters, privacy and attributes as :class:`DPSGDClassifier` (``coef_`` has shape (d,),
    ``intercept_`` is a float).
    """

    def __init__(
        self,
        *,
        epsilon: Optional[float] = None,
        delta: float = 1e-5,
        noise_multiplier: Optional[float] = None,
        clip_norm: float = 1.0,
        epochs: int = 10,
        batch_size: int = 256,
        learning_rate: float = 0.1,
        optimizer: str = "sgd",
        momentum: float = 0.9,
        beta2: float = 0.999,
        adam_eps: float = 1e-8,
        alpha: float = 0.0,
        fit_intercept: bool = True,
        sampling: str = "poisson",
        accountant: str = "pld",
        random_state: RandomLike = None,
        progress: bool = False,
        n_threads: Optional[int] = 1,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.clip_norm = clip_norm
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.beta2 = beta2
        self.adam_eps = adam_eps
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.sampling = sampling
        self.accountant = accountant
        self.random_state = random_state
        self.progress = progress
        self.n_threads = n_threads

    def fit(self, X, y, *, budget=None) -> "DPSGDRegressor":
        """Train privately; ``budget`` as for :meth:`DPSGDClassifier.fit`.  Returns self."""
        self._validate_params()
        self._reset_fit()
        X = _layout(validate_X(self, X, reset=True))
        y = validate_y(self, y, X.shape[0], classifier=False)
        run = self._setup_privacy(X.shape[0], budget, X.dtype)
        self._fit_glm(X, np.ascontiguousarray(y, dtype=X.dtype), None, 1, _SQUARED, run)
        self.coef_ = self.coef_[0]
        self.intercept_ = float(self.intercept_[0])
        return self

    def predict(self, X) -> np.ndarray:
        """x.coef + intercept (post-processing of the released model)."""
        return self._scores(X)[:, 0]


class DPMLPClassifier(DPClassifierMixin, _DPSGDBase):
    """Two-layer network dense(hidden) -> activation -> dense -> softmax cross-entropy, by DP-SGD.

    Per-example gradient norms come from ghost norms: a dense layer with input a_i and
    back-propagated output gradient g_i has per-example gradient norm ||g_i|| sqrt(||a_i||^2 + 1)
    (bias included); clipping is ``clipping="flat"`` (total norm <= C) or ``"per_layer"`` (each
    layer <= C/sqrt(2), so the total is <= C too); each layer's clipped sum is A^T diag(c) G
    (see :doc:`/theory/erm`, DP-SGD, ghost norms).  No B x P array is ever formed.

    ``hidden`` (default 256), ``activation`` in {"relu", "tanh"}; initialization (He-uniform for
    relu, Glorot-uniform for tanh, zero biases) is drawn from ``random_state``.  Everything else
    as :class:`DPSGDClassifier`.  Attributes: ``coefs_`` [W1 (d, hidden), W2 (hidden, K)],
    ``intercepts_`` [b1, b2], ``classes_``, ``epsilon_``, ``loss_history_`` (not private), ...
    """

    def __init__(
        self,
        hidden: int = 256,
        *,
        activation: str = "relu",
        clipping: str = "flat",
        classes: Optional[Sequence] = None,
        epsilon: Optional[float] = None,
        delta: float = 1e-5,
        noise_multiplier: Optional[float] = None,
        clip_norm: float = 1.0,
        epochs: int = 10,
        batch_size: int = 256,
        learning_rate: float = 0.1,
        optimizer: str = "sgd",
        momentum: float = 0.9,
        beta2: float = 0.999,
        adam_eps: float = 1e-8,
        alpha: float = 0.0,
        fit_intercept: bool = True,
        sampling: str = "poisson",
        accountant: str = "pld",
        random_state: RandomLike = None,
        progress: bool = False,
        n_threads: Optional[int] = 1,
    ) -> None:
        self.hidden = hidden
        self.activation = activation
        self.clipping = clipping
        self.classes = classes
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.clip_norm = clip_norm
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.beta2 = beta2
        self.adam_eps = adam_eps
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.sampling = sampling
        self.accountant = accountant
        self.random_state = random_state
        self.progress = progress
        self.n_threads = n_threads

    _parameter_constraints = {
        **_CONSTRAINTS,
        "hidden": [Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions({"relu", "tanh"})],
        "clipping": [StrOptions({"flat", "per_layer"})],
        "classes": ["array-like", None],
    }
    _expected_failures = {
        "check_classifiers_classes": _base.PUBLIC_LABELS,
        "check_classifiers_train": _base.PUBLIC_LABELS,
        "check_decision_proba_consistency": _base.PUBLIC_LABELS,
    }

    def fit(self, X, y, *, budget=None) -> "DPMLPClassifier":
        """Train privately; ``budget`` as for :meth:`DPSGDClassifier.fit` (charged before the
        initialization is drawn).  Returns self."""
        self._validate_params()
        self._reset_fit()
        X = _layout(validate_X(self, X, reset=True))
        y = validate_y(self, y, X.shape[0], classifier=True)
        h = check_int(self.hidden, "hidden")
        if not self.fit_intercept:
            raise ValueError("DPMLPClassifier always has biases; fit_intercept=False is not supported")
        classes, lab = check_label_set(y, self.classes)
        # the parameters and the training loop's P-vectors (theta, gradient sum, noise, moments)
        # sized from public quantities, refused before the charge rather than by a MemoryError after
        P = X.shape[1] * h + h + h * int(classes.size) + int(classes.size)
        check_allocation((6 * P,), X.dtype.itemsize, "DPMLPClassifier parameters (6 vectors of d*hidden + "
                         "hidden + hidden*K + K)")
        run = self._setup_privacy(X.shape[0], budget, X.dtype)
        self.classes_ = classes
        n, d = X.shape
        K = int(classes.size)
        gen = check_random_state(self.random_state)
        act = 0 if self.activation == "relu" else 1
        theta = self._init_params(d, h, K, act, gen, X.dtype)
        mode = 0 if self.clipping == "flat" else 1
        C = float(self.clip_norm)

        def step(ws, idx, gsum):
            return _clip.mlp_clipped_sum(ws, X, lab, idx, h, K, act, theta, C, mode, gsum, None, None)

        self._act = act
        self._train(n, theta, theta.size, step, gen, run)
        self._theta = theta
        W1 = theta[: d * h].reshape(d, h)
        b1 = theta[d * h: d * h + h]
        W2 = theta[d * h + h: d * h + h + h * K].reshape(h, K)
        b2 = theta[d * h + h + h * K:]
        self.coefs_ = [W1, W2]
        self.intercepts_ = [b1, b2]
        return self

    @staticmethod
    def _init_params(d, h, K, act, gen, dtype):
        P = d * h + h + h * K + K
        theta = np.zeros(P, dtype)
        gain = math.sqrt(6.0 / d) if act == 0 else math.sqrt(6.0 / (d + h))
        theta[: d * h] = gen.uniform(-gain, gain, d * h)
        g2 = math.sqrt(6.0 / (h + K))
        theta[d * h + h: d * h + h + h * K] = gen.uniform(-g2, g2, h * K)
        return theta

    def decision_function(self, X) -> np.ndarray:
        """Output-layer scores, shape (n, K)."""
        check_fitted(self)
        X = _layout(validate_X(self, X, reset=False))
        theta = self._theta.astype(X.dtype, copy=False)
        out = np.empty((X.shape[0], self.classes_.size), X.dtype)
        _clip.mlp_forward(X, int(self.hidden), int(self.classes_.size), self._act, theta, out)
        return out

    def predict_proba(self, X) -> np.ndarray:
        """Softmax of the scores."""
        s = self.decision_function(X).astype(np.float64)
        s -= s.max(axis=1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """The class of the largest score (post-processing of the released model)."""
        s = self.decision_function(X)
        return self.classes_[s.argmax(axis=1)]
