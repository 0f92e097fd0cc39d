"""What every process that holds a part of a run builds it from: the policies and the learner.

The trainer builds its policies and learner from these; so do the distributed parts that hold
copies elsewhere (engine actors, learner ranks), which is why they live here and not in the
trainer: :mod:`llm_trainers.distributed` imports this module, never :mod:`llm_trainers.trainer`
the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_trainers.config import Config
from llm_trainers.learner import LossConfig, OptimConfig
from llm_trainers.policies import LoraSettings

__all__ = ["learner_kwargs", "needs_reference", "policy_spec"]


def needs_reference(cfg: Config) -> bool:
    """Whether a KL term (in the reward or in the loss) needs the reference policy's log-probs."""
    return cfg.algorithm.kl_coef > 0 or cfg.train.kl_loss_coef > 0


def policy_spec(cfg: Config, agents: Sequence[str], model_path: str) -> dict[str, Any]:
    """The :func:`~llm_trainers.policies.build_policies` arguments of a run (every process that
    holds a copy of the policies builds it from these)."""
    lora = cfg.model.lora
    return {
        "level": cfg.model.level,
        "agents": list(agents),
        "model_path": model_path,
        "model_paths": dict(cfg.model.paths),
        "policy_map": dict(cfg.model.policy_map) or None,
        "lora": LoraSettings(lora.r, lora.alpha, lora.dropout, lora.target_modules) if lora else None,
        "device": cfg.model.device,
        "dtype": cfg.model.dtype,
        "need_reference": needs_reference(cfg),
        "gradient_checkpointing": cfg.model.gradient_checkpointing,
        "tokenizer_path": cfg.model.tokenizer,
        "model_kwargs": dict(cfg.model.model_kwargs),
        "seed": cfg.run.seed,
    }


def learner_kwargs(cfg: Config, bf16: bool) -> dict[str, Any]:
    """The :class:`~llm_trainers.learner.Learner` arguments of a run, beside the policies."""
    t = cfg.train
    return {
        "optim": OptimConfig(
            lr=t.lr, betas=tuple(t.betas), weight_decay=t.weight_decay, eps=t.adam_eps, schedule=t.schedule,
            warmup_steps=t.warmup_steps, total_steps=cfg.run.steps, min_lr_ratio=t.min_lr_ratio,
            max_grad_norm=t.max_grad_norm,
        ),
        "loss": LossConfig(
            clip_low=t.clip_low, clip_high=t.clip_high, dual_clip=t.dual_clip, kl_loss_coef=t.kl_loss_coef,
            kl_estimator=t.kl_estimator, entropy_coef=t.entropy_coef,
            off_policy=cfg.rollout.asynchronous.correction, is_cap=cfg.rollout.asynchronous.is_cap,
        ),
        "micro_batch_size": t.micro_batch_size,
        "mini_batch_size": t.mini_batch_size,
        "num_mini_batches": t.num_mini_batches,
        "epochs": t.epochs,
        "temperature": cfg.rollout.temperature,
        "bf16": bool(bf16),
        "seed": cfg.run.seed,
        "lr_overrides": dict(t.lr_per_policy),
    }
