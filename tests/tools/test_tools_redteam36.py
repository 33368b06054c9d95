"""Red team 36: dpfast.tools' input conversion on a ragged list names no private size.

NumPy refuses a ragged nested list with "... The detected shape was (3,) + inhomogeneous part.":
the number of rows n, which is private (add/remove one row).  Neighbours [0.5, 0.25, [0.5]] and
[0.5, [0.5]] were both refused, with messages that said 3 and 2.  The refusal now names
neither (as_array's message, the one home of the ragged refusal)."""
import pytest

from dpfast import PrivacyBudget, tools

CALLS = {
    "mean": lambda a, b: tools.mean(a, 1.0, (0, 1), rng=0, budget=b),
    "nanmean": lambda a, b: tools.nanmean(a, 1.0, (0, 1), rng=0, budget=b),
    "quantile": lambda a, b: tools.quantile(a, 0.5, 1.0, (0, 1), rng=0, budget=b),
    "count_nonzero": lambda a, b: tools.count_nonzero(a, 1.0, rng=0, budget=b),
    "histogram": lambda a, b: tools.histogram(a, 1.0, bins=3, range=(0, 1), rng=0, budget=b),
    "bounds": lambda a, b: tools.bounds(a, 1.0, rng=0, budget=b),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_ragged_list_is_refused_without_its_size(name):
    outs = set()
    for a in ([0.5, 0.25, [0.5]], [0.5, [0.5]], [[0.5, 0.5], [0.25, 0.25], [0.5]], [[0.5, 0.5], [0.5]]):
        b = PrivacyBudget(10.0, 1e-6)
        with pytest.raises((TypeError, ValueError)) as info:
            CALLS[name](a, b)
        assert not b.ledger
        outs.add((type(info.value).__name__, str(info.value)))
    assert len(outs) == 1, outs
    (_, msg), = outs
    assert "(2" not in msg and "(3" not in msg and "shape" not in msg
