"""PCA(method="bingham"): the components are Bingham draws (Chaudhuri, Sarwate & Sinha 2013)
from the exact sampler, on the budget split stated in the docstring.

The law of the first component is checked against the exact density exp((eps0 / 2) v^T G v)
(G = sum of u u^T over the clipped rows), normalised numerically: KS for d = 2 (the angle
modulo pi: scikit-learn's sign convention folds v and -v), chi-square for d = 3 (slow tier).
"""
import math

import numpy as np
import pytest
from scipy import stats

from dpfast import PrivacyBudget, accounting as A
from dpfast.budget import BudgetExceededError
from dpfast.decomposition import PCA
from dpfast.mechanisms import bingham, laplace_noise

ALPHA = 1e-4


def _data(d, n=40, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d)) * np.linspace(1.0, 0.3, d)
    return X / np.linalg.norm(X, axis=1).max()  # rows in the unit ball: no clipping


def test_first_component_is_the_bingham_mechanism_on_the_stream():
    X = _data(3)
    eps = 3.0
    p = PCA(1, epsilon=eps, delta=0.0, method="bingham", norm_bound=1.0, centered=True, random_state=7).fit(X)
    # replay the draws: the count's Laplace noise, then one Bingham draw at eps / (k + 2)
    gen = np.random.default_rng(7)
    laplace_noise(1.0 / (eps / 3), 1, rng=gen)
    v = bingham(X.T @ X, 1.0, eps / 3, rng=gen)
    v = v / np.linalg.norm(v)
    v *= np.sign(v[np.argmax(np.abs(v))])
    assert np.array_equal(p.components_[0], v)


def test_event_epsilon_and_budget():
    X = _data(4)
    p = PCA(2, epsilon=1.2, delta=1e-5, method="bingham", norm_bound=1.0, random_state=0).fit(X)
    eps0 = 1.2 / 4
    assert p.event_ == A.Composed((A.Laplace(scale=1 / eps0 * (1 + 2.0), sensitivity=1 + 2.0),
                                   A.SelfComposed(A.PureDP(epsilon=eps0), 2),
                                   A.Laplace(scale=1 / eps0, sensitivity=1.0)))
    assert p.epsilon_ == 1.2 and p.delta_ == 0.0 and p.accountant_ is None
    assert A.PLDAccountant().compose(p.event_).get_epsilon(1e-12) <= 1.2 * (1 + 1e-6)
    assert p.components_.shape == (2, 4) and p.explained_variance_.shape == (2,)
    assert np.allclose(p.components_ @ p.components_.T, np.eye(2), atol=1e-9)
    assert np.all(np.diff(p.explained_variance_) <= 0)
    assert p.transform(X).shape == (40, 2)
    gen = np.random.default_rng(1)
    st = gen.bit_generator.state
    with pytest.raises(BudgetExceededError):
        PCA(2, epsilon=1.2, delta=0, method="bingham", norm_bound=1.0, random_state=gen).fit(
            X, budget=PrivacyBudget(1.0, 1e-9))
    assert gen.bit_generator.state == st
    with pytest.raises(ValueError, match="n_components"):
        PCA(0.5, epsilon=1.0, method="bingham", norm_bound=1.0).fit(X)
    full = PCA(None, epsilon=1.0, method="bingham", norm_bound=1.0, random_state=0).fit(X)
    assert full.components_.shape == (4, 4) and full.noise_variance_ == 0.0


def test_large_epsilon_recovers_the_top_subspace():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3000, 5)) * np.array([1.0, 0.7, 0.2, 0.1, 0.05])
    X /= np.linalg.norm(X, axis=1).max()
    p = PCA(2, epsilon=50.0, method="bingham", norm_bound=1.0, random_state=0).fit(X)
    top = np.eye(5)[:2]
    # the released 2-plane is close to span(e0, e1)
    assert np.linalg.norm(p.components_ @ top.T, ord="fro") ** 2 > 1.9


def _fold(v):
    return np.mod(np.arctan2(v[:, 1], v[:, 0]), np.pi)


def _first_components(X, eps, n_fits, seed):
    gen = np.random.default_rng(seed)
    return np.array([PCA(1, epsilon=eps, delta=0.0, method="bingham", norm_bound=1.0, centered=True,
                         random_state=gen).fit(X).components_[0] for _ in range(n_fits)])


def _check_d2(n_fits):
    X = _data(2)
    eps = 6.0
    a = (eps / 3) / 2 * (X.T @ X)
    th = _fold(_first_components(X, eps, n_fits, 11))
    grid = np.linspace(0, np.pi, 100_001)
    u = np.stack([np.cos(grid), np.sin(grid)], axis=1)
    logd = np.einsum("ij,jk,ik->i", u, a, u)
    dens = np.exp(logd - logd.max())
    cum = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(grid))])
    assert stats.kstest(th, lambda t: np.interp(t, grid, cum / cum[-1])).pvalue > ALPHA


def test_first_component_law_d2_quick():
    _check_d2(300)


@pytest.mark.slow
def test_first_component_law_d2():
    _check_d2(4000)


@pytest.mark.slow
def test_first_component_law_d3():
    X = _data(3, seed=4)
    eps = 9.0
    a = (eps / 3) / 2 * (X.T @ X)
    v = _first_components(X, eps, 4000, 12)
    v = v * np.where(v[:, 2:3] < 0, -1.0, 1.0)  # fold to the upper hemisphere (antipodal law)
    nb_u, nb_p = 4, 8
    iu = np.minimum((v[:, 2] * nb_u).astype(int), nb_u - 1)
    ip = np.minimum((np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi) / (2 * np.pi) * nb_p).astype(int), nb_p - 1)
    counts = np.bincount(iu * nb_p + ip, minlength=nb_u * nb_p)
    m = 800
    uu = (np.arange(m) + 0.5) / m
    pp = (np.arange(m) + 0.5) * 2 * np.pi / m
    U, P = np.meshgrid(uu, pp, indexing="ij")
    s = np.sqrt(1 - U * U)
    pts = np.stack([s * np.cos(P), s * np.sin(P), U], axis=-1)
    logd = np.einsum("...i,ij,...j->...", pts, a, pts)
    dens = np.exp(logd - logd.max())
    probs = dens.reshape(nb_u, m // nb_u, nb_p, m // nb_p).sum(axis=(1, 3)).reshape(-1)
    probs /= probs.sum()
    keep = probs * v.shape[0] >= 5
    obs = counts[keep]
    exp_ = probs[keep] * v.shape[0]
    exp_ *= obs.sum() / exp_.sum()
    assert stats.chisquare(obs, exp_).pvalue > ALPHA
    assert math.isfinite(float(np.sum(probs)))
