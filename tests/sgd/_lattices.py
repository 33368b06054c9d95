"""Lattice helpers for the floating-point side-channel tests of the DP-SGD noise
(test_sgd_clip.py, test_sgd_estimators.py)."""
import numpy as np


def _ziggurat_lattices_2_31():
    """Layer widths / 2^31 of the 128-layer Marsaglia-Tsang ziggurat (the abscissa lattices of a
    32-bit ziggurat: every value such a sampler accepts is an integer multiple of one of them)."""
    vn, dn = 9.91256303526217e-3, 3.442619855899
    q = vn / np.exp(-0.5 * dn * dn)
    w = [q, dn]
    for _ in range(126, 0, -1):
        dn = np.sqrt(-2.0 * np.log(vn / dn + np.exp(-0.5 * dn * dn)))
        w.append(dn)
    return np.array(w) / 2.0 ** 31


def _fraction_on_lattices(x, lattices, tol=1e-4):
    k = np.abs(np.asarray(x, np.float64))[:, None] / lattices[None, :]
    return float((np.abs(k - np.round(k)) < tol).any(axis=1).mean())
