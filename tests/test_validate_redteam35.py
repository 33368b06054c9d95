"""Red team 35: a Python number beyond a double in list input made the estimators' validator
raise ``OverflowError`` (NumPy's "int too large to convert to float"), an exception type outside
the documented contract; an infinite entry raises ``ValueError``.  Beyond a double is refused as
infinity is, with the same message (the two are one contract violation)."""
from __future__ import annotations

import numpy as np
import pytest

from dpfast import PrivacyBudget
from dpfast.naive_bayes import GaussianNB
from dpfast.tree import DecisionTreeClassifier


@pytest.mark.parametrize("make", [lambda: GaussianNB(bounds=(-1, 1), random_state=0),
                                  lambda: DecisionTreeClassifier(bounds=(-1, 1), random_state=0)], ids=["nb", "tree"])
@pytest.mark.parametrize("big", [10 ** 400, -(10 ** 400)], ids=["+1e400", "-1e400"])
def test_beyond_a_double_is_refused_as_infinity(make, big):
    budget = PrivacyBudget(10.0, 1e-3)
    with pytest.raises(ValueError) as inf:
        make().fit([[0.5], [np.inf]], [0, 1], budget=budget)
    with pytest.raises(ValueError) as over:
        make().fit([[0.5], [big]], [0, 1], budget=budget)
    assert str(over.value) == str(inf.value)
    assert budget.ledger == ()
    make().fit([[0.5], [2 ** 70]], [0, 1], budget=budget)  # a large int a double holds: data (clamped)
