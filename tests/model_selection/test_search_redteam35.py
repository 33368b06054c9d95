"""Red team 35: PrivateRandomSearch refusals that came after the charge, with a probability that
depends on the run count K (outside Papernot & Steinke's theorems, which bound the released run).

Neighbours told apart (add/remove one record ``r``):

* ``r`` has a label outside the public label set (``classes``; None is ``[0, 1]``).  A
  standalone fit refuses before its charge.  The search charged first; a run then refused only
  when ``r`` drew the training part and K >= 1 (Poisson ``n_runs_mean=1``: "no model" with
  probability 1/e, else a ``ValueError``), while the neighbour without ``r`` never raised.
* ``r`` has a value outside a public ``OneHotEncoder``'s categories with
  ``handle_unknown="error"``: the runs' fit or validation scoring raised iff K >= 1 (the
  neighbour: never).  Like ``row_norm="check"``, the option is now refused before the charge.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline

from dpfast import PrivacyBudget
from dpfast.model_selection import PrivateRandomSearch
from dpfast.naive_bayes import GaussianNB
from dpfast.preprocessing import OneHotEncoder
from dpfast.tree import DecisionTreeClassifier

N = 30


def _data():
    g = np.random.default_rng(0)
    X = np.clip(g.normal(size=(N, 3)) / 3, -1, 1)
    return X, (X[:, 0] > 0).astype(int)


def _outcome(est, grid, X, y, seed):
    """Everything the search shows: the exception (type, message) or the release, and the ledger."""
    budget = PrivacyBudget(100.0, 1e-3, accountant="rdp")
    s = PrivateRandomSearch(est, grid, epsilon=2.0, n_runs_mean=1.0, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "no model" (Poisson K = 0)
        try:
            s.fit(X, y, budget=budget)
            out = "model" if s.best_estimator_ is not None else "no model"
        except ValueError as exc:
            out = f"ValueError: {exc}"
    return out, len(budget.ledger)


ESTIMATORS = [
    (GaussianNB(bounds=(-1, 1)), {"alpha": [1.0]}),
    (DecisionTreeClassifier(bounds=(-1, 1)), {"max_depth": [2]}),
    (make_pipeline(GaussianNB(bounds=(-1, 1))), {"gaussiannb__alpha": [1.0]}),
]


@pytest.mark.parametrize("est,grid", ESTIMATORS, ids=["nb", "tree", "pipeline"])
def test_label_outside_the_public_set_is_refused_before_the_charge(est, grid):
    X, y = _data()
    y2 = y.copy()
    y2[0] = 2  # the added record's label is outside classes=None = [0, 1]
    budget = PrivacyBudget(100.0, 1e-3, accountant="rdp")
    fit_kw = {"gaussiannb__budget": budget} if hasattr(est, "steps") else {"budget": budget}
    with pytest.raises(ValueError) as standalone:
        est.fit(X, y2, **fit_kw)
    assert len(budget.ledger) == 0  # a standalone fit refuses before its charge
    for seed in range(8):
        out, charged = _outcome(est, grid, X, y2, seed)
        # one outcome whatever the split and K: the standalone fit's refusal, nothing charged
        assert (out, charged) == (f"ValueError: {standalone.value}", 0)
        assert _outcome(est, grid, X, y, seed)[1] == 1  # the neighbour runs (one charge)


def test_a_candidate_label_set_is_checked_per_candidate():
    """classes set by the grid: every candidate's set is checked (any candidate may be drawn)."""
    X, y = _data()
    y2 = y.copy()
    y2[0] = 2
    grid = {"classes": [[0, 1, 2]]}
    assert _outcome(GaussianNB(bounds=(-1, 1)), grid, X, y2, 0)[1] == 1
    out, charged = _outcome(GaussianNB(bounds=(-1, 1)), {"classes": [[0, 1, 2], [0, 1]]}, X, y2, 0)
    assert charged == 0 and out.startswith("ValueError: y has labels outside classes=[0, 1]")
    # a nested step's classes= is the public set
    pipe = make_pipeline(GaussianNB(bounds=(-1, 1), classes=[0, 1, 2]))
    assert _outcome(pipe, {"gaussiannb__alpha": [1.0]}, X, y2, 0)[1] == 1


def _encoded(handle_unknown):
    ct = ColumnTransformer([("num", "passthrough", ["x"]),
                            ("cat", OneHotEncoder(categories=[[0, 1]], handle_unknown=handle_unknown), ["c"])])
    return make_pipeline(ct, GaussianNB(bounds=(-1, 1)))


def test_handle_unknown_error_is_refused_before_the_charge_for_both_neighbours():
    X, y = _data()
    g = np.random.default_rng(1)
    df = pd.DataFrame({"x": X[:, 0], "c": g.integers(0, 2, N)})
    df2 = df.copy()
    df2.loc[0, "c"] = 2  # outside the public categories
    grid = {"gaussiannb__alpha": [1.0]}
    outs = {_outcome(_encoded("error"), grid, d, y, seed) for d in (df, df2) for seed in range(6)}
    assert len(outs) == 1
    (out, charged), = outs
    assert charged == 0 and "handle_unknown" in out and "number of runs" in out
    # handle_unknown="ignore" (the default) runs on both
    assert {_outcome(_encoded("ignore"), grid, d, y, 0)[1] for d in (df, df2)} == {1}
