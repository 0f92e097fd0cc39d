"""The agent protocol: a batch of observations in, a batch of actions out.

Every kind of policy (a scripted reference agent, a person at the terminal, an HTTP client for
an OpenAI-compatible server, a local Hugging Face model, a vLLM engine) implements
:class:`Agent`. The runner gathers every pending request that belongs to the same agent object
across many environment instances and sends them in one :meth:`Agent.act_batch` call.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from llm_envs.core.env import Observation, TextEnv

_T = TypeVar("_T")


@dataclass
class ActRequest:
    """One pending decision.

    Attributes:
        observation: What the agent sees (``{"instruction", "prompt"}``).
        agent: The environment's agent id that must act.
        env: The live environment. Only scripted agents (reference, random) read it; model
            agents must use the observation alone.
    """

    observation: Observation
    agent: str
    env: TextEnv | None = None


@dataclass
class AgentOutput:
    """One action, with what a trainer or an evaluation needs to know about how it was made.

    Attributes:
        text: The action text sent to the environment (``""`` when the call failed).
        prompt_token_ids: The exact prompt tokens the model conditioned on (token-in).
        token_ids: The sampled completion tokens (token-out).
        logprobs: Log-probability of each sampled token under the sampling policy.
        prompt_tokens: Prompt token count (as reported by the model server, if any).
        completion_tokens: Completion token count.
        error: Why the call failed, if it did; the run goes on and the step is played with
            ``text`` (empty), which earns the environment's format penalty.
        meta: Anything else (latency, finish reason, ...).
    """

    text: str
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class Agent(abc.ABC):
    """Turns a batch of :class:`ActRequest` into a batch of :class:`AgentOutput`, in order."""

    #: A short human-readable name, used in tables and transcripts.
    name: str = "agent"

    @abc.abstractmethod
    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        """Return one output per request, in the same order. Must not raise for bad model
        output; a failed call is reported through :attr:`AgentOutput.error`."""

    async def act_batch_async(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        """Async form; the default runs :meth:`act_batch` in a worker thread."""
        return await asyncio.to_thread(self.act_batch, list(requests))

    def action_probabilities(self, requests: Sequence[ActRequest]) -> list[dict[str, float] | None] | None:
        """Optional: this agent's distribution over action texts for each request (text →
        probability), for exact measurement of its policy (:mod:`llm_envs.games`). ``None`` (the
        default), or ``None`` for one request, means "cannot say": callers then sample
        :meth:`act_batch` instead."""
        return None

    def act(self, observation: Observation, agent: str = "", env: TextEnv | None = None) -> str:
        """Convenience for a single decision: returns the action text."""
        return self.act_batch([ActRequest(observation, agent, env)])[0].text

    def close(self) -> None:
        """Release resources (connections, engines)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


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
