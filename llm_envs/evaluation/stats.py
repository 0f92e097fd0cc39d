"""Confidence intervals and paired tests for evaluation tables.

Intervals (:func:`metric_interval` picks one from the values, and says which in
:attr:`Interval.method`): ``"wilson"`` when every value is 0 or 1 (the Wilson score interval of
a proportion: inside [0, 1], informative at 0/n and n/n); ``"wilson-bounded"`` when every value
lies in [0, 1] but some are fractions (the Wilson interval computed as if the values were 0/1,
the score interval under the largest variance the bounds allow: conservative and inside
[0, 1]); ``"t"`` for anything else (Student t with the quantile computed exactly, no SciPy;
:func:`mean_interval` can clip it to a known bound). Rewards (:func:`reward_interval`) are read
the same way, and a reward whose values are all non-negative gets a t interval clipped at 0.

Paired tests, for two runs on the same seeds (:func:`paired_comparison`): McNemar's exact test
for 0/1 values, the sign-flip permutation test of the mean difference otherwise (exact up to 16
non-zero differences, else 10,000 seeded flips), and a seeded paired percentile bootstrap (5,000
resamples) for the interval of the mean difference. docs/evaluation.md ("The numbers") explains
each choice.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval (``low <= value <= high``) and the
    method that made it (see the module docstring)."""

    value: float
    low: float
    high: float
    n: int
    method: str = ""

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


def wilson_interval(successes: float, n: int, confidence: float = 0.95, *, method: str = "wilson") -> Interval:
    """The Wilson score interval of a proportion ``successes / n``.

    ``successes`` may be fractional (the sum of per-episode values in [0, 1]); the interval is
    then the conservative bounded-variance interval of that mean (module docstring). With
    ``n == 0`` the value is NaN and the interval is [0, 1].
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return Interval(math.nan, 0.0, 1.0, 0, method)
    z = _z(confidence)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # Clamp rounding noise: the exact interval always contains p and lies in [0, 1].
    return Interval(p, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)), n, method)


def clustered_rate_interval(
    counts: Sequence[tuple[int, int]], confidence: float = 0.95
) -> tuple[Interval, float]:
    """The share ``sum(bad) / sum(n)`` of events grouped in clusters (``counts``: one
    ``(bad, n)`` per episode), with a Wilson interval over the *effective* number of events,
    and that number.

    Events of one episode are not independent (a model that breaks the format in one turn
    tends to break it in every turn), so a Wilson interval over all events is too narrow: 20
    episodes of 6 actions, each episode all errors or none, covered the truth in 64% of runs
    at 95%. The effective number is ``N / deff`` with Kish's design effect ``deff`` = the
    cluster-robust variance of the ratio (``m/(m−1) · Σ (bad_i − r·n_i)² / N²`` over the ``m``
    episodes with events) over the binomial one (``r(1 − r)/N``), at least 1 (never more
    events than there are), and the effective number at least 1. It may fall below ``m``:
    where episodes differ in length (a model that breaks the format plays longer episodes),
    capping it at one event per episode undercovered (80–90%). With one episode, or a share of
    0 or 1 (no spread to measure), it is ``N``, the plain Wilson interval. Method
    ``"wilson-clustered"``.
    """
    pairs = [(int(b), int(k)) for b, k in counts if k > 0]
    if any(not 0 <= b <= k for b, k in pairs):
        raise ValueError(f"need 0 <= bad <= n in every cluster, got {counts!r}")
    total = sum(k for _, k in pairs)
    bad = sum(b for b, _ in pairs)
    m = len(pairs)
    effective = float(total)
    if m >= 2 and 0 < bad < total:
        rate = bad / total
        robust = m / (m - 1) * math.fsum((b - rate * k) ** 2 for b, k in pairs) / total**2
        deff = max(1.0, robust / (rate * (1.0 - rate) / total))
        effective = max(1.0, total / deff)
    if total == 0:
        return wilson_interval(0, 0, confidence, method="wilson-clustered"), 0.0
    rate = bad / total
    shown = wilson_interval(rate * effective, effective, confidence, method="wilson-clustered")  # type: ignore[arg-type]
    return Interval(rate, shown.low, shown.high, total, "wilson-clustered"), effective


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


def mean_interval(
    values: Sequence[float],
    confidence: float = 0.95,
    *,
    lower: float | None = None,
    upper: float | None = None,
) -> Interval:
    """The mean of ``values`` with its Student-t confidence interval, clipped to the known
    bounds ``lower`` / ``upper`` of the quantity when given.

    One value gives a zero-width interval around it (nothing is known about the spread); no
    values give NaN.
    """
    n = len(values)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "t")
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1, "t")
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * math.sqrt(variance / n)
    low, high = mean - half, mean + half
    if lower is not None:
        low = max(low, lower)
    if upper is not None:
        high = min(high, upper)
    return Interval(mean, low, high, n, "t")


def is_binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def is_unit_bounded(values: Sequence[float]) -> bool:
    return all(0.0 <= v <= 1.0 for v in values)


def reward_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The interval of a mean reward. Rewards declare no bounds, so they are read from the
    values, as metrics' are: all in [0, 1] → Wilson (0/1) or bounded Wilson (fractions), inside
    [0, 1]; all ≥ 0 → Student t clipped at 0; else Student t. A non-negative reward's interval
    never goes below 0 (the t interval of 1 success in 12 episodes was ``0.083 [-0.100, 0.267]``;
    Wilson's is ``0.083 [0.015, 0.354]``)."""
    values = [float(v) for v in values]
    return metric_interval(values, confidence, lower=0.0 if values and min(values) >= 0.0 else None)


def metric_interval(values: Sequence[float], confidence: float = 0.95, *, lower: float | None = None) -> Interval:
    """The interval a metric gets, chosen from its values (module docstring): Wilson for 0/1
    values, the bounded-variance Wilson interval for values in [0, 1], Student t otherwise
    (clipped at ``lower`` when the quantity has that known lower bound)."""
    values = [float(v) for v in values]
    if values and is_binary(values):
        return wilson_interval(math.fsum(values), len(values), confidence)
    if values and is_unit_bounded(values):
        return wilson_interval(min(float(len(values)), math.fsum(values)), len(values), confidence, method="wilson-bounded")
    return mean_interval(values, confidence, lower=lower)


# ---------------------------------------------------------------------------- paired tests
def _binomial_two_sided(k: int, n: int) -> float:
    """Exact two-sided p-value of ``k`` successes in ``n`` fair coin flips (doubling the
    smaller tail, capped at 1)."""
    if n == 0:
        return 1.0
    tail = min(k, n - k)
    mass = math.fsum(math.comb(n, i) for i in range(tail + 1)) / 2.0**n
    return min(1.0, 2.0 * mass)


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> tuple[float, int, int]:
    """McNemar's exact test for paired 0/1 outcomes: ``(p, a_only, b_only)`` where
    ``a_only`` counts pairs with a=1, b=0 and ``b_only`` pairs with a=0, b=1."""
    a_only = sum(1 for x, y in zip(a, b, strict=True) if x == 1.0 and y == 0.0)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if x == 0.0 and y == 1.0)
    return _binomial_two_sided(a_only, a_only + b_only), a_only, b_only


def sign_flip_test(differences: Sequence[float], *, samples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip permutation test of mean difference 0.

    Under the null hypothesis each paired difference is as likely positive as negative, so the
    observed |mean| is compared with the |mean| of every sign assignment: exactly when there
    are at most 16 non-zero differences, else with ``samples`` random assignments (the p-value
    then counts the observed assignment too, so it is never 0).
    """
    diffs = np.asarray([d for d in differences if d != 0.0], dtype=float)
    if diffs.size == 0:
        return 1.0
    observed = abs(diffs.sum())
    tolerance = 1e-9 * max(1.0, observed)
    if diffs.size <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=diffs.size)))
        sums = np.abs(signs @ diffs)
        return float(np.mean(sums >= observed - tolerance))
    rng = np.random.default_rng(seed)
    extreme = 0
    for size in _chunks(samples, diffs.size):  # bounded memory for long runs
        signs = rng.integers(0, 2, size=(size, diffs.size)).astype(float) * 2.0 - 1.0
        extreme += int(np.sum(np.abs(signs @ diffs) >= observed - tolerance))
    return float((extreme + 1) / (samples + 1))


def _chunks(samples: int, width: int, cells: int = 2_000_000) -> list[int]:
    """Split ``samples`` resamples of ``width`` values into chunks of about ``cells`` values."""
    step = max(1, cells // max(1, width))
    return [min(step, samples - start) for start in range(0, samples, step)]


def paired_bootstrap_interval(
    differences: Sequence[float], confidence: float = 0.95, *, samples: int = 5_000, seed: int = 0
) -> Interval:
    """The mean paired difference with a percentile bootstrap interval (pairs resampled)."""
    diffs = np.asarray(differences, dtype=float)
    n = int(diffs.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "paired-bootstrap")
    mean = float(diffs.mean())
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [diffs[rng.integers(0, n, size=(size, n))].mean(axis=1) for size in _chunks(samples, n)]
    )
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Interval(mean, float(min(low, mean)), float(max(high, mean)), n, "paired-bootstrap")


@dataclass(frozen=True)
class PairedResult:
    """The paired comparison of one metric: B - A on the common seeds."""

    name: str
    n: int
    mean_a: float
    mean_b: float
    difference: Interval
    p_value: float
    test: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["difference"] = self.difference.to_dict()
        return data


def paired_comparison(name: str, a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> PairedResult:
    """Compare paired values ``a[i]``, ``b[i]`` (the same seed in two runs): McNemar's exact
    test for 0/1 values, the sign-flip permutation test otherwise; the difference B - A with a
    paired bootstrap interval."""
    if len(a) != len(b):
        raise ValueError(f"paired values need equal lengths, got {len(a)} and {len(b)}")
    a = [float(x) for x in a]
    b = [float(x) for x in b]
    differences = [y - x for x, y in zip(a, b, strict=True)]
    interval = paired_bootstrap_interval(differences, confidence)
    n = len(a)
    mean_a = math.fsum(a) / n if n else math.nan
    mean_b = math.fsum(b) / n if n else math.nan
    if n and is_binary(a) and is_binary(b):
        p, a_only, b_only = mcnemar_exact(a, b)
        return PairedResult(
            name, n, mean_a, mean_b, interval, p, "McNemar exact", f"{a_only} pairs only A, {b_only} only B"
        )
    return PairedResult(name, n, mean_a, mean_b, interval, sign_flip_test(differences), "sign-flip permutation")
