"""Asynchronous training: rollouts keep going while the learner updates, with a bounded staleness.

``rollout.async.max_staleness = k``. In the synchronous loop (``k = 0``, the default) rollout
``b`` is generated with the weights of update ``b`` and the engine idles during the update. With
``k ≥ 1`` a *producer* thread generates the rollouts of the coming steps while the learner trains
on the current one:

.. code-block:: text

    producer (thread)                                learner (the trainer's thread)
    for b in step..steps-1:                          for each step b:
        wait until version ≥ b − k   (the bound)         rollout = queue.take(b)      (waits if not ready)
        load the newest published weights                 score, advantages, update
          (only the policies that changed)                publish version b + 1 (a CPU snapshot of
        collect(seeds of step b)     (whole step)           the updated policies' trainable weights)
        stamp records with their policy versions
        queue.put(b, rollout)

**Versions.** Version ``v`` of the run is the weights after ``v`` updates; each policy also counts
its own updates (an L2 adapter that got no samples in a step keeps its version, and is not pushed).
A record carries ``policy_version``, its policy's count when it was sampled.

**The bound: stale samples are never produced, not dropped.** Rollout ``b`` is trained on at
version ``b``; the producer starts it only once version ``b − k`` is published, so every sample is
at most ``k`` versions old (``staleness = version of its policy now − its policy_version``). The
taking side checks the bound again and refuses a violation (it would be a bug).

**Weight pushes happen between whole rollouts**, never during one: a rollout (every episode of a
training step, with every AT-GRPO tree group in it) is generated with one set of weights, so
groups stay whole and no sequence mixes versions. The cost: a push waits for the current rollout.

**Checkpoints keep the in-flight rollouts.** ``save`` first lets the producer finish what the bound
allows (at most ``k + 1`` rollouts ahead of the learner) and stores them, with their versions,
the producer's next step and its engine's sampling state; a resumed run trains on exactly those
samples and continues the producer where it stopped. An uninterrupted run and a stopped-and-resumed
one give the same weights whenever the producer chose the same versions (always with ``k = 1``: the
version it can use is the only one published at that time). So that this holds for a finished run
extended with ``--resume run.steps=N`` too, a run that ends with a checkpoint makes the ``k``
rollouts beyond its last step that a longer run would make during its last updates
(``beyond_end``), and its final checkpoint keeps them. A synchronous checkpoint resumed
asynchronously starts with an empty queue; an asynchronous one resumed synchronously drops its
queue (those steps are generated again, with the current weights).

Layouts: in one process with the HF engine the producer samples from its own copy of the policies
(built as the learner's, so identical at the start) with its own HF engine, beside the learner's modules, which
evaluation uses between two rollouts (the HF engine samples from torch's global generator). With
the vLLM engine in one process (its weights live in vLLM, apart from the learner's modules), and in
the Ray layout (``resources.engines ≥ 1``: engine actors and environment workers), the producer
drives the trainer's engine from a thread; evaluation then takes the engine between two rollouts
and pushes the newest weights first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_trainers.rollout import RolloutResult, TrainRecord

__all__ = ["AsyncRollout", "PublishedWeights", "StalenessError", "VersionedRollout", "build_async_rollout",
           "publish_update", "staleness_metrics", "take_rollout"]


class StalenessError(RuntimeError):
    """A rollout older than ``max_staleness`` reached the learner (a bug of the pipeline)."""


# ---------------------------------------------------------------------------- published weights
class PublishedWeights:
    """The newest weights of every policy, with versions, as the learner publishes them.

    ``version`` counts the learner's updates (the run's step); ``policy_versions[p]`` counts the
    updates of policy ``p``. Only the newest snapshot is kept: the producer always loads the
    newest weights it is allowed.
    """

    def __init__(self, names: Sequence[str], version: int = 0,
                 policy_versions: Mapping[str, int] | None = None) -> None:
        self.version = int(version)
        self.policy_versions = {n: int((policy_versions or {}).get(n, 0)) for n in names}
        self.states: dict[str, Mapping[str, Any]] = {}

    def publish(self, version: int, states: Mapping[str, Mapping[str, Any]]) -> None:
        """Version ``version`` of the run; ``states`` are the policies this update changed."""
        self.version = int(version)
        for name, state in states.items():
            self.policy_versions[name] += 1
            self.states[name] = state

    def newer_than(self, loaded: Mapping[str, int]) -> dict[str, Mapping[str, Any]]:
        """The snapshots of the policies whose published version is above ``loaded``."""
        return {n: self.states[n] for n, v in self.policy_versions.items() if v > loaded.get(n, -1) and n in self.states}


@dataclass
class VersionedRollout:
    """One training step's rollout and the versions that made it.

    Attributes:
        step: The training step it is for (trained on at version ``step``).
        result: The rollout (its ``envs`` field is not kept: the producer owns the instances).
        version: The run's version (learner updates) of the weights that generated it.
        policy_versions: Policy → its own version in those weights.
        push_s: Time the producer spent loading weights before it.
        blocked_s: Time the producer waited for the staleness bound before it.
    """

    step: int
    result: RolloutResult
    version: int
    policy_versions: dict[str, int]
    push_s: float = 0.0
    blocked_s: float = 0.0

    def to_state(self) -> dict[str, Any]:
        res = self.result
        return {
            "step": self.step, "version": self.version, "policy_versions": dict(self.policy_versions),
            "push_s": self.push_s, "blocked_s": self.blocked_s,
            "records": [dataclasses.asdict(r) for r in res.records], "episodes": list(res.episodes),
            "generate_s": res.generate_s, "env_s": res.env_s, "generated_tokens": res.generated_tokens,
            "infra_failures": list(res.infra_failures),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> VersionedRollout:
        res = RolloutResult([TrainRecord(**r) for r in state["records"]], list(state["episodes"]), None,
                            generate_s=state["generate_s"], env_s=state["env_s"],
                            generated_tokens=state["generated_tokens"], infra_failures=list(state["infra_failures"]))
        return cls(int(state["step"]), res, int(state["version"]), dict(state["policy_versions"]),
                   float(state["push_s"]), float(state["blocked_s"]))


def staleness_metrics(records: Sequence[TrainRecord], current: Mapping[str, int]) -> dict[str, float]:
    """``async/staleness_mean`` and ``_max`` over ``records``: their policy's version now minus the
    version that sampled them."""
    ages = [current[r.policy] - r.policy_version for r in records if r.policy_version is not None]
    if not ages:
        return {"async/staleness_mean": 0.0, "async/staleness_max": 0.0}
    return {"async/staleness_mean": float(np.mean(ages)), "async/staleness_max": float(max(ages))}


# ---------------------------------------------------------------------------- the producer
@dataclass
class _ProducerState:
    next_step: int
    loaded: dict[str, int]
    queue: list[VersionedRollout] = field(default_factory=list)


class AsyncRollout:
    """The producer thread and the queue of versioned rollouts between it and the learner.

    Args:
        names: The run's policies.
        max_staleness: ``k ≥ 1``.
        collect: ``collect(step) -> RolloutResult``: one training step's rollout with the
            generation engine (called in the producer thread only).
        load_weights: ``load_weights({policy: trainable state}) -> push metrics``: make the
            generation engine sample with these weights (producer thread, or under
            :meth:`engine_exclusive`).
        engine_state: ``(state_dict, load_state_dict)`` of the generation engine's sampling state.
        start_step: The learner's step (a resumed run's checkpoint step).
        end_step: The run's last step + 1: the learner trains nothing beyond it.
        policy_versions: The policies' update counts at ``start_step``.
        beyond_end: Rollouts made for steps ``end_step, end_step + 1, ...`` (none are trained
            on): those that a longer run would make during the last updates, with weights older
            than the last, so that the run's final checkpoint holds them and a resume that extends
            the run (``run.steps`` raised) trains on what the longer run would have. At most ``k``
            are useful: the rollout of step ``end_step + k`` may only start once the last
            version is published, as it does after a resume.
    """

    def __init__(self, names: Sequence[str], max_staleness: int, *, collect: Callable[[int], RolloutResult],
                 load_weights: Callable[[Mapping[str, Mapping[str, Any]]], Mapping[str, float] | None],
                 engine_state: tuple[Callable[[], Any], Callable[[Any], None]], start_step: int, end_step: int,
                 policy_versions: Mapping[str, int] | None = None, beyond_end: int = 0) -> None:
        if max_staleness < 1:
            raise ValueError(f"an asynchronous rollout needs max_staleness >= 1, got {max_staleness}")
        self.k = int(max_staleness)
        self.collect = collect
        self.load_weights = load_weights
        self.engine_state = engine_state
        self.end_step = int(end_step)
        #: The producer makes the rollouts of steps below this one (``end_step + beyond_end``).
        self.produce_until = self.end_step + max(0, int(beyond_end))
        self.weights = PublishedWeights(names, start_step, policy_versions)
        self.state = _ProducerState(int(start_step), dict(self.weights.policy_versions))
        self.cond = threading.Condition()
        #: Held by whoever uses the generation engine: the producer for a whole rollout, or
        #: evaluation on a shared engine.
        self.engine_lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.stopping = False
        self.waiting = False  # the producer waits for the staleness bound
        self.error: BaseException | None = None
        #: The engine's sampling state at the start of the rollout in progress: what a
        #: checkpoint holds when that rollout fails, so that a resume makes it again exactly.
        self.engine_before_rollout: Any = None
        self.produced = 0
        #: In-flight rollouts of a checkpoint dropped at resume (a smaller max_staleness).
        self.dropped = 0

    # ------------------------------------------------------------------ the producer thread
    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="async-rollout", daemon=True)
            self.thread.start()

    def _allowed(self, step: int) -> bool:
        return self.weights.version >= step - self.k

    def _run(self) -> None:
        try:
            while True:
                with self.cond:
                    step = self.state.next_step
                    if step >= self.produce_until or self.stopping:
                        return
                    t0 = time.perf_counter()
                    self.waiting = True
                    self.cond.notify_all()
                    self.cond.wait_for(lambda s=step: self.stopping or self._allowed(s))
                    self.waiting = False
                    if self.stopping:
                        return
                    blocked_s = time.perf_counter() - t0
                with self.engine_lock:  # the newest weights, read once the engine is ours
                    # (its sampling state before anything of this rollout, a weight load that
                    # fails included: what a checkpoint holds if this rollout fails)
                    before = self.engine_state[0]()
                    with self.cond:
                        self.engine_before_rollout = before
                        version = self.weights.version
                        changed = self.weights.newer_than(self.state.loaded)
                        versions = dict(self.weights.policy_versions)
                    t1 = time.perf_counter()
                    if changed:
                        self.load_weights(changed)
                    push_s = time.perf_counter() - t1
                    with self.cond:
                        self.state.loaded.update({n: versions[n] for n in changed})
                    loaded = dict(self.state.loaded)
                    result = self.collect(step)
                for rec in result.records:
                    rec.policy_version = loaded[rec.policy]
                item = VersionedRollout(step, result, version, loaded, push_s, blocked_s)
                with self.cond:
                    self.state.queue.append(item)
                    self.state.next_step = step + 1
                    self.produced += 1
                    self.cond.notify_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the learner's thread, which raises it
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    # ------------------------------------------------------------------ the learner's side
    def take(self, step: int) -> tuple[VersionedRollout, float]:
        """The rollout of ``step`` (waiting for it) and the seconds waited. A rollout made before
        the producer failed is still taken: the learner trains (and checkpoints) every step it
        can before the failure stops it."""
        self.start()
        t0 = time.perf_counter()
        with self.cond:
            self.cond.wait_for(lambda: self.error is not None or any(r.step == step for r in self.state.queue)
                               or (self.thread is not None and not self.thread.is_alive()))
            found = [r for r in self.state.queue if r.step == step]
            if not found and self.error is not None:
                raise ProducerFailed(f"the rollout producer failed: {type(self.error).__name__}: {self.error}") \
                    from self.error
            if not found:
                raise RuntimeError(f"the rollout producer stopped before step {step} (end {self.end_step})")
            item = found[0]
            self.state.queue = [r for r in self.state.queue if r is not item]
        if step - item.version > self.k:
            raise StalenessError(f"step {step}: its rollout was generated at version {item.version}, more than "
                                 f"rollout.async.max_staleness = {self.k} versions old")
        return item, time.perf_counter() - t0

    def publish(self, version: int, states: Mapping[str, Mapping[str, Any]]) -> None:
        """The learner finished update ``version``; ``states`` are the changed policies' weights."""
        with self.cond:
            self.weights.publish(version, states)
            self.cond.notify_all()

    def current_versions(self) -> dict[str, int]:
        with self.cond:
            return dict(self.weights.policy_versions)

    def quiesce(self) -> None:
        """Wait until the producer has made every rollout the bound allows now (it is then
        blocked until the next publication, or finished), or has failed."""
        with self.cond:
            self.cond.wait_for(lambda: self.error is not None or self.thread is None or not self.thread.is_alive()
                               or (self.waiting and not self._allowed(self.state.next_step))
                               or self.state.next_step >= self.produce_until)

    @contextlib.contextmanager
    def engine_exclusive(self) -> Iterator[None]:
        """Hold the generation engine between two rollouts, with the newest weights loaded
        (evaluation on an engine the producer shares)."""
        with self.engine_lock:
            with self.cond:
                changed = self.weights.newer_than(self.state.loaded)
                versions = dict(self.weights.policy_versions)
            if changed:
                self.load_weights(changed)
                with self.cond:
                    self.state.loaded.update({n: versions[n] for n in changed})
            yield

    def queued(self) -> int:
        with self.cond:
            return len(self.state.queue)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The in-flight rollouts with their versions, the producer's position and its engine's
        sampling state. After the producer failed: the rollouts it finished, its position at
        the rollout that failed, and the engine's state from before that rollout (a resume makes
        it again exactly; the checkpoint of a step the learner finished was lost before)."""
        self.quiesce()
        with self.cond:
            failed = self.error is not None
            return {
                "max_staleness": self.k,
                "next_step": self.state.next_step,
                "loaded": dict(self.state.loaded),
                "policy_versions": dict(self.weights.policy_versions),
                "queue": [r.to_state() for r in self.state.queue],
                "engine": self.engine_before_rollout if failed else self.engine_state[0](),
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> int:
        """Restore a checkpoint's in-flight rollouts (before :meth:`start`; the generation engine
        must hold the learner's current weights). Rollouts that a smaller ``max_staleness`` than
        the checkpoint's no longer allows are dropped (with every later one: the producer makes
        them again); returns how many were dropped."""
        if self.thread is not None:
            raise RuntimeError("load_state_dict after the producer started")
        with self.cond:
            self.weights.policy_versions.update({k: int(v) for k, v in state["policy_versions"].items()})
            queue = sorted((VersionedRollout.from_state(r) for r in state["queue"]), key=lambda r: r.step)
            queue = [r for r in queue if r.step >= self.weights.version]
            next_step = max(int(state["next_step"]), self.weights.version)
            keep: list[VersionedRollout] = []
            for item in queue:
                if item.step - item.version > self.k or (keep and item.step != keep[-1].step + 1) or \
                        (not keep and item.step != self.weights.version):
                    break
                keep.append(item)
            dropped = len(queue) - len(keep)
            if dropped or not keep:
                next_step = keep[-1].step + 1 if keep else self.weights.version
            self.state = _ProducerState(next_step, dict(self.weights.policy_versions), keep)
            self.dropped = dropped
        self.engine_state[1](state["engine"])
        return dropped

    def close(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        if self.thread is not None:
            self.thread.join()


class ProducerFailed(RuntimeError):
    """The rollout producer failed making a rollout the learner needs (the learner trained and
    checkpointed every step before it)."""


# ---------------------------------------------------------------------------- the trainer's side
def build_async_rollout(trainer: Any, saved: Mapping[str, Any] | None = None) -> AsyncRollout | None:
    """The producer of a :class:`~llm_trainers.trainer.Trainer` whose config asks for
    ``rollout.async.max_staleness ≥ 1`` (None otherwise), positioned at the trainer's step, with a
    checkpoint's in-flight rollouts when ``saved`` holds them.

    With engine actors (``resources.engines ≥ 1``) or the vLLM engine the producer drives the
    trainer's engine (``trainer.engine``), which keeps its own weights and loads the published
    snapshots; otherwise it samples from its own copy of the policies with its own HF engine.
    """
    cfg = trainer.cfg
    k = cfg.rollout.asynchronous.max_staleness
    if k == 0:
        return None
    names = trainer.policies.names()
    if cfg.resources.engines > 0 or cfg.rollout.engine == "vllm":
        # Engine actors, or a vLLM engine in this process: either holds its own copy of the weights,
        # loaded from the published snapshots (never from the modules the learner is writing).
        engine = trainer.engine
        trainer.async_shares_engine = True

        def load(states: Mapping[str, Mapping[str, Any]]) -> Mapping[str, float]:
            return engine.sync_states(states)
    else:
        from llm_trainers.agents.hf import HFEngine
        from llm_trainers.specs import policy_spec

        spec = policy_spec(cfg, trainer.learning_agents, trainer.model_path)
        copy = spec.with_changes(need_reference=False, gradient_checkpointing=False).build()
        for pol in copy:  # the learner's current weights (a resumed run's included)
            pol.load_trainable_state_dict(trainer.policies[pol.name].trainable_state_dict())
        r = cfg.rollout
        engine = HFEngine(copy, trainer.sampling, seed=cfg.run.seed, max_batch_size=r.max_batch_size,
                          chat_template_kwargs=cfg.model.chat_template_kwargs, bf16=trainer.bf16)
        trainer.async_shares_engine = False
        trainer.async_policies = copy

        def load(states: Mapping[str, Mapping[str, Any]]) -> Mapping[str, float]:
            for name, state in states.items():
                copy[name].load_trainable_state_dict(state)
            return engine.sync(list(states))

    def collect(step: int) -> RolloutResult:
        res = trainer._collect(trainer.train_seeds(step), engine=None if trainer.async_shares_engine else engine,
                               step=step)
        trainer.envs = res.envs  # the producer is the only user of the instances while it runs
        res.envs = None
        return res

    versions = {n: trainer.step for n in names}  # a synchronous checkpoint: every policy updated each step
    if saved is not None:
        versions.update(saved.get("policy_versions", {}))
    # A run that ends with a checkpoint makes the k rollouts beyond its end that a longer run
    # would make with older weights during the last updates: without them a finished run extended
    # with --resume run.steps=N made them after the resume, with the last weights, and did not
    # end as the uninterrupted N-step run. (They overlap the last updates; without a final
    # checkpoint nobody would use them.)
    beyond_end = k if cfg.run.save_every >= 0 else 0
    producer = AsyncRollout(names, k, collect=collect, load_weights=load,
                            engine_state=(engine.state_dict, engine.load_state_dict), start_step=trainer.step,
                            end_step=cfg.run.steps, policy_versions=versions, beyond_end=beyond_end)
    if saved is not None:
        producer.load_state_dict(saved)
    return producer


def take_rollout(producer: AsyncRollout, step: int) -> tuple[RolloutResult, dict[str, float]]:
    """The rollout the learner trains on at ``step`` and the step's ``async/*`` metrics."""
    item, wait_s = producer.take(step)
    metrics = staleness_metrics(item.result.records, producer.current_versions())
    metrics.update({
        "async/version_lag": float(step - item.version),
        "async/learner_wait_s": wait_s,
        "async/producer_blocked_s": item.blocked_s,
        "async/weight_load_s": item.push_s,
        "async/queued": float(producer.queued()),
        "async/dropped_at_resume": float(producer.dropped),
    })
    return item.result, metrics


def publish_update(producer: AsyncRollout, version: int, policies: Any, updated: Sequence[str]) -> dict[str, float]:
    """Publish the learner's new version: a CPU snapshot of the updated policies' trainable weights
    (taken here, in the learner's thread, so the producer never reads weights being changed)."""
    t0 = time.perf_counter()
    states = {name: policies[name].trainable_state_dict() for name in updated}
    producer.publish(version, states)
    size = float(sum(t.numel() * t.element_size() for s in states.values() for t in s.values()))
    return {"weight_publish_bytes": size, "weight_publish_s": time.perf_counter() - t0}
