"""The training loop: collect → score → advantages → update per policy → push → eval → checkpoint.

.. code-block:: text

    for step in 1..steps:
        records  = rollout(envs, engine, tree=AT-GRPO?, k)          # per-action, token-in/out
        log π_old = learner.logprobs(records)    (or the engine's)    # per policy
        log π_ref = learner.logprobs(records, reference=True)         # only if a KL term is on
        A        = estimator(rewards, masks, group keys, roles, agents, KL)  # a registered one
        for policy in policies:  learner.update(policy, its own records with A)
        engine.sync(updated policies)                                 # adapters / weights
        every eval_every: evaluate (flat sampling, fixed seeds)
        every save_every: atomic checkpoint (weights, optimizers, RNG, step, env state)

Everything a resumed run needs is in the checkpoint; episode seeds are a pure function of
(run seed, step, instance), so a resumed run replays exactly what the uninterrupted one would.

Infrastructure failures (``llm_envs.core.InfrastructureError``: a sandbox that failed under an
agent's program, an agent that produced no action) are never trained on nor scored: a training
episode hit by one is dropped from its rollout (``rollout/infra_failed_episodes``), an
evaluation episode is left out of the evaluation's means (``eval/errors``: the share of the
evaluation's episodes lost that way; ``eval/incomplete_episodes``: how many). An evaluation that
fails on a configuration error (a wrong model name) stops the run.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

import llm_envs
from llm_trainers import asynchronous
from llm_trainers.agents.hf import HFEngine, SamplingParams
from llm_trainers.algorithms.advantages import AdvantageBatch, estimate_advantages, estimator_info
from llm_trainers.algorithms.losses import kl_estimate
from llm_trainers.batching import pad_right
from llm_trainers.checkpoint import (
    NoCheckpointError,
    latest_checkpoint,
    load_checkpoint,
    lock_run_directory,
    prune_checkpoints,
    remove_stale_temporaries,
    save_checkpoint,
)
from llm_trainers.config import Config, config_to_dict
from llm_trainers.learner import Learner, UpdateSample
from llm_trainers.metrics import MetricsLogger, WandbSettings
from llm_trainers.policies import PolicySet
from llm_trainers.rollout import RolloutResult, TrainRecord, collect, spawn_envs
from llm_trainers.specs import learner_kwargs, needs_reference, policy_spec

log = logging.getLogger(__name__)

__all__ = ["EVAL_SEED_BASE", "RUN_FILES", "TRAIN_SEED_BASE", "Trainer", "remove_run", "train_seeds"]

#: Evaluation episodes use seeds ``EVAL_SEED_BASE + i`` (0, 1, 2, ...: the same episodes as
#: ``llm-envs eval --seed 0``); every training seed is ``TRAIN_SEED_BASE`` or above
#: (:func:`train_seeds`), so no evaluation episode is a training episode, whatever the run seed.
EVAL_SEED_BASE = 0
TRAIN_SEED_BASE = 2**62


def train_seeds(run_seed: int, step: int, num_envs: int, samples_per_problem: int = 1) -> list[int]:
    """Episode seeds of training step ``step``: instance ``i`` plays problem ``i // n``.

    Problem ``p`` of step ``s`` gets a seed from its own stream, ``SeedSequence((run_seed, s,
    p))``, placed in ``[TRAIN_SEED_BASE, 2·TRAIN_SEED_BASE)``: disjoint from the evaluation
    seeds (below ``TRAIN_SEED_BASE``) by construction for every run seed, step and problem
    count (two training problems share a seed with probability about 2^-62 per pair).
    """
    n = max(1, samples_per_problem)
    problems = -(-num_envs // n)
    seeds = [
        TRAIN_SEED_BASE
        + int(np.random.SeedSequence([run_seed % 2**64, step, p]).generate_state(1, np.uint64)[0]) % TRAIN_SEED_BASE
        for p in range(problems)
    ]
    return [seeds[i // n] for i in range(num_envs)]


class Trainer:
    """Owns the policies, engine, learner, environments and run directory of one run.

    This is the single-process loop. :func:`llm_trainers.make_trainer` builds the trainer a
    config asks for: this one, or for a config whose ``resources`` section places parts outside
    this process :class:`llm_trainers.distributed.trainer.DistributedTrainer` (same loop, same
    files), which ``Trainer`` refuses to stand in for.

    The trainer holds the run directory's lock (:func:`llm_trainers.checkpoint.lock_run_directory`)
    from its construction until :meth:`close`: another process's trainer on the same
    ``output_dir`` is refused (:class:`~llm_trainers.checkpoint.RunDirectoryLocked`).

    Args:
        cfg: The run configuration.
        resume: Continue from the latest checkpoint in ``cfg.output_dir`` (error if none).
    """

    def __init__(self, cfg: Config, resume: bool = False) -> None:
        if cfg.resources.distributed and type(self) is Trainer:
            raise ValueError(
                "this config's resources section places parts of the run on Ray, which Trainer (the "
                "single-process loop) does not do: build the trainer with llm_trainers.make_trainer(cfg), "
                "which picks the distributed one (or set resources: {} to run in this process)"
            )
        self.cfg = cfg.validate()
        self.out = cfg.output_dir
        # Before anything is read or written there: a second process resuming the same run
        # trained the same steps and replaced this one's checkpoints.
        self._run_lock = lock_run_directory(self.out)
        try:
            self._start(cfg, resume)
        except BaseException:
            self._run_lock.release()
            raise

    def _start(self, cfg: Config, resume: bool) -> None:
        from llm_trainers.threads import set_torch_threads

        self.threads = set_torch_threads(cfg.run.threads)
        # (safe under the lock: no other process is saving here)
        for root in (self.out / "checkpoints", self.out / "sft" / "checkpoints"):
            remove_stale_temporaries(root)
        self.step = 0
        self._resume_state: dict[str, Any] | None = None
        #: env.curriculum: the index of the current training level and the steps in a row at
        #: or above its threshold (both checkpointed).
        self.curriculum_index = 0
        self.curriculum_streak = 0
        self._resumed = resume
        if resume:
            ckpt = latest_checkpoint(self.out / "checkpoints")
            if ckpt is None and not has_warm_start_state(self.out):
                raise NoCheckpointError(
                    f"--resume: {self.out} holds no run to continue (no checkpoint under {self.out / 'checkpoints'}, "
                    "no warm start): start the run without --resume")
            if ckpt is not None:
                self._resume_state = load_checkpoint(ckpt, required=("policies", "learner", "state"))
            saved, source = self._saved_settings(ckpt)
            changed = resume_changes(saved, cfg)
            if changed:
                raise ValueError(
                    f"--resume: the run in {self.out} was made with other settings ({source}), which a resume "
                    "would apply from the middle of the run (or, for the optimizer's, not at all, while the "
                    f"run's config.yaml said they had been): {'; '.join(changed)}. Resume with the run's "
                    "own settings (only those in llm_trainers.trainer.RESUMABLE_CHANGES may change: the steps, "
                    "evaluation, checkpoints, logging, threads and resources), or start a new run (--overwrite "
                    "or another output_dir)"
                )
        elif (self.out / "sft").exists() and type(self) is Trainer:
            import shutil  # a fresh run starts a fresh warm start

            shutil.rmtree(self.out / "sft")
        (self.out / "config.yaml").write_text(_to_yaml(config_to_dict(cfg)))

        first = self._make_env(self._env_kwargs(self._training_env_kwargs()))
        if cfg.env.prepare:  # (never with env.url: Config.validate)
            started = time.perf_counter()
            done = first.unwrapped.prepare()
            log.info("env.prepare: %s in %.1f s", done or "nothing to prepare", time.perf_counter() - started)
        self.agents = list(first.possible_agents)
        self.opponents = self._build_opponents(cfg.env.opponents)
        #: The agents the policies play (every agent but the fixed opponents).
        self.learning_agents = [a for a in self.agents if a not in self.opponents]
        self._check_train_agents(cfg.env.train_agents)
        #: The advantage estimator's state across steps (checkpointed): for a stateful estimator
        #: such as rae, SPIRAL's role baselines ("game|role" → EMA of returns); else empty.
        self.estimator_state: dict[Any, Any] = {}
        self.model_path = self._model_path()
        self.policies: PolicySet = self._build_policies()
        # The warm start's weights, where RL starts from them: loaded (and made the KL
        # reference) on a resume too, where the checkpoint's weights then replace the policy's.
        warm_start = None
        if cfg.sft.init_from:
            warm_start = self._env_kwargs({"p": cfg.sft.init_from})["p"]
        elif resume and (self.out / "sft" / "done").is_file():
            warm_start = self.out / "sft"
        if warm_start is not None:
            from llm_trainers.sft import load_warm_start_weights

            load_warm_start_weights(self.policies, warm_start)
        device = next(iter(self.policies)).device
        bf16 = cfg.train.bf16
        if bf16 == "auto":
            bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        self.bf16 = bool(bf16)
        self.learner = self._build_learner()
        r = cfg.rollout
        self.sampling = SamplingParams(r.temperature, r.top_p, r.top_k, r.max_new_tokens)
        self.engine = self._build_engine()
        if warm_start is not None:
            # (an engine elsewhere — Ray's actors — builds the model's own weights)
            self.engine.sync(self.policies.names())
        self.envs = self._spawn_envs(first)
        self.last_eval: dict[str, float] = {}
        keep_lines = 0  # a fresh run starts a fresh metrics file
        # TensorBoard's events of the steps metrics.jsonl drops are hidden too (events of a step
        # at or after this one, written before the resume): a fresh run's, all of them.
        purge_step = 0
        async_state = None
        if self._resume_state is not None:
            keep_lines = self._restore(self._resume_state)
            purge_step = self.step + 1  # (the checkpoint's own step was logged before it was saved)
            async_state = self._resume_state["state"].get("async")
            self._resume_state = None
        #: rollout.async.max_staleness >= 1: the producer of the coming steps' rollouts (else None).
        self.async_rollout = asynchronous.build_async_rollout(self, async_state)
        wandb = None
        if cfg.run.wandb:
            wandb = WandbSettings(cfg.run.wandb, cfg.run.wandb_project, cfg.run.name, str(self.out),
                                  json.loads(json.dumps(config_to_dict(cfg), default=str)), continue_run=purge_step > 0)
        self.logger = MetricsLogger(
            self.out / "metrics.jsonl", self.out / "tensorboard" if cfg.run.tensorboard else None, keep_lines=keep_lines,
            wandb=wandb, purge_step=purge_step,
        )

    def _saved_settings(self, ckpt: Path | None) -> tuple[dict[str, Any], str]:
        """The settings of the run a resume continues, and where they were read: the config stored
        in the checkpoint resumed from (the RL one, else the warm start's), else the run's
        ``config.yaml``. Raises ``ValueError`` where there is none of them: a resume then could not
        be checked at all (checkpoints copied without their config.yaml, from before checkpoints
        kept their config)."""
        import yaml

        if ckpt is not None:
            stored = (self._resume_state or {}).get("state", {}).get("config")
            where = f"checkpoint {ckpt}"
        else:
            ckpt = latest_checkpoint(self.out / "sft" / "checkpoints")
            stored = None
            where = "no RL checkpoint, " + (f"warm start checkpoint {ckpt}" if ckpt is not None else "a finished warm start")
            if ckpt is not None:
                stored = load_checkpoint(ckpt, parts=("state",)).get("state", {}).get("config")
        if isinstance(stored, dict):
            return stored, f"as stored in {where}"
        saved = self.out / "config.yaml"
        if saved.is_file():
            return yaml.safe_load(saved.read_text()) or {}, f"its {saved}"
        raise ValueError(
            f"--resume: nothing to check this resume's settings against: {where} holds no config (written "
            f"before checkpoints kept theirs) and {saved} is missing. Put the run's config.yaml back there "
            "(a resume is then checked against it), or start a new run (--overwrite or another output_dir)"
        )

    @property
    def role_baselines(self) -> dict[Any, Any]:
        """SPIRAL's role baselines under ``algorithm.estimator: rae`` (its estimator state)."""
        return self.estimator_state

    # ------------------------------------------------------------------ construction helpers
    def _build_opponents(self, specs: dict[str, str]) -> dict[str, Any]:
        """Fixed opponents (``env.opponents``): agent id → a built llm_envs agent."""
        from llm_envs.agents.spec import build_agent

        unknown = sorted(set(specs) - set(self.agents))
        if unknown:
            raise ValueError(f"env.opponents names no agent(s) {unknown}; the environment's agents: {self.agents}")
        if len(specs) >= len(self.agents):
            raise ValueError("env.opponents leaves no agent to train")
        return {agent: build_agent(spec) for agent, spec in specs.items()}

    def _check_train_agents(self, names: list[str] | None) -> None:
        """``env.train_agents`` must name agents that leave training records: a misspelt or
        empty list (or one naming only fixed opponents) would train on nothing, every step."""
        if names is None:
            return
        unknown = sorted(set(names) - set(self.agents))
        if unknown:
            raise ValueError(f"env.train_agents names no agent(s) {unknown}; the environment's agents: {self.agents}")
        fixed = sorted(set(names) & set(self.opponents))
        if fixed:
            raise ValueError(f"env.train_agents names fixed opponents {fixed} (env.opponents), which leave no "
                             f"training records; the learning agents: {self.learning_agents}")
        if not names:
            raise ValueError("env.train_agents is empty: no record would be trained (omit it to train every agent)")

    def _env_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in kwargs.items():
            out[k] = v.replace("{output_dir}", str(self.out)) if isinstance(v, str) else v
        return out

    def _training_env_kwargs(self) -> dict[str, Any]:
        """``env.kwargs`` with the current ``env.curriculum`` level set (a dotted option sets a
        nested one)."""
        kwargs = dict(self.cfg.env.kwargs)
        c = self.cfg.env.curriculum
        if c is None or not c.levels:
            return kwargs
        return set_option(kwargs, c.option, c.levels[min(self.curriculum_index, len(c.levels) - 1)])

    def _advance_curriculum(self, metrics: dict[str, float]) -> None:
        """``env.curriculum``: after a step, count it toward the next level when its rollout metric
        reached the threshold; move up (new training instances) after ``patience`` such steps."""
        c = self.cfg.env.curriculum
        if c is None or not c.levels:
            return
        value = metrics.get(f"rollout/{c.metric}")
        self.curriculum_streak = self.curriculum_streak + 1 if value is not None and value >= c.threshold else 0
        if self.curriculum_streak >= c.patience and self.curriculum_index < len(c.levels) - 1:
            self.curriculum_index += 1
            self.curriculum_streak = 0
            self._rebuild_training_envs()
            log.info("step %d: curriculum moves to %s = %r", self.step, c.option, c.levels[self.curriculum_index])
        metrics["curriculum/level_index"] = float(self.curriculum_index)
        level = c.levels[self.curriculum_index]
        if isinstance(level, (int, float)) and not isinstance(level, bool):
            metrics["curriculum/level"] = float(level)

    def _rebuild_training_envs(self) -> None:
        self.envs = self._spawn_envs(self._make_env(self._env_kwargs(self._training_env_kwargs())))

    def warm_start(self) -> dict[str, float]:
        """The ``sft`` stage (:mod:`llm_trainers.sft`) before the first RL step: run it (or resume
        it), or load its weights when it already finished; then push the weights to the engine.
        Returns its last metrics (empty when there is none to run)."""
        if self.cfg.sft.steps <= 0:
            return {}
        from llm_trainers.sft import WarmStart, load_warm_start_weights

        stage = WarmStart(self.cfg, self.policies, self.policies.agent_to_policy, self.out,
                          chat_template_kwargs=self.cfg.model.chat_template_kwargs, bf16=self.bf16,
                          env_agents=self.agents)
        if stage.done:
            load_warm_start_weights(self.policies, stage.dir)
            metrics: dict[str, float] = {}
        else:
            metrics = stage.run(resume=self._resumed,
                                log=lambda step, m: log.info("sft step %d: %s", step, _sft_summary(m)))
            for policy in self.policies:
                policy.reset_reference()
        self.engine.sync(self.policies.names())
        return metrics

    def _model_path(self) -> str:
        path = self.cfg.model.path
        if not path.startswith("tiny:"):
            return path
        from llm_trainers.tiny import build_tiny_model, env_corpus

        env_id = path[len("tiny:") :]
        target = self.out / "tiny_model"
        if not (target / "config.json").exists():
            texts = env_corpus(env_id, episodes=100, seed=self.cfg.run.seed, **self.cfg.env.kwargs)
            build_tiny_model(target, texts, seed=self.cfg.run.seed)
        return str(target)

    def _build_policies(self) -> PolicySet:
        return policy_spec(self.cfg, self.learning_agents, self.model_path).build()

    def _build_learner(self) -> Any:
        """The learner: in this process (a distributed layout puts its ranks elsewhere)."""
        return Learner(self.policies, **learner_kwargs(self.cfg, self.bf16))

    def _make_env(self, kwargs: dict[str, Any]) -> Any:
        """One environment instance: local, or a session on the ``env.url`` server."""
        if self.cfg.env.url:
            from llm_envs.interop.remote import RemoteEnv, served_env_id

            served = served_env_id(self.cfg.env.url)
            if served != llm_envs.entry(self.cfg.env.id).id:
                raise ValueError(f"env.url {self.cfg.env.url} serves {served}, not env.id {self.cfg.env.id}")
            return RemoteEnv(self.cfg.env.url, **kwargs)
        return llm_envs.make(self.cfg.env.id, **kwargs)

    def _spawn_envs(self, first: Any) -> Any:
        """The ``env.num_envs`` training instances (or a group holding them elsewhere)."""
        if self.cfg.env.url:  # a session each: a remote episode cannot be cloned
            return [first] + [self._make_env(self._env_kwargs(self.cfg.env.kwargs)) for _ in range(self.cfg.env.num_envs - 1)]
        return spawn_envs(first, self.cfg.env.num_envs)

    def _remote_env_spec(self) -> Any:
        """``env.url``'s instances for the runner (a session each), or None for local ones."""
        if not self.cfg.env.url:
            return None
        from functools import partial

        from llm_envs.interop.remote import RemoteEnv

        return partial(RemoteEnv, self.cfg.env.url)

    def _collect(self, seeds: list[int], engine: Any = None, step: int | None = None) -> RolloutResult:
        """One rollout of the training instances (with ``engine``, default the trainer's), for
        training step ``step`` (default the next one: an asynchronous producer runs ahead)."""
        cfg = self.cfg
        return collect(
            self.envs, seeds, engine or self.engine, self.policies.agent_to_policy,
            k=cfg.rollout.k if cfg.rollout.tree else 1, tree=cfg.rollout.tree, max_decisions=cfg.env.max_decisions,
            env_workers=cfg.rollout.env_workers, opponents=self.opponents,
        )

    def _env_state(self) -> dict[str, Any] | None:
        """Cross-episode environment state (e.g. a question pool) for a checkpoint."""
        return self.envs[0].state_dict() if hasattr(self.envs[0], "state_dict") else None

    def _load_env_state(self, state: dict[str, Any]) -> None:
        if hasattr(self.envs[0], "load_state_dict"):
            self.envs[0].load_state_dict(state)

    def _build_engine(self) -> Any:
        r = self.cfg.rollout
        if r.engine == "hf":
            return HFEngine(self.policies, self.sampling, seed=self.cfg.run.seed, max_batch_size=r.max_batch_size,
                            chat_template_kwargs=self.cfg.model.chat_template_kwargs, bf16=self.bf16)
        from llm_trainers.agents.vllm import VLLMEngine

        return VLLMEngine(self.policies, self.sampling, seed=self.cfg.run.seed, settings=r.vllm,
                          chat_template_kwargs=self.cfg.model.chat_template_kwargs)

    # ------------------------------------------------------------------ seeds
    def train_seeds(self, step: int) -> list[int]:
        """Episode seeds of training step ``step`` (see :func:`train_seeds`)."""
        return train_seeds(self.cfg.run.seed, step, self.cfg.env.num_envs, self.cfg.env.samples_per_problem)

    # ------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, float]:
        """Run one training iteration; return its metrics."""
        cfg = self.cfg
        t_start = time.perf_counter()
        metrics: dict[str, float] = {}
        if self.async_rollout is None:
            res = self._collect(self.train_seeds(self.step))
            self.envs = res.envs
            offload = getattr(self.engine, "offload", None)
            if offload is not None:  # vLLM sleep mode: give the GPU memory to the learner
                offload()
        else:  # generated ahead by the producer, at most max_staleness versions old
            try:
                res, async_metrics = asynchronous.take_rollout(self.async_rollout, self.step)
            except asynchronous.ProducerFailed as exc:
                last = latest_checkpoint(self.out / "checkpoints")
                where = (f"the last checkpoint is {last.name}: continue with llm-train <config> --resume" if last
                         else "no checkpoint was written: start the run again")
                raise RuntimeError(f"{exc}. Training step {self.step + 1} has no rollout; {where}") from exc
            metrics.update(async_metrics)
        metrics.update(_rollout_metrics(res.records, res.episodes, "rollout"))
        metrics["rollout/infra_failed_episodes"] = float(len(res.infra_failures))
        if res.infra_failures:
            first = res.infra_failures[0]
            log.warning(
                "step %d: %d of %d training episodes dropped by infrastructure failures (not trained on), "
                "e.g. %s: %s", self.step, len(res.infra_failures), cfg.env.num_envs, first["kind"], first["message"],
            )
        train_agents = set(cfg.env.train_agents) if cfg.env.train_agents is not None else None
        records = [r for r in res.records if r.completion_ids and (train_agents is None or r.agent in train_agents)]

        if cfg.algorithm.kl_coef > 0:  # the advantages need log π_old and log π_ref (KL in the reward)
            t0 = time.perf_counter()
            old, ref = self._score(records)
            logprob_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            advantages, keep = self._advantages(records, old, ref)
            advantage_s = time.perf_counter() - t0
            kept, idle = self._without_zero_gradient_policies(records, advantages, keep)
        else:  # advantages first: a policy whose update would have no gradient is not even scored
            t0 = time.perf_counter()
            advantages, keep = self._advantages(records, [], None)
            advantage_s = time.perf_counter() - t0
            kept, idle = self._without_zero_gradient_policies(records, advantages, keep)
            t0 = time.perf_counter()
            old, ref = self._score(records, only=set(kept),
                                   with_old=not self._old_logprobs_from_update(records, kept))
            logprob_s = time.perf_counter() - t0
        for policy in self.policies.names():
            metrics[f"train/{policy}/skipped_zero_advantage"] = float(policy in idle)
        metrics["rollout/trained_records"] = float(len(kept))
        # Every record the estimator kept goes to the learner, an idle policy's unscored (old and
        # ref None): the learner steps it on zero gradients without a forward pass.

        t0 = time.perf_counter()
        by_policy: dict[str, list[UpdateSample]] = defaultdict(list)
        behaviour = cfg.rollout.asynchronous.correction != "none"  # the engine's log μ, for the correction
        for i in keep:
            rec = records[i]
            by_policy[rec.policy].append(
                UpdateSample(rec.prompt_ids, rec.completion_ids, advantages[i], old[i], ref[i] if ref else None,
                             torch.tensor(rec.logprobs, dtype=torch.float32) if behaviour else None)
            )
        trained_before = self.learner.trained_tokens
        updates = self.learner.update_all({p: by_policy.get(p, []) for p in self.policies.names()})
        for policy, stats in updates.items():
            for k, v in stats.items():
                metrics[f"train/{policy}/{k}"] = v
        update_s = time.perf_counter() - t0
        trained_tokens = self.learner.trained_tokens - trained_before

        t0 = time.perf_counter()
        # (an idle policy whose zero-gradient steps could not move a weight is not pushed)
        updated = [p for p in self.policies.names()
                   if by_policy.get(p) and updates.get(p, {}).get("weights_moved", 1.0) > 0]
        if self.async_rollout is None:
            push = self.engine.sync(updated)
        else:  # the producer loads it between two rollouts
            push = asynchronous.publish_update(self.async_rollout, self.step + 1, self.policies, updated)
        push_s = time.perf_counter() - t0
        step_s = time.perf_counter() - t_start

        self.step += 1
        metrics.update({f"push/{k}": float(v) for k, v in (push or {}).items()})
        metrics.update(
            {
                "time/generate_s": res.generate_s,
                "time/env_s": res.env_s,
                "time/logprob_s": logprob_s,
                "time/advantage_s": advantage_s,
                "time/update_s": update_s,
                "time/push_s": push_s,
                "time/step_s": step_s,
                "tokens/generated": float(res.generated_tokens),
                "tokens/trained": float(trained_tokens),
                "throughput/generated_tok_s": res.generated_tokens / max(res.generate_s, 1e-9),
                "throughput/trained_tok_s": trained_tokens / max(update_s, 1e-9),
            }
        )
        return metrics

    def _without_zero_gradient_policies(self, records: Sequence[TrainRecord], advantages: list[torch.Tensor],
                                        keep: list[int]) -> tuple[list[int], set[str]]:
        """``keep`` without the records of policies whose whole update would have no gradient:
        every advantage exactly 0 (all-equal groups) and no KL or entropy term in the loss. Such
        a policy is not scored and runs no forward or backward pass; the learner still takes its
        optimizer steps on zero gradients (:meth:`Learner._zero_gradient_update`: AdamW's
        momentum moves the weights, as in the released code's step);
        ``train/<policy>/skipped_zero_advantage`` is 1 for it."""
        t = self.cfg.train
        if t.kl_loss_coef > 0 or t.entropy_coef != 0:
            return keep, set()
        moving = {records[i].policy for i in keep if bool(advantages[i].ne(0).any())}
        idle = {records[i].policy for i in keep} - moving
        return [i for i in keep if records[i].policy in moving], idle

    def _old_logprobs_from_update(self, records: Sequence[TrainRecord], keep: Sequence[int]) -> bool:
        """Whether the update can take log π_old from its own forward pass: one optimizer step per
        policy over the records ``keep`` names (``algorithm.old_logprobs_from_update``)."""
        a, t = self.cfg.algorithm, self.cfg.train
        if not (a.old_logprobs_from_update and a.recompute_old_logprobs) or t.epochs != 1:
            return False
        if t.num_mini_batches:
            return t.num_mini_batches == 1
        counts = Counter(records[i].policy for i in keep)
        return not t.mini_batch_size or t.mini_batch_size <= 0 or all(n <= t.mini_batch_size for n in counts.values())

    def _score(self, records: Sequence[TrainRecord], only: set[int] | None = None,
               with_old: bool = True) -> tuple[list[torch.Tensor | None], list[torch.Tensor] | None]:
        """log π_old (recomputed or the engine's; None everywhere without ``with_old``: the
        update's own forward pass gives it) and log π_ref (if a KL term needs it), for the
        records ``only`` names (default: all; the others get None)."""
        cfg = self.cfg
        need_ref = needs_reference(cfg)
        old: list[torch.Tensor | None] = [None] * len(records)
        ref: list[torch.Tensor | None] | None = [None] * len(records) if need_ref else None
        by_policy: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(records):
            if only is None or i in only:
                by_policy[r.policy].append(i)
        for policy, idx in by_policy.items():
            prompts = [records[i].prompt_ids for i in idx]
            comps = [records[i].completion_ids for i in idx]
            if not with_old:
                lps = [None] * len(idx)
            elif cfg.algorithm.recompute_old_logprobs:
                lps = self.learner.logprobs(policy, prompts, comps)
            else:
                lps = [torch.tensor(records[i].logprobs, dtype=torch.float32) for i in idx]
            for i, lp in zip(idx, lps):
                old[i] = lp
            if ref is not None:
                for i, lp in zip(idx, self.learner.logprobs(policy, prompts, comps, reference=True)):
                    ref[i] = lp
        return old, ref  # type: ignore[return-value]

    def _advantages(self, records: Sequence[TrainRecord], old: list[torch.Tensor],
                    ref: list[torch.Tensor] | None) -> tuple[list[torch.Tensor], list[int]]:
        """Token advantages per record, and the indices of the records to train on."""
        a = self.cfg.algorithm
        if not records:
            return [], []
        info = estimator_info(a.estimator)
        rewards = torch.tensor([r.reward for r in records], dtype=torch.float32)
        if not torch.isfinite(rewards).all():
            # Refused before any estimator reads it: one NaN made a whitened batch's every
            # advantage NaN, and the update wrote NaN into every weight.
            bad = next(r for r, value in zip(records, rewards.tolist()) if not math.isfinite(value))
            raise ValueError(f"{self.cfg.env.id}: {bad.agent!r}'s record (episode {bad.episode_id}, role {bad.role!r}) "
                             f"has the reward {bad.reward}; rewards must be finite numbers")
        keep = list(range(len(records)))
        if a.drop_uniform_groups:
            # DAPO's dynamic filtering, before the estimator: the batch statistics (REINFORCE++'s
            # whitening) are then those of the records trained on. Uniform as the estimator sees
            # the rewards (float32): rewards that differ by a rounding only (credits summed in
            # another order) give zero advantages too.
            spread: dict[Any, set[float]] = defaultdict(set)
            for r, value in zip(records, rewards.tolist()):
                spread[r.group].add(value)
            keep = [i for i, r in enumerate(records) if len(spread[r.group]) > 1]
        advantages = [torch.zeros(len(r.completion_ids)) for r in records]
        if not keep:
            return advantages, []
        kept = [records[i] for i in keep]
        mask = pad_right([[1.0] * len(r.completion_ids) for r in kept])
        kl = None
        if info.kl_in_reward and a.kl_coef > 0 and ref is not None:
            kl = kl_estimate(pad_right([old[i].tolist() for i in keep]), pad_right([ref[i].tolist() for i in keep]),
                             a.kl_estimator)
        game_roles = info.role_key == "game_role"  # baselines per (game, role): the game is the env id
        batch = AdvantageBatch(
            rewards=rewards[keep],
            mask=mask,
            group_keys=[r.group for r in kept],
            roles=[f"{self.cfg.env.id}|{r.role}" if game_roles else r.role for r in kept],
            agents=[r.agent for r in kept],
            trajectories=[(r.slot, r.episode_id, r.agent) for r in kept],
            kl=kl,
            state=self.estimator_state,
        )
        adv = estimate_advantages(a, batch)
        for row, i in enumerate(keep):
            advantages[i] = adv[row, : len(records[i].completion_ids)].clone()
        return advantages, keep

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, episodes: int | None = None) -> dict[str, float]:
        """:meth:`_evaluate`; with an asynchronous producer, between two of its rollouts (it may
        share the engine, and the HF engine samples from torch's global generator)."""
        if self.async_rollout is not None:
            with self.async_rollout.engine_exclusive():
                return self._evaluate(episodes)
        return self._evaluate(episodes)

    def _evaluate(self, episodes: int | None = None) -> dict[str, float]:
        """Evaluate through the runner (:func:`llm_envs.runner.run_episodes`): flat sampling at
        the eval temperature on fixed seeds, one model agent per policy (agents that share a
        policy share its batches). Transcripts go to ``<output_dir>/eval/step_<n>.jsonl``.

        Episodes that infrastructure failures kept from finishing are left out of the means and
        counted (``eval/errors``, ``eval/incomplete_episodes``); a configuration error (the
        first calls refused) raises :class:`~llm_envs.episodes.IncompleteRunError`."""
        from llm_envs.episodes import IncompleteRunError
        from llm_envs.runner import run_episodes

        cfg = self.cfg
        n = episodes or cfg.run.eval_episodes
        temp = cfg.rollout.eval_temperature if cfg.rollout.eval_temperature is not None else cfg.rollout.temperature
        engine = self.engine.view(seed=cfg.run.seed + 7919, sampling=dataclasses.replace(self.sampling, temperature=temp))
        agent_cls = _agent_class(engine)
        by_policy = {name: agent_cls(engine, name) for name in self.policies.names()}
        agents = {a: self.opponents[a] if a in self.opponents else by_policy[self.policies.agent_to_policy[a]]
                  for a in self.agents}
        out_path = self.out / "eval" / f"step_{self.step:08d}.jsonl"
        out_path.parent.mkdir(parents=True, exist_ok=True)
        if out_path.exists():
            out_path.unlink()  # a re-run of this evaluation (after a resume) replaces it
        try:
            results = run_episodes(
                self._remote_env_spec() or cfg.env.id, agents, n, seed=EVAL_SEED_BASE, concurrency=n, env_label=cfg.env.id,
                env_kwargs=self._env_kwargs({**cfg.env.kwargs, **cfg.env.eval_kwargs}), out_path=out_path,
                max_batch_size=cfg.rollout.max_batch_size,
            )
            incomplete = 0
        except IncompleteRunError as exc:
            if exc.configuration_error is not None:
                raise
            results, incomplete = exc.results, len(exc.failures)
            log.warning("step %d evaluation: %s", self.step, exc)
        if out_path.exists():
            self.logger.log_episodes(self.step, out_path)
        metrics = _episode_metrics(results, "eval")
        metrics["eval/incomplete_episodes"] = float(incomplete)
        metrics["eval/errors"] = incomplete / n if n else 0.0
        return metrics

    # ------------------------------------------------------------------ loop
    def train(self, until_step: int | None = None) -> dict[str, float]:
        """Train up to ``until_step`` (default ``run.steps``); return the last eval metrics."""
        cfg = self.cfg
        end = min(until_step or cfg.run.steps, cfg.run.steps)
        bar = None
        if cfg.run.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.run.steps, initial=self.step, desc=cfg.run.name, dynamic_ncols=True)
        try:
            if self.step == 0:
                self.warm_start()
            if self.step == 0 and cfg.run.eval_at_start and cfg.run.eval_every >= 0:
                self.last_eval = self.evaluate()
                self.logger.log(0, self.last_eval)
            while self.step < end:
                metrics = self.train_step()
                self._advance_curriculum(metrics)
                if self._due(cfg.run.eval_every):
                    self.last_eval = self.evaluate()
                    metrics.update(self.last_eval)
                self.logger.log(self.step, metrics)
                if self._due(cfg.run.save_every):
                    self.save()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(_postfix(metrics, self.last_eval))
            if self.step >= cfg.run.steps and cfg.run.export_final:
                self.export(self.out / "final")
        finally:
            if bar is not None:
                bar.close()
        return self.last_eval

    def _due(self, every: int) -> bool:
        if every < 0:
            return False
        return self.step == self.cfg.run.steps or (every > 0 and self.step % every == 0)

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        """Atomic checkpoint of everything the run needs to continue exactly."""
        # Cross-episode environment state (e.g. a question pool) lives in resources the instances
        # share; an environment exposes it through state_dict()/load_state_dict().
        async_state = self.async_rollout.state_dict() if self.async_rollout is not None else None
        env_state = self._env_state()
        path = save_checkpoint(
            self.out / "checkpoints",
            self.step,
            {
                "policies": {p.name: p.trainable_state_dict() for p in self.policies},
                "learner": self.learner.state_dict(),
                "state": {
                    "step": self.step,
                    "engine": self.engine.state_dict(),
                    "env": env_state,
                    "metrics_lines": self.logger.lines,
                    "last_eval": self.last_eval,
                    "estimator_state": dict(self.estimator_state),
                    "async": async_state,
                    "curriculum": {"index": self.curriculum_index, "streak": self.curriculum_streak},
                    "config": config_to_dict(self.cfg),
                },
            },
        )
        prune_checkpoints(self.out / "checkpoints", self.cfg.run.keep_checkpoints)
        return path

    def _restore(self, ckpt: dict[str, Any]) -> int:
        for name, sd in ckpt["policies"].items():
            self.policies[name].load_trainable_state_dict(sd)
        self.learner.load_state_dict(ckpt["learner"])
        state = ckpt["state"]
        self.step = int(state["step"])
        self.engine.load_state_dict(state["engine"])
        self.engine.sync(self.policies.names())
        self.last_eval = dict(state.get("last_eval") or {})
        curriculum = state.get("curriculum") or {}
        self.curriculum_index = int(curriculum.get("index", 0))
        self.curriculum_streak = int(curriculum.get("streak", 0))
        if self.curriculum_index and self.cfg.env.curriculum is not None:
            self._rebuild_training_envs()
        # (after the rebuild for the curriculum's level, which makes new instances: the state
        # saved, a question pool for one, goes into the instances that will train)
        if state.get("env") is not None:
            self._load_env_state(state["env"])
        # ("role_baselines": the name of rae's state in checkpoints written before the registry)
        self.estimator_state = dict(state.get("estimator_state", state.get("role_baselines")) or {})
        return int(state.get("metrics_lines", 0))

    def export(self, path: Path) -> dict[str, str]:
        """Write loadable weights per policy (adapter directories or full models)."""
        out = {p.name: str(p.save_pretrained(path / p.name)) for p in self.policies}
        (path / "policies.json").write_text(json.dumps({"level": self.policies.level, "policies": out,
                                                        "agent_to_policy": self.policies.agent_to_policy}, indent=2))
        return out

    def close(self) -> None:
        """Stop the asynchronous producer, then close the environment instances (with
        ``env.url``: end their server sessions, which would otherwise stay open until the
        server's idle sweep), the fixed opponents, the metrics logger and the engine, and give up
        the run directory's lock. Safe to call twice."""
        if getattr(self, "async_rollout", None) is not None:
            self.async_rollout.close()
        envs, self.envs = getattr(self, "envs", None), []
        for env in _env_instances(envs):
            try:
                env.close()
            except Exception as exc:  # one instance's failure must not keep the rest open
                log.warning("closing an environment instance failed: %s: %s", type(exc).__name__, exc)
        for opponent in {id(a): a for a in getattr(self, "opponents", {}).values()}.values():
            opponent.close()
        self.opponents = {}
        if getattr(self, "logger", None) is not None:
            self.logger.close()
        close = getattr(getattr(self, "engine", None), "close", None)
        if close is not None:
            close()
        if getattr(self, "_run_lock", None) is not None:
            self._run_lock.release()  # last: everything it wrote is closed

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _env_instances(envs: Any) -> list[Any]:
    """The instances a trainer holds: a list, or a group that holds them (closed as a whole)."""
    if envs is None:
        return []
    if isinstance(envs, (list, tuple)):
        return list(envs)
    return [envs] if hasattr(envs, "close") else list(getattr(envs, "envs", []))


#: What a run writes in its ``output_dir`` (docs/training.md, "Run management"): ``--overwrite``
#: removes these, with the files its environment options name there (:func:`remove_run`), and
#: nothing else (the lock file stays: the process starting afresh holds it).
RUN_FILES = (
    "checkpoints", "sft", "final", "eval", "tensorboard", "wandb", "wandb_run_id", "metrics.jsonl", "report.html",
    "config.yaml", "tiny_model", "placement.json",
)
#: Folders of RUN_FILES with common names, of which only the files the run writes are removed
#: (the folder too once empty): an output_dir shared with other files keeps theirs.
_RUN_FILES_IN = {"eval": "step_*.jsonl", "tensorboard": "events.out.tfevents.*"}
#: Environment options that name a file the environment writes (Proposer-Solver-Judge's question pool).
_WRITTEN_ENV_FILES = ("pool_path",)


def remove_run(out: Path) -> list[str]:
    """Remove what a run wrote in ``out`` (:data:`RUN_FILES`, and the files its config.yaml's
    environment options that the environment writes, such as ``pool_path``, name inside ``out``),
    so that a run started there afresh inherits nothing of it: not its W&B run id, TensorBoard
    events, exported weights, tiny model or question pool. Anything else in ``out`` stays. Returns
    the paths removed, relative to ``out``. The caller holds the run directory's lock."""
    import shutil

    out = Path(out)
    targets = [out / name for name in RUN_FILES]
    targets += [p for p in _written_env_files(out) if p not in targets]
    removed = []
    for path in targets:
        pattern = _RUN_FILES_IN.get(path.name) if path.parent == out else None
        if pattern is not None and path.is_dir() and not path.is_symlink():
            for file in path.glob(pattern):
                file.unlink()
            if any(path.iterdir()):
                removed.append(f"{path.relative_to(out)}/{pattern}")
                continue
            path.rmdir()
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(str(path.relative_to(out)))
    return removed


def _written_env_files(out: Path) -> list[Path]:
    """The files under ``out`` that the run's environment options in its config.yaml name and
    the environment writes (``{output_dir}`` expanded as the trainer does)."""
    import yaml

    try:
        saved = yaml.safe_load((out / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    env, sft = saved.get("env") or {}, saved.get("sft") or {}
    root = out.resolve()
    found = []
    for options in (env.get("kwargs"), env.get("eval_kwargs"), sft.get("env_kwargs")):
        for key in _WRITTEN_ENV_FILES:
            value = options.get(key) if isinstance(options, dict) else None
            if not isinstance(value, str) or not value:
                continue
            path = Path(value.replace("{output_dir}", str(out))).resolve()
            if path.is_relative_to(root) and path != root:
                found.append(out / path.relative_to(root))
    return found


def has_warm_start_state(out: Path) -> bool:
    """Whether a run directory holds a warm start to resume or to start RL from."""
    sft = Path(out) / "sft"
    return (sft / "done").is_file() or latest_checkpoint(sft / "checkpoints") is not None


def set_option(kwargs: dict[str, Any], option: str, value: Any) -> dict[str, Any]:
    """A copy of ``kwargs`` with ``option`` set to ``value``; ``a.b`` sets key ``b`` of the
    mapping ``kwargs["a"]`` (copied, created if missing)."""
    out = dict(kwargs)
    head, _, rest = option.partition(".")
    if not rest:
        out[head] = value
        return out
    inner = out.get(head) or {}
    if not isinstance(inner, dict):
        raise ValueError(f"env.curriculum.option {option!r}: env option {head!r} is {inner!r}, not a mapping")
    out[head] = set_option(inner, rest, value)
    return out


def _sft_summary(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k[4:]}={v:.4g}" for k, v in sorted(metrics.items()) if k.endswith(("/loss", "token_accuracy")))


def _rollout_metrics(records: Sequence[TrainRecord], episodes: Sequence[dict[str, float]], prefix: str) -> dict[str, float]:
    out: dict[str, float] = {}
    if episodes:
        keys = sorted({k for e in episodes for k in e})
        for k in keys:
            vals = [e[k] for e in episodes if k in e]
            out[f"{prefix}/{k}"] = float(np.mean(vals))
    if records:
        out[f"{prefix}/record_reward"] = float(np.mean([r.reward for r in records]))
        out[f"{prefix}/format_ok"] = float(np.mean([r.format_ok for r in records]))
        out[f"{prefix}/completion_len"] = float(np.mean([len(r.completion_ids) for r in records]))
        groups: dict[Any, set[float]] = defaultdict(set)
        for r in records:
            groups[r.group].add(r.reward)
        out[f"{prefix}/uniform_group_frac"] = float(np.mean([len(v) == 1 for v in groups.values()]))
        per_agent: dict[str, list[float]] = defaultdict(list)
        for r in records:
            per_agent[r.agent].append(r.reward)
        for agent, vals in per_agent.items():
            out[f"{prefix}/record_reward/{agent}"] = float(np.mean(vals))
    return out


def _agent_class(engine: Any) -> type:
    if getattr(engine, "agent_class", None) is not None:
        return engine.agent_class
    if isinstance(engine, HFEngine):
        from llm_trainers.agents.hf import HFAgent

        return HFAgent
    from llm_trainers.agents.vllm import VLLMAgent

    return VLLMAgent


def _episode_metrics(results: Sequence[Any], prefix: str) -> dict[str, float]:
    """Means over the runner's episode results: env metrics, per-agent rewards, formats, tokens."""
    out: dict[str, float] = {}
    if not results:
        return out
    keys = sorted({k for r in results for k in r.metrics})
    for k in keys:
        out[f"{prefix}/{k}"] = float(np.mean([r.metrics[k] for r in results if k in r.metrics]))
    agents = sorted({a for r in results for a in r.rewards})
    for a in agents:
        out[f"{prefix}/reward/{a}"] = float(np.mean([r.rewards.get(a, 0.0) for r in results]))
    records = [rec for r in results for rec in r.records]
    if records:
        out[f"{prefix}/format_ok"] = float(np.mean([bool(rec["format_ok"]) for rec in records]))
    steps = [s for r in results for s in r.steps]
    if steps:
        out[f"{prefix}/completion_len"] = float(np.mean([s.get("completion_tokens", 0) for s in steps]))
    return out


def _postfix(metrics: dict[str, float], last_eval: dict[str, float]) -> dict[str, str]:
    post = {}
    if "rollout/success" in metrics:
        post["succ"] = f"{metrics['rollout/success']:.2f}"
    if "rollout/record_reward" in metrics:
        post["r"] = f"{metrics['rollout/record_reward']:.3f}"
    if "eval/success" in last_eval:
        post["eval"] = f"{last_eval['eval/success']:.2f}"
    return post


#: What a resume may change: how long the run (and its warm start) goes on, how it is
#: evaluated, checkpointed and logged, where its parts run, and whether rollouts are produced
#: ahead (docs/training.md: a synchronous checkpoint resumes asynchronously). Everything else
#: shapes the updates themselves.
RESUMABLE_CHANGES = (
    "run.name", "run.output_dir", "run.steps", "run.eval_every", "run.eval_episodes", "run.eval_at_start",
    "run.save_every", "run.keep_checkpoints", "run.tensorboard", "run.wandb", "run.wandb_project",
    "run.progress", "run.export_final", "run.threads", "sft.steps", "sft.save_every",
    "rollout.env_workers", "rollout.asynchronous", "rollout.vllm", "resources",
)  # fmt: skip
# (Not rollout.max_batch_size: the HF engine samples a batch's rows from one generator, so the
# tokens sampled for a prompt depend on the batch it is decoded in.)


def resume_changes(saved_config: Path | dict[str, Any], cfg: Config) -> list[str]:
    """``"key: saved -> now"`` for every setting of ``cfg`` outside :data:`RESUMABLE_CHANGES`
    that differs from the run's: a saved ``config.yaml`` (none if there is no such file), or a
    config as a checkpoint stores it (``config_to_dict``)."""
    if isinstance(saved_config, dict):
        saved = json.loads(json.dumps(saved_config, default=str))  # as config.yaml would hold it
    else:
        if not saved_config.is_file():
            return []
        import yaml

        saved = yaml.safe_load(saved_config.read_text()) or {}
    now = json.loads(json.dumps(config_to_dict(cfg), default=str))  # as config.yaml holds it

    def flat(data: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(data, dict) and data:
            out: dict[str, Any] = {}
            for key, value in data.items():
                out.update(flat(value, f"{prefix}{key}."))
            return out
        return {prefix[:-1]: data}

    before, after = flat(saved), flat(now)
    changes = []
    for key in sorted(set(before) | set(after)):
        if any(key == allowed or key.startswith(allowed + ".") for allowed in RESUMABLE_CHANGES):
            continue
        if before.get(key) != after.get(key):
            changes.append(f"{key}: {before.get(key)!r} -> {after.get(key)!r}")
    return changes


def _to_yaml(data: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False)
