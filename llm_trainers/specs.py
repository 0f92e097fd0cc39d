"""What every process that holds a part of a run builds it from: the policies and the learner.

The trainer builds its policies and learner from these; so do the distributed parts that hold
copies elsewhere (engine actors, learner ranks), which is why they live here and not in the
trainer: :mod:`llm_trainers.distributed` imports this module, never :mod:`llm_trainers.trainer`.

Each setting is declared once, in :mod:`llm_trainers.config`: a :class:`PolicySpec` holds the
run's :class:`~llm_trainers.config.ModelConfig` itself (with the ``lora`` section in it), and
the learner takes the run's :class:`~llm_trainers.config.TrainConfig` (:func:`learner_kwargs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_trainers.config import Config, ModelConfig

__all__ = ["PolicySpec", "learner_kwargs", "needs_reference", "policy_spec"]


def needs_reference(cfg: Config) -> bool:
    """Whether a KL term (in the reward or in the loss) needs the reference policy's log-probs."""
    return cfg.algorithm.kl_coef > 0 or cfg.train.kl_loss_coef > 0


@dataclass(frozen=True)
class PolicySpec:
    """A run's policies, as every process that holds a copy builds them (:meth:`build`).

    Attributes:
        model: The run's ``model`` section (level, paths, policy map, LoRA, device, dtype, ...).
        agents: The agents the policies play (the environment's, less fixed opponents).
        model_path: ``model.path`` resolved (a ``tiny:`` model built, its directory).
        need_reference: Build what a KL term needs (:func:`needs_reference`).
        seed: The run's seed (LoRA initialisation).
    """

    model: ModelConfig
    agents: tuple[str, ...]
    model_path: str
    need_reference: bool = False
    seed: int = 0

    def with_changes(self, **changes: Any) -> PolicySpec:
        """A copy with ``changes``: a :class:`~llm_trainers.config.ModelConfig` field name
        (``device``, ``dtype``, ``policy_map``, ``gradient_checkpointing``, ...) changes the model
        section, a field of this class (``agents``, ``need_reference``, ...) the spec."""
        model_fields = {f.name for f in dataclasses.fields(ModelConfig)}
        own = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - model_fields - own)
        if unknown:
            raise TypeError(f"PolicySpec.with_changes: no setting(s) {unknown}")
        model = {k: v for k, v in changes.items() if k in model_fields}
        spec = {k: v for k, v in changes.items() if k in own}
        if "agents" in spec:
            spec["agents"] = tuple(spec["agents"])
        return dataclasses.replace(self, model=dataclasses.replace(self.model, **model), **spec)

    def build(self) -> Any:
        """The :class:`~llm_trainers.policies.PolicySet` (loads the models; needs torch)."""
        from llm_trainers.policies import build_policies

        m = self.model
        return build_policies(
            m.level, list(self.agents), self.model_path,
            model_paths=dict(m.paths), policy_map=dict(m.policy_map) or None, lora=m.lora, device=m.device,
            dtype=m.dtype, need_reference=self.need_reference, gradient_checkpointing=m.gradient_checkpointing,
            tokenizer_path=m.tokenizer, model_kwargs=dict(m.model_kwargs), seed=self.seed,
        )


def policy_spec(cfg: Config, agents: Sequence[str], model_path: str) -> PolicySpec:
    """The :class:`PolicySpec` of a run whose policies play ``agents`` from ``model_path``."""
    return PolicySpec(cfg.model, tuple(agents), model_path, needs_reference(cfg), cfg.run.seed)


def learner_kwargs(cfg: Config, bf16: bool) -> dict[str, Any]:
    """The :class:`~llm_trainers.learner.Learner` arguments of a run, beside the policies: the
    run's ``train`` section itself, and what the learner needs from the other sections."""
    return {
        "train": cfg.train,
        "total_steps": cfg.run.steps,
        "temperature": cfg.rollout.temperature,
        "bf16": bool(bf16),
        "seed": cfg.run.seed,
    }
