"""Play many episodes of an environment concurrently, batching the agents' calls.

The runner keeps ``concurrency`` environment instances in play. Each instance is driven by its
own coroutine; when it needs an action it files an :class:`~llm_envs.agents.ActRequest` with the
agent object that plays the acting agent id, and waits. How the request is served depends on the
agent:

* an agent that serves each request on its own (it overrides
  :meth:`~llm_envs.agents.Agent.act_async`, as the HTTP agent does) gets the request at once,
  and the episode goes on the moment its own reply arrives: no episode waits for another's
  reply (the agent bounds how many requests it has in flight);
* any other agent (a local model, the reference agent) is a batching agent: whenever every
  instance is waiting (nothing left to compute until an agent answers), it receives *all* its
  pending requests at once, in one :meth:`~llm_envs.agents.Agent.act_batch` call (at most
  ``max_batch_size`` per call) and is sent nothing more until that call returns; an agent that
  implements only ``act_batch_async`` gets its batches even while earlier ones are in flight.

Two agent ids played by the same object (one model for every role) share its batches.

Infrastructure failures are never results
=========================================

When an agent produces no action (it raises, or returns an output with ``error`` set; see
:mod:`llm_envs.agents.base`), or a step cannot be judged because the infrastructure the
environment relies on failed (``env.step`` raises an
:class:`~llm_envs.core.errors.InfrastructureError`: a :class:`~llm_envs.core.SandboxFailure`
when the sandbox failed under an agent's program, an :class:`~llm_envs.agents.AgentError` of an
agent the environment calls itself), the episode that needed it stops and is recorded as an
:class:`EpisodeFailure` (its ``reason`` is the failure's kind, e.g. ``sandbox``); it is **not**
written to the results file, so a resumed run plays it again. The other episodes go on, except
that

* a *configuration error* (HTTP 4xx, e.g. a wrong model name) on an agent none of whose calls has
  succeeded yet stops the whole run at once: every further call would fail the same way;
* after ``max_consecutive_failures`` failed calls in a row of one agent (a server that went away),
  or as many episodes in a row stopped by failures inside ``env.step`` (a sandbox that is down),
  no new episode is started; those in play finish or fail on their own.

A run with any episode missing ends with :class:`IncompleteRunError`, which names how many
episodes are missing and why and carries the finished ones.

Results file
============

Every finished episode is appended to a JSONL file at once (one JSON object per line, flushed
and fsync'ed), so an interrupted run loses only the episodes in play. Each line carries its
``format_version`` and a ``checksum`` of its own bytes, so that :func:`load_episodes` detects a
line garbled on disk or a duplicate (the same episode index twice) and reports or repairs it;
files written before checksums existed still load. ``resume=True`` repairs the file (a torn last
line is cut, bad lines move to ``<file>.rejected``) and plays only the missing episodes. Episode
``i`` is always played from seed ``seed + i`` by a freshly reset instance, so with deterministic
agents (including :class:`~llm_envs.agents.RandomAgent` with ``per_decision_seed=True``) a
resumed run gives exactly the results of an uninterrupted one, whatever the concurrency.

>>> from llm_envs.agents import ReferenceAgent
>>> results = run_episodes("llm/Signalling-v0", ReferenceAgent(), num_episodes=8, concurrency=4)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import time
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llm_envs.agents.base import (
    ActRequest,
    Agent,
    AgentError,
    AgentOutput,
    output_failure,
    run_blocking,
    serves_each_request,
)
from llm_envs.core.errors import InfrastructureError

__all__ = [
    "EPISODES_FORMAT_VERSION",
    "EpisodeFailure",
    "EpisodeFileError",
    "EpisodeResult",
    "EpisodeRunner",
    "EpisodeWriter",
    "IncompleteRunError",
    "RunPlan",
    "RunProgress",
    "Runner",
    "RunnerError",
    "arun_episodes",
    "load_episodes",
    "local_runner",
    "run_episodes",
]

#: Version of an ``episodes.jsonl`` line (written into each line as ``format_version``).
#: 1: no version field, no checksum; 2: ``format_version`` and ``checksum``.
EPISODES_FORMAT_VERSION = 2
#: Failed calls in a row of one agent after which no new episode is started.
DEFAULT_MAX_CONSECUTIVE_FAILURES = 5


class RunnerError(RuntimeError):
    """The run cannot go on (a bad agent mapping, a results file from another run, ...)."""


class EpisodeFileError(RunnerError):
    """A results file with corrupt or duplicate lines (see :func:`load_episodes`)."""


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
            (always ``None`` since format 2: a failed call is never played) and ``meta`` of the
            :class:`~llm_envs.agents.AgentOutput` (plus ``token_ids`` and ``logprobs`` when the
            run stores them).
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
            step["meta"] = {k: v for k, v in meta.items() if "latency" not in k and k not in ("cached", "attempts")}
        return data


@dataclass
class EpisodeFailure:
    """Why an episode of the run is missing.

    Attributes:
        index, seed: The episode.
        reason: The failure kind (:data:`llm_envs.agents.base.ERROR_KINDS`, or
            :data:`llm_envs.core.errors.SANDBOX_FAILURE_KINDS` when the sandbox failed under an
            agent's program), or ``"not_started"`` (the run stopped before it began),
            ``"stopped"`` (it was in play when the run was stopped) or ``"worker_lost"`` (the
            process playing it died, on a cluster, more often than the runner retries).
        message: What happened (the server's message, the exception).
        agent: The agent id whose call failed, if one did (``None`` for a failure inside
            ``env.step``, such as a sandbox failure).
        decisions: Decisions already played in the episode when it stopped.
    """

    index: int
    seed: int
    reason: str
    message: str
    agent: str | None = None
    decisions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class IncompleteRunError(RunnerError):
    """Some episodes of the run could not be played because of infrastructure failures.

    None of them was written as finished; ``resume=True`` plays them. Attributes: ``results``
    (every finished episode, by index), ``failures`` (one :class:`EpisodeFailure` per missing
    episode, by index), ``num_episodes``, ``stop_reason`` (why no more episodes were started,
    if the run stopped early), ``configuration_error`` (the :class:`AgentError` that
    aborted the run, if it was one) and ``agent_name`` (the agent that raised it).
    """

    def __init__(
        self,
        results: list[EpisodeResult],
        failures: list[EpisodeFailure],
        num_episodes: int,
        *,
        stop_reason: str | None = None,
        configuration_error: AgentError | None = None,
        agent_name: str | None = None,
    ) -> None:
        self.results = results
        self.failures = failures
        self.num_episodes = num_episodes
        self.stop_reason = stop_reason
        self.configuration_error = configuration_error
        self.agent_name = agent_name
        super().__init__(self._message(agent_name))

    @property
    def missing(self) -> list[int]:
        return [f.index for f in self.failures]

    def reasons(self) -> dict[str, int]:
        """``"reason: message"`` → number of episodes, most frequent first."""
        return dict(Counter(f"{f.reason}: {f.message}" for f in self.failures).most_common())

    def _message(self, agent_name: str | None) -> str:
        if self.configuration_error is not None:
            return (
                f"{agent_name or 'an agent'} failed on its first call with a configuration error, "
                f"so the run stopped: {self.configuration_error}. Check the model name, the URL "
                f"and the API key. {len(self.results)} of {self.num_episodes} episodes are finished; "
                "no other episode was written."
            )
        counts = Counter(f.reason for f in self.failures)
        hit = sum(n for reason, n in counts.items() if reason not in ("not_started", "stopped"))
        parts = []
        if hit:
            first = next(f for f in self.failures if f.reason not in ("not_started", "stopped"))
            parts.append(f"{hit} hit an infrastructure failure (e.g. {first.reason}: {first.message})")
        if counts.get("stopped"):
            parts.append(f"{counts['stopped']} were in play when the run stopped")
        if counts.get("not_started"):
            parts.append(f"{counts['not_started']} were not started")
        why = f"; the run stopped starting episodes after {self.stop_reason}" if self.stop_reason else ""
        return (
            f"{len(self.failures)} of {self.num_episodes} episodes are incomplete: "
            + ", ".join(parts)
            + why
            + ". None of them was written as finished; resume the run (--resume) to play them."
        )


@dataclass
class RunProgress:
    """Live counters of a run, updated as each call and each episode ends (for progress bars).

    Attributes:
        total: Episodes of the run.
        resumed: Episodes already finished by an earlier run.
        finished: Episodes finished by this run.
        failed: Episodes stopped by an infrastructure failure.
        in_flight: Requests made and not yet answered.
        calls, failed_calls: Agent requests answered, and those that failed.
        prompt_tokens, completion_tokens: Tokens reported by the agents.
        started: ``time.perf_counter()`` at the start.
        stop_reason: Why no new episodes are started, once that happens.
    """

    total: int = 0
    resumed: int = 0
    finished: int = 0
    failed: int = 0
    in_flight: int = 0
    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    started: float = field(default_factory=time.perf_counter)
    stop_reason: str | None = None

    @property
    def done(self) -> int:
        return self.resumed + self.finished

    def completion_tokens_per_s(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.completion_tokens / elapsed if elapsed > 0 else 0.0


# ---------------------------------------------------------------------------- JSONL files
_CHECKSUM_TAIL = re.compile(rb', "checksum": "sha256:([0-9a-f]{16})"\}\s*$')


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def encode_episode_line(result: EpisodeResult) -> str:
    """One results-file line (format 2): the episode, its ``format_version`` and a checksum of
    the line's own bytes (SHA-256 of the line without the checksum field), newline-terminated."""
    body = json.dumps({**result.to_dict(), "format_version": EPISODES_FORMAT_VERSION}, ensure_ascii=False)
    return body[:-1] + f', "checksum": "sha256:{_digest(body.encode("utf-8"))}"}}\n'


@dataclass
class EpisodeFileProblem:
    """A line of a results file that cannot be used: ``kind`` is ``"corrupt"`` (not JSON, not
    an episode, or its checksum does not match its bytes), ``"duplicate"`` (the same episode
    line again) or ``"conflict"`` (another result for an episode index already seen), or
    ``"torn"`` (an unterminated last line, what a crash during a write leaves)."""

    line: int
    kind: str
    detail: str
    index: int | None = None

    def __str__(self) -> str:
        return f"line {self.line}: {self.kind}: {self.detail}"


def _parse_line(line: bytes) -> EpisodeResult:
    """The episode of one line, or ``ValueError`` saying what is wrong with it."""
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an episode object")
    if "checksum" in data:
        match = _CHECKSUM_TAIL.search(line)
        if match is None:
            raise ValueError("the checksum field is not where the writer puts it")
        if _digest(line[: match.start()] + b"}") != match.group(1).decode():
            raise ValueError("checksum mismatch: the line was changed after it was written")
    try:
        episode = EpisodeResult.from_dict(data)
    except TypeError as exc:
        raise ValueError(f"not an episode record ({exc})") from None
    if not isinstance(episode.index, int) or episode.index < 0:
        raise ValueError(f"bad episode index {episode.index!r}")
    return episode


def scan_episode_file(
    path: str | os.PathLike[str],
) -> tuple[list[tuple[bytes, EpisodeResult]], list[tuple[bytes, EpisodeFileProblem]]]:
    """Read a results file: the good lines (raw bytes and episode, first copy of each index)
    and the problems (raw bytes and what is wrong), in file order."""
    raw = Path(path).read_bytes()
    good: list[tuple[bytes, EpisodeResult]] = []
    bad: list[tuple[bytes, EpisodeFileProblem]] = []
    seen: dict[int, bytes] = {}
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if number == len(lines):  # the text after the final newline: empty, or a torn write
            if line.strip():
                bad.append((line, EpisodeFileProblem(number, "torn", "unterminated last line (an interrupted write)")))
            break
        if not line.strip():
            continue
        try:
            episode = _parse_line(line)
        except ValueError as exc:
            bad.append((line, EpisodeFileProblem(number, "corrupt", str(exc))))
            continue
        if episode.index in seen:
            kind = "duplicate" if seen[episode.index] == line else "conflict"
            detail = (
                f"episode {episode.index} again"
                if kind == "duplicate"
                else f"a different result for episode {episode.index} (the first one is kept)"
            )
            bad.append((line, EpisodeFileProblem(number, kind, detail, episode.index)))
            continue
        seen[episode.index] = line
        good.append((line, episode))
    return good, bad


def load_episodes(
    path: str | os.PathLike[str],
    *,
    repair: bool = False,
    problems: list[EpisodeFileProblem] | None = None,
) -> list[EpisodeResult]:
    """Read the episodes of a JSONL results file (in file order; a missing file has none).

    Every line is checked: it must be an episode object whose checksum (format 2) matches its
    bytes, and each episode index may appear once. A torn last line (no newline: a crash during
    a write) is always skipped. Any other bad line:

    * by default raises :class:`EpisodeFileError` naming the lines;
    * with ``problems`` given (a list), is skipped and appended to it as an
      :class:`EpisodeFileProblem` (torn lines too);
    * with ``repair=True``, is skipped and the file is rewritten without it: the bad lines are
      appended to ``<file>.rejected`` (so nothing is lost), the first copy of a duplicated
      episode is kept. A resumed run then plays the episodes whose lines were rejected.
    """
    path = Path(path)
    if not path.exists():
        return []
    good, bad = scan_episode_file(path)
    if problems is not None:
        problems.extend(problem for _, problem in bad)
    serious = [problem for _, problem in bad if problem.kind != "torn"]
    if repair and bad:
        _rewrite_episode_file(path, [line for line, _ in good], bad)
    elif serious and problems is None:
        listed = "; ".join(str(p) for p in serious[:5]) + (f"; and {len(serious) - 5} more" if len(serious) > 5 else "")
        raise EpisodeFileError(
            f"{path} has {len(serious)} bad line(s): {listed}. Resuming the run (--resume, or "
            f"load_episodes(..., repair=True)) moves them to {path.name}.rejected and plays those "
            "episodes again."
        )
    return [episode for _, episode in good]


def _rewrite_episode_file(path: Path, keep: list[bytes], rejected: list[tuple[bytes, EpisodeFileProblem]]) -> None:
    serious = [(line, problem) for line, problem in rejected if problem.kind != "torn"]
    if serious:
        with open(path.with_name(path.name + ".rejected"), "ab") as f:
            for line, problem in serious:
                f.write(f"# {problem}\n".encode() + line + b"\n")
            f.flush()
            os.fsync(f.fileno())
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(b"".join(line + b"\n" for line in keep))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class EpisodeWriter:
    """Appends one line per episode to a results file (:func:`encode_episode_line`), durably
    (flush + fsync) before :meth:`write` returns. Every episode runner writes through it."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")

    def write(self, result: EpisodeResult) -> None:
        self._file.write(encode_episode_line(result))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


# ---------------------------------------------------------------------------- dispatching
def _is_async_native(agent: Agent) -> bool:
    """True if ``agent`` implements its own ``act_batch_async`` (not the thread fallback)."""
    return type(agent).act_batch_async is not Agent.act_batch_async


class _EpisodeStopped(Exception):
    """An episode cannot go on: an agent produced no action, or ``env.step`` could not judge
    one (wraps the :class:`AgentError` or other :class:`InfrastructureError`)."""

    def __init__(
        self, error: InfrastructureError, agent: str | None, decisions: int, *, step_failure: bool = False
    ) -> None:
        super().__init__(str(error))
        self.error, self.agent, self.decisions = error, agent, decisions
        #: The failure came from inside ``env.step`` (not from the acting agent's own call).
        self.step_failure = step_failure


class _Dispatcher:
    """The pending requests of one agent object and the calls that serve them."""

    def __init__(self, agent: Agent, run: _RunState) -> None:
        self.agent = agent
        self.name = getattr(agent, "name", type(agent).__name__)
        self.run = run
        self.per_request = serves_each_request(agent)
        self.is_async = _is_async_native(agent)
        self.pending: list[tuple[ActRequest, asyncio.Future[AgentOutput]]] = []
        self.busy = False
        self.calls = 0
        self.requests = 0
        self.successes = 0
        self.failures = 0
        self.consecutive_failures = 0

    def submit(self, request: ActRequest) -> asyncio.Future[AgentOutput]:
        future = asyncio.get_running_loop().create_future()
        self.run.progress.in_flight += 1
        if self.per_request:
            self.calls += 1
            self.requests += 1
            self.run.spawn(self._serve_one(request, future))
        else:
            self.pending.append((request, future))
        return future

    def flush(self) -> None:
        """Send every pending request, unless a synchronous call is still running."""
        if not self.pending or (self.busy and not self.is_async) or self.run.closing:
            return
        batch, self.pending = self.pending, []
        self.busy = True
        self.run.spawn(self._serve(batch))

    # ------------------------------------------------------------------ serving
    async def _serve_one(self, request: ActRequest, future: asyncio.Future[AgentOutput]) -> None:
        try:
            outcome: AgentOutput | AgentError = await self.agent.act_async(request)
        except AgentError as exc:
            outcome = exc
        except Exception as exc:  # noqa: BLE001 - any exception of an agent is an agent failure
            outcome = AgentError(f"{type(exc).__name__}: {exc}", kind="agent_error")
        self._resolve(future, outcome)

    async def _serve(self, batch: list[tuple[ActRequest, asyncio.Future[AgentOutput]]]) -> None:
        size = self.run.max_batch_size or len(batch)
        chunks = [batch[i : i + size] for i in range(0, len(batch), size)]
        results: list[list[AgentOutput] | BaseException]
        if self.is_async:
            results = list(await asyncio.gather(*(self._call_async(c) for c in chunks), return_exceptions=True))
        else:
            results = []
            for chunk in chunks:
                try:
                    results.append(await self._call_sync(chunk))
                except asyncio.CancelledError:
                    raise
                except BaseException as exc:  # noqa: BLE001 - sorted out below
                    results.append(exc)
        self.busy = False
        for result in results:
            # A broken protocol (a bug), closed input, Ctrl-C inside the agent: stop the run.
            if isinstance(result, (RunnerError, EOFError)) or (
                isinstance(result, BaseException) and not isinstance(result, Exception)
            ):
                self._raise_in_episodes(batch, result)
                return
        for chunk, result in zip(chunks, results, strict=True):
            if isinstance(result, AgentError):  # the agent failed: every request of the call did
                outputs: list[AgentOutput | AgentError] = [result] * len(chunk)
            elif isinstance(result, BaseException):  # any other exception of the agent: the same
                outputs = [AgentError(f"{type(result).__name__}: {result}", kind="agent_error")] * len(chunk)
            else:
                outputs = list(result)
            for (_, future), output in zip(chunk, outputs, strict=True):
                self._resolve(future, output)

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

    # ------------------------------------------------------------------ answers
    def _resolve(self, future: asyncio.Future[AgentOutput], outcome: AgentOutput | AgentError) -> None:
        progress = self.run.progress
        progress.in_flight -= 1
        progress.calls += 1
        failure = outcome if isinstance(outcome, AgentError) else output_failure(outcome)
        if failure is None:
            assert isinstance(outcome, AgentOutput)
            self.successes += 1
            self.consecutive_failures = 0
            progress.prompt_tokens += int(outcome.prompt_tokens or 0)
            progress.completion_tokens += int(outcome.completion_tokens or 0)
        else:
            self.failures += 1
            self.consecutive_failures += 1
            progress.failed_calls += 1
            self.run.call_failed(self, failure)
        if not future.done():
            self.run.running += 1
            if failure is None:
                future.set_result(outcome)  # type: ignore[arg-type]
            else:
                future.set_exception(failure)

    def _raise_in_episodes(self, batch: list[tuple[ActRequest, asyncio.Future[AgentOutput]]], exc: BaseException) -> None:
        for _, future in batch:
            self.run.progress.in_flight -= 1
            if not future.done():
                self.run.running += 1
                future.set_exception(exc)


@dataclass
class _RunState:
    """Shared state of one run's coroutines (lives on one event loop)."""

    max_batch_size: int | None
    threaded: bool
    max_consecutive_failures: int | None
    progress: RunProgress
    running: int = 0
    closing: bool = False
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    dispatchers: list[_Dispatcher] = field(default_factory=list)
    abort_error: AgentError | None = None
    abort_agent: str | None = None
    abort_event: asyncio.Event = field(default_factory=asyncio.Event)
    #: Episodes stopped in a row by a failure inside ``env.step`` (reset by a finished episode).
    consecutive_step_failures: int = 0

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def quiesce(self) -> None:
        """Called whenever an episode coroutine stops computing; at zero, flush everyone."""
        self.running -= 1
        if self.running == 0:
            for dispatcher in self.dispatchers:
                dispatcher.flush()

    @property
    def stopping(self) -> bool:
        return self.abort_error is not None or self.progress.stop_reason is not None

    def call_failed(self, dispatcher: _Dispatcher, failure: AgentError) -> None:
        """Stop the run on a configuration error before any success; stop starting episodes
        after too many failures in a row."""
        if failure.is_configuration_error and dispatcher.successes == 0 and self.abort_error is None:
            self.abort_error, self.abort_agent = failure, dispatcher.name
            self.abort_event.set()
        limit = self.max_consecutive_failures
        if limit and dispatcher.consecutive_failures >= limit and self.progress.stop_reason is None:
            self.progress.stop_reason = f"{dispatcher.consecutive_failures} failed calls in a row of {dispatcher.name}"

    def episode_ended(self, step_failure: InfrastructureError | None) -> None:
        """Stop starting episodes after too many in a row stopped inside ``env.step`` (the
        sandbox is down: every episode that runs a program would fail the same way)."""
        if step_failure is None:
            self.consecutive_step_failures = 0
            return
        self.consecutive_step_failures += 1
        limit = self.max_consecutive_failures
        if limit and self.consecutive_step_failures >= limit and self.progress.stop_reason is None:
            self.progress.stop_reason = (
                f"{self.consecutive_step_failures} episodes in a row stopped by "
                f"{step_failure.kind} failures (e.g. {step_failure})"
            )


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
        env_id = self.env_label or self._env_id(first_env)
        agents = self._agent_map(first_env)

        names = {agent_id: getattr(agent, "name", type(agent).__name__) for agent_id, agent in agents.items()}
        done: dict[int, EpisodeResult] = {}
        if self.out_path is not None:
            if self.resume:
                self.file_problems = []
                for result in load_episodes(self.out_path, repair=True, problems=self.file_problems):
                    self._check_resumed(result, env_id, names)
                    if result.index < self.num_episodes:
                        done.setdefault(result.index, result)
            elif self.out_path.exists() and self.out_path.stat().st_size > 0:
                raise RunnerError(
                    f"{self.out_path} already holds episodes; pass resume=True to continue that "
                    f"run, or choose another path"
                )
        self.resumed_episodes = len(done)
        self.progress = progress = RunProgress(total=self.num_episodes, resumed=len(done))
        todo = deque(i for i in range(self.num_episodes) if i not in done)
        writer = EpisodeWriter(self.out_path) if self.out_path is not None else None

        unique_agents = list({id(a): a for a in agents.values()}.values())
        threaded = any(_is_async_native(a) or serves_each_request(a) for a in unique_agents)
        state = _RunState(self.max_batch_size, threaded, self.max_consecutive_failures, progress)
        dispatch_of: dict[int, _Dispatcher] = {}
        for agent in unique_agents:
            dispatcher = _Dispatcher(agent, state)
            dispatch_of[id(agent)] = dispatcher
            state.dispatchers.append(dispatcher)
        by_agent_id = {agent_id: dispatch_of[id(agent)] for agent_id, agent in agents.items()}

        workers_count = min(self.concurrency, len(todo))
        envs = [first_env] + [self._spawn(first_env) for _ in range(max(0, workers_count - 1))]
        new_results: dict[int, EpisodeResult] = {}
        failures: dict[int, EpisodeFailure] = {}
        in_play: set[int] = set()

        async def worker(env: Any) -> None:
            try:
                while todo and not state.stopping:
                    index = todo.popleft()
                    in_play.add(index)
                    try:
                        result = await self._play(env, index, env_id, names, by_agent_id, state)
                    except _EpisodeStopped as stopped:
                        state.episode_ended(stopped.error if stopped.step_failure else None)
                        failure = EpisodeFailure(
                            index,
                            self.seed + index,
                            stopped.error.kind,
                            str(stopped.error),
                            stopped.agent,
                            stopped.decisions,
                        )
                        failures[index] = failure
                        progress.failed += 1
                        if self.on_failure is not None:
                            self.on_failure(failure)
                        continue
                    finally:
                        in_play.discard(index)
                    state.episode_ended(None)
                    new_results[index] = result
                    if writer is not None:
                        writer.write(result)
                    progress.finished += 1
                    if self.on_episode is not None:
                        self.on_episode(result)
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
                    "agent": d.name,
                    "plays": [a for a, agent in agents.items() if agent is d.agent],
                    "calls": d.calls,
                    "requests": d.requests,
                    "failed_requests": d.failures,
                }
                for d in state.dispatchers
            ]
        # Retrieve every failure (so none is reported as "never retrieved"), raise the first.
        errors = [t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception()]
        if errors:
            raise errors[0]  # type: ignore[misc]
        results = {**done, **new_results}
        ordered = [results[i] for i in sorted(results)]
        stop_message = (
            f"the run stopped: {state.abort_agent} failed with a configuration error"
            if state.abort_error is not None
            else progress.stop_reason
        )
        for index in range(self.num_episodes):
            if index in results or index in failures:
                continue
            reason = "stopped" if index in stopped_in_play else "not_started"
            failures[index] = EpisodeFailure(index, self.seed + index, reason, stop_message or "the run stopped")
        self.failures = [failures[i] for i in sorted(failures)]
        if self.failures:
            raise IncompleteRunError(
                ordered,
                self.failures,
                self.num_episodes,
                stop_reason=progress.stop_reason,
                configuration_error=state.abort_error,
                agent_name=state.abort_agent,
            )
        return ordered

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
        try:
            env.reset(seed=seed, options=dict(self.reset_options) or None)
        except InfrastructureError as exc:  # an environment on a server that cannot be reached
            raise _EpisodeStopped(exc, None, 0, step_failure=True) from exc
        steps: list[dict[str, Any]] = []
        while env.agents:
            agent_id = env.agent_selection
            if env.terminations[agent_id] or env.truncations[agent_id]:
                try:
                    env.step(None)  # PettingZoo's dead step
                except InfrastructureError as exc:  # a remote environment's server went away
                    raise _EpisodeStopped(exc, None, len(steps), step_failure=True) from exc
                continue
            request = ActRequest(env.observe(agent_id), agent_id, env, episode_seed=seed, decision=len(steps))
            future = dispatchers[agent_id].submit(request)
            state.quiesce()
            try:
                output = await future  # the dispatcher counted us as running again
            except AgentError as exc:
                raise _EpisodeStopped(exc, agent_id, len(steps)) from exc
            before = len(env.records)
            try:
                env.step(output.text)
            except InfrastructureError as exc:
                # The step could not be judged: the sandbox failed under the agent's program
                # (SandboxFailure), or an agent the environment calls itself (an LLM judge)
                # failed. Never a result: the episode is recorded as incomplete.
                raise _EpisodeStopped(exc, None, len(steps), step_failure=True) from exc
            steps.append(self._step_entry(agent_id, output, before if len(env.records) > before else None))
        try:
            return self._result(env, index, seed, env_id, names, steps, started)
        except InfrastructureError as exc:  # a remote environment's records could not be read
            raise _EpisodeStopped(exc, None, len(steps), step_failure=True) from exc

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
