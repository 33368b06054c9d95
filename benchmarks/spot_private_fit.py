"""Spot check: private logistic regression (Algorithm 1) on 100k x 50 vs non-private sklearn.

Run: PYTHONPATH=. python benchmarks/spot_private_fit.py   (figures in RESULTS.md)
"""
import time

import numpy as np

from dpfast.linear_model import LogisticRegression

rng = np.random.default_rng(0)
n, d = 100_000, 50
X = rng.normal(size=(n, d)); X /= np.maximum(1, np.linalg.norm(X, axis=1, keepdims=True))
w = rng.normal(size=d); y = (rng.random(n) < 1/(1+np.exp(-X @ w * 3))).astype(int)
LogisticRegression(epsilon=1.0, delta=1e-5, random_state=0).fit(X[:1000], y[:1000])  # warm calibration cache
ts = []
for s in range(5):
    t = time.perf_counter(); m = LogisticRegression(epsilon=1.0, delta=1e-5, random_state=s).fit(X, y); ts.append(time.perf_counter() - t)
print("private fit 100k x 50: min %.3f s median %.3f s; n_iter %d grad %.4f acc %.4f" % (min(ts), np.median(ts), int(np.max(m.n_iter_)), float(np.max(m.grad_norm_)), m.score(X, y)))
from sklearn.linear_model import LogisticRegression as SK

ts=[]
for s in range(3):
    t=time.perf_counter(); SK().fit(X,y); ts.append(time.perf_counter()-t)
print("sklearn lbfgs non-private: min %.3f s" % min(ts))
