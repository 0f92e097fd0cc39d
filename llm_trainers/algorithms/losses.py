"""Policy-gradient loss terms: clipped surrogate, KL estimators, entropy, token-mean aggregation.

Notation: ``log π`` the current policy's log-probability of a sampled token, ``log π_old`` the
behaviour policy's (the policy that sampled, recomputed by the learner or reported by the
engine), ``log π_ref`` the reference policy's, ``A`` the token advantage, ``m`` the action mask.

Per-token losses are returned unreduced (``[B, T]``); :func:`token_mean` divides their masked
sum by the number of action tokens of the whole optimizer step (all micro-batches of the
gradient-accumulation window), so that the gradient does not depend on how the step is cut
into micro-batches (OpenRLHF/verl ``token-mean``, TRL ``dapo``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "KL_ESTIMATOR_REGISTRY",
    "SurrogateStats",
    "clipped_surrogate_loss",
    "entropy_from_logits",
    "kl_estimate",
    "policy_ratio",
    "register_kl_estimator",
    "token_logprobs_from_logits",
    "token_mean",
]

#: Name → per-token KL estimate from ``d = log π − log π_ref`` (:func:`register_kl_estimator`).
KL_ESTIMATOR_REGISTRY: dict[str, Callable[[Tensor], Tensor]] = {}


def register_kl_estimator(name: str) -> Callable[[Callable[[Tensor], Tensor]], Callable[[Tensor], Tensor]]:
    """Register the decorated ``d ↦ estimate`` (float32 ``d = log π − log π_ref``, any shape) as
    the KL estimator ``name`` (``algorithm.kl_estimator``, ``train.kl_estimator``)."""

    def decorate(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
        if name in KL_ESTIMATOR_REGISTRY:
            raise ValueError(f"a KL estimator named {name!r} is already registered")
        KL_ESTIMATOR_REGISTRY[name] = fn
        return fn

    return decorate


@register_kl_estimator("k1")
def kl_k1(d: Tensor) -> Tensor:
    """``k1 = d``: unbiased, can be negative; the usual in-reward penalty."""
    return d


@register_kl_estimator("k2")
def kl_k2(d: Tensor) -> Tensor:
    """``k2 = d² / 2``: biased, low variance; its gradient is the KL's gradient."""
    return 0.5 * d * d


@register_kl_estimator("k3")
def kl_k3(d: Tensor) -> Tensor:
    """``k3 = exp(−d) − 1 + d``: unbiased, non-negative (verl "low_var_kl")."""
    return torch.exp(-d.clamp(-20.0, 20.0)) - 1.0 + d


def kl_estimate(logp: Tensor, ref_logp: Tensor, estimator: str = "k1", clamp: float | None = 10.0) -> Tensor:
    """Per-token estimate of KL(π ‖ π_ref) from the sampled token's log-probabilities.

    With ``d = log π − log π_ref`` (computed in float32), the registered estimator ``estimator``
    (:data:`KL_ESTIMATOR_REGISTRY`): ``k1 = d``, ``k2 = d² / 2``, ``k3 = exp(−d) − 1 + d``.

    The result is clamped to ``[−clamp, clamp]`` (OpenRLHF and verl use 10); ``clamp=None``
    disables it.
    """
    if estimator not in KL_ESTIMATOR_REGISTRY:
        raise ValueError(f"unknown KL estimator {estimator!r}; choose one of {tuple(KL_ESTIMATOR_REGISTRY)}")
    kl = KL_ESTIMATOR_REGISTRY[estimator](logp.float() - ref_logp.float())
    if clamp is not None:
        kl = kl.clamp(-clamp, clamp)
    return kl


def policy_ratio(logp: Tensor, old_logp: Tensor, log_clamp: float = 20.0) -> Tensor:
    """Importance ratio ``ρ = exp(clamp(log π − log π_old, −20, 20))``."""
    return torch.exp((logp.float() - old_logp.float()).clamp(-log_clamp, log_clamp))


@dataclass
class SurrogateStats:
    """Diagnostics of one :func:`clipped_surrogate_loss` call (token tensors, unreduced).

    Attributes:
        ratio: ``ρ``.
        clipped: 1 where the clipped branch is the one that binds (the gradient through ρ is 0).
        dual_clipped: 1 where the dual clip binds (A < 0 and ρ > c).
    """

    ratio: Tensor
    clipped: Tensor
    dual_clipped: Tensor


def clipped_surrogate_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[Tensor, SurrogateStats]:
    """PPO clipped surrogate, per token, with asymmetric clip and optional dual clip.

    ``L_t = −min(ρ_t·A_t, clip(ρ_t, 1 − ε_low, 1 + ε_high)·A_t)``

    Dual clip (Ye et al. 2020; OpenRLHF ``dual_clip``, verl ``clip_ratio_c``), for ``A_t < 0``
    only: ``L_t = min(L_t, −c·A_t)``, i.e. ``−max(min(ρA, clip(ρ)A), c·A)``, which bounds the
    loss of a token whose ratio exploded while its advantage is negative. ``c > 1``.

    Because of the min, a token's loss stops depending on ρ once ρ leaves the trust region in
    the direction the advantage favours: the ratio's effect on the loss is bounded by
    ``(1 + ε_high)·A`` for ``A > 0`` and by ``(1 − ε_low)·A`` (and, with dual clip, ``c·A``)
    for ``A < 0``.

    Returns:
        ``(loss [B, T], stats)``; the loss is unreduced and unmasked.
    """
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    adv = advantages.float()
    ratio = policy_ratio(logp, old_logp)
    unclipped = ratio * adv
    clipped_ratio = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    clipped = clipped_ratio * adv
    surrogate = torch.minimum(unclipped, clipped)
    loss = -surrogate
    clip_binds = (clipped < unclipped).float()
    dual_binds = torch.zeros_like(loss)
    if dual_clip is not None:
        dual_bound = -dual_clip * adv
        dual_binds = ((adv < 0) & (loss > dual_bound)).float()
        loss = torch.where(adv < 0, torch.minimum(loss, dual_bound), loss)
    return loss, SurrogateStats(ratio=ratio.detach(), clipped=clip_binds.detach(), dual_clipped=dual_binds.detach())


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of the categorical distribution at each position: ``H = logsumexp(z) − Σ softmax(z)·z``.

    Args:
        logits: ``[..., V]`` (already divided by the sampling temperature).

    Returns:
        ``[...]`` entropies in nats.
    """
    logits = logits.float()
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def token_logprobs_from_logits(logits: Tensor, tokens: Tensor) -> Tensor:
    """``log softmax(z)[token]`` at each position, without materialising the full log-softmax.

    ``log p(x_t) = z_t[x_t] − logsumexp(z_t)``.

    Args:
        logits: ``[B, T, V]`` logits predicting ``tokens`` (already temperature-scaled).
        tokens: ``[B, T]`` token ids.
    """
    logits = logits.float()
    picked = logits.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def token_mean(values: Tensor, mask: Tensor, num_tokens: float | Tensor | None = None) -> Tensor:
    """Token-mean over the optimizer step: ``Σ_{i,t} v_{i,t}·m_{i,t} / N_tokens``.

    ``N_tokens`` is the number of action tokens in the *whole* optimizer step (every micro-batch
    of the gradient-accumulation window); pass it so that summing the micro-batch losses gives
    exactly the token-mean of the full step. ``None`` uses this tensor's own ``Σ m``.
    """
    maskf = mask.to(values.dtype)
    denom = maskf.sum() if num_tokens is None else torch.as_tensor(num_tokens, dtype=values.dtype)
    return (values * maskf).sum() / denom.clamp(min=1.0)
