"""dpfast.torch audited with a canary example (issue 25): the auditor on a tiny model.

The model is logistic regression without intercept, ``nn.Linear(d, 1, bias=False)`` from w = 0,
trained by :class:`dpfast.torch.PrivacyEngine` (``loss_reduction="sum"``, SGD).  Every base record
has feature 0 equal to 0, so its gradient ``(sigmoid(w.x) - y) x`` never touches coordinate 0.
The neighbours differ in one record:

* D: the base records plus a *null* record x = 0 (its gradient is 0);
* D': the same with the null record replaced by the *canary* ``x = 40 C e_0``, label 1: a
  mislabelled-looking outlier whose raw gradient ``-(1 - sigmoid(40 C w_0)) 40 C e_0`` is 20 C at
  w = 0, so the engine clips it to exactly C (to within the safe factor's margin) in the fixed
  direction ``-e_0``.

Both sides have the same n, so the same public sampling rate q = batch_size / n; and since the null
record contributes nothing to any step, (D, D') is an add/remove pair at that q: the engine's
claim, ``SelfComposed(PoissonSampled(q, Gaussian(z)), T)`` (Gaussian(z) when q = 1), bounds the
privacy loss between them.  The score is the final ``w_0`` (the canary-direction projection of
the parameters): on D it is pure noise, on D' noise plus the canary's clipped steps.

* Black box: :func:`dpfast.audit.audit` (Clopper-Pearson on held-out runs, Jagielski, Ullman &
  Oprea 2020 / Nasr et al. 2021) must certify a lower bound <= the accountant's epsilon (the
  theorem; with the runs' seeds fixed the outcome is fixed), and the same audit of a broken engine
  that skips clipping (a test-only monkeypatch) must exceed it: the audit has power.
* White box: one step's privatized gradient on coordinate 0 is a Gaussian-mechanism pair
  N(0, (zC)^2) vs N(-C, (zC)^2) (Gaussian DP with mu = 1/z, Dong, Roth & Su 2022); a confidence
  interval for mu from many steps (t and chi-square bounds) mapped through the exact
  Gaussian-mechanism epsilon (Balle & Wang 2018, ``dpfast.accounting.gdp_epsilon``) must bracket
  the accountant's epsilon, and the broken engine's lower bound must exceed it (Nasr et al. 2023,
  "Tight auditing of differentially private machine learning", audit DP-SGD's gradients this way).

dpfast.audit has no Gaussian/f-DP fitting of its own; the white-box bounds are written here from
their definitions.
"""
import math

import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
from scipy import stats  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import dpfast.accounting as acc  # noqa: E402
from dpfast.audit import audit  # noqa: E402
from dpfast.torch import GradSampleModule, PrivacyEngine  # noqa: E402

torch.set_num_threads(1)  # tiny models: intra-op threads only contend

D_FEAT, N, C, DELTA = 4, 16, 1.0, 1e-5
CANARY = 40.0 * C  # raw canary gradient at w = 0: 0.5 * 40 C = 20 C, clipped to C


def _neighbours():
    g = np.random.default_rng(2025)
    X = np.zeros((N, D_FEAT))
    X[:, 1:] = g.normal(size=(N, D_FEAT - 1))
    y = g.integers(0, 2, N).astype(np.float64)
    X[0], y[0] = 0.0, 1.0  # the null record (gradient 0)
    Xc = X.copy()
    Xc[0, 0] = CANARY  # the canary replaces it
    return (X, y), (Xc, y.copy())


D, D_PRIME = _neighbours()


def _engine(data, seed, z, batch_size=N, epochs=1, lr=1.0):
    X, y = data
    model = nn.Linear(D_FEAT, 1, bias=False).double()
    with torch.no_grad():
        model.weight.zero_()
    loader = DataLoader(TensorDataset(torch.tensor(X), torch.tensor(y)), batch_size=batch_size)
    eng = PrivacyEngine(rng=seed)
    m, o, dl = eng.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=lr),
                                data_loader=loader, noise_multiplier=z, max_grad_norm=C, epochs=epochs,
                                loss_reduction="sum")
    return eng, model, m, o, dl


LR = 1e-3  # small steps: w_0 stays near 0, so the canary's raw gradient stays well above C in every step


def _train(data, seed, z, batch_size=N, epochs=1):
    """One training run; the released score is the final w_0 / lr (the sum of the noisy steps)."""
    eng, model, m, o, dl = _engine(data, seed, z, batch_size, epochs, lr=LR)
    for _ in range(epochs):
        for xb, yb in dl:
            o.zero_grad()
            nn.functional.binary_cross_entropy_with_logits(m(xb).squeeze(1), yb, reduction="sum").backward()
            o.step()
    assert eng.steps == eng.planned_steps
    return float(model.weight.detach()[0, 0]) / LR


def _claimed_epsilon(z, q=1.0, steps=1):
    step = acc.Gaussian(z) if q >= 1 else acc.PoissonSampled(q, acc.Gaussian(z))
    return acc.make_accountant("pld").compose(acc.SelfComposed(step, steps)).get_epsilon(DELTA)


@pytest.fixture
def no_clipping(monkeypatch):
    """A broken engine: per-sample gradients clipped at 10^6 C while the noise stays z C."""
    orig = GradSampleModule.clipped_sum
    monkeypatch.setattr(GradSampleModule, "clipped_sum", lambda self, c: orig(self, c * 1e6))


# --------------------------------------------------------------------------- black box
Z = 2.0  # Gaussian(2) alone: epsilon 1.993 at delta 1e-5
CONF = 0.999  # the audits' confidence: a correct engine fails one with probability <= 1e-3 whatever the seeds
N_RUNS = 200  # the certifying half (100 a side) can certify up to log(0.921 / 0.079) = 2.45 > 1.993 at CONF


def _bb_release(z):
    return lambda data, seed: _train(data, seed, z)


def test_canary_shifts_the_score_by_the_clip_norm():
    # the setting is what the docstring says: same seed (same noise) on both sides -> the scores
    # differ by the canary's clipped step, C to within the safe factor's margin (<= C)
    for seed in range(3):
        a, b = _train(D, seed, Z), _train(D_PRIME, seed, Z)
        assert C * (1 - 1e-9) <= b - a <= C * (1 + 1e-12)  # (1e-12: the rounding of w_0 = -lr g and of / lr)


def test_audit_of_one_step_stays_below_the_accountant():
    eps = _claimed_epsilon(Z)
    rep = audit(_bb_release(Z), (D, D_PRIME), eps, DELTA, n_runs=N_RUNS, rng=0, confidence=CONF)
    assert rep.passed and not rep.structural_differences, rep
    assert rep.epsilon_lower_bound <= eps


def test_audit_of_an_engine_without_clipping_exceeds_the_accountant(no_clipping):
    # the canary's unclipped step is 20 C, ten noise standard deviations: the audit must catch it
    assert _train(D_PRIME, 0, Z) - _train(D, 0, Z) > 10 * C
    eps = _claimed_epsilon(Z)
    rep = audit(_bb_release(Z), (D, D_PRIME), eps, DELTA, n_runs=N_RUNS, rng=0, confidence=CONF)
    assert not rep.passed and rep.epsilon_lower_bound > eps, rep


def test_audit_without_noise_fails():
    # noise_multiplier = 0 (epsilon inf, refused with a budget): at q = 1 the score is a
    # deterministic function of the data, a difference the audit reports as structural
    rep = audit(_bb_release(0.0), (D, D_PRIME), 10.0, DELTA, n_runs=20, rng=0)
    assert not rep.passed and rep.structural_differences, rep


@pytest.mark.slow
@pytest.mark.parametrize("broken", [False, True])
def test_audit_of_poisson_multi_step_training(broken, request):
    # q = 4/16, 2 epochs = 8 Poisson steps (epsilon 1.83 at z = 2); 1000 runs a side.  Broken: the
    # canary is sampled at least once with probability 1 - 0.75^8 = 0.90, and each time moves the
    # score by 12-20 C (its raw gradient at the small w_0 of lr = 1e-3) against a noise of standard
    # deviation z C sqrt(8) = 5.7 C
    if broken:
        request.getfixturevalue("no_clipping")
    z, bs, epochs = 2.0, 4, 2
    eps = _claimed_epsilon(z, q=bs / N, steps=epochs * (N // bs))
    rep = audit(lambda data, seed: _train(data, seed, z, batch_size=bs, epochs=epochs), (D, D_PRIME), eps, DELTA,
                n_runs=1000, rng=1, confidence=CONF)
    if broken:
        assert rep.epsilon_lower_bound > eps, rep
    else:
        assert rep.passed and rep.epsilon_lower_bound <= eps, rep


# --------------------------------------------------------------------------- white box
def _privatized_gradients(data, z, steps, seed):
    """Coordinate 0 of ``steps`` privatized gradients at w = 0 (lr = 0: every step sees the same
    parameters, so the draws are i.i.d. copies of one step's Gaussian mechanism)."""
    eng, model, m, o, dl = _engine(data, seed, z, epochs=steps, lr=0.0)
    out = np.empty(steps)
    x, yv = (torch.tensor(a) for a in data)  # q = 1: every Poisson batch is the whole dataset
    for t in range(steps):
        o.zero_grad()
        nn.functional.binary_cross_entropy_with_logits(m(x).squeeze(1), yv, reduction="sum").backward()
        o.step()
        out[t] = float(model.weight.grad[0, 0])
    return out


def _gaussian_audit(a, b, alpha=0.05):
    """Two-sided (1 - alpha) interval for mu = |E b - E a| / sigma of two Gaussian samples with a
    common sigma (the white-box model of one DP-SGD step): a t interval for the mean difference and
    a chi-square interval for sigma, each at level alpha / 2 (Bonferroni), combined by interval
    arithmetic.  Returns (mu_lo, mu_hi, s)."""
    n1, n2 = a.size, b.size
    dof = n1 + n2 - 2
    s2 = (((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()) / dof
    s = math.sqrt(s2)
    diff = abs(b.mean() - a.mean())
    half = stats.t.ppf(1 - alpha / 4, dof) * s * math.sqrt(1 / n1 + 1 / n2)
    sig_lo = math.sqrt(dof * s2 / stats.chi2.ppf(1 - alpha / 4, dof))
    sig_hi = math.sqrt(dof * s2 / stats.chi2.ppf(alpha / 4, dof))
    return max(diff - half, 0.0) / sig_hi, (diff + half) / sig_lo, s


@pytest.mark.parametrize("steps", [600, pytest.param(10_000, marks=pytest.mark.slow)])
def test_white_box_gradient_audit_brackets_the_accountant(steps):
    eps = _claimed_epsilon(Z)
    a = _privatized_gradients(D, Z, steps, seed=10)
    b = _privatized_gradients(D_PRIME, Z, steps, seed=11)
    mu_lo, mu_hi, s = _gaussian_audit(a, b, alpha=1 - CONF)
    # the law first: N(0, (zC)^2) on D, N(-C, (zC)^2) on D' (KS at the fixed seeds, level 1e-3)
    assert stats.kstest(a / (Z * C), "norm").pvalue > 1e-3
    assert stats.kstest((b + C) / (Z * C), "norm").pvalue > 1e-3
    # the claim mu = 1/z is inside the interval: the accountant is neither beaten nor vacuous
    assert mu_lo <= 1 / Z <= mu_hi
    eps_lo, eps_hi = acc.gdp_epsilon(mu_lo, DELTA), acc.gdp_epsilon(mu_hi, DELTA)
    assert eps_lo <= eps <= eps_hi * (1 + 1e-9)  # (the PLD's certified bound is above the exact one by ~1e-9)


def test_white_box_gradient_audit_catches_an_engine_without_clipping(no_clipping):
    eps = _claimed_epsilon(Z)
    a = _privatized_gradients(D, Z, 200, seed=10)
    b = _privatized_gradients(D_PRIME, Z, 200, seed=11)
    mu_lo, _, _ = _gaussian_audit(a, b, alpha=1 - CONF)
    assert acc.gdp_epsilon(mu_lo, DELTA) > eps
