"""The native modules' argument checks (csrc/bindings/array_view.hpp): one wording for every array
argument -- TypeError for a non-array or a wrong dtype, ValueError for ndim, shape, size,
C-contiguity and writability -- raised before any kernel runs or any random word is drawn;
parameter arrays given in another dtype or layout are converted, with the same result."""
import numpy as np
import pytest
import scipy.sparse as sp

from dpfast import _clip, _core, _glm, _multinomial, _pld, _selection, _tables
from dpfast._loss_table import code as loss_code


def _glm_args(X, y, **kw):
    n, d = X.shape if X.ndim == 2 else (kw["n"], kw["d"])
    args = dict(X=X, indices=None, indptr=None, layout=0, n=n, d=d, y=y, w=None, loss=loss_code("logistic"),
                delta=1.0, clip=1.0, alpha=0.1, linear=None, Q=None, theta=np.zeros(d), nthreads=1)
    args.update(kw)
    return args


def test_wrong_dtype_is_a_type_error_naming_both_dtypes():
    X, y = np.ones((4, 2)), np.ones(4)
    with pytest.raises(TypeError, match="sample_weight must be float64, not float32"):
        _glm.loss_and_grad(**_glm_args(X, y, w=np.ones(4, np.float32)))
    with pytest.raises(TypeError, match="X must be float32 or float64, not int64"):
        _glm.loss_and_grad(**_glm_args(np.ones((4, 2), np.int64), y))
    with pytest.raises(TypeError, match="values must be int64, not float64"):
        _tables.dense_codes(np.ones(3), 10)
    with pytest.raises(TypeError, match="must be a NumPy array"):
        _tables.dense_codes([1, 2, 3], 10)


def test_shape_size_and_layout_errors_are_value_errors():
    X, y = np.ones((4, 2)), np.ones(4)
    with pytest.raises(ValueError, match=r"y must have shape \(4,\), not \(3,\)"):
        _glm.loss_and_grad(**_glm_args(X, np.ones(3)))
    with pytest.raises(ValueError, match=r"X must have shape \(5, 2\), not \(4, 2\)"):
        _glm.loss_and_grad(**_glm_args(X, np.ones(5), n=5))
    with pytest.raises(ValueError, match="sample_weight must have 4 entries, not 5"):
        _glm.loss_and_grad(**_glm_args(X, y, w=np.ones(5)))
    with pytest.raises(ValueError, match="X must be F-contiguous"):
        _glm.loss_and_grad(**_glm_args(X, y, layout=1))
    with pytest.raises(ValueError, match="values must be C-contiguous"):
        _tables.dense_codes(np.arange(10)[::2], 10)
    with pytest.raises(ValueError, match="must be 2-D"):
        _clip.clip_rows(np.ones(3), 1.0, None, None, None, None)
    with pytest.raises(ValueError, match="X rows must be contiguous"):
        _clip.mlp_forward(np.ones((3, 4))[:, ::2], 2, 2, 0, np.zeros(2 * 2 + 2 + 2 * 2 + 2), np.empty(6))


def test_csr_index_arrays_must_agree():
    A = sp.csr_matrix(np.eye(3))
    y, base = np.ones(3), dict(layout=2, n=3, d=3)
    with pytest.raises(TypeError, match="indptr must be int32, not int64"):
        _glm.loss_and_grad(**_glm_args(A.data, y, **base, indices=A.indices.astype(np.int32),
                                       indptr=A.indptr.astype(np.int64)))
    with pytest.raises(ValueError, match="column index out of range"):
        _glm.loss_and_grad(**_glm_args(A.data, y, **base, indices=np.array([0, 1, 3], np.int32),
                                       indptr=A.indptr.astype(np.int32)))


def test_outputs_must_be_writeable_and_nothing_is_drawn_on_a_refusal():
    gen = np.random.default_rng(3)
    bg = gen.bit_generator
    state = bg.state
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writeable"):
        _core.add_laplace(bg.capsule, ro, None, np.ones(1), 1)
    with pytest.raises(ValueError, match="values must have 4 entries, not 5"):
        _core.add_normal(bg.capsule, np.zeros(4), np.zeros(5), np.ones(1), 1)
    with pytest.raises(ValueError, match="theta must be writeable"):
        _clip.optimizer_step(ro, np.zeros(4), None, 0.0, 1.0, 0.0, 0, 0, 0.1, 0.0, 0.999, 1e-8, 1, None, None)
    assert bg.state == state


def test_read_only_inputs_are_read():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = np.array([1.0, -1.0, 1.0])
    theta = np.array([0.5, -0.25])
    f, g, ok = _glm.loss_and_grad(**_glm_args(X, y, alpha=0.0, clip=np.inf, theta=theta))
    Xr, yr = X.copy(), y.copy()
    Xr.flags.writeable = yr.flags.writeable = False
    f2, g2, ok2 = _glm.loss_and_grad(**_glm_args(Xr, yr, alpha=0.0, clip=np.inf, theta=theta))
    # logistic loss sum_i log(1 + exp(-y_i x_i.theta)) and its gradient, by NumPy
    m = y * (X @ theta)
    assert ok and ok2 and f == f2 and np.array_equal(g, g2)
    np.testing.assert_allclose(f, np.log1p(np.exp(-m)).sum(), rtol=1e-14)
    np.testing.assert_allclose(g, X.T @ (-y / (1 + np.exp(m))), rtol=1e-14)


def test_converted_parameter_arrays_give_the_same_result():
    p = np.array([0.125, 0.25, 0.625])
    assert _pld.pmf_moments(p) == _pld.pmf_moments([0.125, 0.25, 0.625]) == _pld.pmf_moments(p.astype(np.float32))
    # strided labels and an F-order W are copied to C order: the same multinomial loss
    X = np.arange(12, dtype=float).reshape(6, 2) / 10
    y = np.array([0, 1, 2, 0, 1, 2])
    W = np.arange(1, 7, dtype=float).reshape(2, 3) / 8
    f1, G1, _ = _multinomial.loss_and_grad(X, None, None, 6, 2, y, None, 3, 0.0, W, 1, None, 0.0)
    f2, G2, _ = _multinomial.loss_and_grad(X, None, None, 6, 2, np.repeat(y, 2)[::2], None, 3, 0.0,
                                           np.asfortranarray(W), 1, None, 0.0)
    assert f1 == f2 and np.array_equal(G1, G2)


def test_selection_checks_the_utilities_dtype_and_shape():
    bg = np.random.default_rng(0).bit_generator
    with pytest.raises(TypeError, match="scores must be float32 or float64, not int64"):
        _selection.argmax_rows(bg.capsule, np.ones((2, 3), np.int64), None, 1.0, 0, "scores")
    with pytest.raises(ValueError, match="scores must be 2-D"):
        _selection.argmax_rows(bg.capsule, np.ones(3), None, 1.0, 0, "scores")
    with pytest.raises(ValueError, match=r"log base measure must have shape \(2, 3\), not \(3, 2\)"):
        _selection.argmax_rows(bg.capsule, np.ones((2, 3)), np.zeros((3, 2)), 1.0, 0)


def _misaligned(a: np.ndarray) -> np.ndarray:
    """A copy of a whose data pointer is off its item size's alignment (as a buffer unpickled from a
    network frame, which dask.distributed hands its workers)."""
    buf = bytearray(a.nbytes + 1)
    m = np.frombuffer(buf, dtype=a.dtype, count=a.size, offset=1).reshape(a.shape)
    m[...] = a
    assert m.ctypes.data % a.itemsize != 0
    return m


def test_misaligned_inputs_are_read_from_aligned_copies():
    # a typed read of a misaligned buffer is undefined behaviour (UBSan under .ci/sanitize caught the
    # random-tree kernel on Dask workers); the views copy such inputs: same results, no UB
    from dpfast.linear_model import LogisticRegression
    from dpfast.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 3))
    y = (X[:, 0] > 0).astype(np.int64)
    for mech in ("counts", "label"):
        a = DecisionTreeClassifier(1.0, (-1, 1), max_depth=3, leaf_mechanism=mech, random_state=7).fit(X, y)
        b = DecisionTreeClassifier(1.0, (-1, 1), max_depth=3, leaf_mechanism=mech,
                                   random_state=7).fit(_misaligned(X), _misaligned(y))
        np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(_misaligned(X)))
    Xn = X / np.sqrt(3)
    a = LogisticRegression(random_state=0).fit(Xn, y)
    b = LogisticRegression(random_state=0).fit(_misaligned(Xn), _misaligned(y))
    np.testing.assert_array_equal(a.coef_, b.coef_)
