"""``PrivacyEngine``: Opacus's names, dpfast's accountants, budget and samplers.

``make_private`` follows dpfast's release spine: validate every public parameter (the module's
layers included) -> calibrate (``make_private_with_epsilon``: ``dpfast.accounting``'s
``calibrate_noise_multiplier`` on the run's event) -> the event of the planned run
``SelfComposed(PoissonSampled(q, Gaussian(z)), T)`` (q = batch_size / n; T = epochs *
steps_per_epoch; add/remove neighbours, Mironov, Talwar & Zhang 2019; q = 1 is the plain Gaussian)
-> charge ``budget=`` with it, once, before any draw -> the training loop draws (Poisson batches,
noise).  ``get_epsilon(delta)`` composes the same event for the steps taken so far, with the
engine's accountant ("pld": certified PLD, "rdp").
"""
from __future__ import annotations

import copy
import math
import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

import dpfast.accounting as acc
from dpfast import budget as _budget
from dpfast.random import RandomLike, SecureRandom, check_random_state, is_secure
from dpfast.torch._data import DPDataLoader
from dpfast.torch._grad_sample import GradSampleModule, hooked_by, validate_module
from dpfast.torch._optimizer import DPOptimizer, _hypot_up

__all__ = ["PrivacyEngine"]

_ACCOUNTANTS = ("pld", "rdp")
_STATE_FORMAT = 1
_NORMAL_BOUND = 40.0  # |N(0,1)| draws of the package's sampler stay below this
_DEVICES = ("cpu", "cuda")
_CLIPPING = ("flat", "per_layer", "per_group")
_NOT_IMPLEMENTED_CLIPPING = ("adaptive",)  # Opacus's other clipping mode: NotImplementedError


def _real(v, name: str, *, positive: bool = False, allow_zero: bool = True) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
    try:
        x = float(v)
    except OverflowError:
        raise ValueError(f"{name} is too large for a double: {v!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {v!r}")
    if positive and not (x > 0 or (allow_zero and x == 0)):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {v!r}")
    return x


def _count(v, name: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if int(v) < 1 or int(v) > 2**40:
        raise ValueError(f"{name} must be in [1, 2**40], got {v!r}")
    return int(v)


def _check_distributed(distributed) -> None:
    if not isinstance(distributed, (bool, np.bool_)):
        raise TypeError(f"distributed must be a bool, got {type(distributed).__name__}")
    if distributed and not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        raise ValueError("distributed=True needs torch.distributed initialised (torch.distributed.init_process_group)")


def _check_devices(module: nn.Module) -> None:
    """The parameters live on the CPU or on CUDA devices: the per-sample norms are computed in
    float64 on the parameters' device (ghost norms) or copied to the CPU, and the noise is drawn on
    the CPU and copied; a device without float64 (Apple's MPS) or without data (meta) would fail
    in the first step, after the charge."""
    bad = sorted({p.device.type for p in module.parameters()} - set(_DEVICES))
    if bad:
        raise ValueError(f"dpfast.torch trains modules on {' and '.join(_DEVICES)} devices; the module has parameters "
                         f"on {', '.join(bad)} (the per-sample norms need float64 on the parameters' device and the "
                         "noise is copied to it)")


def _clipping_norms(clipping, max_grad_norm, optimizer) -> Tuple[float, Optional[List[float]]]:
    """(C, per-layer norms or None) from Opacus's ``clipping``/``max_grad_norm`` pair.

    ``"flat"``: one real C > 0.  ``"per_layer"``: a list (or tuple, or 1-D array) of reals C_l > 0,
    one per trainable parameter of the optimizer (Opacus's unit: ``p.requires_grad`` over its
    ``param_groups``, in that order); ``"per_group"`` (dpfast's): one per parameter group of the
    optimizer that holds a trainable parameter, its parameters clipped jointly.  The noise's
    sensitivity is then C = sqrt(sum C_l^2) (rounded up).  A single real with ``"per_layer"`` is
    refused, as Opacus does (it needs a list): the same norm on every parameter is ``[C] * n``,
    whose noise scale is C sqrt(n), not C."""
    if not isinstance(clipping, str) or clipping not in _CLIPPING + _NOT_IMPLEMENTED_CLIPPING:
        raise ValueError(f"clipping must be one of {_CLIPPING}, got {clipping!r}")
    if clipping in _NOT_IMPLEMENTED_CLIPPING:
        raise NotImplementedError(
            f"clipping={clipping!r} (Andrew et al. 2021, adaptive clipping) is not implemented in dpfast.torch; use "
            "clipping='flat' (one max_grad_norm, the norm over all parameters) or clipping='per_layer' (a list, one "
            "norm per trainable parameter)")
    seq = isinstance(max_grad_norm, (list, tuple)) or (isinstance(max_grad_norm, np.ndarray) and
                                                       max_grad_norm.ndim == 1)
    if clipping == "flat":
        if seq:
            raise ValueError("max_grad_norm is a list (one norm per parameter): that is per-layer clipping, "
                             "clipping='per_layer'; flat clipping takes one max_grad_norm, the norm over all "
                             "parameters")
        return _real(max_grad_norm, "max_grad_norm", positive=True, allow_zero=False), None
    if clipping == "per_group":
        n_params = sum(1 for g in optimizer.param_groups if any(p.requires_grad for p in g["params"]))
        unit = "parameter group of the optimizer holding a trainable parameter"
        units = "parameter groups with a trainable parameter (one norm per group, clipped jointly)"
    else:
        n_params = sum(1 for g in optimizer.param_groups for p in g["params"] if p.requires_grad)
        unit = "trainable parameter of the optimizer (in its param_groups' order)"
        units = "trainable parameters (one norm per parameter tensor, in the param_groups' order, as Opacus)"
    if not seq:
        raise TypeError(f"clipping={clipping!r} takes max_grad_norm as a list of {n_params} norms, one per {unit}, "
                        f"got {type(max_grad_norm).__name__}; the same norm C on every one is [C] * {n_params} (noise "
                        f"scale C sqrt({n_params}))")
    norms = [_real(c, f"max_grad_norm[{i}]", positive=True, allow_zero=False) for i, c in enumerate(max_grad_norm)]
    if len(norms) != n_params:
        raise ValueError(f"clipping={clipping!r}: max_grad_norm has {len(norms)} norms, the optimizer {n_params} "
                         f"{units}")
    C = _hypot_up(norms)
    if not math.isfinite(C):
        raise ValueError(f"clipping={clipping!r}: sqrt(sum max_grad_norm^2) overflows a double")
    return C, norms


def _step_event(z: float, q: float):
    g = acc.Gaussian(z)
    return g if q >= 1.0 else acc.PoissonSampled(q, g)


class PrivacyEngine:
    """DP-SGD for any PyTorch module, with Opacus's names (``make_private``,
    ``make_private_with_epsilon``, ``get_epsilon``), dpfast's accountants and budget.

    Parameters
    ----------
    accountant : {"pld", "rdp"}, default "pld"
        The accountant of ``get_epsilon`` and of the calibration (Opacus's "prv" is dpfast's
        certified "pld"; "gdp" is not offered: it is not an upper bound).
    secure_mode : bool, default False
        Draw the Poisson batches and the noise from :class:`dpfast.random.SecureRandom` (ChaCha20
        keyed from ``os.urandom``).  Its state cannot be saved: a resumed secure run draws afresh
        (same privacy, not the same bits).
    rng : None, int, numpy.random.Generator or SecureRandom
        dpfast's ``rng=`` convention: a seed makes the run reproducible bit for bit on the CPU.
        The sampler and the noise use two independent streams spawned from it.

    Example
    -------
    >>> engine = PrivacyEngine(rng=0)                                  # doctest: +SKIP
    >>> model, optimizer, loader = engine.make_private(
    ...     module=model, optimizer=optimizer, data_loader=loader,
    ...     noise_multiplier=1.1, max_grad_norm=1.0, epochs=3)           # doctest: +SKIP
    >>> engine.get_epsilon(1e-5)                                       # doctest: +SKIP
    """

    def __init__(self, accountant: str = "pld", secure_mode: bool = False, rng: RandomLike = None) -> None:
        if not isinstance(accountant, str) or accountant not in _ACCOUNTANTS:
            hint = " (dpfast's 'pld' is the certified counterpart of Opacus's 'prv')" if accountant == "prv" else ""
            raise ValueError(f"accountant must be one of {_ACCOUNTANTS}, got {accountant!r}{hint}")
        if not isinstance(secure_mode, (bool, np.bool_)):
            raise TypeError(f"secure_mode must be a bool, got {type(secure_mode).__name__}")
        if secure_mode and rng is not None and not isinstance(rng, SecureRandom):
            raise ValueError("secure_mode=True draws from a fresh SecureRandom: leave rng=None (or pass a SecureRandom)")
        self.accountant_name = accountant
        self.secure_mode = bool(secure_mode) or isinstance(rng, SecureRandom)
        # the package's rng= convention (TypeError/ValueError here, before anything is charged)
        self._gen = (rng if isinstance(rng, SecureRandom) else None) if self.secure_mode else check_random_state(rng)
        self.noise_multiplier: Optional[float] = None
        self.max_grad_norm: Optional[float] = None
        self.max_grad_norms: Optional[List[float]] = None  # per-layer clipping: one norm per parameter
        self.clipping: Optional[str] = None
        self._clipping_mode = "flat"
        self.sample_rate: Optional[float] = None
        self.planned_steps: Optional[int] = None
        self.steps_per_epoch: Optional[int] = None
        self.optimizer: Optional[DPOptimizer] = None
        self.data_loader: Optional[DPDataLoader] = None
        self.module: Optional[GradSampleModule] = None
        self.event_: Optional[acc.DpEvent] = None

    # ------------------------------------------------------------------ validation
    def _check_run(self, module, optimizer, data_loader, max_grad_norm, poisson_sampling, loss_reduction,
                   clipping, grad_sample_mode, batch_first, noise_generator
                   ) -> Tuple[int, int, float, int, Optional[List[float]]]:
        if self.optimizer is not None:
            raise RuntimeError("this PrivacyEngine already runs a training; create one engine per run")
        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        if isinstance(module, GradSampleModule):
            raise ValueError("module is already wrapped by a privacy engine")
        if hooked_by(module) is not None:
            # two engines' hooks on one module capture nothing (red team 32: every step of the new run
            # was noise only, silently)
            raise ValueError("module is still hooked by a previous make_private (its GradSampleModule): call "
                             "remove_hooks() on that wrapped module first, then make_private anew")
        if isinstance(module, nn.parallel.DistributedDataParallel):
            raise ValueError("pass the plain module with distributed=True, not a DistributedDataParallel wrapper: "
                             "the private optimizer all-reduces the clipped, noised sums itself")
        validate_module(module)
        _check_devices(module)
        if not isinstance(optimizer, torch.optim.Optimizer) or isinstance(optimizer, DPOptimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
        own = {id(p) for p in module.parameters()}
        seen = set()
        for g in optimizer.param_groups:
            for p in g["params"]:
                if id(p) not in own:
                    raise ValueError("the optimizer holds a parameter that is not one of the module's: its gradient "
                                     "would not be clipped")
                if id(p) in seen:
                    raise ValueError("the optimizer holds a parameter twice: its private gradient would be noised "
                                     "and divided by the batch size twice (and its clipping norm counted twice); "
                                     "list each parameter once")
                seen.add(id(p))
        if not any(p.requires_grad for g in optimizer.param_groups for p in g["params"]):
            raise ValueError("the optimizer has no parameter that requires grad")
        if not isinstance(data_loader, DataLoader):
            raise TypeError(f"data_loader must be a torch.utils.data.DataLoader, got {type(data_loader).__name__}")
        if isinstance(data_loader.dataset, IterableDataset):
            raise ValueError("data_loader's dataset is an IterableDataset: Poisson sampling needs a map-style dataset "
                             "(indexable, with len())")
        bsamp = data_loader.batch_sampler
        if bsamp is None:
            raise ValueError("data_loader needs a batch_size (the expected Poisson batch size)")
        if type(bsamp) is not BatchSampler or type(bsamp.sampler) not in (SequentialSampler, RandomSampler):
            what = type(bsamp.sampler if type(bsamp) is BatchSampler else bsamp).__name__
            raise ValueError(f"data_loader's {what} would be replaced by Poisson sampling over the whole dataset: a "
                             "sampler that selects or weights examples (SubsetRandomSampler, WeightedRandomSampler, "
                             "DistributedSampler, a custom batch_sampler) would be silently ignored; give the examples "
                             "to train on as the dataset (torch.utils.data.Subset) and a batch_size (shuffle or not)")
        try:
            n = len(data_loader.dataset)  # type: ignore[arg-type]
        except TypeError:
            raise ValueError("data_loader's dataset has no len(): Poisson sampling needs a map-style dataset") from None
        if n < 1:
            raise ValueError("data_loader's dataset is empty")
        bs = data_loader.batch_size
        if bs is None:
            bs = getattr(data_loader.batch_sampler, "batch_size", None)
        if not isinstance(bs, int) or bs < 1:
            raise ValueError("data_loader needs a batch_size (the expected Poisson batch size)")
        bs = min(bs, n)
        # per-layer clipping at norms C_l bounds the whole gradient's norm by C = sqrt(sum C_l^2): the
        # sensitivity of flat clipping at C, so, at the same z, the same event (McMahan et al. 2018)
        C, norms = _clipping_norms(clipping, max_grad_norm, optimizer)
        self._clipping_mode = clipping
        if poisson_sampling is not True:
            raise ValueError("dpfast.torch accounts Poisson sampling only (poisson_sampling=True): shuffled "
                             "fixed batches are not covered by the DP-SGD analysis it reports (Chua et al. 2024, "
                             "'How private are DP-SGD implementations?')")
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        if grad_sample_mode not in ("hooks", "functional"):
            hint = (" (Opacus's 'ghost': pass 'hooks', which uses ghost norms wherever a layer has them)"
                    if grad_sample_mode in ("ghost", "ew") else "")
            raise ValueError(f"grad_sample_mode must be 'hooks' or 'functional', got {grad_sample_mode!r}{hint}")
        if batch_first is not True:
            raise ValueError("batch_first must be True: dpfast.torch needs the batch on axis 0")
        if noise_generator is not None:
            raise ValueError("noise_generator (a torch.Generator) is not used: dpfast draws the noise with its own "
                             "samplers; pass rng= (a seed or numpy Generator) or secure_mode=True to PrivacyEngine")
        spe = -(-n // bs)
        return n, bs, C, spe, norms

    def _plan(self, epochs, steps, spe) -> Optional[int]:
        if epochs is not None and steps is not None:
            raise ValueError("give epochs or steps, not both")
        if epochs is not None:
            e = _count(epochs, "epochs")
            if e > 2**40 // spe:
                raise ValueError("epochs * steps_per_epoch exceeds 2**40 steps")
            return e * spe
        if steps is not None:
            return _count(steps, "steps")
        return None

    # ------------------------------------------------------------------ make_private
    def make_private(self, *, module: nn.Module, optimizer: torch.optim.Optimizer, data_loader: DataLoader,
                     noise_multiplier: float, max_grad_norm: Union[float, Sequence[float]],
                     criterion: Any = None,
                     batch_first: bool = True, loss_reduction: str = "mean", poisson_sampling: bool = True,
                     clipping: str = "flat", noise_generator=None, grad_sample_mode: str = "hooks",
                     epochs: Optional[int] = None, steps: Optional[int] = None, budget=None,
                     distributed: bool = False, **kwargs) -> Tuple[nn.Module, DPOptimizer, DPDataLoader]:
        """Make a training run private; returns ``(module, optimizer, data_loader)`` as Opacus does.

        ``module`` comes back wrapped in a :class:`GradSampleModule` (hooks; its ``state_dict`` is
        the original module's), ``optimizer`` as a :class:`DPOptimizer` and ``data_loader`` as a
        :class:`DPDataLoader` of Poisson batches at rate q = batch_size / n, ``ceil(n /
        batch_size)`` of them per epoch.  ``epochs`` or ``steps`` fixes the plan: the run's event
        (all planned steps) is charged to ``budget`` (or the ``with budget:`` default) now, once,
        before anything is drawn, and a step beyond the plan raises.  A budget needs a plan.
        ``grad_sample_mode="functional"``: no hooks; set ``p.grad_sample`` yourself (see
        :func:`per_sample_grads`).  ``criterion`` is accepted for Opacus compatibility and unused.

        ``clipping="per_layer"`` (Opacus's name): ``max_grad_norm`` is a list of norms C_l, one
        per trainable parameter of the optimizer (``p.requires_grad`` over its ``param_groups``, in
        that order: Opacus's unit, a weight and its bias are two entries); each sample's gradient
        of parameter l is clipped to C_l (McMahan, Andrew, Erlingsson, Chien, Mironov, Papernot &
        Kairouz 2018, "A general approach to adding differential privacy to iterative training
        procedures", Sec. 3, per-layer clipping), so the whole clipped per-sample gradient has
        norm <= C = sqrt(sum_l C_l^2) and the noise N(0, (z C)^2) on every coordinate gives the
        same event (q, z, T) -- the same epsilon -- as flat clipping at C; ``max_grad_norm``
        (the attribute) is then that C (rounded up), ``max_grad_norms`` the list.  A single
        number with ``"per_layer"`` is refused (``TypeError``, as Opacus needs a list): the same
        norm on every parameter is ``[C] * n``, whose noise scale is C sqrt(n).  Layers whose fast
        path has per-parameter norms (Linear, Embedding, LayerNorm, and convolutions with one
        trainable parameter) keep it; the others (a convolution with a bias) compute per-sample
        gradients by ``torch.func``.  ``clipping="per_group"`` (dpfast's; McMahan et al.'s
        per-layer clipping when each layer is a group): one norm per parameter group of the
        optimizer (those holding a trainable parameter), each group's parameters clipped jointly
        to it -- the same sensitivity sqrt(sum_g C_g^2); a fast layer whose parameters are all in
        one group (a convolution with its bias) keeps its fast path.  ``clipping="adaptive"``
        raises ``NotImplementedError``.

        ``distributed=True`` (``torch.distributed`` initialised, e.g. the gloo backend on CPUs; pass
        the plain module, not a ``DistributedDataParallel`` wrapper): rank 0's parameters and buffers
        are broadcast, each rank Poisson-samples its shard of the dataset (indices rank, rank + W,
        ...) at rate q, clips its share, rank 0 adds the noise, and the sums are all-reduced, so
        that every logical step adds the noise once and all ranks take the same step.  Every
        process charges its own ``budget`` with the run's event.
        """
        if kwargs:
            raise TypeError(f"make_private() got unexpected keyword arguments: {sorted(kwargs)}")
        n, bs, C, spe, norms = self._check_run(module, optimizer, data_loader, max_grad_norm, poisson_sampling,
                                        loss_reduction, clipping, grad_sample_mode, batch_first, noise_generator)
        z = _real(noise_multiplier, "noise_multiplier", positive=True)
        plan = self._plan(epochs, steps, spe)
        _check_distributed(distributed)
        return self._setup(module, optimizer, data_loader, z, C, n, bs, spe, plan, loss_reduction,
                           grad_sample_mode, budget, distributed, norms)

    def make_private_with_epsilon(self, *, module: nn.Module, optimizer: torch.optim.Optimizer,
                                  data_loader: DataLoader, target_epsilon: float, target_delta: float, epochs: int,
                                  max_grad_norm: Union[float, Sequence[float]], criterion: Any = None,
                                  batch_first: bool = True,
                                  loss_reduction: str = "mean", poisson_sampling: bool = True,
                                  clipping: str = "flat", noise_generator=None, grad_sample_mode: str = "hooks",
                                  budget=None, distributed: bool = False,
                                  **kwargs) -> Tuple[nn.Module, DPOptimizer, DPDataLoader]:
        """As :meth:`make_private`, with the noise multiplier calibrated so that ``epochs`` epochs are
        (target_epsilon, target_delta)-DP under the engine's accountant
        (``dpfast.accounting.calibrate_noise_multiplier`` on the run's event; the returned multiplier's
        epsilon was verified <= target_epsilon).  The plan is ``epochs`` epochs."""
        if kwargs:
            raise TypeError(f"make_private_with_epsilon() got unexpected keyword arguments: {sorted(kwargs)}")
        n, bs, C, spe, norms = self._check_run(module, optimizer, data_loader, max_grad_norm, poisson_sampling,
                                        loss_reduction, clipping, grad_sample_mode, batch_first, noise_generator)
        eps = _real(target_epsilon, "target_epsilon", positive=True, allow_zero=False)
        delta = _real(target_delta, "target_delta", positive=True, allow_zero=False)
        if not delta < 1:
            raise ValueError(f"target_delta must be in (0, 1), got {target_delta!r}")
        plan = self._plan(epochs, None, spe)
        assert plan is not None
        _check_distributed(distributed)
        _budget.check_scope(budget)
        z = float(acc.calibrate_noise_multiplier(eps, delta, bs / n, plan, accountant=self.accountant_name))
        return self._setup(module, optimizer, data_loader, z, C, n, bs, spe, plan, loss_reduction,
                           grad_sample_mode, budget, distributed, norms)

    def _setup(self, module, optimizer, data_loader, z, C, n, bs, spe, plan, loss_reduction, grad_sample_mode,
               budget, distributed=False, norms=None):
        q = bs / n
        if not z * C * _NORMAL_BOUND <= float(torch.finfo(torch.float32).max):
            raise ValueError(f"noise_multiplier * max_grad_norm = {z!r} * {C!r} is too large: the noise overflows")
        b = _budget.resolve(budget)
        if b is not None and plan is None:
            raise ValueError("a privacy budget is charged for the whole run before the first step: give epochs= or "
                             "steps= (the plan)")
        if z == 0 and b is not None:
            raise ValueError("noise_multiplier=0 releases the gradients without noise (epsilon = inf): it cannot be "
                             "charged to a privacy budget")
        event = None if (z == 0 or plan is None) else acc.SelfComposed(_step_event(z, q), plan)
        rank, world = (torch.distributed.get_rank(), torch.distributed.get_world_size()) if distributed else (0, 1)
        if distributed:
            # every rank clips its share at its own C and divides by its own q n, and rank 0 alone adds
            # noise at its own z: a rank configured otherwise (another C, dataset, batch size or plan) would
            # void the accounted sensitivity; checked collectively, before the charge
            mine = torch.tensor([n, bs, C, z, -1 if plan is None else plan, -1 if norms is None else len(norms),
                                 _CLIPPING.index(self._clipping_mode)], dtype=torch.float64)
            lo, hi = mine.clone(), mine.clone()
            torch.distributed.all_reduce(lo, op=torch.distributed.ReduceOp.MIN)
            torch.distributed.all_reduce(hi, op=torch.distributed.ReduceOp.MAX)
            bad = []
            if torch.equal(lo, hi) and norms:  # (every rank has as many per-layer norms: compare them)
                lo_l = torch.tensor(norms, dtype=torch.float64)
                hi_l = lo_l.clone()
                torch.distributed.all_reduce(lo_l, op=torch.distributed.ReduceOp.MIN)
                torch.distributed.all_reduce(hi_l, op=torch.distributed.ReduceOp.MAX)
                if not torch.equal(lo_l, hi_l):
                    bad = ["the per-layer max_grad_norm"]
            if bad or not torch.equal(lo, hi):
                names = ("dataset length", "batch_size", "max_grad_norm", "noise_multiplier", "plan",
                         "clipping (number of per-layer norms)", "clipping")
                bad += [k for k, a, b in zip(names, lo.tolist(), hi.tolist()) if a != b]
                raise ValueError(f"the ranks of the distributed run disagree on {', '.join(bad)}: every rank must "
                                 "make_private with the same dataset and parameters")
        # the one charge, before any draw
        if event is not None:
            _budget.charge(b, event, label="dpfast.torch.PrivacyEngine")
        if self.secure_mode:
            gen_noise = self._gen if self._gen is not None else SecureRandom()
            gen_sample: np.random.Generator = SecureRandom()
        else:
            gen_noise = self._gen
            try:  # independent streams (one per rank); spawning draws nothing from gen_noise
                gen_sample = gen_noise.spawn(world)[rank]
            except (TypeError, ValueError, AttributeError):  # a bit generator without a SeedSequence
                gen_sample = np.random.default_rng([int(gen_noise.integers(0, 2**63)), rank])
        self.noise_multiplier, self.max_grad_norm, self.sample_rate = z, C, q
        self.max_grad_norms = None if norms is None else list(norms)
        self.clipping = "flat" if norms is None else self._clipping_mode
        self.planned_steps, self.steps_per_epoch, self.event_ = plan, spe, event
        self.n_samples, self.batch_size = n, bs
        if distributed:
            with torch.no_grad():
                for t in list(module.parameters()) + list(module.buffers()):
                    torch.distributed.broadcast(t.data, src=0)
        gsm = GradSampleModule(module, loss_reduction=loss_reduction)
        if grad_sample_mode == "functional":
            gsm.remove_hooks()
        try:
            dpo = DPOptimizer(optimizer, noise_multiplier=z, max_grad_norm=C, expected_batch_size=q * n,
                              loss_reduction=loss_reduction, generator=gen_noise,
                              grad_sample_module=gsm if grad_sample_mode == "hooks" else None, planned_steps=plan,
                              distributed=distributed, max_grad_norms=norms,
                              per_group=self._clipping_mode == "per_group")
            dl = DPDataLoader.from_data_loader(data_loader, sample_rate=q, steps_per_epoch=spe, generator=gen_sample,
                                               step_counter=lambda: dpo.steps, rank=rank, world_size=world)
        except BaseException:
            gsm.remove_hooks()  # (no hooks left behind: a later make_private on the module would be refused)
            raise
        self.module, self.optimizer, self.data_loader = gsm, dpo, dl
        return gsm, dpo, dl

    # ------------------------------------------------------------------ accounting
    @property
    def steps(self) -> int:
        """Logical steps taken."""
        return 0 if self.optimizer is None else self.optimizer.steps

    @property
    def accountant(self) -> acc.PrivacyAccountant:
        """A fresh accountant (the engine's kind) holding the steps taken so far."""
        a = acc.make_accountant(self.accountant_name)
        if self.steps and self.noise_multiplier:
            a.compose(_step_event(self.noise_multiplier, float(self.sample_rate or 1.0)), self.steps)
        return a

    def get_epsilon(self, delta: float) -> float:
        """epsilon at ``delta`` of the steps taken so far (the engine's accountant on
        ``SelfComposed(PoissonSampled(q, Gaussian(z)), steps)``); 0 before the first step, inf
        without noise."""
        d = _real(delta, "delta", positive=True, allow_zero=False)
        if not d < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        if self.steps == 0:
            return 0.0
        if not self.noise_multiplier:
            return math.inf
        return float(self.accountant.get_epsilon(d))

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> Dict[str, Any]:
        """The engine's state: run parameters, steps taken, the accountant's state, the sampler's
        and the noise generator's states (None in secure mode: a secret stream is never copied).
        Save it with the module's and the optimizer's ``state_dict``; see :meth:`load_state_dict`."""
        if self.optimizer is None or self.data_loader is None:
            raise RuntimeError("make_private first")
        gen = self.optimizer.generator
        return {
            "format": _STATE_FORMAT,
            "accountant": self.accountant_name,
            "accountant_state": self.accountant.state_dict(),
            "noise_multiplier": self.noise_multiplier,
            "max_grad_norm": self.max_grad_norm,
            "clipping": self.clipping,
            "max_grad_norms": None if self.max_grad_norms is None else list(self.max_grad_norms),
            "sample_rate": self.sample_rate,
            "steps_per_epoch": self.steps_per_epoch,
            "planned_steps": self.planned_steps,
            "steps": self.optimizer.steps,
            "secure": self.secure_mode,
            "noise_rng": None if is_secure(gen) else copy.deepcopy(gen.bit_generator.state),
            "sampler": self.data_loader.batch_sampler.state_dict(),  # type: ignore[union-attr]
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume a run: call after ``make_private`` with the same parameters (checked: a resumed
        run with other parameters would be misaccounted) and without ``budget=`` (the first
        ``make_private`` charged the whole plan).  Restores the step count (so ``get_epsilon`` and
        the plan continue), the noise generator and the sampler (the next iteration of the data
        loader yields the rest of the interrupted epoch).  Load the module's and the optimizer's
        state dicts too; on the CPU the resumed run is then bit-identical to an uninterrupted one."""
        if self.optimizer is None or self.data_loader is None:
            raise RuntimeError("make_private first, with the run's parameters, then load_state_dict")
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise ValueError("not a dpfast.torch PrivacyEngine state (format mismatch)")
        if self.optimizer.steps:
            # rolling a run back restores its noise stream: the steps taken since the saved state would be
            # retaken with the same noise on other gradients (their difference is noise-free), uncharged
            raise RuntimeError(f"this engine has taken {self.optimizer.steps} steps: load a saved state into a fresh "
                               "engine (make_private, then load_state_dict); rolling a run back would retake its "
                               "steps with the same noise")
        for k, mine in (("accountant", self.accountant_name), ("noise_multiplier", self.noise_multiplier),
                        ("max_grad_norm", self.max_grad_norm), ("clipping", self.clipping),
                        ("max_grad_norms", self.max_grad_norms),
                        ("sample_rate", self.sample_rate),
                        ("steps_per_epoch", self.steps_per_epoch)):
            saved = state.get(k, "flat" if k == "clipping" else None)  # (states saved before per-layer clipping)
            if saved != mine:
                raise ValueError(f"the saved run has {k}={saved!r}, this engine {mine!r}: resume with the same "
                                 "parameters")
        steps = state.get("steps")
        if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, numbers.Integral) or int(steps) < 0:
            raise ValueError(f"the saved run's step count must be an int >= 0, got {steps!r}")
        steps = int(steps)
        if self.planned_steps is not None and steps > self.planned_steps:
            raise ValueError(f"the saved run took {steps} steps, beyond this engine's plan of {self.planned_steps}")
        self.optimizer.steps = steps
        gen = self.optimizer.generator
        if state.get("noise_rng") is not None and not is_secure(gen):
            gen.bit_generator.state = copy.deepcopy(state["noise_rng"])
        self.data_loader.batch_sampler.load_state_dict(state["sampler"])  # type: ignore[union-attr]

    def save_checkpoint(self, *, path, module: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None,
                        checkpoint_dict: Optional[Dict[str, Any]] = None) -> None:
        """Opacus's ``save_checkpoint``: ``torch.save`` of ``{"module_state_dict", "optimizer_state_dict",
        "privacy_engine_state_dict"}`` (plus ``checkpoint_dict``'s entries) to ``path``."""
        ckpt = dict(checkpoint_dict or {})
        ckpt["module_state_dict"] = module.state_dict()
        if optimizer is not None:
            ckpt["optimizer_state_dict"] = optimizer.state_dict()
        ckpt["privacy_engine_state_dict"] = self.state_dict()
        torch.save(ckpt, path)

    def load_checkpoint(self, *, path, module: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None,
                        map_location=None) -> Dict[str, Any]:
        """Opacus's ``load_checkpoint``: restore the module, the optimizer and the engine (see
        :meth:`load_state_dict`: call it after ``make_private`` with the run's parameters) from
        ``path``; returns the checkpoint's other entries.  Loaded with ``weights_only=True``."""
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
        module.load_state_dict(ckpt.pop("module_state_dict"))
        opt_state = ckpt.pop("optimizer_state_dict", None)
        if optimizer is not None and opt_state is not None:
            optimizer.load_state_dict(opt_state)
        self.load_state_dict(ckpt.pop("privacy_engine_state_dict"))
        return ckpt
