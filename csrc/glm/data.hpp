// Views of the design matrix (no ownership, no copies) and of the GLM objective
//   F(theta) = sum_i w_i l_C(y_i, x_i.theta) + (alpha/2)||theta||^2 + linear.theta
//              + (1/2) theta^T Q theta
// (Redberg, Koskela & Wang 2024, Section 3 and Algorithm 1; docs/theory/erm.rst).  No Python here.
#pragma once
#include <cstdint>

#include "losses/losses.hpp"

namespace dpf {
namespace glm {

// Row-major dense X: x_ij = X[i * d + j].
template <class T>
struct DenseC {
    using value_type = T;
    const T* X;
    int64_t n, d;
};

// Column-major dense X: x_ij = X[i + j * n].
template <class T>
struct DenseF {
    using value_type = T;
    const T* X;
    int64_t n, d;
};

// CSR X (scipy layout): row i holds data[indptr[i] .. indptr[i+1]) at columns indices[...].
template <class T, class I>
struct CSR {
    using value_type = T;
    const T* data;
    const I* indices;
    const I* indptr;
    int64_t n, d;
};

struct Objective {
    dpf::loss::LossParams lp;
    int64_t n = 0, d = 0;
    const double* y = nullptr;       // (n,)
    const double* w = nullptr;       // (n,) or null (all ones)
    const double* cbound = nullptr;  // (n,) per-row derivative bound C/||x_i|| or null (no clipping)
    double alpha = 0.0;
    const double* linear = nullptr;  // (d,) or null
    const double* Q = nullptr;       // (d, d) row-major symmetric or null
    // Row map and intercept applied inside the kernels (dense views only), so that the design
    // [rscale_i x_i, icpt] is never materialised: the view holds dx = d - (icpt != 0) stored
    // columns, row i is scaled by rscale[i] (null: 1), and when icpt != 0 a constant feature
    // icpt is appended as coordinate dx of theta.
    const double* rscale = nullptr;  // (n,) or null
    double icpt = 0.0;

    // Weighted (clipped) loss value and derivative in z of row i.
    inline void row(int64_t i, double z, double& val, double& der) const {
        if (cbound) {
            bool cl;
            dpf::loss::clipped_value_deriv(lp, z, y[i], cbound[i], val, der, cl);
        } else {
            dpf::loss::value_deriv(lp, z, y[i], val, der);
        }
        if (w) {
            val *= w[i];
            der *= w[i];
        }
    }
};

}  // namespace glm
}  // namespace dpf
