"""DP-SGD for your own PyTorch model (optional extra ``dpfast[torch]``, torch >= 2.2).

Opacus's names, so that switching is a one-line change (see :doc:`/user_guide/torch` for the
migration table)::

    from dpfast.torch import PrivacyEngine
    engine = PrivacyEngine(rng=0)
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=1.0, max_grad_norm=1.0, epochs=5)
    for x, y in loader:                       # the training loop is unchanged
        optimizer.zero_grad(); criterion(model(x), y).backward(); optimizer.step()
    engine.get_epsilon(1e-5)

* :class:`PrivacyEngine` -- ``make_private``, ``make_private_with_epsilon`` (calibration by
  ``dpfast.accounting`` on the run's event), ``get_epsilon``, ``state_dict``/``load_state_dict``;
  ``budget=`` charged once, for the whole planned run, before the first step.
* :class:`GradSampleModule` -- per-sample gradients of any module by hooks: ghost-norm fast
  paths for Linear, Conv, Embedding, LayerNorm; ``torch.func`` for everything else (custom
  layers, shared parameters) without registering anything.  :func:`per_sample_grads` -- the fully
  functional path (``vmap`` over ``grad`` of the whole model).
* :class:`DPOptimizer` -- flat or per-layer clipping (one norm per parameter, noise for
  sqrt(sum C_l^2)) with dpfast's safe factors (native kernel on the CPU), noise from dpfast's
  samplers once per logical step.
* :class:`DPDataLoader`, :class:`PoissonBatchSampler`, :class:`BatchMemoryManager` -- Poisson
  batches (empty ones included) and virtual batches.

Importing ``dpfast`` never imports torch; importing ``dpfast.torch`` without torch raises
``ImportError`` naming the extra.
"""
try:
    import torch.nn as _nn  # noqa: F401  (torch.nn: a directory named torch on sys.path is no torch)
except ImportError as _exc:  # pragma: no cover - exercised without torch
    raise ImportError("dpfast.torch needs PyTorch >= 2.2: pip install 'dpfast[torch]'") from _exc

from dpfast.torch._data import BatchMemoryManager, DPDataLoader, PoissonBatchSampler
from dpfast.torch._engine import PrivacyEngine
from dpfast.torch._grad_sample import GradSampleModule, per_sample_grads, validate_module
from dpfast.torch._optimizer import DPOptimizer

__all__ = [
    "PrivacyEngine",
    "GradSampleModule",
    "DPOptimizer",
    "DPDataLoader",
    "PoissonBatchSampler",
    "BatchMemoryManager",
    "per_sample_grads",
    "validate_module",
]
