"""dpfast._validation.validate_params: the one declarative check of public parameters (issue 23,
item 3); the mechanisms' plans are tested in tests/mechanisms/test_mechanism_plans.py."""
import inspect
import math

import numpy as np
import pytest

from dpfast import calibrate, io, mechanisms, random as dprandom
from dpfast._validation import (
    Bool,
    Delta,
    Epsilon,
    Int,
    Options,
    Positive,
    check_bool,
    check_nonnegative,
    check_option,
    validate_params,
)
from dpfast.random import RNG


@validate_params(sensitivity=Positive(), epsilon=Epsilon(allow_array=False), delta=Delta(allow_zero=False),
                 k=Int(), flag=Bool(), mode=Options("a", "b"), rng=RNG)
def _f(data, sensitivity, epsilon, /, delta=1e-6, *rest, k=3, flag=False, mode="a", rng=None, **extra):
    """doc of _f"""
    return data, sensitivity, epsilon, delta, rest, k, flag, mode, rng, extra


def test_checked_values_reach_the_function_and_the_rest_passes_through():
    data = object()
    out = _f(data, 2, np.float64(0.5), 1e-5, "x", k=4, flag=np.True_, rng=3, z=1)
    assert out[0] is data  # not named: untouched
    assert out[1:4] == (2.0, 0.5, 1e-5) and all(type(v) is float for v in out[1:4])
    assert out[4] == ("x",) and out[5] == 4 and out[6] is True and out[7] == "a"
    assert isinstance(out[8], np.random.Generator) and out[9] == {"z": 1}
    # defaults are checked too (and pass)
    assert _f(None, 1.0, 1.0)[3] == 1e-6


def test_wrapper_keeps_name_doc_and_signature():
    assert _f.__name__ == "_f" and _f.__doc__ == "doc of _f"
    assert inspect.signature(_f) == inspect.signature(_f.__wrapped__)
    with pytest.raises(TypeError):  # positional-only stays positional-only
        _f(None, sensitivity=1.0, epsilon=1.0)
    with pytest.raises(TypeError):  # missing argument: Python's own binding
        _f(None, 1.0)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(sensitivity=0.0), ValueError, "sensitivity must be > 0, got 0.0"),
    (dict(sensitivity=math.inf), ValueError, "sensitivity must be finite, got inf"),
    (dict(epsilon=np.ones(2)), ValueError, "epsilon must be a scalar"),
    (dict(epsilon=math.nan), ValueError, "epsilon must be > 0, got NaN"),
    (dict(delta=0.0), ValueError, r"delta must be in \(0, 1\)"),
    (dict(k=0), ValueError, "k must be an integer >= 1"),
    (dict(k=2.5), TypeError, "k must be an integer >= 1"),
    (dict(flag=1), TypeError, "flag must be a bool, got int"),
    (dict(mode="c"), ValueError, "mode must be 'a' or 'b', got 'c'"),
    (dict(mode=None), TypeError, "mode must be 'a' or 'b', got NoneType"),
    (dict(rng="seed"), TypeError, "rng must be"),
])
def test_messages_are_the_check_functions(kwargs, exc, match):
    args = dict(sensitivity=1.0, epsilon=1.0, delta=1e-6, k=3, flag=False, mode="a", rng=None)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        _f(None, args.pop("sensitivity"), args.pop("epsilon"), args.pop("delta"), **args)


def test_validate_binds_and_checks_without_calling():
    calls = []

    @validate_params(epsilon=Epsilon())
    def g(x, epsilon=1):
        calls.append(x)

    bound = g.validate(7)
    assert bound.arguments == {"x": 7, "epsilon": 1.0} and calls == []
    with pytest.raises(ValueError, match="epsilon"):
        g.validate(7, -1)
    assert g.constraints["epsilon"].allow_array is True


def test_declaration_errors_are_caught_at_import():
    with pytest.raises(TypeError, match="no parameter 'eps'"):
        validate_params(eps=Epsilon())(lambda epsilon: epsilon)
    with pytest.raises(TypeError, match="not a Constraint"):
        validate_params(epsilon=float)(lambda epsilon: epsilon)


def test_new_check_functions():
    assert check_nonnegative(0, "x") == 0.0 and check_nonnegative(np.array(2.0), "x") == 2.0
    assert check_nonnegative(math.inf, "x", allow_inf=True) == math.inf
    for bad, exc, msg in [(-1.0, ValueError, "x must be finite and >= 0, got -1.0"),
                          (math.inf, ValueError, "x must be finite and >= 0, got inf"),
                          (math.nan, ValueError, "x must be finite and >= 0"),
                          (True, TypeError, "x must be a real number >= 0, got bool"),
                          ("1", TypeError, "x must be a real number >= 0, got str"),
                          (np.ones(2), TypeError, "x must be a real number >= 0, got ndarray")]:
        with pytest.raises(exc, match=msg):
            check_nonnegative(bad, "x")
    with pytest.raises(ValueError, match="x must be >= 0, got -1"):
        check_nonnegative(-1, "x", allow_inf=True)
    assert check_bool(np.False_, "b") is False
    with pytest.raises(TypeError, match="b must be a bool, got int"):
        check_bool(0, "b")
    assert check_option("b", "m", ("a", "b")) == "b"
    with pytest.raises(ValueError, match="m must be 'a', 'b' or 'c', got 'd'"):
        check_option("d", "m", ("a", "b", "c"))


# ----------------------------------------------------------------------------- coverage

#: public callables that take no parameter to check (or are checkers / types themselves)
_UNCHECKED = {"event_of", "check_random_state", "is_secure", "native_stream", "SecureRandom", "ChaCha20",
              "RandomLike", "RNG"}


def _public(module):
    for name in module.__all__:
        obj = getattr(module, name)
        if name in _UNCHECKED or not callable(obj):
            continue
        yield f"{module.__name__}.{name}", (obj.__init__ if inspect.isclass(obj) else obj)


@pytest.mark.parametrize("name, fn", [p for m in (mechanisms, calibrate, dprandom, io) for p in _public(m)],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_function_declares_its_checks(name, fn):
    assert hasattr(fn, "constraints") and hasattr(fn, "validate"), f"{name} has no @validate_params"
