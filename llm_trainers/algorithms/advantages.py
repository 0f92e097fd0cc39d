"""Advantage estimators: AT-GRPO and the REINFORCE++ family.

Every function here is a pure tensor computation. Notation used in the docstrings:

* ``N`` training records (one record = one action of one agent), ``T`` the padded number of
  sampled (completion) tokens per record.
* ``R_i`` the scalar reward of record ``i``; ``g(i)`` its group (for AT-GRPO the key
  (environment instance, agent, turn)); ``m_{i,t}`` the action mask (1 on sampled tokens).
* Token tensors are right-padded ``[N, T]``; padded positions carry ``m = 0`` and every function
  returns 0 there.

Reference semantics (see ``docs/training.md``): OpenRLHF ``reinforce`` / ``reinforce_baseline``
(token KL in the reward, return-to-go, whitening over all action tokens of the batch with the
biased variance floored at 1e-8), verl ``grpo`` and the AT-GRPO paper (group normalisation by
(env, agent, turn)), Multi-Agent Evolve (Task-Relative REINFORCE++: whitening within each role),
CoMAS (REINFORCE++ per agent over the agent's own buffer), SPIRAL (role-conditioned advantage
estimation: an exponential moving average of each (game, role)'s return as its baseline).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, SimpleNamespace
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "ESTIMATOR_REGISTRY",
    "AdvantageBatch",
    "EstimatorInfo",
    "broadcast_to_tokens",
    "compute_advantages",
    "estimate_advantages",
    "estimator_config_problems",
    "estimator_info",
    "group_baseline_rewards",
    "group_ids_from_keys",
    "group_mean",
    "group_normalized_advantages",
    "group_std",
    "kl_penalized_token_rewards",
    "masked_mean",
    "masked_whiten",
    "partitioned_whiten",
    "register_estimator",
    "reinforce_pp_advantages",
    "returns_to_go",
    "role_conditioned_advantages",
    "trajectory_returns",
]

#: SPIRAL's decay of the role baselines (``b ← α·b + (1 − α)·R``, α = 0.95).
RAE_DECAY = 0.95


def group_ids_from_keys(keys: Sequence[Hashable]) -> Tensor:
    """Map arbitrary hashable group keys to dense ids ``0..G-1`` in order of first appearance.

    ``["a", "b", "a"] -> tensor([0, 1, 0])``.
    """
    index: dict[Hashable, int] = {}
    return torch.tensor([index.setdefault(k, len(index)) for k in keys], dtype=torch.long)


def group_mean(values: Tensor, group_ids: Tensor) -> Tensor:
    """Per-item mean of the item's group: ``mean_g(i) = (1/|g|) Σ_{j∈g(i)} v_j``.

    Args:
        values: ``[N]`` float tensor.
        group_ids: ``[N]`` long tensor of dense ids.

    Returns:
        ``[N]`` tensor; item ``i`` holds the mean of its group.
    """
    num_groups = int(group_ids.max()) + 1 if group_ids.numel() else 0
    sums = torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(0, group_ids, values)
    counts = torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(
        0, group_ids, torch.ones_like(values)
    )
    return (sums / counts)[group_ids]


def group_std(values: Tensor, group_ids: Tensor, unbiased: bool = False) -> Tensor:
    """Per-item standard deviation of the item's group.

    ``std_g = sqrt( Σ_{j∈g} (v_j − mean_g)² / (|g| − u) )`` with ``u = 1`` if ``unbiased`` else 0.
    A group of one item has std 0 under either convention (the unbiased form would divide 0 by 0).
    """
    num_groups = int(group_ids.max()) + 1 if group_ids.numel() else 0
    centered_sq = (values - group_mean(values, group_ids)) ** 2
    sq_sums = torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(0, group_ids, centered_sq)
    counts = torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(
        0, group_ids, torch.ones_like(values)
    )
    denom = (counts - 1.0).clamp(min=1.0) if unbiased else counts
    return torch.sqrt(sq_sums / denom)[group_ids]


def group_normalized_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    eps: float = 1e-6,
    unbiased_std: bool = False,
    scale: bool = True,
) -> Tensor:
    """AT-GRPO / GRPO group-normalised advantage of each record.

    ``A_i = (R_i − mean_{g(i)} R) / (std_{g(i)} R + ε)``  (``scale=False``: ``A_i = R_i − mean``, Dr. GRPO).

    **Rule for all-equal groups**: a group whose rewards are all equal (this includes a group of
    one record) carries no preference between its members, so each of its advantages is exactly
    0 — not ``0/ε`` round-off noise. Such records still enter the loss (their KL and entropy
    terms act, and their tokens count in the token-mean denominator) unless the trainer is told
    to drop them (``algorithm.drop_uniform_groups``, DAPO-style dynamic filtering).

    Args:
        rewards: ``[N]`` scalar rewards.
        group_ids: ``[N]`` dense group ids (see :func:`group_ids_from_keys`).
        eps: ε added to the std (verl uses 1e-6).
        unbiased_std: Bessel-corrected std (verl/``torch.std``) instead of the population std
            (``np.std``, the paper's pseudo-code).
        scale: divide by ``std + ε``.

    Returns:
        ``[N]`` advantages; within every group they sum to 0.
    """
    rewards = rewards.to(torch.float64) if rewards.dtype != torch.float64 else rewards
    mean = group_mean(rewards, group_ids)
    centered = rewards - mean
    std = group_std(rewards, group_ids, unbiased=unbiased_std)
    adv = centered / (std + eps) if scale else centered
    # All-equal groups: exact zero (max − min == 0 is exact, unlike std == 0 after round-off).
    num_groups = int(group_ids.max()) + 1 if group_ids.numel() else 0
    full = {"dtype": rewards.dtype, "device": rewards.device}
    gmax = torch.full((num_groups,), -torch.inf, **full).scatter_reduce(0, group_ids, rewards, "amax")
    gmin = torch.full((num_groups,), torch.inf, **full).scatter_reduce(0, group_ids, rewards, "amin")
    uniform = (gmax == gmin)[group_ids]
    adv = torch.where(uniform, torch.zeros_like(adv), adv)
    return adv.to(torch.float32)


def group_baseline_rewards(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """REINFORCE++-baseline's first step: ``R'_i = R_i − mean_{g(i)} R``."""
    return rewards - group_mean(rewards, group_ids)


def kl_penalized_token_rewards(
    rewards: Tensor,
    kl: Tensor | None,
    mask: Tensor,
    beta: float,
    reward_clip: float | None = None,
) -> Tensor:
    """Token-level reward with the KL penalty in the reward (REINFORCE++).

    ``r_{i,t} = −β · kl_{i,t} · m_{i,t}  +  1[t = last_i] · clip(R_i, −c, c)``,
    where ``last_i`` is the last position with ``m = 1`` and ``c = reward_clip`` (no clip if None).
    A record with no sampled token contributes nothing.

    Args:
        rewards: ``[N]`` scalar rewards.
        kl: ``[N, T]`` per-token KL estimates (e.g. ``k1(log π_old − log π_ref)``) or None.
        mask: ``[N, T]`` action mask.
        beta: KL coefficient β.
        reward_clip: symmetric clip of the scalar reward (OpenRLHF uses 10).
    """
    mask = mask.to(torch.float32)
    token_rewards = torch.zeros_like(mask)
    if kl is not None and beta != 0.0:
        token_rewards = token_rewards - beta * kl.to(torch.float32) * mask
    r = rewards.to(torch.float32)
    if reward_clip is not None:
        r = r.clamp(-reward_clip, reward_clip)
    lengths = mask.sum(dim=1).long()
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    # Index of the last masked token: the largest position with m = 1.
    last = torch.where(mask > 0, positions, torch.full_like(positions, -1)).max(dim=1).values
    has_tokens = lengths > 0
    rows = torch.nonzero(has_tokens).squeeze(1)
    token_rewards[rows, last[rows]] += r[rows]
    return token_rewards


def returns_to_go(token_rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """Discounted return-to-go over the action tokens.

    ``G_{i,t} = Σ_{k ≥ t} γ^{(k − t)} · m_{i,k} · r_{i,k}``, computed right to left as
    ``G_t = m_t·r_t + γ·G_{t+1}``. Masked positions (padding, or non-sampled tokens inside a
    sequence) add no reward; the returned tensor is 0 there (the running return is carried
    through them unchanged and not discounted, as in verl).
    """
    mask = mask.to(token_rewards.dtype)
    out = torch.zeros_like(token_rewards)
    running = torch.zeros(token_rewards.shape[0], dtype=token_rewards.dtype, device=token_rewards.device)
    for t in range(token_rewards.shape[1] - 1, -1, -1):
        m = mask[:, t]
        running = m * (token_rewards[:, t] + gamma * running) + (1.0 - m) * running
        out[:, t] = running * m
    return out


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """``Σ v·m / Σ m`` (0 if the mask is empty)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def masked_whiten(
    values: Tensor, mask: Tensor, var_floor: float = 1e-8, scale: bool = True, unbiased: bool = False
) -> Tensor:
    """Whiten over the masked entries of the whole tensor (OpenRLHF's batch normalisation).

    ``μ = Σ v·m / Σ m``, ``σ² = Σ (v − μ)²·m / (Σ m − u)`` with ``u = 0`` (biased, OpenRLHF)
    or, with ``unbiased``, ``u = 1`` (Bessel's correction over the masked tokens, verl's
    ``masked_whiten``; one masked entry keeps ``u = 0``: it is 0 after centring either way), then
    ``v' = (v − μ) · rsqrt(max(σ², var_floor))``; with ``scale=False`` only the mean is removed
    (OpenRLHF ``no_std_norm``). Masked-out entries are set to 0.

    After whitening the masked entries have mean 0 and variance 1 (population variance, or
    sample variance with ``unbiased``), unless ``σ² < var_floor`` (then the variance is
    ``σ²/var_floor``, e.g. all-equal values stay 0).
    """
    maskf = mask.to(values.dtype)
    n = maskf.sum()
    if n == 0:
        return torch.zeros_like(values)
    mu = (values * maskf).sum() / n
    centered = values - mu
    if not scale:
        return centered * maskf
    dof = n - 1 if unbiased and n > 1 else n
    var = ((centered**2) * maskf).sum() / dof
    return centered * torch.rsqrt(var.clamp(min=var_floor)) * maskf


def partitioned_whiten(
    values: Tensor, mask: Tensor, partition_ids: Tensor, var_floor: float = 1e-8, unbiased: bool = False
) -> Tensor:
    """Whiten separately within each partition of rows (Task-Relative / per-agent REINFORCE++).

    For every partition ``p`` (a role, or an agent): ``v'_{i,t} = masked_whiten(v, m·1[p(i)=p])``
    (``unbiased``: Bessel's correction within the partition). Each partition's masked entries
    end up with mean 0 and variance 1.

    Args:
        values: ``[N, T]``.
        mask: ``[N, T]``.
        partition_ids: ``[N]`` long, the partition of each row.
    """
    out = torch.zeros_like(values)
    for p in torch.unique(partition_ids):
        rows = partition_ids == p
        out[rows] = masked_whiten(values[rows], mask[rows], var_floor=var_floor, unbiased=unbiased)
    return out


def broadcast_to_tokens(per_record: Tensor, mask: Tensor) -> Tensor:
    """Tile a per-record scalar over the record's action tokens: ``A_{i,t} = A_i · m_{i,t}``."""
    return per_record.to(torch.float32)[:, None] * mask.to(torch.float32)


def reinforce_pp_advantages(
    rewards: Tensor,
    mask: Tensor,
    kl: Tensor | None = None,
    beta: float = 0.0,
    gamma: float = 1.0,
    baseline_group_ids: Tensor | None = None,
    whiten_partition_ids: Tensor | None = None,
    reward_clip: float | None = None,
    var_floor: float = 1e-8,
    unbiased_whitening: bool = False,
) -> Tensor:
    """REINFORCE++ token advantages (and its baseline / per-partition variants).

    1. (baseline variant) ``R'_i = R_i − mean_{g(i)} R``, else ``R'_i = R_i``.
    2. ``r_{i,t} = −β·kl_{i,t} + 1[t = last_i]·R'_i``     (:func:`kl_penalized_token_rewards`)
    3. ``G_{i,t} = Σ_{k≥t} γ^{k−t} m_{i,k} r_{i,k}``     (:func:`returns_to_go`, γ = 1 by default)
    4. ``A = (G − μ)·rsqrt(max(σ², 1e-8))`` over all action tokens of the batch
       (:func:`masked_whiten`), or within each partition (role: Task-Relative REINFORCE++;
       agent: CoMAS per-agent REINFORCE++) when ``whiten_partition_ids`` is given
       (:func:`partitioned_whiten`); ``unbiased_whitening`` divides by (tokens − 1) (verl).

    Returns:
        ``[N, T]`` advantages, 0 on masked positions.
    """
    r = rewards.to(torch.float32)
    if baseline_group_ids is not None:
        r = group_baseline_rewards(r, baseline_group_ids)
    token_rewards = kl_penalized_token_rewards(r, kl, mask, beta, reward_clip=reward_clip)
    returns = returns_to_go(token_rewards, mask, gamma=gamma)
    if whiten_partition_ids is None:
        return masked_whiten(returns, mask, var_floor=var_floor, unbiased=unbiased_whitening)
    return partitioned_whiten(
        returns, mask, whiten_partition_ids, var_floor=var_floor, unbiased=unbiased_whitening
    )


def trajectory_returns(rewards: Tensor, trajectory_keys: Sequence[Hashable]) -> Tensor:
    """The return of each record's trajectory: ``R_i = Σ_{j: τ(j) = τ(i)} r_j`` (γ = 1).

    A trajectory is one agent's part of one episode (key e.g. (instance, episode, agent)). With
    the reward of a game credited at its end (to the agent's last record), every record of the
    agent gets the game's outcome.
    """
    ids = group_ids_from_keys(trajectory_keys)
    num = int(ids.max()) + 1 if ids.numel() else 0
    sums = torch.zeros(num, dtype=torch.float64).index_add_(0, ids, rewards.to(torch.float64))
    return sums[ids].to(torch.float32)


def role_conditioned_advantages(
    returns: Tensor,
    trajectory_keys: Sequence[Hashable],
    role_keys: Sequence[Hashable],
    baselines: dict[Hashable, float],
    decay: float = RAE_DECAY,
) -> tuple[Tensor, dict[Hashable, float]]:
    """SPIRAL's role-conditioned advantage estimation (RAE), per record.

    For every trajectory τ in order of first appearance, with role key ``g`` = (game, role) and
    return ``R(τ)``:  ``b_g ← α·b_g + (1 − α)·R(τ)``, then ``A(τ) = R(τ) − b_g`` (the baseline
    updated with this trajectory, as in SPIRAL's algorithm; ``b_g`` starts at 0). Every record of
    τ gets ``A(τ)``. The baselines persist across training steps (the trainer checkpoints them).

    Args:
        returns: ``[N]`` trajectory return of each record (:func:`trajectory_returns`).
        trajectory_keys: ``[N]`` trajectory of each record.
        role_keys: ``[N]`` (game, role) of each record.
        baselines: Baselines before this batch (not modified).
        decay: α.

    Returns:
        ``[N]`` advantages and the updated baselines.
    """
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"RAE decay must be in [0, 1), got {decay}")
    updated = dict(baselines)
    per_trajectory: dict[Hashable, float] = {}
    for i, (tau, role) in enumerate(zip(trajectory_keys, role_keys)):
        if tau in per_trajectory:
            continue
        value = float(returns[i])
        updated[role] = decay * updated.get(role, 0.0) + (1.0 - decay) * value
        per_trajectory[tau] = value - updated[role]
    adv = torch.tensor([per_trajectory[tau] for tau in trajectory_keys], dtype=torch.float32)
    return adv, updated


# ---------------------------------------------------------------------- the estimator registry


@dataclass
class AdvantageBatch:
    """What an estimator sees: the records of one training step, in one order.

    Attributes:
        rewards: ``[N]`` scalar reward of each record.
        mask: ``[N, T]`` action mask (1 on sampled tokens).
        group_keys: ``[N]`` group of each record: (instance, agent, turn) under tree sampling;
            the problem (with ``env.samples_per_problem``) under flat sampling.
        roles: ``[N]`` role key of each record: the role, or ``"<env id>|<role>"`` for an
            estimator registered with ``role_key="game_role"``.
        agents: ``[N]`` agent of each record.
        trajectories: ``[N]`` trajectory of each record (one agent's part of one episode).
        kl: ``[N, T]`` per-token KL(π_old ‖ π_ref) when ``algorithm.kl_coef > 0`` and the
            estimator puts KL in the reward; else None.
        state: The estimator's state across training steps (registered ``stateful``: it reads
            and updates this dict in place; the trainer checkpoints it). None outside a trainer.
    """

    rewards: Tensor
    mask: Tensor
    group_keys: Sequence[Hashable]
    roles: Sequence[Hashable] | None = None
    agents: Sequence[str] | None = None
    trajectories: Sequence[Hashable] | None = None
    kl: Tensor | None = None
    state: dict[Hashable, Any] | None = None


#: An estimator: ``(batch, algorithm section, its own options) -> [N, T] token advantages``.
Estimator = Callable[[AdvantageBatch, Any, Mapping[str, Any]], Tensor]


@dataclass(frozen=True)
class EstimatorInfo:
    """A registered advantage estimator and what the config checks and the trainer read of it.

    Attributes:
        name: ``algorithm.estimator``.
        fn: The estimator.
        sampling: ``"tree"`` (needs AT-GRPO tree sampling, ``rollout.k >= 2``), ``"flat"`` (needs
            ``rollout.tree: false``) or ``"any"``.
        sampling_reason: Why, for the config error (``"uses whole-game returns"``).
        stateful: Keeps state across training steps (``AdvantageBatch.state``, checkpointed).
        whitens: Where it normalises: ``"group"``, ``"batch"``, ``"role"``, ``"agent"`` or
            ``"none"`` (documentation and listings).
        role_key: How the trainer forms ``AdvantageBatch.roles``: ``"role"`` or ``"game_role"``
            (``"<env id>|<role>"``: baselines per (game, role)).
        kl_in_reward: Reads ``AdvantageBatch.kl`` (``algorithm.kl_coef`` acts in the reward);
            otherwise a KL penalty belongs in the loss (``train.kl_loss_coef``).
        uses: The ``algorithm.*`` fields it reads.
        options: Its own options with their defaults, set in ``algorithm.estimator_options``.
        needs_groups: Compares each record with the others of its group (``group_keys``), so a
            group of one gives it nothing to learn from: the config must sample several records
            per group (``rollout.k >= 2`` under tree sampling, ``env.samples_per_problem >= 2``
            under flat sampling).
    """

    name: str
    fn: Estimator
    sampling: str = "any"
    sampling_reason: str = ""
    stateful: bool = False
    whitens: str = "none"
    role_key: str = "role"
    kl_in_reward: bool = False
    uses: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    needs_groups: bool = False

    def resolve_options(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """Its options: the defaults, overridden by ``given`` (unknown names are an error)."""
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            valid = sorted(self.options) or "none"
            raise ValueError(f"algorithm.estimator_options: {self.name} has no option(s) {unknown}; its options: {valid}")
        for key, value in given.items():
            problem = _option_type_problem(self.options[key], value)
            if problem:
                raise ValueError(f"algorithm.estimator_options.{key} of {self.name} {problem}, got {value!r}")
        return {**self.options, **given}


def _option_type_problem(default: Any, value: Any) -> str:
    """Why ``value`` cannot stand for an option whose default is ``default`` ('' if it can): a
    quoted ``"false"`` would be read as true, a word where a number goes would fail mid-run."""
    if isinstance(default, bool):
        return "" if isinstance(value, bool) else "must be true or false"
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return "must be a finite number"
        return ""
    if isinstance(default, str):
        return "" if isinstance(value, str) else "must be a string"
    return ""


#: The ``algorithm.*`` fields that only some estimators read (those naming them in ``uses``):
#: a value other than the default under an estimator that does not read it is refused.
#: (``kl_coef`` has its own check, by ``kl_in_reward``.)
ESTIMATOR_FIELDS = ("eps", "unbiased_std", "gamma", "reward_clip", "rae_decay")

#: Name → :class:`EstimatorInfo` of every registered estimator (:func:`register_estimator`).
ESTIMATOR_REGISTRY: dict[str, EstimatorInfo] = {}

_SAMPLINGS = ("tree", "flat", "any")
_ROLE_KEYS = ("role", "game_role")


def register_estimator(
    name: str,
    *,
    sampling: str = "any",
    sampling_reason: str = "",
    stateful: bool = False,
    whitens: str = "none",
    role_key: str = "role",
    kl_in_reward: bool = False,
    uses: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    needs_groups: bool = False,
) -> Callable[[Estimator], Estimator]:
    """Register the decorated function as the advantage estimator ``name`` (see
    :class:`EstimatorInfo` for the metadata). The function is returned unchanged.

    .. code-block:: python

        @register_estimator("rloo", whitens="none", needs_groups=True, uses=("eps",))
        def rloo(batch, cfg, options):
            ...  # [N, T] token advantages

    (``needs_groups``: it compares each record with the others of its group, which also lets
    ``algorithm.drop_uniform_groups`` leave out the groups it gives zero advantages.)
    """
    if sampling not in _SAMPLINGS:
        raise ValueError(f"register_estimator({name!r}): sampling must be one of {_SAMPLINGS}")
    if role_key not in _ROLE_KEYS:
        raise ValueError(f"register_estimator({name!r}): role_key must be one of {_ROLE_KEYS}")

    def decorate(fn: Estimator) -> Estimator:
        if name in ESTIMATOR_REGISTRY:
            raise ValueError(f"an advantage estimator named {name!r} is already registered")
        ESTIMATOR_REGISTRY[name] = EstimatorInfo(
            name, fn, sampling, sampling_reason, stateful, whitens, role_key, kl_in_reward, tuple(uses),
            MappingProxyType(dict(options or {})), needs_groups,
        )
        return fn

    return decorate


def estimator_info(name: str) -> EstimatorInfo:
    """The registered estimator ``name`` (a clear error naming the registered ones if none)."""
    if name not in ESTIMATOR_REGISTRY:
        raise ValueError(f"unknown advantage estimator {name!r}; choose one of {tuple(ESTIMATOR_REGISTRY)}")
    return ESTIMATOR_REGISTRY[name]


def estimate_advantages(cfg: Any, batch: AdvantageBatch) -> Tensor:
    """``[N, T]`` token advantages of ``batch`` by the estimator ``cfg.estimator`` names
    (``cfg``: the ``algorithm`` section, :class:`~llm_trainers.config.AlgorithmConfig`)."""
    info = estimator_info(cfg.estimator)
    return info.fn(batch, cfg, info.resolve_options(getattr(cfg, "estimator_options", None)))


def estimator_config_problems(cfg: Any) -> list[str]:
    """What is wrong with a whole config (:class:`~llm_trainers.config.Config`) for its
    estimator: the name, the sampling it needs, its options."""
    name = cfg.algorithm.estimator
    if name not in ESTIMATOR_REGISTRY:
        return [f"algorithm.estimator must be one of {tuple(ESTIMATOR_REGISTRY)}"]
    info = ESTIMATOR_REGISTRY[name]
    problems = []
    if info.sampling == "tree":
        if cfg.rollout.tree and cfg.rollout.k < 2:
            problems.append(f"{name}'s tree sampling needs rollout.k >= 2")
        if not cfg.rollout.tree:
            reason = info.sampling_reason or "needs tree sampling"
            problems.append(f"{name} {reason}: set rollout.tree: true")
    if info.sampling == "flat" and cfg.rollout.tree:
        reason = info.sampling_reason or "needs flat sampling"
        problems.append(f"{name} {reason}: set rollout.tree: false")
    if info.needs_groups:
        # (every record alone in its group: the group mean is its own reward, every advantage 0)
        if cfg.rollout.tree and cfg.rollout.k < 2:
            problems.append(f"{name} compares the records of a group, and rollout.k = {cfg.rollout.k} makes groups "
                            "of one: set rollout.k >= 2")
        if not cfg.rollout.tree and cfg.env.samples_per_problem < 2:
            problems.append(f"{name} compares the episodes of one problem, and env.samples_per_problem = "
                            f"{cfg.env.samples_per_problem} plays each problem once: set env.samples_per_problem >= 2")
    if cfg.algorithm.drop_uniform_groups and info.whitens != "group" and not info.needs_groups:
        # (a uniform group's advantage is 0 only where the estimator compares the records of a
        # group; reinforce_pp whitens over the batch, and under flat sampling every group is one
        # record: every record was dropped, and the run trained on nothing)
        problems.append(f"algorithm.drop_uniform_groups leaves out groups whose rewards are all equal, which only an "
                        f"estimator comparing the records of a group gives zero advantages (at_grpo, "
                        f"reinforce_pp_baseline); {name}'s are not zero there: set it to false")
    if cfg.algorithm.kl_coef > 0 and not info.kl_in_reward:
        problems.append(f"algorithm.kl_coef is the KL penalty in the reward, which {name} does not read: "
                        "set it to 0 and put the penalty in the loss (train.kl_loss_coef)")
    defaults = {f.name: f.default for f in dataclasses.fields(type(cfg.algorithm))}
    for key in ESTIMATOR_FIELDS:
        if key not in info.uses and getattr(cfg.algorithm, key) != defaults[key]:
            readers = [n for n, other in ESTIMATOR_REGISTRY.items() if key in other.uses]
            problems.append(f"algorithm.{key} = {getattr(cfg.algorithm, key)!r} would be ignored: {name} does not "
                            f"read it (read by {', '.join(readers) or 'no estimator'}); leave it at its default "
                            f"{defaults[key]!r}")
    try:
        info.resolve_options(cfg.algorithm.estimator_options)
    except ValueError as exc:
        problems.append(str(exc))
    return problems


# ---------------------------------------------------------------------- the estimators


@register_estimator("at_grpo", sampling="tree", sampling_reason="groups candidates of one decision",
                    whitens="group", uses=("eps", "unbiased_std"))
def at_grpo(batch: AdvantageBatch, cfg: Any, options: Mapping[str, Any]) -> Tensor:
    """Group normalisation per (env, agent, turn) (:func:`group_normalized_advantages`), tiled
    over the tokens. A KL penalty, if any, belongs in the loss."""
    gids = group_ids_from_keys(batch.group_keys)
    adv = group_normalized_advantages(batch.rewards, gids, eps=cfg.eps, unbiased_std=cfg.unbiased_std)
    return broadcast_to_tokens(adv, batch.mask)


_REINFORCE_PP_USES = ("kl_coef", "gamma", "reward_clip")


@register_estimator("reinforce_pp", whitens="batch", kl_in_reward=True, uses=_REINFORCE_PP_USES)
def reinforce_pp(batch: AdvantageBatch, cfg: Any, options: Mapping[str, Any]) -> Tensor:
    """KL in the reward, return-to-go, whitening over the batch (:func:`reinforce_pp_advantages`)."""
    return reinforce_pp_advantages(batch.rewards, batch.mask, batch.kl, cfg.kl_coef, cfg.gamma,
                                   reward_clip=cfg.reward_clip)


@register_estimator("reinforce_pp_baseline", whitens="batch", kl_in_reward=True, uses=_REINFORCE_PP_USES,
                    needs_groups=True)
def reinforce_pp_baseline(batch: AdvantageBatch, cfg: Any, options: Mapping[str, Any]) -> Tensor:
    """The group mean subtracted first, then as ``reinforce_pp``."""
    gids = group_ids_from_keys(batch.group_keys)
    return reinforce_pp_advantages(batch.rewards, batch.mask, batch.kl, cfg.kl_coef, cfg.gamma,
                                   baseline_group_ids=gids, reward_clip=cfg.reward_clip)


@register_estimator("task_relative_reinforce_pp", whitens="role", kl_in_reward=True, uses=_REINFORCE_PP_USES,
                    options={"unbiased_variance": True})
def task_relative_reinforce_pp(batch: AdvantageBatch, cfg: Any, options: Mapping[str, Any]) -> Tensor:
    """As ``reinforce_pp`` with whitening within each role (Multi-Agent Evolve).

    Multi-Agent Evolve whitens each role's batch with verl 0.4.1's ``masked_whiten``: the
    variance over the role's action tokens with Bessel's correction (the paper is silent, so
    the release is followed). Option ``unbiased_variance: false`` uses the biased variance of
    the other REINFORCE++ estimators (OpenRLHF's). verl adds 1e-8 to the variance where this
    floors it at 1e-8: the two differ by less than 1e-8 relative once the variance is above it.
    """
    if batch.roles is None:
        raise ValueError("task_relative_reinforce_pp needs the role of every record")
    return reinforce_pp_advantages(batch.rewards, batch.mask, batch.kl, cfg.kl_coef, cfg.gamma,
                                   whiten_partition_ids=group_ids_from_keys(batch.roles), reward_clip=cfg.reward_clip,
                                   unbiased_whitening=bool(options["unbiased_variance"]))


@register_estimator("per_agent_reinforce_pp", whitens="agent", kl_in_reward=True, uses=_REINFORCE_PP_USES)
def per_agent_reinforce_pp(batch: AdvantageBatch, cfg: Any, options: Mapping[str, Any]) -> Tensor:
    """As ``reinforce_pp`` with whitening within each agent (CoMAS)."""
    if batch.agents is None:
        raise ValueError("per_agent_reinforce_pp needs the agent of every record")
    return reinforce_pp_advantages(batch.rewards, batch.mask, batch.kl, cfg.kl_coef, cfg.gamma,
                                   whiten_partition_ids=group_ids_from_keys(batch.agents), reward_clip=cfg.reward_clip)


@register_estimator("rae", sampling="flat", sampling_reason="uses whole-game returns", stateful=True,
                    role_key="game_role", uses=("rae_decay",))
def rae(batch: AdvantageBatch, cfg: Any, options: Mapping[str, Any]) -> Tensor:
    """SPIRAL: trajectory return minus the (game, role) EMA baseline, tiled over the tokens. The
    baselines are its state (``batch.state``, updated in place)."""
    if batch.roles is None or batch.trajectories is None or batch.state is None:
        raise ValueError("rae needs the (game, role) key and the trajectory of every record, and the baselines")
    returns = trajectory_returns(batch.rewards, batch.trajectories)
    adv, updated = role_conditioned_advantages(returns, batch.trajectories, batch.roles, batch.state, cfg.rae_decay)
    batch.state.clear()
    batch.state.update(updated)
    return broadcast_to_tokens(adv, batch.mask)


def compute_advantages(
    estimator: str,
    rewards: Tensor,
    mask: Tensor,
    group_keys: Sequence[Hashable],
    roles: Sequence[str] | None = None,
    agents: Sequence[str] | None = None,
    kl: Tensor | None = None,
    beta: float = 0.0,
    gamma: float = 1.0,
    eps: float = 1e-6,
    unbiased_std: bool = False,
    reward_clip: float | None = None,
    trajectories: Sequence[Hashable] | None = None,
    role_baselines: dict[Hashable, float] | None = None,
    rae_decay: float = RAE_DECAY,
    options: Mapping[str, Any] | None = None,
) -> Tensor:
    """``[N, T]`` token advantages by the registered estimator ``estimator``, from plain
    arguments (the trainer passes its config section to :func:`estimate_advantages` instead).

    ``beta`` is ``algorithm.kl_coef``; ``role_baselines`` is a stateful estimator's state (``rae``
    reads it and updates it in place: the caller keeps it across steps); ``options`` are the
    estimator's own options. The built-in estimators:

    ============================== =========================================================
    ``at_grpo``                    group normalisation per (env, agent, turn), tiled over tokens
    ``reinforce_pp``               KL-in-reward, return-to-go, batch whitening
    ``reinforce_pp_baseline``      group mean subtracted first, then as ``reinforce_pp``
    ``task_relative_reinforce_pp`` as ``reinforce_pp`` with whitening within each role
    ``per_agent_reinforce_pp``     as ``reinforce_pp`` with whitening within each agent (CoMAS)
    ``rae``                        SPIRAL: trajectory return minus the (game, role) EMA baseline
                                   (``roles`` are the (game, role) keys, ``trajectories`` the
                                   trajectory of each record), tiled over tokens
    ============================== =========================================================
    """
    cfg = SimpleNamespace(estimator=estimator, kl_coef=beta, gamma=gamma, eps=eps, unbiased_std=unbiased_std,
                          reward_clip=reward_clip, rae_decay=rae_decay, estimator_options=dict(options or {}))
    batch = AdvantageBatch(rewards, mask, group_keys, roles, agents, trajectories, kl, role_baselines)
    return estimate_advantages(cfg, batch)
