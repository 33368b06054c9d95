"""Randomness for dpfast: the ``rng=`` convention and the secure generator.

Every sampler in dpfast takes ``rng``:

* ``None`` -- a fresh ``numpy.random.Generator`` seeded from OS entropy;
* an ``int`` -- a seed (same seed, same output, on every run);
* a ``numpy.random.Generator`` -- used as is (its state advances);
* a :class:`SecureRandom` -- ChaCha20 (RFC 8439) keyed with 256 bits of ``os.urandom``.

Native kernels draw 64-bit words through NumPy's C bit-generator interface, while the
Python side holds the bit generator's lock, so a Generator shared between threads stays
consistent even though the kernels release the GIL.

Floating-point safety (see :doc:`/theory/conventions`, Randomness).  Under any generator the
continuous samplers (``laplace``, ``gaussian``, and the Gumbel/exponential noise of the
selection mechanisms) produce IEEE doubles whose low-order bits can leak the input (Mironov
2012).  The floating-point-safe samplers -- the ones to pair with :class:`SecureRandom` when
the threat model includes an adversary who sees exact output bits and could predict a
non-cryptographic generator -- are:

* exact, integer arithmetic only (Canonne, Kamath & Steinke 2020), in
  ``dpfast.mechanisms.discrete``: ``bernoulli_exp`` (Bernoulli(exp(-gamma)), gamma
  rational), ``discrete_laplace``, ``discrete_gaussian``, ``discrete_laplace_mechanism``,
  ``discrete_gaussian_mechanism`` (noise on an integer lattice; outputs are lattice points);
* ``dpfast.mechanisms.snapping.snapping`` (Mironov 2012): real-valued Laplace, clamped and
  snapped to a power-of-two grid; floating point is used, but its effect is bounded by the
  mechanism's accounting (``snapping_epsilon``; caveats in its docstring: libm ``log`` is
  not proven correctly rounded).

Only the calibration helpers of those samplers (e.g. ``discrete_gaussian_sigma2``) use
floating point, and they round the noise parameter up.

Continuous noise: every continuous noise draw in dpfast (the mechanisms, DP-SGD, the private
linear models, the public-data learners, report-noisy-max) comes from one family of samplers
on the 64-bit word stream, ``csrc/random/distributions.hpp``; from Python,
:func:`standard_normal`, :func:`standard_laplace`, :func:`standard_exponential` and
:func:`standard_gumbel` (never NumPy's ``Generator.normal`` & co., whose float32 normal is
built from 32-bit integers).  Their output depends on the stream only, never on the number of
threads.

Keyed stream (DP-SGD's noise, :func:`add_normal_noise`): from a NumPy ``Generator``, two 64-bit
words per call key a Philox4x32-10 counter-based stream (Salmon et al. 2011), whose word j the
same ziggurat maps to variate j; threads fill disjoint ranges, with the same output for any thread
count.  A :class:`SecureRandom` keeps its own ChaCha20 words.

Speed: ChaCha20 computes four blocks (32 words of 64 bits) per refill in a SIMD-friendly
kernel (``csrc/random/chacha20.hpp``), and the exact samplers draw 32-bit halves and single
bits from cached words, so the secure path runs at millions of samples per second.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Union

import numpy as np

from dpfast import _core
from dpfast._chacha import ChaCha20, check_n_children
from dpfast._threads import default_threads
from dpfast._validation import Constraint, check_size, validate_params

__all__ = [
    "SecureRandom",
    "ChaCha20",
    "RandomLike",
    "check_random_state",
    "is_secure",
    "native_stream",
    "standard_normal",
    "standard_laplace",
    "standard_exponential",
    "standard_gumbel",
]


class SecureRandom(np.random.Generator):
    """A cryptographically secure ``numpy.random.Generator``.

    Its bit generator is ChaCha20 keyed from ``os.urandom(32)``; it cannot be seeded
    (a seeded stream is not secret).  Being a ``Generator``, it can be passed anywhere a
    Generator is accepted; dpfast recognises it and its floating-point-safe samplers are the
    ones to pair it with (see the module docstring).


    A secret stream must never be duplicated: pickling or copying the generator, and
    copying, pickling or reading/setting the ``state`` of its bit generator, raise
    ``TypeError`` (each would copy the key and replay the stream).  Independent streams come
    from :meth:`spawn`, whose children are keyed afresh from ``os.urandom``.

    As an estimator's ``random_state``: scikit-learn's ``clone`` (``cross_val_score``,
    ``GridSearchCV``, pipelines, :class:`~dpfast.model_selection.PrivateRandomSearch`) gives every
    clone of a dpfast estimator a fresh ``SecureRandom`` (its own key; never a copy of this
    one), and the search gives each of its runs a fresh one.  A fitted model's ``random_state``
    is therefore not the stream that drew its noise, and refitting draws new noise.  Sending
    such an estimator to another *process* (joblib's default ``loky`` backend with
    ``n_jobs > 1``) pickles it and is refused, before anything is fitted or charged: use
    ``n_jobs=1`` or joblib's ``threading`` backend, or ``random_state=None``.
    """

    def __init__(self) -> None:
        # ChaCha20() with neither seed nor key draws its key from os.urandom(32) and marks
        # itself secret (no state export, pickling or copying).
        super().__init__(ChaCha20())

    def __repr__(self) -> str:
        return "SecureRandom(ChaCha20, key from os.urandom)"

    def __reduce__(self):
        # Pickling would copy the key; a secure stream must not be duplicated.
        raise TypeError("SecureRandom cannot be pickled or copied (it would replay the secret stream); "
                        "use spawn(n) for independent generators.  An estimator with random_state=SecureRandom() "
                        "is cloned with a fresh stream (sklearn.base.clone) but cannot be sent to another "
                        "process: use n_jobs=1 or joblib's threading backend")

    def __copy__(self):
        self.__reduce__()

    def __deepcopy__(self, memo):
        self.__reduce__()

    def __getstate__(self):
        self.__reduce__()

    def __setstate__(self, state):
        self.__reduce__()

    def spawn(self, n_children: int) -> list:
        """``n_children`` independent :class:`SecureRandom` generators, each keyed with fresh
        256-bit ``os.urandom`` entropy (so no child is computable from this generator's state or
        from another child's), as secure as this one."""
        return [SecureRandom() for _ in range(check_n_children(n_children))]


RandomLike = Union[None, int, np.integer, np.random.Generator, SecureRandom]


def check_random_state(rng: RandomLike) -> np.random.Generator:
    """Turn an ``rng=`` / ``random_state=`` argument into a ``numpy.random.Generator``."""
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if type(rng) is int and rng >= 0:  # fast path (a seed): the result of the checks below
        return np.random.default_rng(rng)
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError("rng must be None, an int seed, a numpy Generator or SecureRandom; got a bool")
    if isinstance(rng, numbers.Integral):
        if int(rng) < 0:
            raise ValueError(f"rng seed must be a non-negative integer, got {rng}")
        return np.random.default_rng(int(rng))
    if isinstance(rng, np.random.RandomState):
        raise TypeError(
            "numpy.random.RandomState is not supported (no C stream access); "
            "pass numpy.random.default_rng(seed) or a seed instead"
        )
    raise TypeError(
        "rng must be None, an int seed, a numpy.random.Generator or dpfast.random.SecureRandom; "
        f"got {type(rng).__name__}"
    )


class _RNG(Constraint):
    """The ``rng=`` constraint of :func:`dpfast._validation.validate_params`: the argument
    becomes a ``numpy.random.Generator`` (:func:`check_random_state`)."""

    def spec(self, name):
        return check_random_state, {}

    def __repr__(self) -> str:
        return "RNG"


#: ``@validate_params(rng=RNG)``: ``None``, a seed, a Generator or :class:`SecureRandom`,
#: passed on as a ``numpy.random.Generator``.
RNG = _RNG()


def is_secure(gen: np.random.Generator) -> bool:
    """True when ``gen`` draws from a cryptographically secure stream."""
    return isinstance(gen, SecureRandom)


class native_stream:  # noqa: N801  (used like a function: ``with native_stream(gen) as cap``)
    """Context manager giving the capsule a native kernel draws from, holding the bit
    generator's lock.

    The kernels release the GIL; the lock keeps other threads off the same state.  A plain
    class rather than ``contextlib.contextmanager``: that decorator costs a few microseconds
    per call, which small mechanism calls would feel.
    """

    __slots__ = ("_bit_generator",)

    def __init__(self, gen: np.random.Generator) -> None:
        self._bit_generator = gen.bit_generator

    def __enter__(self):
        self._bit_generator.lock.acquire()
        return self._bit_generator.capsule

    def __exit__(self, *exc) -> None:
        self._bit_generator.lock.release()


# ----------------------------------------------------------------------- continuous noise
#
# One dispatch for every continuous noise draw, in the style of NumPy's ``cont``: rng ->
# Generator -> size and dtype -> the bit generator's lock -> thread count -> native kernel
# (csrc/random/noise_fill.hpp add_noise with the distributions of csrc/random/distributions.hpp).

_NOISE_KINDS = ("normal", "laplace", "exponential", "gumbel")
_KERNELS: dict = {}
_ONE = np.ones(1)


def _kernel(kind: str):
    k = _KERNELS.get(kind)
    if k is None:
        if kind not in _NOISE_KINDS:
            raise ValueError(f"noise kind must be one of {', '.join(map(repr, _NOISE_KINDS))}; got {kind!r}")
        k = _KERNELS[kind] = getattr(_core, "add_" + kind)
    return k


def noise_threads(n: int) -> int:
    """The one thread policy of the noise fills: 1 up to one kernel block (``NOISE_BLOCK``
    words: nothing to share), else :func:`dpfast._threads.default_threads` (the
    ``DPFAST_NUM_THREADS`` override, or the usable CPUs up to 4).  The output never depends on
    it (the kernel is deterministic in the stream)."""
    if n <= _core.NOISE_BLOCK:
        return 1
    return default_threads()


def fill_noise(cap, kind: str, out: np.ndarray, max_threads: Optional[int] = None) -> np.ndarray:
    """Fill ``out`` (C-contiguous float32/float64) with i.i.d. standard ``kind`` noise drawn from
    the capsule of :class:`native_stream` (the caller holds the lock); returns ``out``.

    For callers that already hold the stream for other draws (the DP-SGD loop samples the batch
    and the noise under one lock).  float32 output is the float64 draw rounded once.
    ``max_threads`` caps :func:`noise_threads` (an estimator's ``n_threads``); the output does
    not depend on it.
    """
    return _fill(cap, kind, out, max_threads=max_threads)


def _fill(cap, kind: str, out: np.ndarray, values=None, scale: np.ndarray = _ONE,
          max_threads: Optional[int] = None) -> np.ndarray:
    nt = noise_threads(out.size)
    if max_threads is not None:
        nt = max(1, min(nt, int(max_threads)))
    _kernel(kind)(cap, out, values, scale, nt)
    return out


def noise_dtype(dtype) -> np.dtype:
    """The noise output dtype: float32 or float64 (TypeError otherwise)."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dt}")
    return dt


def allocate_output(shape: tuple, dtype: np.dtype, name: str = "size") -> np.ndarray:
    """The output array; ``ValueError`` naming ``name`` (before any draw) when it cannot be
    allocated: ``check_size`` refuses shapes beyond physical memory, but less may be free."""
    try:
        return np.empty(shape, dtype=dtype)
    except MemoryError:
        nbytes = math.prod(shape) * dtype.itemsize
        raise ValueError(f"{name}={shape!r} needs {nbytes / 2**30:.3g} GiB of {dtype.name}, which cannot be "
                         "allocated now") from None


def draw_into(gen: np.random.Generator, kind: str, out: np.ndarray, values=None, scale: np.ndarray = _ONE) -> np.ndarray:
    """The one native dispatch: ``out = values + scale * noise`` (``values`` None: ``scale *
    noise``), under the bit generator's lock, with the one thread policy.  The caller has
    validated and broadcast: ``out`` C-contiguous float32/float64, ``values`` None or of ``out``'s
    dtype and size, ``scale`` float64 with 1 or ``out.size`` elements."""
    kernel = _kernel(kind)  # an unknown kind raises before the lock is taken
    nt = noise_threads(out.size)
    bg = gen.bit_generator
    with bg.lock:  # (native_stream's lock and capsule, without its frames: small draws feel them)
        kernel(bg.capsule, out, values, scale, nt)
    return out


def add_normal_noise(gen: np.random.Generator, arrays, std: float, max_threads: Optional[int] = None,
                     divisor: float = 1.0) -> None:
    """``a = (a + std * N(0, 1)) / divisor`` in place for every array ``a`` of ``arrays``
    (C-contiguous, writeable, float32/float64), the arrays taken as ONE sequence of variates:
    DP-SGD's noise on all the gradients of a step in one native call (``divisor``: the expected
    batch size of ``loss_reduction="mean"``; computed in double as a product by fl(1 / divisor)
    and rounded once to the array's dtype, except for a ``SecureRandom``, whose path divides
    after adding the noise).

    The stream (the "keyed Philox stream"): for a NumPy ``Generator`` (any bit generator but
    :class:`SecureRandom`'s), two 64-bit words are drawn from ``gen`` per call (per dtype group of
    ``arrays``, in order of first appearance), a 128-bit key: a Philox4x32-10 key and a stream id
    (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as 1, 2, 3", SC'11).
    Variate j of the sequence is the ziggurat of :func:`standard_normal` (same law, same fast path)
    on word j of the counter-based stream of that key; the ~1.2% the fast path rejects are finished
    in order with the words after the last one (``csrc/random/philox.hpp``).  Word j is a function
    of (key, j) alone, so threads fill disjoint ranges and the values do not depend on the number
    of threads, nor on whether the AVX2 kernel runs.  The same ``gen`` state gives the same values.

    For a :class:`SecureRandom` the words come from its ChaCha20 stream as in :func:`draw_into`
    (one fill per array, in order): Philox is not a cryptographic generator, so the secure path is
    left as it was.  ``max_threads`` caps :func:`noise_threads`.  Not floating-point safe
    (Mironov 2012; see the module docstring)."""
    arrays = list(arrays)
    std = float(std)
    divisor = float(divisor)
    if is_secure(gen):
        scale = np.array([std])
        for a in arrays:
            draw_into(gen, "normal", a, a, scale)
            if divisor != 1.0:
                a /= a.dtype.type(divisor)
        return
    groups: dict = {}
    for a in arrays:
        groups.setdefault(a.dtype, []).append(a)
    for arrs in groups.values():
        n = sum(a.size for a in arrs)
        nt = noise_threads(n)
        if max_threads is not None:
            nt = max(1, min(nt, int(max_threads)))
        k0, k1 = gen.bit_generator.random_raw(2).tolist()
        _core.add_normal_philox(k0, k1, arrs, True, std, nt, divisor)


def _noise(gen: np.random.Generator, kind: str, size=None, dtype=np.float64):
    """``size`` i.i.d. standard ``kind`` variates from ``gen`` (a NumPy scalar for ``size=None``)."""
    _kernel(kind)
    dt = noise_dtype(dtype)
    shape = check_size(size, itemsize=dt.itemsize)
    out = draw_into(gen, kind, allocate_output(() if shape is None else shape, dt))
    return out if out.ndim else out[()]


@validate_params(rng=RNG)
def standard_normal(rng: RandomLike = None, size=None, dtype=np.float64):
    """N(0, 1) variates: a 256-layer ziggurat (Marsaglia & Tsang 2000, "The ziggurat method for
    generating random variables") on the 64-bit word stream, 52-bit abscissa.

    Parameters
    ----------
    rng : None, int, numpy.random.Generator or SecureRandom
    size : int or tuple of ints, optional
        Output shape (default: one value, returned as a NumPy scalar).
    dtype : {float64, float32}
        float32 output is the float64 variate rounded once (never a 32-bit-integer sampler).

    The output is a function of the stream alone: the same seed gives the same values whatever
    the number of threads.  Not floating-point safe (Mironov 2012; see the module docstring).
    """
    return _noise(rng, "normal", size, dtype)


@validate_params(rng=RNG)
def standard_laplace(rng: RandomLike = None, size=None, dtype=np.float64):
    """Laplace(0, 1) variates: a random sign times -log U, U on the 2^53-point grid of (0, 1],
    from one 64-bit word each (so value ``i`` is a function of word ``i`` alone).  Parameters as
    :func:`standard_normal`.  Not floating-point safe (Mironov 2012)."""
    return _noise(rng, "laplace", size, dtype)


@validate_params(rng=RNG)
def standard_exponential(rng: RandomLike = None, size=None, dtype=np.float64):
    """Exponential(1) variates: -log(1 - U), U = (2m + 1) 2^-53 from the top 52 bits m of one word
    (the map report-noisy-max uses).  Parameters as :func:`standard_normal`.  Not floating-point
    safe (Mironov 2012)."""
    return _noise(rng, "exponential", size, dtype)


@validate_params(rng=RNG)
def standard_gumbel(rng: RandomLike = None, size=None, dtype=np.float64):
    """Gumbel(0, 1) variates: -log(-log U), U = (2m + 1) 2^-53 from the top 52 bits m of one word
    (the map of the exponential mechanism's Gumbel-max trick).  Parameters as
    :func:`standard_normal`.  Not floating-point safe (Mironov 2012)."""
    return _noise(rng, "gumbel", size, dtype)
