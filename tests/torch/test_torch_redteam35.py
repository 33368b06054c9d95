"""Red team 35 (no hole found): empty Poisson batches and resuming from a checkpoint.

With n = 10 and an expected batch of 1 (q = 0.1) about a third of the batches are empty
((1 - q)^10 = 0.35).  A checkpoint taken after any step -- an empty one included, with or
without virtual batches -- resumes to the parameters of the uninterrupted run, bit for bit.
"""
import copy

import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
from _engine_runs import _run  # noqa: E402

from dpfast.torch._data import PoissonBatchSampler  # noqa: E402


@pytest.mark.parametrize("bmm", [None, 1])
def test_resume_after_every_step_empty_ones_included(bmm, monkeypatch):
    kw = dict(epochs=2, opt="sgd", n=10, bs=1, bmm=bmm)
    sizes = []
    draw = PoissonBatchSampler._draw

    def recording(self):
        batch = draw(self)
        sizes.append(len(batch))
        return batch

    monkeypatch.setattr(PoissonBatchSampler, "_draw", recording)
    full, m_full, _, _ = _run(seed=3, **kw)
    monkeypatch.setattr(PoissonBatchSampler, "_draw", draw)
    assert full.steps == 20 and len(sizes) == 20
    empty = [i + 1 for i, s in enumerate(sizes) if s == 0]
    assert empty  # steps whose batch was empty (the checkpoints below include them)
    for stop in range(1, full.steps):
        _, _, _, state = _run(seed=3, stop_after=stop, **kw)
        state = {k: copy.deepcopy(v) for k, v in state.items()}
        res, m_res, _, _ = _run(seed=99, state=state, **kw)  # another seed: everything comes from the state
        assert res.steps == full.steps
        for (k, a), (_, b) in zip(m_full.state_dict().items(), m_res.state_dict().items()):
            assert torch.equal(a, b), (stop, stop in empty, k)
