"""Docker backend: the missing-engine error is tested everywhere; real-engine tests skip without one.

The isolation battery in test_isolation.py also runs on docker (its ``docker`` parameter) where
an engine answers and the image is present.
"""

from __future__ import annotations

import socket

import pytest

import sandboxes
from sandboxes import Limits, SandboxUnavailable

docker = pytest.importorskip("docker", reason="the docker SDK (the `docker` extra) is not installed")

from sandboxes.docker_backend import DockerSandbox, connect  # noqa: E402


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_engine_docker_exception_is_a_clear_error(monkeypatch):
    # docker.from_env() raises DockerException when nothing listens on the socket.
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable) as info:
        sandboxes.make_sandbox("docker")
    message = str(info.value)
    assert "cannot reach a Docker engine" in message
    assert "DockerException" in message
    assert "DOCKER_HOST" in message and "start the engine" in message


def test_no_engine_with_pinned_version_requests_error_is_a_clear_error():
    # With a pinned API version the client is built without contacting the engine; ping() then
    # raises requests' ConnectionError, which is not a DockerException.
    client = docker.DockerClient(base_url=f"tcp://127.0.0.1:{_closed_port()}", version="1.43", timeout=2)
    with pytest.raises(SandboxUnavailable) as info:
        connect(client)
    message = str(info.value)
    assert "cannot reach a Docker engine" in message and "ConnectionError" in message
    with pytest.raises(SandboxUnavailable, match="cannot reach a Docker engine"):
        DockerSandbox(docker_client=client)


def test_auto_reports_why_docker_was_skipped(monkeypatch, caplog):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    caplog.set_level("INFO", logger="sandboxes")
    with sandboxes.make_sandbox("auto", pool_size=1, preload=[]) as sandbox:
        assert sandbox.name != "docker"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "sandboxes"]
    assert "skipped docker: cannot reach a Docker engine" in line


@pytest.fixture(scope="module")
def engine_sandbox():
    try:
        sandbox = DockerSandbox(pool_size=1, preload=[])
        sandbox.probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"no usable Docker engine here: {exc}")
    yield sandbox
    sandbox.close()


def test_engine_runs_program(engine_sandbox):
    res = engine_sandbox.run("import os\nprint(input(), os.getuid())", stdin="hello")
    assert res.ok and res.stdout.startswith("hello ") and not res.stdout.endswith(" 0\n")
    assert res.backend == "docker"


def test_engine_no_network_and_read_only_root(engine_sandbox):
    res = engine_sandbox.run(
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=1)\n    print('CONNECTED')\n"
        "except OSError as exc:\n    print('blocked')\ntry:\n    open('/usr/x', 'w')\nexcept OSError:\n    print('ro')"
    )
    assert "CONNECTED" not in res.stdout and "ro" in res.stdout


def test_engine_timeout_recycles_container(engine_sandbox):
    res = engine_sandbox.run("while True:\n    pass", limits=Limits(time_s=1))
    assert res.timed_out
    assert engine_sandbox.run("print(1)").stdout == "1\n"
