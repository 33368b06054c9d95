"""The private optimizer: clip, sum, add noise once per logical step, then the user's optimizer.

Each ``step()`` (Abadi et al. 2016, "Deep Learning with Differential Privacy", Algorithm 1):

1. the captured physical batch's per-sample gradients are clipped to ``max_grad_norm`` C (flat:
   the norm over all parameters) and summed (:meth:`GradSampleModule.clipped_sum`; parameters
   whose ``grad_sample`` was set by the user -- the functional path -- join the same per-sample
   norm);
2. with ``signal_skip_step(True)`` (virtual batches) the sum is kept and the step ends there;
3. otherwise N(0, (z C)^2) noise is added to the sum of the logical batch, once, drawn by dpfast's
   sampler (``dpfast.random.add_normal_noise``: the 52-bit-abscissa ziggurat normal, all the
   parameters in one native fill, on the Philox4x32-10 stream of a 128-bit key drawn from the
   engine's generator; in secure mode on the words of the ``SecureRandom`` itself), the result is
   divided by the expected batch size q n when ``loss_reduction="mean"`` (as Opacus does),
   written to ``p.grad`` and the wrapped optimizer steps.

Per-layer clipping (``max_grad_norms``, one norm C_l per trainable parameter, Opacus's
``clipping="per_layer"``; McMahan, Andrew, Erlingsson, Chien, Mironov, Papernot, Kairouz 2018, "A
general approach to adding differential privacy to iterative training procedures", Sec. 3):
in step 1 each sample's gradient of each parameter l is clipped to its own C_l (factors per
(sample, parameter), the same safe rule at C_l), so the whole clipped per-sample gradient has norm
<= sqrt(sum_l C_l^2) =: C, and the noise of step 3 is N(0, (z C)^2) on every coordinate: the
same sensitivity, so the same event (q, z, T) as flat clipping at C.  ``per_group=True``: one
norm per parameter group (of those holding a trainable parameter), the group's parameters clipped
jointly (one factor per (sample, group)); the same argument with the groups as the layers.

Guarantees.  Each sample's clipped gradient has exact l2 norm <= C when rounded to the parameters'
dtype (factors from dpfast's safe rule, :func:`dpfast.torch.safe_factors`), so the clipped sum has
add/remove sensitivity C and the noise makes each logical step the Gaussian mechanism with noise
multiplier z; with Poisson sampling at rate q, the run of T steps is accounted as
``SelfComposed(PoissonSampled(q, Gaussian(z)), T)`` (Mironov, Talwar & Zhang 2019).  On CPU the
noise is added in place on the gradient's memory by the native sampler (float32: the float64
variate rounded once).  On CUDA the noise is drawn on the CPU by the same sampler and copied to the
device, where it is added by torch: the same values as on the CPU, but the clipped sums come from
torch's CUDA kernels, whose reduction order (and so the last bits) is not fixed -- runs are not
bit-reproducible on GPUs, and the floating-point caveats of continuous noise (Mironov 2012) apply
as on the CPU.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from dpfast._threads import CPUS
from dpfast.random import add_normal_noise
from dpfast.torch._grad_sample import (
    GradSampleModule,
    kept_samples,
    per_layer_factors,
    per_sample_norm_sq,
    safe_factors,
)

__all__ = ["DPOptimizer"]


_GS = "grad_sample"  # the attribute of a parameter holding per-sample gradients set by the user


def _gs(p: nn.Parameter) -> Any:
    """The per-sample gradients a user set on ``p`` (the functional path), or None."""
    return getattr(p, _GS, None)


def _hypot_up(norms: Sequence[float]) -> float:
    """sqrt(sum c^2) rounded up (``math.hypot`` within 1 ulp, plus 2 ulps): >= the exact value."""
    return math.nextafter(math.nextafter(math.hypot(*norms), math.inf), math.inf) if norms else 0.0


class DPOptimizer(torch.optim.Optimizer):
    """Wrap a ``torch.optim.Optimizer`` so that ``step()`` is a DP-SGD step (see the module
    docstring).  Built by :meth:`PrivacyEngine.make_private`; its ``param_groups``, ``state``,
    ``state_dict`` and ``load_state_dict`` are the wrapped optimizer's, so LR schedulers work.

    ``steps`` counts the logical steps taken; ``planned_steps`` (None: unbounded) is the plan the
    run was charged for: a step beyond it raises ``RuntimeError`` before any noise is drawn.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, *, noise_multiplier: float, max_grad_norm: float,
                 expected_batch_size: float, loss_reduction: str = "mean", generator: np.random.Generator,
                 grad_sample_module: Optional[GradSampleModule] = None, planned_steps: Optional[int] = None,
                 on_step: Optional[Callable[[], None]] = None, distributed: bool = False,
                 max_grad_norms: Optional[Sequence[float]] = None, per_group: bool = False) -> None:
        # (no Optimizer.__init__: the wrapped optimizer owns the parameter groups and the state)
        self.original_optimizer = optimizer
        self.noise_multiplier = float(noise_multiplier)
        self.max_grad_norm = float(max_grad_norm)
        # per-layer clipping: one norm per trainable parameter, in the order of ``params``
        # (per_group: one per parameter group holding a trainable parameter, clipped jointly); the
        # noise is then calibrated to max_grad_norm = sqrt(sum C_l^2) (PrivacyEngine checks it)
        self.max_grad_norms: Optional[List[float]] = None
        self._clipping = "flat"
        if max_grad_norms is not None:
            self._clipping = "per_group" if per_group else "per_layer"
            self.max_grad_norms = [float(c) for c in max_grad_norms]
            units = len(self._units())
            if len(self.max_grad_norms) != units:
                raise ValueError(f"max_grad_norms has {len(self.max_grad_norms)} entries for {units} "
                                 f"{'parameter groups' if per_group else 'trainable parameters'}")
            if not self.max_grad_norm >= _hypot_up(self.max_grad_norms):
                raise ValueError("max_grad_norm must be >= sqrt(sum max_grad_norms^2) (the noise's sensitivity)")
            # each parameter keeps the norm (and unit) it has now: matching them by position at every
            # step would move the norms onto other parameters when one is frozen or added later
            self._unit_of: Dict[nn.Parameter, tuple] = {
                p: (k, c) for k, (unit, c) in enumerate(zip(self._units(), self.max_grad_norms)) for p in unit}
        self.expected_batch_size = float(expected_batch_size)
        self.loss_reduction = loss_reduction
        self.generator = generator
        self.grad_sample_module = grad_sample_module
        self.planned_steps = planned_steps
        self.steps = 0
        self._on_step = on_step
        # DistributedDataParallel-style training (torch.distributed initialised, e.g. gloo on CPU):
        # each rank clips its own share of the Poisson batch; rank 0 alone adds the noise; the noisy
        # sums are all-reduced, so every rank takes the same step with the noise added once
        self.distributed = bool(distributed)
        self._skip = False
        self._summed: Dict[nn.Parameter, torch.Tensor] = {}

    # ------------------------------------------------------------ the Optimizer surface
    @property
    def param_groups(self):
        return self.original_optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value):
        self.original_optimizer.param_groups = value

    @property
    def state(self):
        return self.original_optimizer.state

    @state.setter
    def state(self, value):
        self.original_optimizer.state = value

    @property
    def defaults(self):
        return self.original_optimizer.defaults

    @defaults.setter
    def defaults(self, value):
        self.original_optimizer.defaults = value

    def state_dict(self):
        return self.original_optimizer.state_dict()

    def load_state_dict(self, state_dict) -> None:
        self.original_optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group) -> None:
        raise RuntimeError("add a parameter group before make_private: the privacy engine hooks the module once")

    def __repr__(self) -> str:
        return f"DPOptimizer({self.original_optimizer!r}, noise_multiplier={self.noise_multiplier}, " \
               f"max_grad_norm={self.max_grad_norm})"

    @property
    def params(self) -> List[nn.Parameter]:
        return [p for g in self.param_groups for p in g["params"] if p.requires_grad]

    # ------------------------------------------------------------------- DP-SGD step
    def signal_skip_step(self, do_skip: bool = True) -> None:
        """The next ``step()`` only clips and accumulates (a physical batch that is not the last
        of its logical batch); :class:`BatchMemoryManager` calls it."""
        self._skip = bool(do_skip)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear ``p.grad``, ``p.grad_sample`` and the captured batch; the clipped sum of a
        logical batch in progress (virtual batches) is kept."""
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:  # (as torch.optim.Optimizer.zero_grad)
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()
            if _gs(p) is not None:
                setattr(p, _GS, None)
        if self.grad_sample_module is not None:
            self.grad_sample_module.clear()

    @property
    def clipping(self) -> str:
        """``"flat"``, ``"per_layer"`` or ``"per_group"``."""
        return self._clipping

    def _units(self) -> List[List[nn.Parameter]]:
        """The clipping units: each trainable parameter (per-layer clipping), or the trainable
        parameters of each parameter group holding one (per-group clipping)."""
        if self._clipping == "per_group":
            units = [[p for p in g["params"] if p.requires_grad] for g in self.param_groups]
            return [u for u in units if u]
        return [[p] for p in self.params]

    def _per_layer(self):
        """({parameter: its unit's norm}, {parameter: its unit's index} or None), or (None, None):
        the norms and units of the parameters trainable now, as they were at ``make_private`` (a
        parameter frozen since then drops out; one trainable since then, or added to the wrapped
        optimizer, has no norm: ``RuntimeError``, before anything is drawn)."""
        if self.max_grad_norms is None:
            return None, None
        norms, groups = {}, {}
        for p in self.params:
            unit = self._unit_of.get(p)
            if unit is None:
                raise RuntimeError(
                    f"clipping={self._clipping!r}: a parameter became trainable (or joined the optimizer) after "
                    "make_private, and has no max_grad_norm; freeze it, or make_private anew with a norm for it")
            groups[p], norms[p] = unit
        return norms, (groups if self._clipping == "per_group" else None)

    def _accumulate(self) -> None:
        per_layer, groups = self._per_layer()
        gsm = self.grad_sample_module
        sums, B = ({}, 0) if gsm is None else \
            gsm.clipped_sum(self.max_grad_norm) if per_layer is None else \
            gsm.clipped_sum(self.max_grad_norm, per_layer, groups)
        manual = [p for p in self.params if _gs(p) is not None]
        if manual:
            if sums:
                raise RuntimeError("p.grad_sample is set on some parameters while the module's hooks captured a "
                                   "batch: use one path (make_private(grad_sample_mode='functional') for "
                                   "per-sample gradients you compute yourself)")
            Bs = {int(_gs(p).shape[0]) for p in manual}
            if len(Bs) != 1:
                raise RuntimeError(f"p.grad_sample of different batch sizes: {sorted(Bs)}")
            B = Bs.pop()
            for p in manual:
                if tuple(_gs(p).shape[1:]) != tuple(p.shape):
                    raise RuntimeError(f"p.grad_sample has shape {tuple(_gs(p).shape)}, expected "
                                       f"(B, {', '.join(map(str, p.shape))})")
            if B and per_layer is not None:
                # per-layer clipping: each parameter's per-sample gradient to its own C_p
                fs, rows = per_layer_factors({p: per_sample_norm_sq(_gs(p)) for p in manual}, per_layer,
                                             {p: [_gs(p).dtype, p.dtype] for p in manual}, B, groups)
                for p in manual:
                    g = _gs(p).detach()
                    if rows is not None:
                        g = g.index_select(0, torch.from_numpy(rows).to(g.device))
                    sums[p] = torch.tensordot(torch.from_numpy(fs[p]).to(g.device, g.dtype), g, dims=1)
            elif B:
                sq = np.zeros(B)
                for p in manual:
                    sq += per_sample_norm_sq(_gs(p))
                f = safe_factors(sq, self.max_grad_norm, [_gs(p).dtype for p in manual])
                # a sample whose factor is 0 (a non-finite gradient) is left out of the sum (0 * NaN
                # would turn the whole sum, so the released parameters, into NaN), as
                # GradSampleModule.clipped_sum does
                rows, f = kept_samples(f)
                for p in manual:
                    g = _gs(p).detach()
                    if rows is not None:
                        g = g.index_select(0, torch.from_numpy(rows).to(g.device))
                    sums[p] = torch.tensordot(torch.from_numpy(f).to(g.device, g.dtype), g, dims=1)
        if not B and not manual:
            # nothing captured (model.eval(), torch.no_grad(), or no backward since the last step):
            # a non-zero p.grad is then autograd's ordinary, unclipped gradient, which the step
            # would silently replace with noise alone (an empty Poisson batch leaves every p.grad
            # None or zero)
            stray = [p for p in self.params if p.grad is not None and bool(p.grad.ne(0).any())]
            if stray:
                raise RuntimeError(
                    f"{len(stray)} parameter(s) have a gradient but no per-sample gradient was captured: the "
                    "backward ran with the model in eval() mode or outside the hooked modules; call model.train() "
                    "before the forward pass (evaluate under torch.no_grad(), without optimizer.step())")
        if B and not manual:
            # a parameter that autograd reached but no hooked call covered (used outside its module's
            # forward, or a module whose output holds no tensor): its per-sample gradient is unknown.
            # (Its p.grad is never released -- every p.grad is replaced by the noisy sum -- but its
            # training would silently be noise only.)
            missed = [p for p in self.params if p not in sums and p.grad is not None and bool(p.grad.ne(0).any())]
            if missed:
                raise RuntimeError(
                    f"{len(missed)} parameter(s) received a gradient outside the hooked module calls (a parameter "
                    "used outside its own module's forward, or a module whose output is not a tensor or a "
                    "tuple of tensors): dpfast.torch cannot bound their per-sample gradients; use them inside "
                    "their module, or compute per-sample gradients with per_sample_grads")
        for p, s in sums.items():
            s = s.to(p.dtype).reshape(p.shape)
            self._summed[p] = self._summed[p] + s if p in self._summed else s
        for p in manual:
            setattr(p, _GS, None)
        if self.grad_sample_module is not None:
            self.grad_sample_module.clear()

    def _noisy_grads(self) -> None:
        std = self.noise_multiplier * self.max_grad_norm
        if self.distributed and torch.distributed.get_rank() != 0:
            std = 0.0  # the noise is rank 0's, added once to the sum of all ranks' clipped sums
        div = self.expected_batch_size if self.loss_reduction == "mean" else 1.0
        summed = self._summed
        grads = []
        for p in self.params:
            s = summed.get(p)
            if s is None:
                s = torch.zeros_like(p, memory_format=torch.contiguous_format)
            grads.append((p, s.contiguous()))
        if std > 0:
            # all the noise of the step in one native call (dpfast.random.add_normal_noise): CPU
            # float sums get it in place on their memory; other tensors through CPU buffers
            arrays, moved = [], []
            for j, (p, s) in enumerate(grads):
                if s.device.type == "cpu" and s.dtype in (torch.float32, torch.float64):
                    arrays.append(s.view(-1).numpy())
                else:
                    buf = np.zeros(s.numel(), dtype=np.float64 if s.dtype == torch.float64 else np.float32)
                    arrays.append(buf)
                    moved.append((j, buf))
            # the division by the expected batch size is fused into the fill (a product by
            # fl(1 / (q n)) in double, rounded once) when every sum is filled in place and no all-reduce comes between
            fuse = not moved and not self.distributed
            # helper threads only on cores torch's intra-op pool leaves free: right after backward
            # its OpenMP workers spin on theirs, and a helper there competes with them (the MLP at
            # 2 threads on 2 cores: no gain).  The values do not depend on the thread count.
            free = max(1, CPUS - torch.get_num_threads() + 1)
            add_normal_noise(self.generator, arrays, std, max_threads=free, divisor=div if fuse else 1.0)
            if fuse:
                div = 1.0
            for j, buf in moved:
                p, s = grads[j]
                grads[j] = (p, s + torch.from_numpy(buf).to(s.device, s.dtype).view_as(s))
        for p, s in grads:
            if self.distributed:
                torch.distributed.all_reduce(s, op=torch.distributed.ReduceOp.SUM)
            if div != 1.0:
                s.div_(div)  # (s is the engine's own tensor: the clipped sum or fresh zeros)
            p.grad = s.view_as(p)
        self._summed = {}

    @torch.no_grad()
    def _privatize(self) -> bool:
        """Clip and accumulate the captured batch; on the last physical batch of a logical batch,
        add the noise and write ``p.grad``.  Returns whether the wrapped optimizer should step."""
        if not self._skip and self.planned_steps is not None and self.steps >= self.planned_steps:
            raise RuntimeError(f"step {self.steps + 1} is beyond the {self.planned_steps} steps the run was planned "
                               "and charged for (make_private's epochs/steps); nothing was drawn")
        params = self.params
        if len({id(p) for p in params}) != len(params):
            # make_private refuses this; a parameter appended to param_groups[i]["params"] afterwards
            # (torch's add_param_group refuses it, a direct append does not) would get its clipped sum
            # twice with the noise added twice to the same tensor: sensitivity 2 C against noise
            # sqrt(2) z C, and (mean reduction) divided twice (red team 32)
            raise RuntimeError("a parameter is listed twice in the optimizer's param_groups (added after "
                               "make_private): its private gradient would be applied twice and noised twice; "
                               "list each parameter once; nothing was drawn")
        self._accumulate()
        if self._skip:
            self._skip = False
            for p in self.params:
                p.grad = None
            return False
        self._noisy_grads()
        self.steps += 1
        if self._on_step is not None:
            self._on_step()
        return True

    def step(self, closure: Optional[Callable[[], float]] = None):
        """One DP-SGD step (or, after ``signal_skip_step``, one accumulation); ``closure``
        re-evaluates the loss (called once, with gradients enabled, before the step)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self._privatize():
            self.original_optimizer.step()
        return loss

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise on the clipped sum: noise_multiplier * max_grad_norm."""
        return self.noise_multiplier * self.max_grad_norm
