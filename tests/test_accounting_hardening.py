"""Hardening of dpfast.accounting (issue 15 items 5, 9, 12, 13-16): native scans at extreme epsilon,
thread safety and bounded caches, search caps, amp_delta as a certified upper bound, bad input."""
import math
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import dpfast.accounting as acc
from dpfast import _pld
from dpfast.accounting import (
    Gaussian,
    Laplace,
    PLDAccountant,
    PoissonSubsampledGaussian,
    RDPAccountant,
    calibrate_noise_multiplier,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ----------------------------------------------------------------------------- item 16: scans
_HARNESS = r"""
#include "pld/pld.hpp"
#include <cmath>
#include <cstdio>
int main() {
    double p[4] = {0.1, 0.2, 0.3, 0.4}, T[4], D[4], tm1, dm1;
    dpf::pld::scan_prepare(p, 4, 0.5, T, D, &tm1, &dm1);
    double es[] = {INFINITY, 1e300, 1e18, -1e18, -1e300, -INFINITY};
    for (double e : es)
        std::printf("%.17g\n", dpf::pld::scan_delta(T, D, tm1, dm1, 4, -1.0, 0.5, 1e-9, e));
    return 0;
}
"""


def _cxx():
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")


@pytest.mark.skipif(_cxx() is None, reason="no C++ compiler (the kernels are header-only C++)")
def test_scan_delta_has_no_out_of_range_float_to_int_conversion(tmp_path):
    """Issue 15 item 16: scan_delta converted floor(eps/h - A) to long long before comparing, UB
    for eps = +-inf or +-1e300.  Compiled here with UBSan (float-cast-overflow, no recovery)."""
    src = tmp_path / "h.cpp"
    src.write_text(_HARNESS)
    exe = tmp_path / "h"
    cmd = [_cxx(), "-std=c++17", "-O1", "-fsanitize=undefined,float-cast-overflow",
           "-fno-sanitize-recover=all", "-I", os.path.join(ROOT, "csrc"), str(src), "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0 and "runtime error" not in r.stderr, r.stderr
    vals = [float(x) for x in r.stdout.split()]
    # above the grid only the +inf atom is left; below it, delta(-inf) = total mass + atom
    assert vals[:3] == [1e-9] * 3
    assert vals[3:] == [pytest.approx(1.0 + 1e-9, rel=1e-15)] * 3


def test_get_delta_at_huge_epsilon_is_the_infinite_atom():
    a = PLDAccountant(1e-3).compose(Gaussian(1.0), 3).compose(Laplace(2.0), 2)
    pess = a.composed()["remove"]
    for e in (math.inf, 1e300, 1e18):
        assert a.get_delta(e) == pess.p_inf
    # delta is non-increasing in eps and reaches the atom at the top of the grid
    es = np.array([0.0, 1.0, 10.0, 1e3, 1e300, math.inf])
    ds = [a.get_delta(float(e)) for e in es]
    assert all(x >= y for x, y in zip(ds, ds[1:]))


def test_native_scans_validate_grid_arguments():
    T, D, tm1, dm1 = _pld.scan_prepare(np.array([0.5, 0.5]), 0.1)
    for A, h, pinf in ((math.nan, 0.1, 0.0), (0.0, math.inf, 0.0), (0.0, 0.0, 0.0), (0.0, 0.1, 2.0)):
        with pytest.raises(ValueError):
            _pld.scan_delta(T, D, tm1, dm1, A, h, pinf, np.array([0.0]))
        with pytest.raises(ValueError):
            _pld.scan_epsilon(T, D, tm1, dm1, A, h, pinf, np.array([0.1]))
    with pytest.raises(ValueError, match="NaN"):
        _pld.scan_epsilon(T, D, tm1, dm1, 0.0, 0.1, 0.0, np.array([math.nan]))
