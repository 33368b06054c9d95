"""DP-SGD / DP-GD with native per-example clipping (see :doc:`/theory/erm`, DP-SGD).

* :func:`clip_gradients`, :func:`clipped_sum`, :func:`per_example_norms` -- for users who
  bring their own per-example gradients (vectorized, float32/float64).
* :class:`DPSGDClassifier` (binary logistic / multinomial softmax), :class:`DPSGDRegressor`
  (squared loss) and :class:`DPMLPClassifier` (dense -> activation -> dense -> softmax): per-example
  norms from the model's structure (GLM factorisation, ghost norms), never a B x P array;
  Poisson or fixed-size sampling in O(batch); privacy accounted by ``dpfast.accounting``.
"""
from dpfast.sgd._clipping import clip_gradients, clipped_sum, per_example_norms
from dpfast.sgd._estimators import DPMLPClassifier, DPSGDClassifier, DPSGDRegressor

__all__ = [
    "clip_gradients",
    "clipped_sum",
    "per_example_norms",
    "DPSGDClassifier",
    "DPSGDRegressor",
    "DPMLPClassifier",
]
