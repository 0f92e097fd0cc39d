"""Loss terms against hand-computed values, plus hypothesis properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_trainers.algorithms import (
    clipped_surrogate_loss,
    entropy_from_logits,
    kl_estimate,
    policy_ratio,
    token_logprobs_from_logits,
    token_mean,
)

T = torch.tensor
L = math.log


def test_kl_estimators_hand_values():
    logp, ref = T([L(0.5)]), T([L(0.25)])  # d = ln 2 = 0.693147
    assert kl_estimate(logp, ref, "k1").item() == pytest.approx(0.693147, abs=1e-6)
    assert kl_estimate(logp, ref, "k2").item() == pytest.approx(0.5 * 0.693147**2, abs=1e-6)  # 0.240227
    assert kl_estimate(logp, ref, "k3").item() == pytest.approx(0.5 - 1 + 0.693147, abs=1e-6)  # 0.193147
    # d < 0: k1 negative, k2 and k3 positive; d = -ln 2 -> k3 = 2 - 1 - 0.693147 = 0.306853
    assert kl_estimate(ref, logp, "k1").item() == pytest.approx(-0.693147, abs=1e-6)
    assert kl_estimate(ref, logp, "k3").item() == pytest.approx(0.306853, abs=1e-6)
    # clamp at 10
    assert kl_estimate(T([0.0]), T([-50.0]), "k1").item() == 10.0
    with pytest.raises(ValueError):
        kl_estimate(logp, ref, "k4")


def test_ratio_is_exp_of_logratio_clamped():
    assert policy_ratio(T([L(1.5)]), T([0.0])).item() == pytest.approx(1.5)
    assert policy_ratio(T([100.0]), T([0.0])).item() == pytest.approx(math.exp(20.0), rel=1e-5)


@pytest.mark.parametrize(
    "ratio, adv, low, high, dual, expected",
    [
        (1.5, 1.0, 0.2, 0.2, None, -1.2),   # clipped at 1 + 0.2
        (1.5, 1.0, 0.2, 0.28, None, -1.28),  # asymmetric high clip
        (1.5, -1.0, 0.2, 0.2, None, 1.5),   # A<0: unclipped branch is the min
        (5.0, -1.0, 0.2, 0.2, None, 5.0),
        (5.0, -1.0, 0.2, 0.2, 3.0, 3.0),    # dual clip bounds at c·|A|
        (1.5, -1.0, 0.2, 0.2, 3.0, 1.5),    # dual clip not binding
        (0.5, 1.0, 0.2, 0.2, None, -0.5),
        (0.5, -1.0, 0.2, 0.2, None, 0.8),   # clipped at 1 - 0.2
        (0.5, -2.0, 0.1, 0.2, None, 1.8),   # clip_low 0.1: 0.9 * 2
        (1.0, 0.7, 0.2, 0.2, None, -0.7),
    ],
)
def test_clipped_surrogate_hand_values(ratio, adv, low, high, dual, expected):
    loss, stats = clipped_surrogate_loss(T([L(ratio)]), T([0.0]), T([adv]), low, high, dual)
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert stats.ratio.item() == pytest.approx(ratio, abs=1e-6)


def test_clip_stats_flags():
    _loss, stats = clipped_surrogate_loss(T([L(1.5), L(1.0), L(5.0)]), torch.zeros(3), T([1.0, 1.0, -1.0]), dual_clip=3.0)
    assert stats.clipped.tolist() == [1.0, 0.0, 0.0]
    assert stats.dual_clipped.tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(ValueError):
        clipped_surrogate_loss(T([0.0]), T([0.0]), T([1.0]), dual_clip=1.0)


def test_entropy_hand_values():
    assert entropy_from_logits(T([0.0, 0.0])).item() == pytest.approx(math.log(2))
    # p = [0.25, 0.75]
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))  # 0.562335
    assert entropy_from_logits(T([0.0, math.log(3)])).item() == pytest.approx(h, abs=1e-6)


def test_token_logprobs_match_log_softmax():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 7)
    tokens = torch.randint(0, 7, (2, 3))
    ref = torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    assert torch.allclose(token_logprobs_from_logits(logits, tokens), ref, atol=1e-6)


def test_token_mean_hand_values_and_global_count():
    v = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = T([[1, 1, 0], [1, 0, 0]])
    assert token_mean(v, m).item() == pytest.approx(7 / 3)
    assert token_mean(v, m, num_tokens=7).item() == pytest.approx(1.0)


def test_token_mean_over_micro_batches_equals_full_batch():
    torch.manual_seed(1)
    v = torch.randn(6, 5)
    m = (torch.rand(6, 5) > 0.3).float()
    n = m.sum()
    parts = sum(token_mean(v[i : i + 2], m[i : i + 2], num_tokens=n) for i in range(0, 6, 2))
    assert parts.item() == pytest.approx(token_mean(v, m).item(), abs=1e-6)


# ---------------------------------------------------------------- hypothesis properties


@settings(max_examples=300, deadline=None)
@given(
    st.floats(-5, 5, allow_nan=False),
    # Advantages below float32's normal range (~1e-38) round ρ·A and clip(ρ)·A to the same
    # subnormal, and the min then picks either branch: no property of the loss, only of float32.
    st.floats(-10, 10, allow_nan=False).filter(lambda a: a == 0 or abs(a) > 1e-30),
    st.floats(0.01, 0.5),
    st.floats(0.01, 0.5),
    st.one_of(st.none(), st.floats(1.5, 10)),
)
def test_property_clipping_bounds_ratio_effect(log_ratio, adv, low, high, dual):
    logp = T([log_ratio], dtype=torch.float32, requires_grad=True)
    loss, _ = clipped_surrogate_loss(logp, T([0.0]), T([adv]), low, high, dual)
    loss.sum().backward()
    ratio = math.exp(log_ratio)
    objective = -loss.item()  # what the policy maximises
    if adv > 0:
        # the policy can gain at most (1 + ε_high)·A however large ρ gets
        assert objective <= (1 + high) * adv + 1e-5
        if ratio > 1 + high + 1e-4:
            assert logp.grad.item() == 0.0
    if adv < 0:
        # pushing ρ down below 1 - ε_low gains nothing more
        assert objective <= (1 - low) * adv + 1e-5
        if ratio < 1 - low - 1e-4:
            assert logp.grad.item() == 0.0
        if dual is not None:
            # the loss of a negative-advantage token is bounded by c·|A|
            assert loss.item() <= -dual * adv + 1e-4
    if adv == 0:
        assert loss.item() == 0.0
