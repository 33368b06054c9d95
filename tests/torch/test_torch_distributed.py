"""dpfast.torch with torch.distributed (gloo, CPU): the noise is added once per logical step."""
import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

pytestmark = pytest.mark.slow


def _worker(rank, world, init_file, out_dir, z):
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from dpfast import PrivacyBudget
    from dpfast.torch import PrivacyEngine

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        # red team: a rank clipping at another max_grad_norm (10 while rank 0's noise is for 1) is refused
        # by every rank, before the charge (it used to run, with sensitivity 10 accounted as 1)
        bad, b, refused = nn.Linear(4, 2), PrivacyBudget(100.0, 1e-5), ""
        try:
            PrivacyEngine(rng=7).make_private(
                module=bad, optimizer=torch.optim.SGD(bad.parameters(), lr=0.1),
                data_loader=DataLoader(TensorDataset(torch.zeros(40, 4), torch.zeros(40, dtype=torch.long)),
                                       batch_size=8),
                noise_multiplier=1.0, max_grad_norm=1.0 if rank == 0 else 10.0, epochs=1, distributed=True, budget=b)
        except ValueError as e:
            refused = str(e)
        refused_before_charge = "disagree on max_grad_norm" in refused and b.ledger == ()
        torch.manual_seed(100 + rank)  # different inits: make_private broadcasts rank 0's
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(40, 4, generator=g), torch.randint(0, 2, (40,), generator=g))
        eng = PrivacyEngine(rng=7)
        m, o, dl = eng.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                    data_loader=DataLoader(ds, batch_size=8), noise_multiplier=z, max_grad_norm=1.0,
                                    epochs=2, distributed=True)
        noise_state = o.generator.bit_generator.state
        for _ in range(2):
            for x, y in dl:
                o.zero_grad()
                nn.functional.cross_entropy(m(x), y).backward()
                o.step()
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
        np.savez(f"{out_dir}/rank{rank}.npz", params=params, steps=eng.steps, eps=eng.get_epsilon(1e-5),
                 noise_untouched=o.generator.bit_generator.state == noise_state,
                 refused_before_charge=refused_before_charge)
    finally:
        dist.destroy_process_group()


def test_distributed_ranks_take_the_same_noisy_steps(tmp_path):
    world = 2
    mp.spawn(_worker, args=(world, str(tmp_path / "init"), str(tmp_path), 1.0), nprocs=world, join=True)
    r0, r1 = (np.load(tmp_path / f"rank{r}.npz") for r in range(world))
    assert np.array_equal(r0["params"], r1["params"])  # all ranks applied the same all-reduced step
    assert int(r0["steps"]) == int(r1["steps"]) == 10
    assert float(r0["eps"]) == float(r1["eps"])
    assert not bool(r0["noise_untouched"]) and bool(r1["noise_untouched"])  # rank 0 alone drew noise
    assert bool(r0["refused_before_charge"]) and bool(r1["refused_before_charge"])


def _worker_per_layer(rank, world, init_file, out_dir):
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from dpfast import PrivacyBudget
    from dpfast.torch import PrivacyEngine

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(40, 4, generator=g), torch.randint(0, 2, (40,), generator=g))
        norms = [0.3, 0.1, 0.2, 0.4]
        # red team: rank 1's per-layer norms in another order have the same sqrt(sum C_l^2) (so the same
        # noise scale) but clip other parameters to other norms: refused by every rank, before the charge
        bad, b, refused = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)), PrivacyBudget(100.0, 1e-5), ""
        try:
            PrivacyEngine(rng=7).make_private(
                module=bad, optimizer=torch.optim.SGD(bad.parameters(), lr=0.1),
                data_loader=DataLoader(ds, batch_size=8),
                noise_multiplier=1.0, max_grad_norm=norms if rank == 0 else norms[::-1], clipping="per_layer",
                epochs=1, distributed=True, budget=b)
        except ValueError as e:
            refused = str(e)
        refused_before_charge = "per-layer max_grad_norm" in refused and b.ledger == ()
        torch.manual_seed(100 + rank)
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
        eng = PrivacyEngine(rng=7)
        m, o, dl = eng.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                    data_loader=DataLoader(ds, batch_size=8), noise_multiplier=1.0, max_grad_norm=norms,
                                    clipping="per_layer", epochs=2, distributed=True)
        for _ in range(2):
            for x, y in dl:
                o.zero_grad()
                nn.functional.cross_entropy(m(x), y).backward()
                o.step()
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
        np.savez(f"{out_dir}/pl{rank}.npz", params=params, steps=eng.steps, eps=eng.get_epsilon(1e-5),
                 refused_before_charge=refused_before_charge)
    finally:
        dist.destroy_process_group()


def test_distributed_per_layer_clipping(tmp_path):
    world = 2
    mp.spawn(_worker_per_layer, args=(world, str(tmp_path / "init"), str(tmp_path)), nprocs=world, join=True)
    r0, r1 = (np.load(tmp_path / f"pl{r}.npz") for r in range(world))
    assert np.array_equal(r0["params"], r1["params"]) and int(r0["steps"]) == 10
    assert float(r0["eps"]) == float(r1["eps"])
    assert bool(r0["refused_before_charge"]) and bool(r1["refused_before_charge"])


def test_distributed_shards_form_one_poisson_sample():
    from dpfast.torch import PoissonBatchSampler
    n, q = 101, 0.3
    counts = np.zeros(n)
    for rank in range(3):
        s = PoissonBatchSampler(n, q, 400, np.random.default_rng(rank), rank=rank, world_size=3)
        for batch in s:
            assert all(i % 3 == rank for i in batch)
            counts[batch] += 1
    # each index included with probability q in each of 400 steps
    assert np.all(np.abs(counts / 400 - q) < 5 * np.sqrt(q * (1 - q) / 400))
