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
  :data:`~llm_envs.agents.base.CONTEXT_EXCEEDED`), never re-sent; a ``max_tokens`` that alone
  fills the context is a ``client_error``, and a prompt that fits with less room than
  ``max_tokens`` is sent again with the room left (docs/evaluation.md, "A prompt longer ...");
* a reply with ``finish_reason`` ``"abort"`` / ``"error"`` (the server gave up on the request) is
  a retried ``server_error``, and a reply body over ``max_response_bytes`` is a
  ``malformed_response``: neither is ever the model's answer;
* token usage (``usage.prompt_tokens`` / ``usage.completion_tokens``) is recorded in each
  :class:`AgentOutput`, and per-token log-probabilities too when ``logprobs=True``;
* with ``cache=PATH`` successful responses are stored in a :class:`~llm_envs.agents.cache.
  ResponseCache` and a request already answered (same server, model, messages, sampling fields,
  episode seed and decision) is not sent again.

The API key is read from the environment variable named by ``api_key_env`` (default
``OPENAI_API_KEY``) when the agent is created, and refused then if no HTTP header could carry it;
local servers usually need none, and without one no ``Authorization`` header is sent. Names,
settings and error messages never show the key, a password in the URL or a secret query field
(:func:`redact_url`).
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
import urllib.parse
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

#: Finish reasons by which a server says it gave up on the request (vLLM's and SGLang's engine
#: abort: shutdown, preemption; OpenRouter's provider error): whatever text came with it is not
#: the model's answer, and another try may well succeed.
ABORTED_FINISH_REASONS = frozenset({"abort", "error"})

#: The reply size allowed per completion token (and per choice): JSON escaping and, with
#: ``logprobs``/``top_logprobs``, a record per token take far more than the token's text, so
#: this is generous; a reply past it is not a chat completion of that length (it was read whole
#: into memory, 100 MB at a time, and played as the answer).
RESPONSE_BYTES_PER_TOKEN = 4096
#: The least any reply may take, whatever ``max_tokens`` says.
MIN_RESPONSE_BYTES = 16 * 2**20
#: Tokens assumed for the limit when ``max_tokens`` is left to the server (often the context).
_SERVER_DEFAULT_TOKENS = 32768


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
        max_response_bytes: Largest reply body read (decoded); a larger one is a
            ``malformed_response``. Default: :data:`RESPONSE_BYTES_PER_TOKEN` per completion
            token and choice, at least :data:`MIN_RESPONSE_BYTES`.
        name: Name in tables and transcripts (default ``openai:{base_url}@{model}``, the URL
            with its secrets redacted).
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
        max_response_bytes: int | None = None,
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
            raise ValueError(f"base_url {redact_url(base_url)!r} is not a URL (e.g. http://127.0.0.1:8000/v1)")
        if max_response_bytes is not None and max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be >= 1 (or None for the default), got {max_response_bytes}")
        self.base_url = base_url.rstrip("/")
        #: The server URL as it may be shown and written (user-info and secret query fields hidden).
        self.display_url = redact_url(self.base_url)
        self.model = model
        # The path goes before a query string (Azure's ?api-version=..., a gateway's ?key=...):
        # appended after it, the path became part of the last query value.
        split = urllib.parse.urlsplit(self.base_url)
        self.url = urllib.parse.urlunsplit(
            split._replace(path=split.path.rstrip("/") + "/chat/completions", fragment="")
        )
        from_env = api_key is None
        key = api_key if api_key is not None else os.environ.get(api_key_env, "")
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        for header, value in self._headers.items():
            problem = _header_problem(str(header), value)
            if problem is not None:
                raise ValueError(f"the HTTP header {_safe_name(str(header))} {problem}; it cannot be sent (its value is not shown)")
        if key:
            problem = _header_problem("Authorization", key)
            if problem is not None:
                # A key with a stray line end (a .env file saved with CRLF) was refused by h11 at
                # every request, the key printed whole in the error and the failure retried and
                # filed as an outage (exit 3, "resume the run").
                where = f"${api_key_env}" if from_env else "api_key"
                raise ValueError(
                    f"the API key in {where} {problem}, which no HTTP header can carry (a key pasted "
                    f"with a line end?); correct it (the key is not shown)"
                )
            self._headers["Authorization"] = f"Bearer {key}"
        #: Strings no message of this agent may show: the key, header values, URL secrets.
        self._secrets = _secret_strings([key, *(v for h, v in self._headers.items() if h != "Content-Type")],
                                        self.base_url)
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
        if max_response_bytes is None:
            tokens = _requested_tokens({**self.sampling, **self.extra_body}) or _SERVER_DEFAULT_TOKENS
            choices = self.extra_body.get("n")
            choices = choices if isinstance(choices, int) and not isinstance(choices, bool) and choices > 1 else 1
            max_response_bytes = max(MIN_RESPONSE_BYTES, tokens * RESPONSE_BYTES_PER_TOKEN * choices)
        self.max_response_bytes = int(max_response_bytes)
        self.name = name or f"openai:{self.display_url}@{model}"
        #: Whether any request of this agent has reached a server (then a refused connection is
        #: an outage, not a wrong URL).
        self.reached_server = False
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
            "base_url": self.display_url,
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
            # (keyed by the shown URL: a rotated password still finds its answers, and no hash
            # of it is kept)
            key = cache_key(self.display_url, body, request.episode_seed, request.decision, request.agent)
            stored = self.cache.get(key)
            # A refusal stored by an earlier version is not an answer: asked again.
            if stored is not None and _storable(stored):
                return _output(stored, {"cached": True, "attempts": 0, "latency_s": 0.0})
        reply, meta = await self._complete(self._state(), body)
        if self.cache is not None and key is not None and _storable(reply):
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
        connected = self.reached_server  # has any attempt (of any request) reached a server?
        attempts = self.max_retries + 1
        sent = body  # what goes out: body, or body with max_tokens cut to the context's room
        shortened = 0
        attempt = 0
        while True:
            delay: float | None = None
            await state.wait_for_server()
            try:
                async with state.semaphore:
                    await state.wait_for_server()  # a Retry-After may have come in while queued
                    response = await asyncio.wait_for(self._post(state.client, sent), timeout=self.timeout_s)
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
            except _TooLarge as exc:
                # Not the model's answer (no completion of max_tokens is that long), and another
                # try would only read as much again.
                raise AgentError(
                    f"malformed response: HTTP {exc.status} with a body of {exc.size_text()}, more than "
                    f"the {self.max_response_bytes} bytes a reply may have (max_response_bytes); not read further",
                    kind="malformed_response",
                    status=exc.status,
                    attempts=attempt + 1,
                ) from None
            except httpx.DecodingError as exc:  # a body its Content-Encoding does not describe
                raise AgentError(
                    f"malformed response: the body cannot be decoded ({self._redact(str(exc))})",
                    kind="malformed_response",
                    attempts=attempt + 1,
                ) from None
            except (httpx.LocalProtocolError, httpx.UnsupportedProtocol) as exc:
                # The request itself cannot be sent (a header or URL h11 refuses): no retry and
                # no outage can change that; the message may quote a header, so it is redacted.
                raise AgentError(
                    f"the request cannot be sent ({type(exc).__name__}: {self._redact(str(exc))}); "
                    "check the URL, the API key and the headers",
                    kind="client_error",
                    attempts=attempt + 1,
                ) from None
            except httpx.TransportError as exc:
                errors.append(f"connection error ({type(exc).__name__}: {self._redact(str(exc)) or 'no detail'})")
                # ConnectError: no connection was made (refused, unknown host). Only when no
                # attempt of this agent ever reached a server is the URL in doubt ("unreachable").
                connected = connected or not isinstance(exc, httpx.ConnectError)
                kind, status = ("connection" if connected else "unreachable"), None
            else:
                status = response.status
                connected = self.reached_server = True
                if 200 <= status < 300:
                    try:
                        reply = self._parse(response, attempt + 1)
                    except _Aborted as exc:
                        errors.append(self._redact(str(exc)))
                        kind = "server_error"
                    else:
                        meta: dict[str, Any] = {"attempts": attempt + 1, "latency_s": time.perf_counter() - started}
                        if shortened:
                            meta["max_tokens_sent"] = _requested_tokens(sent)
                        return reply, meta
                else:
                    detail = self._redact(f"HTTP {status}: {_error_detail(response)}")
                    text = response.text[:4000]
                    if status in (400, 413, 422) and _CONTEXT_OVERFLOW.search(text):
                        verdict, room = _context_verdict(text, _requested_tokens(sent))
                        if verdict == "limit":
                            raise AgentError(
                                f"{detail} (not retried: max_tokens {_requested_tokens(sent)} leaves no room "
                                "for any prompt in the model's context; lower --max-tokens or raise the "
                                "server's context length)",
                                kind="client_error",
                                status=status,
                                attempts=attempt + 1,
                            )
                        if verdict == "room" and room is not None and shortened < 2:
                            # The prompt fits, with less room than max_tokens: the completion may
                            # take what is left and end at the context, as a local engine's does.
                            shortened += 1
                            sent = _with_max_tokens(sent, room)
                            continue
                        # The model's answer, an empty one: this prompt never fits (CONTEXT_EXCEEDED).
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
            attempt += 1
            if attempt >= attempts:
                break
            await asyncio.sleep(delay if delay is not None else self._backoff_delay(attempt - 1))
        raise AgentError(
            f"gave up after {attempts} attempt(s); last error: {errors[-1]}",
            kind=kind,
            status=status,
            attempts=attempts,
        )

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> _Reply:
        """POST ``body`` and read the reply, at most :attr:`max_response_bytes` of it (decoded,
        so a compressed body cannot unfold past it either)."""
        limit = self.max_response_bytes
        async with client.stream("POST", self.url, json=body, headers=self._headers) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise _TooLarge(response.status_code, int(declared), declared=True)
            content = bytearray()
            async for chunk in response.aiter_bytes():
                content += chunk
                if len(content) > limit:
                    raise _TooLarge(response.status_code, len(content))
            return _Reply(response.status_code, response.headers, bytes(content), response.reason_phrase)

    def _redact(self, text: str) -> str:
        """``text`` with every secret of this agent (key, header values, URL secrets) hidden."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _parse(self, response: _Reply, attempts: int) -> dict[str, Any]:
        """The reply as plain data (what the cache stores), or :class:`AgentError`;
        :class:`_Aborted` when the server says it gave up on the request."""

        def malformed(why: str) -> AgentError:
            return AgentError(f"malformed response: {self._redact(why)}", kind="malformed_response", attempts=attempts)

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
        finish_reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        if not isinstance(finish_reason, str):  # (a list or an object: unhashable, and no reason)
            finish_reason = None
        if finish_reason in ABORTED_FINISH_REASONS:
            # (an engine abort was played as the model's empty answer, and cached)
            said = choice.get("error") or data.get("error")
            said = said.get("message") if isinstance(said, dict) else said
            raise _Aborted(
                f"HTTP {response.status} with finish_reason {finish_reason!r}: the server gave up on the "
                f"request" + (f" ({_snippet(str(said))})" if said else "")
            )
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
            "finish_reason": finish_reason,
            "model": data.get("model") if isinstance(data.get("model"), str) else None,
        }


@dataclass(frozen=True)
class _Reply:
    """A reply read whole (within the size limit): what the parsing needs of an httpx response."""

    status: int
    headers: httpx.Headers
    content: bytes
    reason: str

    @property
    def text(self) -> str:
        match = re.search(r"charset=([\w-]+)", self.headers.get("content-type", ""), re.IGNORECASE)
        try:
            return self.content.decode(match.group(1) if match else "utf-8", errors="replace")
        except LookupError:  # an unknown charset
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class _TooLarge(Exception):
    """A reply body past ``max_response_bytes`` (declared by its Content-Length, or read)."""

    def __init__(self, status: int, size: int, *, declared: bool = False) -> None:
        super().__init__(status, size)
        self.status, self.size, self.declared = status, size, declared

    def size_text(self) -> str:
        return f"{self.size} bytes (its Content-Length)" if self.declared else f"over {self.size - 1} bytes"


class _Aborted(Exception):
    """HTTP 200 whose finish reason says the server gave up (:data:`ABORTED_FINISH_REASONS`)."""


def _storable(reply: dict[str, Any]) -> bool:
    """Whether a reply is a model's answer the cache may keep: never a refusal (a context
    overflow, whose server may be reconfigured) nor a server's abort."""
    reason = reply.get("finish_reason")
    aborted = isinstance(reason, str) and reason in ABORTED_FINISH_REASONS
    return reason != CONTEXT_EXCEEDED and not aborted and not reply.get("server_said")


def _requested_tokens(body: dict[str, Any]) -> int | None:
    """The completion limit a request body asks for (``max_completion_tokens`` or
    ``max_tokens``), or ``None``."""
    for field_name in ("max_completion_tokens", "max_tokens"):
        value = body.get(field_name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _with_max_tokens(body: dict[str, Any], tokens: int) -> dict[str, Any]:
    """``body`` with its completion limit set to ``tokens``."""
    fields = [f for f in ("max_completion_tokens", "max_tokens") if f in body] or ["max_tokens"]
    return {**body, **{f: tokens for f in fields}}


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


# What the context-length refusals say in numbers: the model's context C, the prompt's tokens I
# (vLLM's two wordings, OpenAI's, SGLang's, TGI's, llama.cpp's), so that a refusal can be told
# apart: max_tokens >= C (no prompt ever fits: a configuration error), I < C (the prompt fits
# with C - I tokens of room), I >= C (the prompt itself is too long: the model's empty answer).
_CONTEXT_SIZE = re.compile(
    r"maximum context length (?:is|of) (\d+)|context length \((\d+) tokens\)|must be <= (\d+)"
    r"|maximum model length of (\d+)|available context size \((\d+) tokens\)",
    re.IGNORECASE,
)
_PROMPT_SIZE = re.compile(
    r"request has (\d+) input tokens|\((\d+) in the messages|(\d+) tokens from the input"
    r"|the input \((\d+) tokens\)|Given: (\d+) `inputs` tokens|request \((\d+) tokens\)"
    r"|prompt \(length (\d+)\)",
    re.IGNORECASE,
)


def _first_number(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    if match is None:
        return None
    return int(next(group for group in match.groups() if group is not None))


def _context_verdict(text: str, max_tokens: int | None) -> tuple[str, int | None]:
    """What a context-length refusal means: ``("limit", None)`` when ``max_tokens`` alone
    fills the model's context (the request's limit is wrong, whatever the prompt);
    ``("room", R)`` when the prompt fits and leaves R < ``max_tokens`` tokens; else
    ``("overflow", None)``: the prompt does not fit (or the server gave no numbers)."""
    context = _first_number(_CONTEXT_SIZE, text)
    prompt = _first_number(_PROMPT_SIZE, text)
    if max_tokens is not None and context is not None and max_tokens >= context:
        return "limit", None
    if max_tokens is not None and context is not None and prompt is not None and 0 < context - prompt < max_tokens:
        return "room", context - prompt
    return "overflow", None


#: Query fields whose values are credentials (``?api_key=``, ``?key=``, ``?token=``, Azure's ``sig``).
_SECRET_FIELD = re.compile(r"key|token|secret|passw|pwd|auth|credential|^sig$|^signature$|^code$", re.IGNORECASE)
# (a value ends at "@" too: in a spec or a command line, "@MODEL" follows the URL)
_QUERY_FIELD = re.compile(r"(^|[&;])([^=&;]*)=([^&;#@]*)")
_URL_IN_TEXT = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` as it may be shown or written: its user-info (``user:password@``) and the values of
    query fields that hold credentials replaced by ``***``; still sent as given."""
    try:
        split = urllib.parse.urlsplit(url)
    except ValueError:  # not a URL at all: hide anything that looks like user-info
        return re.sub(r"://[^/@\s]*@", "://***@", url)
    netloc = split.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]

    def hide(match: re.Match[str]) -> str:
        name = urllib.parse.unquote_plus(match.group(2))
        return f"{match.group(1)}{match.group(2)}=***" if _SECRET_FIELD.search(name) else match.group(0)

    query = _QUERY_FIELD.sub(hide, split.query)
    if netloc == split.netloc and query == split.query:
        return url
    return urllib.parse.urlunsplit(split._replace(netloc=netloc, query=query))


def redact_text(text: str) -> str:
    """``text`` (a command line, a message) with every URL in it passed through :func:`redact_url`."""
    return _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)


def _secret_strings(values: Sequence[str], url: str) -> list[str]:
    """The strings an error message must not show: ``values`` (the key, header values) and the
    URL's user-info and credential query values, each also as ``repr`` shows it (h11 quotes a
    header it refuses as ``b'...'``); longest first, so a part never leaves the rest visible."""
    found: set[str] = set()
    split = urllib.parse.urlsplit(url)
    if "@" in split.netloc:
        userinfo = split.netloc.rpartition("@")[0]
        found.update([userinfo, *userinfo.split(":", 1)])
    for match in _QUERY_FIELD.finditer(split.query):
        if _SECRET_FIELD.search(urllib.parse.unquote_plus(match.group(2))):
            found.update([match.group(3), urllib.parse.unquote_plus(match.group(3))])
    for value in values:
        found.add(value)
        if value.startswith("Bearer "):
            found.add(value[len("Bearer "):])
    forms: set[str] = set()
    for secret in found:
        forms.update({secret, secret.strip(), repr(secret)[1:-1], repr(secret.encode("utf-8", "backslashreplace"))[2:-1]})
    # Short strings ("a", "key") would blank out ordinary words of a message.
    return sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)


_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_CHARACTER_NAMES = {"\r": "a carriage return (\\r)", "\n": "a line feed (\\n)", "\0": "a NUL character"}


def _header_problem(name: str, value: Any) -> str | None:
    """Why the header ``name: value`` cannot be sent (h11 refuses it, or httpx cannot encode
    it), in words that never quote the value; ``None`` when it can."""
    if not _HEADER_NAME.match(name):
        return "has a name that is not an HTTP token"
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    for position, char in enumerate(value):
        code = ord(char)
        if char == "\t" or 32 <= code < 127:
            continue
        what = _CHARACTER_NAMES.get(char) or (
            f"the non-ASCII character U+{code:04X}" if code > 127 else f"the control character U+{code:04X}"
        )
        where = ("at its end" if position == len(value) - 1 else "at its start" if position == 0
                 else f"at position {position + 1} of {len(value)}")
        return f"contains {what} {where}"
    if value != value.strip(" \t"):
        return "starts or ends with a space"
    return None


def _safe_name(name: str) -> str:
    """A header name for a message: quoted when it is a token, else described."""
    return repr(name) if _HEADER_NAME.match(name) else "(a name with characters a header name cannot have)"


def _snippet(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _error_detail(response: _Reply) -> str:
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
    return _snippet(response.text.strip()) or response.reason


def _token_logprobs(choice: dict[str, Any]) -> list[float] | None:
    try:
        content = choice["logprobs"]["content"]
        return [float(item["logprob"]) for item in content]
    except (KeyError, TypeError, ValueError):
        return None
