"""The loss table (csrc/losses/losses.hpp, DPF_LOSS_TABLE): one registry, one definition per loss.

* Every module exports the same table, and every Python registry of losses (solver, constants,
  DP-SGD codes, public learners) equals it; no Python or binding source repeats a loss code.
* Each loss's value, residual dl/dz, second derivative and privacy constants match references
  written here from the closed forms (NumPy), never from the kernels' output; the constants are
  checked to be upper bounds on a dense grid and to be attained (tight).
* The GLM solvers' kernel and DP-SGD's clipping kernel evaluate the same definition: for the
  same score and label they return the same bits.
"""
from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest

import dpfast
from dpfast import _clip, _glm, _multinomial
from dpfast._loss_table import MARGIN_LOSSES, TABLE, binary_labels, code

ROOT = pathlib.Path(dpfast.__file__).resolve().parent
CSRC = ROOT.parent / "csrc"
SQ2 = math.sqrt(2.0)
DELTA = 0.7  # Huber threshold used below

# ------------------------------------------------------------------------- one registry


def test_every_module_exports_the_same_table():
    t = _glm.loss_table()
    assert _multinomial.loss_table() == t and _clip.loss_table() == t
    assert sorted(e["code"] for e in t.values()) == list(range(len(t)))
    assert set(t) == {"logistic", "squared", "huber", "smoothed_hinge", "softmax"}


def test_python_registries_are_the_table():
    from dpfast import _solver
    from dpfast.linear_model import _losses
    from dpfast.public import _regularization
    from dpfast.sgd import _estimators as sgd_est

    assert _solver.LOSSES == MARGIN_LOSSES == _losses.LOSSES
    assert _solver._LOSS_CODE == {n: TABLE[n].code for n in MARGIN_LOSSES}
    assert (sgd_est._LOGISTIC, sgd_est._SQUARED, sgd_est._SOFTMAX) == (
        code("logistic"), code("squared"), code("softmax"))
    assert set(_regularization.LIPSCHITZ_LOSSES) == {"logistic", "huber", "smoothed_hinge"}
    for name in MARGIN_LOSSES:
        assert _solver.loss_constants(name, DELTA) == _losses.margin_constants(name, DELTA)


# Assignments of integer literals to loss-code names, integer tuples unpacked into them, or a
# comparison of a loss variable with a literal: the ways codes used to be repeated.
_PY_CODE = re.compile(
    r"(_?(LOGISTIC|SQUARED|SOFTMAX|HUBER|HINGE)\w*\s*(,\s*_?[A-Z_]+\s*)*=\s*\d)"
    r"|(\bloss\w*\s*(==|!=|<=|>=|<|>)\s*\d)"
    r"|(enumerate\(\s*LOSSES\s*\))"
)
_CPP_CODE = re.compile(r"(\bloss\s*(==|!=|<=|>=|<|>)\s*\d)|(enum\s+\w*Loss\b(?!.*DPF_LOSS))")


def test_no_hard_coded_loss_codes_in_python_or_bindings():
    assert CSRC.is_dir() and (CSRC / "losses" / "losses.hpp").is_file()
    bad = []
    for p in sorted(ROOT.rglob("*.py")):
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if _PY_CODE.search(line.split("#")[0]):
                bad.append(f"{p.relative_to(ROOT.parent)}:{i}: {line.strip()}")
    for p in sorted(CSRC.rglob("*.[ch]pp")):
        if p.name == "losses.hpp" and p.parent.name == "losses":
            continue  # the table itself
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if _CPP_CODE.search(line.split("//")[0]):
                bad.append(f"{p.relative_to(CSRC.parent)}:{i}: {line.strip()}")
    assert not bad, "loss codes repeated outside the table:\n" + "\n".join(bad)


def test_the_patterns_catch_what_they_replaced():
    for line in ("_LOGISTIC, _SQUARED, _SOFTMAX = 0, 1, 2", "if loss == 2:", "_LOSS_CODE = {n: k for k, n in enumerate(LOSSES)}"):
        assert _PY_CODE.search(line), line
    for line in ('require(loss >= 0 && loss <= 3, "unknown loss");', "enum GlmLoss : int { LOGISTIC = 0 };"):
        assert _CPP_CODE.search(line), line


def test_binary_labels_follow_each_losss_convention():
    y01 = np.array([0, 1, 1, 0])
    for name in MARGIN_LOSSES:
        want = 2.0 * y01 - 1.0 if name in ("logistic", "smoothed_hinge") else y01.astype(float)
        assert TABLE[name].labels == ("pm1" if name in ("logistic", "smoothed_hinge") else "real")
        np.testing.assert_array_equal(binary_labels(name, y01), want)


def test_kernels_reject_codes_outside_the_table():
    z = np.zeros(2)
    with pytest.raises(ValueError):
        _glm.loss_eval(len(TABLE), 1.0, z, z, np.array([np.inf]))
    with pytest.raises(ValueError):  # softmax is not a margin loss
        _glm.constants(code("softmax"), 1.0)
    X, W = np.ones((3, 2)), np.zeros((2, 1))
    for bad in (-1, len(TABLE)):
        with pytest.raises(ValueError):
            _clip.glm_clipped_sum(_clip.Workspace(), X, np.ones(3), None, np.arange(3), W, None, bad, 1.0,
                                  np.empty((2, 1)), None, None, None)
    # a {0, 1} label given to the {-1, +1} logistic loss is refused, not trained on
    with pytest.raises(ValueError, match="-1, \\+1"):
        _clip.glm_clipped_sum(_clip.Workspace(), X, np.array([0.0, 1.0, 1.0]), None, np.arange(3), W, None,
                              code("logistic"), 1.0, np.empty((2, 1)), None, None, None)


# ------------------------------------------------------------- closed-form references


def ref_margin(name, z, y, delta=DELTA):
    """(l, dl/dz, d2l/dz2) of the margin losses from their formulas."""
    if name == "logistic":  # log(1 + exp(-yz)), y = +-1
        m = y * z
        s = 1.0 / (1.0 + np.exp(m))  # sigma(-m)
        return np.logaddexp(0.0, -m), -y * s, s * (1.0 - s)
    if name == "squared":  # (z - y)^2 / 2
        r = z - y
        return 0.5 * r ** 2, r, np.ones_like(r)
    if name == "huber":
        r = z - y
        a = np.abs(r)
        return (np.where(a <= delta, 0.5 * r ** 2, delta * (a - delta / 2)), np.clip(r, -delta, delta),
                (a <= delta).astype(float))
    if name == "smoothed_hinge":  # Rennie & Srebro 2005, in m = y z
        m = y * z
        v = np.where(m <= 0, 0.5 - m, np.where(m < 1, 0.5 * (1 - m) ** 2, 0.0))
        dm = np.where(m <= 0, -1.0, np.where(m < 1, m - 1.0, 0.0))
        return v, y * dm, ((m > 0) & (m < 1)).astype(float)
    raise ValueError(name)


def ref_softmax(z, y):
    """(l, p - e_y, H = diag p - p p^T) of the softmax cross-entropy."""
    p = np.exp(z - z.max())
    p /= p.sum()
    r = p.copy()
    r[y] -= 1.0
    return -math.log(p[y]), r, np.diag(p) - np.outer(p, p)


def _margin_labels(name, g, n):
    return g.choice([-1.0, 1.0], n) if TABLE[name].labels == "pm1" else g.uniform(-1, 1, n)


@pytest.mark.parametrize("name", MARGIN_LOSSES)
def test_margin_loss_matches_its_formula(name):
    g = np.random.default_rng(1)
    z = np.concatenate([g.normal(0, 3, 400), np.linspace(-30, 30, 121)])
    y = _margin_labels(name, g, z.size)
    v, d1, d2 = _glm.loss_eval(code(name), DELTA, z, y, np.array([np.inf]))
    rv, r1, r2 = ref_margin(name, z, y)
    np.testing.assert_allclose(v, rv, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(d1, r1, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(d2, r2, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", MARGIN_LOSSES)
def test_margin_constants_bound_and_are_attained(name):
    """sup |l'| and sup l'' over a dense grid of margins (|y| <= 1) vs the table."""
    e = TABLE[name]
    z = np.linspace(-60, 60, 240_001)
    sup1 = sup2 = 0.0
    for y in (-1.0, 1.0) if e.labels == "pm1" else (-1.0, -0.3, 0.0, 0.8, 1.0):
        _, d1, d2 = ref_margin(name, z, y)
        sup1, sup2 = max(sup1, np.abs(d1).max()), max(sup2, d2.max())
    lip = e.lipschitz * (DELTA if e.lipschitz_per_delta else 1.0)
    assert (lip, e.smoothness) == _glm.constants(code(name), DELTA)
    if math.isinf(lip):
        assert sup1 > 50  # unbounded: grows with the grid
    else:
        assert sup1 <= lip and sup1 >= lip * (1 - 1e-9)
    assert sup2 <= e.smoothness and sup2 >= e.smoothness * (1 - 1e-6)
    assert e.rank_deficit == 0 and e.outputs == "one" and e.convex_clip


def test_softmax_matches_its_formula_in_the_multinomial_kernel():
    g = np.random.default_rng(2)
    n, K = 40, 5
    X = np.ones((n, 1))  # one feature equal to 1: the scores are W's row
    W = g.normal(0, 4, (1, K))
    y = g.integers(0, K, n)
    for i in range(n):
        f, G, ok = _multinomial.loss_and_grad(X[i:i + 1], None, None, 1, 1, y[i:i + 1], None, K, 0.0, W, 1, None, 0.0)
        rl, rr, _ = ref_softmax(W[0], y[i])
        assert ok and f == pytest.approx(rl, rel=1e-13)
        np.testing.assert_allclose(G[0], rr, rtol=1e-12, atol=1e-16)


def test_softmax_constants_bound_and_are_attained():
    e = TABLE["softmax"]
    assert (e.outputs, e.labels, e.rank_deficit, e.convex_clip) == ("classes", "classes", 1, False)
    g = np.random.default_rng(3)
    worst_r = worst_h = 0.0
    for K in (2, 3, 7):
        for _ in range(300):
            z = g.normal(0, g.choice([0.1, 3, 30]), K)
            _, r, H = ref_softmax(z, int(g.integers(K)))
            worst_r = max(worst_r, np.linalg.norm(r))
            ev = np.linalg.eigvalsh(H)
            worst_h = max(worst_h, ev.max())
            assert np.sum(ev > 1e-12 * max(1.0, ev.max())) <= K - e.rank_deficit
    assert worst_r <= e.lipschitz and worst_h <= e.smoothness
    # attained: ||p - e_y|| -> sqrt(2) when one other class takes all the mass; lambda_max = 1/2
    # at p = (1/2, 1/2)
    _, r, _ = ref_softmax(np.array([-40.0, 40.0, -40.0]), 0)
    assert np.linalg.norm(r) == pytest.approx(SQ2, rel=1e-12)
    _, _, H = ref_softmax(np.array([0.0, 0.0]), 0)
    assert np.linalg.eigvalsh(H).max() == pytest.approx(0.5, rel=1e-12)


# ------------------------------------------ the GLM solvers and DP-SGD share one definition


def _dpsgd_one_example(name, z, y, dtype, K=1):
    """(loss, dl/dz) of one example through DP-SGD's kernel: x = 1, no intercept, no clipping."""
    X = np.ones((1, 1), dtype)
    W = np.asarray(z, dtype).reshape(1, K)
    gW = np.empty((1, K), dtype)
    if TABLE[name].outputs == "classes":
        yr, yl = None, np.array([y], np.int64)
    else:
        yr, yl = np.array([y], dtype), None
    ls, _ = _clip.glm_clipped_sum(_clip.Workspace(), X, yr, yl, np.zeros(1, np.int64), W, None, code(name),
                                  np.inf, gW, None, None, None, DELTA)
    return ls, gW[0]


@pytest.mark.parametrize("name", MARGIN_LOSSES)
def test_dpsgd_and_glm_kernels_evaluate_the_same_margin_loss(name):
    g = np.random.default_rng(4)
    z = np.concatenate([g.normal(0, 3, 60), [-40.0, -1e-3, 0.0, 1e-3, 40.0]])
    y = _margin_labels(name, g, z.size)
    v, d1, _ = _glm.loss_eval(code(name), DELTA, z, y, np.array([np.inf]))
    rv, r1, _ = ref_margin(name, z, y)
    for i in range(z.size):
        ls, gz = _dpsgd_one_example(name, z[i], y[i], np.float64)
        assert ls == v[i] and gz[0] == d1[i]  # the same bits: one definition
        ls32, gz32 = _dpsgd_one_example(name, np.float32(z[i]), np.float32(y[i]), np.float32)
        z32, y32 = float(np.float32(z[i])), float(np.float32(y[i]))
        w1 = ref_margin(name, np.array([z32]), np.array([y32]))[1][0]
        assert gz32[0] == np.float32(w1) or abs(float(gz32[0]) - w1) <= 2e-7 * max(1.0, abs(w1))


def test_dpsgd_and_multinomial_kernels_evaluate_the_same_softmax():
    g = np.random.default_rng(5)
    K = 6
    for _ in range(30):
        z = g.normal(0, 5, K)
        y = int(g.integers(K))
        f, G, _ = _multinomial.loss_and_grad(np.ones((1, 1)), None, None, 1, 1, np.array([y]), None, K, 0.0,
                                             z.reshape(1, K), 1, None, 0.0)
        ls, gz = _dpsgd_one_example("softmax", z, y, np.float64, K)
        assert ls == f and np.array_equal(gz, G[0])  # the same bits
        rl, rr, _ = ref_softmax(z, y)
        ls32, gz32 = _dpsgd_one_example("softmax", z.astype(np.float32), y, np.float32, K)
        rl32, rr32, _ = ref_softmax(z.astype(np.float32).astype(float), y)
        assert ls32 == pytest.approx(rl32, rel=1e-12)
        np.testing.assert_allclose(gz32, rr32, rtol=0, atol=2e-7)
