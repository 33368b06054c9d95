// GLM losses in the margin z = x.theta (spec objective_perturbation.md, "Setting" and
// "Algorithm 1", step 1).  Every loss is convex in z; value, first and second derivative
// in z, and the gradient-clipped version l_C of Algorithm 1: for a row with norm ||x||,
// the derivative is clamped to [-c, c] with c = C / ||x||, i.e. the loss is continued
// linearly beyond the points where |l'| = c (Song et al. 2020).  No Python here.
#pragma once
#include <cmath>
#include <limits>

namespace dpf {
namespace glm {

enum class Loss : int { logistic = 0, squared = 1, huber = 2, smoothed_hinge = 3 };

// log(1 + exp(-m)) and sigma(-m) = 1 / (1 + exp(m)) with one exp, stable for all m.
inline void logistic_m(double m, double& val, double& sneg) {
    if (m > 0) {
        const double e = std::exp(-m);
        val = std::log1p(e);
        sneg = e / (1.0 + e);
    } else {
        const double e = std::exp(m);
        val = -m + std::log1p(e);
        sneg = 1.0 / (1.0 + e);
    }
}

struct LossParams {
    Loss loss = Loss::logistic;
    double delta = 1.0;  // Huber threshold
};

// Value and first derivative in z of the unclipped loss.
//  logistic:        log(1 + exp(-y z)),                      y in {-1, +1}
//  squared:         (z - y)^2 / 2
//  huber:           r^2/2 if |r| <= delta else delta (|r| - delta/2), r = z - y
//  smoothed_hinge:  (Rennie & Srebro 2005) with m = y z: 1/2 - m (m <= 0),
//                   (1 - m)^2 / 2 (0 < m < 1), 0 (m >= 1)
inline void value_deriv(const LossParams& p, double z, double y, double& val, double& der) {
    switch (p.loss) {
        case Loss::logistic: {
            double s;
            logistic_m(y * z, val, s);
            der = -y * s;
            return;
        }
        case Loss::squared: {
            const double r = z - y;
            val = 0.5 * r * r;
            der = r;
            return;
        }
        case Loss::huber: {
            const double r = z - y, a = std::fabs(r), dl = p.delta;
            if (a <= dl) {
                val = 0.5 * r * r;
                der = r;
            } else {
                val = dl * (a - 0.5 * dl);
                der = r > 0 ? dl : -dl;
            }
            return;
        }
        case Loss::smoothed_hinge: {
            const double m = y * z;
            if (m >= 1.0) {
                val = 0.0;
                der = 0.0;
            } else if (m <= 0.0) {
                val = 0.5 - m;
                der = -y;
            } else {
                const double u = 1.0 - m;
                val = 0.5 * u * u;
                der = -y * u;
            }
            return;
        }
    }
    val = der = std::numeric_limits<double>::quiet_NaN();
}

// Second derivative in z of the unclipped loss (0 at the kinks' outer side).
inline double second_deriv(const LossParams& p, double z, double y) {
    switch (p.loss) {
        case Loss::logistic: {
            double v, s;
            logistic_m(y * z, v, s);
            return s * (1.0 - s) * y * y;
        }
        case Loss::squared:
            return 1.0;
        case Loss::huber:
            return std::fabs(z - y) <= p.delta ? 1.0 : 0.0;
        case Loss::smoothed_hinge: {
            const double m = y * z;
            return (m > 0.0 && m < 1.0) ? y * y : 0.0;
        }
    }
    return std::numeric_limits<double>::quiet_NaN();
}

// Gradient-clipped loss: value and derivative of l_C at z for derivative bound c > 0
// (c = C / ||x||; c = +inf means no clipping).  Where |l'(z)| <= c, l_C = l.  Beyond the
// breakpoint z0 with |l'(z0)| = c, l_C(z) = l(z0) + l'(z0) (z - z0) with |l'(z0)| = c.
// The second output `clipped` is true when z lies in the linear part (l_C'' = 0 there).
inline void clipped_value_deriv(const LossParams& p, double z, double y, double c, double& val,
                                double& der, bool& clipped) {
    value_deriv(p, z, y, val, der);
    clipped = false;
    if (!(std::fabs(der) > c)) return;  // also false for c = inf
    clipped = true;
    switch (p.loss) {
        case Loss::logistic: {
            // In m = y z: dl/dm = -sigma(-m); |.| > c iff m < m0 = log((1 - c) / c) (c < 1).
            const double m = y * z, m0 = std::log1p(-c) - std::log(c);
            double v0, s0;
            logistic_m(m0, v0, s0);
            val = v0 + c * (m0 - m);
            der = -y * c;
            return;
        }
        case Loss::squared: {
            // Huber with threshold c.
            const double r = z - y, a = std::fabs(r);
            val = c * (a - 0.5 * c);
            der = r > 0 ? c : -c;
            return;
        }
        case Loss::huber: {
            // |l'| > c only where min(|r|, delta) > c: Huber with threshold c (< delta).
            const double r = z - y, a = std::fabs(r);
            val = c * (a - 0.5 * c);
            der = r > 0 ? c : -c;
            return;
        }
        case Loss::smoothed_hinge: {
            // In m: dl/dm = -min(1, max(0, 1 - m)); |.| > c (c < 1) iff m < 1 - c.
            const double m = y * z, m0 = 1.0 - c;
            val = 0.5 * c * c + c * (m0 - m);
            der = -y * c;
            return;
        }
    }
}

// Bounds in the margin for |y| <= 1 labels as the callers validate them:
// lipschitz = sup |l'| (inf for the squared loss), smooth = sup l''.
inline void loss_constants(const LossParams& p, double& lipschitz, double& smooth) {
    lipschitz = smooth = std::numeric_limits<double>::quiet_NaN();
    switch (p.loss) {
        case Loss::logistic:
            lipschitz = 1.0;
            smooth = 0.25;
            return;
        case Loss::squared:
            lipschitz = std::numeric_limits<double>::infinity();
            smooth = 1.0;
            return;
        case Loss::huber:
            lipschitz = p.delta;
            smooth = 1.0;
            return;
        case Loss::smoothed_hinge:
            lipschitz = 1.0;
            smooth = 1.0;
            return;
    }
}

}  // namespace glm
}  // namespace dpf
