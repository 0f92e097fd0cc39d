"""Advantage estimators against hand-computed tensors, plus hypothesis properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_trainers.algorithms import (
    broadcast_to_tokens,
    compute_advantages,
    group_baseline_rewards,
    group_ids_from_keys,
    group_normalized_advantages,
    kl_penalized_token_rewards,
    masked_whiten,
    partitioned_whiten,
    reinforce_pp_advantages,
    returns_to_go,
)

T = torch.tensor


def test_group_ids_are_dense_in_first_appearance_order():
    keys = [("e0", "a", 0), ("e1", "a", 0), ("e0", "a", 0), ("e0", "b", 0)]
    assert group_ids_from_keys(keys).tolist() == [0, 1, 0, 2]


def test_group_normalized_hand_values_population_std():
    # group a = [1, 0, 0, 1]: mean 0.5, population std 0.5 -> ±0.5/(0.5+1e-6)
    # group b = [2, 2]: all equal -> 0 ; group c = [5]: singleton -> 0
    rewards = T([1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 5.0])
    gids = group_ids_from_keys(["a", "a", "a", "a", "b", "b", "c"])
    adv = group_normalized_advantages(rewards, gids, eps=1e-6)
    a = 0.5 / (0.5 + 1e-6)
    assert adv.tolist() == pytest.approx([a, -a, -a, a, 0.0, 0.0, 0.0], abs=1e-7)


def test_group_normalized_hand_values_unbiased_std():
    # group [1,0,0,1]: unbiased std = sqrt((4 * 0.25) / 3) = 0.5773503 -> 0.5 / 0.5773503 = 0.8660254
    rewards = T([1.0, 0.0, 0.0, 1.0])
    adv = group_normalized_advantages(rewards, torch.zeros(4, dtype=torch.long), eps=0.0, unbiased_std=True)
    assert adv.tolist() == pytest.approx([0.8660254, -0.8660254, -0.8660254, 0.8660254], abs=1e-6)


def test_group_normalized_three_values_and_no_scale():
    # [3, 1, 2]: mean 2, population std sqrt(2/3) = 0.8164966 -> [1.2247449, -1.2247449, 0]
    rewards = T([3.0, 1.0, 2.0])
    gids = torch.zeros(3, dtype=torch.long)
    assert group_normalized_advantages(rewards, gids, eps=0.0).tolist() == pytest.approx(
        [1.2247449, -1.2247449, 0.0], abs=1e-6
    )
    assert group_normalized_advantages(rewards, gids, scale=False).tolist() == pytest.approx([1.0, -1.0, 0.0])


def test_all_equal_group_is_exactly_zero_even_with_round_off():
    # 0.1 * 3 / 3 != 0.1 in floating point; the rule still gives exact zeros, not noise/eps.
    rewards = T([0.1, 0.1, 0.1], dtype=torch.float64)
    adv = group_normalized_advantages(rewards, torch.zeros(3, dtype=torch.long), eps=1e-12)
    assert adv.tolist() == [0.0, 0.0, 0.0]


def test_group_baseline_subtracts_group_mean():
    rewards = T([1.0, 0.0, 0.5, 0.5, 3.0])
    gids = group_ids_from_keys(["a", "a", "b", "b", "c"])
    assert group_baseline_rewards(rewards, gids).tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0, 0.0])


def test_kl_penalized_token_rewards_hand_values():
    mask = T([[1, 1, 1], [1, 1, 0], [0, 0, 0]])
    kl = T([[0.1, 0.2, 0.3], [0.5, -0.5, 9.0], [1.0, 1.0, 1.0]])
    rewards = T([1.0, 0.0, 7.0])
    r = kl_penalized_token_rewards(rewards, kl, mask, beta=0.1)
    # row0: -0.01, -0.02, -0.03 + 1 ; row1: -0.05, +0.05, masked ; row2: no tokens -> nothing
    assert r.tolist()[0] == pytest.approx([-0.01, -0.02, 0.97])
    assert r.tolist()[1] == pytest.approx([-0.05, 0.05, 0.0])
    assert r.tolist()[2] == [0.0, 0.0, 0.0]
    clipped = kl_penalized_token_rewards(T([20.0]), None, T([[1, 1]]), beta=0.0, reward_clip=10.0)
    assert clipped.tolist() == [[0.0, 10.0]]


def test_returns_to_go_gamma_one_and_discounted_with_hole():
    r = T([[1.0, 2.0, 4.0]])
    assert returns_to_go(r, T([[1, 1, 1]])).tolist() == [[7.0, 6.0, 4.0]]
    # gamma 0.5: G2 = 4, G1 = 2 + 0.5*4 = 4, G0 = 1 + 0.5*4 = 3
    assert returns_to_go(r, T([[1, 1, 1]]), gamma=0.5).tolist() == [[3.0, 4.0, 4.0]]
    # a mask-0 token inside the sequence adds nothing and is not discounted over; output 0 there
    r2 = T([[1.0, 5.0, 4.0]])
    assert returns_to_go(r2, T([[1, 0, 1]]), gamma=0.5).tolist() == [[3.0, 0.0, 4.0]]


def test_reinforce_pp_hand_values():
    mask = T([[1, 1, 1], [1, 1, 0]])
    kl = T([[0.1, 0.2, 0.3], [0.5, -0.5, 9.0]])
    rewards = T([1.0, 0.0])
    adv = reinforce_pp_advantages(rewards, mask, kl=kl, beta=0.1)
    # token rewards: [-0.01, -0.02, 0.97], [-0.05, 0.05, -]
    # returns (gamma 1): [0.94, 0.95, 0.97], [0.00, 0.05, -]
    g = [0.94, 0.95, 0.97, 0.0, 0.05]
    mu = sum(g) / 5  # 0.582
    var = sum((x - mu) ** 2 for x in g) / 5  # 0.207176 (biased)
    w = [(x - mu) / math.sqrt(var) for x in g]
    assert adv[0].tolist() == pytest.approx(w[:3], abs=1e-5)
    assert adv[1].tolist() == pytest.approx([w[3], w[4], 0.0], abs=1e-5)
    assert w[0] == pytest.approx(0.78653, abs=1e-4) and w[3] == pytest.approx(-1.27866, abs=1e-4)


def test_reinforce_pp_baseline_hand_values():
    # R' = [0.5, -0.5, 0, 0]; one token each; whitened: var = 0.125 -> ±0.5/0.353553 = ±1.414214
    rewards = T([1.0, 0.0, 0.5, 0.5])
    mask = torch.ones(4, 1)
    adv = compute_advantages("reinforce_pp_baseline", rewards, mask, group_keys=["a", "a", "b", "b"])
    assert adv.squeeze(1).tolist() == pytest.approx([1.414214, -1.414214, 0.0, 0.0], abs=1e-5)


def test_task_relative_whitens_within_each_role():
    rewards = T([1.0, 3.0, 10.0, 10.0, 0.0, 4.0])
    mask = torch.ones(6, 1)
    roles = ["solver", "solver", "judge", "judge", "proposer", "proposer"]
    adv = compute_advantages("task_relative_reinforce_pp", rewards, mask, group_keys=list(range(6)), roles=roles)
    # Bessel's correction within each role (verl 0.4.1, as Multi-Agent Evolve): solver [1, 3]:
    # mean 2, var (1 + 1)/(2 − 1) = 2 -> ±1/√2; judge [10, 10] -> var 0 floored -> [0, 0];
    # proposer [0, 4]: var (4 + 4)/1 = 8 -> ±2/√8 = ±1/√2.
    h = 2**-0.5
    assert adv.squeeze(1).tolist() == pytest.approx([-h, h, 0.0, 0.0, -h, h], abs=1e-6)
    # The biased variance, on request: var 1 and 4 -> ±1.
    biased = compute_advantages("task_relative_reinforce_pp", rewards, mask, group_keys=list(range(6)), roles=roles,
                                options={"unbiased_variance": False})
    assert biased.squeeze(1).tolist() == pytest.approx([-1.0, 1.0, 0.0, 0.0, -1.0, 1.0], abs=1e-6)
    # batch whitening instead mixes the roles: judge rewards become positive advantages
    batch = compute_advantages("reinforce_pp", rewards, mask, group_keys=list(range(6)))
    assert batch[2, 0] > 1.0


def test_task_relative_bessel_correction_counts_tokens():
    # One role, rewards 3 and 0 on records of 2 and 1 action tokens: token returns [3, 3 | 0],
    # mean 2, squared deviations 1 + 1 + 4 = 6; verl divides by 3 − 1 tokens: var 3 ->
    # [1, 1, −2]/√3; the biased variance 6/3 = 2 -> [1, 1, −2]/√2.
    rewards = T([3.0, 0.0])
    mask = T([[1, 1], [1, 0]])
    adv = compute_advantages("task_relative_reinforce_pp", rewards, mask, group_keys=[0, 1], roles=["s", "s"])
    r3 = 3**-0.5
    assert adv.flatten().tolist() == pytest.approx([r3, r3, -2 * r3, 0.0], abs=1e-6)
    biased = compute_advantages("task_relative_reinforce_pp", rewards, mask, group_keys=[0, 1], roles=["s", "s"],
                                options={"unbiased_variance": False})
    r2 = 2**-0.5
    assert biased.flatten().tolist() == pytest.approx([r2, r2, -2 * r2, 0.0], abs=1e-6)
    # A role with a single action token is 0 after centring under either convention.
    single = compute_advantages("task_relative_reinforce_pp", T([5.0]), T([[1]]), group_keys=[0], roles=["s"])
    assert single.tolist() == [[0.0]]


def test_per_agent_whitening_uses_agents_not_roles():
    rewards = T([1.0, 3.0, 0.0, 4.0])
    mask = torch.ones(4, 1)
    adv = compute_advantages(
        "per_agent_reinforce_pp", rewards, mask, group_keys=list(range(4)),
        roles=["solver"] * 4, agents=["u1", "u1", "u2", "u2"],
    )
    assert adv.squeeze(1).tolist() == pytest.approx([-1.0, 1.0, -1.0, 1.0], abs=1e-6)


def test_at_grpo_dispatch_tiles_over_tokens():
    rewards = T([1.0, 0.0])
    mask = T([[1, 1, 0], [1, 0, 0]])
    adv = compute_advantages("at_grpo", rewards, mask, group_keys=[("e", "a", 0)] * 2, eps=0.0)
    assert adv.tolist() == [[1.0, 1.0, 0.0], [-1.0, 0.0, 0.0]]
    with pytest.raises(ValueError):
        compute_advantages("grpo_typo", rewards, mask, group_keys=[0, 0])


def test_masked_whiten_floor_and_scale_off():
    v = T([[2.0, 2.0, 99.0]])
    m = T([[1, 1, 0]])
    assert masked_whiten(v, m).tolist() == [[0.0, 0.0, 0.0]]  # zero variance, floored -> zeros
    assert masked_whiten(T([[1.0, 3.0]]), T([[1, 1]]), scale=False).tolist() == [[-1.0, 1.0]]


def test_broadcast_to_tokens():
    assert broadcast_to_tokens(T([2.0, -1.0]), T([[1, 0], [1, 1]])).tolist() == [[2.0, 0.0], [-1.0, -1.0]]


# ---------------------------------------------------------------- hypothesis properties

finite = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(finite, st.integers(0, 4)), min_size=1, max_size=30))
def test_property_group_advantages_sum_to_zero(items):
    rewards = T([r for r, _ in items], dtype=torch.float64)
    gids = group_ids_from_keys([g for _, g in items])
    adv = group_normalized_advantages(rewards, gids).double()
    for g in gids.unique():
        sel = adv[gids == g]
        assert abs(float(sel.sum())) < 1e-4 * max(1, len(sel))
        # normalised: within a non-uniform group the population std of A is ~1
        if len(sel) > 1 and float(rewards[gids == g].std()) > 1e-3:
            assert float(sel.std(unbiased=False)) == pytest.approx(1.0, abs=1e-3)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(finite, min_size=5, max_size=5), min_size=n, max_size=n),
            st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=n, max_size=n),
        )
    )
)
def test_property_whitening_mean0_var1_over_masked(data):
    vals, mask = data
    v = T(vals, dtype=torch.float64)
    m = T(mask, dtype=torch.float64)
    sel = v[m > 0]
    if sel.numel() < 2 or float(sel.var(unbiased=False)) < 1e-3:
        return
    w = masked_whiten(v, m)
    ws = w[m > 0]
    assert float(ws.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(ws.var(unbiased=False)) == pytest.approx(1.0, abs=1e-6)
    assert (w[m == 0] == 0).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(finite, st.integers(0, 2)), min_size=2, max_size=20))
def test_property_partitioned_whitening_each_partition_normalised(items):
    v = T([[r] for r, _ in items], dtype=torch.float64)
    parts = T([p for _, p in items])
    w = partitioned_whiten(v, torch.ones_like(v), parts)
    for p in parts.unique():
        sel, ws = v[parts == p], w[parts == p]
        assert float(ws.mean()) == pytest.approx(0.0, abs=1e-6)
        if len(sel) > 1 and float(sel.var(unbiased=False)) > 1e-3:
            assert float(ws.var(unbiased=False)) == pytest.approx(1.0, abs=1e-6)
