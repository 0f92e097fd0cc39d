"""Environment instances in Ray actors: each worker holds a slice of a rollout's instances.

A worker builds its own instances (``llm_envs.make`` + clones, exactly as the single-process
trainer does), so each has its own warm resources — the sandbox its code runs in, the task
source — on the node it was placed on. It resets, steps, clones and scores its instances where
they live: AT-GRPO's ``k`` candidates of a decision are stepped on clones in the worker, and only
the scored records travel back. :class:`RayEnvGroup` is the driver's side: an
:class:`~llm_trainers.rollout.EnvGroup` that sends every move to the worker holding its slot and
returns the answers in the order :func:`~llm_trainers.rollout.collect` asked for them, so a
rollout's records do not depend on where the instances live (tested against the local rollout).

Failures: a worker that dies (its process killed, its node lost) makes the next call raise
:class:`EnvWorkerLost` naming it. The trainer then replays the step (see
:class:`~llm_trainers.distributed.trainer.DistributedTrainer`); :meth:`RayEnvGroup.recover`
replaces the dead workers with fresh ones holding the same slots. Nothing a dead worker held is
reported: a step either completes with every record or is replayed from its start.

This module needs Ray but not torch.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from llm_envs.core.env import TextEnv
from llm_trainers.rollout import EnvGroup, LocalEnvGroup, Move, Played, SlotView, spawn_envs

__all__ = ["EnvWorker", "EnvWorkerLost", "RayEnvGroup", "split_slots"]


class EnvWorkerLost(RuntimeError):
    """An environment worker died (or became unreachable) during a call."""

    def __init__(self, worker: int, slots: Sequence[int], cause: BaseException) -> None:
        self.worker = worker
        self.slots = list(slots)
        super().__init__(f"environment worker {worker} (slots {self.slots[0]}..{self.slots[-1]}) was lost: "
                         f"{type(cause).__name__}: {cause}")


def split_slots(n: int, workers: int) -> list[list[int]]:
    """Slots ``0..n-1`` in ``workers`` contiguous slices whose sizes differ by at most one."""
    if workers < 1 or workers > n:
        raise ValueError(f"{workers} workers for {n} instances")
    base, extra = divmod(n, workers)
    out, start = [], 0
    for w in range(workers):
        size = base + (1 if w < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out


def has_cross_episode_state(env: TextEnv) -> bool:
    """Whether the environment keeps state across episodes (``state_dict`` is its own)."""
    return type(env).state_dict is not TextEnv.state_dict


class EnvWorker:
    """One Ray actor's slice of a rollout (a plain class; :class:`RayEnvGroup` makes the actor).

    Args:
        env_id: Registered environment id.
        env_kwargs: Constructor keywords.
        slots: The global slot numbers of this worker's instances.
        threads: Threads stepping its instances and candidates concurrently.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], slots: Sequence[int], threads: int = 1) -> None:
        import llm_envs

        first = llm_envs.make(env_id, **dict(env_kwargs))
        self.stateful = has_cross_episode_state(first)
        self.group = LocalEnvGroup(spawn_envs(first, len(slots)), env_workers=threads, slots=slots)

    def info(self) -> dict[str, Any]:
        from llm_trainers.distributed.cluster import node_info

        return {**node_info(), "slots": list(self.group.slots), "stateful": self.stateful}

    def reset(self, seeds: Sequence[int | None], options: Mapping[str, Any]) -> list[SlotView]:
        return self.group.reset(seeds, options)

    def play(self, moves: Sequence[Move]) -> list[Played]:
        return self.group.play(moves)

    def finish(self, kept: Sequence[tuple[int, int]]) -> tuple[Any, Any]:
        return self.group.finish(kept)

    def state_dict(self) -> dict[str, Any]:
        return self.group.envs[0].state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.group.envs[0].load_state_dict(state)

    def close(self) -> None:
        for env in self.group.envs:
            env.close()


class RayEnvGroup(EnvGroup):
    """The driver's view of instances spread over :class:`EnvWorker` actors.

    Args:
        env_id, env_kwargs: The environment (built in each worker).
        num_envs: Instances in all.
        workers: Worker actors (contiguous slices of the slots).
        cpus_per_worker: CPUs each worker reserves.
        threads: Stepping threads inside each worker.
        call_timeout_s: Longest wait for one call (None: no limit); a worker that does not
            answer is treated as lost.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], num_envs: int, workers: int,
                 cpus_per_worker: float = 1.0, threads: int = 1, call_timeout_s: float | None = None) -> None:
        from llm_trainers.distributed.cluster import import_ray

        self.ray = import_ray()
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.slices = split_slots(num_envs, workers)
        self.cpus_per_worker = cpus_per_worker
        self.threads = threads
        self.call_timeout_s = call_timeout_s
        self._worker_of = {slot: w for w, slots in enumerate(self.slices) for slot in slots}
        self.actors = [self._start(w) for w in range(workers)]
        infos = self._gather([(w, a.info.remote()) for w, a in enumerate(self.actors)])
        self.nodes = [i["node_id"] for i in infos]
        self.stateful = bool(infos[0]["stateful"])
        if self.stateful and workers > 1:
            self.close()
            raise ValueError(
                f"{env_id} keeps state across episodes (TextEnv.state_dict, e.g. a question pool) that its "
                "instances share; spread over several workers they would each grow their own. Use "
                "resources.env_workers: 1 for it."
            )

    def _start(self, w: int) -> Any:
        actor_cls = self.ray.remote(EnvWorker)
        return actor_cls.options(
            num_cpus=self.cpus_per_worker, scheduling_strategy="SPREAD", max_restarts=0, max_concurrency=1,
        ).remote(self.env_id, self.env_kwargs, self.slices[w], self.threads)

    def _gather(self, calls: Sequence[tuple[int, Any]]) -> list[Any]:
        """``ray.get`` each worker's answer; a dead worker raises :class:`EnvWorkerLost`."""
        from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

        out = []
        for w, ref in calls:
            try:
                out.append(self.ray.get(ref, timeout=self.call_timeout_s))
            except (RayActorError, ActorUnavailableError, GetTimeoutError) as exc:
                raise EnvWorkerLost(w, self.slices[w], exc) from exc
        return out

    # ------------------------------------------------------------------ the EnvGroup protocol
    def reset(self, seeds: Sequence[int | None], options: Mapping[str, Any]) -> list[SlotView]:
        seeds = list(seeds)
        if len(seeds) != len(self._worker_of):
            raise ValueError(f"{len(seeds)} seeds for {len(self._worker_of)} instances")
        calls = [(w, a.reset.remote([seeds[s] for s in self.slices[w]], dict(options)))
                 for w, a in enumerate(self.actors)]
        return [view for views in self._gather(calls) for view in views]

    def play(self, moves: Sequence[Move]) -> list[Played]:
        by_worker: dict[int, list[int]] = {}
        for pos, move in enumerate(moves):
            by_worker.setdefault(self._worker_of[move.slot], []).append(pos)
        calls = [(w, self.actors[w].play.remote([moves[p] for p in positions])) for w, positions in by_worker.items()]
        out: list[Played | None] = [None] * len(moves)
        for positions, results in zip(by_worker.values(), self._gather(calls)):
            for p, r in zip(positions, results):
                out[p] = r
        return out  # type: ignore[return-value]

    def finish(self, kept: Sequence[tuple[int, int]]) -> tuple[Any, Any]:
        by_worker: dict[int, list[tuple[int, int]]] = {w: [] for w in range(len(self.actors))}
        for key in kept:
            by_worker[self._worker_of[key[0]]].append(key)
        calls = [(w, self.actors[w].finish.remote(keys)) for w, keys in by_worker.items()]
        finals: dict[tuple[int, int], Any] = {}
        episodes: list[dict[str, float]] = []
        for part_finals, part_episodes in self._gather(calls):
            finals.update(part_finals)
            episodes.extend(part_episodes)
        return finals, episodes

    def instances(self) -> RayEnvGroup:
        return self

    # ------------------------------------------------------------------ state and failures
    def state_dict(self) -> dict[str, Any]:
        """Cross-episode state (one worker holds it: see the constructor)."""
        return self._gather([(0, self.actors[0].state_dict.remote())])[0]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._gather([(0, self.actors[0].load_state_dict.remote(state))])

    def recover(self, timeout_s: float = 120.0) -> list[int]:
        """Replace every worker that does not answer by a fresh one holding the same slots;
        return the replaced workers' numbers."""
        from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

        replaced = []
        for w, actor in enumerate(self.actors):
            try:
                self.ray.get(actor.info.remote(), timeout=10.0)
            except (RayActorError, ActorUnavailableError, GetTimeoutError):
                self.ray.kill(actor, no_restart=True)
                self.actors[w] = self._start(w)
                replaced.append(w)
        deadline = time.monotonic() + timeout_s
        for w in replaced:
            info = self.ray.get(self.actors[w].info.remote(), timeout=max(1.0, deadline - time.monotonic()))
            self.nodes[w] = info["node_id"]
        return replaced

    def close(self) -> None:
        for actor in self.actors:
            try:
                self.ray.get(actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead worker has nothing left to close
                pass
            self.ray.kill(actor, no_restart=True)
        self.actors = []
