"""Per-sample gradient norms and clipped sums without per-sample gradients, per layer type.

The contract between the engine (``dpfast.torch``'s hooks) and the fast paths:

``FAST_LAYERS: dict[type[torch.nn.Module], FastLayer]``, exact types (a subclass goes the generic
``torch.func`` path).  For a layer ``m`` of such a type, with ``activations`` the tuple of tensors the
layer's forward received (batch axis 0, B samples) and ``grad_output`` the gradient of the SUM of
the per-sample losses with respect to the layer's output (batch axis 0):

* ``FastLayer.norm_sq(m, activations, grad_output) -> Tensor`` float64 of shape (B,): a certified
  upper bound of the exact squared l2 norm of each sample's gradient over the parameters of ``m``
  that require grad (``m.named_parameters(recurse=False)``), tight to a documented relative error;
* ``FastLayer.clipped_sum(m, activations, grad_output, factors) -> dict[str, Tensor]``: for each
  such parameter name, sum_i factors[i] * g_i (g_i the sample's gradient of that parameter), in the
  parameter's dtype and shape; ``factors`` is a (B,) tensor of clip factors in [0, 1].
"""
from __future__ import annotations

FAST_LAYERS: dict = {}
