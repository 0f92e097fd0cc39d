"""Servers for the tests: in-process (a uvicorn thread, for most tests) or a subprocess
(``llm-envs serve``, to kill it), always on 127.0.0.1 and a free port."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.optional import import_or_skip  # noqa: E402

import_or_skip("openenv.core", "serve", "the serve extra (openenv-core) is not installed")

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, timeout: float = 60.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}: {process.stderr.read() if process.stderr else ''}")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"no server at {url} after {timeout} s")


@contextlib.contextmanager
def in_process_server(env_id: str, env_options: dict[str, Any] | None = None, *, port: int | None = None,
                      servers: list | None = None, **app_options: Any) -> Iterator[str]:
    """``create_app`` served by uvicorn on a thread; yields the base URL (``servers`` receives
    the uvicorn server, to stop it from a test)."""
    import uvicorn

    from llm_envs.serve.app import create_app, uvicorn_config
    from llm_envs.serve.protocol import DEFAULT_MAX_MESSAGE_BYTES

    app = create_app(env_id, env_options, **app_options)
    port = port or free_port()
    config = uvicorn_config(app, "127.0.0.1", port, app_options.get("max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES))
    server = uvicorn.Server(config)
    if servers is not None:
        servers.append(server)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=30)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextlib.contextmanager
def subprocess_server(env_id: str, *args: str, port: int | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m llm_envs.cli serve ENV_ID --port P ARGS``; yields (base URL, process)."""
    port = port or free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "llm_envs.cli", "serve", env_id, "--port", str(port), *args],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process=process)
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
