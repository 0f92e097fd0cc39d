"""Play many episodes of an environment concurrently, batching the agents' calls.

The runner keeps ``concurrency`` environment instances in play. Each instance is driven by its
own coroutine; when it needs an action it files an :class:`~llm_envs.agents.ActRequest` with the
agent object that plays the acting agent id, and waits. Whenever every instance is waiting
(nothing left to compute until an agent answers), each agent object receives *all* its pending
requests at once:

* a synchronous agent (a local model, the reference agent) gets them in one
  :meth:`~llm_envs.agents.Agent.act_batch` call (at most ``max_batch_size`` per call), and is
  sent nothing more until that call returns;
* an asynchronous agent (one that implements ``act_batch_async``, such as the HTTP agent) gets
  them in one :meth:`~llm_envs.agents.Agent.act_batch_async` call right away, even while its
  previous calls are still in flight: the agent bounds its own concurrency.

Two agent ids played by the same object (one model for every role) share its batches.

Every finished episode is appended to a JSONL file at once (one JSON object per line, flushed
and fsync'ed), so an interrupted run loses only the episodes in play. ``resume=True`` reads the
file, drops a torn last line, and plays only the episodes that are missing. Episode ``i`` is
always played from seed ``seed + i`` by a freshly reset instance, so with deterministic agents
(including :class:`~llm_envs.agents.RandomAgent` with ``per_decision_seed=True``) a resumed run
gives exactly the results of an uninterrupted one, whatever the concurrency.

>>> from llm_envs.agents import ReferenceAgent
>>> results = run_episodes("llm/Signalling-v0", ReferenceAgent(), num_episodes=8, concurrency=4)
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llm_envs.agents.base import ActRequest, Agent, AgentOutput, run_blocking

__all__ = [
    "EpisodeResult",
    "Runner",
    "RunnerError",
    "arun_episodes",
    "load_episodes",
    "run_episodes",
]


class RunnerError(RuntimeError):
    """The run cannot go on (a bad agent mapping, a results file from another run, ...)."""


@dataclass
class EpisodeResult:
    """Everything one finished episode left behind; one line of the JSONL file.

    Attributes:
        index: Episode number within the run (0-based).
        seed: The seed the environment was reset with (``run seed + index``).
        env_id: The environment id.
        episode_id: The environment's own episode id.
        agents: Agent id → name of the agent that played it.
        rewards: Agent id → total reward (the sum of its records' rewards).
        metrics: :meth:`TextEnv.episode_metrics` (always ``success`` and ``turns``).
        records: Every :class:`~llm_envs.core.ActionRecord`, as ``to_dict()``.
        steps: One entry per agent decision, in order of play: ``agent``, ``record_index`` (the
            record the action produced), ``prompt_tokens``, ``completion_tokens``, ``error``
            and ``meta`` of the :class:`~llm_envs.agents.AgentOutput` (plus ``token_ids`` and
            ``logprobs`` when the run stores them).
        duration_s: Wall time from reset to the end of the episode.
    """

    index: int
    seed: int
    env_id: str
    episode_id: str
    agents: dict[str, str]
    rewards: dict[str, float]
    metrics: dict[str, float]
    records: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    duration_s: float = 0.0

    @property
    def success(self) -> float:
        return float(self.metrics.get("success", 0.0))

    @property
    def turns(self) -> float:
        return float(self.metrics.get("turns", 0.0))

    def tokens(self, agent: str | None = None) -> tuple[int, int]:
        """(prompt, completion) tokens used in the episode, by ``agent`` or by all."""
        steps = [s for s in self.steps if agent is None or s["agent"] == agent]
        return (
            sum(int(s.get("prompt_tokens", 0)) for s in steps),
            sum(int(s.get("completion_tokens", 0)) for s in steps),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeResult:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def outcome(self) -> dict[str, Any]:
        """The deterministic part (everything but timings): equal for equal runs."""
        data = self.to_dict()
        data.pop("duration_s")
        for step in data["steps"]:
            meta = step.get("meta") or {}
            step["meta"] = {k: v for k, v in meta.items() if "latency" not in k}
        return data


# ---------------------------------------------------------------------------- JSONL helpers
def load_episodes(path: str | os.PathLike[str], *, repair: bool = False) -> list[EpisodeResult]:
    """Read the episodes of a JSONL results file.

    A last line without its newline (or not valid JSON) is what a crash during a write leaves:
    it is ignored, and with ``repair=True`` cut off the file. Any other bad line is an error.
    """
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes()
    episodes: list[EpisodeResult] = []
    offset = 0
    lines = raw.split(b"\n")
    for number, line in enumerate(lines):
        is_last = number == len(lines) - 1
        if is_last:  # the text after the final newline: empty, or a torn write
            if line.strip() and repair:
                with open(path, "r+b") as f:
                    f.truncate(offset)
                    f.flush()
                    os.fsync(f.fileno())
            break
        if line.strip():
            try:
                episodes.append(EpisodeResult.from_dict(json.loads(line)))
            except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
                raise RunnerError(f"{path}:{number + 1} is not an episode record: {exc}") from exc
        offset += len(line) + 1
    return episodes


class _EpisodeWriter:
    """Appends one JSON line per episode, durably (flush + fsync) before returning."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")

    def write(self, result: EpisodeResult) -> None:
        self._file.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


# ---------------------------------------------------------------------------- dispatching
def _is_async_native(agent: Agent) -> bool:
    """True if ``agent`` implements its own ``act_batch_async`` (not the thread fallback)."""
    return type(agent).act_batch_async is not Agent.act_batch_async


class _Dispatcher:
    """The pending requests of one agent object and the calls that serve them."""

    def __init__(self, agent: Agent, runner: _RunState) -> None:
        self.agent = agent
        self.run = runner
        self.is_async = _is_async_native(agent)
        self.pending: list[tuple[ActRequest, asyncio.Future[AgentOutput]]] = []
        self.busy = False
        self.calls = 0
        self.requests = 0

    def submit(self, request: ActRequest) -> asyncio.Future[AgentOutput]:
        future = asyncio.get_running_loop().create_future()
        self.pending.append((request, future))
        return future

    def flush(self) -> None:
        """Send every pending request, unless a synchronous call is still running."""
        if not self.pending or (self.busy and not self.is_async):
            return
        batch, self.pending = self.pending, []
        self.busy = True
        task = asyncio.get_running_loop().create_task(self._serve(batch))
        self.run.background.add(task)
        task.add_done_callback(self.run.background.discard)

    async def _serve(self, batch: list[tuple[ActRequest, asyncio.Future[AgentOutput]]]) -> None:
        size = self.run.max_batch_size or len(batch)
        chunks = [batch[i : i + size] for i in range(0, len(batch), size)]
        try:
            if self.is_async:
                results = await asyncio.gather(*(self._call_async(chunk) for chunk in chunks))
            else:
                results = []
                for chunk in chunks:
                    results.append(await self._call_sync(chunk))
            outputs = [out for chunk_outputs in results for out in chunk_outputs]
        except BaseException as exc:  # noqa: BLE001 - handed to the episodes that wait
            self.busy = False
            for _, future in batch:
                if not future.done():
                    self.run.running += 1
                    future.set_exception(exc)
            return
        self.busy = False
        for (_, future), output in zip(batch, outputs, strict=True):
            if not future.done():
                self.run.running += 1
                future.set_result(output)

    async def _call_sync(self, chunk: list[tuple[ActRequest, Any]]) -> list[AgentOutput]:
        requests = [request for request, _ in chunk]
        self.calls += 1
        self.requests += len(requests)
        if self.run.threaded:
            outputs = await asyncio.to_thread(self.agent.act_batch, requests)
        else:
            outputs = self.agent.act_batch(requests)
        return self._check(outputs, len(requests))

    async def _call_async(self, chunk: list[tuple[ActRequest, Any]]) -> list[AgentOutput]:
        requests = [request for request, _ in chunk]
        self.calls += 1
        self.requests += len(requests)
        return self._check(await self.agent.act_batch_async(requests), len(requests))

    def _check(self, outputs: Sequence[AgentOutput], expected: int) -> list[AgentOutput]:
        outputs = list(outputs)
        if len(outputs) != expected:
            raise RunnerError(f"agent {self.agent!r} returned {len(outputs)} outputs for {expected} requests")
        return outputs


@dataclass
class _RunState:
    """Shared state of one run's coroutines (lives on one event loop)."""

    max_batch_size: int | None
    threaded: bool
    running: int = 0
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    dispatchers: list[_Dispatcher] = field(default_factory=list)

    def quiesce(self) -> None:
        """Called whenever an episode coroutine stops computing; at zero, flush everyone."""
        self.running -= 1
        if self.running == 0:
            for dispatcher in self.dispatchers:
                dispatcher.flush()


# ---------------------------------------------------------------------------- the runner
class Runner:
    """Plays ``num_episodes`` episodes; see the module docstring and :func:`run_episodes`."""

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
        env_label: str | None = None,
    ) -> None:
        if num_episodes < 0:
            raise ValueError(f"num_episodes must be >= 0, got {num_episodes}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1 or None, got {max_batch_size}")
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
        self.env_label = env_label
        #: Filled during the run: per agent object, the agent ids it plays and how many calls
        #: and requests it served (``requests / calls`` is the mean batch size).
        self.stats: list[dict[str, Any]] = []
        self.resumed_episodes = 0

    # ------------------------------------------------------------------ entry points
    def run(self) -> list[EpisodeResult]:
        """Play the run and return every episode's result (resumed ones included), by index.
        From inside an event loop (a notebook) it plays on a private loop in a thread."""
        return run_blocking(self.arun())

    async def arun(self) -> list[EpisodeResult]:
        """The coroutine form of :meth:`run`."""
        first_env = self._make_env()
        env_id = self.env_label or self._env_id(first_env)
        agents = self._agent_map(first_env)

        names = {agent_id: getattr(agent, "name", type(agent).__name__) for agent_id, agent in agents.items()}
        done: dict[int, EpisodeResult] = {}
        if self.out_path is not None:
            if self.resume:
                for result in load_episodes(self.out_path, repair=True):
                    self._check_resumed(result, env_id, names)
                    if result.index < self.num_episodes:
                        done.setdefault(result.index, result)
            elif self.out_path.exists() and self.out_path.stat().st_size > 0:
                raise RunnerError(
                    f"{self.out_path} already holds episodes; pass resume=True to continue that "
                    f"run, or choose another path"
                )
        self.resumed_episodes = len(done)
        todo = deque(i for i in range(self.num_episodes) if i not in done)
        writer = _EpisodeWriter(self.out_path) if self.out_path is not None else None

        unique_agents = list({id(a): a for a in agents.values()}.values())
        threaded = any(_is_async_native(a) for a in unique_agents)
        state = _RunState(self.max_batch_size, threaded)
        dispatch_of: dict[int, _Dispatcher] = {}
        for agent in unique_agents:
            dispatcher = _Dispatcher(agent, state)
            dispatch_of[id(agent)] = dispatcher
            state.dispatchers.append(dispatcher)
        by_agent_id = {agent_id: dispatch_of[id(agent)] for agent_id, agent in agents.items()}

        workers_count = min(self.concurrency, len(todo))
        envs = [first_env] + [self._spawn(first_env) for _ in range(max(0, workers_count - 1))]
        new_results: dict[int, EpisodeResult] = {}

        async def worker(env: Any) -> None:
            try:
                while todo:
                    index = todo.popleft()
                    result = await self._play(env, index, env_id, names, by_agent_id, state)
                    new_results[index] = result
                    if writer is not None:
                        writer.write(result)
                    if self.on_episode is not None:
                        self.on_episode(result)
            finally:
                state.quiesce()

        state.running = workers_count
        tasks = [asyncio.create_task(worker(env)) for env in envs[:workers_count]]
        try:
            if tasks:
                _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.gather(*pending, return_exceptions=True)
                # Retrieve every failure (so none is reported as "never retrieved"), raise the first.
                errors = [t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception()]
                if errors:
                    raise errors[0]
        finally:
            if writer is not None:
                writer.close()
            for env in envs:
                env.close()
            for agent in unique_agents:
                aclose = getattr(agent, "aclose", None)
                if aclose is not None:
                    await aclose()
            self.stats = [
                {
                    "agent": getattr(d.agent, "name", type(d.agent).__name__),
                    "plays": [a for a, agent in agents.items() if agent is d.agent],
                    "calls": d.calls,
                    "requests": d.requests,
                }
                for d in state.dispatchers
            ]
        results = {**done, **new_results}
        return [results[i] for i in sorted(results)]

    # ------------------------------------------------------------------ one episode
    async def _play(
        self,
        env: Any,
        index: int,
        env_id: str,
        names: dict[str, str],
        dispatchers: dict[str, _Dispatcher],
        state: _RunState,
    ) -> EpisodeResult:
        started = time.perf_counter()
        seed = self.seed + index
        env.reset(seed=seed, options=dict(self.reset_options) or None)
        steps: list[dict[str, Any]] = []
        while env.agents:
            agent_id = env.agent_selection
            if env.terminations[agent_id] or env.truncations[agent_id]:
                env.step(None)  # PettingZoo's dead step
                continue
            request = ActRequest(env.observe(agent_id), agent_id, env)
            future = dispatchers[agent_id].submit(request)
            state.quiesce()
            output = await future  # the dispatcher counted us as running again
            text, error = output.text, output.error
            if not isinstance(text, str):
                error = (error + "; " if error else "") + f"agent returned {type(text).__name__}, not text"
                text = ""
            before = len(env.records)
            env.step(text)
            steps.append(
                self._step_entry(agent_id, output, error, before if len(env.records) > before else None)
            )
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

    def _step_entry(
        self, agent_id: str, output: AgentOutput, error: str | None, record_index: int | None
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "agent": agent_id,
            "record_index": record_index,
            "prompt_tokens": int(output.prompt_tokens or 0),
            "completion_tokens": int(output.completion_tokens or 0),
            "error": error,
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

    def _check_resumed(self, result: EpisodeResult, env_id: str, names: Mapping[str, str]) -> None:
        if result.env_id != env_id or result.seed != self.seed + result.index:
            raise RunnerError(
                f"{self.out_path} holds episode {result.index} of another run "
                f"(env {result.env_id!r}, seed {result.seed}; this run: env {env_id!r}, "
                f"seed {self.seed + result.index}); refusing to mix them"
            )
        if dict(result.agents) != dict(names):
            raise RunnerError(
                f"{self.out_path} holds episode {result.index} played by other agents "
                f"({result.agents}; this run: {dict(names)}); refusing to mix them"
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
            ``store_token_ids``, ``on_episode`` (callback per finished episode), ``env_label``.
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


async def arun_episodes(*args: Any, **kwargs: Any) -> list[EpisodeResult]:
    """:func:`run_episodes` as a coroutine (same arguments)."""
    runner = Runner(*args, **kwargs)
    return await runner.arun()
