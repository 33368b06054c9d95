"""Exact rational parameters for the floating-point-safe samplers (see :doc:`/theory/mechanisms`,
"Discrete Laplace / discrete Gaussian": parameters as exact rationals, ``fractions`` at the API,
integers natively).

A parameter may be given as an ``int``, a ``fractions.Fraction``, a string such as ``"7/3"``
or a float; a float is taken at its exact binary value (``Fraction(0.1)`` is
3602879701896397/2**55), never through a decimal string.
"""
from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Callable, Union

import numpy as np

from dpfast._validation import Constraint

RationalLike = Union[int, float, str, Fraction, np.integer, np.floating]

__all__ = ["RationalLike", "to_fraction", "fit_rational"]


def to_fraction(x, name: str, *, allow_zero: bool = False) -> tuple[Fraction, bool]:
    """``x`` as an exact ``Fraction`` (> 0, or >= 0 with ``allow_zero``) and whether it came
    from a binary float (which callers may approximate when it is too fine to fit)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be a rational number, got a bool")
    from_float = False
    if isinstance(x, Fraction):
        fr = x
    elif isinstance(x, numbers.Integral):
        fr = Fraction(int(x))
    elif isinstance(x, (float, np.floating)):
        xf = float(x)
        if not math.isfinite(xf):
            raise ValueError(f"{name} must be finite, got {x!r}")
        fr = Fraction(xf)
        from_float = True
    elif isinstance(x, str):
        try:
            fr = Fraction(x)
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"{name} must be a rational such as '7/3', got {x!r}") from exc
    elif isinstance(x, numbers.Rational):
        fr = Fraction(x.numerator, x.denominator)
    else:
        raise TypeError(
            f"{name} must be a rational number (int, float, fractions.Fraction or a string like '7/3'); "
            f"got {type(x).__name__}"
        )
    if fr < 0 or (fr == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {x!r}")
    return fr, from_float


def fit_rational(
    fr: Fraction,
    fits: Callable[[Fraction], bool],
    *,
    mode: str,
    max_den_bits: int = 63,
) -> Fraction | None:
    """A rational close to ``fr`` that satisfies ``fits`` (the native size limits).

    ``mode="exact"``: ``fr`` itself or None.  ``mode="nearest"``: ``fr`` if it fits, else the
    closest fraction with a power-of-two-bounded denominator that fits (tries 2^63 down to 2^0).
    ``mode="up"``: the same but never below ``fr`` (``ceil(fr * 2^k) / 2^k``) -- used where a
    larger value only adds privacy (noise scale, sigma^2).
    """
    if fits(fr):
        return fr
    if mode == "exact":
        return None
    for k in range(max_den_bits, -1, -1):
        den = 1 << k
        if mode == "up":
            cand = Fraction(-((-fr.numerator * den) // fr.denominator), den)
        else:
            cand = fr.limit_denominator(den)
            if cand == 0:
                cand = Fraction(1, den)
        if cand > 0 and fits(cand):
            return cand
    return None


class Rational(Constraint):
    """``@validate_params`` constraint: an exact rational > 0 (>= 0 with ``allow_zero``), passed
    on as a ``Fraction`` (:func:`to_fraction`; a float at its exact binary value)."""

    def __init__(self, *, allow_zero: bool = False) -> None:
        self.allow_zero = allow_zero

    def spec(self, name):
        return _fraction, dict(name=name, allow_zero=self.allow_zero)


def _fraction(x, name: str, allow_zero: bool) -> Fraction:
    return to_fraction(x, name, allow_zero=allow_zero)[0]
