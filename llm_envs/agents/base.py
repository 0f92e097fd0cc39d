"""The agent protocol: a batch of observations in, a batch of actions out.

Every kind of policy (a scripted reference agent, a person at the terminal, an HTTP client for
an OpenAI-compatible server, a local Hugging Face model, a vLLM engine) implements
:class:`Agent`. The runner gathers every pending request that belongs to the same agent object
across many environment instances and sends them in one :meth:`Agent.act_batch` call; an agent
that serves each request on its own (it overrides :meth:`Agent.act_async`, as the HTTP agent
does) gets each request as soon as it is made and answers each episode as soon as its own reply
is in, with no batch barrier.

Model outcome versus infrastructure failure
===========================================

An agent either produces an action (any text, however bad: that is the model's outcome, judged
by the environment) or fails to produce one (a connection error, a timeout, an HTTP error, an
engine out of memory, a bug in the agent): that is an *infrastructure failure*, never a model
outcome. An agent reports a failure in one of two ways, and the runner treats both alike:

* it raises an exception (:class:`AgentError` with a :attr:`~AgentError.kind`, or any other
  :class:`Exception`, which counts as kind ``"agent_error"``);
* or, in a batch, it returns an :class:`AgentOutput` whose :attr:`~AgentOutput.error` is set
  (the kind, if known, in ``meta["error_kind"]``).

An output with an error is never played: not as an empty action, not as anything. The episode
that needed it stops and is recorded as incomplete (never written as finished), so that a later
``--resume`` plays it again. An output whose ``text`` is not a ``str`` is an agent failure too.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import math
import numbers
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from llm_envs.core.errors import InfrastructureError

if TYPE_CHECKING:  # pragma: no cover
    from llm_envs.core.env import Observation, TextEnv

_T = TypeVar("_T")

#: The kinds of :class:`AgentError`, with what each means.
ERROR_KINDS: Mapping[str, str] = {
    "connection": "the connection failed or was reset (after retries)",
    "unreachable": "no server accepted a connection at the URL on any attempt (refused, unknown host)",
    "timeout": "the request ran past its deadline",
    "server_error": "the server answered HTTP 5xx (after retries)",
    "rate_limited": "the server answered HTTP 429 (after retries)",
    "client_error": "the server refused the request (HTTP 4xx: model name, URL, key, request size)",
    "malformed_response": "the server's reply could not be read as a chat completion",
    "agent_error": "the agent raised an exception or reported an error",
    "bad_output": "the agent returned something that is not an action text",
}


class AgentError(InfrastructureError):
    """An agent could not produce an action: an infrastructure failure, never a model outcome
    (:class:`~llm_envs.core.errors.InfrastructureError`, like a sandbox failure).

    Args:
        message: What went wrong, with the server's own message where there is one.
        kind: One of :data:`ERROR_KINDS`.
        status: The HTTP status, for HTTP failures.
        attempts: How many attempts were made.
    """

    def __init__(
        self, message: str, *, kind: str = "agent_error", status: int | None = None, attempts: int = 1
    ) -> None:
        super().__init__(message)
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown AgentError kind {kind!r}; expected one of {', '.join(ERROR_KINDS)}")
        self.kind = kind
        self.status = status
        self.attempts = attempts

    @property
    def is_configuration_error(self) -> bool:
        """A failure that retrying cannot fix and that, when it hits the very first calls,
        means the run is misconfigured (a wrong model name, URL or key): HTTP 4xx, or no server
        at the URL at all. Before any call succeeded the run stops with a user error (exit 2);
        after one did, the same failure is an outage, left for ``--resume``."""
        return self.kind in ("client_error", "unreachable")

    def __repr__(self) -> str:
        return f"AgentError({self.message!r}, kind={self.kind!r})"


@dataclass
class ActRequest:
    """One pending decision.

    Attributes:
        observation: What the agent sees (``{"instruction", "prompt"}``).
        agent: The environment's agent id that must act.
        env: The live environment. Only scripted agents (reference, random) read it; model
            agents must use the observation alone.
        episode_seed: The seed the episode was reset with (set by the runner). With
            ``decision`` it identifies the decision across reruns (the response cache's key).
        decision: The decision's position in its episode, from 0 (set by the runner).
    """

    observation: Observation
    agent: str
    env: TextEnv | None = None
    episode_seed: int | None = None
    decision: int | None = None


#: ``meta["finish_reason"]`` of an empty answer given because the prompt (with the room asked
#: for the completion) does not fit the model's context. It is the model's answer, not an
#: infrastructure failure: the same prompt never fits, so retrying or resuming cannot help, and
#: leaving such episodes out would bias a summary towards short episodes.
CONTEXT_EXCEEDED = "context_length"


@dataclass
class AgentOutput:
    """One action, with what a trainer or an evaluation needs to know about how it was made.

    Attributes:
        text: The action text sent to the environment.
        prompt_token_ids: The exact prompt tokens the model conditioned on (token-in).
        token_ids: The sampled completion tokens (token-out).
        logprobs: Log-probability of each sampled token under the sampling policy.
        prompt_tokens: Prompt token count (as reported by the model server, if any).
        completion_tokens: Completion token count.
        error: Set when no action was produced (an infrastructure failure; see the module
            docstring). The runner never plays such an output: the episode stops and is
            recorded as incomplete. ``meta["error_kind"]`` may name one of
            :data:`ERROR_KINDS`.
        meta: Anything else (latency, finish reason, attempts, ``cached``...).
    """

    text: str
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def output_failure(output: Any) -> AgentError | None:
    """The infrastructure failure an agent's output stands for, or ``None`` if it is an action."""
    if not isinstance(output, AgentOutput):
        return AgentError(
            f"the agent returned a {type(output).__name__}, not an AgentOutput", kind="bad_output"
        )
    meta = output.meta if isinstance(output.meta, Mapping) else {}
    if output.error is not None:
        kind = meta.get("error_kind", "agent_error")
        return AgentError(
            str(output.error),
            kind=kind if isinstance(kind, str) and kind in ERROR_KINDS else "agent_error",
            status=meta.get("status"),
            attempts=_count(meta.get("attempts", 1)) or 1,
        )
    if not isinstance(output.text, str):
        return AgentError(
            f"the agent returned a {type(output.text).__name__} as the action, not text", kind="bad_output"
        )
    for field_name in ("prompt_tokens", "completion_tokens"):
        value = getattr(output, field_name)
        if value is not None and _count(value) is None:
            # (a NaN count raised in the dispatcher's callback, and the run waited for ever)
            return AgentError(f"the agent reported {field_name}={value!r}, not a count of tokens", kind="bad_output")
    return None


def _count(value: Any) -> int | None:
    """``value`` as a count (a non-negative whole number, numpy's too; a float is truncated),
    else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value) if value >= 0 else None
    if isinstance(value, numbers.Real) and math.isfinite(value) and value >= 0:
        return int(value)
    return None


def play_fixed_agents(env: Any, agents: Mapping[str, Agent], until: str | None = None) -> None:
    """Let fixed agents move in an AEC environment (dead steps included) until ``until`` is to
    act or the episode is over: how the verifiers adapter and ``examples/trl_grpo.py`` play the
    agents that are not trained (the trainer's rollout batches the same check,
    :func:`output_failure`).

    Raises:
        AgentError: A fixed agent produced no action (``AgentOutput.error`` set, or no text):
            never played as an empty move.
    """
    while env.agents and not env.episode_over and env.agent_selection != until:
        agent = env.agent_selection
        _, _, terminated, truncated, _ = env.last(observe=False)
        if terminated or truncated:
            env.step(None)
            continue
        [output] = agents[agent].act_batch([ActRequest(env.observe(agent), agent, env)])
        failure = output_failure(output)
        if failure is not None:
            raise AgentError(
                f"the fixed agent playing {agent!r} gave no action: {failure}",
                kind=failure.kind,
                status=failure.status,
                attempts=failure.attempts,
            )
        env.step(output.text)


#: Agent options that change how a request travels, never what the model answers; they are left
#: out of :meth:`Agent.settings`, so that changing them does not block ``--resume``.
TRANSPORT_OPTIONS = frozenset(
    {
        "api_key",
        "api_key_env",
        "backoff_initial_s",
        "backoff_max_s",
        "cache",
        "device",
        "headers",
        "jitter_seed",
        "max_batch_size",
        "max_concurrency",
        "max_retries",
        "max_retry_after_s",
        "name",
        "retry_timeouts",
        "threads",
        "timeout_s",
    }
)


class Agent(abc.ABC):
    """Turns a batch of :class:`ActRequest` into a batch of :class:`AgentOutput`, in order."""

    #: A short human-readable name, used in tables and transcripts.
    name: str = "agent"

    @abc.abstractmethod
    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        """Return one output per request, in the same order. Must not raise for bad model
        output (that is an action like any other); a call that produced no action is an
        infrastructure failure: raise, or set :attr:`AgentOutput.error` for that request."""

    async def act_batch_async(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        """Async form; the default runs :meth:`act_batch` in a worker thread."""
        return await asyncio.to_thread(self.act_batch, list(requests))

    async def act_async(self, request: ActRequest) -> AgentOutput:
        """One request on its own; raise :class:`AgentError` if no action was produced.

        Agents whose requests are independent and I/O-bound (HTTP) override this: the runner
        then sends every request the moment it is made and resumes each episode as soon as its
        own reply arrives, instead of batching. The default serves a batch of one.
        """
        [output] = await self.act_batch_async([request])
        return output

    def action_probabilities(self, requests: Sequence[ActRequest]) -> list[dict[str, float] | None] | None:
        """Optional: this agent's distribution over action texts for each request (text →
        probability), for exact measurement of its policy (:mod:`llm_envs.games`). ``None`` (the
        default), or ``None`` for one request, means "cannot say": callers then sample
        :meth:`act_batch` instead."""
        return None

    def act(self, observation: Observation, agent: str = "", env: TextEnv | None = None) -> str:
        """Convenience for a single decision: returns the action text (raises
        :class:`AgentError` if no action was produced)."""
        output = self.act_batch([ActRequest(observation, agent, env)])[0]
        failure = output_failure(output)
        if failure is not None:
            raise failure
        return output.text

    def settings(self) -> dict[str, Any]:
        """What determines this agent's answers, for the run's settings fingerprint (a resumed
        run must not mix answers made under other settings). Transport options (timeouts,
        concurrency, retries, the cache) are left out.

        The default is the class, the name and, for agents built from a spec, the spec and its
        options; agents with more state that shapes their answers override it.
        """
        data: dict[str, Any] = {"class": f"{type(self).__module__}.{type(self).__qualname__}", "name": self.name}
        spec = getattr(self, "build_spec", None)
        if spec is not None:
            data["spec"] = str(spec)
            data["options"] = {
                k: v for k, v in getattr(spec, "options", ()) if k not in TRANSPORT_OPTIONS
            }
        return data

    def close(self) -> None:
        """Release resources (connections, engines)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def serves_each_request(agent: Agent) -> bool:
    """True if ``agent`` overrides :meth:`Agent.act_async` (each request served on its own)."""
    return type(agent).act_async is not Agent.act_async


def run_blocking(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to completion from synchronous code and return its result: on a new
    event loop, or, when the caller already runs one (a notebook), on a private loop in a
    worker thread (a running loop cannot be blocked on)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
