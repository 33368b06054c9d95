# cython: boundscheck=False, wraparound=False, cdivision=True
"""ChaCha20 (RFC 8439) as a ``numpy.random.BitGenerator``.

Being a NumPy bit generator, it feeds every ``numpy.random.Generator`` method and every
dpfast kernel through the same C interface (``bitgen_t``) as NumPy's own generators.
"""
import os

import numpy as np
cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy
from numpy.random cimport BitGenerator

cnp.import_array()

cdef extern from "random/chacha20.hpp" namespace "dpf" nogil:
    cdef cppclass ChaCha20Stream:
        uint32_t input[16]
        uint32_t buf[64]
        int pos
        void seed(const uint32_t* key, uint64_t nonce, uint64_t counter)
        void refill()
        uint64_t next_u64()
    void chacha20_block(const uint32_t* inp, uint32_t* out)
    void chacha20_blocks4(const uint32_t* inp, uint32_t* out)


cdef uint64_t _next_u64(void* st) noexcept nogil:
    return (<ChaCha20Stream*>st).next_u64()

cdef uint32_t _next_u32(void* st) noexcept nogil:
    return <uint32_t>((<ChaCha20Stream*>st).next_u64() >> 32)

cdef double _next_double(void* st) noexcept nogil:
    # top 53 bits -> [0, 1) on the grid k * 2^-53, as NumPy's generators do
    return ((<ChaCha20Stream*>st).next_u64() >> 11) * (1.0 / 9007199254740992.0)


def chacha20_block_rfc(key, uint32_t counter, nonce):
    """The RFC 8439 section 2.3 block function on (key, counter, nonce) -> 64 bytes.

    ``key`` is 32 bytes, ``nonce`` 12 bytes.  Exposed for the RFC's test vectors.
    """
    key = bytes(key)
    nonce = bytes(nonce)
    if len(key) != 32 or len(nonce) != 12:
        raise ValueError("key must be 32 bytes and nonce 12 bytes")
    cdef uint32_t st[16]
    cdef uint32_t out[16]
    k = np.frombuffer(key, dtype="<u4")
    n = np.frombuffer(nonce, dtype="<u4")
    st[0] = 0x61707865u; st[1] = 0x3320646eu; st[2] = 0x79622d32u; st[3] = 0x6b206574u
    for i in range(8):
        st[4 + i] = k[i]
    st[12] = counter
    for i in range(3):
        st[13 + i] = n[i]
    chacha20_block(st, out)
    return np.array([out[i] for i in range(16)], dtype="<u4").tobytes()


def chacha20_block_words(state, bint four=False):
    """Block function on a raw 16-word input state (uint32) -> 16 words (or 64 words, the
    four blocks at counters c..c+3 of the 64-bit-counter layout, when ``four``).

    Exposed so that tests can check the vectorized four-block kernel against the one-block
    function, including the carry of the 64-bit block counter.
    """
    arr = np.ascontiguousarray(state, dtype=np.uint32)
    if arr.shape != (16,):
        raise ValueError("state must have 16 uint32 words")
    cdef uint32_t st[16]
    cdef uint32_t out[64]
    for i in range(16):
        st[i] = arr[i]
    if four:
        chacha20_blocks4(st, out)
        return np.array([out[i] for i in range(64)], dtype=np.uint32)
    chacha20_block(st, out)
    return np.array([out[i] for i in range(16)], dtype=np.uint32)


def _unpickle_chacha20(state):
    bg = ChaCha20(key=bytes(32))
    bg.state = state
    return bg


def check_n_children(n_children):
    """A non-negative int count of children (TypeError / ValueError otherwise); shared with
    :meth:`dpfast.random.SecureRandom.spawn`."""
    import numbers
    if isinstance(n_children, (bool, np.bool_)) or not isinstance(n_children, numbers.Integral):
        raise TypeError(f"n_children must be a non-negative int, got {type(n_children).__name__}")
    n = int(n_children)
    if n < 0:
        raise ValueError(f"n_children must be >= 0, got {n}")
    return n


cdef class ChaCha20(BitGenerator):
    """ChaCha20 keystream as a NumPy bit generator.

    Parameters
    ----------
    seed : None, int, array_like or SeedSequence
        Only used when ``key`` is None.  ``seed=None`` (the default) keys the stream with
        256 bits from ``os.urandom`` -- the cryptographically secure use.  Any other seed
        derives the key from a ``SeedSequence`` (reproducible; for tests, not for secrecy).
    key : bytes, optional
        An explicit 32-byte key.
    nonce : int
        64-bit stream selector.

    Notes
    -----
    Words are 64-bit little-endian halves of the RFC 8439 block output; the block counter
    is 64 bits (words 12-13) and the nonce 64 bits (words 14-15).  The keystream is computed
    four blocks (32 words) at a time by a SIMD kernel; the output equals the one-block
    function applied to successive counters.
    """
    cdef ChaCha20Stream rng_state
    cdef bint _secret

    def __init__(self, seed=None, *, key=None, nonce=0):
        try:
            BitGenerator.__init__(self, seed)
        except (TypeError, ValueError) as exc:  # NumPy's messages do not name the argument
            raise type(exc)(f"seed must be None, a non-negative int, a sequence of them or a "
                            f"SeedSequence, got {seed!r}: {exc}") from None
        cdef uint32_t k[8]
        # Keyed from os.urandom (no seed, no key): the key exists nowhere else, so nothing may
        # export it (state, pickle, copy) -- a copied key replays the whole secret stream.
        self._secret = key is None and seed is None
        if key is not None:
            key = bytes(key)
            if len(key) != 32:
                raise ValueError(f"key must be 32 bytes, got {len(key)}")
            words = np.frombuffer(key, dtype="<u4")
        elif seed is None:
            words = np.frombuffer(os.urandom(32), dtype="<u4")
        else:
            words = self._seed_seq.generate_state(8, np.uint32)
        for i in range(8):
            k[i] = int(words[i])
        nonce = int(nonce)
        if not 0 <= nonce < 2**64:
            raise ValueError("nonce must be in [0, 2**64)")
        self.rng_state.seed(k, nonce, 0)
        self._bitgen.state = <void*>&self.rng_state
        self._bitgen.next_uint64 = &_next_u64
        self._bitgen.next_uint32 = &_next_u32
        self._bitgen.next_double = &_next_double
        self._bitgen.next_raw = &_next_u64

    @property
    def secret(self):
        """True when the key came from ``os.urandom`` (``seed=None`` and no ``key``): such a
        stream refuses state export, pickling and copying, and spawns freshly keyed children."""
        return bool(self._secret)

    def _refuse(self, what):
        raise TypeError(
            f"{what} is refused for a secret ChaCha20 stream (keyed from os.urandom): it would "
            "duplicate (or replace) the key and so replay the secret stream; use spawn(n) for independent, freshly "
            "keyed streams, or ChaCha20(seed=...) for a reproducible (non-secret) one")

    def __copy__(self):
        if self._secret:
            self._refuse("copying")
        return self.__deepcopy__({})

    def __deepcopy__(self, memo):
        if self._secret:
            self._refuse("copying")
        clone = type(self)(key=bytes(32))
        clone.state = self.state
        return clone

    def __reduce__(self):
        if self._secret:
            self._refuse("pickling")
        # rebuilt as a non-secret stream (a placeholder key, then the state): NumPy's default
        # constructor would build a secret one, which refuses the state
        return (_unpickle_chacha20, (self.state,))

    def __reduce_ex__(self, protocol):
        return self.__reduce__()

    def __getstate__(self):
        if self._secret:
            self._refuse("exporting the state")
        return BitGenerator.__getstate__(self)

    def __setstate__(self, state):
        if self._secret:
            self._refuse("setting the state")
        BitGenerator.__setstate__(self, state)

    def spawn(self, n_children):
        """``n_children`` independent child bit generators.

        A secret stream's children are keyed afresh from ``os.urandom`` (deriving them from
        this generator's ``SeedSequence`` would make them computable from its public
        ``seed_seq.entropy``); a seeded stream spawns reproducibly through its ``SeedSequence``
        as NumPy's generators do.
        """
        n = check_n_children(n_children)
        if self._secret:
            return [type(self)() for _ in range(n)]
        return BitGenerator.spawn(self, n)

    @property
    def state(self):
        """State dict (input block with the next counter, the 4-block output buffer, position
        of the next unused 64-bit word in it), as NumPy's generators do.  Refused (TypeError)
        for a secret stream: the input block holds the key."""
        if self._secret:
            self._refuse("exporting the state")
        inp = np.array([self.rng_state.input[i] for i in range(16)], dtype=np.uint32)
        buf = np.array([self.rng_state.buf[i] for i in range(64)], dtype=np.uint32)
        return {"bit_generator": type(self).__name__,
                "state": {"input": inp, "buffer": buf, "pos": int(self.rng_state.pos)}}

    @state.setter
    def state(self, value):
        if self._secret:
            self._refuse("setting the state")
        if not isinstance(value, dict) or value.get("bit_generator") != type(self).__name__:
            raise ValueError("state must be a dict from ChaCha20.state")
        st = value.get("state")
        if not isinstance(st, dict) or not {"input", "buffer", "pos"} <= set(st):
            raise ValueError("state['state'] must be a dict with keys 'input', 'buffer', 'pos'")
        inp = np.asarray(st["input"], dtype=np.uint32)
        buf = np.asarray(st["buffer"], dtype=np.uint32)
        if inp.shape != (16,) or buf.shape != (64,):
            raise ValueError("state 'input' must have 16 words and 'buffer' 64 words")
        pos = int(st["pos"])
        if not 0 <= pos <= 32:
            raise ValueError(f"state 'pos' must be in [0, 32], got {pos}")
        for i in range(16):
            self.rng_state.input[i] = inp[i]
        for i in range(64):
            self.rng_state.buf[i] = buf[i]
        self.rng_state.pos = pos
