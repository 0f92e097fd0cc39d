"""Off-policy corrections for samples made by an older policy (asynchronous training).

With ``rollout.async.max_staleness = k ≥ 1`` a sample may come from a policy up to ``k``
updates old. Three log-probabilities of each sampled token are then in play:

* ``log μ``      — the **behaviour** policy: the weights that sampled the token (the engine's
  reported log-probs, ``TrainRecord.logprobs``);
* ``log π_prox`` — the **proximal** policy: the learner's weights before this iteration's update
  (the recomputed ``log π_old`` of the synchronous loop, ``algorithm.recompute_old_logprobs``);
* ``log π_θ``    — the policy being optimised.

PPO's surrogate clips the ratio ``r = π_θ / π_prox``; the token's contribution is then
re-weighted by ``w = π_prox / μ``, the importance weight that turns an expectation over ``μ``
(what was sampled) into one over ``π_prox`` (what the surrogate assumes). Per token:

``L_t = − w_t · min(r_t·A_t, clip(r_t, 1 − ε_low, 1 + ε_high)·A_t)``,  ``w_t`` detached.

The corrections differ only in what they do with a large ``w``:

* ``tis`` — truncated importance sampling (Ionides 2008; as applied to LLM RL by Yao et al.,
  "Your efficient RL framework secretly brings you off-policy RL training"): ``w = min(π_prox/μ, C)``.
  Biased towards ``μ`` on the truncated tokens, variance bounded by ``C``.
* ``decoupled_ppo`` — AReaL's decoupled PPO objective (Fu et al. 2025, arXiv 2505.24298): the
  untruncated ``w = π_prox/μ``; with a cap ``C`` (AReaL's ``behav_imp_weight_cap``), a token
  whose weight exceeds it is left out (``w = 0``) rather than truncated.

Both reduce to the synchronous loss when ``μ = π_prox`` (``w = 1``). ``w`` is computed from a
log-ratio clamped to ±20 as :func:`~llm_trainers.algorithms.losses.policy_ratio` does.
Derivation in docs/training.md ("Asynchronous training").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from llm_trainers.algorithms.losses import SurrogateStats, clipped_surrogate_loss

__all__ = [
    "OFF_POLICY_CORRECTIONS",
    "OffPolicyStats",
    "behaviour_weight",
    "corrected_surrogate_loss",
    "decoupled_ppo_weights",
    "off_policy_weights",
    "tis_weights",
]

#: ``train.off_policy`` values: ``none`` trains on stale samples as if they were fresh.
OFF_POLICY_CORRECTIONS = ("none", "tis", "decoupled_ppo")


def behaviour_weight(prox_logp: Tensor, behaviour_logp: Tensor, log_clamp: float = 20.0) -> Tensor:
    """The untruncated importance weight ``π_prox/μ = exp(clamp(log π_prox − log μ, ±20))``."""
    return torch.exp((prox_logp.float() - behaviour_logp.float()).clamp(-log_clamp, log_clamp))


@dataclass
class OffPolicyStats:
    """Diagnostics of one weight computation (token tensors, unreduced, detached).

    Attributes:
        ratio: The untruncated ``π_prox/μ``.
        clipped: 1 where the cap changed the token's weight (truncated by TIS, dropped by
            decoupled PPO).
    """

    ratio: Tensor
    clipped: Tensor


def tis_weights(prox_logp: Tensor, behaviour_logp: Tensor, cap: float) -> tuple[Tensor, OffPolicyStats]:
    """Truncated importance weights ``w_t = min(π_prox(a_t)/μ(a_t), C)`` (detached).

    Args:
        prox_logp: ``log π_prox`` of the sampled tokens (the learner before the update).
        behaviour_logp: ``log μ`` (the engine that sampled them).
        cap: ``C > 0``.
    """
    if cap <= 0:
        raise ValueError(f"the TIS cap must be > 0, got {cap}")
    ratio = behaviour_weight(prox_logp, behaviour_logp).detach()
    return ratio.clamp(max=cap), OffPolicyStats(ratio=ratio, clipped=(ratio > cap).float())


def decoupled_ppo_weights(prox_logp: Tensor, behaviour_logp: Tensor,
                          cap: float | None = None) -> tuple[Tensor, OffPolicyStats]:
    """AReaL's behaviour weights ``w_t = π_prox(a_t)/μ(a_t)``, and ``0`` where ``w_t > cap``
    (a token that far off-policy is left out of the update; ``cap=None``: no cap). Detached."""
    if cap is not None and cap <= 0:
        raise ValueError(f"the decoupled PPO cap must be > 0, got {cap}")
    ratio = behaviour_weight(prox_logp, behaviour_logp).detach()
    if cap is None:
        return ratio, OffPolicyStats(ratio=ratio, clipped=torch.zeros_like(ratio))
    over = ratio > cap
    return torch.where(over, torch.zeros_like(ratio), ratio), OffPolicyStats(ratio=ratio, clipped=over.float())


def off_policy_weights(correction: str, prox_logp: Tensor, behaviour_logp: Tensor,
                       cap: float | None) -> tuple[Tensor, OffPolicyStats]:
    """The per-token weight of ``correction`` (one of :data:`OFF_POLICY_CORRECTIONS`)."""
    if correction == "tis":
        if cap is None:
            raise ValueError("tis needs a cap (train.is_cap)")
        return tis_weights(prox_logp, behaviour_logp, cap)
    if correction == "decoupled_ppo":
        return decoupled_ppo_weights(prox_logp, behaviour_logp, cap)
    if correction == "none":
        ratio = behaviour_weight(prox_logp, behaviour_logp).detach()
        return torch.ones_like(ratio), OffPolicyStats(ratio=ratio, clipped=torch.zeros_like(ratio))
    raise ValueError(f"unknown off-policy correction {correction!r}; choose one of {OFF_POLICY_CORRECTIONS}")


def corrected_surrogate_loss(
    logp: Tensor,
    prox_logp: Tensor,
    behaviour_logp: Tensor,
    advantages: Tensor,
    correction: str,
    cap: float | None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[Tensor, SurrogateStats, OffPolicyStats]:
    """The clipped surrogate of ``r = π_θ/π_prox``, weighted per token by the correction's
    ``w`` (detached): ``L_t = w_t · L_t^{clip}(r_t, A_t)``.

    Returns:
        ``(loss [B, T], the surrogate's stats, the weights' stats)``; unreduced and unmasked.
    """
    loss, stats = clipped_surrogate_loss(logp, prox_logp, advantages, clip_low, clip_high, dual_clip)
    weight, off = off_policy_weights(correction, prox_logp, behaviour_logp, cap)
    return weight * loss, stats, off
