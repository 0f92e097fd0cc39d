"""Confidence intervals: Wilson for rates, Student t for means."""

from __future__ import annotations

import math
import random

import pytest

from llm_envs.evaluation.stats import mean_interval, t_quantile, wilson_interval

# Two-sided 95% critical values of Student's t, from any statistics table.
T_TABLE_975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    5: 2.571,
    10: 2.228,
    20: 2.086,
    30: 2.042,
    60: 2.000,
    120: 1.980,
}


@pytest.mark.parametrize("df,expected", sorted(T_TABLE_975.items()))
def test_t_quantile_matches_the_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=6e-4)


def test_t_quantile_other_levels_and_large_df():
    assert t_quantile(0.995, 10) == pytest.approx(3.169, abs=6e-4)
    assert t_quantile(0.95, 4) == pytest.approx(2.132, abs=6e-4)
    # Continuous across the switch to the asymptotic expansion, and towards the normal.
    assert t_quantile(0.975, 1000) == pytest.approx(t_quantile(0.975, 1001), abs=1e-5)
    assert t_quantile(0.975, 10**7) == pytest.approx(1.959964, abs=1e-5)
    with pytest.raises(ValueError):
        t_quantile(0.4, 3)


def test_wilson_known_values_and_edges():
    mid = wilson_interval(5, 10)
    assert (mid.value, mid.low, mid.high) == pytest.approx((0.5, 0.2366, 0.7634), abs=1e-4)
    zero, full = wilson_interval(0, 10), wilson_interval(10, 10)
    assert zero.low == 0.0 and zero.high == pytest.approx(0.2775, abs=1e-4)
    assert full.high == 1.0 and full.low == pytest.approx(0.7225, abs=1e-4)
    assert wilson_interval(0, 0).n == 0 and math.isnan(wilson_interval(0, 0).value)
    assert wilson_interval(2.5, 5).value == 0.5  # fractional success is allowed
    wider = wilson_interval(5, 10, confidence=0.99)
    assert wider.low < mid.low and wider.high > mid.high
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_mean_interval():
    values = [1.0, 2.0, 3.0, 4.0]
    interval = mean_interval(values)
    sd = math.sqrt(sum((v - 2.5) ** 2 for v in values) / 3)
    half = 3.182446 * sd / 2
    assert (interval.value, interval.low, interval.high) == pytest.approx(
        (2.5, 2.5 - half, 2.5 + half), abs=1e-5
    )
    assert mean_interval([7.0]).low == mean_interval([7.0]).high == 7.0
    assert mean_interval([]).n == 0


def test_intervals_cover_the_truth_about_95_percent_of_the_time():
    rng = random.Random(0)
    trials, covered_rate, covered_mean = 2000, 0, 0
    for _ in range(trials):
        successes = sum(rng.random() < 0.3 for _ in range(40))
        interval = wilson_interval(successes, 40)
        covered_rate += interval.low <= 0.3 <= interval.high
        sample = [rng.gauss(1.0, 2.0) for _ in range(8)]
        interval = mean_interval(sample)
        covered_mean += interval.low <= 1.0 <= interval.high
    assert 0.92 <= covered_rate / trials <= 0.98
    assert 0.93 <= covered_mean / trials <= 0.97
