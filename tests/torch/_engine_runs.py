"""The engine tests' tiny training run (a loader, make_private, an optional resume), shared by
test_torch_engine and the red-team tests."""
from __future__ import annotations

import _engine_models as EM
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpfast.torch import BatchMemoryManager, PrivacyEngine


def _loader(n=48, bs=12, seed=0, kind="mlp"):
    x, y = EM.data(kind, n, seed=seed, dtype=torch.float32)
    return DataLoader(TensorDataset(x, y), batch_size=bs)


def _run(seed=0, rng="seed", epochs=2, z=1.0, C=1.0, kind="mlp", engine_kw=None, bmm=None, stop_after=None, state=None,
         n=48, bs=12, opt="adam"):
    model = EM.make(kind, seed=seed, dtype=torch.float32)
    optim = (torch.optim.Adam(model.parameters(), lr=0.01) if opt == "adam"
             else torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    eng = PrivacyEngine(rng=seed if rng == "seed" else rng, **(engine_kw or {}))
    m, o, dl = eng.make_private(module=model, optimizer=optim, data_loader=_loader(n, bs, kind=kind),
                                noise_multiplier=z, max_grad_norm=C, epochs=epochs)
    if state is not None:
        m.load_state_dict(state["model"])
        o.load_state_dict(state["optim"])
        eng.load_state_dict(state["engine"])
    start = eng.steps
    crit = nn.CrossEntropyLoss()
    while eng.steps < eng.planned_steps:
        loader = dl if bmm is None else BatchMemoryManager(data_loader=dl, max_physical_batch_size=bmm, optimizer=o)
        for x, y in loader:
            o.zero_grad()
            crit(m(x), y).backward()
            o.step()
            if stop_after is not None and eng.steps - start == stop_after and o._skip is False:
                return eng, m, o, {"model": m.state_dict(), "optim": o.state_dict(), "engine": eng.state_dict()}
    return eng, m, o, None
