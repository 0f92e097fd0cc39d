"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

It answers ``POST /v1/chat/completions`` like a perfect model of the test environment
(:func:`tests.runner.toy_envs.solve_prompt` on the last user message), and can be told to
misbehave per request through :attr:`ChatServer.plan`: a function of (request number, body)
returning one of

``"ok"``                 a normal answer
``"429"`` / ``"429:S"``  HTTP 429, with ``Retry-After: S`` seconds (default 0)
``"429ms:MS"``           HTTP 429 with ``retry-after-ms: MS``
``"500"``, ``"503"``...  that HTTP status with an OpenAI-style error body
``"sleep:S"``            answer normally after S seconds (to trigger client timeouts)
``"reset"``              start a reply, then drop the connection mid-body
``"down"``               the server dies: it stops listening (new connections are refused)
                         and drops every connection, this one included, without replying
``"not-json"``           HTTP 200 with a body that is not JSON
``"no-choices"``         HTTP 200 with JSON that has no ``choices``
``"null-content"``       HTTP 200 with ``message.content`` null

With ``model`` set, a request for another model gets HTTP 400 with an OpenAI-style error (what
a server says to a mistyped model name). ``port`` binds a given port (to restart a server on the
port an interrupted run used). ``delay_of`` gives a per-request delay (a function of the
request number and body) on top of ``delay_s``.

It counts requests and the largest number handled at once (``max_in_flight``), and keeps every
request body and its headers.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.runner.toy_envs import solve_prompt


class ChatServer:
    def __init__(self, delay_s: float = 0.0, *, model: str | None = None, port: int = 0) -> None:
        self.delay_s = delay_s
        self.model = model
        self.plan: Callable[[int, dict[str, Any]], str] = lambda number, body: "ok"
        self.status_body: tuple[int, Any] = (400, {})  # what the "body-status" action sends
        self.delay_of: Callable[[int, dict[str, Any]], float] | None = None
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.stop = threading.Event()  # wakes sleeping handlers at teardown
        self.is_down = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # one small response must not wait for a delayed ACK

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                server._handle(self)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the default 5 drops connections when many arrive at once

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        if self.is_down:
            self.wait_down()
        else:
            self._stop_listening()

    # ------------------------------------------------------------------ request handling
    def go_down(self) -> None:
        """Die like a killed process: stop listening, drop every connection."""
        if self.is_down:
            return
        self.is_down = True
        self._down_thread = threading.Thread(target=self._stop_listening, daemon=True)
        self._down_thread.start()

    def wait_down(self, timeout_s: float = 10.0) -> None:
        """Wait until the port is free again (after ``go_down``)."""
        self._down_thread.join(timeout_s)

    def _stop_listening(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def _drop(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        try:
            handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        if self.is_down:  # a kept-alive connection to a dead server
            self._drop(handler)
            return
        length = int(handler.headers.get("Content-Length", 0))
        body = json.loads(handler.rfile.read(length) or b"{}")
        with self.lock:
            number = len(self.requests)
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in handler.headers.items()})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if handler.path != "/v1/chat/completions":
                self._send(handler, 404, {"error": {"message": f"no route {handler.path}"}})
                return
            if self.model is not None and body.get("model") != self.model:
                self._send(
                    handler,
                    400,
                    {"error": {"message": f"The model `{body.get('model')}` does not exist.", "code": 400}},
                )
                return
            action = self.plan(number, body)
            if action == "down":
                self.go_down()
                self._drop(handler)
                return
            delay = self.delay_s + (self.delay_of(number, body) if self.delay_of else 0.0)
            if delay:
                self.stop.wait(delay)
            self._respond(handler, action, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _respond(self, handler: BaseHTTPRequestHandler, action: str, body: dict[str, Any]) -> None:
        kind, _, arg = action.partition(":")
        if kind == "sleep":
            self.stop.wait(float(arg))
            kind = "ok"
        if kind == "ok":
            user = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"][-1]
            words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
            self._send(
                handler,
                200,
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": int(time.time()),  # required by strict clients (verifiers' openai models)
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": solve_prompt(user)},
                            "finish_reason": "stop",
                            "logprobs": {"content": [{"token": "x", "logprob": -0.25, "top_logprobs": []}]},
                        }
                    ],
                    "usage": {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1},
                },
            )
        elif kind == "reset":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "1000")
            handler.end_headers()
            handler.wfile.write(b'{"id": "chatcmpl-test", "choi')
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
        elif kind == "429":
            self._send(handler, 429, {"error": {"message": "rate limited"}}, {"Retry-After": arg or "0"})
        elif kind == "429ms":
            self._send(handler, 429, {"error": {"message": "rate limited"}}, {"retry-after-ms": arg})
        elif kind.isdigit():
            self._send(handler, int(kind), {"error": {"message": f"server says {kind}"}})
        elif kind == "not-json":
            self._send_raw(handler, 200, b"<html>502 Bad Gateway</html>", "text/html")
        elif kind == "no-choices":
            self._send(handler, 200, {"id": "x", "object": "chat.completion", "choices": []})
        elif kind == "body-status":  # the status and JSON body in self.status_body
            status, payload = self.status_body
            self._send(handler, status, payload)
        elif kind == "body":  # a 200 whose body is the text after "body:", as written
            self._send_raw(handler, 200, arg.encode(), "application/json")
        elif kind == "null-content":
            self._send(handler, 200, {"choices": [{"message": {"role": "assistant", "content": None}}]})
        else:
            raise ValueError(f"unknown plan action {action!r}")

    def _send(
        self, handler: BaseHTTPRequestHandler, status: int, data: Any, headers: dict[str, str] | None = None
    ) -> None:
        self._send_raw(handler, status, json.dumps(data).encode(), "application/json", headers)

    @staticmethod
    def _send_raw(
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(payload)
        handler.wfile.flush()


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
