"""Privacy events (dpfast.accounting.events): frozen data, validation, serialisation, old names."""
import dataclasses
import json
import math
import pickle

import numpy as np
import pytest

import dpfast.accounting as A
from dpfast.accounting import events as ev
from dpfast.accounting.rdp import DEFAULT_ORDERS, rdp_curve

G = A.Gaussian(1.1)


def test_events_are_frozen_hashable_and_compared_by_value():
    a, b = A.PoissonSampled(0.01, A.Gaussian(1.1)), A.PoissonSampled(0.01, A.Gaussian(1.1))
    assert a == b and hash(a) == hash(b) and a is not b
    assert A.PoissonSampled(0.02, A.Gaussian(1.1)) != a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.sample_rate = 0.5
    # different classes with equal fields are different events
    assert A.PureDP(1.0) != A.ExponentialMechanism(1.0)
    assert isinstance(A.ExponentialMechanism(1.0), A.PureDP)
    assert pickle.loads(pickle.dumps(a)) == a


def test_neighbours_enum_and_strings():
    g = A.Gaussian(1.0, neighbours="replace_one")
    assert g.neighbours is A.Neighbours.REPLACE_ONE
    assert g.neighbours == "replace_one"  # str enum: the old string comparisons keep working
    assert A.Gaussian(1.0) == A.Gaussian(1.0, neighbours=A.Neighbours.ADD_REMOVE)
    assert A.PoissonSampled(0.1, G).neighbours is A.Neighbours.ADD_REMOVE
    assert A.SampledWithoutReplacement(0.1, g).neighbours is A.Neighbours.REPLACE_ONE
    assert A.SelfComposed(g, 3).neighbours is A.Neighbours.REPLACE_ONE
    assert A.Composed((g, A.Laplace(1.0, neighbours="replace_one"))).neighbours is A.Neighbours.REPLACE_ONE
    with pytest.raises(ValueError, match="neighbours"):
        A.Gaussian(1.0, neighbours="swap")


@pytest.mark.parametrize("make, exc, word", [
    (lambda: A.Gaussian(0.0), ValueError, "noise_multiplier"),
    (lambda: A.Gaussian("1"), TypeError, "noise_multiplier"),
    (lambda: A.Gaussian(1.0, sensitivity=math.inf), ValueError, "sensitivity"),
    (lambda: A.Laplace(-1.0), ValueError, "scale"),
    (lambda: A.RandomizedResponse(1.0, 1), ValueError, "num_categories"),
    (lambda: A.PureDP(math.nan), ValueError, "epsilon"),
    (lambda: A.ApproxDP(-0.1, 1e-6), ValueError, "epsilon"),
    (lambda: A.ApproxDP(1.0, 1.0), ValueError, "delta"),
    (lambda: A.PoissonSampled(0.0, G), ValueError, "sample_rate"),
    (lambda: A.PoissonSampled(1.5, G), ValueError, "sample_rate"),
    (lambda: A.PoissonSampled(0.1, 3.0), TypeError, "event"),
    (lambda: A.PoissonSampled(0.1, A.Gaussian(1.0, neighbours="replace_one")), ValueError, "add/remove"),
    (lambda: A.SampledWithoutReplacement(0.1, G), ValueError, "replace-one"),
    (lambda: A.SelfComposed(G, -1), ValueError, "count"),
    (lambda: A.SelfComposed(G, 1.5), TypeError, "count"),
    (lambda: A.Composed(G), TypeError, "events"),
    (lambda: A.Composed((G, "x")), TypeError, "events"),
    (lambda: A.Composed((G, A.Gaussian(1.0, neighbours="replace_one"))), ValueError, "neighbouring"),
    (lambda: A.Tuned(G, "poisson", mean=0.5), ValueError, "mean"),
    (lambda: A.Tuned(G, "geometric"), ValueError, "distribution"),
    (lambda: A.Tuned(G, "truncated_negative_binomial", eta=1.0, gamma=1.0), ValueError, "gamma"),
    (lambda: A.ObjectivePerturbation(1.0, 1.0, 0.5, 0.4), ValueError, "regularization"),
    (lambda: A.FromDominatingPair([0.5, 0.5], [1.0]), ValueError, "same length"),
    (lambda: A.FromPrivacyProfile(0.1), TypeError, "callable"),
])
def test_bad_fields_are_refused_naming_the_argument(make, exc, word):
    with pytest.raises(exc, match=word):
        make()


def test_composed_accepts_a_list_and_stores_a_tuple():
    c = A.Composed([G, A.Laplace(2.0)])
    assert c.events == (G, A.Laplace(2.0)) and hash(c) == hash(A.Composed((G, A.Laplace(2.0))))


def test_to_dict_from_dict_round_trip_is_json():
    e = A.Composed((
        A.SelfComposed(A.PoissonSampled(0.01, A.Gaussian(1.1, sensitivity=2.0)), 1000),
        A.Laplace(3.0),
        A.RandomizedResponse(0.5, 5),
        A.ApproxDP(0.5, 1e-7),
        A.Tuned(A.Gaussian(4.0), "truncated_negative_binomial", eta=0.5, gamma=0.1),
        A.ObjectivePerturbation(6.0, 1.0, 0.5, 3.0),
        A.FromDominatingPair([0.5, 0.5], [0.25, 0.75], p_add=[0.75, 0.25], q_add=[0.5, 0.5], name="pair"),
        A.ReportNoisyMax(0.2),
    ))
    d = A.to_dict(e)
    back = A.from_dict(json.loads(json.dumps(d)))
    assert back == e and hash(back) == hash(e)
    rep = A.SampledWithoutReplacement(0.1, A.Gaussian(1.0, neighbours="replace_one"))
    assert A.from_dict(json.loads(json.dumps(A.to_dict(rep)))) == rep
    assert A.to_dict(A.Gaussian(2.0)) == {"type": "Gaussian", "noise_multiplier": 2.0, "sensitivity": 1.0,
                                          "neighbours": "add_remove"}


def test_events_holding_callables_refuse_serialisation():
    prof = A.FromPrivacyProfile(lambda e: np.zeros_like(e), name="zero")
    with pytest.raises(TypeError, match="callable"):
        A.to_dict(prof)
    with pytest.raises(TypeError, match="callable"):
        A.to_dict(A.SelfComposed(prof, 2))
    with pytest.raises(ValueError, match="unknown event type"):
        A.from_dict({"type": "NoSuchEvent"})


def test_self_composed_and_composed_equal_the_counts():
    ps = A.PoissonSampled(0.02, A.Gaussian(1.0))
    for make in (A.PLDAccountant, A.RDPAccountant):
        flat = make().compose(ps, 30).compose(A.Laplace(5.0), 2).get_epsilon(1e-6)
        tree = make().compose(A.Composed((A.SelfComposed(ps, 10), A.Laplace(5.0), A.SelfComposed(ps, 20),
                                          A.Laplace(5.0)))).get_epsilon(1e-6)
        assert tree == pytest.approx(flat, rel=1e-12)
        assert make().compose(A.SelfComposed(ps, 0)).get_epsilon(1e-6) == 0.0


def test_approx_dp_single_release_closed_form():
    """One (eps0, d0)-DP release: its tight pair's profile is d0 + (1 - d0)(e^eps0 - e^eps)_+/(1 + e^eps0)
    (Kairouz, Oh & Viswanath 2015), so at delta >= d0, eps = log(e^eps0 - (delta - d0)(1 + e^eps0)/(1 - d0))."""
    e0, d0, delta = 1.0, 1e-6, 1e-3
    exact = math.log(math.exp(e0) - (delta - d0) * (1 + math.exp(e0)) / (1 - d0))
    got = A.PLDAccountant().compose(A.ApproxDP(e0, d0)).get_epsilon(delta)
    assert exact <= got <= exact + 1e-4  # pessimistic on the 1e-4 grid
    assert A.PLDAccountant().compose(A.ApproxDP(e0, d0)).get_delta(e0) == pytest.approx(d0, rel=1e-9)


def test_approx_dp_composition_vs_dp_accounting():
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    common = pytest.importorskip("dp_accounting.pld.common")
    e0, d0, k, delta = 0.3, 1e-7, 20, 1e-5
    theirs = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(e0, d0),
                                         value_discretization_interval=1e-4).self_compose(k)
    ours = A.PLDAccountant().compose(A.ApproxDP(e0, d0), k).get_epsilon(delta)
    assert ours == pytest.approx(theirs.get_epsilon_for_delta(delta), rel=1e-3)
    assert ours < k * e0  # tighter than basic composition


def test_approx_dp_with_delta_is_not_an_rdp_event():
    acc = A.RDPAccountant()
    assert not acc.supports(A.ApproxDP(1.0, 1e-6))
    with pytest.raises(A.UnsupportedEventError, match="infinite Renyi"):
        acc.compose(A.ApproxDP(1.0, 1e-6))
    # delta = 0: pure DP
    assert A.RDPAccountant().compose(A.ApproxDP(0.5), 3).get_epsilon(1e-5) == \
        A.RDPAccountant().compose(A.PureDP(0.5), 3).get_epsilon(1e-5)
    np.testing.assert_array_equal(rdp_curve(A.ApproxDP(0.0), DEFAULT_ORDERS), 0.0)


def test_event_neighbours_of_a_toy_event_without_field_is_add_remove():
    @dataclasses.dataclass(frozen=True)
    class NoField(ev.DpEvent):
        x: float = 1.0

    assert A.event_neighbours(NoField()) is A.Neighbours.ADD_REMOVE
    assert NoField().neighbours is A.Neighbours.ADD_REMOVE


def test_event_repr_constructs_the_same_event():
    # The printed form of an event (ledgers, errors) is short and evaluates back to the event.
    from dpfast import accounting as A
    for event in (A.Gaussian(1.5), A.Laplace(2.0, 1.0, neighbours="replace_one"),
                  A.SelfComposed(A.PoissonSampled(0.01, A.Gaussian(1.1)), 7)):
        text = repr(event)
        assert "Neighbours." not in text
        assert eval(text, vars(A)) == event


@pytest.mark.slow
def test_one_of_restores_from_its_dict_without_the_search_package():
    # A budget's state_dict may hold a tuned search's OneOf event; restoring it must not
    # depend on having imported dpfast.model_selection first.
    import subprocess
    import sys
    code = (
        "import json, sys\n"
        "import dpfast.accounting as A\n"
        "ev = A.Tuned(A.OneOf((A.PureDP(0.5), A.Gaussian(2.0))), 'poisson', mean=2.0)\n"
        "assert A.from_dict(json.loads(json.dumps(A.to_dict(ev)))) == ev\n"
        "assert 'dpfast.model_selection' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_one_of_rdp_is_the_members_pointwise_maximum():
    import numpy as np

    from dpfast import accounting as A
    from dpfast.accounting.rdp import gaussian_rdp, pure_dp_rdp_bound, rdp_curve
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    got = rdp_curve(A.OneOf((A.PureDP(0.5), A.Gaussian(2.0))), orders)
    want = np.maximum(pure_dp_rdp_bound(orders, 0.5), gaussian_rdp(orders, 2.0))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError):
        A.OneOf((A.PureDP(0.5), A.PureDP(0.5, neighbours="replace_one")))
