"""An agent backed by any OpenAI-compatible chat-completions server.

It speaks the ``POST {base_url}/chat/completions`` protocol that vLLM, SGLang, llama.cpp's
server, TGI, Ollama and hosted APIs all serve, with :mod:`httpx` and nothing else:

* each observation becomes ``[system: instruction, user: prompt]``
  (:func:`llm_envs.core.to_chat_messages`);
* a batch is sent as concurrent requests, at most ``max_concurrency`` in flight for this agent
  at any moment (an :class:`asyncio.Semaphore`, shared by every batch running on the same event
  loop), over one pooled connection set;
* every request has a total deadline (``timeout_s``); a timeout, a connection error, HTTP 429
  and HTTP 5xx are retried with exponential backoff and jitter, honouring the server's
  ``Retry-After`` (or ``retry-after-ms``) header when it gives one;
* a response that cannot be understood, a non-retryable HTTP error (400, 401, 404, ...) or
  exhausted retries yield ``AgentOutput(text="", error=...)`` for that one step: the episode
  goes on and the empty action earns the environment's format penalty;
* token usage (``usage.prompt_tokens`` / ``usage.completion_tokens``) is recorded in each
  :class:`AgentOutput`, and per-token log-probabilities too when ``logprobs=True``.

The API key is read from the environment variable named by ``api_key_env`` (default
``OPENAI_API_KEY``) when the agent is created; local servers usually need none, and without one
no ``Authorization`` header is sent.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from llm_envs.agents.base import ActRequest, Agent, AgentOutput, run_blocking
from llm_envs.core.messages import to_chat_messages

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: HTTP statuses worth another try: request timeout, conflict (lock contention on some hosted
#: APIs), rate limiting, and every server-side error.
_RETRYABLE_STATUSES = frozenset({408, 409, 429})


def _is_retryable_status(status: int) -> bool:
    return status in _RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait as the server asks: ``retry-after-ms``, or ``Retry-After`` given as
    seconds or as an HTTP date. ``None`` when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class _LoopState:
    """What belongs to one event loop: an httpx client and the in-flight semaphore are bound
    to the loop they were first used on, so each loop gets its own."""

    client: httpx.AsyncClient
    semaphore: asyncio.Semaphore


class OpenAIHTTPAgent(Agent):
    """Chat completions from an OpenAI-compatible server.

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1`` (vLLM) or the hosted API's.
        model: The ``model`` field of each request.
        api_key_env: Name of the environment variable that holds the API key.
        api_key: The key itself (overrides ``api_key_env``; prefer the variable).
        temperature, top_p, max_tokens, stop, seed: Sampling parameters; ``None`` leaves the
            server's default.
        logprobs: Ask for the log-probability of each sampled token.
        extra_body: More request fields, sent as-is (e.g. ``{"top_k": 20}`` for vLLM).
        headers: More HTTP headers.
        max_concurrency: Most requests of this agent in flight at once.
        timeout_s: Total deadline of one request attempt, in seconds.
        max_retries: Retries after the first attempt (timeouts, connection errors, 408, 409,
            429, 5xx).
        backoff_initial_s: First backoff delay; it doubles each retry, up to ``backoff_max_s``,
            and is scaled by a random factor in [0.5, 1] (jitter), so that clients that failed
            together do not retry together.
        backoff_max_s: Cap of the backoff delay.
        max_retry_after_s: A ``Retry-After`` up to this long is honoured exactly; a longer one
            falls back to the backoff delay (so that one odd header cannot stall a run).
        jitter_seed: Seed of the jitter generator (timing only; never affects actions).
        name: Name in tables and transcripts (default ``openai:{base_url}@{model}``).
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        model: str = "",
        *,
        api_key_env: str = "OPENAI_API_KEY",
        api_key: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        max_concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_retry_after_s: float = 60.0,
        jitter_seed: int | None = None,
        name: str | None = None,
    ) -> None:
        if not model:
            raise ValueError("OpenAIHTTPAgent needs a model name (the request's 'model' field)")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.url = f"{self.base_url}/chat/completions"
        key = api_key if api_key is not None else os.environ.get(api_key_env, "")
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self.sampling: dict[str, Any] = {
            k: v
            for k, v in {
                "temperature": temperature,
                "top_p": top_p,
                "max_tokens": max_tokens,
                "stop": ([stop] if isinstance(stop, str) else list(stop)) if stop is not None else None,
                "seed": seed,
            }.items()
            if v is not None
        }
        self.logprobs = logprobs
        self.extra_body = dict(extra_body or {})
        self.max_concurrency = int(max_concurrency)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_initial_s = float(backoff_initial_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self._jitter = random.Random(jitter_seed)
        self.name = name or f"openai:{self.base_url}@{model}"
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    # ------------------------------------------------------------------ public API
    def request_body(self, observation: dict[str, str]) -> dict[str, Any]:
        """The JSON body sent for ``observation``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_chat_messages(observation),
            **self.sampling,
        }
        if self.logprobs:
            body["logprobs"] = True
        body.update(self.extra_body)
        return body

    async def act_batch_async(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        """Send every request concurrently (bounded by ``max_concurrency``); outputs in order."""
        state = self._state()
        return list(await asyncio.gather(*(self._complete(state, r) for r in requests)))

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        """Blocking form: runs :meth:`act_batch_async` on a private event loop (in a worker
        thread when the caller already runs one)."""

        async def run() -> list[AgentOutput]:
            try:
                return await self.act_batch_async(requests)
            finally:
                await self.aclose()

        return run_blocking(run())

    async def aclose(self) -> None:
        """Close the connection pool that belongs to the running event loop."""
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.client.aclose()

    def close(self) -> None:
        """Forget every connection pool (pools of loops still running close with them)."""
        self._states = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ internals
    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            limits = httpx.Limits(
                max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency
            )
            # The total deadline is enforced with asyncio.wait_for; httpx's own (per-phase)
            # timeouts are set to the same value as a second line of defence.
            client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=limits)
            state = _LoopState(client, asyncio.Semaphore(self.max_concurrency))
            self._states[loop] = state
        return state

    def _backoff_delay(self, retry_index: int, retry_after: float | None) -> float:
        if retry_after is not None and retry_after <= self.max_retry_after_s:
            return retry_after
        base = min(self.backoff_max_s, self.backoff_initial_s * (2.0**retry_index))
        return base * (0.5 + 0.5 * self._jitter.random())

    async def _complete(self, state: _LoopState, request: ActRequest) -> AgentOutput:
        body = self.request_body(request.observation)
        started = time.perf_counter()
        errors: list[str] = []
        for attempt in range(self.max_retries + 1):
            retry_after: float | None = None
            try:
                async with state.semaphore:
                    response = await asyncio.wait_for(
                        state.client.post(self.url, json=body, headers=self._headers),
                        timeout=self.timeout_s,
                    )
            except (asyncio.TimeoutError, httpx.TimeoutException):
                errors.append(f"timed out after {self.timeout_s:g}s")
            except httpx.TransportError as exc:
                errors.append(f"connection error ({type(exc).__name__}: {exc})")
            else:
                if 200 <= response.status_code < 300:
                    return self._parse(response, attempt + 1, time.perf_counter() - started)
                detail = f"HTTP {response.status_code}: {_error_detail(response)}"
                if not _is_retryable_status(response.status_code):
                    return _failure(f"{detail} (not retried)", attempt + 1, started)
                errors.append(detail)
                retry_after = parse_retry_after(response.headers)
            if attempt < self.max_retries:
                await asyncio.sleep(self._backoff_delay(attempt, retry_after))
        attempts = self.max_retries + 1
        return _failure(
            f"gave up after {attempts} attempt(s); last error: {errors[-1]}", attempts, started, errors
        )

    def _parse(self, response: httpx.Response, attempts: int, latency_s: float) -> AgentOutput:
        meta: dict[str, Any] = {"attempts": attempts, "latency_s": latency_s}
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            return AgentOutput(
                text="",
                error=f"malformed response: body is not JSON: {_snippet(response.text)!r}",
                meta=meta,
            )
        try:
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            return AgentOutput(
                text="",
                error=f"malformed response: no choices[0].message: {_snippet(json.dumps(data))!r}",
                meta=meta,
            )
        if isinstance(content, list):  # content given as parts: keep the text parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        if not isinstance(content, str):
            return AgentOutput(
                text="",
                error=f"malformed response: message content is {type(content).__name__}, not text",
                meta=meta,
            )
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        meta["finish_reason"] = choice.get("finish_reason") if isinstance(choice, dict) else None
        if isinstance(data.get("model"), str):
            meta["model"] = data["model"]
        return AgentOutput(
            text=content,
            logprobs=_token_logprobs(choice) if self.logprobs else None,
            prompt_tokens=_as_int(usage.get("prompt_tokens")),
            completion_tokens=_as_int(usage.get("completion_tokens")),
            meta=meta,
        )


def _failure(error: str, attempts: int, started: float, history: list[str] | None = None) -> AgentOutput:
    meta: dict[str, Any] = {"attempts": attempts, "latency_s": time.perf_counter() - started}
    if history:
        meta["errors"] = history
    return AgentOutput(text="", error=error, meta=meta)


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _snippet(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _error_detail(response: httpx.Response) -> str:
    """The server's error message if it sent the usual ``{"error": {"message": ...}}``."""
    try:
        data = response.json()
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return _snippet(str(error["message"]))
        if isinstance(error, str):
            return _snippet(error)
    except (ValueError, AttributeError):
        pass
    return _snippet(response.text) or response.reason_phrase


def _token_logprobs(choice: dict[str, Any]) -> list[float] | None:
    try:
        content = choice["logprobs"]["content"]
        return [float(item["logprob"]) for item in content]
    except (KeyError, TypeError, ValueError):
        return None
