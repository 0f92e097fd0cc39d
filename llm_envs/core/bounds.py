"""Arithmetic for declaring reward bounds (:meth:`llm_envs.core.env.TextEnv.reward_bounds`).

A bound is a ``(low, high)`` pair of floats, possibly infinite. Environments build the bound of
one action's reward from the bounds of its terms: a weighted term (``alpha · r_team``), a sum of
terms, the worse of two cases (a format penalty or a scored answer). The helpers here keep the
arithmetic sound with infinities (``0 · inf`` is a zero weight, not ``nan``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

Bounds = tuple[float, float]

#: The bound of a reward nothing is promised about.
UNBOUNDED: Bounds = (-math.inf, math.inf)


def scaled(bounds: Bounds, weight: float) -> Bounds:
    """The bounds of ``weight · r`` for ``r`` in ``bounds`` (a zero weight gives ``(0, 0)``)."""
    if weight == 0:
        return (0.0, 0.0)
    low, high = weight * bounds[0], weight * bounds[1]
    return (min(low, high), max(low, high))


def summed(*terms: Bounds) -> Bounds:
    """The bounds of a sum of independent terms."""
    return (sum(t[0] for t in terms), sum(t[1] for t in terms))


def either(*cases: Bounds) -> Bounds:
    """The bounds of a value that is one of several cases (their hull)."""
    return (min(c[0] for c in cases), max(c[1] for c in cases))


def unit_weights(weights: Iterable[float]) -> Bounds:
    """The bounds of ``Σ wᵢ·xᵢ`` with every ``xᵢ`` in ``[0, 1]`` (a weighted checklist such as
    ``0.1·builds + 0.1·runs + 0.8·golden``)."""
    values = [float(w) for w in weights]
    return (sum(w for w in values if w < 0), sum(w for w in values if w > 0))


def contains(bounds: Bounds, value: float, tolerance: float = 1e-9) -> bool:
    """Whether ``value`` lies in ``bounds`` (within ``tolerance``)."""
    return bounds[0] - tolerance <= value <= bounds[1] + tolerance


def describe(bounds: Bounds) -> str:
    """``[low, high]`` with infinities written as such (for messages and tables)."""

    def number(value: float) -> str:
        if math.isinf(value):
            return "-inf" if value < 0 else "+inf"
        return f"{value:g}"

    return f"[{number(bounds[0])}, {number(bounds[1])}]"
