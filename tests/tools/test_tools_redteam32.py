"""Red team 32: the dpfast.tools fast paths of tools-speed31 (``check_bounds`` for two floats/ints,
``check_random_state`` for an int seed, the one-value noise plan, the one-column pass without
x - 0) against the general paths, for the inputs an adversary picks.

Found: a bound given as an int (or Fraction) beyond float64's range (2**1024) escaped
``check_bounds`` as OverflowError (an ArithmeticError, not the ValueError/TypeError of every other
bad bound); it was refused before the charge, but by an undocumented exception: now ValueError
("must be finite").  No hole otherwise: the releases are the same bits for every equivalent
bounds/seed kind, the released type/shape/dtype depend only on public parameters, and every
failure leaves the budget's ledger empty."""
from fractions import Fraction

import numpy as np
import pytest

from dpfast import PrivacyBudget, tools as TL
from dpfast._validation import check_bounds
from dpfast.random import check_random_state

FUNCS = ["sum", "nansum", "mean", "nanmean", "var", "nanvar", "std", "nanstd"]
BASE = np.random.default_rng(0).uniform(-3, 5, (40, 3))


class _Seq:
    """A pair that is not a tuple or list: check_bounds's general path."""

    def __init__(self, a):
        self.a = a

    def __iter__(self):
        return iter(self.a)


def _outcome(f):
    try:
        r = f()
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return type(e).__name__
    return tuple(np.float64(v).tobytes() for v in r), tuple(type(v) for v in r)


BOUND_CASES = [(0, 1), (0.0, 1.0), (-0.0, 1.0), (-0.0, 0.0), (0.0, -0.0), (1, 1), (2, 1), (float("nan"), 1),
               (0, float("inf")), (-float("inf"), 0), (2 ** 1023 - 1, 2 ** 1023), (-(2 ** 1023), 0), (2 ** 1024, 0),
               (0, 2 ** 1024), (True, 2), (np.float32(0.1), 1), (Fraction(1, 3), 1), (np.array(0.5), 1),
               (5e-324, 1e308), (-1e308, 1e308), (0, 1, 2), (1,), ("0", 1), (None, 1), (2 ** 53 + 1, 2 ** 54),
               (Fraction(10 ** 400), 1)]


@pytest.mark.parametrize("case", BOUND_CASES, ids=range(len(BOUND_CASES)))
def test_check_bounds_fast_path_is_the_general_path(case):
    a = _outcome(lambda: check_bounds(tuple(case)))
    assert a == _outcome(lambda: check_bounds(list(case))) == _outcome(lambda: check_bounds(_Seq(case)))
    assert isinstance(a, tuple) or a in ("ValueError", "TypeError")


def test_bounds_beyond_float64_are_a_value_error():
    for b in ((2 ** 1024, 0), (0, 2 ** 1024), (-(2 ** 1024), 0), (Fraction(10 ** 400), 1), (0, Fraction(-(10 ** 400)))):
        with pytest.raises(ValueError, match="finite"):
            check_bounds(b)


def test_int_seed_fast_path():
    for seed in (0, 1, 2 ** 64, 2 ** 200, np.int64(5), np.uint64(5), np.int8(5)):
        assert check_random_state(seed).bit_generator.state == np.random.default_rng(int(seed)).bit_generator.state
    for seed in (-1, np.int64(-1), True, np.bool_(False), 1.0, "1", np.random.RandomState(0)):
        with pytest.raises((TypeError, ValueError)):
            check_random_state(seed)


BOUND_KINDS = [(-2, 4), [-2, 4], (Fraction(-2), Fraction(4)), (np.float32(-2), np.float32(4)),
               (np.array(-2.0), np.array(4)), np.array([-2, 4]), (np.int64(-2), np.uint8(4)), (-2.0, 4)]


@pytest.mark.parametrize("fn", FUNCS)
def test_same_release_for_every_bounds_and_seed_kind(fn):
    for axis, keep in ((None, False), (None, True), (0, False), ((0,), True), (-2, True)):
        ref = getattr(TL, fn)(BASE, 1.0, (-2.0, 4.0), axis=axis, keepdims=keep, rng=7)
        for b in BOUND_KINDS:
            for seed in (7, np.int64(7), np.uint32(7)):
                r = getattr(TL, fn)(BASE, 1.0, b, axis=axis, keepdims=keep, rng=seed)
                assert type(r) is type(ref) and np.shape(r) == np.shape(ref)
                assert np.asarray(r).dtype == np.asarray(ref).dtype
                assert np.asarray(r).tobytes() == np.asarray(ref).tobytes(), (axis, keep, b, seed)


@pytest.mark.parametrize("fn", FUNCS)
def test_release_type_and_shape_are_public(fn):
    kinds = {}
    for axis, keep in ((None, False), (None, True), (0, True), (0, False)):
        seen = set()
        data = [(BASE * 3).astype(dt) for dt in (np.int8, np.uint8, np.int16, np.int64, np.uint64, np.float16,
                                                np.float32, np.longdouble)] + [BASE > 1, BASE[:1], -BASE]
        if fn.startswith("nan"):
            a = BASE.copy()
            a[3, 1] = np.nan
            data += [a, np.full((5, 3), np.nan)]
        for a in data:
            r = getattr(TL, fn)(a, 1.0, (-2, 4), axis=axis, keepdims=keep, rng=3)
            seen.add((type(r).__name__, np.shape(r), np.asarray(r).dtype.str))
        assert len(seen) == 1, seen
        kinds[(axis, keep)] = seen.pop()
    assert kinds[(None, False)] == ("float64", (), "<f8")
    assert kinds[(0, False)][1] == (3,) and kinds[(0, True)][1] == (1, 3) and kinds[(None, True)][1] == (1, 1)


@pytest.mark.parametrize("fn", FUNCS)
def test_every_failure_before_the_charge(fn):
    B = PrivacyBudget(1000.0, 1e-9)
    calls = []
    for bounds in ((1, 1), (-0.0, 0.0), (0.0, -0.0), (2, 1), (np.nan, 1), (0, np.inf), (2 ** 1024, 0), (0, 1e308 * 10),
                   (0, 1, 2), ("a", 1), (None, 1), (np.array([0, 1]), 2)):
        calls.append((BASE, bounds, {}))
    a = BASE.copy()
    a[0, 0] = np.inf
    calls.append((a, (0, 1), {}))
    if not fn.startswith("nan"):
        a = BASE.copy()
        a[0, 0] = np.nan
        calls.append((a, (0, 1), {}))
    for a in (BASE.astype(object), BASE.astype(complex), np.ma.masked_array(BASE, BASE > 1), "abc", np.array(["1", "2"])):
        calls.append((a, (0, 1), {}))
    for seed in (-1, True, np.int64(-3), 1.5, np.random.RandomState(0)):
        calls.append((BASE, (0, 1), {"rng": seed}))
    for kw in (dict(axis=1), dict(axis=(0, 1)), dict(axis=True), dict(keepdims=2), dict(keepdims="yes"), dict(axis=0.0)):
        calls.append((BASE, (0, 1), kw))
    if fn in ("sum", "nansum", "mean", "nanmean"):
        calls += [(BASE, (0, 1), dict(dtype=np.int32)), (BASE, (0, 1), dict(dtype=object))]
    for a, bounds, kw in calls:
        kw = {"rng": 1, **kw}
        with pytest.raises((ValueError, TypeError)):
            getattr(TL, fn)(a, 1.0, bounds, budget=B, **kw)
        assert len(B.ledger) == 0 and B.spent() == 0.0, (bounds, kw)


def test_one_column_pass_is_the_general_pass_on_adversarial_values():
    # the 1-D pass skips x - c for c = 0 (sum): -0.0, subnormals, values at and one ulp beyond the
    # bounds, bounds (-0.0, 3), tiny and wide: the same release as the (n, 1) and strided forms
    rng = np.random.default_rng(5)
    vals = np.array([-0.0, 0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.0, -1.0, 3.0, -3.0, 1e300, -1e300,
                     2.9999999999999996, np.nextafter(3, 4)])
    for trial in range(40):
        x = rng.choice(vals, size=int(rng.integers(1, 100)))
        if trial % 3 == 0:
            x = x + rng.standard_normal(x.size) * 10.0 ** rng.integers(-300, 300)
        bounds = [(-3.0, 3.0), (-0.0, 3.0), (0, 2.0 ** -400), (-1e150, 1e150), (-(2.0 ** -400), 0.0)][trial % 5]
        for fn in ("sum", "nansum", "mean", "var"):
            a = getattr(TL, fn)(x, 1.0, bounds, rng=trial)
            for xx in (x.reshape(-1, 1), np.repeat(x, 2)[::2], x[::-1].copy()[::-1]):
                b = getattr(TL, fn)(xx, 1.0, bounds, rng=trial)
                assert np.float64(a).tobytes() == np.float64(b).tobytes(), (fn, bounds)


def test_lighter_draw_under_threads_and_other_generators():
    # draw_into takes the bit generator's lock itself (no native_stream frame): 4 threads sharing one
    # Generator draw disjoint parts of its stream (the multiset of 400 releases is the sequential
    # one's); SecureRandom and ChaCha20 generators go through the same path
    import threading

    from dpfast._chacha import ChaCha20
    from dpfast.random import SecureRandom

    x = BASE[:, :1]
    g, out = np.random.default_rng(5), []

    def run():
        for _ in range(100):
            out.append(TL.sum(x, 1.0, (0, 1), rng=g))

    ts = [threading.Thread(target=run) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    g2 = np.random.default_rng(5)
    assert sorted(out) == sorted(TL.sum(x, 1.0, (0, 1), rng=g2) for _ in range(400))
    assert np.isfinite(TL.mean(x, 1.0, (0, 1), rng=SecureRandom()))
    a = TL.var(BASE, 1.0, (0, 1), axis=0, rng=np.random.Generator(ChaCha20(1)))
    assert a.tobytes() == TL.var(BASE, 1.0, (0, 1), axis=0, rng=np.random.Generator(ChaCha20(1))).tobytes()
