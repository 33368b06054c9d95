"""The Bingham sampler (Kent, Ganeiber & Mardia 2018) and mechanism against the exact density.

The law is the definition: density proportional to exp(x^T A x) with respect to the uniform
measure on the sphere, normalised numerically here (d = 2: a fine grid in the angle; d = 3:
a fine midpoint grid in (cos theta, phi), in which the uniform measure on S^2 is flat).
KS (d = 2) and chi-square over 64 cells (d = 3) at ALPHA = 1e-4, n = 100,000.
"""
import math

import numpy as np
import pytest
from scipy import stats

import dpfast
from dpfast import PrivacyBudget, accounting as A
from dpfast.budget import BudgetExceededError
from dpfast.mechanisms import bingham, bingham_sample, event_of

N = 100_000
ALPHA = 1e-4


def _rot(d, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q


@pytest.mark.parametrize("diag,seed", [((3.0, 0.0), 1), ((40.0, -2.0), 2), ((0.0, 0.0), 3), ((0.5, 0.2), 4)])
def test_bingham_d2_matches_the_density_on_the_circle(diag, seed):
    q = _rot(2, seed)
    a = q @ np.diag(diag) @ q.T
    x = bingham_sample(a, N, rng=seed)
    assert x.shape == (N, 2) and np.allclose(np.linalg.norm(x, axis=1), 1.0)
    theta = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    grid = np.linspace(0, 2 * np.pi, 200_001)
    u = np.stack([np.cos(grid), np.sin(grid)], axis=1)
    dens = np.exp(np.einsum("ij,jk,ik->i", u, a, u) - np.max(diag))
    cum = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(grid))])
    cdf = cum / cum[-1]
    assert stats.kstest(theta, lambda t: np.interp(t, grid, cdf)).pvalue > ALPHA


@pytest.mark.parametrize("diag,seed", [((6.0, 2.0, 0.0), 5), ((50.0, 0.0, -10.0), 6), ((1.0, 1.0, 0.0), 7),
                                       ((0.0, 0.0, 0.0), 8)])
def test_bingham_d3_matches_the_density_on_the_sphere(diag, seed):
    q = _rot(3, seed)
    a = q @ np.diag(diag) @ q.T
    x = bingham_sample(a, N, rng=seed + 100)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0)
    nb = 8
    # cells: equal bins of u = x_3 = cos(theta) in [-1, 1] and of phi in [0, 2 pi)
    iu = np.minimum(((x[:, 2] + 1) / 2 * nb).astype(int), nb - 1)
    phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    ip = np.minimum((phi / (2 * np.pi) * nb).astype(int), nb - 1)
    counts = np.bincount(iu * nb + ip, minlength=nb * nb)
    m = 1600  # midpoint grid, m x m
    uu = -1 + (np.arange(m) + 0.5) * 2 / m
    pp = (np.arange(m) + 0.5) * 2 * np.pi / m
    U, P = np.meshgrid(uu, pp, indexing="ij")
    s = np.sqrt(1 - U * U)
    pts = np.stack([s * np.cos(P), s * np.sin(P), U], axis=-1)
    logd = np.einsum("...i,ij,...j->...", pts, a, pts)
    dens = np.exp(logd - logd.max())
    cell = dens.reshape(nb, m // nb, nb, m // nb).sum(axis=(1, 3))
    probs = (cell / cell.sum()).reshape(-1)
    keep = probs * N >= 5
    obs = np.concatenate([counts[keep], [counts[~keep].sum()]])
    exp_ = np.concatenate([probs[keep], [probs[~keep].sum()]]) * N
    if exp_[-1] < 5:
        assert obs[-1] <= 20
        obs, exp_ = obs[:-1], exp_[:-1]
        exp_ = exp_ * obs.sum() / exp_.sum()
    assert stats.chisquare(obs, exp_).pvalue > ALPHA


def test_bingham_high_concentration_and_dimension():
    # concentration 1e6 in d = 20: the draws concentrate on +-e_0 with E[1 - x_0^2] ~ (d - 1) / (2 k)
    d, k = 20, 1e6
    a = np.diag(np.r_[k, np.zeros(d - 1)])
    x = bingham_sample(a, 20_000, rng=9)
    off = 1 - x[:, 0] ** 2
    # 1 - x_0^2 is ~ Gamma((d-1)/2, 1/k) near the mode (Laplace approximation)
    assert abs(off.mean() - (d - 1) / (2 * k)) < 5 * math.sqrt((d - 1) / 2) / k / math.sqrt(x.shape[0])
    assert abs(np.mean(x[:, 0] > 0) - 0.5) < 5 * 0.5 / math.sqrt(x.shape[0])  # antipodal symmetry


def test_bingham_mechanism_is_the_sampler_at_epsilon_over_two_sensitivity():
    a = np.array([[4.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]])
    v = bingham(a, 2.0, 3.0, rng=5)
    w = bingham_sample(a * 3.0 / (2 * 2.0), rng=5)
    # the mechanism rounds its output to a 2^-40 grid (post-processing, see its docstring)
    assert np.array_equal(v, np.round(w * 2.0**40) / 2.0**40) and v.shape == (3,)
    assert abs(np.linalg.norm(v) - 1) < 1e-11
    assert event_of(bingham, a, 2.0, 3.0) == A.PureDP(epsilon=3.0)
    gen = np.random.default_rng(2)
    st = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        bingham(a, 1.0, 2.0, rng=gen, budget=PrivacyBudget(1.0, 1e-9))
    assert gen.bit_generator.state == st
    assert dpfast.bingham is bingham
    # only the symmetric part matters
    assert np.array_equal(bingham_sample(np.triu(a) * 2 - np.diag(np.diag(a)), rng=4), bingham_sample(a, rng=4))
    assert bingham_sample(np.array([[2.0]]), 3, rng=1).shape == (3, 1)


def test_ppca_finds_the_top_direction_at_large_epsilon():
    # Chaudhuri, Sarwate & Sinha 2013: exponent (eps / 2) v^T X^T X v for rows of norm <= 1
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 4)) * np.array([1.0, 0.3, 0.2, 0.1])
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    v = bingham(X.T @ X, 1.0, 1.0, rng=1)
    assert abs(v[0]) > 0.95


@pytest.mark.parametrize("args,exc", [((np.ones((2, 3)), 1.0, 1.0), ValueError), ((np.array([[np.nan]]), 1.0, 1.0), ValueError),
                                      ((np.eye(2), 0.0, 1.0), ValueError), ((np.eye(2), 1.0, -1.0), ValueError),
                                      ((np.array([["a"]]), 1.0, 1.0), TypeError),
                                      ((np.eye(2) * 1e308, 1e-10, 1.0), ValueError)])
def test_bingham_errors(args, exc):
    with pytest.raises(exc):
        bingham(*args, rng=1)
