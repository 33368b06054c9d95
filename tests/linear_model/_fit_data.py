"""Data and comparisons shared by the tests of the private linear models (Dask, warm start,
multinomial)."""
from __future__ import annotations

import numpy as np

#: Relative agreement of two fits of the same data (issue 9: Dask vs in memory).
REL = 1e-6


def fit_data(n=6000, d=8, seed=0):
    """(X with row norms in [1/1.6, 1/0.6], binary y, 3-class y, real y in [-1, 1])."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True) * rng.uniform(0.6, 1.6, size=(n, 1))
    w = rng.normal(size=d)
    y = (X @ w + 0.3 * rng.normal(size=n) > 0).astype(np.int64)
    y3 = np.digitize(X @ w, [-0.4, 0.4])
    yr = np.clip(0.5 * X @ w, -1, 1)
    return X, y, y3, yr


def params(m):
    return np.r_[np.ravel(m.coef_), np.ravel(m.intercept_)]


def assert_close(a, b, rel=REL):
    """The fitted parameters of ``a`` and ``b`` agree to ``rel`` relative to the largest of b's."""
    a, b = params(a), params(b)
    assert np.all(np.isfinite(a))
    err = np.abs(a - b).max() / np.abs(b).max()
    assert err <= rel, f"relative difference {err:.3g}"


def assert_same_model_on_every_scheduler(fit, Xd, yd, X, y, cluster2=None):
    """``fit(X, y)`` gives bit-identical models on a 1-worker and a 2-worker LocalCluster (``cluster2``
    or a new one), on X and y persisted on the 2 workers, and on the threaded scheduler, and
    agrees with the in-memory fit to REL."""
    import contextlib

    import dask
    import distributed

    def local(workers):
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, silence_logs=40)

    models = []
    with local(1) as cl1, distributed.Client(cl1):
        models.append(fit(Xd, yd))
    with (contextlib.nullcontext(cluster2) if cluster2 is not None else local(2)) as cl2, \
            distributed.Client(cl2) as client:
        models.append(fit(Xd, yd))
        Xp, yp = client.persist([Xd, yd])  # persisted: the passes run on the futures where the chunks are held
        distributed.wait([Xp, yp])
        models.append(fit(Xp, yp))
    with dask.config.set(scheduler="threads", num_workers=4):
        models.append(fit(Xd, yd))
    for m in models[1:]:
        np.testing.assert_array_equal(params(m), params(models[0]))
    assert_close(models[0], fit(X, y))


def blobs(n=400, d=5, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, d)) * 1.5
    y = rng.integers(0, classes, size=n)
    X = centers[y] + rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, y
