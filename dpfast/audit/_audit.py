"""Black-box privacy audit of a release on neighbouring inputs."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from dpfast._validation import check_delta, check_epsilon
from dpfast.audit._observe import observe
from dpfast.audit._stats import certified_epsilon
from dpfast.random import RandomLike, check_random_state

__all__ = ["audit", "AuditReport", "PairResult"]

_N_THRESHOLDS = 48    # candidate thresholds per number (quantiles of the search half)
_N_CATEGORIES = 16    # most frequent values of a varying fact turned into 0/1 events
_N_TAIL = 8         # extra thresholds in each tail (geometric quantiles, see _thresholds)
_TAIL_MAX = 0.02
_N_DIRECTIONS = 2     # Fisher discriminant directions tried for vector outputs (search half)


@dataclass
class PairResult:
    """The audit of one neighbouring pair."""
    description: str
    epsilon_lower_bound: float
    best_event: Optional[str]
    structural_differences: List[str]
    n_runs: int


@dataclass
class AuditReport:
    """Outcome of :func:`audit`.

    ``passed`` is True when no structural difference was found and the certified lower bound
    does not exceed the claimed ``epsilon``.  ``epsilon_lower_bound`` holds with probability at
    least ``confidence`` (over the audit's own randomness) for every (epsilon, delta)-DP release:
    a correct release fails only with probability <= ``1 - confidence``."""
    passed: bool
    epsilon: float
    delta: float
    epsilon_lower_bound: float
    structural_differences: List[str]
    best_event: Optional[str]
    confidence: float
    n_runs: int
    seconds: float
    pairs: List[PairResult] = field(default_factory=list)

    def __repr__(self) -> str:
        head = "PASSED" if self.passed else "FAILED"
        lines = [f"AuditReport({head}: claimed epsilon={self.epsilon:g}, delta={self.delta:g}; "
                 f"certified lower bound {self.epsilon_lower_bound:.4g} at confidence "
                 f"{self.confidence:g}; {len(self.pairs)} pair(s) x {self.n_runs} runs a side, "
                 f"{self.seconds:.2f} s"]
        if self.best_event:
            lines.append(f"  best event: {self.best_event}")
        for d in self.structural_differences[:20]:
            lines.append(f"  structural difference: {d}")
        if len(self.structural_differences) > 20:
            lines.append(f"  ... {len(self.structural_differences) - 20} more")
        return "\n".join(lines) + ")"


def _pairs(neighbours) -> List[Tuple[Any, Any, str]]:
    if isinstance(neighbours, tuple) and len(neighbours) == 2 and not _looks_like_pair(neighbours[0]):
        neighbours = [neighbours]
    out = []
    for i, p in enumerate(neighbours):
        if not (isinstance(p, tuple) and len(p) >= 2):
            raise TypeError("neighbours must be a pair (D, D_prime) or an iterable of such pairs")
        desc = getattr(p, "description", None) or f"pair {i}"
        out.append((p[0], p[1], desc))
    if not out:
        raise ValueError("neighbours is empty")
    return out


def _looks_like_pair(x) -> bool:
    return isinstance(x, tuple) and len(x) >= 2 and hasattr(x, "description")


def _run(release, data, seeds) -> Tuple[list, list]:
    facts, nums = [], []
    for s in seeds:
        try:
            out = release(data, int(s))
        except Exception as exc:  # noqa: BLE001 -- what it raises is an observation
            f, n = observe(error=exc)
        else:
            f, n = observe(out)
        facts.append(f)
        nums.append(n)
    return facts, nums


def _short(v) -> str:
    s = repr(v)
    return s if len(s) <= 160 else s[:157] + "..."


def _split_facts(fa: list, fb: list, structural: List[str], events: dict) -> None:
    """Facts constant on each side but different between them are structural differences
    (distinguishing with probability 1); varying facts become 0/1 numbers (their law is tested)."""
    keys = set().union(*fa, *fb)
    for k in sorted(keys):
        va = [f.get(k, "<absent>") for f in fa]
        vb = [f.get(k, "<absent>") for f in fb]
        ca, cb = Counter(map(_hashable, va)), Counter(map(_hashable, vb))
        if len(ca) == 1 and len(cb) == 1:
            a, b = next(iter(ca)), next(iter(cb))
            if a != b:
                structural.append(f"{k}: {_short(a)} vs {_short(b)}")
            continue
        top = (ca + cb).most_common(_N_CATEGORIES)
        for v, _ in top:
            ia = np.array([_hashable(x) == v for x in va], dtype=np.float64)
            ib = np.array([_hashable(x) == v for x in vb], dtype=np.float64)
            events[f"{k} == {_short(v)}"] = (ia, ib)


def _hashable(v):
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def _numbers(na: list, nb: list, structural: List[str], events: dict) -> None:
    keys = set().union(*na, *nb)
    for k in sorted(keys):
        a = np.array([n.get(k, np.nan) for n in na], dtype=np.float64)
        b = np.array([n.get(k, np.nan) for n in nb], dtype=np.float64)
        const_a = np.all((a == a[0]) | (np.isnan(a) & np.isnan(a[0])))
        const_b = np.all((b == b[0]) | (np.isnan(b) & np.isnan(b[0])))
        if const_a and const_b:
            if not ((a[0] == b[0]) or (np.isnan(a[0]) and np.isnan(b[0]))):
                structural.append(f"{k}: always {a[0]!r} vs always {b[0]!r}")
            continue
        events[k] = (a, b)


def _thresholds(x: np.ndarray) -> np.ndarray:
    """Candidate thresholds: every value when few, else evenly spaced quantiles plus quantiles
    spaced geometrically into both tails (down to about 5 runs beyond the threshold).  At a
    small delta the best event of a Gaussian or Laplace release lies far in a tail, beyond
    the outermost evenly spaced quantile (1/47 of the runs)."""
    v = x[np.isfinite(x)]
    if v.size == 0:
        return np.array([0.0])
    u = np.unique(v)
    if u.size <= _N_THRESHOLDS:
        return u
    probs = np.linspace(0.0, 1.0, _N_THRESHOLDS)
    lo = 5.0 / v.size
    if lo < _TAIL_MAX:
        tails = np.geomspace(lo, _TAIL_MAX, _N_TAIL)
        probs = np.concatenate([probs, tails, 1.0 - tails])
    return np.unique(np.quantile(v, probs))


def _counts(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Number of entries of x (NaN read as -inf: an absent number never exceeds a threshold)
    strictly above each threshold."""
    v = np.sort(np.where(np.isnan(x), -np.inf, x))
    return v.size - np.searchsorted(v, t, side="right")


def _best_event(events: dict, search: np.ndarray, delta: float, alpha: float):
    """The event maximising the lower bound on the search half: (score, name, feature, threshold,
    side (+1: above t, -1: at or below t), order (0: D over D', 1: D' over D))."""
    best = (-np.inf, None, None, None, None, None)
    for name, (a, b) in events.items():
        xa, xb = a[search], b[search]
        t = _thresholds(np.concatenate([xa, xb]))
        na, nb = xa.size, xb.size
        ka, kb = _counts(xa, t), _counts(xb, t)
        for side, (ca, cb) in ((1, (ka, kb)), (-1, (na - ka, nb - kb))):
            for order, (k1, n1, k2, n2) in enumerate(((ca, na, cb, nb), (cb, nb, ca, na))):
                lb = certified_epsilon(k1, n1, k2, n2, delta, alpha)
                i = int(np.argmax(lb))
                if lb[i] > best[0]:
                    best = (float(lb[i]), name, (a, b), float(t[i]), side, order)
    return best


def _fisher_directions(events: dict, search: np.ndarray) -> dict:
    """Scalar projections of the numbers onto Fisher discriminant directions fitted on the search
    half: a linear classifier test for vector outputs (DP-Sniper / DP-Auditorium style), whose
    direction is fixed before the certifying half is looked at."""
    names = [k for k, (a, b) in events.items() if np.isfinite(a).all() and np.isfinite(b).all()]
    if len(names) < 2:
        return {}
    A = np.stack([events[k][0] for k in names], axis=1)
    B = np.stack([events[k][1] for k in names], axis=1)
    As, Bs = A[search], B[search]
    scale = np.concatenate([As, Bs]).std(axis=0)
    keep = scale > 0
    if keep.sum() < 2:
        return {}
    A, B, As, Bs, scale = A[:, keep], B[:, keep], As[:, keep], Bs[:, keep], scale[keep]
    A, B, As, Bs = A / scale, B / scale, As / scale, Bs / scale
    diff = As.mean(axis=0) - Bs.mean(axis=0)
    cov = 0.5 * (np.cov(As, rowvar=False) + np.cov(Bs, rowvar=False))
    cov = np.atleast_2d(cov) + 1e-9 * np.eye(cov.shape[0] if np.ndim(cov) else 1)
    out = {}
    try:
        w = np.linalg.solve(cov, diff)
    except np.linalg.LinAlgError:
        w = diff
    for j, (vec, label) in enumerate(((w, "Fisher direction"), (diff, "mean-difference direction"))):
        if j >= _N_DIRECTIONS or not np.isfinite(vec).all() or not np.any(vec):
            continue
        out[f"<{label} over {len(names)} numbers>"] = (A @ vec, B @ vec)
    return out


def audit(release: Callable[[Any, Any], Any], neighbours, epsilon: float, delta: float = 0.0, *,
          n_runs: Optional[int] = None, rng: RandomLike = None, confidence: float = 0.95) -> AuditReport:
    """Black-box audit of ``release`` on neighbouring inputs: structure exactly, values statistically.

    ``release(data, rng)`` is run ``n_runs`` times on each side of every pair in ``neighbours``
    (a pair ``(D, D_prime)`` or an iterable of pairs, e.g. from :mod:`dpfast.audit.neighbours`),
    each run with a fresh integer seed as ``rng``.  Its output may be anything: arrays,
    scalars, DataFrames, fitted estimators, tuples, lists and dicts of them; a run that raises is
    observed through its exception's type and message.

    **Structure.**  Everything observable that is not a released number (see
    :func:`dpfast.audit.observe`: types, dtypes, shapes, index and columns with their values,
    dtypes, names, categories and order, attrs, fitted attribute names, strings, the exception
    raised) is compared exactly: a fact that is constant on each side but differs between them
    tells the neighbours apart with probability 1 and is reported as a structural difference.
    Facts that vary from run to run (a released set of groups) are tested like the values.

    **Values.**  Each released number, each 0/1 indicator of a varying fact and two linear
    projections of the numbers (Fisher discriminant and mean difference, fitted on the search
    half) give events ``{f > t}`` and ``{f <= t}``.  The runs are split in halves: the event with
    the highest certified bound on the first half is chosen, and on the second half its
    probabilities are bounded by Clopper-Pearson (Clopper & Pearson 1934) to give

        epsilon >= log((P_lo[M(D) in E] - delta) / P_hi[M(D') in E])

    for the better of both orders.  This is the distinguishing-test audit of Jagielski, Ullman &
    Oprea 2020 / Nasr et al. 2021 with the event chosen as in DP-Sniper (Bichsel et al. 2021) and
    StatDP (Ding et al. 2018) on held-out runs, so the bound is valid whatever the search did.
    With the level split equally over the pairs (Bonferroni), ``epsilon_lower_bound`` (the
    largest over the pairs) is below the release's true epsilon at ``delta`` with probability at
    least ``confidence``: a correct release is reported as failing with probability at most
    ``1 - confidence`` (the false-alarm rate).

    A passing audit is evidence, not proof: it finds only what the runs, the neighbours and the
    events it tries can show.  An audit in which every run of every pair raised released nothing
    and fails (reported as ``"no release: ..."``): a broken call must not pass for a private one.

    Parameters
    ----------
    release : callable ``(data, rng) -> output``
    neighbours : pair or iterable of pairs ``(D, D_prime)``
        A tuple of two is read as one pair; pass several pairs as a list.
    epsilon : float > 0
        The claimed epsilon.
    delta : float in [0, 1)
        The claimed delta (events are certified at this delta).
    n_runs : int >= 20, optional
        Runs per side of each pair (default 2000).
    rng : None, int or numpy.random.Generator
        Source of the runs' seeds; a seed makes the audit reproducible.
    confidence : float in (0, 1)
        Default 0.95.

    Returns
    -------
    AuditReport
    """
    if not callable(release):
        raise TypeError("release must be a callable (data, rng) -> output")
    epsilon = check_epsilon(epsilon, allow_array=False)
    delta = check_delta(delta)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) \
            or not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    n = 2000 if n_runs is None else n_runs
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 20:
        raise ValueError(f"n_runs must be an integer >= 20, got {n_runs!r}")
    n = int(n)
    pairs = _pairs(neighbours)
    gen = check_random_state(rng)
    alpha = (1.0 - float(confidence)) / len(pairs)
    start = time.perf_counter()
    results = []
    raised_always = []  # (pair, message) where every run on both sides raised
    for D, Dp, desc in pairs:
        seeds = gen.integers(0, 2 ** 63, size=2 * n)
        fa, na = _run(release, D, seeds[:n])
        fb, nb = _run(release, Dp, seeds[n:])
        if all(f["raises"] is not None for f in fa + fb):
            raised_always.append((desc, fa[0]["raises"]))
        structural: List[str] = []
        events: dict = {}
        _split_facts(fa, fb, structural, events)
        _numbers(na, nb, structural, events)
        perm = gen.permutation(n)
        search, certify = perm[: n // 2], perm[n // 2:]
        lb, best = 0.0, None
        if events:
            events.update(_fisher_directions({k: v for k, v in events.items() if not k.startswith("raises")},
                                             search))
            _, name, (a, b), t, side, order = _best_event(events, search, delta, alpha)
            if name is not None:
                xa, xb = a[certify], b[certify]
                ka, kb = _counts(xa, np.array([t]))[0], _counts(xb, np.array([t]))[0]
                if side < 0:
                    ka, kb = xa.size - ka, xb.size - kb
                k1, n1, k2, n2 = (ka, xa.size, kb, xb.size) if order == 0 else (kb, xb.size, ka, xa.size)
                cert = float(certified_epsilon(k1, n1, k2, n2, delta, alpha))
                lb = max(0.0, cert)
                first, second = ("D", "D'") if order == 0 else ("D'", "D")
                rel = ">" if side > 0 else "<="
                best = (f"{name} {rel} {t:.6g}: {k1}/{n1} runs on {first} vs {k2}/{n2} on {second} "
                        f"(certifying half)")
        results.append(PairResult(desc, lb, best, structural, n))
    seconds = time.perf_counter() - start
    top = max(results, key=lambda r: r.epsilon_lower_bound)
    structural = [f"{r.description}: {d}" for r in results for d in r.structural_differences]
    if len(raised_always) == len(pairs):
        # every run of every pair raised: nothing was released, so nothing was audited (a broken
        # release call must not pass as a private release)
        desc, msg = raised_always[0]
        structural.append(f"no release: every run on every pair raised (e.g. {desc}: {msg})")
    lb = top.epsilon_lower_bound
    return AuditReport(passed=not structural and lb <= epsilon, epsilon=epsilon, delta=delta,
                       epsilon_lower_bound=lb, structural_differences=structural,
                       best_event=(f"{top.description}: {top.best_event}" if top.best_event else None),
                       confidence=float(confidence), n_runs=n, seconds=seconds, pairs=results)
