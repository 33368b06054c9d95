"""Property-based fuzzing of every public function and estimator (issue 15, "Keep it so").

Properties (see ``_fuzzlib``): a result or ValueError/TypeError, never another exception, crash or
hang; no NaN where a number is promised; inputs never modified; same seed => bit-identical
output, also for C/F/strided/read-only copies of the same data.  Deterministic: Hypothesis runs
derandomized with a fixed number of examples per target (``DPFAST_FUZZ_EXAMPLES``, default 80),
and each target's known reproducers from issue 15 run as explicit cases.

Targets listed in ``_targets.PENDING`` fail today on a reported bug, and so do the reproducers in
``_targets.PENDING_EXAMPLES``; ``DPFAST_FUZZ_PENDING=1`` runs them too.
"""
import pytest
from hypothesis import given

import _fuzzlib as F
import _targets as T


def test_every_public_name_is_covered():
    missing = T.public_names() - set(T.BY_NAME) - set(T.EXCLUDED)
    assert not missing, f"public names without a fuzz target: {sorted(missing)}"


@pytest.mark.parametrize("name", T.ACTIVE)
def test_baseline_succeeds(name):
    # The baseline must be a successful call without NaN, or the perturbations test nothing.
    t = T.BY_NAME[name]
    out = F.guarded(t.call, **t.base)
    assert F.find_nan(out) is None


@pytest.mark.parametrize("name", T.ACTIVE)
def test_known_reproducers(name):
    t = T.BY_NAME[name]
    pending = T.PENDING_EXAMPLES.get(name, ()) if T.RUN_PENDING else ()
    for ex in tuple(t.examples) + tuple(pending):
        kw = dict(t.base)
        kw.update(ex)
        F.check_call(t, kw)


@pytest.mark.parametrize("name", [n for n in T.ACTIVE if T.BY_NAME[n].data
                                  and (T.RUN_PENDING or n not in T.LAYOUT_PENDING)])
def test_layouts_give_identical_results(name):
    # The baseline's data in every memory layout gives the bit-identical result.
    t = T.BY_NAME[name]
    ref = F.canon(F.guarded(t.call, **t.base))
    for k in t.data:
        for kind in t.layouts:
            kw = dict(t.base)
            kw[k] = F.relayout(t.base[k], kind)
            assert F.canon(F.guarded(t.call, **kw)) == ref, (name, k, kind)


@pytest.mark.parametrize("name", T.ACTIVE)
def test_fuzz(name):
    t = T.BY_NAME[name]

    @t.settings()
    @given(F.perturbed(t))
    def run(kw):
        F.check_call(t, kw)

    run()


def test_pending_examples_name_targets():
    # a typo in PENDING_EXAMPLES would silently run nothing
    assert set(T.PENDING_EXAMPLES) <= set(T.BY_NAME), set(T.PENDING_EXAMPLES) - set(T.BY_NAME)
    for name, examples in T.PENDING_EXAMPLES.items():
        assert all(set(ex) <= set(T.BY_NAME[name].base) for ex in examples), name
