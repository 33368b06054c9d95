"""Per-layer clipping in dpfast.torch (Opacus's ``clipping="per_layer"``, ``max_grad_norm=[C_1, ..., C_L]``).

Each sample's gradient of each trainable parameter l (Opacus's unit: one norm per parameter tensor of
the optimizer, in its param_groups' order) is clipped to C_l; the whole clipped per-sample gradient
then has norm <= C = sqrt(sum C_l^2), and the noise N(0, (z C)^2) gives the event of flat clipping at
C (McMahan et al. 2018, "A general approach to adding differential privacy to iterative training
procedures", Sec. 3).  Checked here: the clipped sums against a naive float64 per-sample loop (fast
paths, the torch.func path, the functional path), each parameter's clipped norm <= C_l after rounding
at adversarial scales, the noise law (std z sqrt(sum C_l^2)), the accounting (equal to the flat run's),
non-finite samples, virtual batches, resume bit-identity, and the refusals, before any charge.
"""
import copy
import math

import numpy as np
import pytest

pytest.importorskip("torch.nn")  # (not "torch": tests/torch/ itself is a namespace package named torch)
import _engine_models as EM  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from dpfast import PrivacyBudget  # noqa: E402
from dpfast.torch import BatchMemoryManager, GradSampleModule, PrivacyEngine, per_sample_grads  # noqa: E402

CE = nn.functional.cross_entropy


def _cnn_nobias(k=3):
    """Convolutions with one trainable parameter: their fast path serves per-layer clipping."""
    return nn.Sequential(nn.Conv2d(1, 3, 3, bias=False), nn.ReLU(), nn.Conv2d(3, 4, 3, stride=2, bias=False),
                         nn.ReLU(), nn.Flatten(), nn.Linear(4 * 3 * 3, k))


def _model(kind, seed=0, dtype=torch.float64):
    if kind == "cnn_nobias":
        torch.manual_seed(seed)
        return _cnn_nobias().to(dtype)
    return EM.make(kind, seed=seed, dtype=dtype)


def _data(kind, B, seed=0, dtype=torch.float64):
    return EM.data("cnn" if kind == "cnn_nobias" else kind, B, seed=seed, dtype=dtype)


def _params(model):
    return [p for p in model.parameters() if p.requires_grad]


def _norms(model, seed=0, lo=0.05, hi=1.5):
    """One norm per trainable parameter, spread so that some samples are clipped and some not."""
    r = np.random.default_rng(seed)
    return [float(c) for c in np.exp(r.uniform(math.log(lo), math.log(hi), len(_params(model))))]


def naive_per_layer(model, x, y, norms, skip=()):
    """sum_i sum_l min(1, C_l / ||g_il||) g_il by one float64 backward per sample."""
    params = _params(model)
    total = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    for i in range(x.shape[0]):
        if i in skip:
            continue
        model.zero_grad()
        CE(model(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        for t, p, C in zip(total, params, norms):
            g = p.grad.detach().to(torch.float64) if p.grad is not None else torch.zeros_like(t)
            n = float(torch.sqrt((g * g).sum()))
            t += (min(1.0, C / n) if n > 0 else 1.0) * g
    model.zero_grad()
    return total


def _sample_norms(model, x, y):
    """(B, L) float64 norms of each sample's gradient of each trainable parameter."""
    out = np.zeros((x.shape[0], len(_params(model))))
    for i in range(x.shape[0]):
        model.zero_grad()
        CE(model(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        out[i] = [float(p.grad.double().norm()) if p.grad is not None else 0.0 for p in _params(model)]
    return out


def _hooked_sums(model, x, y, norms, **gsm_kw):
    gsm = GradSampleModule(model, loss_reduction="sum", **gsm_kw)
    CE(gsm(x), y, reduction="sum").backward()
    params = _params(model)
    sums, B = gsm.clipped_sum(None, per_layer=dict(zip(params, norms)))
    gsm.remove_hooks()
    return [sums[p] for p in params], B


@pytest.mark.parametrize("kind", ["mlp", "cnn", "cnn_nobias", "text", "custom", "tied"])
@pytest.mark.parametrize("fast", [True, False])
def test_per_layer_clipped_sums_equal_a_naive_per_sample_loop(kind, fast):
    """MLP (Linear fast path, weight and bias apart), CNN (convolutions with a bias and GroupNorm by
    torch.func; without a bias on the fast conv path), Embedding + LayerNorm, custom raw-parameter
    modules and tied parameters (torch.func), each against one float64 backward per sample."""
    model = _model(kind)
    x, y = _data(kind, 12, seed=1)
    own = _sample_norms(copy.deepcopy(model), x, y)  # (B, L)
    norms = [float(c) if c > 0 else 1.0 for c in np.median(own, axis=0)]  # about half the samples clipped
    assert 0 < int((own > np.array(norms)).sum()) < own.size  # not vacuous: norms above and below C_l
    ref = naive_per_layer(copy.deepcopy(model), x, y, norms)
    got, B = _hooked_sums(model, x, y, norms, use_fast_layers=fast)
    assert B == 12
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.to(torch.float64), r, rtol=1e-9, atol=1e-12)


def test_functional_path_clips_per_layer():
    """p.grad_sample set by the user (grad_sample_mode="functional"): the optimizer clips each
    parameter to its own C_l; with z = 0 and loss_reduction="sum" the step's gradient is the clipped sum."""
    model = EM.make("custom", seed=3)
    x, y = EM.data("custom", 10, seed=4)
    x = x * 3
    norms = _norms(model, seed=5)
    ref = naive_per_layer(copy.deepcopy(model), x, y, norms)
    eng = PrivacyEngine(rng=0)
    m, o, _ = eng.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
                               data_loader=DataLoader(TensorDataset(x, y), batch_size=5), noise_multiplier=0.0,
                               max_grad_norm=norms, clipping="per_layer", loss_reduction="sum",
                               grad_sample_mode="functional", steps=1)
    grads = per_sample_grads(model, lambda out, t: CE(out, t, reduction="sum"), x, y)
    for name, p in model.named_parameters():
        p.grad_sample = grads[name]
    o.step()
    for p, r in zip(_params(model), ref):
        torch.testing.assert_close(p.grad, r, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["mlp", "text", "cnn_nobias", "custom"])
@pytest.mark.parametrize("scale", [1e-20, 1.0, 1e15])
def test_each_parameter_clipped_norm_is_within_its_norm_after_rounding(kind, scale):
    """float32 models, one sample at a time (the clipped sum of one sample is its clipped gradient):
    each parameter's clipped gradient, rounded to float32, has exact norm <= C_l, with C_l set just
    below the sample's own norm (the tightest case: the factor is ~1 but must still clip)."""
    model = _model(kind, seed=6, dtype=torch.float32)
    x, y = _data(kind, 4, seed=7, dtype=torch.float32)
    if x.dtype.is_floating_point:
        x = x * scale
    else:  # indices: scale the embedding table instead
        with torch.no_grad():
            model[0].weight.mul_(scale)
    m2 = copy.deepcopy(model)  # (before wrapping: a copy of a wrapped module would copy its hooks)
    gsm = GradSampleModule(model, loss_reduction="sum")
    params = _params(model)
    tested = 0
    for i in range(4):
        m2.zero_grad()
        CE(m2(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        own = [float(torch.sqrt((p.grad.double() ** 2).sum())) for p in _params(m2)]
        if not any(n > 0 for n in own):  # (a saturated sample: its loss's gradient is exactly 0)
            gsm.clear()
            continue
        tested += 1
        norms = [n * (1 - 2.0 ** -23) if n > 0 else 1.0 for n in own]  # just below: clipping by ~1 ulp
        CE(gsm(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        sums, _ = gsm.clipped_sum(None, per_layer=dict(zip(params, norms)))
        gsm.clear()
        for p, C in zip(params, norms):
            s = sums[p]
            assert s.dtype == torch.float32
            exact = math.sqrt(math.fsum(float(v) ** 2 for v in s.double().reshape(-1).tolist()))
            assert exact <= C, (i, exact, C)
    assert tested >= 2


def test_noise_std_is_z_times_the_root_sum_of_squares():
    """An empty logical batch (no capture): the gradient is the noise alone, N(0, (z C)^2) with
    C = sqrt(3^2 + 4^2) = 5 on each of N = 20100 coordinates (loss_reduction="sum"); tolerances
    are 5 standard errors of the sample moments."""
    model = nn.Linear(200, 100).double()
    eng = PrivacyEngine(rng=11)
    z = 0.7
    m, o, _ = eng.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
                               data_loader=DataLoader(TensorDataset(torch.zeros(10, 200)), batch_size=5),
                               noise_multiplier=z, max_grad_norm=[3.0, 4.0], clipping="per_layer",
                               loss_reduction="sum", steps=1)
    assert eng.clipping == "per_layer" and eng.max_grad_norms == [3.0, 4.0]
    assert 5.0 <= eng.max_grad_norm <= 5.0 * (1 + 1e-15)
    assert o.noise_std == z * eng.max_grad_norm
    o.step()
    noise = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()
    N, sigma = noise.size, z * 5.0
    assert abs(noise.mean()) < 5 * sigma / math.sqrt(N)
    assert abs(noise.std() / sigma - 1) < 5 * math.sqrt(0.5 / N)


def _loader(n=48, bs=12, seed=0, dtype=torch.float32):
    x, y = EM.data("mlp", n, seed=seed, dtype=dtype)
    return DataLoader(TensorDataset(x, y), batch_size=bs)


def _run(norms, clipping="per_layer", seed=0, epochs=2, z=1.0, bmm=None, stop_after=None, state=None,
         dtype=torch.float32):
    model = EM.make("mlp", seed=seed, dtype=dtype)
    optim = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    eng = PrivacyEngine(rng=seed)
    m, o, dl = eng.make_private(module=model, optimizer=optim, data_loader=_loader(dtype=dtype), noise_multiplier=z,
                                max_grad_norm=norms, clipping=clipping, epochs=epochs)
    if state is not None:
        m.load_state_dict(state["model"])
        o.load_state_dict(state["optim"])
        eng.load_state_dict(state["engine"])
    start = eng.steps
    while eng.steps < eng.planned_steps:
        loader = dl if bmm is None else BatchMemoryManager(data_loader=dl, max_physical_batch_size=bmm, optimizer=o)
        for x, y in loader:
            o.zero_grad()
            CE(m(x), y).backward()
            o.step()
            if stop_after is not None and eng.steps - start == stop_after and o._skip is False:
                return eng, m, o, copy.deepcopy({"model": m.state_dict(), "optim": o.state_dict(),
                                                 "engine": eng.state_dict()})
    return eng, m, o, None


NORMS = [0.3, 0.2, 0.4, 0.1]  # the MLP's weight, bias, weight, bias


def test_epsilon_equals_the_flat_runs_at_the_same_noise_multiplier():
    per, _, _, _ = _run(NORMS)
    flat, _, _, _ = _run(math.sqrt(sum(c * c for c in NORMS)), clipping="flat")
    assert per.steps == flat.steps == 8
    assert per.event_ == flat.event_
    assert per.get_epsilon(1e-5) == flat.get_epsilon(1e-5)


def test_make_private_with_epsilon_per_layer():
    b = PrivacyBudget(10.0, 1e-5)
    out = []
    for clipping, C in (("per_layer", NORMS), ("flat", 1.0)):
        model = EM.make("mlp", dtype=torch.float32)
        eng = PrivacyEngine(rng=0)
        eng.make_private_with_epsilon(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                      data_loader=_loader(), target_epsilon=2.0, target_delta=1e-5, epochs=2,
                                      max_grad_norm=C, clipping=clipping, budget=b if clipping == "per_layer" else None)
        out.append(eng)
    per, flat = out
    assert per.noise_multiplier == flat.noise_multiplier and per.event_ == flat.event_
    assert len(b.ledger) == 1 and b.ledger[0].event == per.event_
    assert per.optimizer.max_grad_norms == NORMS and per.optimizer.clipping == "per_layer"


def test_non_finite_sample_is_left_out():
    model = EM.make("mlp", seed=8)
    x, y = EM.data("mlp", 6, seed=9)
    x[2, 1] = float("inf")
    norms = _norms(model, seed=10)
    ref = naive_per_layer(copy.deepcopy(model), x, y, norms, skip=(2,))
    got, _ = _hooked_sums(model, x, y, norms)
    for g, r in zip(got, ref):
        assert bool(torch.isfinite(g).all())
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-12)


def test_virtual_batches_draw_the_noise_once_per_logical_step():
    a, ma, oa, _ = _run(NORMS, epochs=1, dtype=torch.float64)
    b, mb, ob, _ = _run(NORMS, epochs=1, bmm=5, dtype=torch.float64)
    assert a.steps == b.steps == 4
    for u, v in zip(ma.parameters(), mb.parameters()):
        torch.testing.assert_close(u, v, rtol=1e-10, atol=1e-12)  # the chunks' sums add in another order
    assert oa.generator.bit_generator.state == ob.generator.bit_generator.state


def test_resume_is_bit_identical_per_layer():
    full, m_full, _, _ = _run(NORMS, seed=5, epochs=3)
    for stop in (3, 6):
        _, _, _, state = _run(NORMS, seed=5, epochs=3, stop_after=stop)
        assert state["engine"]["max_grad_norms"] == NORMS
        res, m_res, _, _ = _run(NORMS, seed=99, epochs=3, state=state)
        assert res.steps == full.steps and res.get_epsilon(1e-5) == full.get_epsilon(1e-5)
        for (k, u), (_, v) in zip(m_full.state_dict().items(), m_res.state_dict().items()):
            assert torch.equal(u, v), (stop, k)


def test_resume_refuses_other_per_layer_norms():
    _, _, _, state = _run(NORMS, epochs=2, stop_after=1)
    with pytest.raises(ValueError, match="max_grad_norms"):
        _run(NORMS[::-1], epochs=2, state=state)  # the same sqrt(sum C_l^2), other norms
    with pytest.raises(ValueError, match="max_grad_norm"):
        _run(math.sqrt(sum(c * c for c in NORMS)), clipping="flat", epochs=2, state=state)


@pytest.mark.parametrize("kw, exc, match", [
    ({"clipping": "per_layer", "max_grad_norm": 1.0}, TypeError, r"list of 2 norms.*\[C\] \* 2"),
    ({"clipping": "per_layer", "max_grad_norm": [1.0]}, ValueError, "1 norms, the optimizer 2"),
    ({"clipping": "per_layer", "max_grad_norm": [1.0, 0.5, 0.2]}, ValueError, "3 norms"),
    ({"clipping": "per_layer", "max_grad_norm": [1.0, 0.0]}, ValueError, r"max_grad_norm\[1\] must be > 0"),
    ({"clipping": "per_layer", "max_grad_norm": [-1.0, 1.0]}, ValueError, r"max_grad_norm\[0\] must be > 0"),
    ({"clipping": "per_layer", "max_grad_norm": [1.0, float("inf")]}, ValueError, "finite"),
    ({"clipping": "per_layer", "max_grad_norm": [float("nan"), 1.0]}, ValueError, "finite"),
    ({"clipping": "per_layer", "max_grad_norm": [1.0, "1"]}, TypeError, "real number"),
    ({"clipping": "per_layer", "max_grad_norm": [1e300, 1e300]}, ValueError, "overflows"),
    ({"clipping": "flat", "max_grad_norm": [1.0, 0.5]}, ValueError, "clipping='per_layer'"),
    ({"clipping": "flat", "max_grad_norm": (1.0, 0.5)}, ValueError, "clipping='per_layer'"),
    ({"clipping": "adaptive", "max_grad_norm": 1.0}, NotImplementedError, "adaptive"),
    ({"clipping": "ghost", "max_grad_norm": 1.0}, ValueError, "clipping must be one of"),
])
@pytest.mark.parametrize("with_epsilon", [False, True])
def test_refusals_before_the_charge(kw, exc, match, with_epsilon):
    model = nn.Linear(2, 2)
    loader = DataLoader(TensorDataset(torch.zeros(8, 2), torch.zeros(8, dtype=torch.long)), batch_size=4)
    b = PrivacyBudget(10.0, 1e-5)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    args = dict(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=loader, epochs=1,
                budget=b, **kw)
    eng = PrivacyEngine(rng=gen)
    with pytest.raises(exc, match=match):
        if with_epsilon:
            eng.make_private_with_epsilon(target_epsilon=1.0, target_delta=1e-5, **args)
        else:
            eng.make_private(noise_multiplier=1.0, **args)
    assert b.ledger == () and eng.optimizer is None and gen.bit_generator.state == state
    assert not model._forward_hooks


def test_the_unit_is_the_optimizers_trainable_parameters():
    """Opacus's unit: the trainable parameters of the optimizer's param_groups (a frozen one has no
    norm); the norms follow their order across groups."""
    model = EM.make("mlp", dtype=torch.float64)
    model[0].bias.requires_grad_(False)
    opt = torch.optim.SGD([{"params": [model[2].weight, model[2].bias]},
                           {"params": [model[0].weight, model[0].bias], "lr": 0.01}], lr=0.1)
    x, y = EM.data("mlp", 8, seed=3)
    x = x * 3
    norms = [0.2, 0.05, 0.3]  # model[2].weight, model[2].bias, model[0].weight
    ref = naive_per_layer(copy.deepcopy(model), x, y, [norms[2], norms[0], norms[1]])  # model.parameters() order
    eng = PrivacyEngine(rng=0)
    m, o, _ = eng.make_private(module=model, optimizer=opt, data_loader=DataLoader(TensorDataset(x, y), batch_size=4),
                               noise_multiplier=0.0, max_grad_norm=norms, clipping="per_layer",
                               loss_reduction="sum", steps=1)
    CE(m(x), y, reduction="sum").backward()
    o.step()
    for p, r in zip([model[0].weight, model[2].weight, model[2].bias], ref):
        torch.testing.assert_close(p.grad, r, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind, fast_types, generic_types", [
    ("mlp", {nn.Linear}, set()),
    ("text", {nn.Embedding, nn.LayerNorm, nn.Linear}, set()),
    ("cnn_nobias", {nn.Conv2d, nn.Linear}, set()),
    ("cnn", {nn.Linear}, {nn.Conv2d, nn.GroupNorm}),  # a convolution with a bias: no per-parameter ghost norms
])
def test_fast_paths_serve_per_layer_clipping_where_they_have_per_parameter_norms(kind, fast_types, generic_types):
    model = _model(kind)
    x, y = _data(kind, 4)
    gsm = GradSampleModule(model, loss_reduction="sum")
    CE(gsm(x), y, reduction="sum").backward()
    _, fast, generic = gsm._parts(per_layer=True)
    assert {type(m) for m, _, _ in fast} == fast_types
    owners = {id(p): type(m) for m in model.modules() for p in m.parameters(recurse=False)}
    assert {owners[id(p)] for p in generic} == generic_types
    _, fast_flat, _ = gsm._parts()
    assert {type(m) for m, _, _ in fast_flat} >= fast_types  # flat clipping: every fast layer


@pytest.mark.slow
def test_compiled_per_layer_training_is_bit_identical_with_the_eager_backend():
    """torch.compile (dynamo's eager backend) of the wrapped module: the same parameters, bit for bit."""
    out = []
    for compiled in (False, True):
        model = EM.make("mlp", seed=0, dtype=torch.float32)
        x, y = EM.data("mlp", 32, seed=0, dtype=torch.float32)
        eng = PrivacyEngine(rng=0)
        m, o, dl = eng.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                    data_loader=DataLoader(TensorDataset(x, y), batch_size=8), noise_multiplier=1.0,
                                    max_grad_norm=[0.05, 0.02, 0.08, 0.01], clipping="per_layer", epochs=1)
        fwd = torch.compile(m, backend="eager") if compiled else m
        for xb, yb in dl:
            o.zero_grad()
            CE(fwd(xb), yb).backward()
            o.step()
        out.append([p.detach().clone() for p in m.parameters()])
    torch._dynamo.reset()
    assert all(torch.equal(a, b) for a, b in zip(*out))


# ---------------------------------------------------------------- per-group clipping (dpfast's)
def _layer_groups(model):
    """One optimizer parameter group per module holding trainable parameters (weight and bias together:
    per-layer clipping in McMahan et al.'s sense)."""
    seen, out = set(), []
    for m in model.modules():
        unit = [p for p in m.parameters(recurse=False) if p.requires_grad and id(p) not in seen]
        seen.update(map(id, unit))
        if unit:
            out.append(unit)
    return out


def naive_per_group(model, x, y, units, norms):
    """sum_i sum_g min(1, C_g / ||g_i,g||) g_i,g (||.|| over the group's parameters, ``units`` lists of
    parameter indices), float64 loop."""
    params = _params(model)
    total = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    for i in range(x.shape[0]):
        model.zero_grad()
        CE(model(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        gs = [p.grad.detach().to(torch.float64) if p.grad is not None else torch.zeros_like(t)
              for p, t in zip(params, total)]
        for unit, C in zip(units, norms):
            js = unit
            n = math.sqrt(sum(float((gs[j] ** 2).sum()) for j in js))
            for j in js:
                total[j] += (min(1.0, C / n) if n > 0 else 1.0) * gs[j]
    model.zero_grad()
    return total


@pytest.mark.parametrize("kind", ["mlp", "cnn", "text", "custom", "tied"])
def test_per_group_clipping_equals_a_naive_loop(kind):
    """clipping="per_group": one norm per optimizer parameter group, its parameters clipped jointly;
    here a group per layer (a convolution with its bias keeps the conv fast path: its norm_sq is the
    group's); z = 0, loss_reduction="sum": the step's gradient is the clipped sum."""
    model = _model(kind)
    x, y = _data(kind, 12, seed=1)
    own = _sample_norms(copy.deepcopy(model), x, y)
    params = _params(model)
    units = _layer_groups(model)
    idx = {id(p): j for j, p in enumerate(params)}
    norms = [float(np.median(np.sqrt((own[:, [idx[id(p)] for p in u]] ** 2).sum(axis=1)))) or 1.0 for u in units]
    ref = naive_per_group(copy.deepcopy(model), x, y, [[idx[id(p)] for p in u] for u in units], norms)
    opt = torch.optim.SGD([{"params": u} for u in units], lr=0.0)
    eng = PrivacyEngine(rng=0)
    m, o, _ = eng.make_private(module=model, optimizer=opt, data_loader=DataLoader(TensorDataset(x, y), batch_size=4),
                               noise_multiplier=0.0, max_grad_norm=norms, clipping="per_group",
                               loss_reduction="sum", steps=1)
    assert eng.clipping == o.clipping == "per_group"
    CE(m(x), y, reduction="sum").backward()
    o.step()
    for p, r in zip(params, ref):
        torch.testing.assert_close(p.grad, r, rtol=1e-9, atol=1e-12)


def test_per_group_routes_every_fast_layer_of_one_group_to_its_fast_path():
    model = _model("cnn")
    x, y = _data("cnn", 4)
    gsm = GradSampleModule(model, loss_reduction="sum")
    CE(gsm(x), y, reduction="sum").backward()
    groups = {p: k for k, u in enumerate(_layer_groups(model)) for p in u}
    _, fast, generic = gsm._parts(per_layer=True, groups=groups)
    assert {type(m) for m, _, _ in fast} == {nn.Conv2d, nn.Linear}
    assert {type(m) for m in model.modules() for p in m.parameters(recurse=False) if p in generic} == {nn.GroupNorm}


def test_per_group_clipped_norm_within_its_norm_after_rounding():
    """float32 CNN, one sample at a time, the group norms just below the sample's own: each layer's
    clipped (weight, bias) pair, rounded to float32, has exact joint norm <= C_g."""
    model = _model("cnn", seed=6, dtype=torch.float32)
    x, y = _data("cnn", 3, seed=7, dtype=torch.float32)
    units = _layer_groups(model)
    m2 = copy.deepcopy(model)  # (before wrapping: a copy of a wrapped module would copy its hooks)
    gsm = GradSampleModule(model, loss_reduction="sum")
    groups = {p: k for k, u in enumerate(units) for p in u}
    for i in range(3):
        m2.zero_grad()
        CE(m2(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        g2 = dict(zip(map(id, _params(model)), _params(m2)))
        own = [math.sqrt(sum(float((g2[id(p)].grad.double() ** 2).sum()) for p in u)) for u in units]
        norms = [n * (1 - 2.0 ** -23) for n in own]
        CE(gsm(x[i:i + 1]), y[i:i + 1], reduction="sum").backward()
        sums, _ = gsm.clipped_sum(None, per_layer={p: norms[groups[p]] for p in groups}, groups=groups)
        gsm.clear()
        for u, C in zip(units, norms):
            exact = math.sqrt(math.fsum(float(v) ** 2 for p in u for v in sums[p].double().reshape(-1).tolist()))
            assert exact <= C, (i, exact, C)


def test_per_group_accounting_resume_and_refusals():
    model = EM.make("mlp", dtype=torch.float32)
    units = _layer_groups(model)
    eng = PrivacyEngine(rng=0)
    eng.make_private(module=model, optimizer=torch.optim.SGD([{"params": u} for u in units], lr=0.1),
                     data_loader=_loader(), noise_multiplier=1.0, max_grad_norm=[0.3, 0.4], clipping="per_group",
                     epochs=1)
    assert 0.5 <= eng.max_grad_norm <= 0.5 * (1 + 1e-15) and eng.max_grad_norms == [0.3, 0.4]
    flat = PrivacyEngine(rng=0)
    m2 = EM.make("mlp", dtype=torch.float32)
    flat.make_private(module=m2, optimizer=torch.optim.SGD(m2.parameters(), lr=0.1), data_loader=_loader(),
                      noise_multiplier=1.0, max_grad_norm=0.5, epochs=1)
    assert eng.event_ == flat.event_
    # a per-layer state (four norms) is not a per-group one, nor the converse
    _, _, _, state = _run(NORMS, epochs=2, stop_after=1)
    m3 = EM.make("mlp", dtype=torch.float32)
    e3 = PrivacyEngine(rng=0)
    e3.make_private(module=m3, optimizer=torch.optim.SGD([{"params": [p]} for p in m3.parameters()], lr=0.05,
                                                         momentum=0.9),
                    data_loader=_loader(), noise_multiplier=1.0, max_grad_norm=NORMS, clipping="per_group", epochs=2)
    with pytest.raises(ValueError, match="clipping"):
        e3.load_state_dict(state["engine"])
    b = PrivacyBudget(10.0, 1e-5)
    for bad, exc in (({"max_grad_norm": 0.5}, TypeError), ({"max_grad_norm": [0.3, 0.4, 0.5]}, ValueError),
                     ({"max_grad_norm": [0.3, -0.4]}, ValueError)):
        m4 = EM.make("mlp", dtype=torch.float32)
        e4 = PrivacyEngine(rng=0)
        with pytest.raises(exc, match="per_group|max_grad_norm"):
            e4.make_private(module=m4, optimizer=torch.optim.SGD([{"params": u} for u in _layer_groups(m4)], lr=0.1),
                            data_loader=_loader(), noise_multiplier=1.0, clipping="per_group", epochs=1, budget=b,
                            **bad)
        assert b.ledger == () and e4.optimizer is None


@pytest.mark.parametrize("shape", [(7, 5), (7, 3, 5)])  # T = 1 (native row norms) and T = 3 (torch forms)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layer", ["linear", "layernorm"])
def test_norm_sq_parts_bound_each_parameters_exact_norm(shape, dtype, layer):
    """FastLayer.norm_sq_parts: per parameter, an upper bound of the exact squared norm of each
    sample's gradient (float64 per-sample loop on the same tensors), tight to 1e-10 relative."""
    from dpfast.torch._fast_layers import FAST_LAYERS

    torch.manual_seed(0)
    m = (nn.Linear(5, 4) if layer == "linear" else nn.LayerNorm(5)).to(dtype)
    x = torch.randn(*shape, dtype=dtype) * 3
    out = m(x)
    g = torch.randn_like(out)
    fl = FAST_LAYERS[type(m)]
    parts = fl.norm_sq_parts(m, (x,), g)
    m64 = copy.deepcopy(m).double()
    for i in range(shape[0]):
        m64.zero_grad()
        (m64(x[i:i + 1].double()) * g[i:i + 1].double()).sum().backward()
        for name, p in m64.named_parameters():
            exact = float((p.grad ** 2).sum())
            ub = float(parts[name][i])
            assert exact <= ub <= exact * (1 + 1e-10) + 1e-300, (name, i, exact, ub)
    total = fl.norm_sq(m, (x,), g)
    assert torch.allclose(sum(parts.values()), total, rtol=1e-12, atol=0)
