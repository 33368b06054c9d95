// Continuous noise samplers of the Laplace and Gaussian mechanisms (the fast path).
//
// NOT floating-point safe: the outputs are IEEE doubles computed with log/exp, whose
// low-order bits can leak the input (Mironov 2012).  The floating-point-safe samplers are
// the discrete Laplace/Gaussian and snapping kernels (csrc/samplers/, dpfast.mechanisms).
//
// Spec: mechanisms.md "Samplers" (Laplace, Gaussian); lectures.md B2-B4.
//
// The samplers are the package's one family (random/distributions.hpp: standard_laplace, the
// 256-layer normal ziggurat, standard_exponential, standard_gumbel) and the vectorized kernel is
// the one deterministic block-parallel fill (random/noise_fill.hpp add_noise): random words come
// from one dpf::BitStream (a NumPy bit generator, the caller holds its lock), and the output is
// a function of the stream and n only, never of the number of threads.
#pragma once
#include "random/distributions.hpp"
#include "random/noise_fill.hpp"
