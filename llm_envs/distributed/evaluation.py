"""Evaluation on a Ray cluster: ``llm-envs eval ENV --ray [ADDRESS]``.

This module is an episode runner (:class:`llm_envs.runner.EpisodeRunner`), not an evaluation
flow: :func:`llm_envs.evaluation.evaluate` with ``runner=RayEvaluation(...)`` does everything a
local run does, and only the episodes are played elsewhere. The episodes still to play are cut
into chunks of consecutive indices and handed to worker actors (:class:`EvalWorker`, the ordinary
:class:`~llm_envs.runner.Runner` on its node, with agents built there from the specs); episode
``i`` is played from seed ``seed + i`` as in a local run, so its result is the same. The driver
keeps the books with :class:`~llm_envs.episodes.RunLedger`, as the local runner does. A worker
that dies loses only its chunk in progress, which is played again up to ``max_chunk_retries``
times and then left incomplete (``worker_lost``).

docs/evaluation.md ("On a cluster: --ray") has the failure rules and the settings check in full.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llm_envs.episodes import (
    EpisodeFailure,
    EpisodeFileProblem,
    EpisodeResult,
    IncompleteRunError,
    RunLedger,
    RunnerError,
)
from llm_envs.runner import RunPlan, RunProgress

__all__ = ["EvalWorker", "RayEvaluation", "RayRunner", "add_ray_arguments", "ray_evaluation_from_args"]


class EvalWorker:
    """One worker's agents and warm environment (a plain class; made a Ray actor at use).

    Args:
        env_id: Registered environment id.
        env_kwargs: Constructor keywords (split included).
        specs: Agent id → :class:`~llm_envs.agents.spec.AgentSpec` (model defaults merged in);
            identical specs become one shared agent, as in a local run.
        seed: The run's seed (episode ``i`` is played from ``seed + i``).
        concurrency: Environment instances in play at once in this worker.
        max_batch_size, max_consecutive_failures: As for :class:`~llm_envs.runner.Runner`.
        env_label: The environment id written into each episode.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], specs: Mapping[str, Any], seed: int,
                 concurrency: int, max_batch_size: int | None, max_consecutive_failures: int | None,
                 env_label: str) -> None:
        import llm_envs
        from llm_envs.agents.spec import resolve_agents

        self.first = llm_envs.make(env_id, **dict(env_kwargs))
        self.agents = resolve_agents(dict(specs), list(self.first.possible_agents))
        self.seed = seed
        self.concurrency = concurrency
        self.max_batch_size = max_batch_size
        self.max_consecutive_failures = max_consecutive_failures
        self.env_label = env_label

    def info(self) -> dict[str, Any]:
        """Where the worker runs, its agents' names and their settings (what it will play with)."""
        import socket

        from llm_envs.distributed.cluster import node_info

        try:
            node = node_info()
        except Exception:  # noqa: BLE001 - outside Ray (tests of the plain class)
            node = {"host": socket.gethostname(), "pid": str(os.getpid())}
        return {
            **node,
            "agents": {a: getattr(agent, "name", type(agent).__name__) for a, agent in self.agents.items()},
            "settings": {a: agent.settings() for a, agent in self.agents.items()},
        }

    def play(self, start: int, count: int) -> dict[str, Any]:
        """Episodes ``start .. start + count - 1`` of the run.

        Returns ``results`` (finished episodes as :meth:`EpisodeResult.to_dict`), ``failures``
        (:meth:`EpisodeFailure.to_dict` of the episodes an infrastructure failure stopped),
        ``stop_reason``, ``configuration_error`` (the :class:`AgentError`'s fields, or None),
        ``agent_name``, ``counters`` (calls, failed calls, tokens) and ``stats`` (per agent).
        """
        from llm_envs.runner import Runner

        runner = Runner(
            self.first.clone,  # clones share the warm environment's sandbox and task source
            self.agents, count, seed=self.seed + start, concurrency=min(self.concurrency, count),
            max_batch_size=self.max_batch_size, env_label=self.env_label,
            max_consecutive_failures=self.max_consecutive_failures,
        )
        incomplete: IncompleteRunError | None = None
        try:
            results = runner.run()
        except IncompleteRunError as exc:
            incomplete, results = exc, exc.results
        for result in results:
            result.index += start
        for failure in runner.failures:
            failure.index += start
        error = incomplete.configuration_error if incomplete is not None else None
        progress = runner.progress
        return {
            "results": [result.to_dict() for result in results],
            "failures": [failure.to_dict() for failure in runner.failures],
            "stop_reason": incomplete.stop_reason if incomplete is not None else None,
            "configuration_error": None if error is None else {
                "message": error.message, "kind": error.kind, "status": error.status, "attempts": error.attempts},
            "agent_name": incomplete.agent_name if incomplete is not None else None,
            "counters": {"calls": progress.calls, "failed_calls": progress.failed_calls,
                         "prompt_tokens": progress.prompt_tokens, "completion_tokens": progress.completion_tokens,
                         "context_length": progress.context_length},
            "stats": runner.stats,
        }

    def close(self) -> None:
        for agent in {id(a): a for a in self.agents.values()}.values():
            agent.close()
        self.first.close()


def chunk_indices(todo: Sequence[int], size: int) -> list[tuple[int, int]]:
    """Runs of consecutive indices of ``todo`` as ``(start, count)``, each at most ``size`` long."""
    out: list[tuple[int, int]] = []
    for i in todo:
        if out and out[-1][0] + out[-1][1] == i and out[-1][1] < size:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


class RayEvaluation:
    """``runner=`` for :func:`llm_envs.evaluation.evaluate`: play the episodes on Ray workers.

    Args:
        address: Ray address; None starts a private local instance unless Ray is already
            initialised in this process.
        workers: Worker actors (default: the cluster's CPUs / ``cpus_per_worker``, at most one
            per chunk).
        cpus_per_worker, gpus_per_worker: Resources each worker reserves.
        chunk_size: Episodes per chunk (default: ``2 × concurrency``; ``concurrency`` is per
            worker).
        max_chunk_retries: Times a chunk whose worker died is played again.
        log: Where notes go (default: nowhere).

    >>> evaluate("llm/Signalling-v0", {None: "random"}, out_dir="runs/x",
    ...          runner=RayEvaluation(workers=2))  # doctest: +SKIP
    """

    def __init__(self, address: str | None = None, *, workers: int | None = None, cpus_per_worker: float = 1.0,
                 gpus_per_worker: float = 0.0, chunk_size: int | None = None, max_chunk_retries: int = 1,
                 log: Callable[[str], None] | None = None) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if chunk_size is not None and chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        if max_chunk_retries < 0:
            raise ValueError(f"max_chunk_retries must be >= 0, got {max_chunk_retries}")
        self.address = address
        self.workers = workers
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = gpus_per_worker
        self.chunk_size = chunk_size
        self.max_chunk_retries = max_chunk_retries
        self.log = log or (lambda message: None)

    def __call__(self, plan: RunPlan) -> RayRunner:
        return RayRunner(plan, self)


class RayRunner:
    """Plays a :class:`~llm_envs.runner.RunPlan` on Ray workers (an
    :class:`~llm_envs.runner.EpisodeRunner`); see the module docstring.

    ``plan.agents`` are specs (agent id, or None for every other role → spec text or
    :class:`~llm_envs.agents.spec.AgentSpec`): the agents are built on the workers. Counters of
    :attr:`progress` advance as each chunk comes back (requests in flight inside a worker are
    not reported).
    """

    def __init__(self, plan: RunPlan, options: RayEvaluation) -> None:
        from llm_envs.agents.base import Agent
        from llm_envs.agents.spec import resolve_specs
        from llm_envs.distributed.cluster import import_ray
        from llm_envs.registry import NAMESPACE

        import_ray()  # a clear error before anything is written when Ray is missing
        if plan.out_path is None:
            raise ValueError("a Ray evaluation needs plan.out_path (the driver writes the episodes there)")
        agents = plan.agents if isinstance(plan.agents, Mapping) else {None: plan.agents}
        if any(isinstance(agent, Agent) for agent in agents.values()):
            raise RunnerError("Ray workers build their agents from specs: pass agent id -> spec (e.g. "
                              "{None: 'reference'}), not Agent objects")
        self.plan = plan
        self.options = options
        self.log = options.log
        self.label = plan.env_id if "/" in plan.env_id else f"{NAMESPACE}/{plan.env_id}"
        possible_agents = _refuse_shared_state(plan.env_id, plan.env_kwargs)
        self.specs = resolve_specs(agents, possible_agents, default="reference")
        humans = sorted(a for a, spec in self.specs.items() if spec.kind == "human")
        if humans:
            raise RunnerError(f"a human plays {', '.join(humans)} at this terminal: evaluate without --ray")
        self.progress = RunProgress(total=plan.num_episodes)
        self.stats: list[dict[str, Any]] = []
        self.file_problems: list[EpisodeFileProblem] = []
        self.failures: list[EpisodeFailure] = []
        self.resumed_episodes = 0
        self._settings: dict[str, Any] | None = None
        self._cluster: Any = None
        self._actors: list[Any] = []
        self._infos: list[dict[str, Any]] = []
        self._size = max(1, options.chunk_size or 2 * plan.concurrency)

    # ------------------------------------------------------------------ the EpisodeRunner contract
    def agent_settings(self) -> dict[str, Any]:
        """From the specs, in the driver; a ``py:`` agent's from the first worker (started for it)."""
        if self._settings is None:
            from llm_envs.agents.spec import spec_settings

            settings = {agent_id: spec_settings(spec) for agent_id, spec in self.specs.items()}
            if any(value is None for value in settings.values()):
                self._start_workers(self.options.workers or 1)
                reported = self._infos[0]["settings"]
                settings = {a: reported[a] if value is None else value for a, value in settings.items()}
            self._settings = settings
        return dict(self._settings)

    def summary_facts(self) -> dict[str, Any]:
        nodes = sorted({info.get("node_id", info["host"]) for info in self._infos})
        return {"ray": {"workers": len(self._actors), "nodes": nodes, "cpus_per_worker": self.options.cpus_per_worker,
                        "gpus_per_worker": self.options.gpus_per_worker, "chunk_size": self._size}}

    def close(self) -> None:
        if self._cluster is None:
            return
        ray = self._cluster.ray
        for actor in self._actors:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead worker has nothing to close
                pass
            ray.kill(actor, no_restart=True)
        self._cluster.close()
        self._cluster = None

    def run(self) -> list[EpisodeResult]:
        plan = self.plan
        assert plan.out_path is not None
        recorded = self.agent_settings()
        ledger = RunLedger(plan.num_episodes, plan.seed, plan.out_path, plan.resume)
        ledger.load()
        self.file_problems = ledger.file_problems
        chunks = deque(chunk_indices(ledger.todo(), self._size))
        wanted = self.options.workers or max(1, int(self._connect().totals()["CPU"] // max(self.options.cpus_per_worker,
                                                                                           1e-9)))
        self._start_workers(max(1, min(wanted, len(chunks) or 1)))
        self._check_workers(recorded)
        ledger.check_resumed(self.label, self._infos[0]["agents"])
        self.resumed_episodes = len(ledger.resumed)
        self.progress = progress = RunProgress(total=plan.num_episodes, resumed=len(ledger.resumed))
        self.log(f"ray: {len(self._actors)} worker(s) on {len(self.summary_facts()['ray']['nodes'])} node(s), "
                 f"{len(chunks)} chunk(s) of <= {self._size} episodes, {len(ledger.resumed)} episode(s) resumed")

        stats: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
        configuration_error: Any = None
        agent_name: str | None = None
        ray = self._cluster.ray
        lost_errors = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)
        ledger.open()
        retries: dict[tuple[int, int], int] = {}
        in_flight: dict[Any, tuple[int, tuple[int, int]]] = {}
        idle = deque(range(len(self._actors)))
        try:
            while chunks or in_flight:
                stopping = configuration_error is not None or progress.stop_reason is not None
                while idle and chunks and not stopping:
                    w, chunk = idle.popleft(), chunks.popleft()
                    in_flight[self._actors[w].play.remote(*chunk)] = (w, chunk)
                if not in_flight:
                    break
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                w, chunk = in_flight.pop(ready[0])
                try:
                    reply = ray.get(ready[0])
                except lost_errors as exc:
                    self._replace_worker(w)
                    idle.append(w)
                    retries[chunk] = retries.get(chunk, 0) + 1
                    span = f"episodes {chunk[0]}..{chunk[0] + chunk[1] - 1}"
                    if retries[chunk] <= self.options.max_chunk_retries:
                        self.log(f"ray: worker {w} lost ({type(exc).__name__}); playing {span} again on a new worker")
                        chunks.appendleft(chunk)
                        continue
                    message = f"their Ray worker was lost {retries[chunk]} times ({type(exc).__name__})"
                    self.log(f"ray: {span}: {message}; left for --resume")
                    for i in range(chunk[0], chunk[0] + chunk[1]):
                        ledger.fail(EpisodeFailure(i, plan.seed + i, "worker_lost", message))
                        progress.failed += 1
                    continue
                idle.append(w)
                for row in sorted(reply["results"], key=lambda r: r["index"]):
                    result = EpisodeResult.from_dict(row)
                    ledger.record(result)
                    progress.finished += 1
                    if plan.on_episode is not None:
                        plan.on_episode(result)
                for row in reply["failures"]:
                    failure = EpisodeFailure(**row)
                    ledger.fail(failure)
                    if failure.reason not in ("not_started", "stopped"):
                        progress.failed += 1
                for key, value in reply["counters"].items():
                    setattr(progress, key, getattr(progress, key) + value)
                for entry in reply["stats"]:
                    total = stats.setdefault((entry["agent"], tuple(entry["plays"])), {
                        "agent": entry["agent"], "plays": list(entry["plays"]), "calls": 0, "requests": 0,
                        "failed_requests": 0, "context_length_answers": 0})
                    for key in ("calls", "requests", "failed_requests", "context_length_answers"):
                        total[key] += entry.get(key, 0)
                if reply["configuration_error"] is not None and configuration_error is None:
                    from llm_envs.agents.base import AgentError

                    error = reply["configuration_error"]
                    configuration_error = AgentError(error["message"], kind=error["kind"], status=error["status"],
                                                     attempts=error["attempts"])
                    agent_name = reply["agent_name"]
                if reply["stop_reason"] and progress.stop_reason is None:
                    progress.stop_reason = reply["stop_reason"]
        finally:
            ledger.close()
            self.stats = list(stats.values())
        try:  # the chunks never dispatched (the run stopped first) are accounted "not_started"
            return ledger.finish(stop_reason=progress.stop_reason, configuration_error=configuration_error,
                                 agent_name=agent_name)
        finally:
            self.failures = ledger.missing

    # ------------------------------------------------------------------ workers
    def _connect(self) -> Any:
        if self._cluster is None:
            from llm_envs.distributed.cluster import Cluster

            self._cluster = Cluster(self.options.address)
        return self._cluster

    def _new_worker(self) -> Any:
        plan = self.plan
        worker_cls = self._connect().ray.remote(EvalWorker)
        return worker_cls.options(
            num_cpus=self.options.cpus_per_worker, num_gpus=self.options.gpus_per_worker,
            scheduling_strategy="SPREAD", max_restarts=0,
        ).remote(plan.env_id, dict(plan.env_kwargs), dict(self.specs), plan.seed, plan.concurrency,
                 plan.max_batch_size, plan.max_consecutive_failures, self.label)

    def _start_workers(self, count: int) -> None:
        """Have at least ``count`` workers up, and their :meth:`EvalWorker.info`."""
        ray = self._connect().ray
        fresh = [self._new_worker() for _ in range(count - len(self._actors))]
        if not fresh:
            return
        self._actors.extend(fresh)
        try:
            self._infos.extend(ray.get([actor.info.remote() for actor in fresh]))
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            raise RunnerError(f"a Ray worker could not start (its agents or environment failed to build): {exc}") from exc

    def _replace_worker(self, w: int) -> None:
        ray = self._cluster.ray
        ray.kill(self._actors[w], no_restart=True)
        self._actors[w] = self._new_worker()

    def _check_workers(self, recorded: Mapping[str, Any]) -> None:
        """Every worker must play with the settings recorded for the run (a node whose
        environment resolves an agent differently, e.g. another ``OPENAI_BASE_URL``, is refused)."""
        import json

        from llm_envs.evaluation.evaluate import settings_diff

        expected = json.loads(json.dumps(dict(recorded), sort_keys=True, default=repr))
        for info in self._infos:
            got = json.loads(json.dumps(info["settings"], sort_keys=True, default=repr))
            if got != expected:
                raise RunnerError(
                    f"the Ray worker on {info.get('host')} would play with other agent settings than those "
                    f"recorded for the run: {'; '.join(settings_diff(expected, got))}. Give every node the same "
                    "environment (model paths, OPENAI_BASE_URL, package versions)."
                )



def _refuse_shared_state(env_id: str, env_kwargs: Mapping[str, Any]) -> list[str]:
    """The environment's agent ids, after refusing an environment whose instances share
    cross-episode state (a question pool that grows as episodes finish): spread over processes,
    each would grow its own and play differently."""
    import llm_envs
    from llm_envs.core.env import TextEnv

    env = llm_envs.make(env_id, **dict(env_kwargs))
    try:
        if type(env).state_dict is not TextEnv.state_dict:
            raise RunnerError(f"{env_id} keeps state across episodes (TextEnv.state_dict) that its instances share; "
                              "spread over Ray workers each would grow its own: evaluate it without --ray")
        return list(env.possible_agents)
    finally:
        env.close()


# ---------------------------------------------------------------------------- the command line
def add_ray_arguments(parser: Any) -> None:
    """``--ray [ADDRESS]`` and its options, for ``llm-envs eval``."""
    group = parser.add_argument_group("cluster (Ray; pip install 'llm-envs[ray]')")
    group.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="play the episodes on Ray workers: on the cluster at ADDRESS ('auto': the one this "
                            "node joined), or on a private local Ray instance without ADDRESS (docs/scaling.md)")
    group.add_argument("--ray-workers", type=int, help="worker actors (default: cluster CPUs / CPUs per worker)")
    group.add_argument("--ray-cpus-per-worker", type=float, default=1.0, help="CPUs each worker reserves (default 1)")
    group.add_argument("--ray-gpus-per-worker", type=float, default=0.0,
                       help="GPUs each worker reserves (local model agents load their model in every worker)")
    group.add_argument("--ray-chunk-size", type=int, help="episodes per chunk (default: 2 x --concurrency)")
    group.add_argument("--ray-chunk-retries", type=int, default=1,
                       help="times a chunk whose worker died is played again before its episodes are left "
                            "for --resume (default 1)")


def ray_evaluation_from_args(args: Any, log: Callable[[str], None]) -> RayEvaluation:
    """The :class:`RayEvaluation` that ``llm-envs eval --ray ...`` asks for."""
    return RayEvaluation(args.ray or None, workers=args.ray_workers, cpus_per_worker=args.ray_cpus_per_worker,
                         gpus_per_worker=args.ray_gpus_per_worker, chunk_size=args.ray_chunk_size,
                         max_chunk_retries=args.ray_chunk_retries, log=log)
