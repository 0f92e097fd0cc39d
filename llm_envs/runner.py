"""Play many episodes of an environment concurrently, batching the agents' calls.

The runner keeps ``concurrency`` environment instances in play, each driven by its own
coroutine. When an instance needs an action it files an :class:`~llm_envs.agents.ActRequest`
with the agent that plays the acting agent id: an agent that serves each request on its own
(``act_async``, the HTTP agent) gets it at once; a batching agent (a local model) gets all its
pending requests in one ``act_batch`` call whenever every instance is waiting
(:mod:`llm_envs._dispatch`). Episode ``i`` is always played from seed ``seed + i`` by a freshly
reset instance whose state between episodes is frozen (``freeze_cross_episode_state``: an
evaluation grows no Proposer–Solver–Judge pool), so results do not depend on concurrency or order.

An infrastructure failure (an agent that produced no action, a step ``env.step`` could not judge)
is never a result: the episode is recorded as an :class:`~llm_envs.episodes.EpisodeFailure`, not
written, and the run ends with :class:`~llm_envs.episodes.IncompleteRunError`; ``resume=True``
plays it. Finished episodes are written at once to the results file (:mod:`llm_envs.episodes`).
docs/evaluation.md says it all in full: "Throughput", "Infrastructure failures are not model
results", "episodes.jsonl" and "Resuming, settings, determinism".

>>> from llm_envs.agents import ReferenceAgent
>>> results = run_episodes("llm/Signalling-v0", ReferenceAgent(), num_episodes=8, concurrency=4)
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llm_envs._dispatch import (
    Dispatcher,
    EpisodeStopped,
    RunProgress,
    RunState,
    has_answered,
    is_async_native,
)
from llm_envs.agents.base import (
    CONTEXT_EXCEEDED,
    ActRequest,
    Agent,
    AgentError,
    AgentOutput,
    run_blocking,
    serves_each_request,
)
from llm_envs.core.errors import InfrastructureError
from llm_envs.episodes import (
    EpisodeFailure,
    EpisodeFileProblem,
    EpisodeResult,
    IncompleteRunError,
    RunLedger,
    RunnerError,
)

#: RunProgress (defined in llm_envs._dispatch), RunnerError and IncompleteRunError (defined in
#: llm_envs.episodes) belong to the runner's API, so they are imported from here; everything else
#: of the results file lives in llm_envs.episodes.
__all__ = [
    "DEFAULT_MAX_CONSECUTIVE_FAILURES",
    "EpisodeRunner",
    "IncompleteRunError",
    "RunPlan",
    "RunProgress",
    "Runner",
    "RunnerError",
    "arun_episodes",
    "local_runner",
    "run_episodes",
]

#: Failed calls in a row of one agent after which no new episode is started.
DEFAULT_MAX_CONSECUTIVE_FAILURES = 5


# ---------------------------------------------------------------------------- the runner contract
@dataclass(frozen=True)
class RunPlan:
    """What :func:`llm_envs.evaluation.evaluate` asks an episode runner to play.

    Attributes:
        env_id: The registered environment id.
        agents: One :class:`Agent` for every role, or agent id → :class:`Agent`; a runner that
            builds its agents elsewhere (on Ray workers) takes agent id → spec
            (:class:`~llm_envs.agents.spec.AgentSpec` or its text) instead.
        num_episodes: Episodes ``0 .. num_episodes - 1``; episode ``i`` is played from seed
            ``seed + i``.
        seed: The run's base seed.
        concurrency: Environment instances in play at once (per process that plays them).
        env_kwargs: Constructor keywords (the split included).
        out_path: The results file (``episodes.jsonl``).
        resume: Keep the episodes in ``out_path`` and play only the missing ones.
        max_batch_size, max_consecutive_failures: As for :class:`Runner`.
        on_episode: Called in the calling process with each episode as it is written.
    """

    env_id: str
    agents: Any
    num_episodes: int
    seed: int = 0
    concurrency: int = 8
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    out_path: Path | None = None
    resume: bool = False
    max_batch_size: int | None = None
    max_consecutive_failures: int | None = DEFAULT_MAX_CONSECUTIVE_FAILURES
    on_episode: Callable[[EpisodeResult], None] | None = None


class EpisodeRunner(Protocol):
    """What plays a run's episodes for :func:`llm_envs.evaluation.evaluate`: the local
    :class:`Runner` (one process) or :class:`llm_envs.distributed.evaluation.RayRunner` (Ray
    workers). The evaluation flow around it (``run.json`` and its settings check, the summary,
    the plot, the report, the exit status) is the same whichever plays.

    A runner must write every finished episode to :attr:`RunPlan.out_path` with an
    :class:`EpisodeWriter` as soon as it is in the calling process, never write an episode an
    infrastructure failure stopped, and on ``resume`` repair the file (:func:`load_episodes`
    with ``repair=True``), keep what it holds and play only the missing episodes.

    Attributes:
        progress: Live counters (read by the progress bar from another thread while
            :meth:`run` plays; a runner may replace the object when the run starts).
        stats: Per agent, once the run ended: ``agent``, ``plays`` (agent ids), ``calls``,
            ``requests``, ``failed_requests``.
        file_problems: What resuming found wrong in the results file and repaired.
        resumed_episodes: Episodes already finished by an earlier run.
    """

    progress: RunProgress
    stats: list[dict[str, Any]]
    file_problems: list[EpisodeFileProblem]
    resumed_episodes: int

    def agent_settings(self) -> dict[str, Any]:
        """Agent id (``"*"`` for one agent playing every role) → :meth:`Agent.settings` of the
        agent that plays it: part of the run's settings fingerprint. Called before :meth:`run`."""
        ...

    def run(self) -> list[EpisodeResult]:
        """Play the missing episodes; return every finished one (resumed ones included), by index.

        Raises:
            IncompleteRunError: when infrastructure failures kept episodes from finishing (it
                carries the finished ones; none of the others was written).
        """
        ...

    def summary_facts(self) -> dict[str, Any]:
        """More entries for ``summary.json`` about how the run was played (e.g. ``"ray"``)."""
        ...

    def close(self) -> None:
        """Release what the runner holds (workers, a cluster connection); idempotent. The
        agents a caller passed in are the caller's to close."""
        ...


# ---------------------------------------------------------------------------- the runner
class Runner:
    """Plays ``num_episodes`` episodes; see the module docstring and :func:`run_episodes`.

    :attr:`progress` (a :class:`RunProgress`) is live while the run plays; :attr:`stats`
    (per agent object: the agent ids it plays, calls, requests, failed calls) and
    :attr:`failures` are filled in when it ends.
    """

    def __init__(
        self,
        env: str | Callable[[], Any],
        agents: Mapping[str, Agent] | Agent,
        num_episodes: int,
        *,
        seed: int = 0,
        concurrency: int = 8,
        env_kwargs: Mapping[str, Any] | None = None,
        out_path: str | os.PathLike[str] | None = None,
        resume: bool = False,
        reset_options: Mapping[str, Any] | None = None,
        max_batch_size: int | None = None,
        store_token_ids: bool = False,
        on_episode: Callable[[EpisodeResult], None] | None = None,
        on_failure: Callable[[EpisodeFailure], None] | None = None,
        env_label: str | None = None,
        max_consecutive_failures: int | None = DEFAULT_MAX_CONSECUTIVE_FAILURES,
    ) -> None:
        if num_episodes < 0:
            raise ValueError(f"num_episodes must be >= 0, got {num_episodes}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1 or None, got {max_batch_size}")
        if max_consecutive_failures is not None and max_consecutive_failures < 0:
            raise ValueError(f"max_consecutive_failures must be >= 0 or None, got {max_consecutive_failures}")
        if resume and out_path is None:
            raise ValueError("resume=True needs out_path (the JSONL file to resume)")
        self.env_spec = env
        self.env_kwargs = dict(env_kwargs or {})
        self.agents_arg = agents
        self.num_episodes = int(num_episodes)
        self.seed = int(seed)
        self.concurrency = int(concurrency)
        self.out_path = Path(out_path) if out_path is not None else None
        self.resume = resume
        self.reset_options = dict(reset_options or {})
        self.max_batch_size = max_batch_size
        self.store_token_ids = store_token_ids
        self.on_episode = on_episode
        self.on_failure = on_failure
        self.env_label = env_label
        self.max_consecutive_failures = max_consecutive_failures or None
        self.progress = RunProgress(total=self.num_episodes)
        #: Filled during the run: per agent object, the agent ids it plays and how many calls
        #: and requests it served (``requests / calls`` is the mean batch size).
        self.stats: list[dict[str, Any]] = []
        self.failures: list[EpisodeFailure] = []
        self.resumed_episodes = 0
        #: What resuming found wrong in the results file (and repaired).
        self.file_problems: list[EpisodeFileProblem] = []

    @classmethod
    def from_plan(cls, plan: RunPlan) -> Runner:
        """The runner that plays ``plan`` in this process."""
        return cls(
            plan.env_id,
            plan.agents,
            plan.num_episodes,
            seed=plan.seed,
            concurrency=plan.concurrency,
            env_kwargs=plan.env_kwargs,
            out_path=plan.out_path,
            resume=plan.resume,
            max_batch_size=plan.max_batch_size,
            on_episode=plan.on_episode,
            max_consecutive_failures=plan.max_consecutive_failures,
        )

    # ------------------------------------------------------------------ the EpisodeRunner contract
    def agent_settings(self) -> dict[str, Any]:
        """Agent id (``"*"`` when one agent object was given for every role) → its settings."""
        if isinstance(self.agents_arg, Agent):
            return {"*": self.agents_arg.settings()}
        return {agent_id: agent.settings() for agent_id, agent in self.agents_arg.items()}

    def summary_facts(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """Nothing to release: the environments close when :meth:`run` ends, and the agents
        belong to the caller."""

    # ------------------------------------------------------------------ entry points
    def run(self) -> list[EpisodeResult]:
        """Play the run and return every episode's result (resumed ones included), by index.
        From inside an event loop (a notebook) it plays on a private loop in a thread.

        Raises:
            IncompleteRunError: if any episode could not be played (infrastructure failures).
        """
        return run_blocking(self.arun())

    async def arun(self) -> list[EpisodeResult]:
        """The coroutine form of :meth:`run`."""
        first_env = self._make_env()
        # Episodes must not change what later ones see (PSJ's pool grows as episodes end): with
        # it, results depended on which instance played an earlier episode, and when.
        freeze = getattr(first_env, "freeze_cross_episode_state", None)
        if callable(freeze):
            freeze()
        env_id = self.env_label or self._env_id(first_env)
        agents = self._agent_map(first_env)

        names = {agent_id: getattr(agent, "name", type(agent).__name__) for agent_id, agent in agents.items()}
        ledger = RunLedger(self.num_episodes, self.seed, self.out_path, self.resume)
        ledger.load()
        self.file_problems = ledger.file_problems
        ledger.check_resumed(env_id, names)
        self.resumed_episodes = len(ledger.resumed)
        self.progress = progress = RunProgress(total=self.num_episodes, resumed=len(ledger.resumed))
        todo = deque(ledger.todo())
        ledger.open()

        unique_agents = list({id(a): a for a in agents.values()}.values())
        threaded = any(is_async_native(a) or serves_each_request(a) for a in unique_agents)
        state = RunState(self.max_batch_size, threaded, self.max_consecutive_failures, progress, label=env_id)
        dispatch_of: dict[int, Dispatcher] = {}
        for agent in unique_agents:
            dispatcher = Dispatcher(agent, state)
            dispatch_of[id(agent)] = dispatcher
            state.dispatchers.append(dispatcher)
        by_agent_id = {agent_id: dispatch_of[id(agent)] for agent_id, agent in agents.items()}

        workers_count = min(self.concurrency, len(todo))
        envs = [first_env] + [self._spawn(first_env) for _ in range(max(0, workers_count - 1))]
        in_play: set[int] = set()
        # An episode that holds a context-length refusal of an agent that has not yet answered
        # one real completion here waits unwritten: if no call of that agent ever fits its
        # model's context, the server is misconfigured for this environment (nothing about the
        # model was measured), and those episodes must stay unplayed for a resume, not be
        # written (or cached) as the model's empty answers (docs/evaluation.md). A real answer
        # in the resumed episodes, or in an earlier run of this environment in this process
        # (a Ray worker's earlier chunk), proves it as well. Only a server's refusal is held:
        # the hf and vllm engines' own empty answers measure the model's real context.
        held: dict[int, EpisodeResult] = {}
        proven = {
            id(a)
            for a in unique_agents
            if has_answered(a, fitted_in=env_id) or _answered_in(ledger.resumed.values(), agents, a)
        }

        def unproven(result: EpisodeResult) -> list[tuple[str, Dispatcher]]:
            return [
                (step["agent"], by_agent_id[step["agent"]])
                for step in result.steps
                if _server_refusal(step["meta"])
                and by_agent_id[step["agent"]].completions == 0
                and id(by_agent_id[step["agent"]].agent) not in proven
            ]

        def write(result: EpisodeResult) -> None:
            ledger.record(result)
            progress.finished += 1
            if self.on_episode is not None:
                self.on_episode(result)

        def release_held() -> None:
            for index in sorted(held):
                if not unproven(held[index]):
                    write(held.pop(index))

        async def worker(env: Any) -> None:
            try:
                while todo and not state.stopping:
                    index = todo.popleft()
                    in_play.add(index)
                    try:
                        result = await self._play(env, index, env_id, names, by_agent_id, state)
                    except EpisodeStopped as stopped:
                        state.episode_ended(stopped.error if stopped.step_failure else None)
                        failure = EpisodeFailure(
                            index,
                            self.seed + index,
                            stopped.error.kind,
                            str(stopped.error),
                            stopped.agent,
                            stopped.decisions,
                        )
                        ledger.fail(failure)
                        progress.failed += 1
                        if self.on_failure is not None:
                            self.on_failure(failure)
                        continue
                    finally:
                        in_play.discard(index)
                    state.episode_ended(None)
                    if unproven(result):
                        held[index] = result
                    else:
                        write(result)
                    release_held()
            finally:
                state.quiesce()

        state.running = workers_count
        tasks = [asyncio.create_task(worker(env)) for env in envs[:workers_count]]
        abort_wait = asyncio.create_task(state.abort_event.wait())
        try:
            pending: set[asyncio.Task[Any]] = set(tasks)
            while pending:
                finished, pending = await asyncio.wait(pending | {abort_wait}, return_when=asyncio.FIRST_COMPLETED)
                pending.discard(abort_wait)
                if abort_wait in finished or any(not t.cancelled() and t.exception() for t in finished):
                    break
        finally:
            state.closing = True
            stopped_in_play = set(in_play)
            for task in [*tasks, abort_wait, *state.background]:
                task.cancel()
            await asyncio.gather(*tasks, abort_wait, *state.background, return_exceptions=True)
            release_held()
            self._fail_held(held, unproven, ledger, state)
            ledger.close()
            for env in envs:
                env.close()
            for agent in unique_agents:
                aclose = getattr(agent, "aclose", None)
                if aclose is not None:
                    await aclose()
            self.stats = [
                {
                    "agent": d.name,
                    "plays": [a for a, agent in agents.items() if agent is d.agent],
                    "calls": d.calls,
                    "requests": d.requests,
                    "failed_requests": d.failures,
                    "context_length_answers": d.context_refusals,
                }
                for d in state.dispatchers
            ]
        # Retrieve every failure (so none is reported as "never retrieved"), raise the first.
        errors = [t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception()]
        if errors:
            raise errors[0]  # type: ignore[misc]
        try:
            return ledger.finish(
                in_play=stopped_in_play,
                stop_reason=progress.stop_reason,
                configuration_error=state.abort_error,
                agent_name=state.abort_agent,
            )
        finally:
            self.failures = ledger.missing

    def _fail_held(
        self,
        held: dict[int, EpisodeResult],
        unproven: Callable[[EpisodeResult], list[tuple[str, Dispatcher]]],
        ledger: RunLedger,
        state: RunState,
    ) -> None:
        """The run is over, and the held episodes' agents never had a prompt fit. Every call
        of such an agent answered, and every answer a refusal: a configuration error (exit 2).
        If some calls failed or the run stopped early, it cannot be told: the episodes are
        left for a resume. Either way none of them is written."""
        if not held:
            return
        agent_id, dispatcher = unproven(next(iter(held.values())))[0]
        said = next(
            (s["meta"].get("server_said") for r in held.values() for s in r.steps if s["meta"].get("server_said")),
            None,
        )
        all_refused = dispatcher.failures == 0 and not state.stopping
        if all_refused:
            message = (
                f"every one of the {dispatcher.context_refusals} answers of {dispatcher.name} was a refusal "
                "of a prompt too long for the model's context, so no answer of the model was measured: lower "
                "--max-tokens or raise the server's context length (vLLM --max-model-len)"
                + (f"; the server said: {said}" if said else "")
            )
        else:
            message = (
                f"the run stopped before {dispatcher.name} answered anything but context-length refusals, "
                "so they cannot be told apart from a misconfigured server; not written"
            )
        for index in sorted(held):
            result = held.pop(index)
            reason = "client_error" if all_refused else "stopped"
            ledger.fail(EpisodeFailure(index, result.seed, reason, message, agent_id, len(result.steps)))
            state.progress.failed += 1
        if all_refused:
            state.abort_error, state.abort_agent = AgentError(message, kind="client_error"), dispatcher.name

    # ------------------------------------------------------------------ one episode
    async def _play(
        self,
        env: Any,
        index: int,
        env_id: str,
        names: dict[str, str],
        dispatchers: dict[str, Dispatcher],
        state: RunState,
    ) -> EpisodeResult:
        started = time.perf_counter()
        seed = self.seed + index
        try:
            env.reset(seed=seed, options=dict(self.reset_options) or None)
        except InfrastructureError as exc:  # an environment on a server that cannot be reached
            raise EpisodeStopped(exc, None, 0, step_failure=True) from exc
        steps: list[dict[str, Any]] = []
        while env.agents:
            agent_id = env.agent_selection
            if env.terminations[agent_id] or env.truncations[agent_id]:
                try:
                    env.step(None)  # PettingZoo's dead step
                except InfrastructureError as exc:  # a remote environment's server went away
                    raise EpisodeStopped(exc, None, len(steps), step_failure=True) from exc
                continue
            request = ActRequest(env.observe(agent_id), agent_id, env, episode_seed=seed, decision=len(steps))
            future = dispatchers[agent_id].submit(request)
            state.quiesce()
            try:
                output = await future  # the dispatcher counted us as running again
            except AgentError as exc:
                raise EpisodeStopped(exc, agent_id, len(steps)) from exc
            before = len(env.records)
            try:
                env.step(output.text)
            except InfrastructureError as exc:
                # The step could not be judged: the sandbox failed under the agent's program
                # (SandboxFailure), or an agent the environment calls itself (an LLM judge)
                # failed. Never a result: the episode is recorded as incomplete.
                raise EpisodeStopped(exc, None, len(steps), step_failure=True) from exc
            steps.append(self._step_entry(agent_id, output, before if len(env.records) > before else None))
        try:
            return self._result(env, index, seed, env_id, names, steps, started)
        except InfrastructureError as exc:  # a remote environment's records could not be read
            raise EpisodeStopped(exc, None, len(steps), step_failure=True) from exc

    def _result(self, env: Any, index: int, seed: int, env_id: str, names: dict[str, str],
                steps: list[dict[str, Any]], started: float) -> EpisodeResult:
        return EpisodeResult(
            index=index,
            seed=seed,
            env_id=env_id,
            episode_id=str(getattr(env, "episode_id", "")),
            agents=dict(names),
            rewards={a: float(r) for a, r in env.agent_rewards().items()},
            metrics={k: float(v) for k, v in env.episode_metrics().items()},
            records=[record.to_dict() for record in env.records],
            steps=steps,
            duration_s=time.perf_counter() - started,
        )

    def _step_entry(self, agent_id: str, output: AgentOutput, record_index: int | None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "agent": agent_id,
            "record_index": record_index,
            "prompt_tokens": int(output.prompt_tokens or 0),
            "completion_tokens": int(output.completion_tokens or 0),
            "error": None,
            "meta": _jsonable(output.meta or {}),
        }
        if self.store_token_ids:
            entry["prompt_token_ids"] = output.prompt_token_ids
            entry["token_ids"] = output.token_ids
            entry["logprobs"] = output.logprobs
        return entry

    # ------------------------------------------------------------------ helpers
    def _make_env(self) -> Any:
        if callable(self.env_spec):
            return self.env_spec(**self.env_kwargs)
        from llm_envs.registry import make

        return make(self.env_spec, **self.env_kwargs)

    def _spawn(self, first_env: Any) -> Any:
        """Another instance: a clone of the first (heavy resources shared), or a new one."""
        clone = getattr(first_env, "clone", None)
        return clone() if clone is not None else self._make_env()

    def _env_id(self, env: Any) -> str:
        if isinstance(self.env_spec, str):
            from llm_envs.registry import NAMESPACE

            return self.env_spec if "/" in self.env_spec else f"{NAMESPACE}/{self.env_spec}"
        return str(env.metadata.get("name", type(env).__name__))

    def _agent_map(self, env: Any) -> dict[str, Agent]:
        possible = list(env.possible_agents)
        if isinstance(self.agents_arg, Agent):
            return {a: self.agents_arg for a in possible}
        agents = dict(self.agents_arg)
        missing = [a for a in possible if a not in agents]
        extra = [a for a in agents if a not in possible]
        if missing or extra:
            raise RunnerError(
                f"the agent mapping must cover exactly the environment's agents {possible}: "
                f"missing {missing}, unknown {extra}"
            )
        for agent_id, agent in agents.items():
            if not isinstance(agent, Agent):
                raise RunnerError(f"agent for {agent_id!r} is a {type(agent).__name__}, not an Agent")
        return agents



def _server_refusal(meta: Mapping[str, Any]) -> bool:
    """Whether a step's answer is a server's refusal of a prompt as too long for the context."""
    return meta.get("finish_reason") == CONTEXT_EXCEEDED and bool(meta.get("server_said"))


def _answered_in(results: Any, agents: Mapping[str, Agent], agent: Agent) -> bool:
    """Whether ``agent`` gave a real completion (not a context-length refusal) in any of the
    resumed episodes ``results``: then its prompts can fit, and a refusal is the model's answer."""
    ids = {agent_id for agent_id, a in agents.items() if a is agent}
    return any(
        step.get("agent") in ids and (step.get("meta") or {}).get("finish_reason") != CONTEXT_EXCEEDED
        for result in results
        for step in result.steps
    )


def _jsonable(value: Any) -> Any:
    """A JSON-safe copy of agent metadata (unknown objects become their repr)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, dict):
            return {str(k): _jsonable(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_jsonable(v) for v in value]
        return repr(value)


def run_episodes(
    env_id: str | Callable[..., Any],
    agents: Mapping[str, Agent] | Agent,
    num_episodes: int,
    seed: int = 0,
    concurrency: int = 8,
    env_kwargs: Mapping[str, Any] | None = None,
    out_path: str | os.PathLike[str] | None = None,
    resume: bool = False,
    **options: Any,
) -> list[EpisodeResult]:
    """Play ``num_episodes`` episodes of ``env_id`` and return their results, by index.

    Args:
        env_id: A registered id (``"llm/Sudoku-v0"``) or a callable that returns a new
            environment (called with ``env_kwargs``).
        agents: One agent for every role, or agent id → agent (the same object may play
            several ids and then batches their requests together).
        num_episodes: Episodes ``0 .. num_episodes-1``; episode ``i`` uses seed ``seed + i``.
        seed: The run's base seed.
        concurrency: Environment instances in play at once.
        env_kwargs: Constructor keywords (config overrides, ``split=...``, ``sandbox=...``).
        out_path: JSONL file; each finished episode is appended at once.
        resume: Keep the episodes already in ``out_path`` and play only the missing ones.
        **options: ``reset_options``, ``max_batch_size`` (``1`` = one request per call),
            ``store_token_ids``, ``on_episode`` (callback per finished episode), ``on_failure``
            (callback per episode stopped by a failure), ``env_label``,
            ``max_consecutive_failures``.

    Raises:
        IncompleteRunError: if an infrastructure failure kept any episode from finishing
            (it carries the finished ones).
    """
    runner = Runner(
        env_id,
        agents,
        num_episodes,
        seed=seed,
        concurrency=concurrency,
        env_kwargs=env_kwargs,
        out_path=out_path,
        resume=resume,
        **options,
    )
    return runner.run()


def local_runner(plan: RunPlan) -> Runner:
    """The default :class:`EpisodeRunner` of an evaluation: every episode in this process."""
    return Runner.from_plan(plan)


async def arun_episodes(*args: Any, **kwargs: Any) -> list[EpisodeResult]:
    """:func:`run_episodes` as a coroutine (same arguments)."""
    runner = Runner(*args, **kwargs)
    return await runner.arun()
