"""PrivateRandomSearch never refuses on the random split (issue empty34, item 2).

The split puts each row in the validation part with probability p (public), independently, so
the training part is empty with probability p^n: the search used to refuse then ("training part
is empty"), before the charge -- a refusal whose probability depends on the private n (add/remove
neighbours n = 1 and n = 2: p vs p^2, a ratio 1/p, i.e. no epsilon bound for p near 1 /
ln(1/p) of extra privacy loss).  No split law avoids it while keeping the add/remove coupling
(the training part of {a} must be {a}; inductively the validation part would always be empty),
so the training part is now always padded with ONE public placeholder row (X's schema, fixed
values; the first label of the public label set): padding by a fixed row maps add/remove
neighbours to add/remove neighbours, so the fits keep their guarantee, and the fit is defined
whatever the coins say.  The events are probed on a training part of that size.
"""
from __future__ import annotations

import numpy as np
import pytest
from _search_models import GRID, NoisyCentroid, _data

from dpfast import PrivacyBudget
from dpfast.model_selection import PrivateRandomSearch


class RecordingCentroid(NoisyCentroid):
    """NoisyCentroid that keeps what its fit saw (for the test only)."""

    def fit(self, X, y, *, budget=None):
        import scipy.sparse as sp

        self.sparse_ = sp.issparse(X)
        X = X.toarray() if self.sparse_ else np.asarray(X)
        super().fit(X, y, budget=budget)
        self.n_fit_ = X.shape[0]
        self.last_row_ = (X[-1].copy(), y[-1])
        return self

    def predict(self, X):
        import scipy.sparse as sp

        return super().predict(X.toarray() if sp.issparse(X) else X)


KW = dict(epsilon=2.0, delta=1e-5, n_runs_mean=2.0, distribution="truncated_negative_binomial", eta=1.0)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_refusal_whatever_the_split(n):
    """validation_fraction = 0.9: the training part is empty with probability 0.9^n; every
    seed now releases (one charge, a fitted estimator or the theorem's own "no model")."""
    X, y = _data(50)
    for seed in range(30):
        budget = PrivacyBudget(10.0, 1e-3, accountant="rdp")
        s = PrivateRandomSearch(NoisyCentroid(), GRID, validation_fraction=0.9, random_state=seed, **KW)
        s.fit(X[:n], y[:n], budget=budget)
        assert len(budget.ledger) == 1
        assert s.best_estimator_ is not None  # (TNB: K >= 1, and NoisyCentroid never diverges)


def test_same_event_for_neighbours_n1_n2():
    """The charged event (public parameters and the probed fit events) is the same for n = 1
    and n = 2 with this estimator (its event does not depend on the number of rows)."""
    X, y = _data(50)
    events = set()
    for n in (1, 2):
        for seed in range(5):
            s = PrivateRandomSearch(NoisyCentroid(), GRID, validation_fraction=0.9, random_state=seed, **KW)
            events.add(repr(s.fit(X[:n], y[:n]).event_))
    assert len(events) == 1


@pytest.mark.parametrize("form", ["array", "frame", "sparse"])
def test_the_training_part_is_padded_with_one_public_row(form):
    import pandas as pd
    import scipy.sparse as sp

    X, y = _data(40)
    Xf = {"array": X, "frame": pd.DataFrame(X, columns=list("abcd")), "sparse": sp.csr_matrix(X)}[form]
    for seed in range(5):
        s = PrivateRandomSearch(RecordingCentroid(), GRID, validation_fraction=0.5, random_state=seed, **KW)
        est = s.fit(Xf, y).best_estimator_
        row, label = est.last_row_
        np.testing.assert_array_equal(row, 0.0)
        assert est.sparse_ == (form == "sparse")  # a sparse X stays sparse (CSR) with its pad
        assert label == 0  # the public label set [0, 1]: its first label
        assert 2 <= est.n_fit_ <= 41
