"""An agent backed by any OpenAI-compatible chat-completions server.

It speaks the ``POST {base_url}/chat/completions`` protocol that vLLM, SGLang, llama.cpp's
server, TGI, Ollama, ``transformers serve`` and hosted APIs all serve, with :mod:`httpx` and
nothing else:

* each observation becomes ``[system: instruction, user: prompt]``
  (:func:`llm_envs.core.to_chat_messages`);
* each request is served on its own (:meth:`OpenAIHTTPAgent.act_async`), so the runner resumes
  an episode as soon as its own reply arrives; at most ``max_concurrency`` requests of this
  agent are in flight at any moment (an :class:`asyncio.Semaphore` per event loop), over one
  pooled connection set;
* ``max_tokens`` defaults to :data:`DEFAULT_MAX_TOKENS`, so that a server's own default (often
  the whole context) never decides how long a run takes;
* a connection error (refused, reset mid-reply), HTTP 408, 409, 429 and 5xx are retried with
  exponential backoff and jitter; ``Retry-After`` (or ``retry-after-ms``) is honoured exactly,
  and it pauses *every* request of the agent, not only the one that was told; a wait longer
  than ``max_retry_after_s`` is not cut short but reported as a failure;
* a request that runs past ``timeout_s`` is cancelled (the connection is closed, which makes
  vLLM and SGLang abort the generation) and **not re-sent** by default: a server that does not
  notice the closed connection is still working on it, and sending it again would only queue the
  same work twice (``retry_timeouts=True`` changes that);
* every failure that remains (after retries) is an infrastructure failure, raised as
  :class:`~llm_envs.agents.AgentError` with its kind (``connection``, ``timeout``,
  ``server_error``, ``rate_limited``, ``client_error``, ``malformed_response``); in the batch
  forms it becomes an output with ``error`` set. It is never an (empty) action. The exception
  is an HTTP 400/413/422 saying the prompt passes the model's context: the same prompt never
  fits, so it is the model's empty answer (``meta["finish_reason"]`` ``"context_length"``,
  :data:`~llm_envs.agents.base.CONTEXT_EXCEEDED`), never re-sent;
* token usage (``usage.prompt_tokens`` / ``usage.completion_tokens``) is recorded in each
  :class:`AgentOutput`, and per-token log-probabilities too when ``logprobs=True``;
* with ``cache=PATH`` successful responses are stored in a :class:`~llm_envs.agents.cache.
  ResponseCache` and a request already answered (same server, model, messages, sampling fields,
  episode seed and decision) is not sent again.

The API key is read from the environment variable named by ``api_key_env`` (default
``OPENAI_API_KEY``) when the agent is created; local servers usually need none, and without one
no ``Authorization`` header is sent.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import re
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from llm_envs.agents.base import CONTEXT_EXCEEDED, ActRequest, Agent, AgentError, AgentOutput, run_blocking
from llm_envs.agents.cache import ResponseCache, cache_key
from llm_envs.core.messages import to_chat_messages

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Completion tokens per request unless told otherwise: enough for a reasoned action in every
#: environment here; raise it for reasoning models (the papers train with up to 2048).
DEFAULT_MAX_TOKENS = 1024
#: Seconds one request may take before it is cancelled.
DEFAULT_TIMEOUT_S = 300.0

#: HTTP statuses worth another try, with the failure kind they count as when retries run out.
_RETRYABLE_STATUSES = {408: "timeout", 409: "server_error", 429: "rate_limited"}


def _retry_kind(status: int) -> str | None:
    """The failure kind of a retryable status, or ``None`` if the status is not retried."""
    if status in _RETRYABLE_STATUSES:
        return _RETRYABLE_STATUSES[status]
    return "server_error" if status >= 500 else None


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
    to the loop they were first used on, so each loop gets its own. ``resume_at`` is the
    ``time.monotonic()`` before which no request may be sent (a server's ``Retry-After``)."""

    client: httpx.AsyncClient
    semaphore: asyncio.Semaphore
    resume_at: float = 0.0

    async def wait_for_server(self) -> None:
        while (delay := self.resume_at - time.monotonic()) > 0:
            await asyncio.sleep(delay)


class OpenAIHTTPAgent(Agent):
    """Chat completions from an OpenAI-compatible server.

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1`` (vLLM) or the hosted API's.
        model: The ``model`` field of each request.
        api_key_env: Name of the environment variable that holds the API key.
        api_key: The key itself (overrides ``api_key_env``; prefer the variable).
        temperature, top_p, stop, seed: Sampling parameters; ``None`` leaves the server's
            default.
        max_tokens: Completion length limit (default :data:`DEFAULT_MAX_TOKENS`; ``None``
            leaves the server's default, which may be the whole context).
        logprobs: Ask for the log-probability of each sampled token.
        extra_body: More request fields, sent as-is (e.g. ``{"top_k": 20}`` for vLLM).
        headers: More HTTP headers.
        max_concurrency: Most requests of this agent in flight at once.
        timeout_s: Deadline of one request attempt, in seconds (then it is cancelled).
        retry_timeouts: Send a timed-out request again (only sensible with a server that
            aborts work when the client goes away; see the module docstring).
        max_retries: Retries after the first attempt (connection errors, 408, 409, 429, 5xx,
            and timeouts with ``retry_timeouts``).
        backoff_initial_s: First backoff delay; it doubles each retry, up to ``backoff_max_s``,
            and is scaled by a random factor in [0.5, 1] (jitter), so that clients that failed
            together do not retry together.
        backoff_max_s: Cap of the backoff delay.
        max_retry_after_s: Longest ``Retry-After`` to wait for; a server that asks for a
            longer wait gets no retry (the request fails, to be replayed by ``--resume``).
        jitter_seed: Seed of the jitter generator (timing only; never affects actions).
        cache: A :class:`~llm_envs.agents.cache.ResponseCache` or the path of one: answered
            requests are stored and never sent twice.
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
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        extra_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        max_concurrency: int = 8,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry_timeouts: bool = False,
        max_retries: int = 4,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_retry_after_s: float = 60.0,
        jitter_seed: int | None = None,
        cache: ResponseCache | str | os.PathLike[str] | None = None,
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
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1 (or None for the server's default), got {max_tokens}")
        if "://" not in base_url:
            raise ValueError(f"base_url {base_url!r} is not a URL (e.g. http://127.0.0.1:8000/v1)")
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
        self.retry_timeouts = bool(retry_timeouts)
        self.max_retries = int(max_retries)
        self.backoff_initial_s = float(backoff_initial_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self._jitter = random.Random(jitter_seed)
        self._owns_cache = cache is not None and not isinstance(cache, ResponseCache)
        self.cache = ResponseCache(cache) if self._owns_cache else cache  # type: ignore[arg-type]
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

    def settings(self) -> dict[str, Any]:
        """What shapes the answers: the server, the model and every request field."""
        return {
            "class": f"{type(self).__module__}.{type(self).__qualname__}",
            "base_url": self.base_url,
            "model": self.model,
            "sampling": dict(self.sampling),
            "logprobs": self.logprobs,
            "extra_body": dict(self.extra_body),
        }

    async def act_async(self, request: ActRequest) -> AgentOutput:
        """Answer one request; raises :class:`AgentError` when no answer could be had."""
        body = self.request_body(request.observation)
        key = None
        if self.cache is not None:
            key = cache_key(self.base_url, body, request.episode_seed, request.decision, request.agent)
            stored = self.cache.get(key)
            if stored is not None:
                return _output(stored, {"cached": True, "attempts": 0, "latency_s": 0.0})
        reply, meta = await self._complete(self._state(), body)
        if self.cache is not None and key is not None:
            self.cache.put(key, reply)
        return _output(reply, meta)

    async def act_batch_async(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        """Every request concurrently (bounded by ``max_concurrency``); outputs in order, a
        failed request as an output with ``error`` set (and ``meta["error_kind"]``)."""

        async def one(request: ActRequest) -> AgentOutput:
            try:
                return await self.act_async(request)
            except AgentError as exc:
                return AgentOutput(
                    text="",
                    error=str(exc),
                    meta={"error_kind": exc.kind, "status": exc.status, "attempts": exc.attempts},
                )

        return list(await asyncio.gather(*(one(r) for r in requests)))

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
        """Forget every connection pool (pools of loops still running close with them) and
        close the response cache this agent opened."""
        self._states = weakref.WeakKeyDictionary()
        if self._owns_cache and self.cache is not None:
            self.cache.close()
            self.cache = None
            self._owns_cache = False

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

    def _backoff_delay(self, retry_index: int) -> float:
        base = min(self.backoff_max_s, self.backoff_initial_s * (2.0**retry_index))
        return base * (0.5 + 0.5 * self._jitter.random())

    async def _complete(self, state: _LoopState, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Send ``body`` (with retries) and return the parsed reply and its meta."""
        started = time.perf_counter()
        errors: list[str] = []
        kind, status = "connection", None
        connected = False  # did any attempt reach a server?
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            delay: float | None = None
            await state.wait_for_server()
            try:
                async with state.semaphore:
                    await state.wait_for_server()  # a Retry-After may have come in while queued
                    response = await asyncio.wait_for(
                        state.client.post(self.url, json=body, headers=self._headers),
                        timeout=self.timeout_s,
                    )
            except (asyncio.TimeoutError, httpx.TimeoutException):
                message = f"timed out after {self.timeout_s:g}s"
                if not self.retry_timeouts:
                    raise AgentError(
                        f"{message}; not re-sent, since the server may still be working on it "
                        "(raise --timeout, or lower --max-tokens)",
                        kind="timeout",
                        attempts=attempt + 1,
                    ) from None
                errors.append(message)
                kind, status = "timeout", None
            except httpx.TransportError as exc:
                errors.append(f"connection error ({type(exc).__name__}: {str(exc) or 'no detail'})")
                # ConnectError: no connection was made (refused, unknown host). Only when every
                # attempt failed so is the URL itself in doubt (kind "unreachable").
                connected = connected or not isinstance(exc, httpx.ConnectError)
                kind, status = ("connection" if connected else "unreachable"), None
            else:
                status = response.status_code
                connected = True
                if 200 <= status < 300:
                    meta = {"attempts": attempt + 1, "latency_s": time.perf_counter() - started}
                    return self._parse(response, meta), meta
                detail = f"HTTP {status}: {_error_detail(response)}"
                if status in (400, 413, 422) and _CONTEXT_OVERFLOW.search(response.text[:4000]):
                    # The model's answer, an empty one: this prompt never fits (see CONTEXT_EXCEEDED).
                    meta = {"attempts": attempt + 1, "latency_s": time.perf_counter() - started}
                    reply = {"text": "", "prompt_tokens": 0, "completion_tokens": 0, "logprobs": None,
                             "finish_reason": CONTEXT_EXCEEDED, "model": None, "server_said": detail}
                    return reply, meta
                retry_kind = _retry_kind(status)
                if retry_kind is None:
                    raise AgentError(
                        f"{detail} (not retried)",
                        kind="client_error",  # 4xx (and a 3xx redirect): the request is wrong
                        status=status,
                        attempts=attempt + 1,
                    )
                errors.append(detail)
                kind = retry_kind
                retry_after = parse_retry_after(response.headers)
                if retry_after is not None:
                    if retry_after > self.max_retry_after_s:
                        raise AgentError(
                            f"{detail}; the server asks to wait {retry_after:g}s, more than "
                            f"max_retry_after_s={self.max_retry_after_s:g}",
                            kind=kind,
                            status=status,
                            attempts=attempt + 1,
                        )
                    delay = retry_after
                    # The server speaks for every request of this client, not only this one.
                    state.resume_at = max(state.resume_at, time.monotonic() + retry_after)
            if attempt < attempts - 1:
                await asyncio.sleep(delay if delay is not None else self._backoff_delay(attempt))
        raise AgentError(
            f"gave up after {attempts} attempt(s); last error: {errors[-1]}",
            kind=kind,
            status=status,
            attempts=attempts,
        )

    def _parse(self, response: httpx.Response, meta: dict[str, Any]) -> dict[str, Any]:
        """The reply as plain data (what the cache stores), or :class:`AgentError`."""

        def malformed(why: str) -> AgentError:
            return AgentError(f"malformed response: {why}", kind="malformed_response", attempts=meta["attempts"])

        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            raise malformed(f"body is not JSON: {_snippet(response.text)!r}") from None
        try:
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise malformed(f"no choices[0].message: {_snippet(json.dumps(data))!r}") from None
        if isinstance(content, list):  # content given as parts: keep the text parts
            if not all(isinstance(part, dict) for part in content):
                # (a list of plain strings was read as no text: the model's answer lost, and
                # scored as an empty reply)
                raise malformed(f"message content parts are not objects: {_snippet(json.dumps(content))!r}")
            texts = [part.get("text") for part in content]
            if any(text is not None and not isinstance(text, str) for text in texts):
                raise malformed("a part of the message content has a text that is not text")
            content = "".join(text for text in texts if text is not None)
        if content is None:
            # The model wrote no visible text (e.g. a reasoning model cut off by max_tokens, or a
            # tool call): that is the model's answer, an empty one, not a failure.
            content = ""
        if not isinstance(content, str):
            raise malformed(f"message content is {type(content).__name__}, not text")
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        return {
            "text": content,
            "prompt_tokens": _as_int(usage.get("prompt_tokens")),
            "completion_tokens": _as_int(usage.get("completion_tokens")),
            "logprobs": _token_logprobs(choice) if self.logprobs else None,
            "finish_reason": choice.get("finish_reason") if isinstance(choice, dict) else None,
            "model": data.get("model") if isinstance(data.get("model"), str) else None,
        }


def _output(reply: dict[str, Any], meta: dict[str, Any]) -> AgentOutput:
    meta = {**meta, "finish_reason": reply.get("finish_reason")}
    if reply.get("server_said"):
        meta["server_said"] = reply["server_said"]
    if reply.get("model"):
        meta["model"] = reply["model"]
    return AgentOutput(
        text=str(reply.get("text", "")),
        logprobs=reply.get("logprobs"),
        prompt_tokens=_as_int(reply.get("prompt_tokens")),
        completion_tokens=_as_int(reply.get("completion_tokens")),
        meta=meta,
    )


def _as_int(value: Any) -> int:
    """A token count from a reply's ``usage``: 0 for anything but a whole number from 0 to 2**53
    (a missing count, text, a negative or non-finite number, or one no reply could hold)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return 0
    return int(value) if 0 <= value < 2**53 else 0


# What servers say when a prompt (with the completion's room) passes the model's context: OpenAI
# and vLLM ("maximum context length", code context_length_exceeded; "longer than the maximum
# model length"), SGLang ("the model's context length"), llama.cpp ("exceeds the available
# context size"), TGI ("tokens + `max_new_tokens` must be <= N"), Anthropic-style gateways
# ("prompt is too long").
_CONTEXT_OVERFLOW = re.compile(
    r"context[ _]length|maximum model length|context size|context window|prompt is too long"
    r"|max_new_tokens`? must be <=",
    re.IGNORECASE,
)


def _snippet(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _error_detail(response: httpx.Response) -> str:
    """The server's error message: OpenAI's ``{"error": {"message": ...}}``, FastAPI's
    ``{"detail": ...}``, or the body itself."""
    try:
        data = response.json()
    except (ValueError, UnicodeDecodeError):
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return _snippet(str(error["message"]))
        for key in ("error", "detail", "message"):
            if isinstance(data.get(key), str) and data[key]:
                return _snippet(data[key])
    return _snippet(response.text.strip()) or response.reason_phrase


def _token_logprobs(choice: dict[str, Any]) -> list[float] | None:
    try:
        content = choice["logprobs"]["content"]
        return [float(item["logprob"]) for item in content]
    except (KeyError, TypeError, ValueError):
        return None
