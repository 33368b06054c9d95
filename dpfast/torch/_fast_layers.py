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
* layers with ``FastLayer.grad_scale`` (the convolutions) also take ``grad_scale=s`` with both:
  the gradient of the sum is then the float products ``grad_output * s`` (s the batch size of a
  mean loss), formed as the native kernel reads it instead of as a copy.

Methods
-------
The layers and what they compute (A_i: the (T, d_in) activations of sample i, T the positions
that share the weight -- 1 for a 2-D ``Linear`` input, the extra sequence axes otherwise, the
output pixels of a convolution; G_i: the (T, d_out) output gradients; a_t, g_t their rows):

* ``nn.Linear``: the weight's per-sample gradient is G_i^T A_i.  T = 1: its squared norm is
  ||a||^2 ||g||^2.  T > 1: "ghost norm" (Li, Tramer, Liang, Hashimoto 2022, "Large language
  models can be strong differentially private learners", ICLR, Sec. 4) ||G_i^T A_i||_F^2 =
  <A_i A_i^T, G_i G_i^T> at cost T^2 (d_in + d_out) per sample, or the per-sample gradient
  materialised (in chunks of samples) at cost T d_in d_out, whichever is cheaper.  The bias's
  per-sample gradient sum_t g_t is always materialised (B x d_out).
* ``nn.Conv1d``/``nn.Conv2d``: the input is padded (zeros, reflect, replicate or circular; integer,
  ``"same"`` or ``"valid"`` padding) and unfolded (im2col), which makes each group of the
  convolution a ``Linear`` with T = the number of output positions; norms add over groups.
  When the B per-sample weight gradients fit ``_KEEP_ELEMENTS`` (2^23), they are materialised
  by one batched GEMM w_i = G_i U_i^T (groups = 1: on a channels-last unfold, so w_i comes out
  (C_out, k_h, k_w, C_in)) -- B T d_in d_out multiply-adds, what the ordinary weight gradient
  costs -- and KEPT for the clipped sum, which becomes sum_i f_i w_i (a GEMV over the samples,
  the samples with f_i = 0 left out), so no weight-gradient convolution runs at all; the norm is
  bounded for the exact gradient and for the computed w_hat_i alike: (||w_hat_i||_ub + Delta_i)^2,
  ||w_hat_i|| from dpfast's native row-norm kernel (float64 accumulation on w_hat's memory, the
  rule of ``_row_norms_upper``), Delta_i the materialised form's bound below, with Frobenius norms
  of the whole sample (sum over groups: Cauchy-Schwarz).  So clipping holds for the very vectors
  that are summed.  float32 groups = 1 on a CPU with AVX2 + FMA: w_hat comes from dpfast's native
  kernel instead (``_clip.conv_weight_grads``, csrc/clip/conv.hpp, :func:`_conv_native`; 16
  output channels per vector on AVX-512 CPUs, the same bits), which reads the input directly (no
  unfold; zero padding applied per sample in the kernel), lays w_i out (k_h, k_w, C_in, C_out), and
  returns the float64 sums of squares of w_hat_i, U_i and G_i, and the bias's per-sample sums with
  their sums of squares, from the same pass, on the threads of torch's OpenMP pool: the same bound.
  The bias's per-sample sums are kept likewise (float32 sums on the float32 path,
  within gamma32_T sqrt(T) ||G_i||_F of exact; else float64).  Larger layers: the
  cheaper norm form in chunks (Gram when T (d_in + d_out) < d_in d_out, the ghost-clipping rule)
  and torch's weight-gradient convolution for the clipped sum.  The kept tensors are matched to
  the clipped-sum call by identity and autograd version counters of the input and output
  gradient; the unfold and the per-sample gradients live in per-module workspaces reused across
  steps (a fresh multi-megabyte buffer costs its page faults every step).
* ``nn.Embedding``: the per-sample gradient has row v = sum_{t: x_t = v} g_t (positions at
  ``padding_idx`` contribute nothing).  Short sequences use the index-equality Gram
  sum_{s,t} [x_s = x_t] <g_s, g_t>; long ones add the rows by (sample, index) key (``unique``
  + ``index_add``, cost T d), whichever is cheaper.  ``scale_grad_by_freq=True`` mixes the samples
  of a batch (the scale depends on the other samples' indices) and is refused.
* ``nn.LayerNorm``: the per-sample gradients of weight (sum_t g_t * xhat_t) and bias (sum_t g_t)
  are (B, normalized_shape): small, so they are materialised, from xhat recomputed in float64.

The clipped sums are "book-keeping" (Bu, Wang, Zha, Karypis 2023, "Differentially private
optimization on large model at small cost", ICML): the output gradients are scaled by the clip
factors and the layer's ordinary weight gradient is formed once from the kept activations --
one matmul for ``Linear`` ((f * G)^T A), torch's convolution weight-gradient for the convolutions
whose per-sample gradients are not kept (a weighted sum of the kept ones otherwise, above),
``index_add`` for ``Embedding`` -- with no second backward pass and no per-sample gradients.  They
are computed in the parameter's dtype (LayerNorm: float64, then cast).  Everything runs under
``torch.no_grad()``: the results are plain tensors outside any autograd graph.

Error analysis (why ``norm_sq`` is an upper bound)
--------------------------------------------------
"Exact" is the squared norm of the per-sample gradient in real arithmetic from the tensors the
layer received (for LayerNorm: from its input x, with xhat = (x - mean) / sqrt(var + eps) in real
arithmetic).  Everything is computed in float64 (unit roundoff u = 2^-53; float32/float16/
bfloat16 inputs convert exactly) and, with gamma_n = n u / (1 - n u) (Higham, "Accuracy and
Stability of Numerical Algorithms", 2nd ed., Lemma 3.1 and Sec. 3.1: any order of summation, so
any BLAS blocking or FMA), the results are inflated by:

* Linear with T = 1 on the CPU (float32/float64): ||a|| and ||g|| are upper bounds from dpfast's
  native row-norm kernel (``csrc/clip/clip.hpp``, float64 accumulation read from the tensors'
  memory, within (P/8 + 16) 2^-52 relative plus 2^-537 sqrt(P)); the weight's bound is
  (||a|| ||g||)^2 (1 + 2^-48) + 2^-1022 (the factor covers the three roundings of the product and
  the square, the absolute term float64 underflow), the bias's ||g||^2 (1 + 2^-48) + 2^-1022.
* Gram forms (Linear T >= 1, Embedding Gram): with R_i = sum_t ||a_t|| ||g_t|| (for Embedding
  ||a_t|| = 1 at a non-padding position, else 0), every entry of A A^T (G G^T) is off by at most
  gamma_{d_in} ||a_s|| ||a_t|| (gamma_{d_out} ||g_s|| ||g_t||) and the T^2-term inner product adds
  gamma_{T^2}, so |S_hat - S| <= gamma_n R^2 with n = d_in + d_out + T^2 + 1.  We return
  (S_hat + 3 n u R_hat^2)(1 + 16u): 3 n u covers gamma_n (<= 1.01 n u while n u < 0.01) and the
  relative error of the computed R_hat^2 (from the Grams' diagonals, each within gamma_d), and
  (1 + 16u) the rounding of the final operations.
* Materialised forms (Linear/convolution materialised, bias, Embedding rows, LayerNorm): the
  computed per-sample gradient w_hat is within Delta of the exact one -- Linear: every entry is a
  T-term inner product, so ||w_hat - w|| <= gamma_T R <= gamma_T ||A||_F ||G||_F (Cauchy-Schwarz;
  two contiguous reductions instead of per-position norms); bias: gamma_T sum_t ||g_t|| <=
  gamma_T sqrt(T) ||G||_F; Embedding rows: a row hit once is g_t itself, the rows hit several
  times are sums, within gamma_T sum_t ||g_t|| in all; LayerNorm: below -- and the sum of squares
  is off by gamma_m relatively (m terms, all positive), so ||w||^2 <= (sqrt(s_hat / (1 - gamma_m))
  + Delta)^2; we return (sqrt(s_hat (1 + 3(m + 1) u)) + Delta_hat)^2 (1 + 16u), Delta_hat inflated
  for its own rounding.
* LayerNorm over N features, M = max |x| of the normalised group: the computed mean is within
  e_mu = gamma_N M, the centred values within e_c = gamma_{N+3} M, the variance within
  e_v = 10 gamma_{N+3} M^2, so D_hat = sqrt(var_hat + eps) is within relative
  rho_D = (1+u) e_v / D_low^2 + 3u of D = sqrt(var + eps) (D_low^2 = max(eps, D_hat^2(1 - 2u) - 2 e_v),
  |sqrt(1 + x) - 1| <= |x| for x >= -1/2), and since |x_k - mean| <= sqrt(N) D every xhat entry is
  within E = (1 + u)(e_c / D_hat + sqrt(N) rho_D / (1 - rho_D)) + u sqrt(N); when rho_D > 1/2 (an
  almost constant group with eps ~ 0) the bound falls back to E = max|xhat_hat| + sqrt(N) (both
  |xhat| and |xhat_hat| are bounded).  The weight's per-sample gradient is then within
  Delta = sum_t ||g_t|| (E_t + gamma_{T+1} max_k |xhat_hat_tk|).
* The per-parameter (and per-group) bounds are added and the total multiplied by
  (1 + 4(k + 1) u) for the k additions.  An absolute n * 2^-1022 is added to each bound to cover
  underflow (impossible for float32 inputs, whose squares and fourth powers are normal float64
  numbers).

The float32 path (convolutions with float32 input, output gradient and weight, on CPU, with
float32 matrix products in IEEE single precision: ``torch.get_float32_matmul_precision() ==
"highest"`` and no oneDNN bf16/tf32 override; chosen automatically, ``precision="float64"``
forces the path above).  The two matrix products of the forms above (A A^T and G G^T, or G^T A)
run in float32 (u_32 = 2^-24) on the exact unfolded float32 input; their results convert exactly
to float64, where everything else is computed and inflated as above.  With gradual underflow every
float32 operation satisfies fl(x op y) = (x op y)(1 + delta) + eta, |delta| <= u_32,
|eta| <= 2^-150 (eta = 0 for additions, and eta only when the result is subnormal), so an n-term
inner product is within gamma32_n |x|^T |y| + n eta_32 of the exact one, eta_32 = 2^-149
(Higham Sec. 3.1 and Sec. 2.1 on underflow), in any summation order and with or without FMA:

* Gram: with e_a = gamma32_{d_in}, e_g = gamma32_{d_out}, tau_a = d_in eta_32, tau_g = d_out eta_32,
  |aa_hat_st - aa_st| <= e_a ||a_s|| ||a_t|| + tau_a (likewise gg), hence
  |sum aa_hat gg_hat - S| <= (e_a + e_g + e_a e_g) R^2 + tau_a (1 + e_g) T F_G + tau_g (1 + e_a) T F_A
  + tau_a tau_g T^2 (F_A >= ||A||_F^2, sum_{s,t} ||g_s|| ||g_t|| <= T ||G||_F^2), and the float64
  sum of the T^2 products adds gamma_{T^2+1} (1 + e_a)(1 + e_g) R^2 plus the same absolute terms.
  R, F_A, F_G are bounded from the diagonals: ||a_t||^2 <= (aa_hat_tt + tau_a) / (1 - e_a).  We
  return (S_hat + c R_hat^2 + 2 (tau_a T F_G + tau_g T F_A + tau_a tau_g T^2))(1 + 16 u) with
  c = (e_a + e_g + e_a e_g + gamma_{T^2+1}(1 + e_a)(1 + e_g))(1 + gamma_{T+8})^2, the last factor
  (also applied to the absolute terms) covering the float64 rounding of R_hat, F_A, F_G.
* Materialised: every entry of the float32 G_i^T A_i is within gamma32_T sum_t |g_tj| |a_tk| + T eta_32,
  so Delta = gamma32_T ||A||_F ||G||_F + sqrt(d_in d_out) T eta_32 (Frobenius: || |G|^T |A| ||_F <=
  ||G||_F ||A||_F), with ||A||_F^2 <= (fl32(||A||_F^2) + T d_in eta_32) / (1 - gamma32_{T d_in});
  then ``_norm_upper`` as above on the float64 sum of squares of the (exactly converted) entries.
* Overflow (entries beyond ~2^63) gives an infinite or NaN result, never a finite wrong one; the
  layer is then recomputed on the float64 path.  Lengths with n u_32 >= 0.01 (T d > 167,772) and
  T = 1 use the float64 path.

The float32 bound is looser: its slack is of order (d_in + d_out) u_32 R^2 (Gram) or
2 gamma32_T ||A||_F ||G||_F ||w|| (materialised), i.e. 1e-5 to 1e-3 relative on the squared norm
(measured 3e-4 and 1.5e-5 on the benchmark CNN's two convolutions, batch 256, materialised; 7e-4 for
the second in the Gram form): clipping slightly more
than exact, never less.  It is about twice as fast as the float64 path.

Tightness: the slack is 3 n u R^2 (Gram) or about 2 Delta ||w|| + 3 m u ||w||^2 (materialised),
relative to ||w||^2 of order n u R^2 / ||w||^2 (R^2 / ||w||^2 grows at most like T when the
positions do not cancel) -- many orders below the 1e-6 relative that the tests check against
float64 naive per-sample gradients.  Non-finite
inputs give non-finite norms (the engine then clips that sample to zero).
"""
from __future__ import annotations

import math
import weakref
from typing import Callable, Dict, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.grad import conv1d_weight, conv2d_weight

from dpfast import _clip

__all__ = ["FAST_LAYERS", "FastLayer"]

_U = 2.0 ** -53
_TINY = 2.0 ** -1022
_F64 = torch.float64
#: Budget (float64 elements) of the temporaries of one chunk of samples (Gram matrices,
#: materialised per-sample gradients): 2^23 elements = 64 MiB.
_CHUNK_ELEMENTS = 1 << 23
_Conv = Union[nn.Conv1d, nn.Conv2d]


class FastLayer(NamedTuple):
    """The functions of a fast path (see the module docstring for the contract).

    ``norm_sq_parts`` (optional; per-layer clipping): ``(m, activations, grad_output) ->
    dict[str, Tensor]``, for each trainable parameter of ``m`` a certified upper bound (float64,
    (B,)) of the exact squared l2 norm of each sample's gradient of THAT parameter; a layer with
    ``clipped_sum`` accepting ``factors`` as a dict {parameter name: (B,) tensor} (one factor
    vector per parameter) has it.  Layers without it run per-layer clipping on the fast path only
    when they hold one trainable parameter (their ``norm_sq`` is then that parameter's)."""

    norm_sq: Callable[..., torch.Tensor]
    clipped_sum: Callable[..., Dict[str, torch.Tensor]]
    norm_sq_parts: Optional[Callable[..., Dict[str, torch.Tensor]]] = None
    #: ``norm_sq`` and ``clipped_sum`` take ``grad_scale=s`` (an integer: the physical batch size
    #: of a mean loss) with the gradient of the MEAN: they work on the float32/float64 products
    #: ``grad_output * s`` -- the same values as the hooks' scaled gradient -- without a scaled
    #: copy where they can (the convolutions' native kernel scales as it reads)
    grad_scale: bool = False


# --------------------------------------------------------------------------------------------
# certified bounds


def _gram_upper(s_hat: torch.Tensor, r2_hat: torch.Tensor, n: int) -> torch.Tensor:
    """Upper bound of S from S_hat with |S_hat - S| <= gamma_n R^2 (module docstring)."""
    if n * _U >= 0.01:  # pragma: no cover - needs ~10^14 terms
        raise ValueError("the layer is too large for the float64 error bound")
    return ((s_hat + (3.0 * n * _U) * r2_hat) * (1.0 + 16.0 * _U) + n * _TINY).clamp_min(0.0)


_Vec = TypeVar("_Vec", torch.Tensor, np.ndarray)


def _norm_upper(s_hat: _Vec, delta_hat: Optional[_Vec], m: int, delta_ops: int = 0) -> _Vec:
    """Upper bound of ||w||^2 from s_hat = fl(||w_hat||^2) (m terms) and ||w_hat - w|| <= Delta.

    ``delta_ops`` is the number of floating-point operations in the longest chain that computed
    ``delta_hat`` (a sum of non-negative terms): it is inflated by 3 (delta_ops + 4) u for them.
    """
    if (m + delta_ops) * _U >= 0.01:  # pragma: no cover
        raise ValueError("the layer is too large for the float64 error bound")
    if isinstance(s_hat, np.ndarray):  # the native convolution's (B,) vectors: no torch per-call cost
        r = np.sqrt(np.maximum(s_hat, 0.0) * (1.0 + 3.0 * (m + 1) * _U))  # the same IEEE operations
    else:
        r = torch.sqrt(s_hat.clamp_min(0.0) * (1.0 + 3.0 * (m + 1) * _U))
    if delta_hat is not None:
        r = r + delta_hat * (1.0 + 3.0 * (delta_ops + 4) * _U)
    return r * r * (1.0 + 16.0 * _U) + m * _TINY


def _add_upper(parts: Sequence[torch.Tensor], batch: int) -> torch.Tensor:
    """Sum of non-negative upper bounds, inflated for the rounding of the additions."""
    if not parts:
        return torch.zeros(batch, dtype=_F64)
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total * (1.0 + 4.0 * len(parts) * _U)


def _gamma(n: int) -> float:
    """An upper bound of gamma_n, inflated for its own rounding."""
    return 1.01 * n * _U / (1.0 - n * _U)


# --------------------------------------------------------------------------------------------
# the shared linear core: per-sample gradient G_i^T A_i of (N, T, d_in), (N, T, d_out)


#: Row sums in pieces of this many elements: below torch's parallel grain (32768), so no piece is
#: split between threads, whatever the batch size or thread count.
_ROW_PIECE = 4096


def _row_sum(x: torch.Tensor) -> torch.Tensor:
    """Per-item sum of (N, ...) -> (N,): each item's value the same bits whatever the other items,
    the batch size and the thread count.  (``x.sum(dim=(1, 2))`` splits ONE long row between
    threads, so an example's bound depended on how many examples shared its batch: 34 of 40 rows of
    38,416 terms differed alone and in a batch at 2 threads; BLAS dot products differed too.)  Any
    summation order is covered by the gamma_n terms of the bounds."""
    n = x.shape[0]
    length = math.prod(x.shape[1:])
    y = x.reshape(n, length)
    if length <= _ROW_PIECE:
        return y.sum(dim=1)
    pad = (-length) % _ROW_PIECE
    if pad:
        y = F.pad(y, (0, pad))
    return y.view(n, -1, _ROW_PIECE).sum(dim=2).sum(dim=1)


def _sqsum(x: torch.Tensor, dim, keepdim: bool = False) -> torch.Tensor:
    """Sum of squares along the last axis ``dim`` (batch-invariant: :func:`_row_sum`)."""
    if dim not in (-1, x.dim() - 1):
        raise ValueError("_sqsum reduces the last axis")
    lead = x.shape[:-1]
    out = _row_sum((x * x).reshape(-1, x.shape[-1])).view(lead)
    return out.unsqueeze(-1) if keepdim else out


def _frob_sq(x: torch.Tensor) -> torch.Tensor:
    """Per-item squared Frobenius norm of (N, T, d) (any layout; batch-invariant: :func:`_row_sum`)."""
    return _row_sum(x * x)


def _chunks(n: int, per_item: int):
    step = max(1, _CHUNK_ELEMENTS // max(1, per_item))
    for lo in range(0, n, step):
        yield lo, min(n, lo + step)


def _linear_weight_norm_sq(a: torch.Tensor, g: torch.Tensor,
                           method: Optional[str] = None) -> torch.Tensor:
    """Certified upper bound of ||G_i^T A_i||_F^2 for each i; a, g float64 (N, T, d_in/d_out).

    ``method``: None (cheapest), ``"gram"`` or ``"materialise"`` (tests force both).
    """
    n_items, t, d_in = a.shape
    d_out = g.shape[2]
    if n_items == 0:
        return torch.zeros(0, dtype=_F64)
    if t == 1:
        s = _sqsum(a[:, 0], 1) * _sqsum(g[:, 0], 1)
        return _gram_upper(s, s, d_in + d_out + 4)
    if method is None:
        method = "gram" if t * (d_in + d_out) < d_in * d_out else "materialise"
    out = torch.empty(n_items, dtype=_F64)
    if method == "gram":
        # R = sum_t ||a_t|| ||g_t|| from the Grams' diagonals (each within gamma_d relatively)
        r = torch.empty(n_items, dtype=_F64)
        for lo, hi in _chunks(n_items, 2 * t * t):
            aa = torch.bmm(a[lo:hi], a[lo:hi].transpose(1, 2))
            gg = torch.bmm(g[lo:hi], g[lo:hi].transpose(1, 2))
            out[lo:hi] = _row_sum(aa * gg)
            r[lo:hi] = torch.sqrt(torch.diagonal(aa, dim1=1, dim2=2) * torch.diagonal(gg, dim1=1, dim2=2)).sum(dim=1)
        return _gram_upper(out, r * r, d_in + d_out + t * t + 1)
    if method != "materialise":
        raise ValueError(f"unknown method {method!r}")
    for lo, hi in _chunks(n_items, d_in * d_out):
        w = torch.bmm(g[lo:hi].transpose(1, 2), a[lo:hi])  # (n, d_out, d_in)
        out[lo:hi] = _row_sum(w * w)
    # Delta <= gamma_T sum_t ||a_t|| ||g_t|| <= gamma_T ||A||_F ||G||_F (Cauchy-Schwarz: one
    # contiguous reduction each instead of per-position norms)
    rf = torch.sqrt(_frob_sq(a) * _frob_sq(g))
    return _norm_upper(out, _gamma(t) * rf, d_in * d_out, delta_ops=t * max(d_in, d_out) + 4)


_U32 = 2.0 ** -24
#: the absolute error of one float32 operation whose result underflows: at most half the
#: smallest subnormal, 2^-150 (bounded by 2^-149 per term below, covering the propagation)
_ETA32 = 2.0 ** -149


def _gamma32(n: int) -> float:
    """An upper bound of gamma_n in float32 (u = 2^-24), inflated for its own rounding."""
    if n * _U32 >= 0.01:
        raise ValueError("too many terms for the float32 error bound")
    return 1.01 * n * _U32 / (1.0 - n * _U32)


def _linear_weight_norm_sq32(a: torch.Tensor, g: torch.Tensor, method: Optional[str] = None) -> torch.Tensor:
    """Certified upper bound (float64, (N,)) of ||G_i^T A_i||_F^2 for float32 a, g (N, T, d_in/d_out):
    the matrix products in float32, the rest in float64 (module docstring, "The float32 path").
    Falls back to the float64 form for T = 1 and when a length is too large for the float32
    bound (n u_32 >= 0.01)."""
    n_items, t, d_in = a.shape
    d_out = g.shape[2]
    if n_items == 0:
        return torch.zeros(0, dtype=_F64)
    if method is None:
        method = "gram" if t * (d_in + d_out) < d_in * d_out else "materialise"
    if t == 1 or max(t * d_in, t * d_out) * _U32 >= 0.01:
        return _linear_weight_norm_sq(a.to(_F64), g.to(_F64), method)
    out = torch.empty(n_items, dtype=_F64)
    if method == "gram":
        e_a, e_g = _gamma32(d_in), _gamma32(d_out)
        tau_a, tau_g = d_in * _ETA32, d_out * _ETA32
        r = torch.empty(n_items, dtype=_F64)
        fa = torch.empty(n_items, dtype=_F64)
        fg = torch.empty(n_items, dtype=_F64)
        for lo, hi in _chunks(n_items, 2 * t * t):
            aa = torch.bmm(a[lo:hi], a[lo:hi].transpose(1, 2)).to(_F64)
            gg = torch.bmm(g[lo:hi], g[lo:hi].transpose(1, 2)).to(_F64)
            out[lo:hi] = _row_sum(aa * gg)
            da = (torch.diagonal(aa, dim1=1, dim2=2) + tau_a) / (1.0 - e_a)  # >= ||a_t||^2
            dg = (torch.diagonal(gg, dim1=1, dim2=2) + tau_g) / (1.0 - e_g)
            r[lo:hi] = torch.sqrt(da * dg).sum(dim=1)
            fa[lo:hi] = da.sum(dim=1)
            fg[lo:hi] = dg.sum(dim=1)
        infl = (1.0 + _gamma(t + 8)) ** 2  # the float64 rounding of r, fa, fg
        c = (e_a + e_g + e_a * e_g + _gamma(t * t + 1) * (1.0 + e_a) * (1.0 + e_g)) * infl * (1.0 + 1e-12)
        under = 2.0 * infl * (tau_a * t * fg + tau_g * t * fa + tau_a * tau_g * t * t)
        return ((out + c * (r * r) + under) * (1.0 + 16.0 * _U)).clamp_min(0.0)
    if method != "materialise":
        raise ValueError(f"unknown method {method!r}")
    for lo, hi in _chunks(n_items, d_in * d_out):
        w = torch.bmm(g[lo:hi].transpose(1, 2), a[lo:hi]).to(_F64)  # (n, d_out, d_in), exact conversion
        out[lo:hi] = _row_sum(w * w)
    # every entry within gamma32_T sum_t |g_tj| |a_tk| + T eta: ||w_hat - w||_F <= gamma32_T ||A||_F ||G||_F
    # + sqrt(d_in d_out) T eta, and ||A||_F^2 <= (fl32(||A||_F^2) + T d_in eta) / (1 - gamma32_{T d_in})
    fa = (_frob_sq(a).to(_F64) + t * d_in * _ETA32) / (1.0 - _gamma32(t * d_in))
    fg = (_frob_sq(g).to(_F64) + t * d_out * _ETA32) / (1.0 - _gamma32(t * d_out))
    delta = _gamma32(t) * torch.sqrt(fa * fg) + math.sqrt(d_in * d_out) * t * _ETA32
    return _norm_upper(out, delta, d_in * d_out, delta_ops=16)


def _sum_positions_norm_sq(g: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Certified upper bound of ||sum_t g_t||^2 for each i; g float64 (N, T, d) (``dim=1``) or
    (N, d, T) (``dim=2``)."""
    t = g.shape[dim]
    d = g.shape[3 - dim]
    if t == 1:
        return _norm_upper(_frob_sq(g), None, d)
    b = g.sum(dim=dim)
    # ||b_hat - b|| <= gamma_T sum_t ||g_t|| <= gamma_T sqrt(T) ||G||_F
    delta = _gamma(t) * torch.sqrt(t * _frob_sq(g))
    return _norm_upper(_sqsum(b, 1), delta, d, delta_ops=t * d + 4)


def _trainable(m: nn.Module) -> Dict[str, nn.Parameter]:
    return {name: p for name, p in m.named_parameters(recurse=False) if p.requires_grad}


def _factor_of(factors, name: str) -> torch.Tensor:
    """The clip factors of parameter ``name``: ``factors`` is one (B,) tensor for all the layer's
    parameters (flat clipping) or a dict {name: (B,) tensor} (per-layer clipping)."""
    return factors[name] if isinstance(factors, dict) else factors


def _weighted(g: torch.Tensor, factors: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    f = factors.to(device=g.device, dtype=dtype)
    return g.to(dtype) * f.view((-1,) + (1,) * (g.dim() - 1))


# --------------------------------------------------------------------------------------------
# nn.Linear


def _linear_views(activations, grad_output) -> Tuple[torch.Tensor, torch.Tensor]:
    a = activations[0]
    b = a.shape[0]
    if a.dim() == 1:  # an unbatched input is not a batch of samples
        raise ValueError("a Linear layer needs a batch axis: input of shape (B, ..., in_features)")
    t = math.prod(a.shape[1:-1])
    return a.reshape(b, t, a.shape[-1]), grad_output.reshape(b, t, grad_output.shape[-1])


def _row_norms_upper(x: torch.Tensor) -> Optional[torch.Tensor]:
    """:func:`_row_norms_upper_np` as a float64 tensor (None for other devices/dtypes)."""
    r = _row_norms_upper_np(x)
    return None if r is None else torch.from_numpy(r)


def _row_norms_upper_np(x: torch.Tensor) -> Optional[np.ndarray]:
    """Certified upper bounds (float64 NumPy, (B,)) of the l2 norms of the rows of a (B, P) CPU
    float32/float64 tensor, by dpfast's native row-norm kernel on the tensor's memory (float64
    accumulation, no float64 copy): ``dpfast._clip.clip_rows``'s norms inflated by its summation
    bound (``csrc/clip/clip.hpp``: (P/8 + 16) 2^-52 relative, plus 2^-537 sqrt(P) for float64
    underflow; the rule of ``dpfast.torch.per_sample_norm_sq``).  None for other devices/dtypes."""
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64) or x.shape[0] == 0:
        return None
    b, p = x.shape
    norms = np.empty(b)
    _clip.clip_rows(x.detach().contiguous().numpy(), np.inf, norms, None, None, None)
    rho = (max(1, p) / 8.0 + 16.0) * 2.0 ** -52
    return norms * (1.0 + rho) + math.sqrt(max(1, p)) * 2.0 ** -537


def _linear_t1_parts(a: torch.Tensor, g: torch.Tensor, params) -> Optional[Dict[str, np.ndarray]]:
    """T = 1: each parameter's bound from native row norms, ||g a^T||_F = ||a|| ||g|| (weight) and
    ||g|| (bias), weight first; the few float64 operations on the (B,) bounds in NumPy (the same
    IEEE operations as the torch forms, without torch's per-call overhead on small tensors).
    None where the native row norms do not apply."""
    has_w = "weight" in params
    na = _row_norms_upper_np(a[:, 0]) if has_w else None
    ng = _row_norms_upper_np(g[:, 0])
    if ng is None or (has_w and na is None):
        return None
    parts = {}
    if na is not None:
        w = na * ng
        parts["weight"] = w * w * (1.0 + 2.0 ** -48) + _TINY
    if "bias" in params:
        parts["bias"] = ng * ng * (1.0 + 2.0 ** -48) + _TINY
    return parts


@torch.no_grad()
def linear_norm_sq(m: nn.Linear, activations, grad_output, method: Optional[str] = None) -> torch.Tensor:
    a, g = _linear_views(activations, grad_output)
    params = _trainable(m)
    if a.shape[1] == 1 and method is None:
        t1 = _linear_t1_parts(a, g, params)
        if t1 is not None:
            if not t1:
                return torch.zeros(a.shape[0], dtype=_F64)
            np_parts = list(t1.values())  # weight, then bias
            total = np_parts[0]
            for q in np_parts[1:]:
                total = total + q
            return torch.from_numpy(total * (1.0 + 4.0 * len(np_parts) * _U))  # as _add_upper
    g64 = g.to(_F64)
    parts = []
    if "weight" in params:
        parts.append(_linear_weight_norm_sq(a.to(_F64), g64, method))
    if "bias" in params:
        parts.append(_sum_positions_norm_sq(g64))
    return _add_upper(parts, a.shape[0])


@torch.no_grad()
def linear_norm_sq_parts(m: nn.Linear, activations, grad_output,
                         method: Optional[str] = None) -> Dict[str, torch.Tensor]:
    """Per-parameter bounds (per-layer clipping): {"weight": ||G_i^T A_i||_F^2 bound, "bias":
    ||sum_t g_t||^2 bound}, each certified on its own (the forms of :func:`linear_norm_sq`, in
    float64 torch ops)."""
    a, g = _linear_views(activations, grad_output)
    params = _trainable(m)
    if a.shape[1] == 1 and method is None:
        t1 = _linear_t1_parts(a, g, params)
        if t1 is not None:
            return {k: torch.from_numpy(v) for k, v in t1.items()}
    g64 = g.to(_F64)
    out = {}
    if "weight" in params:
        out["weight"] = _linear_weight_norm_sq(a.to(_F64), g64, method)
    if "bias" in params:
        out["bias"] = _sum_positions_norm_sq(g64)
    return out


@torch.no_grad()
def linear_clipped_sum(m: nn.Linear, activations, grad_output, factors) -> Dict[str, torch.Tensor]:
    """sum_i f_i G_i^T A_i as ONE matrix product (f * G)^T A in the weight's dtype (float32 stays
    float32: one sgemm), and the bias's sum_i f_i sum_t g_t from the same scaled G when the dtypes
    and the factors agree (per-layer clipping: ``factors`` a dict, one vector per parameter)."""
    a, g = _linear_views(activations, grad_output)
    params = _trainable(m)
    out = {}
    gw = None
    if "weight" in params:
        dt = params["weight"].dtype
        gw = _weighted(g, _factor_of(factors, "weight"), dt).reshape(-1, g.shape[-1])
        out["weight"] = gw.t().mm(a.to(dt).reshape(-1, a.shape[-1]))
    if "bias" in params:
        dt = params["bias"].dtype
        if gw is not None and gw.dtype == dt and not isinstance(factors, dict):
            out["bias"] = gw.sum(dim=0)
        else:
            out["bias"] = _weighted(g, _factor_of(factors, "bias"), dt).sum(dim=(0, 1))
    return out


# --------------------------------------------------------------------------------------------
# nn.Conv1d / nn.Conv2d


def _conv_geometry(m: _Conv):
    """(kernel, stride, dilation, pad list for F.pad) as 2-D tuples (Conv1d: height 1)."""
    k, s, d = tuple(m.kernel_size), tuple(m.stride), tuple(m.dilation)
    if isinstance(m.padding, str):
        if m.padding == "valid":
            pads = [(0, 0)] * len(k)
        else:  # "same", torch's convention: the extra pad goes right/bottom
            pads = []
            for ki, di in zip(k, d):
                total = di * (ki - 1)
                pads.append((total // 2, total - total // 2))
    else:
        pads = [(p, p) for p in m.padding]
    if len(k) == 1:
        k, s, d, pads = (1,) + k, (1,) + s, (1,) + d, [(0, 0)] + pads
    flat = []
    for left, right in reversed(pads):  # F.pad: last dimension first
        flat += [left, right]
    return k, s, d, flat


def _conv_padded(m: _Conv, x: torch.Tensor) -> Tuple[torch.Tensor, tuple, tuple, tuple]:
    if x.dim() == len(m.kernel_size) + 1:
        raise ValueError("a convolution needs a batch axis: input of shape (B, C, ...)")
    k, s, d, flat = _conv_geometry(m)
    if len(m.kernel_size) == 1:
        x = x.unsqueeze(2)
    if any(flat):
        mode = "constant" if m.padding_mode == "zeros" else m.padding_mode
        x = F.pad(x, flat, mode=mode)
    return x, k, s, d


def _im2col(xp: torch.Tensor, k: tuple, s: tuple, d: tuple) -> torch.Tensor:
    """``F.unfold(xp, k, dilation=d, stride=s)`` (no padding), (B, C k_h k_w, L), the same values
    in the same layout (a copy, so exact), from strided views: one permuting copy, several times
    faster than ``F.unfold``'s im2col on CPU."""
    b, c = xp.shape[:2]
    span = tuple(di * (ki - 1) + 1 for ki, di in zip(k, d))
    w = xp.unfold(2, span[0], s[0]).unfold(3, span[1], s[1])  # (B, C, oh, ow, span_h, span_w)
    if d != (1, 1):
        w = w[..., ::d[0], ::d[1]]
    return w.permute(0, 1, 4, 5, 2, 3).reshape(b, c * k[0] * k[1], w.shape[2] * w.shape[3])


def _float32_ok(*tensors: torch.Tensor) -> bool:
    """Whether the float32 path applies: CPU float32 tensors, and float32 matrix products in IEEE
    single precision (``torch.get_float32_matmul_precision() == "highest"`` and no oneDNN
    bf16/tf32 override), so that every product and sum rounds as the error analysis assumes."""
    if torch.get_float32_matmul_precision() != "highest":
        return False
    for mod in (torch.backends, getattr(torch.backends.mkldnn, "matmul", None)):
        prec = getattr(mod, "fp32_precision", "none") if mod is not None else "none"
        if prec not in ("none", "ieee"):
            return False
    return all(t.dtype == torch.float32 and t.device.type == "cpu" for t in tensors)


class _Kept(NamedTuple):
    """A convolution's materialised per-sample weight gradients, kept by ``conv_norm_sq`` for the
    ``conv_clipped_sum`` of the same call (same tensors, unmodified: checked by identity and
    autograd version counters)."""

    x: torch.Tensor
    x_version: int
    g: torch.Tensor
    g_version: int
    w: Optional[torch.Tensor]  # (B, P): the per-sample weight gradients as computed (None: not kept)
    shape: Optional[tuple]  # (view shape, permutation to the weight's axes) of one (groups = 1); None: the weight's
    bias: Optional[torch.Tensor]  # (B, C_out): the per-sample bias gradients as computed
    scale: int = 1  # the grad_scale the output gradient g was given with


#: per convolution module, the per-sample weight gradients of its last ``conv_norm_sq`` (one entry
#: per module, replaced by the next call, dropped by ``conv_clipped_sum``)
_KEPT: "weakref.WeakKeyDictionary[nn.Module, _Kept]" = weakref.WeakKeyDictionary()
#: Budget (elements) of the kept per-sample weight gradients of one convolution: 2^23 (32 MiB in
#: float32).  Within it the weight gradients are materialised and reused by the clipped sum
#: (which then costs one weighted sum over the samples instead of a weight-gradient GEMM).
_KEEP_ELEMENTS = 1 << 23
#: per convolution module, its scratch buffers (``_workspace``)
_WORK: "weakref.WeakKeyDictionary[nn.Module, Dict[str, torch.Tensor]]" = weakref.WeakKeyDictionary()


#: A convolution's per-sample weight gradients are materialised when one sample's has at most this
#: many entries (the batch of the benchmarks, 256, fits ``_KEEP_ELEMENTS``), or when the ghost rule
#: prefers them; a function of public shapes only.
_MATERIALISE_ENTRIES = 1 << 15


def _conv_method(method: Optional[str], b: int, t: int, d_in: int, d_out: int, groups: int) -> Tuple[str, bool]:
    """(method, keep).  The norm METHOD is a function of the public per-sample shapes only: the
    batch size of a Poisson-sampled step is private, and a method chosen by it (as before stop 31)
    changed every other example's bound, hence its clipping factor, when one example joined (the
    red team's neighbour moved the clipped sum by 1.18 C).  Materialise when a sample's gradient has
    at most ``_MATERIALISE_ENTRIES`` entries: forming them (T d_in d_out multiply-adds per sample)
    costs what the clipped sum's weight-gradient GEMM costs, and keeping them makes that GEMM
    unnecessary; larger layers: the cheaper norm form (Gram when T (d_in + d_out) < d_in d_out, the
    rule of ghost clipping: Li et al. 2022, Sec. 4; Bu et al. 2023).  KEEP (a cache, not a choice of
    bound) when the batch's gradients fit ``_KEEP_ELEMENTS``; otherwise they are formed in chunks of
    a fixed size for the same bounds, and the clipped sum is taken by torch's weight-gradient
    convolution."""
    per = groups * d_in * d_out
    if method is None:
        method = "materialise" if per <= _MATERIALISE_ENTRIES or t * (d_in + d_out) >= d_in * d_out else "gram"
    if method not in ("gram", "materialise"):
        raise ValueError(f"unknown method {method!r}")
    return method, method == "materialise" and b * per <= _KEEP_ELEMENTS


def _conv_materialised_per_example(m: _Conv, x: torch.Tensor, g2: torch.Tensor, use32: bool, bias: bool,
                                   scale: int = 1):
    """:func:`_conv_materialised`, where an example whose float32 bound is not finite (a non-finite
    input, or a float32 overflow: a gradient beyond ~2^63) gets the bound +inf, i.e. clipping
    factor 0: it is left out of the clipped sum, and no other example's bound changes.  (Before stop
    31 one such example sent the whole batch to float64, changing every other example's bound; and a
    float64 bound of an overflowing example gave it a subnormal float32 factor, whose rounding let
    its clipped contribution exceed C by 6e-5 relative in the red team's case.)"""
    bound, w, shape, b_hat = _conv_materialised(m, x, g2, use32, bias, scale)
    if use32:
        bound = torch.where(torch.isfinite(bound), bound, math.inf)
    return bound, w, shape, b_hat


def _workspace(m: nn.Module, name: str, shape: tuple, dtype: torch.dtype, device) -> torch.Tensor:
    """A per-module scratch tensor of ``shape``, reused from step to step (a fresh multi-megabyte
    buffer each step costs its page faults, about as much as filling it), with a quarter to spare
    for the next Poisson batch."""
    n = math.prod(shape)
    ws = _WORK.setdefault(m, {})
    buf = ws.get(name)
    if buf is None or buf.numel() < n or buf.dtype != dtype or buf.device != device:
        buf = torch.empty(n + n // 4, dtype=dtype, device=device)
        ws[name] = buf
    return buf[:n].view(shape)


def _im2col_cl(m: _Conv, xp: torch.Tensor, k: tuple, s: tuple, d: tuple) -> torch.Tensor:
    """The unfolded input transposed and in (k_h, k_w, C) order: (B, L, k_h k_w C), contiguous (a
    workspace of ``m``), the same values as ``_im2col`` (exact copies).  Read from a channels-last
    copy of the padded input, so the copy moves runs of k_w C contiguous values; the batched GEMM
    G_i U_i^T reads it without a copy.  The per-sample gradients come out as (C_out, k_h, k_w, C)."""
    b, c = xp.shape[:2]
    span = tuple(di * (ki - 1) + 1 for ki, di in zip(k, d))
    xc = xp.permute(0, 2, 3, 1)
    if c > 1:
        xc = xc.contiguous()  # (B, H, W, C)
    w = xc.unfold(1, span[0], s[0]).unfold(2, span[1], s[1])  # (B, oh, ow, C, span_h, span_w)
    if d != (1, 1):
        w = w[..., ::d[0], ::d[1]]
    w = w.permute(0, 1, 2, 4, 5, 3)  # (B, oh, ow, k_h, k_w, C)
    out = _workspace(m, "unfolded", tuple(w.shape), xp.dtype, xp.device)
    out.copy_(w)
    return out.view(b, w.shape[1] * w.shape[2], c * k[0] * k[1])


#: whether the float32 groups = 1 convolutions use dpfast's native per-sample weight-gradient
#: kernel (``_clip.conv_weight_grads``, csrc/clip/conv.hpp): where its AVX2+FMA build runs; its
#: generic build gives the same bits (tests) but emulates the fused multiply-adds on x86-64 CPUs
#: without FMA, where the unfold + batched GEMM below is faster.
_NATIVE_CONV = bool(_clip.conv_vectorised())


def _kernel_threads() -> int:
    """Threads for the native convolution kernel: torch's intra-op count (the values do not depend
    on it).  The kernel runs them on torch's own OpenMP pool (``use_omp=True``: csrc/clip/conv.hpp,
    ``loaded_gomp_parallel``): torch's libgomp workers spin for milliseconds after each parallel
    region (~5 ms CPU measured after one operation, 2 cores), so threads of the kernel's own had to
    share the second core with a spinning worker: conv1's kernel at 2 threads took 1.42 / 2.24 ms
    (min / median, right after a torch operation) on its own threads and 0.98 / 1.20 ms on the
    pool's, against 1.9 ms on one thread."""
    return max(1, torch.get_num_threads())


def _conv_native(m: _Conv, xp: torch.Tensor, k: tuple, s: tuple, d: tuple, g: torch.Tensor, bias: bool,
                 pad: Tuple[int, int, int, int] = (0, 0, 0, 0), scale: int = 1):
    """:func:`_conv_materialised`'s float32 groups = 1 form by dpfast's native kernel
    (``csrc/clip/conv.hpp``), which reads the padded input directly (no unfold is materialised;
    ``pad`` = (top, bottom, left, right) > 0: ``xp`` is the unpadded input and the kernel pads each
    sample with zeros itself) and returns, per sample, w_hat_i laid out (k_h, k_w, C_in, C_out) -- every entry the float32
    T-term inner product of G_i and the unfolded input U_i, accumulated by fused multiply-adds --
    with s_hat_i = the float64 sum of the squares of its entries, fa_i = ||U_i||_F^2 (from the input
    pixels and how many windows read each) and fg_i = ||G_i||_F^2, both in float64 with non-negative
    terms.  The bound (module docstring, "Materialised", float32): ||U_i||_F^2 <= fa_i (1 +
    gamma_{W_p + H_p C_in + 4}), ||G_i||_F^2 <= fg_i (1 + gamma_{T C_out + 2}); Delta_i =
    gamma32_T ||U_i||_F ||G_i||_F + sqrt(P) T 2^-149 bounds ||w_hat_i - w_i|| (every entry within
    gamma32_T sum_t |g||u| + T 2^-149, FMA or not: Higham Sec. 3.1); s_hat_i is within gamma_P of
    ||w_hat_i||^2 (the squares of float32 values are exact in float64), so ``_norm_upper`` gives
    (sqrt(s_hat_i (1 + 3 (P + 1) u)) + Delta_i)^2 inflated: at least ||w_i||^2 and ||w_hat_i||^2,
    the vector the clipped sum adds up.  The bias from the same pass: b_hat_i = the float32 sums of
    G_i's rows in position order (within gamma32_T sqrt(T) ||G_i||_F of exact, as in
    :func:`_conv_materialised`) and the float64 sum of their squares (C_out terms, within
    gamma_{C_out}), bounded by ``_norm_upper`` likewise.  The few float64 operations on the (B,)
    bounds run in NumPy (:func:`_norm_upper` on NumPy arrays, the same bits).  ``scale`` (an integer in [1, 2^24]): G_i is taken
    as the float32 products fl(g * scale), which the kernel forms as it reads g (the values of
    torch's ``g * scale``, without that copy)."""
    b, c_in = xp.shape[:2]
    hp, wp = xp.shape[2] + pad[0] + pad[1], xp.shape[3] + pad[2] + pad[3]
    c_out, length = g.shape[1], g.shape[2]
    oh = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if oh * ow != length:  # pragma: no cover - torch's own output size
        raise ValueError("the convolution's output gradient does not match its input")
    xc = xp.contiguous()
    gc = g.contiguous()
    p = c_out * k[0] * k[1] * c_in
    w = _workspace(m, "per_sample", (b, p), torch.float32, xp.device)
    sq, fa, fg = np.empty(b), np.empty(b), np.empty(b)
    b_hat = b_sq = None
    if bias:
        b_hat, b_sq = torch.empty((b, c_out), dtype=torch.float32), np.empty(b)
    _clip.conv_weight_grads(xc.numpy(), gc.view(b, c_out, oh, ow).numpy(), k[0], k[1], s[0], s[1], d[0], d[1],
                            w.numpy(), sq, fa, fg, _kernel_threads(), pad=tuple(pad),
                            bias=None if b_hat is None else b_hat.numpy(), bias_sq=b_sq, use_omp=True,
                            grad_scale=float(scale))
    fa_ub = fa * (1.0 + _gamma(wp + hp * c_in + 4))
    fg_ub = fg * (1.0 + _gamma(length * c_out + 2))
    delta = _gamma32(length) * np.sqrt(fa_ub * fg_ub) + math.sqrt(p) * length * _ETA32
    bound = _norm_upper(sq, delta, p, delta_ops=16)
    if b_sq is not None:
        bound_b = _norm_upper(b_sq, _gamma32(length) * np.sqrt(length * fg_ub), c_out, delta_ops=16)
        bound = (bound + bound_b) * (1.0 + 8.0 * _U)
    return torch.from_numpy(bound), w, ((k[0], k[1], c_in, c_out), (3, 2, 0, 1)), b_hat


def _native_direct(m: _Conv, x: torch.Tensor, g2: torch.Tensor, use32: bool) -> bool:
    """Whether :func:`_conv_materialised` runs the native kernel on the input as it is (float32,
    groups = 1, zero padding, lengths within the float32 bound): the kernel then pads, and scales
    the output gradient, itself."""
    length = g2.shape[2]
    return (use32 and m.groups == 1 and _NATIVE_CONV and x.device.type == "cpu" and m.padding_mode == "zeros"
            and max(length * x.shape[1] * math.prod(m.kernel_size), g2.shape[1] * length) * _U32 < 0.01)


def _conv_materialised(m: _Conv, x: torch.Tensor, g2: torch.Tensor, use32: bool, bias: bool, scale: int = 1):
    """Certified upper bound (float64, (B,)) of the squared norm of each sample's weight gradient,
    exact AND as computed, and the computed per-sample weight gradients w_hat (B, P) with the shape
    of one, P = C_out C_in/groups k_h k_w: w_hat_i = G_i U_i^T per group by one batched GEMM
    (float32 when ``use32``, else float64 from exactly converted inputs).  groups = 1: w_hat is
    laid out (C_out, k_h, k_w, C_in) (``_im2col_cl``; that shape is returned), else as the
    weight (None).

    ||w_hat_i|| comes from dpfast's native row-norm kernel on w_hat's memory (float64
    accumulation: :func:`_row_norms_upper`), ||w_hat_i - w_i|| <= Delta_i as in the materialised
    forms of the module docstring, summed over groups by Cauchy-Schwarz (sum_j ||U_ij|| ||G_ij||
    <= ||U_i||_F ||G_i||_F), and the result is (||w_hat_i||_ub + Delta_i)^2, inflated: at least
    ||w_i||^2 (the exact gradient) and ||w_hat_i||^2 (what the clipped sum adds up).

    ``bias``: the bias's per-sample gradients b_hat_i = sum_t g_t too (in the same precision), and
    its bound added (the bound of :func:`_sum_positions_norm_sq`, for b_i and b_hat_i alike); the
    fourth result is b_hat (B, C_out), else None.  ``scale``: ``g2`` is the output gradient of the
    mean loss, to be taken times ``scale`` (``FastLayer.grad_scale``)."""
    b = x.shape[0]
    groups = m.groups
    length = g2.shape[2]
    if _native_direct(m, x, g2, use32):
        # zero padding: the kernel pads each sample itself (no padded copy of the batch), and
        # scales g as it reads it
        if x.dim() == len(m.kernel_size) + 1:
            raise ValueError("a convolution needs a batch axis: input of shape (B, C, ...)")
        k, s, d, flat = _conv_geometry(m)
        xn = x.unsqueeze(2) if len(m.kernel_size) == 1 else x
        return _conv_native(m, xn, k, s, d, g2, bias, (flat[2], flat[3], flat[0], flat[1]), scale)
    if scale != 1:
        g2 = g2 * scale
    if use32 and max(length * x.shape[1] * math.prod(m.kernel_size), g2.shape[1] * length) * _U32 >= 0.01:
        use32 = False  # too many terms for the float32 bounds (n u_32 >= 0.01)
    xp, k, s, d = _conv_padded(m, x)
    dt = torch.float32 if use32 else _F64
    xp = xp.to(dt)
    g = g2.to(dt)
    c_in = xp.shape[1]
    if use32 and groups == 1 and _NATIVE_CONV and xp.device.type == "cpu":
        return _conv_native(m, xp, k, s, d, g, bias)
    if groups == 1:
        ut = _im2col_cl(m, xp, k, s, d)  # (B, L, k_h k_w C_in)
        w = _workspace(m, "per_sample", (b, g.shape[1], ut.shape[2]), dt, g.device)
        torch.bmm(g, ut, out=w)  # (B, C_out, k_h k_w C_in)
        a_rows = ut
        shape = ((g.shape[1], k[0], k[1], c_in), (0, 3, 1, 2))
    else:
        u = _im2col(xp, k, s, d)  # (B, C_in k, L)
        w = torch.bmm(g.reshape(b * groups, -1, length), u.reshape(b * groups, -1, length).transpose(1, 2))
        a_rows = u
        shape = None  # the weight's layout
    w = w.reshape(b, -1)
    p = w.shape[1]
    n_a = a_rows.shape[1] * a_rows.shape[2]  # T C_in k_h k_w: the entries of U_i
    n_g = g.shape[1] * length
    c_out = g.shape[1]
    if use32:
        fa = (_frob_sq(a_rows).to(_F64) + n_a * _ETA32) / (1.0 - _gamma32(n_a))
        fg = (_frob_sq(g).to(_F64) + n_g * _ETA32) / (1.0 - _gamma32(n_g))
        delta = _gamma32(length) * torch.sqrt(fa * fg) + math.sqrt(p) * length * _ETA32
        delta_ops = 16
        # the bias: b_hat = the float32 sums over the T positions, each within gamma32_T sum_t |g_t|
        # (additions do not underflow), so ||b_hat - b|| <= gamma32_T sqrt(T) ||G_i||_F
        delta_b = _gamma32(length) * torch.sqrt(length * fg) if bias else None
        ops_b = 16
    else:
        fg = _frob_sq(g)
        delta = _gamma(length) * torch.sqrt(_frob_sq(a_rows) * fg)
        delta_ops = max(n_a, n_g) + 4
        delta_b = _gamma(length) * torch.sqrt(length * fg) if bias else None  # _sum_positions_norm_sq
        ops_b = length * c_out + 4
    bound = _rows_upper(w, delta, delta_ops)
    b_hat = None
    if delta_b is not None:
        b_hat = g.sum(dim=2)  # (B, C_out)
        bound_b = _rows_upper(b_hat, delta_b, ops_b)
        bound = (bound + bound_b) * (1.0 + 8.0 * _U)
    return bound, w, shape, b_hat


def _rows_upper(rows: torch.Tensor, delta: torch.Tensor, delta_ops: int) -> torch.Tensor:
    """Upper bound of max(||w_hat_i||, ||w_i||)^2 for the rows w_hat_i of ``rows`` (B, P) with
    ||w_hat_i - w_i|| <= Delta_i (``delta``, computed in at most ``delta_ops`` operations):
    (||w_hat_i||_ub + Delta_i)^2 inflated, ||w_hat_i||_ub from dpfast's native row-norm kernel
    (CPU float32/float64), else from the float64 sum of squares (``_norm_upper``)."""
    p = rows.shape[1]
    ub = _row_norms_upper(rows)
    if ub is None:  # not CPU: the float64 sum of squares of the exactly converted entries
        return _norm_upper(_sqsum(rows.to(_F64), 1), delta, p, delta_ops=delta_ops)
    if delta_ops * _U >= 0.01:  # pragma: no cover
        raise ValueError("the layer is too large for the float64 error bound")
    r = ub + delta.to(ub.device) * (1.0 + 3.0 * (delta_ops + 4) * _U)
    return r * r * (1.0 + 16.0 * _U) + p * _TINY


def _conv_bias_norm_sq(g: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(certified upper bound of ||sum_t g_t||^2, the computed sums b_hat (B, C_out)) for float64
    g (B, C_out, T): the bound of :func:`_sum_positions_norm_sq`, which also covers ||b_hat||^2
    (s_hat is within gamma_m of it), so it holds for what the clipped sum adds up."""
    t, d = g.shape[2], g.shape[1]
    b = g.sum(dim=2)
    if t == 1:
        return _norm_upper(_sqsum(b, 1), None, d), b
    delta = _gamma(t) * torch.sqrt(t * _frob_sq(g))
    return _norm_upper(_sqsum(b, 1), delta, d, delta_ops=t * d + 4), b


@torch.no_grad()
def conv_norm_sq(m: _Conv, activations, grad_output, method: Optional[str] = None,
                 precision: Optional[str] = None, grad_scale: int = 1) -> torch.Tensor:
    """``method``: None (materialise and keep the per-sample weight gradients when they fit
    ``_KEEP_ELEMENTS``, else the cheaper form), ``"gram"`` or ``"materialise"``; ``precision``:
    None (float32 when :func:`_float32_ok`, else float64), ``"float64"`` or ``"float32"`` (falls
    back to float64 where :func:`_float32_ok` refuses); ``grad_scale``: ``FastLayer.grad_scale``."""
    _KEPT.pop(m, None)
    if precision not in (None, "float64", "float32"):
        raise ValueError(f"unknown precision {precision!r}")
    scale = _check_scale(grad_scale)
    params = _trainable(m)
    x = activations[0]
    b = x.shape[0]
    groups = m.groups
    g_in = grad_output  # as the clipped sum will receive it (the kept tensors are matched to it)
    g32 = grad_output.reshape(b, m.out_channels, math.prod(grad_output.shape[2:]))  # (B, C_out, L)
    parts = []
    kept_w = kept_shape = kept_b = None
    bias_done = False
    use32 = precision != "float64" and _float32_ok(x, grad_output)
    d_in = m.in_channels // groups * math.prod(m.kernel_size)
    method, keep = _conv_method(method, b, g32.shape[2], d_in, m.out_channels // groups, groups)
    direct = "weight" in params and b > 0 and keep and _native_direct(m, x, g32, use32)
    if scale != 1 and not direct:
        # the same products as the hooks' g * B
        grad_output = grad_output * scale
        g32 = g32 * scale
    if "weight" in params and b > 0:
        length = g32.shape[2]
        per_sample: torch.Tensor
        if keep:
            per_sample, kept_w, kept_shape, kept_b = _conv_materialised_per_example(
                m, x, g32, use32, "bias" in params, scale if direct else 1)
            bias_done = "bias" in params  # (in the bound; the sum takes it from kept_b or recomputes it)
        elif method == "materialise":
            # the same bounds as the kept form, in chunks of a fixed size (bounds only)
            step = max(1, _KEEP_ELEMENTS // (groups * d_in * (m.out_channels // groups)))
            per_sample = torch.cat([_conv_materialised_per_example(m, x[i:i + step], g32[i:i + step], use32,
                                                                   "bias" in params)[0]
                                    for i in range(0, b, step)])
            bias_done = "bias" in params
        else:
            xp, k, s, d = _conv_padded(m, x)
            u = _im2col(xp, k, s, d)  # (B, C_in k, L), exact
            # contiguous: torch's batched products of transposed views round an example's entries
            # differently with its position in the batch (225 of 300 bounds differed from the same
            # examples' bounds alone); on contiguous (T, d) blocks each example is the same bits
            a64 = u.reshape(b * groups, -1, length).transpose(1, 2).contiguous()
            g64 = g32.reshape(b * groups, -1, length).transpose(1, 2).contiguous()
            if use32:
                # a float32 overflow (a gradient beyond ~2^63) or a non-finite input: +inf, factor 0
                # for THAT example (as in _conv_materialised_per_example)
                per_group = _linear_weight_norm_sq32(a64, g64, method).view(b, groups)
                per_group = torch.where(torch.isfinite(per_group), per_group, math.inf)
            else:
                per_group = _linear_weight_norm_sq(a64.to(_F64), g64.to(_F64), method).view(b, groups)
            per_sample = per_group.sum(dim=1) * (1.0 + 4.0 * groups * _U)
        parts.append(per_sample)
    elif "weight" in params:
        parts.append(torch.zeros(0, dtype=_F64))
    if "bias" in params and not bias_done:
        bias_sq, kept_b = _conv_bias_norm_sq(g32.to(_F64))
        parts.append(bias_sq)
    total = _add_upper(parts, b)
    if kept_w is not None or ("weight" not in params and kept_b is not None):
        _KEPT[m] = _Kept(x, x._version, g_in, g_in._version, kept_w, kept_shape, kept_b, scale)
    return total


def _check_scale(grad_scale) -> int:
    """``grad_scale`` as an int in [1, 2^24] (a batch size: exact in float32, so that the products
    g * s are torch's)."""
    s = int(grad_scale)
    if s != grad_scale or not 1 <= s <= 1 << 24:
        raise ValueError(f"grad_scale must be an integer in [1, 2^24], got {grad_scale!r}")
    return s


_CONV_WEIGHT = {1: conv1d_weight, 2: conv2d_weight}


@torch.no_grad()
def conv_clipped_sum(m: _Conv, activations, grad_output, factors, grad_scale: int = 1) -> Dict[str, torch.Tensor]:
    """sum_i f_i g_i: from the per-sample gradients kept by :func:`conv_norm_sq` for these very
    tensors (weighted sums over the samples that skip the samples with factor 0, so a non-finite
    sample adds nothing), else by torch's weight-gradient convolution of the scaled output
    gradient (book-keeping)."""
    params = _trainable(m)
    x = activations[0]
    scale = _check_scale(grad_scale)
    kept = _KEPT.pop(m, None)
    if kept is not None and not (kept.x is x and kept.g is grad_output and kept.x_version == x._version
                                 and kept.g_version == grad_output._version and kept.x.shape[0] == factors.shape[0]
                                 and kept.scale == scale):
        kept = None
    if scale != 1 and (kept is None or kept.w is None or ("bias" in params and kept.bias is None)):
        grad_output = grad_output * scale  # the forms below read it (the same products as the hooks')
    nz = None
    if kept is not None:
        nz = factors != 0
        nz = None if bool(nz.all()) else nz

    def weighted_rows(rows):
        f = factors.to(device=rows.device, dtype=rows.dtype)
        if nz is not None:
            rows, f = rows[nz.to(rows.device)], f[nz.to(rows.device)]
        return f @ rows

    out = {}
    if "weight" in params:
        w = params["weight"]
        if kept is not None and kept.w is not None:
            summed = weighted_rows(kept.w)
            if kept.shape is not None:  # e.g. (C_out, k_h, k_w, C_in) -> the weight's (C_out, C_in, k_h, k_w)
                summed = summed.view(kept.shape[0]).permute(*kept.shape[1])
            out["weight"] = summed.reshape(w.shape).to(w.dtype)
        else:
            gw = _weighted(grad_output, factors, w.dtype)
            nd = len(m.kernel_size)
            if m.padding_mode == "zeros" and not isinstance(m.padding, str):
                xin, padding = x.to(w.dtype), tuple(m.padding)
            else:  # pad explicitly (non-zero modes, "same"), then no padding
                k, s, d, flat = _conv_geometry(m)
                xin = x.to(w.dtype)
                flat = flat[:2 * nd]
                if any(flat):
                    mode = "constant" if m.padding_mode == "zeros" else m.padding_mode
                    xin = F.pad(xin, flat, mode=mode)
                padding = (0,) * nd
            out["weight"] = _CONV_WEIGHT[nd](xin, w.shape, gw, stride=m.stride, padding=padding,
                                             dilation=m.dilation, groups=m.groups)
    if "bias" in params:
        dt = params["bias"].dtype
        if kept is not None and kept.bias is not None:
            out["bias"] = weighted_rows(kept.bias).to(dt)
        else:
            gb = _weighted(grad_output, factors, dt)
            out["bias"] = gb.reshape(gb.shape[0], gb.shape[1], math.prod(gb.shape[2:])).sum(dim=(0, 2))
    return out


# --------------------------------------------------------------------------------------------
# nn.Embedding


def _embedding_views(m: nn.Embedding, activations, grad_output):
    if m.scale_grad_by_freq:
        raise ValueError("Embedding(scale_grad_by_freq=True) scales each gradient by the index "
                         "counts of the whole batch, which mixes samples: per-sample gradients "
                         "are undefined (use scale_grad_by_freq=False)")
    x = activations[0]
    b = x.shape[0]
    if x.dim() == 0:
        raise ValueError("an Embedding layer needs a batch axis: indices of shape (B, ...)")
    idx = x.reshape(b, math.prod(x.shape[1:]))
    g = grad_output.reshape(b, idx.shape[1], m.embedding_dim)
    valid = None if m.padding_idx is None else idx != m.padding_idx
    return idx, g, valid


@torch.no_grad()
def embedding_norm_sq(m: nn.Embedding, activations, grad_output,
                      method: Optional[str] = None) -> torch.Tensor:
    idx, g, valid = _embedding_views(m, activations, grad_output)
    b, t, d = g.shape
    if "weight" not in _trainable(m) or b == 0:
        return torch.zeros(b, dtype=_F64)
    g64 = g.to(_F64)
    sq = _sqsum(g64, 2)  # (B, T)
    if valid is not None:
        sq = sq * valid.to(_F64)  # padding positions give no gradient
    r = torch.sqrt(sq).sum(dim=1)
    if t == 1:
        return _norm_upper(sq[:, 0], None, d + 2)
    if method is None:
        method = "gram" if t <= 8 else "rows"
    if method == "gram":
        out = torch.empty(b, dtype=_F64)
        for lo, hi in _chunks(b, t * t):
            same = idx[lo:hi].unsqueeze(2) == idx[lo:hi].unsqueeze(1)
            if valid is not None:
                same &= valid[lo:hi].unsqueeze(2) & valid[lo:hi].unsqueeze(1)
            gg = torch.bmm(g64[lo:hi], g64[lo:hi].transpose(1, 2))
            out[lo:hi] = _row_sum(same.to(_F64) * gg)
        return _gram_upper(out, r * r, d + t * t + 1)
    if method != "rows":
        raise ValueError(f"unknown method {method!r}")
    # rows of the per-sample gradient: one per distinct (sample, index); a row hit once is g_t
    # (its squared norm is sq), the rows hit several times are summed explicitly
    sample = torch.arange(b, device=idx.device).unsqueeze(1).expand(b, t)
    keys = sample.reshape(-1) * m.num_embeddings + idx.reshape(-1).to(torch.int64)
    uniq, inverse, counts = torch.unique(keys, return_inverse=True, return_counts=True)
    repeated = counts[inverse] > 1
    if valid is not None:
        repeated &= valid.reshape(-1)
    s = (sq * (~repeated).view(b, t).to(_F64)).sum(dim=1)
    pos = torch.nonzero(repeated).squeeze(1)
    if pos.numel():
        groups, local = torch.unique(inverse[pos], return_inverse=True)
        rows = torch.zeros(groups.shape[0], d, dtype=_F64, device=g.device)
        rows.index_add_(0, local, g64.reshape(-1, d)[pos])
        s.index_add_(0, torch.div(uniq[groups], m.num_embeddings, rounding_mode="floor"), _sqsum(rows, 1))
    # s adds at most t squared row norms of at most d terms each: covered by m = t d + t
    return _norm_upper(s, _gamma(t) * r, t * d + t, delta_ops=t + d + 4)


@torch.no_grad()
def embedding_clipped_sum(m: nn.Embedding, activations, grad_output, factors) -> Dict[str, torch.Tensor]:
    idx, g, valid = _embedding_views(m, activations, grad_output)
    params = _trainable(m)
    if "weight" not in params:
        return {}
    w = params["weight"]
    gw = _weighted(g, _factor_of(factors, "weight"), w.dtype)
    flat_idx, flat_g = idx.reshape(-1), gw.reshape(-1, g.shape[2])
    if valid is not None:
        keep = valid.reshape(-1)
        flat_idx, flat_g = flat_idx[keep], flat_g[keep]
    out = torch.zeros_like(w, memory_format=torch.contiguous_format)
    out.index_add_(0, flat_idx, flat_g)
    return {"weight": out}


# --------------------------------------------------------------------------------------------
# nn.LayerNorm


def _layernorm_grads(m: nn.LayerNorm, activations, grad_output):
    """float64 per-sample gradients (B, N) of weight and bias and their error bounds Delta."""
    x = activations[0]
    nshape = tuple(m.normalized_shape)
    n = math.prod(nshape)
    b = x.shape[0]
    if x.dim() <= len(nshape):
        raise ValueError("a LayerNorm layer needs a batch axis: input of shape (B, ..., *normalized_shape)")
    t = math.prod(x.shape[1:x.dim() - len(nshape)])
    x64 = x.to(_F64).reshape(b, t, n)  # (B, T, N)
    g64 = grad_output.to(_F64).reshape(b, t, n)
    t = x64.shape[1]
    mean = x64.sum(dim=2, keepdim=True) / n
    c = x64 - mean
    var = c.pow(2).sum(dim=2, keepdim=True) / n
    dhat = torch.sqrt(var + m.eps)
    xhat = c / dhat
    w_grad = (g64 * xhat).sum(dim=1)  # (B, N)
    b_grad = g64.sum(dim=1)
    # error bound of xhat, per (sample, position): module docstring
    big_m = x64.abs().amax(dim=2, keepdim=True)
    e_c = _gamma(n + 3) * big_m
    e_v = 10.0 * _gamma(n + 3) * big_m * big_m
    d2_low = torch.maximum(torch.full_like(dhat, float(m.eps)), dhat * dhat * (1.0 - 2.0 * _U) - 2.0 * e_v)
    rho_d = ((1.0 + _U) * e_v / d2_low + 3.0 * _U) * 1.01
    sqrt_n = math.sqrt(n)
    xhat_max = xhat.abs().amax(dim=2, keepdim=True)
    fallback = xhat_max + sqrt_n
    derived = (1.0 + _U) * (e_c / dhat + sqrt_n * rho_d / (1.0 - rho_d).clamp_min(0.5)) + _U * sqrt_n
    e_x = torch.where(rho_d <= 0.5, torch.minimum(derived, fallback), fallback) * 1.01
    gn = torch.sqrt(_sqsum(g64, 2, keepdim=True))  # (B, T, 1)
    delta_w = _row_sum(gn * (e_x + _gamma(t + 1) * xhat_max))
    delta_b = _gamma(t) * _row_sum(gn) if t > 1 else None
    return w_grad, b_grad, delta_w, delta_b, n, t


@torch.no_grad()
def layernorm_norm_sq(m: nn.LayerNorm, activations, grad_output) -> torch.Tensor:
    params = _trainable(m)
    b = activations[0].shape[0]
    if not params:
        return torch.zeros(b, dtype=_F64)
    return _add_upper(list(layernorm_norm_sq_parts(m, activations, grad_output).values()), b)


@torch.no_grad()
def layernorm_norm_sq_parts(m: nn.LayerNorm, activations, grad_output) -> Dict[str, torch.Tensor]:
    """Per-parameter bounds (per-layer clipping) of the weight's and the bias's squared norms."""
    params = _trainable(m)
    if not params:
        return {}
    w_grad, b_grad, delta_w, delta_b, n, t = _layernorm_grads(m, activations, grad_output)
    parts = {}
    if "weight" in params:
        parts["weight"] = _norm_upper(_sqsum(w_grad, 1), delta_w, n, delta_ops=t + n + 8)
    if "bias" in params:
        parts["bias"] = _norm_upper(_sqsum(b_grad, 1), delta_b, n, delta_ops=t + n + 4)
    return parts


@torch.no_grad()
def layernorm_clipped_sum(m: nn.LayerNorm, activations, grad_output, factors) -> Dict[str, torch.Tensor]:
    params = _trainable(m)
    if not params:
        return {}
    w_grad, b_grad, _, _, _, _ = _layernorm_grads(m, activations, grad_output)
    out = {}
    if "weight" in params:
        p = params["weight"]
        f = _factor_of(factors, "weight").to(device=w_grad.device, dtype=_F64)
        out["weight"] = (f @ w_grad).reshape(p.shape).to(p.dtype)
    if "bias" in params:
        p = params["bias"]
        f = _factor_of(factors, "bias").to(device=b_grad.device, dtype=_F64)
        out["bias"] = (f @ b_grad).reshape(p.shape).to(p.dtype)
    return out


FAST_LAYERS: dict = {
    nn.Linear: FastLayer(linear_norm_sq, linear_clipped_sum, linear_norm_sq_parts),
    nn.Conv1d: FastLayer(conv_norm_sq, conv_clipped_sum, grad_scale=True),
    nn.Conv2d: FastLayer(conv_norm_sq, conv_clipped_sum, grad_scale=True),
    nn.Embedding: FastLayer(embedding_norm_sq, embedding_clipped_sum),
    nn.LayerNorm: FastLayer(layernorm_norm_sq, layernorm_clipped_sum, layernorm_norm_sq_parts),
}
