"""The server: OpenEnv's ``HTTPEnvServer`` routes over :class:`~.session.TextEnvSession`, a guard
on message size, an ``/info`` endpoint, and :func:`serve` (uvicorn).

Routes (OpenEnv's, unchanged): ``/ws`` (one session per connection), ``/health``, ``/schema``
(JSON schemas of action, observation and state), ``/metadata``, and the stateless HTTP
``/reset`` and ``/step`` (each builds a fresh instance, as OpenEnv defines them: episodes need
``/ws``). Added: ``/info`` (the environment, its agents and options, sessions open and allowed).

Environment steps can block (a sandbox runs a program): OpenEnv runs each session's reset and
step on that session's own worker thread, so a slow session never stalls the event loop or the
other sessions. Every session's environment shares the process's warm sandbox pool
(``sandboxes.shared_sandbox``), started by the first session that runs a program.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import ConcurrencyConfig
from starlette.websockets import WebSocketDisconnect

import llm_envs

from .protocol import DEFAULT_MAX_MESSAGE_BYTES, EXPIRED_PREFIX, MESSAGE_TOO_LARGE
from .session import SessionError, TextAction, TextEnvSession, TextObservation

#: Seconds between two sweeps for idle sessions, at most (OpenEnv's own reaper sweeps every 5 s
#: or more, too coarse for short timeouts).
REAPER_MAX_INTERVAL_S = 5.0


class TextEnvServer(HTTPEnvServer):
    """OpenEnv's server with an idle-session sweep scaled to the timeout, in which every message
    counts as activity."""

    async def _reap_idle_sessions(self) -> None:
        timeout = self._session_idle_timeout_s
        if timeout is None:
            return
        interval = min(max(timeout / 4, 0.05), REAPER_MAX_INTERVAL_S)
        while True:
            try:
                await asyncio.sleep(interval)
                async with self._session_lock:
                    stale = [sid for sid in self._session_info if self._idle_for(sid) > timeout]
                for sid in stale:
                    async with self._session_lock:
                        if sid not in self._session_info or self._idle_for(sid) <= timeout:
                            continue  # a message arrived in the meantime
                    await self._destroy_session(sid)
            except asyncio.CancelledError:
                break
            except Exception as exc:  # keep sweeping; a failed close must not stop expiry
                print(f"llm-envs serve: idle-session sweep failed (retrying): {exc!r}", file=sys.stderr)

    def _idle_for(self, session_id: str) -> float:
        """Seconds since the session's last message (``state`` counts, unlike in OpenEnv's clock)."""
        info = self._session_info[session_id]
        last = max(info.last_activity_at, getattr(self._sessions.get(session_id), "last_activity", 0.0))
        return time.time() - last

    async def close_all_sessions(self) -> None:
        """Close every session's environment (on shutdown): a message still in flight gets an
        error, never an observation of a half-closed episode."""
        for sid in list(self._sessions):
            await self._destroy_session(sid)


def _json_problem(text: str) -> tuple[str, str] | None:
    """``(code, message)`` where ``text`` is JSON OpenEnv's handler cannot take, else ``None``:
    a value that is not an object (its handler calls ``.get`` on it outside its error handling),
    or JSON Python cannot read as data — nested too deep (``RecursionError``) or an integer too
    long — which escaped its handler and closed the session with its episode. Text that is not
    JSON at all is left to that handler (``INVALID_JSON``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    except (ValueError, RecursionError) as exc:
        return "INVALID_JSON", f"the message cannot be read ({type(exc).__name__}: {str(exc)[:120]}); it changed nothing"
    if isinstance(value, dict):
        return None
    kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
    return "VALIDATION_ERROR", f"a message is a JSON object with a \"type\", got {kind}; it changed nothing"


class MessageSizeGuard:
    """An ASGI wrapper around the WebSocket connections and the HTTP requests.

    * A message over ``max_bytes`` (or a binary frame) gets an error frame and is never passed
      on: the session and its episode stay as they were. An HTTP request whose body is over
      ``max_bytes`` (by its ``Content-Length``, or as it streams in) gets a 413 and is not read
      further.
    * A connection silent for ``idle_timeout_s`` gets an error frame saying its session expired
      and is closed (the session with it), so idle clients hold neither a session nor a socket.
    """

    def __init__(self, app: Any, max_bytes: int, idle_timeout_s: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.idle_timeout_s = idle_timeout_s

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Read the request's body (at most ``max_bytes`` of it) before the app sees it: a 413 for
        a larger one, by its ``Content-Length`` or as it streams in, never read further."""
        too_large = JSONResponse(
            status_code=413, content={"detail": f"request body over this server's limit of {self.max_bytes} bytes; it was not read"}
        )
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.strip().isdigit() and int(value) > self.max_bytes:
                await too_large(scope, receive, send)
                return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
            return
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return

        async def guarded_receive() -> dict[str, Any]:
            while True:
                try:
                    message = await asyncio.wait_for(receive(), self.idle_timeout_s)
                except asyncio.TimeoutError:
                    if scope.get("llm_envs_accepted"):
                        error = {"type": "error", "data": {"message": f"{EXPIRED_PREFIX}: no message for "
                                 f"{self.idle_timeout_s:g} s; the connection is closed", "code": "SESSION_EXPIRED"}}
                        await send({"type": "websocket.send", "text": json.dumps(error)})
                    return {"type": "websocket.disconnect", "code": 1001}
                if message["type"] != "websocket.receive":
                    return message
                text = message.get("text")
                if text is None:
                    problem = "binary frames are not part of the protocol: send JSON as text"
                elif len(text) > self.max_bytes // 4 and len(text.encode("utf-8", "surrogatepass")) > self.max_bytes:
                    size = len(text.encode("utf-8", "surrogatepass"))
                    problem = f"message of {size} bytes is over this server's limit of {self.max_bytes} bytes"
                elif (found := _json_problem(text)) is not None:
                    code, problem = found
                    error = {"type": "error", "data": {"message": problem, "code": code}}
                    await send({"type": "websocket.send", "text": json.dumps(error)})
                    continue
                else:
                    return message
                error = {"type": "error", "data": {"message": f"{problem}; it was not read", "code": MESSAGE_TOO_LARGE}}
                await send({"type": "websocket.send", "text": json.dumps(error)})

        async def tracked_send(message: dict[str, Any]) -> None:
            if message["type"] == "websocket.accept":
                scope["llm_envs_accepted"] = True
            await send(message)

        try:
            await self.app(scope, guarded_receive, tracked_send)
        except WebSocketDisconnect:
            pass  # the client went away while the session was closing: nothing left to tell it


def create_app(
    env_id: str,
    env_options: dict[str, Any] | None = None,
    *,
    max_sessions: int = 64,
    idle_timeout_s: float | None = 600.0,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    expose_reference: bool = False,
    client_options: bool = True,
) -> Any:
    """The ASGI app serving ``env_id``: every WebSocket session gets its own instance.

    Args:
        env_id: A registered environment id.
        env_options: Keyword options of ``llm_envs.make`` for every session (a reset may
            override them); checked here by building one instance.
        max_sessions: Sessions open at once; one more gets OpenEnv's ``CAPACITY_REACHED`` error.
        idle_timeout_s: A session without a message for this long is closed (``None``: never).
        max_message_bytes: Larger incoming messages get a ``MESSAGE_TOO_LARGE`` error frame.
        expose_reference: Put the reference agent's action in ``state`` (see
            :class:`~.session.TextEnvSession`).
        client_options: Let a reset set options (except
            :data:`~.session.SERVER_ONLY_OPTIONS`); False: every option is the server's.
    """
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
    if idle_timeout_s is not None and idle_timeout_s <= 0:
        raise ValueError(f"idle_timeout_s must be > 0 (or None), got {idle_timeout_s}")
    if max_message_bytes < 1024:
        raise ValueError(f"max_message_bytes must be >= 1024, got {max_message_bytes}")
    entry = llm_envs.entry(env_id)  # KeyError for an unknown id
    options = dict(env_options or {})
    probe = llm_envs.make(entry.id, **options)  # unknown options fail here, not in every session
    agents = list(probe.possible_agents)
    probe.close()
    factory = functools.partial(TextEnvSession, entry.id, options, expose_reference=expose_reference,
                                client_options=client_options)
    server = TextEnvServer(
        factory,
        TextAction,
        TextObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s),
    )
    app = FastAPI(title=f"llm-envs serve {entry.id}", version=llm_envs.__version__)
    server.register_routes(app)
    # OpenEnv's /mcp routes create and close sessions without a connection: stateless POSTs
    # filled every session slot. The served protocol is /ws (and the stateless /reset, /step).
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", "") != "/mcp"]

    @app.get("/info", tags=["Environment Info"], summary="The served environment and its sessions")
    async def info() -> dict[str, Any]:
        return {
            "env_id": entry.id,
            "description": entry.description,
            "possible_agents": agents,
            "options": {k: repr(v) if not isinstance(v, (str, int, float, bool)) else v for k, v in options.items()},
            "active_sessions": server.active_sessions,
            "max_sessions": max_sessions,
            "idle_timeout_s": idle_timeout_s,
            "max_message_bytes": max_message_bytes,
            "expose_reference": expose_reference,
            "client_options": client_options,
            "protocol": "openenv-ws",
            "version": llm_envs.__version__,
        }

    async def refused(request: Any, exc: Exception) -> Any:
        # OpenEnv's stateless HTTP /step builds a fresh instance: there is no episode to step.
        hint = " (HTTP /reset and /step are stateless: play episodes over the WebSocket /ws)"
        return JSONResponse(status_code=409, content={"detail": f"{exc}{hint}"})

    app.add_exception_handler(SessionError, refused)
    app.router.on_shutdown.append(server.close_all_sessions)
    app.state.env_server = server
    guarded = MessageSizeGuard(app, max_message_bytes, idle_timeout_s)
    guarded.state = app.state  # type: ignore[attr-defined]
    return guarded


def uvicorn_config(app: Any, host: str, port: int, max_message_bytes: int, log_level: str = "warning") -> Any:
    """The uvicorn settings the server runs with (also used by in-process test servers)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        # The transport's own limit sits well above the guard's, so an oversized message gets
        # the guard's error frame; past this the connection is closed (code 1009).
        ws_max_size=max(8 * max_message_bytes, 16 << 20),
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        timeout_graceful_shutdown=5,
        lifespan="on",
    )


def serve(
    env_id: str,
    env_options: dict[str, Any] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    **app_options: Any,
) -> None:
    """Build :func:`create_app` and run it until interrupted (SIGINT/SIGTERM)."""
    import uvicorn

    app = create_app(env_id, env_options, **app_options)
    max_bytes = app_options.get("max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES)
    server = uvicorn.Server(uvicorn_config(app, host, port, max_bytes, log_level))
    print(f"serving {env_id} on http://{host}:{port} (WebSocket ws://{host}:{port}/ws)", file=sys.stderr, flush=True)
    server.run()
