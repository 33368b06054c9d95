"""Laplace and Gaussian mechanisms on real arrays: the fast, vectorized path.

See: :doc:`/theory/conventions` (Conventions; Samplers: Laplace, Gaussian) and :doc:`/theory/mechanisms`.

All functions take array-likes of any shape and broadcast their parameters NumPy-style
(``values``, ``sensitivity`` and ``epsilon`` are broadcast together; the result has the
broadcast shape).  float32 input gives float32 output, float64 stays float64, integers and
bools become float64.  The noise is drawn in a native kernel (``dpfast._core``) that releases
the GIL and uses several threads for large arrays; the output depends only on the random
stream, never on the number of threads.

Randomness (``rng=``): ``None``, an ``int`` seed, a ``numpy.random.Generator`` or
:class:`dpfast.random.SecureRandom` (see :func:`dpfast.random.check_random_state`).  The same
seed gives the same output on every run; a scalar input gives exactly the value a 1-element
array gives.  For Laplace noise, output ``i`` is a function of the ``i``-th 64-bit word of the
stream alone, so ``n`` scalar calls on one Generator reproduce one call of length ``n`` (a call
on Python floats skips the kernel and evaluates the same formula on the same word in Python:
same double, about 1 microsecond; Gaussian calls on Python floats draw one variate from the
kernel's sampler through a scalar binding, the same words and double as a 1-element array).
For Gaussian noise (a 256-layer ziggurat), output ``i`` is a function of word ``i`` except for
the about 1.2% of outputs whose first word the ziggurat rejects: those are finished, in index
order, with the words that follow the first ``n`` (csrc/samplers/continuous.hpp, add_noise).

.. warning::
   These samplers are **not floating-point safe**.  They return IEEE doubles built with
   ``log`` and a ziggurat; the set of representable outputs depends on the input, and an
   adversary who sees all bits of the output can learn the input (Mironov 2012, "On
   significance of the least significant bits for differential privacy").  The guarantee
   below holds for the idealised real-valued mechanism.  When the exact bits are released,
   use the floating-point-safe samplers in :mod:`dpfast.mechanisms.discrete`
   (``discrete_laplace``, ``discrete_gaussian``: exact, integer arithmetic) and
   :mod:`dpfast.mechanisms.snapping` (Mironov's snapping mechanism for real-valued Laplace),
   paired with :class:`dpfast.random.SecureRandom`.

Threads: the environment variable ``DPFAST_NUM_THREADS`` caps the number of threads used by
the kernel (default: the number of usable CPUs, at most 4).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from dpfast import _core
from dpfast._validation import Delta, Epsilon, Options, Positive, check_size, check_values, unchecked, validate_params
from dpfast.calibrate import gaussian_sigma, laplace_scale
from dpfast.mechanisms import _events
from dpfast.random import (
    RNG,
    RandomLike,
    allocate_output as _empty,
    draw_into as _draw,
    native_stream,
    noise_dtype as _noise_dtype,
)

if TYPE_CHECKING:
    from dpfast.budget import PrivacyBudget

__all__ = ["laplace", "gaussian", "laplace_noise", "gaussian_noise"]

# the calibrations, for parameters checked by laplace's and gaussian's own (identical) constraints
_laplace_scale = unchecked(laplace_scale)
_gaussian_sigma = unchecked(gaussian_sigma)

Result = Union[np.ndarray, np.floating]
_TWO_M53 = 2.0**-53
_MAX_NOISE_UNITS = 40.0
_MAX_SCALE_F64 = float(np.finfo(np.float64).max) / _MAX_NOISE_UNITS


def _noise_plan(kind: str, values: Optional[np.ndarray], dtype, shape, scale, what: str = "scale",
                label: str = "", build=None, args: tuple = ()) -> _events.Plan:
    """The plan of ``out = values + scale * noise`` with values/scale broadcast to ``shape``
    (validated): every check and the output's allocation, no draw.  ``label``, ``build`` and
    ``args``: the event of a mechanism call (none for the samplers)."""
    if type(scale) is float:
        finite = math.isfinite(scale)
        scale = np.full(1, scale)
    else:
        scale = np.asarray(scale, dtype=np.float64)
        finite = bool(np.isfinite(scale).all())
    if not finite:
        raise ValueError("the noise scale overflows (sensitivity / epsilon is not a finite double); "
                         "epsilon is too small for this sensitivity")
    if not float(np.min(scale)) > 0.0:
        # sensitivity / epsilon below the smallest double (e.g. 5e-324 / 1e300) rounds to 0:
        # the release would carry no noise at all (issue 21 item 8: refused before any draw)
        raise ValueError(f"the noise {what} underflows to 0 (below the smallest double); "
                         "epsilon is too large for this sensitivity")
    # The largest noise the kernels can return is below _MAX_NOISE_UNITS * scale (Laplace:
    # 53 ln 2 = 36.7 from the 2^-53 grid of uniforms; the ziggurat's Gaussian tail is shorter).
    # Refuse scales for which it could overflow the output dtype (float32 laplace_noise(3e38) gave
    # +-inf): a check on the public scale only, never on the data.
    if float(np.max(scale)) > np.finfo(dtype).max / _MAX_NOISE_UNITS:
        raise ValueError(f"the noise {what} {float(np.max(scale)):.6g} is too large for {np.dtype(dtype).name} "
                         f"output: noise up to {_MAX_NOISE_UNITS:g} x scale would overflow to inf; "
                         f"use {'float64 or ' if np.dtype(dtype) != np.float64 else ''}a scale "
                         f"<= {np.finfo(dtype).max / _MAX_NOISE_UNITS:.6g}")
    out = _empty(shape, np.dtype(dtype))  # before the charge: a refused allocation spends nothing
    if scale.size == 1:
        scale_arr = scale.reshape(1)
    else:
        scale_arr = np.ascontiguousarray(np.broadcast_to(scale, shape))
    if values is not None:
        if values.shape != shape:
            values = np.broadcast_to(values, shape)
        values = np.ascontiguousarray(values, dtype=dtype)

    def draw(gen: np.random.Generator) -> Result:
        res = _draw(gen, kind, out, values, scale_arr)
        return res if res.ndim else res[()]

    return _events.Plan(label, build, args, draw)


def _broadcast_shape(*shapes, names) -> tuple:
    if all(s == shapes[0] for s in shapes[1:]) or all(not s for s in shapes[1:]):
        return shapes[0]
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        desc = ", ".join(f"{n} {s}" for n, s in zip(names, shapes))
        raise ValueError(f"shapes do not broadcast: {desc}") from None


@validate_params(sensitivity=Positive(), epsilon=Epsilon(), rng=RNG)
def laplace(values: ArrayLike, sensitivity: ArrayLike, epsilon: ArrayLike,
            rng: RandomLike = None, *, budget: Optional["PrivacyBudget"] = None) -> Result:
    """The Laplace mechanism: ``values + Lap(sensitivity / epsilon)`` noise, elementwise.

    Guarantee (:doc:`/theory/mechanisms` Samplers/Laplace; :doc:`/theory/mechanisms`): if ``values`` = f(X)
    and ``sensitivity`` bounds the **l1** sensitivity ||f(X) - f(X')||_1 over neighbouring
    data sets (under whichever neighbouring relation the caller used to derive it), the
    output is (epsilon, 0)-DP.  Noise of scale b = sensitivity / epsilon
    (:func:`dpfast.calibrate.laplace_scale`) is added to every entry.  With array parameters,
    entry i gets scale sensitivity_i / epsilon_i; the release is then
    max_{X~X'} sum_i epsilon_i |f_i(X) - f_i(X')| / sensitivity_i - DP.

    Not floating-point safe (see the module docstring); for exact bits use
    :mod:`dpfast.mechanisms.snapping` or :mod:`dpfast.mechanisms.discrete`.

    Parameters
    ----------
    values : array_like
        Finite real values (any shape); float32 stays float32, other types become float64.
    sensitivity : float or array_like
        l1 sensitivity, > 0 and finite; broadcast against ``values``.
    epsilon : float or array_like
        > 0 and finite; broadcast against ``values``.
    rng : None, int, numpy.random.Generator or SecureRandom
    budget : PrivacyBudget, optional
        Charged with the call's event before any noise is drawn (default: the ``with
        budget:`` default, if any).  Event: ``Laplace(scale=sensitivity/epsilon,
        sensitivity)`` for scalar parameters (the whole array is one release); see
        :mod:`dpfast.mechanisms._events` for array parameters and :func:`event_of`.

    Returns
    -------
    ndarray of the broadcast shape (a NumPy scalar for 0-d input).

    Raises
    ------
    ValueError
        NaN/inf in ``values``; non-positive or non-finite ``sensitivity``/``epsilon``;
        shapes that do not broadcast.
    TypeError
        Non-numeric ``values`` or an ``rng`` of an unsupported type.
    BudgetExceededError
        The release does not fit in the budget (nothing drawn, ``rng`` untouched).
    """
    return _laplace_plan(values, sensitivity, epsilon).release(rng, budget)


@_events.planned_by(laplace)
def _laplace_plan(values, sensitivity, epsilon) -> _events.Plan:
    """:func:`laplace`'s plan: the scale (:func:`dpfast.calibrate.laplace_scale`), the event,
    the checked data; no draw.  ``sensitivity`` and ``epsilon`` are checked already."""
    scale = _laplace_scale(epsilon, sensitivity)
    if type(values) is float and type(scale) is float and math.isfinite(values) \
            and 0.0 < scale <= _MAX_SCALE_F64:  # (False for a scale that underflows to 0)
        return _events.Plan("laplace", _events.laplace_event, (sensitivity, scale, ()),
                            lambda gen: _laplace1(values, scale, gen))
    x = check_values(values)
    shape = _broadcast_shape(x.shape, np.shape(scale), names=("values", "sensitivity / epsilon"))
    return _noise_plan("laplace", x, x.dtype, shape, scale, "scale = sensitivity / epsilon",
                       "laplace", _events.laplace_event, (sensitivity, scale, shape))


def _laplace1(value: float, b: float, gen: np.random.Generator) -> np.float64:
    """``value`` + Lap(b) for a Python float: the kernel's formula (csrc/random/distributions.hpp,
    laplace) on one word, since output i of add_laplace is a function of word i alone, so it
    returns the double a 1-element array gets, in about 1 microsecond instead of 5."""
    w = int(gen.bit_generator.random_raw())
    e = -math.log(((w >> 11) + 1) * _TWO_M53)
    return np.float64(value + b * (-e if w & 1 else e))


@validate_params(sensitivity=Positive(), epsilon=Epsilon(), delta=Delta(allow_zero=False),
                 calibration=Options("analytic", "classical"), rng=RNG)
def gaussian(values: ArrayLike, sensitivity: ArrayLike, epsilon: ArrayLike, delta: float,
             rng: RandomLike = None, calibration: str = "analytic", *,
             budget: Optional["PrivacyBudget"] = None) -> Result:
    """The Gaussian mechanism: ``values + N(0, sigma^2)`` noise, elementwise.

    Guarantee (:doc:`/theory/mechanisms` Samplers/Gaussian; :doc:`/theory/mechanisms`): if
    ``sensitivity`` bounds the **l2** sensitivity ||f(X) - f(X')||_2 over neighbouring data
    sets (under whichever neighbouring relation the caller used to derive it; replace-one
    sensitivities are typically twice the add/remove ones, :doc:`/theory/conventions` Conventions),
    the output is (epsilon, delta)-DP, with sigma from
    :func:`dpfast.calibrate.gaussian_sigma`:

    * ``calibration="analytic"`` (default): the smallest sigma whose exact privacy profile
      Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D) is <= delta
      (Balle & Wang 2018, Theorem 8); valid for every epsilon > 0.
    * ``calibration="classical"``: sigma = D sqrt(2 ln(1.25/delta)) / epsilon (Dwork & Roth,
      Theorem A.1); valid for epsilon < 1 only (epsilon >= 1 raises ``ValueError``).

    With array ``epsilon``/``sensitivity``, entry i gets sigma(epsilon_i, delta,
    sensitivity_i); ``delta`` is a scalar.

    Not floating-point safe (see the module docstring); for exact bits use
    ``discrete_gaussian`` in :mod:`dpfast.mechanisms.discrete`.

    Parameters
    ----------
    values : array_like
        Finite real values (any shape); float32 stays float32, other types become float64.
    sensitivity : float or array_like
        l2 sensitivity, > 0 and finite.
    epsilon : float or array_like
        > 0 and finite.
    delta : float
        In (0, 1).
    rng : None, int, numpy.random.Generator or SecureRandom
    calibration : {"analytic", "classical"}
    budget : PrivacyBudget, optional
        Charged with the call's event before any noise is drawn (default: the ``with
        budget:`` default, if any).  Event: ``Gaussian(noise_multiplier=sigma/sensitivity,
        sensitivity)`` for scalar parameters, whichever the calibration (the noise is
        N(0, sigma^2) either way, and that event is exact for it; the whole array is one
        release); see :mod:`dpfast.mechanisms._events` for array parameters.

    Raises
    ------
    ValueError
        Bad ``values``, ``sensitivity``, ``epsilon``, ``delta`` or ``calibration``.
    BudgetExceededError
        The release does not fit in the budget (nothing drawn, ``rng`` untouched).
    """
    return _gaussian_plan(values, sensitivity, epsilon, delta, calibration).release(rng, budget)


@_events.planned_by(gaussian)
def _gaussian_plan(values, sensitivity, epsilon, delta, calibration) -> _events.Plan:
    """:func:`gaussian`'s plan: sigma (:func:`dpfast.calibrate.gaussian_sigma`), the event, the
    checked data; no draw.  The scalar parameters are checked already."""
    sigma = _gaussian_sigma(epsilon, delta, sensitivity, calibration)
    if type(values) is float and type(sigma) is float and math.isfinite(values) and sigma <= _MAX_SCALE_F64:
        # Python-scalar fast path: one variate from the kernel's sampler without the array
        # set-up (_core.normal1: output 0 of add_normal with one element, same words, same double).
        return _events.Plan("gaussian", _events.gaussian_event, (sensitivity, sigma, ()),
                            lambda gen: _normal1(values, sigma, gen))
    x = check_values(values)
    shape = _broadcast_shape(x.shape, np.shape(sigma), names=("values", "sigma (sensitivity, epsilon)"))
    return _noise_plan("normal", x, x.dtype, shape, sigma, "sigma (from sensitivity, epsilon, delta)",
                       "gaussian", _events.gaussian_event, (sensitivity, sigma, shape))


def _normal1(value: float, sigma: float, gen: np.random.Generator) -> np.float64:
    with native_stream(gen) as cap:
        z = _core.normal1(cap)
    return np.float64(value + sigma * z)


def _noise_shape(scale_shape: tuple, size, name: str, itemsize: int = 8) -> tuple:
    shape = check_size(size, itemsize=itemsize)
    if shape is None:
        return scale_shape
    try:
        np.broadcast_to(np.empty(scale_shape, dtype=np.uint8), shape)
    except ValueError:
        raise ValueError(f"{name} of shape {scale_shape} does not broadcast to size {shape}") from None
    return shape


@validate_params(scale=Positive(), rng=RNG)
def laplace_noise(scale: ArrayLike, size=None, rng: RandomLike = None,
                  dtype: DTypeLike = np.float64) -> Result:
    """Laplace(0, scale) noise, like ``numpy.random.Generator.laplace(0, scale, size)``.

    ``scale`` (> 0, finite; array or scalar) is broadcast to ``size`` (default: its own
    shape).  Same kernel and stream semantics as :func:`laplace` (``laplace_noise(b, n,
    rng=s)`` equals ``laplace(np.zeros(n), b, 1.0, rng=s)``).  Not floating-point safe.
    """
    dt = _noise_dtype(dtype)
    shape = _noise_shape(np.shape(scale), size, "scale", dt.itemsize)
    return _noise_plan("laplace", None, dt, shape, scale).draw(rng)


@validate_params(sigma=Positive(), rng=RNG)
def gaussian_noise(sigma: ArrayLike, size=None, rng: RandomLike = None,
                   dtype: DTypeLike = np.float64) -> Result:
    """N(0, sigma^2) noise, like ``numpy.random.Generator.normal(0, sigma, size)``.

    ``sigma`` (> 0, finite) is broadcast to ``size`` (default: its own shape).  Same kernel
    and stream semantics as :func:`gaussian`.  Not floating-point safe.
    """
    dt = _noise_dtype(dtype)
    shape = _noise_shape(np.shape(sigma), size, "sigma", dt.itemsize)
    return _noise_plan("normal", None, dt, shape, sigma, "sigma").draw(rng)
