"""dpfast.tree: the random-tree engine (dpfast.tree.random_trees, dpfast._trees) and
DecisionTreeClassifier -- the data-independence of the trees, the sensitivity of the leaf counts,
the laws of the two leaf releases, the native kernel against a NumPy reference, bit-identity
across thread counts, the binding's checks, pandas input, the event and the budget."""
import math

import numpy as np
import pytest
from scipy import stats

from dpfast import PrivacyBudget, _trees
from dpfast.budget import BudgetExceededError
from dpfast.tree import DecisionTreeClassifier, random_trees as RT


def _data(n=300, d=3, k=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = ((X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)) % k
    return X, y


def _reference_counts(X, y, K, feature, threshold, depth, tree_of_row=None):
    """NumPy reference of the native leaf counts."""
    T = feature.shape[0]
    out = np.zeros((T, 1 << depth, K), dtype=np.int64)
    for t in range(T):
        rows = np.arange(len(y)) if tree_of_row is None else np.flatnonzero(tree_of_row == t)
        node = np.zeros(rows.size, dtype=np.int64)
        for _ in range(depth):
            node = 2 * node + 1 + (X[rows, feature[t, node]] > threshold[t, node])
        np.add.at(out[t], (node - ((1 << depth) - 1), y[rows]), 1)
    return out


def _forest(seed=0, d=3, T=3, depth=4):
    gen = np.random.default_rng(seed)
    return RT.draw_forest(gen, np.full(d, -1.0), np.full(d, 1.0), T, depth)


def test_native_counts_and_routing_match_the_reference():
    X, y = _data(5000, 4, 3)
    f, th = _forest(1, 4, 5, 6)
    np.testing.assert_array_equal(RT.leaf_counts(X, y, 3, f, th, 6), _reference_counts(X, y, 3, f, th, 6))
    part = np.random.default_rng(2).integers(0, 5, size=5000)
    np.testing.assert_array_equal(RT.leaf_counts(X, y, 3, f, th, 6, part), _reference_counts(X, y, 3, f, th, 6, part))
    leaves = RT.route(X, f, th, 6)
    for t in range(5):
        ref = _reference_counts(X, np.zeros(5000, dtype=np.int64), 1, f[t:t + 1], th[t:t + 1], 6)[0, :, 0]
        np.testing.assert_array_equal(np.bincount(leaves[:, t], minlength=64), ref)
    # a strided view routes like its copy
    Xw = np.repeat(X, 2, axis=1)[:, ::2]
    np.testing.assert_array_equal(RT.route(np.ascontiguousarray(Xw), f, th, 6), leaves)


def test_splits_lie_inside_their_node_box():
    """Every threshold lies in its feature's range in the node's box: the public bounds narrowed
    by the splits on the path from the root."""
    lo, hi = np.array([-1.0, 0.0, 10.0]), np.array([1.0, 5.0, 11.0])
    f, th = RT.draw_forest(np.random.default_rng(3), lo, hi, 4, 6)
    for t in range(4):
        boxes = {0: (lo.copy(), hi.copy())}
        for i in range((1 << 6) - 1):
            blo, bhi = boxes.pop(i)
            j = f[t, i]
            assert blo[j] <= th[t, i] <= bhi[j]
            left_hi, right_lo = bhi.copy(), blo.copy()
            left_hi[j] = right_lo[j] = th[t, i]
            boxes[2 * i + 1], boxes[2 * i + 2] = (blo, left_hi), (right_lo, bhi)


@pytest.mark.parametrize("mech", ["counts", "label", "auto"])
def test_trees_do_not_depend_on_the_data(mech):
    """The shape, features and thresholds are drawn from random_state alone: two unrelated data
    sets of different sizes get the same trees."""
    X1, y1 = _data(50, 3, 2, seed=1)
    X2, y2 = _data(400, 3, 2, seed=2)
    m1 = DecisionTreeClassifier(1.0, (-1, 1), max_depth=4, leaf_mechanism=mech, random_state=7).fit(X1, y1)
    m2 = DecisionTreeClassifier(1.0, (-1, 1), max_depth=4, leaf_mechanism=mech, random_state=7).fit(X2, y2)
    np.testing.assert_array_equal(m1.feature_, m2.feature_)
    np.testing.assert_array_equal(m1.threshold_, m2.threshold_)


def test_one_row_moves_one_count_per_tree():
    """Adding any row (at the bounds, outside them, anywhere) changes the all-trees count table
    by exactly one count per tree, by +1 (l1 sensitivity n_trees); with a tree per row, by one
    count in all (sensitivity 1)."""
    X, y = _data(200, 3, 3)
    T, D, K = 4, 5, 3
    f, th = _forest(5, 3, T, D)
    base = RT.leaf_counts(X, y, K, f, th, D)
    rng = np.random.default_rng(6)
    rows = [rng.uniform(-1.5, 1.5, 3) for _ in range(100)] + [np.full(3, -1.0), np.full(3, 1.0), np.full(3, 9.0)]
    for row in rows:
        c = int(rng.integers(K))
        moved = RT.leaf_counts(np.vstack([X, row]), np.append(y, c), K, f, th, D) - base
        assert moved.min() == 0 and moved.sum() == T
        assert np.all(moved.reshape(T, -1).sum(axis=1) == 1)  # one count in every tree
        assert np.all(moved[..., np.arange(K) != c] == 0)  # in the row's class
        part = rng.integers(0, T, size=201)
        b1 = RT.leaf_counts(X, y, K, f, th, D, part[:200])
        m1 = RT.leaf_counts(np.vstack([X, row]), np.append(y, c), K, f, th, D, part) - b1
        assert m1.min() == 0 and m1.sum() == 1


def test_rows_outside_the_bounds_route_as_if_clamped():
    X, _ = _data(500, 3)
    f, th = _forest(8, 3, 3, 6)
    Xo = X * 3.0
    np.testing.assert_array_equal(RT.route(Xo, f, th, 6), RT.route(np.clip(Xo, -1, 1), f, th, 6))


def test_counts_release_follows_the_discrete_laplace_law():
    """leaf_counts_ - exact counts is i.i.d. discrete Laplace with scale n_trees / epsilon:
    P[Y = y] = (1 - p) / (1 + p) p^|y|, p = exp(-epsilon / n_trees).  Frequencies of -3..3 over
    N draws are within 4.5 standard errors sqrt(P (1 - P) / N)."""
    from dpfast.ensemble import RandomForestClassifier

    X, y = _data(100, 2, 2)
    eps, T, D = 2.0, 2, 6
    noise = []
    for s in range(12):
        m = RandomForestClassifier(eps, (-1, 1), n_estimators=T, max_depth=D, leaf_mechanism="counts",
                                   random_state=s).fit(X, y)
        noise.append((m.leaf_counts_ - RT.leaf_counts(X, y, 2, m.feature_, m.threshold_, D)).ravel())
    noise = np.concatenate(noise)
    N = noise.size
    p = math.exp(-eps / T)
    for v in range(-3, 4):
        P = (1 - p) / (1 + p) * p ** abs(v)
        assert abs(np.mean(noise == v) - P) <= 4.5 * math.sqrt(P * (1 - P) / N), v


@pytest.mark.slow
def test_label_release_follows_the_permute_and_flip_law():
    """max_depth=0 is one leaf holding every row; the released label is permute-and-flip over
    the class counts: P(i) = p_i * integral_0^1 prod_{j != i} (1 - p_j t) dt with
    p_j = exp(epsilon (c_j - max c)) (monotone utility, sensitivity 1).  Counts (3, 1, 0) at
    epsilon 0.5; frequencies over N fits within 4.5 standard errors."""
    X = np.zeros((4, 1))
    y = np.array([0, 0, 0, 1])
    eps, N = 0.5, 1000
    labels = np.array([DecisionTreeClassifier(eps, (-1, 1), classes=[0, 1, 2], max_depth=0, leaf_mechanism="label",
                                              random_state=s).fit(X, y).leaf_labels_[0, 0] for s in range(N)])
    c = np.array([3.0, 1.0, 0.0])
    pj = np.exp(eps * (c - c.max()))
    t = np.linspace(0, 1, 20001)
    for i in range(3):
        integrand = pj[i] * np.prod([1 - pj[j] * t for j in range(3) if j != i], axis=0)
        P = np.trapezoid(integrand, t)
        assert abs(np.mean(labels == i) - P) <= 4.5 * math.sqrt(P * (1 - P) / N), (i, P)


def test_label_release_of_a_clear_majority():
    """Fast companion of the law test: counts (40, 0) at epsilon 1 give label 0 with
    probability 1 - e^-40 / 2 under permute-and-flip."""
    X, y = np.zeros((40, 1)), np.zeros(40, dtype=int)
    for s in range(20):
        m = DecisionTreeClassifier(1.0, (-1, 1), max_depth=0, leaf_mechanism="label", random_state=s).fit(X, y)
        assert m.leaf_labels_[0, 0] == 0 and m.predict(X[:1])[0] == 0


def test_auto_count_law_and_choice():
    """"auto" releases n + discrete Laplace(1 / (s epsilon)) with s = auto_count_share(depth) and
    takes "label" exactly when noisy n * epsilon_leaf < sqrt(2) * n_trees * 2^depth."""
    X, y = _data(300, 2, 2)
    eps, D = 1.0, 3
    share = RT.auto_count_share(D)
    ns, picks = [], []
    for s in range(60):
        m = DecisionTreeClassifier(eps, (-1, 1), max_depth=D, leaf_mechanism="auto", random_state=s).fit(X, y)
        ns.append(m.n_samples_noisy_ - 300)
        picks.append(m.leaf_mechanism_ == RT.auto_mechanism(m.n_samples_noisy_, eps * (1 - share), 1, D))
        assert hasattr(m, "leaf_counts_") == (m.leaf_mechanism_ == "counts") and m.n_estimators_ == 1
    assert all(picks)
    b = 1.0 / (eps * share)
    assert stats.kstest(np.array(ns), stats.laplace(scale=b).cdf).pvalue > 1e-4  # discrete, scale 9.5: near-continuous
    assert RT.auto_mechanism(10, 0.1, 10, 5) == "label" and RT.auto_mechanism(10**5, 1.0, 10, 5) == "counts"
    # the boundary: rho = n epsilon / (T 2^D) = sqrt(2)
    assert RT.auto_mechanism(45, 1.0, 1, 5) == "label" and RT.auto_mechanism(46, 1.0, 1, 5) == "counts"
    assert RT.auto_mechanism(90, 1.0, 2, 5) == "label" and RT.auto_mechanism(91, 1.0, 2, 5) == "counts"


def test_auto_count_share_is_the_derived_optimum():
    """s(D) = argmin_s s + 1 / (s n epsilon)^2 at n epsilon = 2 * 2^D (checked by a grid search,
    not by the closed form), capped at 1/2."""
    grid = np.linspace(1e-4, 0.9, 200001)
    for D in (1, 3, 5, 8):
        ne = RT.AUTO_RHO_TREES * 2.0 ** D
        best = grid[np.argmin(grid + 1.0 / (grid * ne) ** 2)]
        assert RT.auto_count_share(D) == pytest.approx(best, abs=1e-4), D
    assert RT.auto_count_share(0) == 0.5


def test_auto_n_trees_is_the_integer_minimiser_of_the_risk():
    """n_estimators="auto": T minimises 1 / T + T / T*^2 over the integers 1..cap (brute force),
    T* = n epsilon / (2 * 2^D); clipped to [1, cap]; monotone in n."""
    for D in (0, 2, 5):
        for n in list(range(0, 200)) + [10**3, 10**4, 10**6]:
            for eps in (0.1, 1.0, 7.0):
                ts = n * eps / (RT.AUTO_RHO_TREES * 2 ** D)
                if ts == 0:
                    assert RT.auto_n_trees(n, eps, D, 100) == 1
                    continue
                Ts = np.arange(1, 101)
                risk = 1.0 / Ts + Ts / ts ** 2
                expect = int(Ts[np.argmin(risk)])
                got = RT.auto_n_trees(n, eps, D, 100)
                assert got == expect or np.isclose(risk[got - 1], risk[expect - 1], rtol=1e-12), (D, n, eps)
    assert RT.auto_n_trees(-5, 1.0, 3, 10) == 1 and RT.auto_n_trees(10**9, 1.0, 3, 7) == 7
    assert [RT.auto_n_trees(n, 1.0, 1, 100) for n in range(0, 40, 4)] == sorted(
        RT.auto_n_trees(n, 1.0, 1, 100) for n in range(0, 40, 4))


def test_auto_reads_the_data_only_through_the_noisy_count():
    """Sensitivity of the "auto" piece, by constructing neighbours.  Everything "auto" decides --
    the forest size, the leaf release, the trees -- is a function of the seed and the released
    count n~: unrelated data sets of the same size get the same decisions; and adding one row
    moves n~ by exactly 1 for the same seed (the count is n + noise drawn independently of n:
    sensitivity 1, the discrete Laplace law is tested above)."""
    from dpfast.ensemble import RandomForestClassifier

    X1, y1 = _data(400, 3, 2, seed=1)
    X2, y2 = _data(400, 3, 2, seed=2)
    rng = np.random.default_rng(9)
    for s in range(20):
        fits = []
        for X, y in ((X1, y1), (X2, y2), (np.vstack([X1, rng.uniform(-2, 2, (1, 3))]), np.append(y1, s % 2))):
            fits.append(RandomForestClassifier(2.0, (-1, 1), max_depth=2, random_state=s).fit(X, y))
        a, b, c = fits
        assert (a.n_samples_noisy_, a.n_estimators_, a.leaf_mechanism_) == \
            (b.n_samples_noisy_, b.n_estimators_, b.leaf_mechanism_)
        np.testing.assert_array_equal(a.threshold_, b.threshold_)
        assert c.n_samples_noisy_ - a.n_samples_noisy_ == 1
        eps_leaf = 2.0 * (1 - RT.auto_count_share(2))
        assert c.n_estimators_ == RT.auto_n_trees(c.n_samples_noisy_, eps_leaf, 2, RT.AUTO_MAX_TREES)
        assert a.n_estimators_ == RT.auto_n_trees(a.n_samples_noisy_, eps_leaf, 2, RT.AUTO_MAX_TREES)


def test_auto_label_x_maximises_the_vote_signal_to_noise_ratio():
    """x*(K) maximises (1 - (K/2) e^-x)^2 / x (the per-trees ratio T (1 - (K/2) e^(-a/T))^2 over a
    at T = a / x), checked by a grid search, not by the root equation the code solves."""
    grid = np.linspace(0.05, 12.0, 400001)
    for K in (2, 3, 4, 10):
        best = grid[np.argmax(np.maximum(0.0, 1.0 - K / 2 * np.exp(-grid)) ** 2 / grid)]
        assert RT.auto_label_x(K) == pytest.approx(best, abs=1e-4), K
    assert RT.auto_label_x(1) == RT.auto_label_x(2)  # one class: the two-class bound


def test_auto_n_trees_label_is_the_integer_maximiser_of_the_vote_ratio():
    """n_estimators="auto" for labels: T maximises T max(0, 1 - (K/2) exp(-a/T))^2 over 1..cap less
    T = 2 (brute force), a = n epsilon (2/3)^D; clipped to [1, cap]; monotone in n; fewer trees for
    more classes."""
    Ts = np.arange(1, 101)
    for D in (0, 2, 5):
        for K in (2, 3, 10):
            for n in list(range(0, 300, 7)) + [10**3, 10**4]:
                for eps in (0.05, 0.5, 3.0):
                    a = n * eps * (2 / 3) ** D
                    got = RT.auto_n_trees_label(n, eps, D, 100, K)
                    if a == 0:
                        assert got == 1
                        continue
                    snr = Ts * np.maximum(0.0, 1.0 - K / 2 * np.exp(-a / Ts)) ** 2
                    snr[1] = -np.inf  # two trees: never (a 2-tree vote is decided by the tie-break)
                    expect = int(Ts[np.argmax(snr)])
                    assert got != 2
                    assert got == expect or np.isclose(snr[got - 1], snr[expect - 1], rtol=1e-12), (D, K, n, eps)
    assert RT.auto_n_trees_label(-5, 1.0, 3, 10) == 1 and RT.auto_n_trees_label(10**9, 1.0, 3, 7) == 7
    sizes = [RT.auto_n_trees_label(n, 0.1, 5, 100) for n in range(0, 5000, 50)]
    assert sizes == sorted(sizes) and sizes[-1] > 1
    assert all(RT.auto_n_trees_label(n, 0.1, 5, 100, 3) <= RT.auto_n_trees_label(n, 0.1, 5, 100, 2)
               for n in range(0, 5000, 50))
    # where "auto" picks labels (n~ epsilon' < sqrt(2) 2^D), breast-cancer's size at epsilon 0.1:
    # 398 rows, depth 5 -> a = 36.6 * 0.132 = 4.8 -> about 4 trees
    assert RT.auto_n_trees_label(398, 0.092, 5, 100) == 4


def test_auto_label_forest_reads_the_data_only_through_the_noisy_count():
    """Sensitivity of the label-regime sizing, by constructing neighbours: where "auto" picks
    "label", the forest's size is auto_n_trees_label of the released count n~ (post-processing),
    unrelated data sets of one size get the same size, leaf release and trees, and a neighbour (one
    row added) moves n~ by exactly 1; the size then follows n~ alone.  Explicit "label" with
    "auto" size uses the same rule."""
    from dpfast.ensemble import RandomForestClassifier

    n, D, eps = 400, 2, 0.012  # n eps' ~ 4.5 < sqrt(2) 2^2: labels; a = n eps' (2/3)^2 ~ 2: 1 to 3 trees
    X1, y1 = _data(n, 3, 2, seed=1)
    X2, y2 = _data(n, 3, 2, seed=2)
    rng = np.random.default_rng(5)
    eps_leaf = RandomForestClassifier(eps, (-1, 1), max_depth=D)._plan(2)[5]
    sizes = set()
    for s in range(30):
        fits = []
        for X, y in ((X1, y1), (X2, y2), (np.vstack([X1, rng.uniform(-2, 2, (1, 3))]), np.append(y1, s % 2))):
            fits.append(RandomForestClassifier(eps, (-1, 1), max_depth=D, random_state=s).fit(X, y))
        a, b, c = fits
        assert (a.n_samples_noisy_, a.n_estimators_, a.leaf_mechanism_) == \
            (b.n_samples_noisy_, b.n_estimators_, b.leaf_mechanism_)
        np.testing.assert_array_equal(a.threshold_, b.threshold_)
        assert c.n_samples_noisy_ - a.n_samples_noisy_ == 1
        for m in (a, c):
            T1 = RT.auto_n_trees(m.n_samples_noisy_, eps_leaf, D, RT.AUTO_MAX_TREES)
            mech = RT.auto_mechanism(m.n_samples_noisy_, eps_leaf, T1, D)
            assert m.leaf_mechanism_ == mech
            expect = RT.auto_n_trees_label(m.n_samples_noisy_, eps_leaf, D, RT.AUTO_MAX_TREES, 2) \
                if mech == "label" else T1
            assert m.n_estimators_ == expect and m.leaf_proba_.shape[0] == expect
            if mech == "label":
                sizes.add(m.n_estimators_)
        lab = RandomForestClassifier(eps, (-1, 1), max_depth=D, leaf_mechanism="label", random_state=s).fit(X1, y1)
        assert lab.n_estimators_ == RT.auto_n_trees_label(lab.n_samples_noisy_, eps_leaf, D, RT.AUTO_MAX_TREES, 2)
    assert len(sizes) >= 2  # the label rule sized forests of several sizes here


def test_fit_is_bit_identical_for_any_thread_count(monkeypatch):
    from dpfast.ensemble import RandomForestClassifier

    X, y = _data(30000, 4, 3)
    out = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DPFAST_NUM_THREADS", threads)
        for mech, T, D in (("counts", 4, 6), ("label", 4, 6), ("counts", 12, 5)):  # the last: sliced kernel
            m = RandomForestClassifier(1.0, (-1, 1), classes=[0, 1, 2], n_estimators=T, max_depth=D,
                                       leaf_mechanism=mech, random_state=3).fit(X, y)
            out.append((mech, T, m.leaf_proba_, m.predict_proba(X[:5000]), m.apply(X[:5000])))
    for i, a in enumerate(out[3:]):
        b = out[i % 3]
        for u, v in zip(a[2:], b[2:]):
            np.testing.assert_array_equal(u, v)


def _tie_data(n, d, K, seed):
    """Rows whose values often equal a threshold (the forest's own thresholds, -0.0 and 0.0,
    +-inf, NaN), labels in [0, K)."""
    rng = np.random.default_rng(seed)
    f, th = _forest(seed, d, 12, 5)
    X = rng.uniform(-1, 1, size=(n, d))
    pool = np.concatenate([th.ravel(), [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0]])
    hit = rng.random((n, d)) < 0.3
    X[hit] = rng.choice(pool, size=int(hit.sum()))
    return X, rng.integers(0, K, size=n).astype(np.int64), f, th


@pytest.mark.skipif(not _trees.sliced, reason="no AVX2 + POPCNT here: the sliced kernel is not built or not used")
@pytest.mark.parametrize("n,d,K,T,depth", [(130, 3, 2, 12, 5), (1000, 4, 1, 3, 1), (777, 2, 16, 5, 6),
                                            (4100 * 3 + 5, 5, 3, 10, 5), (64, 1, 2, 20, 2), (1, 3, 2, 2, 3)])
def test_sliced_and_descent_kernels_count_the_same_integers(n, d, K, T, depth):
    """The bit-sliced kernel (ranks of the rows among the thresholds, 64-row node masks) and the
    row-by-row descent give the NumPy reference's counts, on rows that tie with thresholds (x > t
    is false at x == t), -0.0 and 0.0, +-inf and NaN (NaN goes left), partial 64-row blocks, 1 and
    16 classes, depth 1 to 6, repeated thresholds, any thread count."""
    X, y, _, _ = _tie_data(n, d, K, n + d)
    f, th = _forest(K + T, d, T, depth)
    th[0, 0] = th[-1, -1]  # one threshold twice (one cut)
    X[0, :] = th[-1, -1]
    ref = _reference_counts(X, y, K, f, th, depth)
    for threads in (1, 3):
        for kernel in (0, 1, 2):
            np.testing.assert_array_equal(_trees.leaf_counts(X, y, K, None, f, th, depth, threads, kernel), ref)


@pytest.mark.skipif(not _trees.sliced, reason="no AVX2 + POPCNT here")
def test_sliced_kernel_falls_back_where_ranks_do_not_fit():
    """More than 32767 distinct thresholds on a feature (16-bit ranks), a NaN threshold or more than
    16 classes: kernel=2 counts by descent, the same integers."""
    X = np.random.default_rng(0).uniform(-1, 1, size=(300, 1))
    y = (X[:, 0] > 0).astype(np.int64)
    f, th = _forest(5, 1, 600, 6)  # 600 * 63 > 32767 cuts on the one feature
    np.testing.assert_array_equal(_trees.leaf_counts(X, y.astype(np.int64), 2, None, f, th, 6, 1, 2),
                                  _reference_counts(X, y, 2, f, th, 6))
    f, th = _forest(6, 1, 12, 5)
    th[3, 4] = np.nan
    np.testing.assert_array_equal(_trees.leaf_counts(X, y.astype(np.int64), 2, None, f, th, 5, 1, 2),
                                  _reference_counts(X, y, 2, f, th, 5))
    y17 = np.arange(300) % 17
    np.testing.assert_array_equal(_trees.leaf_counts(X, y17, 17, None, f, th, 5, 1, 2),
                                  _reference_counts(X, y17, 17, f, th, 5))


def test_forcing_the_baseline_kernel_turns_sliced_off():
    """DPFAST_TREES_NO_AVX2=1 (to test the descent on AVX2 machines) turns the sliced kernel off."""
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", "from dpfast import _trees; print(_trees.sliced)"],
                       env=dict(os.environ, DPFAST_TREES_NO_AVX2="1"), capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


@pytest.mark.parametrize("T", [2, 12])
def test_forest_proba_is_the_mean_of_the_leaves_distributions(T):
    """The native predict_proba: per row, the sum over the trees in tree order of the leaf's
    distribution, divided by T -- the NumPy mean of the routed leaves' rows, on rows tying with
    thresholds, +-inf and NaN, and the same bits for any thread count."""
    X, _, f, th = _tie_data(5000, 3, 2, 4)
    f, th = f[:T], th[:T]
    proba = np.random.default_rng(1).dirichlet(np.ones(3), size=(T, 32))
    leaves = RT.route(X, f, th, 5)
    seq = np.zeros((X.shape[0], 3))
    for t in range(T):
        seq += proba[t, leaves[:, t]]
    out = RT.forest_proba(X, f, th, 5, proba)
    np.testing.assert_array_equal(out, seq / T)
    np.testing.assert_allclose(out, proba[np.arange(T)[None, :], leaves].mean(axis=1), rtol=1e-14, atol=0)
    np.testing.assert_array_equal(_trees.proba_sum(X, f, th, 5, proba, 3) / T, out)
    with pytest.raises(ValueError, match="proba"):
        _trees.proba_sum(X, f, th, 5, proba[:, :16], 1)


def test_binding_checks_every_index():
    X, y = _data(50, 3, 2)
    f, th = _forest(0, 3, 2, 3)
    with pytest.raises(ValueError, match="feature"):
        _trees.leaf_counts(X, y, 2, None, np.full_like(f, 3), th, 3, 1)
    with pytest.raises(ValueError, match="labels"):
        _trees.leaf_counts(X, np.full(50, 2, dtype=np.int64), 2, None, f, th, 3, 1)
    with pytest.raises(ValueError, match="tree_of_row"):
        _trees.leaf_counts(X, y.astype(np.int64), 2, np.full(50, 2, dtype=np.int64), f, th, 3, 1)
    with pytest.raises(ValueError, match="shape"):
        _trees.leaf_counts(X, y.astype(np.int64), 2, None, f, th, 4, 1)
    with pytest.raises(ValueError, match="depth"):
        _trees.route(X, f, th, 31, 1)
    with pytest.raises(ValueError, match="too large"):
        _trees.leaf_counts(X, y.astype(np.int64), 2**40, None, f, th, 3, 1)
    with pytest.raises(TypeError):
        _trees.route(X.astype(np.float32), f, th, 3, 1)


def test_event_epsilon_and_budget():
    X, y = _data()
    b = PrivacyBudget(2.0, 1e-6)
    for mech in ("auto", "counts", "label"):
        m = DecisionTreeClassifier(0.5, (-1, 1), leaf_mechanism=mech, random_state=0).fit(X, y, budget=b)
        assert m.epsilon_ == pytest.approx(0.5) and m.epsilon_ <= 0.5
        assert m.delta_ == 0.0 and m.accountant_ is None
    m2 = DecisionTreeClassifier(1.0, (-1, 1), random_state=0)
    with pytest.raises(BudgetExceededError):
        m2.fit(X, y, budget=b)
    assert not hasattr(m2, "leaf_proba_")


def test_huge_epsilon_gives_the_exact_leaf_frequencies():
    X, y = _data(2000, 3, 2)
    m = DecisionTreeClassifier(1e9, (-1, 1), max_depth=4, leaf_mechanism="counts", random_state=0).fit(X, y)
    exact = RT.leaf_counts(X, y, 2, m.feature_, m.threshold_, 4)[0]
    np.testing.assert_array_equal(m.leaf_counts_[0], exact)
    nonempty = exact.sum(1) > 0
    np.testing.assert_allclose(m.leaf_proba_[0][nonempty], exact[nonempty] / exact[nonempty].sum(1, keepdims=True))
    leaves = m.apply(X)[:, 0]
    np.testing.assert_allclose(m.predict_proba(X), m.leaf_proba_[0][leaves])
    majority = np.argmax(exact, axis=1)  # the exact leaf majority (ties: first class)
    np.testing.assert_array_equal(m.predict(X), m.classes_[majority[leaves]])


def test_leaf_distribution_backs_off_to_the_nearest_ancestor():
    noisy = np.array([[[3, -1], [-2, -4], [0, 5], [1, 1]]])  # one tree, depth 2, K = 2
    P = RT.leaf_distribution(noisy)
    np.testing.assert_allclose(P[0, 0], [1, 0])
    np.testing.assert_allclose(P[0, 1], [1, 0])  # sibling sum (1, -5) -> clipped (1, 0)
    np.testing.assert_allclose(P[0, 2], [0, 1])
    np.testing.assert_allclose(P[0, 3], [0.5, 0.5])
    np.testing.assert_allclose(RT.leaf_distribution(-np.ones((1, 2, 3))), np.full((1, 2, 3), 1 / 3))


def test_pandas_input_with_bounds_by_column_name():
    pd = pytest.importorskip("pandas")
    X, y = _data(200, 2, 2)
    df = pd.DataFrame(X, columns=["a", "b"])
    m = DecisionTreeClassifier(1.0, {"a": (-1, 1), "b": (-1, 1)}, random_state=0).fit(df, pd.Series(y))
    m2 = DecisionTreeClassifier(1.0, (-1, 1), random_state=0).fit(X, y)
    np.testing.assert_array_equal(m.leaf_proba_, m2.leaf_proba_)
    np.testing.assert_array_equal(m.predict(df), m2.predict(X))
    assert list(m.feature_names_in_) == ["a", "b"]
    with pytest.raises(ValueError, match="missing"):
        DecisionTreeClassifier(1.0, {"a": (-1, 1)}).fit(df, y)


def test_errors_before_the_charge():
    X, y = _data(100, 2, 3)
    b = PrivacyBudget(1.0, 1e-6)
    for kw in (dict(), dict(bounds=(1, 0)), dict(bounds=(-1, 1)), dict(bounds=(-1, 1), classes=[0, 1, 2],
                                                                      max_depth=30),
               dict(bounds=[(0, 1), (0, 1)])):
        with pytest.raises(ValueError):
            DecisionTreeClassifier(1.0, **kw).fit(X, y, budget=b)
    DecisionTreeClassifier(1.0, (-1, 1), classes=[0, 1, 2]).fit(X, y, budget=b)  # the whole budget is still there


def test_tree_default_is_the_label_release_at_the_whole_epsilon():
    """DecisionTreeClassifier's default leaf release is "label": no row count is bought, every leaf
    is selected at the whole epsilon (the fit equals an explicit "label" fit bit for bit), and the
    event is the one tree's selections, SelfComposed(ReportNoisyMax(epsilon), 1)."""
    from dpfast.accounting import ReportNoisyMax, SelfComposed

    X, y = _data(300, 2, 2)
    assert DecisionTreeClassifier().leaf_mechanism == "label"
    m = DecisionTreeClassifier(0.7, (-1, 1), max_depth=3, random_state=2).fit(X, y)
    ref = DecisionTreeClassifier(0.7, (-1, 1), max_depth=3, leaf_mechanism="label", random_state=2).fit(X, y)
    assert m.leaf_mechanism_ == "label" and not hasattr(m, "n_samples_noisy_")
    np.testing.assert_array_equal(m.leaf_labels_, ref.leaf_labels_)
    assert m.event_ == SelfComposed(ReportNoisyMax(0.7), 1) and m.epsilon_ == 0.7
