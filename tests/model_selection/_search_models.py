"""Toy private classifiers and data shared by the PrivateRandomSearch tests."""
import math

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from dpfast import accounting
from dpfast.budget import charge
from dpfast.calibrate import gaussian_sigma


class NoisyCentroid(ClassifierMixin, BaseEstimator):
    """A toy private classifier following the estimator contract: rows clipped to [-1, 1]^d,
    class sums released with the analytic Gaussian mechanism (l2 sensitivity sqrt(d) under
    add/remove), charged before the noise.  ``sign=-1`` makes a useless candidate."""

    def __init__(self, epsilon=1.0, delta=1e-5, sign=1.0, boost=1.0, random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.sign = sign
        self.boost = boost  # extra noise factor: candidates with different events
        self.random_state = random_state

    def fit(self, X, y, *, budget=None):
        X = np.clip(np.asarray(X, dtype=float), -1, 1)
        d = X.shape[1]
        sens = math.sqrt(d)
        sigma = float(gaussian_sigma(self.epsilon, self.delta, sens)) * self.boost
        self.event_ = accounting.Gaussian(noise_multiplier=sigma / sens, sensitivity=sens)
        charge(budget, self.event_, label="NoisyCentroid")
        g = np.random.default_rng(self.random_state)
        self.classes_ = np.array([0, 1])
        self.c_ = self.sign * np.stack([X[y == c].sum(0) + g.normal(0, sigma, d) for c in (0, 1)])
        return self

    def predict(self, X):
        return self.classes_[np.argmax(np.asarray(X) @ self.c_.T, axis=1)]


def _data(n=4000, seed=0):
    g = np.random.default_rng(seed)
    X = g.normal(size=(n, 4))
    y = (X[:, 0] + 0.5 * g.normal(size=n) > 0).astype(int)
    return np.clip(X / 3, -1, 1), y


GRID = {"sign": [1.0, -1.0]}
