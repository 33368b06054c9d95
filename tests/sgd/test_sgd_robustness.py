"""Hardening of dpfast.sgd (issue 15, items 2, 4, 10, 11 and the DP-SGD parts of 13-15).

Clipped norms are checked in exact rational arithmetic (every float is m 2^e, so the squared
norm of stored values is an exact integer ratio); layouts, threads and pickling are checked
for bit-identical results against the plain C-contiguous, single-thread run.
"""
from __future__ import annotations

import pickle
import threading
from fractions import Fraction

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from dpfast import _clip, sgd
from dpfast._loss_table import code as loss_code
from dpfast.sgd._estimators import MAX_STEPS

# ------------------------------------------------------------------ exact norm helpers


def exact_sq(a) -> Fraction:
    """Exact sum of squares of the float values in a (any float dtype), as a Fraction."""
    flat = np.asarray(a, dtype=np.float64).ravel()  # float32 -> float64 is exact
    # all floats are integers times 2^-1074: sum the squares of those integers exactly
    total = 0
    for x in flat.tolist():
        if x:
            n, d = x.as_integer_ratio()
            k = n * ((1 << 1074) // d)
            total += k * k
    return Fraction(total, 1 << 2148)


def assert_norm_le(sq: Fraction, C: float) -> None:
    lim = Fraction(C) ** 2
    assert sq <= lim, f"clipped norm^2 exceeds C^2 by a relative {float((sq - lim) / lim):.3g}"


def huge_rows(dtype):
    big = np.finfo(dtype).max
    tiny = np.finfo(dtype).smallest_subnormal
    rng = np.random.default_rng(7)
    rows = []
    # the issue's reproducer family: many entries just below the largest float
    for v in (3.07e38, 3.4e38, 1.7e38) if dtype == np.float32 else (1.7e308, 1.0e308, 8.9e307):
        rows.append(np.full(1000, v, dtype))
    rows.append(np.full(1000, tiny, dtype))                            # all subnormal
    rows.append(np.full(1000, 3 * tiny, dtype) * rng.choice([-1, 1], 1000).astype(dtype))
    m = rng.normal(size=1000).astype(dtype)
    m[::7] = big * 0.9
    m[1::7] = tiny
    rows.append(m)                                                      # mixed
    rows.append((rng.normal(size=1000) * 10.0 ** rng.integers(-30, 30, 1000)).astype(dtype))
    return rows


# ------------------------------------------------------------------ item 2: clipping bound


@pytest.mark.slow
@pytest.mark.parametrize("v", [3.07e38, 3.0e38, 3.1e38, 3.3e38, 2.9e38])
def test_issue_reproducer_float32_huge_row_is_clipped_below_max_norm(v):
    g = np.full((1, 100000), v, np.float32)
    s = sgd.clipped_sum(g, 0.01)
    assert s.dtype == np.float32
    assert_norm_le(exact_sq(s), 0.01)
    # and clipping did not just zero it: the norm is clip_norm to within the documented slack
    assert float(exact_sq(s)) > (0.01 * 0.98) ** 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("C", [1e-300, 1e-40, 1e-3, 0.01, 1.0, 3.0, 1e30, 1e300])
def test_clip_gradients_norm_le_max_norm_exactly(dtype, C):
    rows = huge_rows(dtype)
    G = np.stack(rows)
    out = sgd.clip_gradients(G, C)
    total = sgd.clipped_sum(G, C)
    assert out.dtype == dtype and total.dtype == dtype
    for i in range(G.shape[0]):
        assert_norm_le(exact_sq(out[i]), C)
        # one-row sums are the clipped row itself
        assert_norm_le(exact_sq(sgd.clipped_sum(G[i:i + 1], C)), C)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_just_above_max_norm_are_clipped_exactly(dtype):
    # rows whose exact norm is C (1 + k ulp): the rounded norm may say <= C; the stored row
    # must still have exact norm <= C
    rng = np.random.default_rng(3)
    for trial in range(40):
        P = int(rng.integers(1, 3000))
        g = rng.normal(size=P)
        C = float(rng.uniform(0.1, 10))
        g = (g / np.linalg.norm(g) * C * (1 + rng.integers(-4, 5) * 2.0 ** -52)).astype(dtype)
        out = sgd.clip_gradients(g[None, :], C)
        assert_norm_le(exact_sq(out), C)
        if exact_sq(g) <= Fraction(C) ** 2 * (1 - Fraction(1, 2 ** 20)):
            assert np.array_equal(out[0], g)  # certified rows stay bit-for-bit


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_glm_clipped_example_norm_le_max_norm_exactly(dtype):
    # squared loss with W = 0, b = 0: the output gradient is -y; B = 1 so gb is the stored
    # clipped output gradient u_c and the example's clipped gradient is u_c (x) (x, 1).
    for x in huge_rows(dtype):
        x = x[None, :]
        d = x.shape[1]
        for C in (1e-3, 0.01, 1.0, 1e20):
            for y in (1.0, -3.0, 1e-30):
                W = np.zeros((d, 1), dtype)
                b = np.zeros(1, dtype)
                gW = np.empty((d, 1), dtype)
                gb = np.empty(1, dtype)
                _clip.glm_clipped_sum(_clip.Workspace(), x, np.array([y], dtype), None,
                                      np.array([0], np.int64), W, b, loss_code("squared"), C, gW, gb, None, None)
                assert_norm_le(exact_sq(gb) * (exact_sq(x) + 1), C)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", [0, 1])
def test_mlp_clipped_example_norm_le_max_norm_exactly(dtype, mode):
    # W1 = 0 so that the hidden activations are relu(b1) = b1 exactly; B = 1 so gb1 / gb2 are
    # the stored clipped layer gradients u1_c, u2_c.  Layer 1: u1_c (x) (x, 1); layer 2:
    # u2_c (x) (h, 1).  Flat: total <= C; per-layer: each <= C / sqrt(2).
    h, K = 5, 3
    rng = np.random.default_rng(1)
    for x in huge_rows(dtype)[:6]:
        x = x[None, :50].copy()
        d = x.shape[1]
        for C in (1e-3, 0.01, 2.0):
            params = np.zeros(d * h + h + h * K + K, dtype)
            b1 = rng.uniform(0.5, 2.0, h).astype(dtype)
            params[d * h: d * h + h] = b1
            params[d * h + h: d * h + h + h * K] = rng.normal(size=h * K).astype(dtype)
            grad = np.empty_like(params)
            _clip.mlp_clipped_sum(_clip.Workspace(), x, np.array([1], np.int64), np.array([0], np.int64),
                                  h, K, 0, params, C, mode, grad, None, None)
            gb1 = grad[d * h: d * h + h]
            gb2 = grad[d * h + h + h * K:]
            l1 = exact_sq(gb1) * (exact_sq(x) + 1)
            l2 = exact_sq(gb2) * (exact_sq(b1) + 1)
            if mode == 0:
                assert_norm_le(l1 + l2, C)
            else:
                half = Fraction(C) ** 2 / 2
                assert l1 <= half and l2 <= half


# ------------------------------------------------------------------ item 4: strided X


def _strided_inputs(dtype=np.float64):
    rng = np.random.default_rng(0)
    row = rng.normal(size=12).astype(dtype)
    v = rng.normal(size=12 + 299).astype(dtype)
    yield "broadcast", np.broadcast_to(row, (300, 12))
    yield "sliding", np.lib.stride_tricks.sliding_window_view(v, 12)
    big = rng.normal(size=(300, 30)).astype(dtype)
    yield "column-slice", big[:, 3:15]
    yield "every-other-row", rng.normal(size=(600, 12)).astype(dtype)[::2]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fits_on_strided_X_equal_fits_on_contiguous_copy(dtype):
    y2 = np.arange(300) % 2
    y3 = np.arange(300) % 3
    yr = np.linspace(-1, 1, 300)
    for name, X in _strided_inputs(dtype):
        Xc = np.ascontiguousarray(X)
        for make, y in [
            (lambda: sgd.DPSGDClassifier(noise_multiplier=1.0, epochs=2, batch_size=40, random_state=5), y2),
            (lambda: sgd.DPSGDClassifier(noise_multiplier=1.0, epochs=2, batch_size=40, random_state=5,
                                         classes=[0, 1, 2]), y3),
            (lambda: sgd.DPSGDRegressor(noise_multiplier=1.0, epochs=2, batch_size=40, random_state=5), yr),
            (lambda: sgd.DPMLPClassifier(8, noise_multiplier=1.0, epochs=2, batch_size=40, random_state=5,
                                         classes=[0, 1, 2]), y3),
        ]:
            a, b = make().fit(X, y), make().fit(Xc, y)
            pa = a._theta if hasattr(a, "_theta") else np.append(np.ravel(a.coef_), a.intercept_)
            pb = b._theta if hasattr(b, "_theta") else np.append(np.ravel(b.coef_), b.intercept_)
            assert np.array_equal(pa, pb), name
            out = "decision_function" if hasattr(a, "decision_function") else "predict"
            assert np.array_equal(getattr(a, out)(X), getattr(b, out)(Xc)), name


def test_clipped_sum_on_strided_gradients_equals_contiguous():
    for name, G in _strided_inputs(np.float32):
        assert np.array_equal(sgd.clipped_sum(G, 0.5), sgd.clipped_sum(np.ascontiguousarray(G), 0.5)), name
        assert np.array_equal(sgd.clip_gradients(G, 0.5), sgd.clip_gradients(np.ascontiguousarray(G), 0.5))


# ------------------------------------------------------------------ item 10: BLAS threads


def _blas_threads():
    return [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.slow
def test_concurrent_fits_restore_blas_thread_count_exactly():
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 20))
    y = (X[:, 0] > 0).astype(int)
    # a count that differs from the one the fits use (1), whatever the machine's default
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        assert before and all(n == 2 for _, n in before)
        ref = sgd.DPSGDClassifier(noise_multiplier=1.0, epochs=3, batch_size=32, random_state=1).fit(X, y).coef_
        results, errors = [], []

        def work(k):
            try:
                m = sgd.DPSGDClassifier(noise_multiplier=1.0, epochs=3, batch_size=32, random_state=1,
                                        n_threads=1 + k % 2).fit(X, y)
                results.append(m.coef_)
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        for n_workers in (4, 8):
            ts = [threading.Thread(target=work, args=(k,)) for k in range(n_workers)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            assert not errors
            assert _blas_threads() == before
        assert len(results) == 12 and all(np.array_equal(r, ref) for r in results)


# ------------------------------------------------------------------ item 11: determinism


def _mlp(n_threads, X, y, **kw):
    return sgd.DPMLPClassifier(64, noise_multiplier=1.0, epochs=1, batch_size=400, random_state=3,
                               classes=list(range(5)), n_threads=n_threads, **kw).fit(X, y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mlp_bit_identical_across_thread_counts(dtype):
    # batches of ~400 rows x 100 features x 64 hidden: the products are split into row blocks
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1600, 100)).astype(dtype)
    y = rng.integers(0, 5, 1600)
    ref = _mlp(1, X, y)._theta
    for nt in (2, 3, None):
        assert np.array_equal(_mlp(nt, X, y)._theta, ref), nt


def test_same_seed_bit_identical_for_layouts_readonly_pickled_inputs():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(500, 16)).astype(np.float32)
    y = rng.integers(0, 5, 500)
    ref = _mlp(1, X, y)
    ro = X.copy()
    ro.flags.writeable = False
    yro = y.copy()
    yro.flags.writeable = False
    variants = {
        "F": np.asfortranarray(X),
        "strided": np.concatenate([X, X], axis=1)[:, :16],
        "read-only": ro,
        "pickled": pickle.loads(pickle.dumps(X)),
    }
    for name, Xv in variants.items():
        m = _mlp(2, Xv, yro if name == "read-only" else y)
        assert np.array_equal(m._theta, ref._theta), name
        assert np.array_equal(m.predict_proba(Xv), ref.predict_proba(X)), name


def test_pickled_fitted_mlp_predicts_like_the_original():
    rng = np.random.default_rng(6)
    for dtype in (np.float32, np.float64):
        X = rng.normal(size=(300, 10)).astype(dtype)
        y = rng.integers(0, 3, 300)
        m = sgd.DPMLPClassifier(8, noise_multiplier=1.0, epochs=1, random_state=0, classes=[0, 1, 2]).fit(X, y)
        m2 = pickle.loads(pickle.dumps(m))
        Xp = pickle.loads(pickle.dumps(X))
        assert np.array_equal(m2.decision_function(Xp), m.decision_function(X))
        # refit of the unpickled estimator reproduces the fit
        assert np.array_equal(pickle.loads(pickle.dumps(m)).fit(Xp, y)._theta, m._theta)


def test_kernels_accept_unpickled_and_readonly_arrays():
    G = np.random.default_rng(8).normal(size=(6, 9)).astype(np.float32)
    Gp = pickle.loads(pickle.dumps(G))
    Gr = G.copy()
    Gr.flags.writeable = False
    ref = sgd.clipped_sum(G, 1.0)
    for a in (Gp, Gr):
        assert np.array_equal(sgd.clipped_sum(a, 1.0), ref)
        assert np.array_equal(sgd.clip_gradients(a, 1.0), sgd.clip_gradients(G, 1.0))
        assert np.array_equal(sgd.per_example_norms(a), sgd.per_example_norms(G))
    # direct kernel call with an equal-but-not-identical dtype object
    out = np.empty(9, np.float32)
    _clip.clip_rows(Gp, 1.0, None, None, out, None)
    assert np.array_equal(out, ref)
    assert np.array_equal(Gr, G)  # never written


def test_per_example_norms_list_contract():
    # nested numbers: one (B, P) array, norms by Pythagoras
    assert np.array_equal(sgd.per_example_norms([[3.0, 4.0], [6.0, 8.0]]), [5.0, 10.0])
    assert np.array_equal(sgd.per_example_norms(((3, 4), (5, 12))), [5.0, 13.0])
    # a list of arrays: layers, norm over all of them
    layers = [np.array([[3.0, 0.0], [0.0, 0.0]]), np.array([[4.0], [2.0]])]
    assert np.array_equal(sgd.per_example_norms(layers), [5.0, 2.0])
    with pytest.raises(TypeError, match="per_example_grads"):
        sgd.per_example_norms([np.array([[1.0]]), [1.0]])
    with pytest.raises(ValueError, match="per_example_grads"):
        sgd.per_example_norms([[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError, match="batch size"):
        sgd.per_example_norms([np.ones((2, 3)), np.ones((3, 3))])
    # clip_gradients follows the same contract: nested numbers give one array back
    out = sgd.clip_gradients([[3.0, 4.0], [0.3, 0.4]], 1.0)
    assert isinstance(out, np.ndarray) and out.shape == (2, 2)


# ------------------------------------------------------------------ items 13-15 (sgd part)


@pytest.mark.parametrize("epochs", [2**63, 10**12, MAX_STEPS])
def test_unbounded_epochs_refused_before_allocating(epochs):
    X = np.zeros((100, 3))
    y = np.arange(100) % 2
    with pytest.raises(ValueError, match="epochs"):
        sgd.DPSGDClassifier(noise_multiplier=1.0, epochs=epochs, batch_size=10).fit(X, y)
    with pytest.raises(ValueError, match="epochs"):
        sgd.DPSGDClassifier(epsilon=1.0, epochs=epochs, batch_size=10).fit(X, y)


def test_step_cap_boundary_is_exact():
    from dpfast.sgd import _estimators as est

    m = sgd.DPSGDClassifier(noise_multiplier=1.0, epochs=MAX_STEPS // 10, batch_size=10)
    assert m._check_run(100)[1] == MAX_STEPS // 10  # exactly MAX_STEPS steps: allowed
    m.epochs = MAX_STEPS // 10 + 1
    with pytest.raises(ValueError, match="epochs"):
        m._check_run(100)
    assert est.MAX_STEPS == 10**9


@pytest.mark.parametrize(
    "call, exc, word",
    [
        (lambda: sgd.clipped_sum(np.ones((2, 2)), "1"), TypeError, "clip_norm"),
        (lambda: sgd.clipped_sum(np.ones((2, 2)), np.nan), ValueError, "clip_norm"),
        (lambda: sgd.clipped_sum(np.ones((2, 2)), 1.0, noise_multiplier=-1), ValueError, "noise_multiplier"),
        (lambda: sgd.clipped_sum(np.ones((2, 2)), 1.0, noise_multiplier="a"), TypeError, "noise_multiplier"),
        (lambda: sgd.clip_gradients(np.array([[np.inf]]), 1.0), ValueError, "per_example_grads"),
        (lambda: sgd.clip_gradients(np.array(1.0), 1.0), ValueError, "per_example_grads"),
        (lambda: sgd.per_example_norms(np.array([["a"]])), TypeError, "per_example_grads"),
        (lambda: sgd.per_example_norms([]), ValueError, "per_example_grads"),
        (lambda: sgd.DPSGDClassifier(noise_multiplier=1.0, batch_size=2**70).fit(np.ones((4, 2)), [0, 1, 0, 1]),
         ValueError, "batch_size"),
        (lambda: sgd.DPSGDClassifier(noise_multiplier=1.0, batch_size=2, n_threads=0).fit(np.ones((4, 2)), [0, 1, 0, 1]),
         ValueError, "n_threads"),
        (lambda: sgd.DPMLPClassifier(hidden=2.5, noise_multiplier=1.0, batch_size=2).fit(np.ones((4, 2)), [0, 1, 0, 1]),
         TypeError, "hidden"),
    ],
)
def test_public_errors_name_the_argument(call, exc, word):
    with pytest.raises(exc, match=word):
        call()


def test_clipped_sum_float32_noise_is_drawn_at_53_bits():
    """The noise of clipped_sum on float32 gradients is a float64 normal draw rounded once, not
    a float32 sampler such as NumPy's (32-bit integers: a coarse lattice that can identify the sum)."""
    import dpfast.sgd as S

    g = np.zeros((3, 1000), dtype=np.float32)
    out = S.clipped_sum(g, 2.0, noise_multiplier=1.5, rng=np.random.default_rng(11))
    from dpfast.random import standard_normal

    # the package's float64 normal (dpfast.random, the sampler family) on the same stream
    ref = (np.float32(0.0) + 3.0 * standard_normal(np.random.default_rng(11), 1000)).astype(np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, ref)
    f32 = (3.0 * np.random.default_rng(11).standard_normal(1000, dtype=np.float32)).astype(np.float32)
    assert not np.array_equal(out, f32)


def test_thread_settings_are_refused_before_the_charge(monkeypatch):
    # n_threads beyond the kernels' range and a bad DPFAST_NUM_THREADS were read in the training loop,
    # after the budget was charged (issue 21, item 8)
    from dpfast import PrivacyBudget

    X = np.random.default_rng(0).normal(size=(16, 2))
    y = (X[:, 0] > 0).astype(int)
    for n_threads, env, exc in [(2**31, None, ValueError), (None, "0", ValueError), (True, None, TypeError)]:
        if env is None:
            monkeypatch.delenv("DPFAST_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("DPFAST_NUM_THREADS", env)
        budget = PrivacyBudget(10.0, 1e-3)
        g = np.random.default_rng(1)
        state = g.bit_generator.state
        with pytest.raises(exc, match="n_threads|DPFAST_NUM_THREADS"):
            sgd.DPSGDClassifier(noise_multiplier=1.0, epochs=1, batch_size=4, n_threads=n_threads,
                                random_state=g).fit(X, y, budget=budget)
        assert budget.ledger == () and g.bit_generator.state == state
