"""llm_trainers: AT-GRPO and the REINFORCE++ family for the text environments of ``llm_envs``.

Modules (imported on demand; everything but :mod:`llm_trainers.config` and
:mod:`llm_trainers.cli` needs the ``train`` extra: torch, transformers, peft):

=============================  ==============================================================
``algorithms``                 advantage estimators and loss terms (pure tensor functions)
``policies``                   L1 / L2 / L3 policies, LoRA adapters, the reference policy
``learner``                    per-policy AdamW, micro-batches, token-mean loss, schedules
``agents.hf`` / ``agents.vllm``  rollout engines and model agents (token-in/token-out)
``rollout``                    per-action training records, AT-GRPO tree sampling
``trainer``                    the loop, evaluation, atomic checkpoints, resume
``config`` / ``cli``           YAML configs with overrides; ``llm-train CONFIG``
``tiny``                       tiny random-weight models with a locally trained tokenizer
``scripted``                   a deterministic engine without a model (tests, benchmarks)
``distributed``                the same loop with environments, engines and learner ranks on
                               Ray actors and torch.distributed (``resources``; needs Ray)
=============================  ==============================================================

See ``docs/training.md`` and ``docs/scaling.md``.
"""

__all__: list[str] = []
