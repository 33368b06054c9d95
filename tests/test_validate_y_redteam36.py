"""Red team 36: a classifier's labels are refused by the public label set only, never by their
values' "type".

``validate_y`` ran scikit-learn's ``check_classification_targets``, which calls a float target
with one non-integral value "continuous" and a mixed object target "unknown" and refuses it.
With a declared label set holding such a value (``classes=[0.5, 1.0]``), the data set of 49
records labelled 1.0 was fitted and charged, and its neighbour with one record labelled 0.5 (a
label inside ``classes``) was refused "Unknown label type: continuous": the exception told the
neighbours apart with probability 1 (and the Dask fit, which never ran that check, released
the model the in-memory fit refused).  The implicit label set's refusal also chose its hint
from the values (all in {-1, +1} or not).
"""
import warnings

import numpy as np
import pytest

from dpfast import PrivacyBudget
from dpfast._validation import check_label_set
from dpfast.audit import audit
from dpfast.audit.neighbours import labelled
from dpfast.ensemble import RandomForestClassifier
from dpfast.linear_model import LogisticRegression
from dpfast.model_selection import PrivateRandomSearch
from dpfast.naive_bayes import GaussianNB

X = np.random.default_rng(0).uniform(0, 1, (49, 2))
X1 = np.concatenate([X, [[0.5, 0.5]]])


def _outcome(est, X, y):
    budget = PrivacyBudget(100.0, 1e-3, accountant="rdp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.fit(X, y, budget=budget)
        except (ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {exc}", len(budget.ledger)
    return "fitted", len(budget.ledger)


ESTIMATORS = [
    lambda c: RandomForestClassifier(1.0, (0, 1), classes=c, n_estimators=3, leaf_mechanism="label", random_state=0),
    lambda c: GaussianNB(1.0, (0, 1), classes=c, random_state=0),
    lambda c: LogisticRegression(classes=c, random_state=0),
    lambda c: PrivateRandomSearch(GaussianNB(1.0, (0, 1), classes=c), {"alpha": [1.0]}, n_runs_mean=2.0,
                                  random_state=0),
]


@pytest.mark.parametrize("make", ESTIMATORS, ids=["forest", "nb", "logistic", "search"])
@pytest.mark.parametrize("classes,base,added", [([0.5, 1.0], 1.0, 0.5), ([1, "a"], "a", 1), ([1, "a"], 1, "a"),
                                                ([1.0, 2.5, 7.0], 7.0, 2.5)])
def test_a_declared_label_is_fitted_whatever_its_value(make, classes, base, added):
    """Add/remove one record whose label is in the declared set: both neighbours are fitted and
    charged once (before: the one with the non-integral or mixed-type label was refused)."""
    mixed = isinstance(classes[1], str)
    y = np.array([base] * 49, dtype=object if mixed else float)
    y1 = np.append(y, np.array([added], dtype=y.dtype))
    assert _outcome(make(classes), X, y) == ("fitted", 1)
    assert _outcome(make(classes), X1, y1) == ("fitted", 1)


@pytest.mark.parametrize("make", ESTIMATORS[:3], ids=["forest", "nb", "logistic"])
def test_labels_outside_the_set_are_refused_by_one_message_whatever_their_values(make):
    """Records outside classes=[0, 1]: an integral float, a non-integral one, a string; one
    refusal, before the charge, its message naming no value (before: "Unknown label type:
    continuous" for 2.5, "y has labels outside" for 2.0)."""
    y = np.array([1.0] * 49)
    outs = {_outcome(make([0, 1]), X1, np.append(y, v)) for v in (2.0, 2.5, -0.5)}
    outs.add(_outcome(make([0, 1]), X1, np.append(y.astype(object), "z")))
    assert len(outs) == 1, outs
    (msg, charged), = outs
    assert charged == 0 and msg.startswith("ValueError: ") and "2.5" not in msg


def test_the_implicit_label_sets_refusal_does_not_depend_on_the_values():
    """classes=None: labels all in {-1, +1} and labels {-1, 0, 1} are refused with one message
    (before: the hint named classes=[-1, 1] only when every label was -1 or +1)."""
    msgs = set()
    for y in (np.array([-1, 1, 1]), np.array([-1, 0, 1]), np.array([2.5, 0.0, 1.0])):
        with pytest.raises(ValueError) as info:
            check_label_set(y, None)
        msgs.add(str(info.value))
    assert len(msgs) == 1, msgs


def test_audit_of_a_label_set_with_a_non_integral_label():
    """dpfast.audit on the forest with classes=[0.5, 1.0]: adding a record of either label is not
    a structural difference (before: the pair adding label 0.5 differed by the exception)."""
    y = np.ones(49)

    def release(data, rng):
        Xd, yd = data
        return RandomForestClassifier(2.0, (0, 1), classes=[0.5, 1.0], n_estimators=3, max_depth=2,
                                      leaf_mechanism="label", random_state=rng).fit(Xd, yd.astype(float))

    pairs = labelled(X, y, bound=1.0, classes=[0.5, 1.0])
    report = audit(release, pairs, epsilon=2.0, n_runs=20, rng=0)
    assert not report.structural_differences, report


@pytest.mark.parametrize("classes,y", [([1, "a"], np.array(["a"] * 49)), ([0, "a"], np.array(["a"] * 49)),
                                       ([7, "a"], np.array(["a"] * 49)), (["a", 3], np.array([3] * 49))])
def test_the_search_placeholder_label_keeps_its_type(classes, y):
    """PrivateRandomSearch pads every fit with one row labelled classes[0]; next to string labels
    (dtype <U1) the number 1 became the string "1", outside the label set: every run refused
    after the charge (a refusal only when K >= 1).  The placeholder keeps its declared type."""
    for seed in range(3):
        est = PrivateRandomSearch(GaussianNB(1.0, (0, 1), classes=classes), {"alpha": [1.0]}, n_runs_mean=3.0,
                                  random_state=seed)
        assert _outcome(est, X, y) == ("fitted", 1)


def test_dask_and_memory_agree_on_a_non_integral_declared_label():
    """The Dask forest never ran the type check (it released what memory refused); both now
    release the same model, bit for bit."""
    da = pytest.importorskip("dask.array")
    y1 = np.append(np.ones(49), 0.5)
    make = ESTIMATORS[0]
    mem = make([0.5, 1.0]).fit(X1, y1)
    dsk = make([0.5, 1.0]).fit(da.from_array(X1, chunks=(17, 2)), da.from_array(y1, chunks=17))
    np.testing.assert_array_equal(mem.leaf_labels_, dsk.leaf_labels_)
    np.testing.assert_array_equal(mem.predict(X), dsk.predict(X))
    assert mem.classes_.tolist() == dsk.classes_.tolist() == [0.5, 1.0]


@pytest.mark.parametrize("make", ESTIMATORS, ids=["forest", "nb", "logistic", "search"])
def test_a_ragged_list_is_refused_without_the_number_of_rows(make):
    """NumPy's refusal of a ragged list quotes "The detected shape was (3,)": n, private.  X with
    3 or 2 rows (one short), and y ragged: one message per argument, naming no size."""
    outs = set()
    for n in (3, 2):
        Xr = [[0.5, 0.5]] * (n - 1) + [[0.5]]
        outs.add(_outcome(make([0, 1]), Xr, [0] * n))
    assert len(outs) == 1, outs
    outs = set()
    for n in (3, 2):
        outs.add(_outcome(make([0, 1]), np.zeros((n, 2)), [0] * (n - 1) + [[0]]))
    assert len(outs) == 1, outs
    (msg, charged), = outs
    assert charged == 0 and "(3" not in msg and "(2" not in msg
