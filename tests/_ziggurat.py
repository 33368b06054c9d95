"""An independent NumPy transcription of the ziggurat's fast path (Marsaglia & Tsang 2000, the 256-layer
tables with NumPy's constants, as csrc/random/distributions.hpp builds them), shared by the tests of the
normal fills that consume 64-bit words (tests/test_random_fill.py, tests/test_random_philox.py)."""
import math

import numpy as np


def tables():
    """k (fast acceptance thresholds) and w (widths / 2^52) of the 256 layers."""
    r, v, m = 3.6541528853610087963519472518, 4.92867323399e-3, 2.0 ** 52
    k = np.zeros(256, dtype=np.uint64)
    w = np.zeros(256)
    dn = tn = r
    q = v / math.exp(-0.5 * dn * dn)
    k[0] = int((dn / q) * m)
    w[0] = q / m
    w[255] = dn / m
    for i in range(254, 0, -1):
        dn = math.sqrt(-2.0 * math.log(v / dn + math.exp(-0.5 * dn * dn)))
        k[i + 1] = int((dn / tn) * m)
        tn = dn
        w[i] = dn / m
    return k, w


def fast_path(words):
    """(accept, d): whether the fast path accepts each word, and the standard normal value it gives."""
    k, w = tables()
    idx = (words & np.uint64(0xFF)).astype(np.intp)
    rabs = (words >> np.uint64(9)) & np.uint64(0x000FFFFFFFFFFFFF)
    accept = rabs < k[idx]
    d = rabs.astype(np.float64) * w[idx]
    return accept, np.where((words >> np.uint64(8)) & np.uint64(1), -d, d)
