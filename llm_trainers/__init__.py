"""llm_trainers: AT-GRPO and the REINFORCE++ family for the text environments of ``llm_envs``.

Modules (imported on demand; everything but :mod:`llm_trainers.config`, :mod:`llm_trainers.cli`,
:mod:`llm_trainers.sampling` and :mod:`llm_trainers.threads` needs the ``train`` extra: torch, transformers, peft):

=============================  ==============================================================
``algorithms``                 advantage estimators and loss terms (pure tensor functions)
``policies``                   L1 / L2 / L3 policies, LoRA adapters, the reference policy
``learner``                    per-policy AdamW, micro-batches, token-mean loss, schedules
``agents.hf`` / ``agents.vllm``  rollout engines and model agents (token-in/token-out)
``rollout``                    per-action training records, AT-GRPO tree sampling
``trainer``                    the loop, evaluation, atomic checkpoints, resume
``specs``                      what the policies and the learner of a run are built from
``config`` / ``cli``           YAML configs with overrides; ``llm-train CONFIG``
``tiny``                       tiny random-weight models with a locally trained tokenizer
``sampling`` / ``threads``     sampling parameters and their run record; torch's thread count
                               from the CPUs a process may use (both torch-free)
``scripted``                   a deterministic engine without a model (tests, benchmarks)
``distributed``                the same loop with environments, engines and learner ranks on
                               Ray actors and torch.distributed (``resources``; needs Ray)
=============================  ==============================================================

:func:`make_trainer` builds the trainer a config asks for (the CLI and the tests use it).

See ``docs/training.md`` and ``docs/scaling.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing llm_trainers must not import torch
    from llm_trainers.config import Config
    from llm_trainers.trainer import Trainer

__all__ = ["make_trainer"]


def make_trainer(cfg: Config, resume: bool = False) -> Trainer:
    """The trainer of ``cfg``: :class:`~llm_trainers.trainer.Trainer` (every part in this
    process), or :class:`~llm_trainers.distributed.trainer.DistributedTrainer` when the
    ``resources`` section places parts on Ray. Both run the same loop and write the same files.

    Args:
        cfg: The run configuration.
        resume: Continue from the latest checkpoint in ``cfg.output_dir`` (error if none).
    """
    if cfg.resources.distributed:
        from llm_trainers.distributed.trainer import DistributedTrainer

        return DistributedTrainer(cfg, resume)
    from llm_trainers.trainer import Trainer

    return Trainer(cfg, resume)
