"""Differentially private mechanisms with vectorized NumPy inputs (see :doc:`/theory/mechanisms`).

One module per family; everything public is re-exported here and at ``dpfast``'s top level.

==========================  ==============================================================
module                      holds
==========================  ==============================================================
``continuous``              Laplace and Gaussian (analytic / classical) noise, fast path
``randomized_response``     binary and k-ary randomized response, unbiased frequency estimates
``discrete``                exact discrete Laplace / Gaussian samplers (Canonne, Kamath &
                            Steinke 2020) and their mechanisms on a lattice
``snapping``                the snapping mechanism (Mironov 2012) for real-valued Laplace
``selection``               exponential mechanism (Gumbel-max), report-noisy-max, top-k, streaming
``quantile``                private quantiles and the median (Smith 2011)
``staircase``               the staircase mechanism (Geng & Viswanath 2016), optimal pure-DP noise,
                            continuous and discrete (integer queries, exact sampler)
``bounded``                 truncated / folded / bounded-domain Laplace (Holohan et al. 2018) and
                            truncated / folded geometric: outputs in a public interval
``bingham``                 exact Bingham sampler (Kent, Ganeiber & Mardia 2018) and the Bingham
                            mechanism for the top principal direction (Chaudhuri et al. 2013)
==========================  ==============================================================

Privacy budgets: every mechanism takes ``budget=`` (keyword-only) and charges its event to it
(or to the ``with budget:`` default) before drawing any noise; :func:`event_of` returns the
event of a call without drawing or charging (rules in :mod:`dpfast.mechanisms._events`).

The floating-point-safe samplers (``discrete_*``, ``snapping``) are the ones to pair with
:class:`dpfast.random.SecureRandom`; see :mod:`dpfast.random`.
"""
from dpfast.mechanisms._events import event_of
from dpfast.mechanisms.bingham import bingham, bingham_sample
from dpfast.mechanisms.bounded import (
    bounded_laplace,
    bounded_laplace_scale,
    folded_geometric,
    folded_laplace,
    truncated_geometric,
    truncated_laplace,
)
from dpfast.mechanisms.continuous import gaussian, gaussian_noise, laplace, laplace_noise
from dpfast.mechanisms.discrete import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_delta,
    discrete_gaussian_mechanism,
    discrete_gaussian_sigma2,
    discrete_laplace,
    discrete_laplace_mechanism,
    zcdp_delta,
)
from dpfast.mechanisms.quantile import private_median, private_quantile
from dpfast.mechanisms.randomized_response import (
    randomized_response,
    randomized_response_debias,
    randomized_response_probabilities,
)
from dpfast.mechanisms.selection import (
    ExponentialMechanismStream,
    exponential_mechanism,
    exponential_mechanism_stream,
    report_noisy_max,
    top_k,
)
from dpfast.mechanisms.snapping import snapping, snapping_epsilon, snapping_scale
from dpfast.mechanisms.staircase import discrete_staircase, discrete_staircase_r, staircase, staircase_gamma

__all__ = [
    "event_of",
    "laplace",
    "gaussian",
    "laplace_noise",
    "gaussian_noise",
    "randomized_response",
    "randomized_response_debias",
    "randomized_response_probabilities",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "discrete_laplace_mechanism",
    "discrete_gaussian_mechanism",
    "discrete_gaussian_sigma2",
    "discrete_gaussian_delta",
    "zcdp_delta",
    "snapping",
    "snapping_epsilon",
    "snapping_scale",
    "exponential_mechanism",
    "exponential_mechanism_stream",
    "ExponentialMechanismStream",
    "report_noisy_max",
    "top_k",
    "private_quantile",
    "private_median",
    "staircase",
    "staircase_gamma",
    "discrete_staircase",
    "discrete_staircase_r",
    "truncated_laplace",
    "folded_laplace",
    "bounded_laplace",
    "bounded_laplace_scale",
    "truncated_geometric",
    "folded_geometric",
    "bingham",
    "bingham_sample",
]
