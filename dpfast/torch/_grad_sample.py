"""Per-sample gradients of any ``torch.nn.Module``: capture by hooks, per-layer computation.

Capture (Opacus's design, with one change).  A forward hook on every module that holds trainable
parameters of its own (``named_parameters(recurse=False)``) keeps the tensors its forward received
(batch axis 0) and registers a hook on each output tensor, which receives the gradient of the
loss with respect to that output during ``loss.backward()`` -- the ``grad_output`` a full backward
hook would receive, without that hook's ban on in-place operations after the module
(``nn.ReLU(inplace=True)``).  With ``loss_reduction="mean"`` the output gradient is multiplied by
the physical batch size B, so that it is the gradient of the SUM of the per-sample losses (as
Opacus does).

Per-sample gradients, per module invocation:

* layers whose exact type is in :data:`dpfast.torch._fast_layers.FAST_LAYERS` (Linear, Conv,
  Embedding, LayerNorm): the squared per-sample norms and the weighted sums come from the layer's
  ``norm_sq``/``clipped_sum`` (ghost norms and book-keeping), never a B x P array;
* any other module (custom layers, raw ``nn.Parameter`` s, modules whose parameters are shared
  with another module, a fast layer called more than once in a forward pass): ``torch.func`` --
  ``vmap`` over the ``vjp`` of ``torch.func.functional_call`` of that module on one sample, with
  the captured output gradient as cotangent -- so custom layers work without registering
  anything.  Gradients of a parameter used by several modules (or several calls) add up per
  sample before clipping.

The tap (fast layers only).  Autograd would also form each fast layer's ordinary weight gradient
(the unclipped sum G^T A of the batch: as much work as the clipped sum itself), which DP-SGD
discards.  So a forward pre-hook swaps the layer's parameters for detached aliases (same memory,
no autograd history) for the duration of its forward, and the forward hook puts them back (it is
registered with ``always_call=True``: also when the forward raises).  The output still depends on
the layer's input, so the input gradient flows as before and the output-gradient hook above
receives the same values; when no input requires grad (a first layer), the output is passed
through :class:`_Tap`, an identity autograd function made part of the graph by a zero-dimensional
anchor, whose backward keeps the output gradient.  Layers whose parameters are shared with another
module, and everything under ``torch.compile`` tracing, keep the plain hooks.  The clipped sums are
bit-identical to the plain hooks' (tests/torch/test_torch_tap.py); after ``loss.backward()`` the
fast layers' ``p.grad`` is None.

Modules that mix the samples of a batch (BatchNorm, InstanceNorm/GroupNorm-free running
statistics) have no per-sample gradient; :func:`validate_module` refuses them before anything is
charged (use GroupNorm or LayerNorm), and ``Embedding(max_norm=...)``, whose forward renormalises
the looked-up rows in place.  A training forward through :class:`GradSampleModule` that updates a
buffer or a parameter in place raises.
"""
from __future__ import annotations

import collections
import contextlib
import math
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vjp, vmap

from dpfast import _clip
from dpfast.torch._fast_layers import FAST_LAYERS

__all__ = ["GradSampleModule", "per_sample_grads", "validate_module"]

_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


#: the modules whose capture hooks a GradSampleModule holds (module -> a weak reference to it; the
#: hooks keep it alive until its ``remove_hooks``)
_HOOKED_BY: "weakref.WeakKeyDictionary[nn.Module, weakref.ref]" = weakref.WeakKeyDictionary()


def hooked_by(module: nn.Module) -> Optional["GradSampleModule"]:
    """The GradSampleModule whose capture hooks are on ``module`` or one of its submodules, or None."""
    for m in module.modules():
        ref = _HOOKED_BY.get(m)
        gsm = None if ref is None else ref()
        if gsm is not None and gsm._handles:
            return gsm
    return None


def validate_module(module: nn.Module) -> None:
    """Refuse (``ValueError``, before anything is charged) modules whose outputs mix the samples of
    a batch, so that no per-sample gradient exists: BatchNorm (any dimension, SyncBatchNorm), and
    InstanceNorm with ``track_running_stats=True`` (its running statistics, released with the
    model, are a function of all samples); recurrent modules and multi-head attention whose batch
    is not on axis 0 (the hooks need the batch on axis 0)."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    for name, m in module.named_modules():
        where = f"{name!r} ({type(m).__name__})" if name else type(m).__name__
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            raise ValueError(f"module {where} is a BatchNorm: it mixes the samples of a batch, so no per-sample "
                             "gradient exists and DP-SGD cannot bound one sample's influence; replace it with "
                             "nn.GroupNorm or nn.LayerNorm (Opacus's ModuleValidator.fix does GroupNorm)")
        if isinstance(m, nn.modules.instancenorm._InstanceNorm) and m.track_running_stats:
            raise ValueError(f"module {where} is an InstanceNorm with track_running_stats=True: its running "
                             "statistics are computed from all samples; use track_running_stats=False")
        if isinstance(m, nn.Embedding) and m.max_norm is not None:
            raise ValueError(f"module {where} is an Embedding with max_norm: its forward renormalises, in place and "
                             "without noise, the rows of the weight that the batch looks up, so the released weight "
                             "shows which indices the batch held; use max_norm=None")
        if isinstance(m, nn.RNNBase) and any(p.requires_grad for p in m.parameters(recurse=False)):
            raise ValueError(f"module {where} is a recurrent layer: its hidden state has the batch on axis 1, "
                             "which the per-sample hooks do not support yet; freeze it or write the recurrence "
                             "with per-step modules")
        if isinstance(m, nn.MultiheadAttention) and not m.batch_first and \
                any(p.requires_grad for p in m.parameters(recurse=False)):
            raise ValueError(f"module {where} is an nn.MultiheadAttention with batch_first=False: the hooks need "
                             "the batch on axis 0; construct it with batch_first=True")


@contextlib.contextmanager
def _hooks_off(module: nn.Module):
    """Run ``module`` (and its submodules) without any module hook: the generic path re-runs the
    module under ``torch.func`` transforms, where the capture hooks must not fire and a full
    backward hook (an old-style autograd.Function) would fail."""
    saved = []
    for sub in module.modules():
        saved.append((sub, [getattr(sub, h) for h in _HOOK_DICTS]))
        for h in _HOOK_DICTS:
            setattr(sub, h, collections.OrderedDict())
    try:
        yield
    finally:
        for sub, hs in saved:
            for h, v in zip(_HOOK_DICTS, hs):
                setattr(sub, h, v)


class _Call:
    """One invocation of a hooked module: its inputs and the gradients of its tensor outputs.

    ``grads``: the gradients of the SUM of the per-sample losses (with ``loss_reduction="mean"``
    the captured gradient times the batch size B, the float products ``g * B``).  A gradient that
    arrived once is kept as captured and multiplied on first use (:attr:`grads`), so that a fast
    layer that scales as it reads (``FastLayer.grad_scale``: the convolutions' native kernel) takes
    it from :meth:`raw_grad` without the copy (conv1 of the benchmark CNN: 0.6 ms of a 30 ms step
    on one thread)."""

    __slots__ = ("args", "kwargs", "out_idx", "n_out", "_grads", "_raw", "scale", "batch", "n_grads")

    def __init__(self, args, kwargs, out_idx, batch, scale=1):
        self.args = args
        self.kwargs = kwargs
        self.out_idx = out_idx  # positions (among the output's tensors) of the hooked outputs
        self.n_out = len(out_idx)
        self._grads: List[Optional[torch.Tensor]] = [None] * self.n_out
        self._raw: List[Optional[torch.Tensor]] = [None] * self.n_out  # captured, not yet times scale
        self.scale = scale
        self.batch = batch
        self.n_grads = 0

    @property
    def done(self) -> bool:
        return self.n_grads > 0

    @property
    def grads(self) -> List[Optional[torch.Tensor]]:
        for j, g in enumerate(self._raw):
            if g is not None:
                self._grads[j] = g * self.scale if self.scale != 1 else g
                self._raw[j] = None
        return self._grads

    def add_grad(self, j: int, g: torch.Tensor) -> None:
        """A gradient of output j arrived (as captured: of the loss as reduced)."""
        if self._raw[j] is None and self._grads[j] is None and isinstance(self.scale, int) and \
                1 <= self.scale <= 1 << 24:
            self._raw[j] = g
        else:  # (a second gradient of the same output: the sum of the scaled ones, as before)
            prev = self.grads[j]
            gs = g * self.scale if self.scale != 1 else g
            self._grads[j] = gs if prev is None else prev + gs
        self.n_grads += 1

    def raw_grad(self, j: int) -> Tuple[torch.Tensor, int]:
        """(g, s): output j's gradient of the sum of the per-sample losses is fl(g * s)."""
        g = self._raw[j]
        if g is not None:
            return g, self.scale
        gs = self.grads[j]
        if gs is None:  # pragma: no cover - only calls with a gradient reach the fast layers
            raise RuntimeError("no gradient was captured for this output")
        return gs, 1


def _batch_of(args, kwargs) -> Optional[int]:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor) and a.ndim >= 1:
            return int(a.shape[0])
    return None


def _detach(x):
    return x.detach() if isinstance(x, torch.Tensor) else x


def _out_tensors(out) -> List[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [o for o in out if isinstance(o, torch.Tensor)]
    return []


def _is_compiling() -> bool:
    f = getattr(torch.compiler, "is_compiling", None)  # torch >= 2.3
    if f is None:  # pragma: no cover - torch 2.2
        f = torch._dynamo.is_compiling
    return bool(f())


class _Tap(torch.autograd.Function):
    """Identity on a tensor that does not require grad, made part of the graph through a
    zero-dimensional ``anchor`` that does: the output IS the input tensor (``mark_dirty``, so a
    following in-place operation such as ``nn.ReLU(inplace=True)`` is allowed), and the backward
    hands the output's gradient to ``keep`` and propagates nothing."""

    @staticmethod
    def forward(ctx, anchor, out, keep):
        ctx.keep = keep
        ctx.mark_dirty(out)
        return out

    @staticmethod
    def backward(ctx, g):
        ctx.keep(g)
        return None, None, None


class GradSampleModule(nn.Module):
    """Wrap ``module`` so that each backward pass records what per-sample gradients need.

    ``forward`` is the module's; ``state_dict``/``load_state_dict`` are the wrapped module's (no
    ``_module.`` prefix, unlike Opacus).  The per-sample gradients of one physical batch are read
    by :meth:`clipped_sum` (the optimizer calls it in ``step``).  Rules:

    * one backward pass per physical batch between two ``optimizer.step()`` calls (a second
      forward of the same module after its backward, without a step, raises ``RuntimeError``;
      :class:`~dpfast.torch.BatchMemoryManager` steps after every physical batch);
    * every module treats the samples of a batch independently (no batch statistics: a custom
      module that mixes samples cannot be detected, and would void the per-sample bound);
    * tensors in a hooked module's inputs and outputs have the batch on axis 0 (a tensor input
      whose first axis is not the batch is treated as a constant);
    * capture happens in training mode with gradients enabled (``model.eval()`` or
      ``torch.no_grad()`` for evaluation);
    * a parameter is used inside its own module's forward: a parameter that autograd reaches with no
      hooked call is refused at ``step()``; the gradient of a use *outside* the module's forward
      (``other.weight`` read by a parent) is not part of any per-sample gradient and so is left out
      of the private update (which stays private: every ``p.grad`` is replaced by the noisy sum).

    Parameters
    ----------
    module : torch.nn.Module
    loss_reduction : {"mean", "sum"}
        How the loss combines the per-sample losses of a batch.
    use_fast_layers : bool, default True
        Use the ghost-norm fast paths of ``FAST_LAYERS`` where they apply (False: every layer by
        ``torch.func``, for checking).
    tap : bool, default True
        Run the fast-path layers (``FAST_LAYERS`` types, not sharing a parameter with another
        module) on detached parameters, so that ``loss.backward()`` does not form their ordinary,
        unclipped gradient, which DP-SGD throws away (the "tap", module docstring): their
        ``p.grad`` stays None until ``optimizer.step()`` writes the private gradient.  The
        clipped sums are bit-identical either way (False: the plain hooks, for checking).
    """

    def __init__(self, module: nn.Module, *, loss_reduction: str = "mean", use_fast_layers: bool = True,
                 tap: bool = True) -> None:
        super().__init__()
        validate_module(module)
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        self._module = module
        self.loss_reduction = loss_reduction
        self.use_fast_layers = bool(use_fast_layers)
        self._calls: Dict[nn.Module, List[_Call]] = {}
        self._handles: list = []
        # modules holding trainable parameters of their own, and which of them share a parameter
        owners: Dict[int, List[nn.Module]] = {}
        self._hooked: List[nn.Module] = []
        for m in module.modules():
            own = [p for p in m.parameters(recurse=False) if p.requires_grad]
            if own:
                self._hooked.append(m)
                for p in own:
                    owners.setdefault(id(p), []).append(m)
        self._shared = {m for ms in owners.values() if len(ms) > 1 for m in ms}
        # the "tap": fast layers run on detached parameters (module docstring)
        self._tapped = {m for m in self._hooked
                        if tap and self.use_fast_layers and type(m) in FAST_LAYERS and m not in self._shared}
        self._swapped: Dict[nn.Module, Dict[str, Any]] = {}
        for m in self._hooked:
            if m in self._tapped:
                self._handles.append(m.register_forward_pre_hook(self._detach_params))
                self._handles.append(m.register_forward_hook(self._forward_hook, with_kwargs=True, always_call=True))
            else:
                self._handles.append(m.register_forward_hook(self._forward_hook, with_kwargs=True))
            _HOOKED_BY[m] = weakref.ref(self)

    # ------------------------------------------------------------------ nn.Module surface
    def forward(self, *args, **kwargs):
        if not (self._module.training and torch.is_grad_enabled()) or _is_compiling():
            return self._module(*args, **kwargs)
        # a buffer or parameter updated in place by a training forward (running statistics of a custom
        # module, F.embedding's max_norm renormalisation: BatchNorm and Embedding(max_norm) themselves are
        # refused by validate_module) is a function of the batch that is released with the model's
        # state_dict, outside the clipping and the noise
        before = [(n, t, t._version) for n, t in list(self._module.named_buffers()) +
                  list(self._module.named_parameters())]
        out = self._module(*args, **kwargs)
        changed = [n for n, t, v in before if t._version != v]
        if changed:
            raise RuntimeError(
                f"the forward pass updated the buffer(s) or parameter(s) {changed} in place: a value computed from "
                "the batch (running statistics, a renormalisation) is released with the model's state_dict "
                "without clipping or noise; keep such computations out of the trained model or put their modules "
                "in eval() mode (one computed from the parameters alone, like spectral_norm's power iteration, "
                "is refused too)")
        return out

    def state_dict(self, *args, **kwargs):
        return self._module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self._module.load_state_dict(state_dict, strict=strict, assign=assign)

    def remove_hooks(self) -> None:
        """Remove the capture hooks (the wrapped module is then a plain module again)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._calls.clear()
        for m in self._hooked:
            ref = _HOOKED_BY.get(m)
            if ref is not None and ref() is self:
                del _HOOKED_BY[m]

    # ------------------------------------------------------------------------- capture
    def _detach_params(self, mod, args):
        """Forward pre-hook of a tapped fast layer: its parameters are replaced by detached
        aliases (same memory) for this forward, so that autograd never forms their (discarded)
        ordinary gradient; :meth:`_forward_hook` puts them back, also when the forward raises."""
        if not (mod.training and torch.is_grad_enabled()) or _is_compiling():
            return None
        saved = dict(mod._parameters)
        for n, p in saved.items():
            if p is not None:
                mod._parameters[n] = p.detach()
        self._swapped[mod] = saved
        return None

    def _forward_hook(self, mod, args, kwargs, out):
        tapped = self._swapped.pop(mod, None)
        if tapped is not None:
            mod._parameters.update(tapped)
            if out is None:  # the forward raised (an always-called hook): nothing to capture
                return None
        if not (mod.training and torch.is_grad_enabled()):
            return None
        calls = self._calls.setdefault(mod, [])
        if any(c.done for c in calls):
            raise RuntimeError(
                "a second forward/backward pass ran before optimizer.step(): dpfast.torch clips each physical "
                "batch once, so call optimizer.step() after every backward (use BatchMemoryManager for "
                "virtual batches) and combine several losses of one batch before a single backward")
        tensors = _out_tensors(out)
        if tapped is not None and isinstance(out, torch.Tensor) and not out.requires_grad and \
                out.dtype.is_floating_point:
            # no input requires grad either (a first layer): the identity tap makes the output part
            # of the graph and keeps its gradient
            batch = _batch_of(args, kwargs)
            call = _Call(tuple(_detach(a) for a in args), {k: _detach(v) for k, v in kwargs.items()},
                         [0], batch, self._scale_of(batch))
            calls.append(call)
            anchor = torch.zeros((), device=out.device, requires_grad=True)
            return _Tap.apply(anchor, out, self._grad_hook(call, 0))
        idx = [i for i, o in enumerate(tensors) if o.requires_grad]
        batch = _batch_of(args, kwargs)
        call = _Call(tuple(_detach(a) for a in args), {k: _detach(v) for k, v in kwargs.items()},
                     idx, batch, self._scale_of(batch))
        calls.append(call)
        for j, i in enumerate(idx):
            tensors[i].register_hook(self._grad_hook(call, j))
        return None

    def _scale_of(self, batch) -> int:
        """What the captured output gradients are multiplied by: B for a mean loss (the gradient of
        the sum of the per-sample losses), else 1."""
        return batch if self.loss_reduction == "mean" and isinstance(batch, int) else 1

    def _grad_hook(self, call: _Call, j: int):
        def hook(g):
            g = g.detach()
            if self.loss_reduction == "mean" and not isinstance(call.batch, int):
                g = g * call.batch  # (None: raises here, as it always did)
            call.add_grad(j, g)
            return None
        return hook

    def clear(self) -> None:
        """Forget the captured batch (``optimizer.zero_grad()`` and ``step()`` call it)."""
        self._calls.clear()

    # --------------------------------------------------------------- per-sample grads
    def _generic(self, mod: nn.Module, call: _Call) -> Dict[str, torch.Tensor]:
        """Per-sample gradients (B, *shape) of mod's own trainable parameters for one call."""
        names = [n for n, p in mod.named_parameters(recurse=False) if p.requires_grad]
        params = {n: getattr(mod, n).detach() for n in names}
        B = call.batch
        arg_dims = tuple(0 if isinstance(a, torch.Tensor) and a.ndim >= 1 and a.shape[0] == B else None
                         for a in call.args)
        kw_names = list(call.kwargs)
        kw_vals = tuple(call.kwargs[k] for k in kw_names)
        kw_dims = tuple(0 if isinstance(v, torch.Tensor) and v.ndim >= 1 and v.shape[0] == B else None
                        for v in kw_vals)
        cot = call.grads
        keep = [j for j, g in enumerate(cot) if g is not None]

        def one(args, kws, gs):
            a1 = tuple(a.unsqueeze(0) if d == 0 else a for a, d in zip(args, arg_dims))
            k1 = {k: (v.unsqueeze(0) if d == 0 else v) for k, v, d in zip(kw_names, kws, kw_dims)}

            def f(p):
                outs = _out_tensors(functional_call(mod, p, a1, k1))
                return tuple(outs[call.out_idx[j]] for j in keep)

            _, fn = vjp(f, params)
            return fn(tuple(g.unsqueeze(0) for g in gs))[0]

        gs = tuple(cot[j] for j in keep)
        with _hooks_off(mod):
            return vmap(one, in_dims=(arg_dims, kw_dims, tuple(0 for _ in gs)), randomness="error")(
                call.args, kw_vals, gs)

    def _parts(self, per_layer: bool = False, groups: Optional[Dict[nn.Parameter, Any]] = None):
        """The captured physical batch: (B, fast parts [(module, FastLayer, call)], generic
        per-sample gradients {parameter: (B, *shape) tensor}).  ``per_layer``: a fast layer whose
        type has no per-parameter norms (``FastLayer.norm_sq_parts``) and whose trainable
        parameters are not all in one clipping group (``groups``; none: each parameter its own)
        goes the generic path."""
        B = None
        fast = []
        generic: Dict[nn.Parameter, torch.Tensor] = {}
        for mod, calls in self._calls.items():
            done = [c for c in calls if c.done]
            for c in done:
                if c.batch is None:
                    raise RuntimeError(f"{type(mod).__name__} received no tensor input with a batch axis")
                if B is None:
                    B = c.batch
                elif c.batch != B:
                    raise RuntimeError(
                        f"the captured modules saw batches of different sizes ({B} and {c.batch}): one backward "
                        "pass per physical batch between optimizer steps")
            if not done:
                continue
            fl = FAST_LAYERS.get(type(mod)) if self.use_fast_layers else None
            if fl is not None and per_layer and fl.norm_sq_parts is None and \
                    not _one_group([p for p in mod.parameters(recurse=False) if p.requires_grad], groups):
                fl = None
            if fl is not None and len(done) == 1 and mod not in self._shared and done[0].n_out == 1:
                fast.append((mod, fl, done[0]))
                continue
            if B == 0:
                continue
            for c in done:
                for n, g in self._generic(mod, c).items():
                    p = getattr(mod, n)
                    generic[p] = g if p not in generic else generic[p] + g
        return (0 if B is None else B), fast, generic

    def clipped_sum(self, max_grad_norm: float, per_layer: Optional[Dict[nn.Parameter, float]] = None,
                    groups: Optional[Dict[nn.Parameter, Any]] = None
                    ) -> Tuple[Dict[nn.Parameter, torch.Tensor], int]:
        """Clip the captured batch's per-sample gradients (flat clipping: the norm over all
        parameters) to ``max_grad_norm`` and sum them: ({parameter: sum_i f_i g_i}, B).

        ``per_layer`` ({parameter: C_p}, per-layer clipping): each sample's gradient of each
        parameter p is clipped to its own norm C_p (``max_grad_norm`` is then unused); the sums
        of the parameters not in ``per_layer`` are left out.  ``groups`` ({parameter: key}, with
        ``per_layer``; per-group clipping): the parameters of one key are clipped together, their
        joint norm to their (common) C."""
        if per_layer is not None:
            return self._clipped_sum_per_layer(per_layer, groups)
        B, fast, generic = self._parts()
        out: Dict[nn.Parameter, torch.Tensor] = {}
        if B == 0:
            return out, 0
        sq = np.zeros(B)
        dtypes = []
        for mod, fl, c in fast:
            if fl.grad_scale:  # the captured gradient and its scale (the layer multiplies as it reads)
                g0, s0 = c.raw_grad(0)
                ns = fl.norm_sq(mod, c.args, g0, grad_scale=s0)
            else:
                ns = fl.norm_sq(mod, c.args, c.grads[0])
            sq += ns.detach().to("cpu", torch.float64).numpy()
            dtypes += [p.dtype for p in mod.parameters(recurse=False)]
        for p, g in generic.items():
            sq += per_sample_norm_sq(g)
            dtypes.append(g.dtype)
        factors = safe_factors(sq, max_grad_norm, dtypes)
        # a sample whose bound is not finite (an inf/NaN input or gradient) has factor 0: it is left
        # out of the sums, not multiplied by 0 (0 * inf is NaN, and one such sample would turn the
        # whole step, so the released parameters, into NaN); the rows of the others are unchanged
        rows, factors = kept_samples(factors)
        for mod, fl, c in fast:
            g0, s0 = c.raw_grad(0) if fl.grad_scale else (c.grads[0], 1)
            args, g_out = _kept_rows(c.args, g0, rows, B)
            f = torch.from_numpy(factors).to(g_out.device, g_out.dtype)
            if rows is not None and not rows.size:  # every sample clipped to zero
                sums = {n: torch.zeros_like(p, memory_format=torch.contiguous_format)
                        for n, p in mod.named_parameters(recurse=False) if p.requires_grad}
            elif fl.grad_scale:
                sums = fl.clipped_sum(mod, args, g_out, f, grad_scale=s0)
            else:
                sums = fl.clipped_sum(mod, args, g_out, f)
            for n, s in sums.items():
                p = getattr(mod, n)
                out[p] = s if p not in out else out[p] + s
        for p, g in generic.items():
            if rows is not None:
                g = g.index_select(0, torch.from_numpy(rows).to(g.device))
            f = torch.from_numpy(factors).to(g.device, g.dtype)
            s = torch.tensordot(f, g, dims=1)
            out[p] = s if p not in out else out[p] + s
        return out, B

    def _clipped_sum_per_layer(self, norms: Dict[nn.Parameter, float],
                               groups: Optional[Dict[nn.Parameter, Any]] = None
                               ) -> Tuple[Dict[nn.Parameter, torch.Tensor], int]:
        """Per-layer clipping: factors per (sample, parameter), f_ip = safe rule at C_p on the
        certified bound of ||g_ip|| (:func:`per_layer_factors`; per group with ``groups``)."""
        B, fast, generic = self._parts(per_layer=True, groups=groups)
        out: Dict[nn.Parameter, torch.Tensor] = {}
        if B == 0:
            return out, 0
        sq: Dict[nn.Parameter, np.ndarray] = {}
        dtypes: Dict[nn.Parameter, list] = {}
        names = []  # per fast part: its trainable parameter names
        for mod, fl, c in fast:
            own = [n for n, p in mod.named_parameters(recurse=False) if p.requires_grad]
            names.append(own)
            if fl.norm_sq_parts is not None and not (len(own) > 1 and _one_group([getattr(mod, n) for n in own],
                                                                                   groups)):
                parts = fl.norm_sq_parts(mod, c.args, c.grads[0])
            else:  # one trainable parameter, or all in one group (_parts): the layer's norm is theirs
                parts = {own[0]: fl.norm_sq(mod, c.args, c.grads[0])}
                for n in own[1:]:  # (its group gets the joint bound once, through own[0])
                    sq[getattr(mod, n)] = np.zeros(B)
            for n, t in parts.items():
                p = getattr(mod, n)
                sq[p] = t.detach().to("cpu", torch.float64).numpy()
            for n in own:
                dtypes[getattr(mod, n)] = [getattr(mod, n).dtype]
        for p, g in generic.items():
            sq[p] = per_sample_norm_sq(g)
            dtypes[p] = [g.dtype, p.dtype]
        factors, rows = per_layer_factors(sq, norms, dtypes, B, groups)
        if rows is not None and not rows.size:  # every sample left out (non-finite)
            return {p: torch.zeros_like(p, memory_format=torch.contiguous_format) for p in sq if p in norms}, B
        for (mod, fl, c), own in zip(fast, names):
            if not any(getattr(mod, n) in norms for n in own):
                continue
            args, g_out = _kept_rows(c.args, c.grads[0], rows, B)
            f = {n: torch.from_numpy(factors[getattr(mod, n)]).to(g_out.device, g_out.dtype) for n in own}
            one = _one_group([getattr(mod, n) for n in own], groups)  # one factor vector for the layer
            sums = fl.clipped_sum(mod, args, g_out, f[own[0]] if one else f)
            for n, s_ in sums.items():
                p = getattr(mod, n)
                if p in norms:
                    out[p] = s_ if p not in out else out[p] + s_
        for p, g in generic.items():
            if p not in norms:
                continue
            if rows is not None:
                g = g.index_select(0, torch.from_numpy(rows).to(g.device))
            f_p = torch.from_numpy(factors[p]).to(g.device, g.dtype)
            s_ = torch.tensordot(f_p, g, dims=1)
            out[p] = s_ if p not in out else out[p] + s_
        return out, B


def _one_group(params, groups) -> bool:
    """The parameters are clipped together: one of them, or all of one group."""
    if len(params) <= 1:
        return True
    if groups is None:
        return False
    keys = {groups.get(p, ("own", id(p))) for p in params}
    return len(keys) == 1


def per_layer_factors(norm_sq: Dict[Any, np.ndarray], norms: Dict[Any, float], dtypes: Dict[Any, list],
                      batch: int, groups: Optional[Dict[Any, Any]] = None
                      ) -> Tuple[Dict[Any, np.ndarray], Optional[np.ndarray]]:
    """Per-layer clip factors: for each parameter p with a norm C_p in ``norms``, the safe rule of
    :func:`safe_factors` at C_p on p's per-sample squared-norm bounds (so each sample's clipped
    gradient of p has exact norm <= C_p after rounding to its dtype, and the whole clipped
    gradient <= sqrt(sum_p C_p^2)).  ``groups`` ({parameter: key}; per-group clipping): the
    parameters of one key share one factor, the safe rule at their common C on the sum of their
    bounds (inflated by 4 k u for the k - 1 additions, as the fast layers' ``_add_upper``), the
    lowest precision among their dtypes.  A sample with a non-finite bound for ANY parameter
    (factor 0) is left out of every sum (``rows``: the kept samples, None when all are; the
    factors are those of the kept rows).  Parameters without a norm (not the optimizer's) get
    factor 0: their sums are not released."""
    if groups is None:
        f = {p: safe_factors(sq, norms[p], dtypes.get(p, ())) if p in norms else np.zeros(batch)
             for p, sq in norm_sq.items()}
    else:
        members: Dict[Any, list] = {}
        for p in norm_sq:
            if p in norms:
                members.setdefault(groups[p], []).append(p)
        f = {p: np.zeros(batch) for p in norm_sq if p not in norms}
        for ps in members.values():
            total = np.zeros(batch)
            for p in ps:
                total = total + norm_sq[p]
            if len(ps) > 1:
                total = total * (1.0 + 4.0 * len(ps) * 2.0 ** -53)
            fg = safe_factors(total, norms[ps[0]], [d for p in ps for d in dtypes.get(p, ())])
            for p in ps:
                f[p] = fg
    keep = np.ones(batch, dtype=bool)
    for p, fp in f.items():
        if p in norms:
            keep &= fp > 0
    if keep.all():
        return f, None
    rows = np.flatnonzero(keep)
    return {p: fp[rows] for p, fp in f.items()}, rows


# ------------------------------------------------------------------------------- clipping
_U = {torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def per_sample_norm_sq(g: torch.Tensor) -> np.ndarray:
    """Certified upper bound of each row's exact squared l2 norm, float64 (B,), for a (B, ...)
    per-sample gradient tensor.  CPU float32/float64: ``dpfast._clip.clip_rows`` on a NumPy view of
    the tensor's memory (no copy when contiguous), inflated by its summation bound
    (``csrc/clip/clip.hpp`` (a): (P/8 + 16) 2^-52 relative, plus 2^-537 sqrt(P) for float64
    underflow); other devices/dtypes: the same sum of squares in float64 torch ops."""
    B = g.shape[0]
    P = max(1, g[0].numel()) if B else 1
    rho = (P / 8.0 + 16.0) * 2.0 ** -52
    if g.device.type == "cpu" and g.dtype in (torch.float32, torch.float64):
        a = g.detach().reshape(B, math.prod(g.shape[1:])).contiguous().numpy()
        norms = np.empty(B)
        _clip.clip_rows(a, np.inf, norms, None, None, None)
    else:
        norms = torch.sqrt(torch.sum(g.detach().reshape(B, math.prod(g.shape[1:])).to(torch.float64) ** 2, dim=1)).cpu().numpy()
        rho += P * 2.0 ** -52  # torch's reduction order is unspecified: the gamma_P bound
    ub = norms * (1.0 + rho) + np.sqrt(P) * 2.0 ** -537
    return ub * ub * (1.0 + 2.0 ** -50)


def _kept_rows(args, g_out: torch.Tensor, rows, batch: int):
    """A layer's recorded inputs and output gradient restricted to the samples ``rows`` (None: all;
    the tensors with the batch axis only)."""
    if rows is None:
        return args, g_out
    idx = torch.from_numpy(rows).to(g_out.device)
    args = tuple(a.index_select(0, idx) if isinstance(a, torch.Tensor) and a.ndim >= 1 and a.shape[0] == batch
                 else a for a in args)
    return args, g_out.index_select(0, idx)


def kept_samples(factors):
    """``(rows, factors)``: the samples whose clipping factor is positive and their factors (rows None
    when all are). A factor-0 sample (a non-finite input or gradient) is left out of the clipped sums
    rather than multiplied by 0: 0 * inf is NaN, and one such sample would turn the whole sum, so the
    released parameters, into NaN."""
    if bool((factors > 0).all()):
        return None, factors
    rows = np.flatnonzero(factors > 0)
    return rows, factors[rows]


def safe_factors(norm_sq: np.ndarray, max_grad_norm: float, dtypes=()) -> np.ndarray:
    """Clip factors (float64, (B,)) for per-sample squared-norm upper bounds ``norm_sq``: dpfast's
    safe rule (``csrc/clip/clip.hpp``, ``safe_factor``: 1 when the bound is <= C, else t / ub with
    t = C (1 - 8 u), 0 when the bound is not finite), run by ``dpfast._clip.clip_rows`` on the
    (B, 1) column of norm bounds, with C shrunk by 8 u_T of the lowest precision T among
    ``dtypes`` (the clipped gradients' dtypes): the factor and its products round in T, each by
    at most u_T relative, so the clipped per-sample gradient stays within C after rounding."""
    u = max([_U.get(d, 2.0 ** -53) for d in dtypes] or [2.0 ** -53])
    C = float(max_grad_norm) * (1.0 - 8.0 * u)
    sq = np.asarray(norm_sq, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        ub = np.ascontiguousarray(np.sqrt(sq) * (1.0 + 2.0 ** -50)).reshape(-1, 1)
    ub[~np.isfinite(ub)] = np.inf  # NaN (a NaN gradient) -> not finite -> factor 0
    factors = np.empty(ub.shape[0])
    _clip.clip_rows(ub, C, None, factors, None, None)
    return factors


# ------------------------------------------------------------------- the functional path
def per_sample_grads(module: nn.Module, loss_fn: Callable[..., torch.Tensor], *batch: Any,
                     params: Optional[Dict[str, torch.Tensor]] = None) -> Dict[str, torch.Tensor]:
    """Per-sample gradients of ``loss_fn(module(x_i), *rest_i)`` for every sample i of ``batch``
    (each a tensor with the batch on axis 0; the first is the model input), by ``torch.func``:
    ``vmap`` over ``grad`` of the whole model's ``functional_call`` on one sample.  For
    functional code, or to check the hooks.  ``loss_fn`` gets the output of one sample with a
    batch axis of 1 and must return the loss of that sample (a scalar).

    Returns ``{parameter name: (B, *shape) tensor}`` for the trainable parameters (``params``
    overrides the module's).  Give them to the private optimizer by setting
    ``p.grad_sample`` on each parameter (:meth:`DPOptimizer.step` clips and sums them).
    """
    validate_module(module)
    if params is None:
        params = {n: p.detach() for n, p in module.named_parameters() if p.requires_grad}
    buffers = {n: b.detach() for n, b in module.named_buffers()}

    def loss_one(p, *sample):
        s1 = tuple(t.unsqueeze(0) for t in sample)
        out = functional_call(module, (p, buffers), (s1[0],))
        return loss_fn(out, *s1[1:])

    with _hooks_off(module):
        return vmap(grad(loss_one), in_dims=(None,) + (0,) * len(batch), randomness="error")(params, *batch)
