"""Confidence intervals for evaluation tables, with the standard library only.

* :func:`wilson_interval`: the Wilson score interval for a proportion (success rate, format
  error rate). Unlike the normal-approximation interval it stays inside [0, 1] and is not
  degenerate at 0 or n successes, which is where small evaluations often land.
* :func:`mean_interval`: the Student-t interval for a mean (rewards, turns, tokens), with the
  t quantile computed exactly for integer degrees of freedom (:func:`t_quantile`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval (``low <= value <= high``)."""

    value: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format(self, digits: int = 3) -> str:
        if self.n == 0 or math.isnan(self.value):
            return "n/a"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> Interval:
    """The Wilson score interval of a proportion ``successes / n``.

    ``successes`` may be fractional (the sum of per-episode success values in [0, 1], for
    environments with partial success); the interval is then the Wilson interval of that mean.
    With ``n == 0`` the value is NaN and the interval is [0, 1].
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return Interval(math.nan, 0.0, 1.0, 0)
    z = _z(confidence)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # Clamp rounding noise: the exact interval always contains p and lies in [0, 1].
    return Interval(p, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)), n)


def _t_central_mass(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        if df == 1:
            return 2.0 * theta / math.pi
        term, total = 1.0, 1.0
        for k in range(1, (df - 3) // 2 + 1):  # (2·4···2k)/(3·5···(2k+1)) cos^2k
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2.0 / math.pi * (theta + s * math.cos(theta) * total)
    term, total = 1.0, 1.0
    for k in range(1, (df - 2) // 2 + 1):  # (1·3···(2k-1))/(2·4···2k) cos^2k
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return s * total


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (``p > 0.5``) of Student's t with ``df`` degrees of freedom.

    Exact (bisection on the closed-form CDF) up to 1000 degrees of freedom; beyond, the
    Cornish-Fisher expansion around the normal quantile, accurate to ~1e-7 there.
    """
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if not 0.5 < p < 1.0:
        raise ValueError(f"p must be in (0.5, 1), got {p}")
    if df > 1000:
        z = NormalDist().inv_cdf(p)
        return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    target = 2.0 * p - 1.0  # central mass
    low, high = 0.0, 1.0
    while _t_central_mass(high, df) < target:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if _t_central_mass(mid, df) < target:
            low = mid
        else:
            high = mid
        if high - low < 1e-12 * max(1.0, high):
            break
    return 0.5 * (low + high)


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The mean of ``values`` with its Student-t confidence interval.

    One value gives a zero-width interval around it (nothing is known about the spread); no
    values give NaN.
    """
    n = len(values)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * math.sqrt(variance / n)
    return Interval(mean, mean - half, mean + half, n)
