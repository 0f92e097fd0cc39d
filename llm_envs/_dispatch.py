"""How the runner (:mod:`llm_envs.runner`) calls its agents, and the live counters of a run.

One :class:`Dispatcher` per agent object collects the requests of every episode that waits for
that agent, and serves them: a per-request agent (one that overrides ``act_async``) at once, a
batching agent in one ``act_batch`` call whenever every episode is waiting (:meth:`RunState.quiesce`).
:class:`RunState` also decides when the run stops starting episodes (failures in a row) or
aborts (a configuration error before any success). The semantics are in docs/evaluation.md
("Throughput", "Infrastructure failures are not model results"). Private: the public names are
in :mod:`llm_envs.runner`.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_envs.agents.base import (
    CONTEXT_EXCEEDED,
    ActRequest,
    Agent,
    AgentError,
    AgentOutput,
    output_failure,
    serves_each_request,
)
from llm_envs.core.errors import InfrastructureError
from llm_envs.episodes import RunnerError


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
        context_length: Answers that were a refusal of a prompt too long for the model's
            context (``finish_reason`` ``"context_length"``): played as empty answers.
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
    context_length: int = 0
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


def is_async_native(agent: Agent) -> bool:
    """True if ``agent`` implements its own ``act_batch_async`` (not the thread fallback)."""
    return type(agent).act_batch_async is not Agent.act_batch_async


# Agents that have answered a call, in any run of this process, with the environments in which
# a prompt of theirs fit (an answer that was not a context-length refusal). The same agent object
# plays every environment of a suite, each with a Runner of its own, and a server that answered
# once was configured right: a failure after that is an outage (before, each environment's first
# call after a server died counted as "the first call": a configuration error that stopped the
# suite, exit 2). Keyed by id with weak references, since agents need not be hashable.
_ANSWERED: dict[int, tuple[weakref.ref[Agent], set[str]]] = {}


def _remember_answer(agent: Agent, fitted_in: str | None) -> None:
    key = id(agent)
    entry = _ANSWERED.get(key)
    if entry is None or entry[0]() is not agent:
        try:
            entry = (weakref.ref(agent, lambda _ref: _ANSWERED.pop(key, None)), set())
        except TypeError:  # (not weakly referable: only this run's own answers count for it)
            return
        _ANSWERED[key] = entry
    if fitted_in is not None:
        entry[1].add(fitted_in)


def has_answered(agent: Agent, fitted_in: str | None = None) -> bool:
    """Whether ``agent`` has answered any call of any run in this process (with ``fitted_in``:
    answered a prompt of that environment with a real completion, not a context refusal)."""
    entry = _ANSWERED.get(id(agent))
    if entry is None or entry[0]() is not agent:
        return False
    return fitted_in is None or fitted_in in entry[1]


def is_context_refusal(output: AgentOutput) -> bool:
    """Whether an action is the empty answer to a prompt the model's context could not take."""
    meta = output.meta if isinstance(output.meta, Mapping) else {}
    return meta.get("finish_reason") == CONTEXT_EXCEEDED


class EpisodeStopped(Exception):
    """An episode cannot go on: an agent produced no action, or ``env.step`` could not judge
    one (wraps the :class:`AgentError` or other :class:`InfrastructureError`)."""

    def __init__(
        self, error: InfrastructureError, agent: str | None, decisions: int, *, step_failure: bool = False
    ) -> None:
        super().__init__(str(error))
        self.error, self.agent, self.decisions = error, agent, decisions
        #: The failure came from inside ``env.step`` (not from the acting agent's own call).
        self.step_failure = step_failure


class Dispatcher:
    """The pending requests of one agent object and the calls that serve them."""

    def __init__(self, agent: Agent, run: RunState) -> None:
        self.agent = agent
        self.name = getattr(agent, "name", type(agent).__name__)
        self.run = run
        self.per_request = serves_each_request(agent)
        self.is_async = is_async_native(agent)
        self.pending: list[tuple[ActRequest, asyncio.Future[AgentOutput]]] = []
        self.busy = False
        self.calls = 0
        self.requests = 0
        self.successes = 0
        #: Answers that were context-length refusals, and the answers that were not (a real
        #: completion: the only proof that this agent's prompts fit its model's context).
        self.context_refusals = 0
        self.completions = 0
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
        except SystemExit as exc:
            self._raise_in_episodes([(request, future)], self._exit_error(exc))
            return
        self._resolve(future, outcome)

    def _exit_error(self, exc: SystemExit) -> RunnerError:
        # A library calling sys.exit() inside the agent ended the run with status 0, no summary
        # and nothing written: it stops the run as a broken agent does.
        return RunnerError(f"agent {self.agent!r} called sys.exit({exc.code!r}) while acting; the run stops")

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
                except SystemExit as exc:
                    results.append(self._exit_error(exc))
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
        try:
            outputs = await self.agent.act_batch_async(requests)
        except SystemExit as exc:  # (gather() does not catch it: it left the event loop, exit 0)
            raise self._exit_error(exc) from None
        return self._check(outputs, len(requests))

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
        try:
            failure = outcome if isinstance(outcome, AgentError) else output_failure(outcome)
        except Exception as exc:  # noqa: BLE001  (an exception here would leave the episode waiting for ever)
            failure = AgentError(f"the agent's output could not be read: {type(exc).__name__}: {exc}", kind="bad_output")
        if failure is None:
            assert isinstance(outcome, AgentOutput)
            self.successes += 1
            refused = is_context_refusal(outcome)
            _remember_answer(self.agent, None if refused else self.run.label)
            if refused:
                self.context_refusals += 1
                progress.context_length += 1
            else:
                self.completions += 1
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
class RunState:
    """Shared state of one run's coroutines (lives on one event loop)."""

    max_batch_size: int | None
    threaded: bool
    max_consecutive_failures: int | None
    progress: RunProgress
    running: int = 0
    closing: bool = False
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    dispatchers: list[Dispatcher] = field(default_factory=list)
    abort_error: AgentError | None = None
    abort_agent: str | None = None
    abort_event: asyncio.Event = field(default_factory=asyncio.Event)
    #: Episodes stopped in a row by a failure inside ``env.step`` (reset by a finished episode).
    consecutive_step_failures: int = 0
    #: The environment played (what a real completion proves fits: see ``has_answered``).
    label: str | None = None

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

    def call_failed(self, dispatcher: Dispatcher, failure: AgentError) -> None:
        """Stop the run on a configuration error before the agent's first success (in this run
        or an earlier one of the process); stop starting episodes after too many failures in a
        row."""
        answered = dispatcher.successes > 0 or has_answered(dispatcher.agent)
        if failure.is_configuration_error and not answered and self.abort_error is None:
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
