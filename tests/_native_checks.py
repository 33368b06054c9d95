"""Shared check of the releases computed by a native pass (dpfast._stats: tools, GaussianNB,
KMeans, PCA, SSP): the release is a function of the data's values only.

``assert_bit_identical(monkeypatch, release, data, ...)``: ``release(data)`` gives the same bytes
for DPFAST_NUM_THREADS = 1, 2, 3, for the same values in Fortran order, in a strided view
(``strided=True``) and as float32 (``float32=``: the data's float32 original, whose values the
float64 data hold exactly).
"""
from __future__ import annotations

import numpy as np


def assert_bit_identical(monkeypatch, release, data, *, float32=None, strided=False):
    out = []
    for t in ("1", "2", "3"):
        monkeypatch.setenv("DPFAST_NUM_THREADS", t)
        out.append(release(data))
    out.append(release(np.asfortranarray(data)))
    if strided:
        wide = np.zeros((data.shape[0], 2 * data.shape[1]))
        wide[:, ::2] = data
        out.append(release(wide[:, ::2]))
    if float32 is not None:
        out.append(release(float32))
    for o in out[1:]:
        assert np.asarray(o).tobytes() == np.asarray(out[0]).tobytes()
