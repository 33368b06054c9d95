"""The GLM kernels are compiled twice, for baseline x86-64 and for AVX2, and one is chosen at run
time (csrc/solvers/glm_solvers.hpp).  Machines without AVX2 (and aarch64, macOS, Windows wheels)
only ever run the baseline build, so it must give the same numbers as the dispatched one.

Both builds do the same operations in the same order without contraction into FMA
(``-ffp-contract=off``), so the comparison is exact: every value, bit for bit.  The baseline is
forced with ``DPFAST_GLM_NO_AVX2=1`` in a subprocess (the choice is made once per process).
"""
import json
import os
import subprocess
import sys

import pytest

# Every kernel behind the dispatch: loss_grad for each loss, dense C and Fortran order in
# float64 and float32 (d = 13: full 8- and 4-lane blocks plus a scalar tail), CSR, with and
# without the gradient clipping, weights and the quadratic term; solve() for L-BFGS, SAG, SAGA.
_CODE = r"""
import json, numpy as np, scipy.sparse as sp
from dpfast import _glm
from dpfast._solver import glm_loss_and_grad, minimize_glm, LOSSES
rng = np.random.default_rng(20261125)
n, d = 1003, 13
X = rng.normal(size=(n, d))
y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
w = rng.uniform(0.5, 2.0, size=n)
theta = rng.normal(size=d)
Q = np.diag(rng.uniform(0.0, 1.0, size=d))
layouts = {
    "C64": X, "F64": np.asfortranarray(X), "C32": X.astype(np.float32),
    "F32": np.asfortranarray(X, dtype=np.float32),
    "CSR": sp.csr_matrix(np.where(np.abs(X) > 0.8, X, 0.0)),
}
out = {"has_avx2": bool(_glm.has_avx2)}
hexs = lambda a: [float(v).hex() for v in np.ravel(a)]
for loss in LOSSES:
    for name, Xl in layouts.items():
        for clip in (None, 0.5):
            f, g = glm_loss_and_grad(Xl, y, loss, theta, alpha=0.1, clip_norm=clip, sample_weight=w, quadratic=Q)
            out[f"grad/{loss}/{name}/{clip}"] = hexs([f]) + hexs(g)
for solver in ("lbfgs", "sag", "saga"):
    for name in ("C64", "F32", "CSR"):
        r = minimize_glm(layouts[name], y, "logistic", alpha=1.0, clip_norm=0.5, tol=1e-9, solver=solver, rng=3)
        out[f"solve/{solver}/{name}"] = hexs(r.coef)
print(json.dumps(out))
"""


def _run(no_avx2: str) -> dict:
    env = dict(os.environ, DPFAST_GLM_NO_AVX2=no_avx2)
    p = subprocess.run([sys.executable, "-c", _CODE], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def both():
    return _run("0"), _run("1")


@pytest.mark.slow
def test_baseline_is_forced(both):
    dispatched, baseline = both
    assert baseline["has_avx2"] is False
    # where the CPU has AVX2 (and GCC built the AVX2 variant), the ordinary run uses it:
    # otherwise this file would compare the baseline with itself
    if sys.platform.startswith("linux") and "avx2" in open("/proc/cpuinfo").read().split():
        try:
            import sysconfig

            gcc = "GCC" in sys.version or "gcc" in (sysconfig.get_config_var("CC") or "")
        except Exception:  # pragma: no cover - sysconfig always answers on Linux
            gcc = False
        if gcc:
            assert dispatched["has_avx2"] is True


@pytest.mark.slow
def test_baseline_kernels_bit_identical(both):
    dispatched, baseline = both
    keys = [k for k in dispatched if k != "has_avx2"]
    assert len(keys) == 4 * 5 * 2 + 3 * 3
    differ = [k for k in keys if dispatched[k] != baseline[k]]
    assert differ == [], differ
