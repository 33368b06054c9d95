"""Red team, stop 31: RandomForestClassifier's "auto" sizing (auto_n_trees / auto_n_trees_label).

Attack: is anything of the fitted structure (n_estimators_, leaf_mechanism_, feature_, threshold_,
classes_) read off the data other than through the released noisy row count?  No hole found: two
datasets with the same number of rows but different values and labels, fitted with the same
random_state (hence the same count noise), get the same structure bit for bit; the label set is
public (a label outside it is refused before the charge; classes=None means [0, 1])."""
import numpy as np
import pytest

from dpfast.budget import PrivacyBudget
from dpfast.ensemble import RandomForestClassifier

STRUCTURE = ("n_estimators_", "leaf_mechanism_", "feature_", "threshold_", "classes_", "n_samples_noisy_")


def _two_datasets(n, k):
    r = np.random.default_rng(7)
    X1, X2 = r.uniform(-1, 1, (n, 3)), r.normal(0.5, 0.1, (n, 3))
    return (X1, r.integers(0, k, n)), (X2, np.zeros(n, dtype=int))


@pytest.mark.parametrize("epsilon, n, mech", [(0.1, 300, "auto"), (1.0, 3000, "auto"), (0.5, 800, "label"),
                                              (2.0, 5000, "counts")])
def test_auto_structure_is_a_function_of_the_noisy_count_only(epsilon, n, mech):
    k = 3
    (X1, y1), (X2, y2) = _two_datasets(n, k)
    a = RandomForestClassifier(epsilon, (-1, 1), classes=[0, 1, 2], leaf_mechanism=mech, random_state=3).fit(X1, y1)
    b = RandomForestClassifier(epsilon, (-1, 1), classes=[0, 1, 2], leaf_mechanism=mech, random_state=3).fit(X2, y2)
    for name in STRUCTURE:
        assert np.asarray(getattr(a, name)).tobytes() == np.asarray(getattr(b, name)).tobytes(), name
    assert a.leaf_proba_.shape == b.leaf_proba_.shape


def test_a_label_only_the_new_record_has_is_refused_before_the_charge():
    (X1, y1), _ = _two_datasets(100, 2)
    y1 = y1.copy()
    y1[0] = 5
    budget = PrivacyBudget(5.0, 1e-6)
    with pytest.raises(ValueError):
        RandomForestClassifier(1.0, (-1, 1), random_state=0).fit(X1, y1, budget=budget)
    assert budget.spent() == 0.0 and len(budget.ledger) == 0
