"""The Latin-hypercube grids of tests/audit/test_accountants_vs_peers.py, computed once.

Choosing a grid point asks the peers (dp-accounting's coarse PLD epsilon must lie in
[0.2, 100], prv-accountant must accept the point), which took ~54 s of every test collection
when it ran at parametrize time.  ``make_peer_grids.py`` (next to this file) runs
:func:`build_grid` with the installed peers and writes ``tests/data/peer_grids.json`` with the
peers' versions; the tests read it with :func:`load_grid`, and
``test_committed_peer_grids_match_the_installed_peers`` recomputes a few candidates with the
installed peers, so the data cannot rot.
"""
from __future__ import annotations

import functools
import json
import pathlib

import numpy as np
from scipy.stats import qmc

DELTA = 1e-5
#: the committed grids (tests/data/peer_grids.json)
DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "peer_grids.json"
#: name -> (Latin-hypercube candidates, points kept, seed)
GRIDS = {"add_remove": (64, 24, 20240615), "replace_one": (40, 8, 7)}
#: epsilon range of a kept point: below 0.2 the 1 % tolerance is finer than the peers' grids
#: resolve in CI time; above 100 nothing is private
EPS_RANGE = (0.2, 100.0)


@functools.lru_cache(maxsize=None)
def coarse_eps(z: float, q: float, n: int) -> float:
    """dp-accounting's pessimistic PLD epsilon on a coarse grid (h = 1e-3): the peer's scale for
    choosing tolerances and filtering the grid (never dpfast's own output)."""
    from dp_accounting.pld import privacy_loss_distribution as dpa_pld  # optional peer ([audit] extra)

    return dpa_pld.from_gaussian_mechanism(
        z, value_discretization_interval=1e-3, sampling_prob=q).self_compose(n).get_epsilon_for_delta(DELTA)


@functools.lru_cache(maxsize=None)
def prv_poisson(z: float, q: float, n: int):
    """(eps_lower, eps_estimate, eps_upper) of the remove pair, eps_error 1 % of the coarse epsilon
    (its work grows like sqrt(n) / eps_error; the estimate itself is far more accurate)."""
    import prv_accountant as prv  # optional peer ([audit] extra)

    acc = prv.PRVAccountant([prv.PoissonSubsampledGaussianMechanism(q, z)], eps_error=0.01 * coarse_eps(z, q, n),
                            delta_error=1e-3 * DELTA, max_self_compositions=[n])
    return acc.compute_epsilon(DELTA, [n])


def candidates(n_candidates: int, seed: int):
    """Latin hypercube (fixed seed) over log noise multiplier in [0.5, 20], log sample rate in
    [1e-4, 0.5] and log steps in [1, 1e5]: (z, q, n) in order, q on the 1e-6 grid
    (dp-accounting's sampling-without-replacement event needs q*N integral)."""
    s = qmc.LatinHypercube(d=3, seed=seed).random(n_candidates)
    lo = np.log10([0.5, 1e-4, 1.0])
    hi = np.log10([20.0, 0.5, 1e5])
    return [(float(z), round(float(q) * 1e6) / 1e6, int(round(n))) for z, q, n in 10 ** (lo + s * (hi - lo))]


def classify(z: float, q: float, n: int):
    """(the peers' verdict on a candidate, dp-accounting's coarse epsilon): "kept",
    "eps_out_of_range" or "prv_refused" (prv-accountant's discretiser refuses some small-z
    points: its mean check)."""
    eps = coarse_eps(z, q, n)
    if not EPS_RANGE[0] <= eps <= EPS_RANGE[1]:
        return "eps_out_of_range", eps
    try:
        prv_poisson(z, q, n)
    except RuntimeError:
        return "prv_refused", eps
    return "kept", eps


def build_grid(name: str):
    """Every candidate up to the last one kept, with the peers' verdict."""
    n_candidates, n_keep, seed = GRIDS[name]
    rows, kept = [], 0
    for z, q, n in candidates(n_candidates, seed):
        status, eps = classify(z, q, n)
        rows.append({"z": z, "q": q, "n": n, "coarse_eps": eps, "status": status})
        kept += status == "kept"
        if kept == n_keep:
            break
    return rows


@functools.lru_cache(maxsize=None)
def _load():
    return json.loads(DATA.read_text(encoding="utf-8"))


def load_grid(name: str):
    """The committed grid's kept points (z, q, n)."""
    return [(r["z"], r["q"], r["n"]) for r in _load()["grids"][name] if r["status"] == "kept"]


def load_rows(name: str):
    """Every committed candidate of a grid, with its verdict and coarse epsilon."""
    return list(_load()["grids"][name])


def peer_versions():
    return dict(_load()["peers"])
