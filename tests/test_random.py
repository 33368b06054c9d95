"""dpfast.random: ChaCha20 against RFC 8439's test vectors, the 4-block kernel against the
one-block function, reproducibility, state get/set, SecureRandom and check_random_state."""
import copy
import pickle

import numpy as np
import pytest
from scipy import stats

from dpfast._chacha import ChaCha20, chacha20_block_rfc, chacha20_block_words
from dpfast.random import SecureRandom, check_random_state, is_secure, native_stream


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.replace(":", " ").split()))


KEY_0_TO_31 = bytes(range(32))

# RFC 8439 section 2.3.2, "Test Vector for the ChaCha20 Block Function".
RFC_2_3_2_NONCE = _hex("00:00:00:09:00:00:00:4a:00:00:00:00")
RFC_2_3_2_BLOCK = _hex(
    """10 f1 e7 e4 d1 3b 59 15 50 0f dd 1f a3 20 71 c4
       c7 d1 f4 c7 33 c0 68 03 04 22 aa 9a c3 d4 6c 4e
       d2 82 64 46 07 9f aa 09 14 c2 d7 05 d9 8b 02 a2
       b5 12 9c d1 de 16 4e b9 cb d0 83 e8 a2 50 3c 4e"""
)
# RFC 8439 appendix A.1, test vectors #1 (counter 0) and #2 (counter 1): all-zero key and nonce.
RFC_A1_TV1 = _hex(
    """76 b8 e0 ad a0 f1 3d 90 40 5d 6a e5 53 86 bd 28
       bd d2 19 b8 a0 8d ed 1a a8 36 ef cc 8b 77 0d c7
       da 41 59 7c 51 57 48 8d 77 24 e0 3f b8 d8 4a 37
       6a 43 b8 f4 15 18 a1 1c c3 87 b6 69 b2 ee 65 86"""
)
RFC_A1_TV2 = _hex(
    """9f 07 e7 be 55 51 38 7a 98 ba 97 7c 73 2d 08 0d
       cb 0f 29 a0 48 e3 65 69 12 c6 53 3e 32 ee 7a ed
       29 b7 21 76 9c e6 4e 43 d5 71 33 b0 74 d8 39 d5
       31 ed 1f 28 51 0a fb 45 ac e1 0a 1f 4b 79 4d 6f"""
)
# RFC 8439 section 2.4.2, "Example and Test Vector for the ChaCha20 Cipher": key 00..1f,
# nonce 00:00:00:00:00:00:00:4a:00:00:00:00, initial counter 1.
SUNSCREEN = (
    b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for "
    b"the future, sunscreen would be it."
)
SUNSCREEN_CT = _hex(
    """6e 2e 35 9a 25 68 f9 80 41 ba 07 28 dd 0d 69 81
       e9 7e 7a ec 1d 43 60 c2 0a 27 af cc fd 9f ae 0b
       f9 1b 65 c5 52 47 33 ab 8f 59 3d ab cd 62 b3 57
       16 39 d6 24 e6 51 52 ab 8f 53 0c 35 9f 08 61 d8
       07 ca 0d bf 50 0d 6a 61 56 a3 8e 08 8a 22 b6 5e
       52 bc 51 4d 16 cc f8 06 81 8c e9 1a b7 79 37 36
       5a f9 0b bf 74 a3 5b e6 b4 0b 8e ed f2 78 5e 42
       87 4d"""
)


def _keystream(bg: ChaCha20, n_words: int) -> bytes:
    return bg.random_raw(n_words).astype("<u8").tobytes()


# ----------------------------------------------------------------------------- RFC vectors

def test_block_function_rfc_2_3_2():
    assert chacha20_block_rfc(KEY_0_TO_31, 1, RFC_2_3_2_NONCE) == RFC_2_3_2_BLOCK


def test_block_function_rfc_a1_vectors():
    assert chacha20_block_rfc(bytes(32), 0, bytes(12)) == RFC_A1_TV1
    assert chacha20_block_rfc(bytes(32), 1, bytes(12)) == RFC_A1_TV2


def test_stream_is_the_rfc_keystream_zero_key():
    # 64-bit-counter layout with nonce 0 = RFC layout with counter < 2^32 and nonce 0.
    assert _keystream(ChaCha20(key=bytes(32)), 16) == RFC_A1_TV1 + RFC_A1_TV2


def test_stream_encrypts_rfc_2_4_2_sunscreen():
    # RFC nonce words (0, 0x4a000000, 0) = our 64-bit counter's high word 0 and 64-bit nonce
    # 0x4a000000; the RFC starts at block 1, so skip our block 0 (8 words).
    bg = ChaCha20(key=KEY_0_TO_31, nonce=0x4A000000)
    ks = _keystream(bg, 8 + 16)[64:]
    ct = bytes(p ^ k for p, k in zip(SUNSCREEN, ks))
    assert ct == SUNSCREEN_CT


def test_four_block_kernel_matches_one_block_function_across_counter_carry():
    st = np.zeros(16, dtype=np.uint32)
    st[:4] = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    st[4:12] = np.frombuffer(KEY_0_TO_31, dtype="<u4")
    st[14:16] = [0xDEADBEEF, 0x01234567]
    for start in (0, 5, 0xFFFFFFFE, 0xFFFFFFFF, 2**40 - 2):
        st[12], st[13] = start & 0xFFFFFFFF, start >> 32
        four = chacha20_block_words(st, four=True)
        for j in range(4):
            one = st.copy()
            c = start + j
            one[12], one[13] = c & 0xFFFFFFFF, c >> 32
            np.testing.assert_array_equal(four[16 * j:16 * (j + 1)], chacha20_block_words(one))


def test_stream_counter_carries_into_high_word():
    bg = ChaCha20(key=KEY_0_TO_31, nonce=7)
    state = bg.state
    state["state"]["input"][12] = 0xFFFFFFFE
    state["state"]["pos"] = 32
    bg.state = state
    words = bg.random_raw(40)  # blocks 2^32-2 .. 2^32+2
    base = state["state"]["input"].copy()
    expect = []
    for c in range(2**32 - 2, 2**32 + 3):
        st = base.copy()
        st[12], st[13] = c & 0xFFFFFFFF, c >> 32
        expect.append(chacha20_block_words(st))
    expect = np.concatenate(expect).view("<u8")
    np.testing.assert_array_equal(words, expect)


# ----------------------------------------------------------------------------- reproducibility, state

def test_seeded_stream_is_reproducible_and_seed_dependent():
    a = np.random.Generator(ChaCha20(seed=42)).random(1000)
    b = np.random.Generator(ChaCha20(seed=42)).random(1000)
    c = np.random.Generator(ChaCha20(seed=43)).random(1000)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # an explicit key, another nonce -> another stream
    k1 = ChaCha20(key=KEY_0_TO_31, nonce=0).random_raw(8)
    k2 = ChaCha20(key=KEY_0_TO_31, nonce=1).random_raw(8)
    assert not np.array_equal(k1, k2)


def test_unseeded_streams_differ():
    assert not np.array_equal(ChaCha20().random_raw(4), ChaCha20().random_raw(4))


def test_state_get_set_round_trip_mid_buffer():
    bg = ChaCha20(seed=1)
    bg.random_raw(13)  # mid-buffer
    saved = copy.deepcopy(bg.state)
    first = bg.random_raw(100)
    bg.state = saved
    np.testing.assert_array_equal(bg.random_raw(100), first)
    other = ChaCha20(seed=999)
    other.state = saved
    np.testing.assert_array_equal(other.random_raw(100), first)


def test_chacha20_bit_generator_pickles_by_state():
    bg = ChaCha20(seed=5)
    bg.random_raw(3)
    clone = pickle.loads(pickle.dumps(bg))
    np.testing.assert_array_equal(clone.random_raw(50), bg.random_raw(50))


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda s: "nope", "must be a dict"),
        (lambda s: {**s, "bit_generator": "PCG64"}, "must be a dict"),
        (lambda s: {**s, "state": {"input": s["state"]["input"]}}, "keys"),
        (lambda s: {**s, "state": {**s["state"], "input": np.zeros(15, np.uint32)}}, "16 words"),
        (lambda s: {**s, "state": {**s["state"], "buffer": np.zeros(16, np.uint32)}}, "64 words"),
        (lambda s: {**s, "state": {**s["state"], "pos": 33}}, r"\[0, 32\]"),
        (lambda s: {**s, "state": {**s["state"], "pos": -1}}, r"\[0, 32\]"),
    ],
)
def test_state_setter_rejects_bad_states(mutate, match):
    bg = ChaCha20(seed=1)
    with pytest.raises(ValueError, match=match):
        bg.state = mutate(bg.state)


def test_constructor_errors():
    with pytest.raises(ValueError, match="32 bytes"):
        ChaCha20(key=b"short")
    with pytest.raises(ValueError, match="nonce"):
        ChaCha20(key=bytes(32), nonce=2**64)
    with pytest.raises(ValueError, match="nonce"):
        ChaCha20(key=bytes(32), nonce=-1)
    with pytest.raises(ValueError, match="32 bytes and nonce 12"):
        chacha20_block_rfc(bytes(31), 0, bytes(12))
    with pytest.raises(ValueError, match="16 uint32"):
        chacha20_block_words(np.zeros(8, np.uint32))


def test_keystream_bits_are_balanced():
    # 2^20 words: each of the 64 bit positions is Binomial(n, 1/2); chi-square over byte values too.
    w = ChaCha20(seed=2024).random_raw(2**20)
    bits = np.unpackbits(w.view(np.uint8)).reshape(-1, 64).mean(axis=0)
    sd = 0.5 / np.sqrt(w.size)
    assert np.all(np.abs(bits - 0.5) < 5.5 * sd)
    counts = np.bincount(w.view(np.uint8), minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-4


# ----------------------------------------------------------------------------- SecureRandom

def test_secure_random_is_a_generator_and_not_picklable():
    g = SecureRandom()
    assert isinstance(g, np.random.Generator) and is_secure(g)
    assert isinstance(g.bit_generator, ChaCha20)
    x = g.random(10)
    assert x.shape == (10,) and np.all((0 <= x) & (x < 1))
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(g)
    with pytest.raises(TypeError, match="cannot be pickled"):
        copy.deepcopy(g)
    with pytest.raises(TypeError, match="cannot be pickled"):
        copy.copy(g)
    assert not np.array_equal(SecureRandom().bit_generator.random_raw(4), g.bit_generator.random_raw(4))
    assert "SecureRandom" in repr(g)


def test_secure_random_passes_through_check_random_state_and_native_stream():
    g = SecureRandom()
    assert check_random_state(g) is g
    with native_stream(g) as cap:
        assert cap is g.bit_generator.capsule
    assert not is_secure(np.random.default_rng(0))


# ----------------------------------------------------------------------------- check_random_state

def test_check_random_state_accepts_documented_forms():
    assert isinstance(check_random_state(None), np.random.Generator)
    a, b = check_random_state(3).random(5), check_random_state(np.int64(3)).random(5)
    np.testing.assert_array_equal(a, b)
    g = np.random.default_rng(0)
    assert check_random_state(g) is g


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        (True, TypeError, "bool"),
        (-1, ValueError, "non-negative"),
        (np.random.RandomState(0), TypeError, "RandomState"),
        ("seed", TypeError, "rng must be"),
        (1.5, TypeError, "rng must be"),
    ],
)
def test_check_random_state_errors(bad, exc, match):
    with pytest.raises(exc, match=match):
        check_random_state(bad)


# ----------------------------------------------------------------------------- no duplication of secret streams
# Regression (issue 15, item 6): copy.deepcopy / copy.copy / pickle of the bit generator and its
# ``state`` copied the ChaCha20 key and replayed the secret stream.

@pytest.mark.parametrize("route", [
    lambda bg: copy.deepcopy(bg),
    lambda bg: copy.copy(bg),
    lambda bg: pickle.dumps(bg),
    lambda bg: pickle.dumps(bg, protocol=2),
    lambda bg: bg.state,
    lambda bg: bg.__getstate__(),
    lambda bg: bg.__reduce_ex__(4),
])
def test_secret_bit_generator_refuses_every_copy_route(route):
    for bg in (SecureRandom().bit_generator, ChaCha20()):
        assert bg.secret
        with pytest.raises(TypeError, match="secret ChaCha20 stream"):
            route(bg)


def test_secret_bit_generator_refuses_state_setting():
    bg = SecureRandom().bit_generator
    known = ChaCha20(seed=1).state
    with pytest.raises(TypeError, match="setting the state"):
        bg.state = known
    with pytest.raises(TypeError, match="setting the state"):
        bg.__setstate__(known)


def test_secure_random_refuses_its_own_copy_routes():
    g = SecureRandom()
    for route in (copy.copy, copy.deepcopy, pickle.dumps, lambda x: x.__getstate__()):
        with pytest.raises(TypeError, match="cannot be pickled or copied"):
            route(g)


def test_seeded_chacha20_still_copies_reproducibly():
    bg = ChaCha20(seed=3)
    assert not bg.secret
    bg.random_raw(5)
    clone = copy.deepcopy(bg)
    np.testing.assert_array_equal(clone.random_raw(40), bg.random_raw(40))


@pytest.mark.parametrize("spawn", [
    lambda g, n: g.spawn(n),
    lambda g, n: [np.random.Generator(b) for b in g.bit_generator.spawn(n)],
])
def test_secure_spawn_gives_fresh_independent_streams(spawn):
    g = SecureRandom()
    kids = spawn(g, 3)
    assert len(kids) == 3
    for k in kids:
        assert k.bit_generator.secret  # children are secret too: no copy route opens
    words = [k.bit_generator.random_raw(8) for k in kids] + [g.bit_generator.random_raw(8)]
    # 4 streams x 512 bits: two of them agree with probability < 2^-500 unless they share a key
    for i in range(4):
        for j in range(i + 1, 4):
            assert not np.array_equal(words[i], words[j])
    assert all(isinstance(k, SecureRandom) for k in g.spawn(2))
    assert g.spawn(0) == []


def test_spawn_count_is_validated():
    g = SecureRandom()
    with pytest.raises(ValueError, match="n_children must be >= 0"):
        g.spawn(-1)
    for bad in (1.5, "2", True, None):
        with pytest.raises(TypeError, match="n_children"):
            g.spawn(bad)
    with pytest.raises(ValueError, match="n_children"):
        g.bit_generator.spawn(-2)


def test_seeded_chacha20_spawns_reproducibly():
    a = [b.random_raw(4) for b in ChaCha20(seed=9).spawn(2)]
    b = [b.random_raw(4) for b in ChaCha20(seed=9).spawn(2)]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[0], a[1])


# ----------------------------------------------------------------------------- SecureRandom as random_state
# Regression (issue 21, item 15): scikit-learn's clone deep-copies random_state, which a secure
# generator refuses, so clone / cross_val_score / the search failed on random_state=SecureRandom().
# A clone now gets a fresh secure stream (never a copy of the original's).

def _lr(**kw):
    from dpfast.linear_model import LogisticRegression

    return LogisticRegression(1.0, method="output", row_norm="clip", **kw)


def test_clone_gives_a_fresh_secure_stream():
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline

    from dpfast.preprocessing import StandardScaler

    g = SecureRandom()
    est = _lr(random_state=g)
    c = clone(est)
    assert is_secure(c.random_state) and c.random_state is not g and est.random_state is g
    assert {k: v for k, v in c.get_params().items() if k != "random_state"} == \
        {k: v for k, v in est.get_params().items() if k != "random_state"}
    # nested: every step's secure stream is fresh; other parameters are cloned as usual
    pipe = make_pipeline(StandardScaler(0.5, bounds=(-1, 1), random_state=SecureRandom()), _lr(random_state=g))
    cp = clone(pipe)
    for (_, a), (_, b) in zip(pipe.steps, cp.steps):
        assert a is not b and is_secure(b.random_state) and b.random_state is not a.random_state
    # fresh keys: the two streams differ
    assert not np.array_equal(c.random_state.bit_generator.random_raw(4), g.bit_generator.random_raw(4))
    # a seeded random_state is still cloned exactly (scikit-learn's "exact clone")
    assert clone(_lr(random_state=3)).random_state == 3


def test_cross_val_score_with_a_secure_random_state_charges_each_fit():
    from sklearn.model_selection import cross_val_score

    from dpfast.budget import PrivacyBudget

    g = np.random.default_rng(0)
    X = np.clip(g.normal(size=(300, 3)) / 3, -1, 1)
    y = (X[:, 0] > 0).astype(int)
    b = PrivacyBudget(10.0, 1e-5)
    with b:
        scores = cross_val_score(_lr(random_state=SecureRandom()), X, y, cv=3)
    assert scores.shape == (3,) and len(b.ledger) == 3


def test_an_estimator_with_a_secure_stream_refuses_pickling_with_what_to_do():
    # a process pool (joblib's loky backend, n_jobs > 1) pickles the estimator: refused before
    # anything is fitted, saying what to do
    with pytest.raises(TypeError, match="cannot be pickled or copied.*n_jobs=1 or joblib's threading"):
        pickle.dumps(_lr(random_state=SecureRandom()))
