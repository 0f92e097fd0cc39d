"""Confidence intervals (Wilson, bounded Wilson, Student t) and paired tests."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from llm_envs.evaluation.stats import (
    clustered_rate_interval,
    mcnemar_exact,
    mean_interval,
    metric_interval,
    paired_comparison,
    reward_interval,
    sign_flip_test,
    t_quantile,
    wilson_interval,
)

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


# ---------------------------------------------------------------------------- choosing an interval
def test_metric_interval_picks_wilson_for_0_1_and_stays_in_bounds_for_fractions():
    flags = [0.0] * 74 + [1.0]  # 1 of 75: the case the Student t interval put below zero
    interval = metric_interval(flags)
    assert interval.method == "wilson" and interval.low >= 0.0
    assert interval.value == pytest.approx(1 / 75) and interval.high == pytest.approx(0.0720, abs=1e-3)
    assert mean_interval(flags).low < 0.0  # what it replaces

    fractions = [0.0] * 70 + [0.25, 0.5, 0.5, 0.75, 1.0]
    interval = metric_interval(fractions)
    assert interval.method == "wilson-bounded" and 0.0 <= interval.low <= interval.value <= interval.high <= 1.0
    rewards = [-1.0, 0.5, 2.0, 3.0]
    assert metric_interval(rewards).method == "t"
    clipped = metric_interval([0.0, 0.0, 0.0, 7.0], lower=0.0)
    assert clipped.low == 0.0 and clipped.method == "t"


def test_bounded_wilson_covers_at_least_nominally_for_skewed_fractions():
    """Values in [0, 1] with most mass at 0 (pass rates of a weak model): the bounded interval
    must cover the true mean at least ~95% of the time, where the t interval falls short."""
    rng = np.random.default_rng(0)
    trials, n, covered_bounded, covered_t = 2000, 30, 0, 0
    true_mean = 0.2 * 0.5  # 20% of episodes have a uniform pass rate, the rest 0
    for _ in range(trials):
        values = np.where(rng.random(n) < 0.2, rng.random(n), 0.0).tolist()
        bounded = metric_interval(values)
        assert bounded.method in ("wilson-bounded", "wilson")
        covered_bounded += bounded.low <= true_mean <= bounded.high
        t = mean_interval(values)
        covered_t += t.low <= true_mean <= t.high
    assert covered_bounded / trials >= 0.95
    assert covered_t / trials < covered_bounded / trials


def test_clustered_rate_interval_covers_the_truth_when_errors_cluster_by_episode():
    """20 episodes of 6 actions, each episode all format errors (p = 0.2) or none: a Wilson
    interval over the 120 actions covered the true share in ~64% of runs; over the effective
    number of actions it covers it at least ~95% of the time (Wilson over the 20 episodes would)."""
    rng = random.Random(0)
    trials, covered_clustered, covered_flat = 1000, 0, 0
    for _ in range(trials):
        counts = [(6, 6) if rng.random() < 0.2 else (0, 6) for _ in range(20)]
        bad = sum(b for b, _ in counts)
        interval, effective = clustered_rate_interval(counts)
        assert interval.method == "wilson-clustered" and interval.n == 120
        assert interval.value == pytest.approx(bad / 120) and interval.low <= interval.value <= interval.high
        if 0 < bad < 120:
            assert effective == pytest.approx(19.0)  # fully clustered: m - 1 (the m/(m-1) correction)
        covered_clustered += interval.low <= 0.2 <= interval.high
        flat = wilson_interval(bad, 120)
        covered_flat += flat.low <= 0.2 <= flat.high
    assert covered_clustered / trials >= 0.93
    assert covered_flat / trials < 0.75  # what it replaces


def test_clustered_rate_interval_covers_the_truth_when_episodes_differ_in_length():
    """A model that breaks the format keeps its episode going: with probability p an episode is
    L actions, all errors, else one clean action. The true share of errors over actions is
    p·L / (p·L + 1 − p). Capping the design effect at one observation per episode covered it in
    80-90% of runs; uncapped, at least ~92% (a ratio over few error episodes is hard)."""
    rng = random.Random(2)
    for episodes, p, length in ((20, 0.2, 10), (30, 0.1, 20)):
        truth = p * length / (p * length + 1 - p)
        covered = 0
        for _ in range(800):
            counts = [(length, length) if rng.random() < p else (0, 1) for _ in range(episodes)]
            interval, _ = clustered_rate_interval(counts)
            covered += interval.low <= truth <= interval.high
        assert covered / 800 >= 0.91, (episodes, p, length, covered / 800)


def test_clustered_rate_interval_is_wilson_for_independent_events_and_edges():
    rng = random.Random(1)
    # Independent errors (p = 0.3) in episodes of 6: the design effect stays near 1.
    effects = []
    for _ in range(200):
        counts = [(sum(rng.random() < 0.3 for _ in range(6)), 6) for _ in range(40)]
        effects.append(240 / clustered_rate_interval(counts)[1])
    assert 0.95 <= sum(effects) / len(effects) <= 1.25
    # No spread to measure (a share of 0 or 1, or one episode): the plain Wilson interval.
    for counts in ([(0, 5), (0, 7)], [(5, 5), (7, 7)], [(3, 9)]):
        interval, effective = clustered_rate_interval(counts)
        bad, n = sum(b for b, _ in counts), sum(k for _, k in counts)
        plain = wilson_interval(bad, n)
        assert effective == n and (interval.low, interval.high) == pytest.approx((plain.low, plain.high))
    # Episodes without actions are no clusters; no actions at all: NaN in [0, 1].
    assert clustered_rate_interval([(1, 4), (0, 0), (3, 4)])[1] == clustered_rate_interval([(1, 4), (3, 4)])[1]
    empty, effective = clustered_rate_interval([(0, 0)])
    assert math.isnan(empty.value) and (empty.low, empty.high, effective) == (0.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        clustered_rate_interval([(3, 2)])


# ---------------------------------------------------------------------------- paired tests
def test_mcnemar_exact_matches_the_binomial_test():
    a = [1.0] * 10 + [0.0] * 10
    b = [1.0] * 4 + [0.0] * 6 + [1.0] * 1 + [0.0] * 9  # 6 pairs only A, 1 only B
    p, a_only, b_only = mcnemar_exact(a, b)
    assert (a_only, b_only) == (6, 1)
    # Two-sided exact binomial p for 1 of 7 at 1/2: 2 * (1 + 7) / 128.
    assert p == pytest.approx(16 / 128)
    assert mcnemar_exact([1.0, 0.0], [1.0, 0.0])[0] == 1.0
    result = paired_comparison("success", a, b)
    assert result.test == "McNemar exact" and result.p_value == pytest.approx(0.125)
    assert result.difference.value == pytest.approx(-0.25)
    assert -1.0 <= result.difference.low <= -0.25 <= result.difference.high <= 1.0


def test_sign_flip_test_exact_and_sampled():
    # All 5 differences positive: only the all-positive and all-negative assignments are as
    # extreme: p = 2 / 32.
    assert sign_flip_test([1.0, 2.0, 0.5, 3.0, 1.5]) == pytest.approx(2 / 32)
    assert sign_flip_test([0.0, 0.0]) == 1.0
    assert sign_flip_test([1.0, -1.0, 1.0, -1.0]) == 1.0
    # Beyond 16 non-zero differences it samples; a large consistent shift is clearly significant
    # and the estimate is never 0.
    shifted = [0.5 + 0.1 * (i % 3) for i in range(40)]
    p = sign_flip_test(shifted)
    assert 0.0 < p < 1e-3
    noise = np.random.default_rng(1).normal(0.0, 1.0, 40).tolist()
    assert sign_flip_test(noise) > 0.05


def test_paired_test_false_positive_rate_is_nominal():
    rng = np.random.default_rng(2)
    rejections = 0
    for _ in range(300):
        differences = rng.normal(0.0, 1.0, 25)  # paired differences with mean 0: the null is true
        rejections += sign_flip_test(differences.tolist(), samples=2000, seed=int(rng.integers(1 << 30))) < 0.05
    assert 0.02 <= rejections / 300 <= 0.09


def test_reward_intervals_of_non_negative_rewards_never_go_below_zero():
    # 1 of 12 episodes paid 1: Student t gave 0.083 [-0.100, 0.267]; Wilson by hand:
    # center (p + z²/2n)/(1 + z²/n) = 0.18437, half z·sqrt(p(1-p)/n + z²/4n²)/(1 + z²/n) = 0.16951
    listener = [1.0] + [0.0] * 11
    assert mean_interval(listener).low == pytest.approx(-0.1001, abs=1e-4)  # what it replaces
    got = reward_interval(listener)
    assert got.method == "wilson"
    assert (got.value, got.low, got.high) == pytest.approx((1 / 12, 0.01487, 0.35388), abs=1e-4)
    fractions = reward_interval([0.0, 0.25, 0.0, 0.0])
    assert fractions.method == "wilson-bounded" and fractions.low >= 0.0
    # beyond 1, non-negative: t (half width t_4 · sd/√n = 2.7764 · 1.3416/√5 = 1.666), clipped at 0
    big = reward_interval([0.0, 0.0, 0.0, 0.0, 3.0])
    assert big.method == "t" and big.low == 0.0 and big.high == pytest.approx(0.6 + 1.6659, abs=1e-3)
    # a reward that can be negative keeps the plain t interval
    signed = reward_interval([-1.0, 0.0, 0.0, 2.0])
    assert signed.low == pytest.approx(mean_interval([-1.0, 0.0, 0.0, 2.0]).low) and signed.low < 0


def test_the_mixed_settings_note_names_only_changes_that_mixed_episodes():
    """A change made before any episode was played mixes nothing; only the --force-resume
    changes after episodes were played are named."""
    from llm_envs.evaluation.summary import mixed_settings_note

    commands = [
        {"resume": False},
        {"resume": True, "settings_changed": ["max_turns: 2 -> 4"]},  # nothing played before it
        {"resume": True, "settings_changed": ["temperature: 0.0 -> 1.0"], "mixed": True},
    ]
    note = mixed_settings_note({"mixed_settings": True, "commands": commands})
    assert "temperature: 0.0 -> 1.0" in note and "max_turns" not in note
    assert mixed_settings_note({"mixed_settings": False, "commands": commands}) == ""
