"""The training loop with its parts on a Ray cluster (``resources`` in the config).

:class:`DistributedTrainer` is :class:`~llm_trainers.trainer.Trainer` — same loop, same metrics,
same run directory and checkpoint format — with each part it is told to move built elsewhere:

=====================  ====================================  ===============================
part                   ``resources`` field > 0               what runs there
=====================  ====================================  ===============================
environments           ``env_workers``                       :class:`RayEnvGroup` actors
inference engine       ``engines``                           :class:`DataParallelEngine`
learner                ``learner_world_size``                :class:`LearnerGroup` (FSDP2)
=====================  ====================================  ===============================

The trainer's process (the driver) keeps a copy of the policies on the CPU (the *mirror*): its
tokenizers encode prompts, the learner ranks copy their new weights into it after each update,
the engines are synced from it, and checkpoints and the final export are written from it, in
the single-process format — so a run can resume in another layout.

Failures (docs/scaling.md): an environment worker lost during a rollout is replaced and the
step replayed from its start with the engine's sampling state of that moment, so the records
are those of an undisturbed step (``resources.max_step_retries`` times); a lost engine or
learner rank stops the run with an error that says to ``--resume``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from llm_trainers.config import Config
from llm_trainers.policies import PolicySet
from llm_trainers.rollout import RolloutResult
from llm_trainers.specs import policy_spec
from llm_trainers.trainer import Trainer

__all__ = ["DistributedTrainer"]


class DistributedTrainer(Trainer):
    """:class:`~llm_trainers.trainer.Trainer` with the parts ``cfg.resources`` places on Ray.

    :func:`llm_trainers.make_trainer` builds one when the config's layout is distributed.
    """

    def __init__(self, cfg: Config, resume: bool = False) -> None:
        from llm_trainers.distributed.cluster import Cluster
        from llm_trainers.distributed.placement import plan_placement

        cfg = cfg.validate()
        r = cfg.resources
        self.replays = 0
        self.cluster = Cluster(r.address)
        try:
            self.plan = plan_placement(cfg)
            if self.cluster.owned and r.address is None and r.nodes > 1:
                raise ValueError(f"resources.nodes is {r.nodes} but no resources.address is set: a private local Ray "
                                 "instance has one node. Start the cluster (docs/scaling.md) and set its address.")
            self.cluster.check(r.nodes, sum(s.gpus for s in self.plan.slots), sum(s.cpus for s in self.plan.slots))
            super().__init__(cfg, resume)
            self._write_placement()
        except BaseException:
            self._shutdown()
            raise

    # ------------------------------------------------------------------ the parts
    def _build_policies(self) -> PolicySet:
        if self.cfg.resources.learner_world_size == 0:
            return super()._build_policies()
        # The mirror: on the CPU, in the learner's weight dtype, no reference model.
        dtype = self.cfg.model.dtype
        if dtype == "auto":
            dtype = "bfloat16" if self.cfg.resources.gpus_per_learner > 0 else "float32"
        spec = policy_spec(self.cfg, self.learning_agents, self.model_path)
        return spec.with_changes(device="cpu", dtype=dtype, need_reference=False, gradient_checkpointing=False).build()

    def _build_learner(self) -> Any:
        if self.cfg.resources.learner_world_size == 0:
            return super()._build_learner()
        from llm_trainers.distributed.learner import LearnerGroup

        return LearnerGroup.start(self.cfg, self.learning_agents, self.model_path, self.policies, cluster=self.cluster)

    def _build_engine(self) -> Any:
        r = self.cfg.resources
        if r.engines == 0:
            return super()._build_engine()
        from llm_trainers.distributed.engines import DataParallelEngine, EngineSpec

        ro = self.cfg.rollout
        spec = EngineSpec(
            kind=ro.engine, policy=policy_spec(self.cfg, self.learning_agents, self.model_path), sampling=self.sampling,
            seed=self.cfg.run.seed, max_batch_size=ro.max_batch_size,
            chat_template_kwargs=dict(self.cfg.model.chat_template_kwargs), bf16=self.cfg.train.bf16, vllm=ro.vllm,
            tensor_parallel_size=max(1, r.gpus_per_engine),
        )
        return DataParallelEngine.start(spec, r.engines, self.policies, gpus=r.gpus_per_engine, cpus=r.cpus_per_engine,
                                        cluster=self.cluster, timeout_s=r.startup_timeout_s)

    def _spawn_envs(self, first: Any) -> Any:
        r = self.cfg.resources
        if r.env_workers == 0:
            return super()._spawn_envs(first)
        from llm_trainers.distributed.env_workers import RayEnvGroup

        if self.opponents:
            raise ValueError("env.opponents (fixed opponents) play where the environments live: they need "
                             "resources.env_workers = 0 (environments in the driver)")
        first.close()  # the driver needed it only for the agent names
        return RayEnvGroup(self.cfg.env.id, self._env_kwargs(self.cfg.env.kwargs), self.cfg.env.num_envs,
                           r.env_workers, cpus_per_worker=r.cpus_per_env_worker, threads=self.cfg.rollout.env_workers)

    # ------------------------------------------------------------------ rollouts that survive a lost worker
    def _collect(self, seeds: list[int], engine: Any = None, step: int | None = None) -> RolloutResult:
        from llm_trainers.checkpoint import latest_checkpoint
        from llm_trainers.distributed.env_workers import EnvWorkerLost, RayEnvGroup

        if not isinstance(self.envs, RayEnvGroup):
            return super()._collect(seeds, engine, step)
        engine = engine or self.engine
        snapshot = engine.state_dict()  # the sampling state at the start of the step
        number = self.step + 1 if step is None else step + 1  # (an asynchronous producer runs ahead)
        attempt = 0
        while True:
            try:
                return super()._collect(seeds, engine, step)
            except EnvWorkerLost as exc:
                limit = self.cfg.resources.max_step_retries
                if attempt >= limit or self.envs.stateful:
                    why = ("its environment keeps cross-episode state that died with the worker" if self.envs.stateful
                           else f"resources.max_step_retries ({limit}) replays used")
                    if step is not None:  # the learner says where to continue from when it stops
                        raise RuntimeError(f"training step {number}: {exc}; not replayed: {why}") from exc
                    last = latest_checkpoint(self.out / "checkpoints")
                    where = (f"the last checkpoint is {last.name}. Continue with: llm-train <config> --resume" if last
                             else "no checkpoint was written yet: start the run again")
                    raise RuntimeError(
                        f"training step {number}: {exc}; not replayed: {why}. No record of this step was used; {where}"
                    ) from exc
                attempt += 1
                self.replays += 1
                replaced = self.envs.recover()
                print(f"llm-train: step {number}: {exc}; replaced worker(s) {replaced}, replaying the step "
                      f"({attempt}/{limit})", file=sys.stderr)
                engine.load_state_dict(snapshot)

    def _env_state(self) -> dict[str, Any] | None:
        from llm_trainers.distributed.env_workers import RayEnvGroup

        if isinstance(self.envs, RayEnvGroup):
            # (none to keep without cross-episode state: a checkpoint after a lost worker is
            # then written without asking it)
            return self.envs.state_dict() if self.envs.stateful else None
        return super()._env_state()

    def _load_env_state(self, state: dict[str, Any]) -> None:
        from llm_trainers.distributed.env_workers import RayEnvGroup

        if isinstance(self.envs, RayEnvGroup):
            self.envs.load_state_dict(state)
        else:
            super()._load_env_state(state)

    # ------------------------------------------------------------------ bookkeeping
    def _write_placement(self) -> None:
        actual: dict[str, Any] = {
            "learner": getattr(self.learner, "infos", None),
            "engines": getattr(self.engine, "infos", None),
            "env_workers": getattr(self.envs, "nodes", None),
        }
        text = json.dumps({"planned": self.plan.to_dict(), "actual": actual}, indent=2, default=str)
        (self.out / "placement.json").write_text(text + "\n")

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        """Stop every actor this trainer started, then Ray if it started it."""
        for part in ("learner", "envs"):
            obj = getattr(self, part, None)
            close = getattr(obj, "close", None)
            if close is not None and not isinstance(obj, list):
                try:
                    close()
                except Exception as exc:  # noqa: BLE001 - shutting down: report, go on
                    print(f"llm-train: closing the {part}: {type(exc).__name__}: {exc}", file=sys.stderr)
        engine = getattr(self, "engine", None)
        if engine is not None and hasattr(engine, "actors"):
            engine.close()
        cluster = getattr(self, "cluster", None)
        if cluster is not None:
            cluster.close()
