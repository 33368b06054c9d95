"""Shared statistics for the audit tests: Pearson's chi-square with exact handling of rare
cells, and Clopper-Pearson bounds (Clopper & Pearson 1934) for certified epsilon lower bounds."""
from __future__ import annotations

import numpy as np
from scipy import stats


def chi_square_ok(observed, probs, alpha):
    """Pearson's goodness-of-fit of integer ``observed`` counts to ``probs`` (summing to 1) at
    level ``alpha``; returns (ok, message).

    Cells expecting >= 5 are kept; the others are merged into one cell.  If that cell still
    expects < 5 it is tested alone with the exact binomial upper tail (too many rare outcomes,
    level alpha/2) and then added to the smallest kept cell for the chi-square (level alpha/2)."""
    observed = np.asarray(observed, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    assert observed.shape == probs.shape
    assert abs(probs.sum() - 1) < 1e-9, probs.sum()
    n = observed.sum()
    exp = n * probs
    big = exp >= 5
    msgs = []
    o_small, e_small, p_small = observed[~big].sum(), exp[~big].sum(), probs[~big].sum()
    o_cells, e_cells = list(observed[big]), list(exp[big])
    if (~big).any():
        if e_small >= 5:
            o_cells.append(o_small)
            e_cells.append(e_small)
        else:
            tail = stats.binom.sf(o_small - 1, int(n), min(p_small, 1.0)) if o_small > 0 else 1.0
            msgs.append(f"rare cells: observed {o_small:g}, expected {e_small:.3g}, P(>=) = {tail:.3g}")
            if tail < alpha / 2:
                return False, "; ".join(msgs)
            if o_cells:
                k = int(np.argmin(e_cells))
                o_cells[k] += o_small
                e_cells[k] += e_small
    o_cells, e_cells = np.array(o_cells), np.array(e_cells)
    if o_cells.size < 2:
        return True, "; ".join(msgs + ["single cell"])
    chi2 = float(np.sum((o_cells - e_cells) ** 2 / e_cells))
    crit = float(stats.chi2.isf(alpha / (2 if msgs else 1), o_cells.size - 1))
    msgs.append(f"chi2 = {chi2:.4g} on {o_cells.size - 1} df, critical {crit:.4g}")
    return chi2 <= crit, "; ".join(msgs)


def clopper_pearson(k: int, n: int, alpha: float):
    """Two-sided exact (1 - alpha) interval for a binomial proportion with k successes in n."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.isf(alpha / 2, k + 1, n - k))
    return lo, hi
