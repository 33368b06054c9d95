"""Shared checks of the one-pass Dask releases of issue 24 (GaussianNB, KMeans, PCA, SSP, tools).

``no_gather``: a context in which a dask Array or DataFrame that is turned into NumPy on the
client (``np.asarray``, ``.compute()``, ``.values``) raises, so a fit that succeeds inside it
reduced its data on the workers (only the partials came back).
"""
from __future__ import annotations

import contextlib

import numpy as np


@contextlib.contextmanager
def no_gather():
    import dask.array as da
    import dask.dataframe as dd

    def refuse(*_a, **_k):
        raise AssertionError("the data were gathered on the client")

    saved = [(da.Array, "__array__", da.Array.__array__), (da.Array, "compute", da.Array.compute),
             (dd.DataFrame, "compute", dd.DataFrame.compute)]
    try:
        for cls, name, _ in saved:
            setattr(cls, name, refuse)
        yield
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)


def rounding_tol(n: int, scale: float) -> float:
    """Bound on the difference of two float64 sums of n terms of magnitude <= scale added in
    different orders: 2 (n - 1) eps scale (the recursive-summation bound, Higham 2002, eq. 4.4,
    for each order), times 4 for the post-processing (a division and the noise addition)."""
    return 8.0 * n * np.finfo(np.float64).eps * scale


def class_blobs(n: int, d: int, seed: int = 0):
    """Labelled data for the classifiers' Dask tests: 3 classes, class c's rows ~ N(c, I_d)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return rng.normal(size=(n, d)) + y[:, None], y
