"""Red team 36: the forest of labels' leaf selection follows the permute-and-flip law exactly.

A forest of depth 0 is T one-leaf trees that each count every row: its T leaf labels are T
independent selections from the same class counts at ``e = label_epsilon(epsilon, T)``, so one fit
gives T draws.  Their frequencies are compared with the exact law of permute-and-flip (McKenna &
Sheldon 2020; report-noisy-max with one-sided exponential noise, Ding et al. 2021):
``P(i) = p_i * integral_0^1 prod_{j != i} (1 - p_j t) dt``, ``p_j = exp(e (c_j - max c))``, the
integral of a polynomial computed exactly (numpy.polynomial), not by the code under test.
"""
import math

import numpy as np
import pytest
from numpy.polynomial import polynomial as P

from dpfast.ensemble import RandomForestClassifier


def _pf_law(counts, e):
    c = np.asarray(counts, dtype=np.float64)
    p = np.exp(e * (c - c.max()))
    out = []
    for i in range(c.size):
        poly = np.array([1.0])
        for j in range(c.size):
            if j != i:
                poly = P.polymul(poly, [1.0, -p[j]])
        integral = P.polyint(poly)
        out.append(p[i] * (P.polyval(1.0, integral) - P.polyval(0.0, integral)))
    return np.array(out)


@pytest.mark.parametrize("counts,e0", [((3, 1, 0), 0.5), ((2, 2, 0), 0.7), ((5, 0), 0.2), ((0, 0, 0, 1), 1.5)])
def test_leaf_labels_follow_the_permute_and_flip_law(counts, e0):
    """N = 20000 draws a case; every class frequency within z = 4.5 standard errors
    sqrt(P (1 - P) / N) of its exact probability (a false alarm below 1e-5 per class), and the
    laws sum to 1.  Ties (2, 2, 0) are symmetric; an empty class set (0, 0, 0, 1) still favours
    the one label present."""
    k, T = len(counts), 20000
    y = np.repeat(np.arange(k), counts)
    X = np.zeros((y.size, 1))
    m = RandomForestClassifier(T * e0, (-1, 1), classes=list(range(k)), n_estimators=T, max_depth=0,
                               leaf_mechanism="label", random_state=11).fit(X, y)
    e = m.event_.event.epsilon
    assert T * e <= T * e0 and e == pytest.approx(e0, rel=1e-12)
    law = _pf_law(counts, e)
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    labels = m.leaf_labels_[:, 0]
    assert labels.shape == (T,) and labels.dtype == np.int64
    for i in range(k):
        freq = np.mean(labels == i)
        se = math.sqrt(law[i] * (1 - law[i]) / T)
        assert abs(freq - law[i]) <= 4.5 * se + 1e-12, (i, freq, law[i])


def test_the_law_is_not_the_softmax():
    """The test above can tell permute-and-flip from the exponential mechanism (softmax at
    e c) at this size: the two laws differ by more than 10 standard errors for counts (3, 1, 0) at
    0.5, so a sampler of the wrong law fails it."""
    law = _pf_law((3, 1, 0), 0.5)
    soft = np.exp(0.5 * np.array([3.0, 1.0, 0.0]))
    soft /= soft.sum()
    se = np.sqrt(law * (1 - law) / 20000)
    assert np.max(np.abs(law - soft) / se) > 10
