"""Red team 33/34: four dpfast.tools releases that, on data or public parameters at the edge of the
doubles, refused AFTER the budget was charged or released inf (failing-first; the fixes are in
``_bounds.bounds``, ``_statistics._edges`` / ``_midpoint`` and ``_aggregate``).

1. ``tools.bounds`` with ``scale < 1``: ``x / scale`` overflowed to +-inf for |x| near the largest
   double and the quantile mechanism refused the infinite values after the charge.  Now clamped to
   ``[-A, A]`` in the transformed space, where every finite double already lies.
2. Histograms with integer ``bins`` and a public ``range`` too narrow for its bins (equal edges)
   or too wide for a double (``hi - lo`` overflows): on Dask the budget was charged, then the
   native pass refused the edges.  Now refused by ``_edges``, before anything is read or charged.
3. ``subsample_and_aggregate``: the widened winsorized mean of block values near the largest
   double overflowed to inf (``np.mean``).  Now the mean about the centre of ``[l, u]``.
4. ``mean``/``var`` with bounds near the largest double, both of one sign: the midpoint
   ``0.5 * (lo + hi)`` was inf and the released mean inf.  Now ``_midpoint`` (the same double
   whenever ``lo + hi`` is finite).
Threat model: add/remove one row; the released values, types and whether (and when) a call raises
must depend on public parameters and released values only."""
import numpy as np
import pytest

from dpfast import PrivacyBudget, tools as TL

BIG = float(np.finfo(np.float64).max)


def _budget():
    return PrivacyBudget(100.0, 1e-6, accountant="rdp")


@pytest.mark.parametrize("scale", [0.5, 1e-3, 1e-300])
def test_bounds_with_small_scale_releases_on_values_near_the_largest_double(scale):
    x = np.array([BIG, -BIG, 0.9 * BIG, 1.0, -2.0, 0.0])
    b = _budget()
    lo, hi = TL.bounds(x, 1.0, scale=scale, rng=0, budget=b)
    assert np.isfinite(lo) and np.isfinite(hi) and lo < hi
    assert len(b.ledger) == 1
    # the neighbour without the extreme rows releases the same type: nothing tells them apart
    lo2, hi2 = TL.bounds(x[3:], 1.0, scale=scale, rng=0)
    assert type(lo2) is type(lo) and np.isfinite(lo2) and np.isfinite(hi2)


def test_bounds_axis0_with_small_scale():
    x = np.array([[BIG, 1.0], [-BIG, 2.0], [3.0, -BIG]])
    lo, hi = TL.bounds(x, 1.0, axis=0, scale=0.25, rng=1)
    assert lo.shape == hi.shape == (2,) and np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))


BAD_RANGES = [((0.0, 2e-323), 10), ((-BIG, BIG), 10), ((-BIG, BIG), 1), ((1.0, np.nextafter(1.0, 2.0)), 3)]


@pytest.mark.parametrize("rng_, bins", BAD_RANGES)
def test_histogram_range_without_valid_edges_is_refused_before_the_charge(rng_, bins):
    x = np.linspace(-1, 1, 50)
    b = _budget()
    with pytest.raises(ValueError, match="strictly increasing"):
        TL.histogram(x, 1.0, bins=bins, range=rng_, rng=0, budget=b)
    assert len(b.ledger) == 0
    with pytest.raises(ValueError, match="strictly increasing"):
        TL.histogramdd(np.c_[x, x], 1.0, bins=[bins, 2], range=[rng_, (0.0, 1.0)], rng=0, budget=b)
    assert len(b.ledger) == 0


@pytest.mark.parametrize("rng_, bins", BAD_RANGES)
def test_dask_histogram_range_without_valid_edges_is_refused_before_the_charge(rng_, bins):
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.linspace(-1, 1, 50), chunks=20)
    b = _budget()
    with pytest.raises(ValueError, match="strictly increasing"):
        TL.histogram(x, 1.0, bins=bins, range=rng_, rng=0, budget=b)
    assert len(b.ledger) == 0


def test_histogram_range_with_valid_edges_still_releases():
    # the narrowest range whose edges are distinct doubles is public and fine
    lo = 1.0
    hi = lo
    for _ in range(4):
        hi = np.nextafter(hi, 2.0)
    counts, edges = TL.histogram(np.array([1.0, 2.0]), 1.0, bins=2, range=(lo, hi), rng=0)
    assert counts.shape == (2,) and np.all(np.diff(edges) > 0)


def test_subsample_and_aggregate_near_the_largest_double_is_finite():
    lo, hi = 0.95 * BIG, BIG  # a width the noise scale allows (hi - lo)/epsilon <= DBL_MAX/40
    x = np.arange(4000.0)
    b = _budget()
    out = TL.subsample_and_aggregate(lambda rows: 0.97 * BIG, x, 10.0, bounds=(lo, hi), n_blocks=20,
                                     rng=0, budget=b)
    assert np.isfinite(out)
    # the aggregate of blocks that all equal v is v plus Laplace noise of scale 2 (u - l)/(k eps),
    # u - l <= hi - lo: within 40 scales of v with probability 1 - e^-40
    assert abs(out - 0.97 * BIG) <= 40 * 2 * (hi - lo) / (20 * 10.0)


def test_widened_winsorized_mean_keeps_its_bits_for_ordinary_values():
    # the overflow path is taken only when np.mean is not finite: ordinary data keep the same double
    from dpfast.tools._aggregate import widened_winsorized_mean
    z = np.random.default_rng(5).normal(2.0, 1.0, 400)
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    got = widened_winsorized_mean(z, 5.0, -10.0, 10.0, g1)
    # independent: the algorithm written out (AW Alg. 2) with the same draws
    from dpfast.mechanisms import laplace_noise, private_quantile
    from dpfast.tools._aggregate import widened_range
    a, bq = np.asarray(private_quantile(z, [0.25, 0.75], 2.5, (-10.0, 10.0), g2))
    l_, u_ = widened_range(float(a), float(bq), z.size, -10.0, 10.0)
    want = float(np.mean(np.clip(z, l_, u_))) + float(laplace_noise(1.0, rng=g2)) * 2.0 * (u_ - l_) / (z.size * 5.0)
    assert got == pytest.approx(want, rel=1e-15, abs=0)


@pytest.mark.parametrize("func", ["mean", "nanmean"])
def test_moments_with_bounds_near_the_largest_double_are_finite(func):
    lo, hi = 0.9 * BIG, BIG  # a width the noise scale allows
    x = np.full(100, 0.95 * BIG)
    v = getattr(TL, func)(x, 10.0, (lo, hi), rng=0)
    assert np.isfinite(v) and lo <= v <= hi


@pytest.mark.parametrize("func", ["var", "std"])
def test_second_moments_with_too_wide_a_square_are_refused_before_the_charge(func):
    # the variance's noise scale r^2 / epsilon overflows for these bounds: public, refused first
    b = _budget()
    with pytest.raises(ValueError, match="noise scale"):
        getattr(TL, func)(np.full(10, 0.95 * BIG), 10.0, (0.9 * BIG, BIG), rng=0, budget=b)
    assert len(b.ledger) == 0


def test_midpoint_is_the_same_double_when_the_sum_is_finite():
    from dpfast.tools._statistics import _midpoint
    rng = np.random.default_rng(2)
    for lo, hi in rng.uniform(-1e6, 1e6, (200, 2)):
        assert _midpoint(lo, hi) == 0.5 * (lo + hi)
    assert _midpoint(0.5 * BIG, BIG) == 0.75 * BIG
    assert _midpoint(-BIG, -0.5 * BIG) == -0.75 * BIG
    lo_a, hi_a = np.array([1.0, 0.5 * BIG]), np.array([3.0, BIG])
    np.testing.assert_array_equal(_midpoint(lo_a, hi_a), [2.0, 0.75 * BIG])
