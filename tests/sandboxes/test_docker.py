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

from sandboxes.docker_backend import DockerSandbox, connect


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


# ---------------------------------------------------------------------------------------------
# The backend's own logic (container settings, Docker's multiplexed attach stream, the pool,
# recycling) against a stand-in for the engine: a docker-SDK-shaped client whose "containers"
# are bubblewrap sandboxes. Only the engine is replaced; the worker, framing and pool are real.
# ---------------------------------------------------------------------------------------------

import os
import struct
import subprocess
import sys
import threading


class _FakeContainer:
    def __init__(self, engine: _FakeEngine, command: list[str], settings: dict) -> None:
        self.engine, self.command, self.settings = engine, command, settings
        self.attrs = {"State": {"Running": False, "ExitCode": None, "OOMKilled": False}}
        self._outside, self._inside = socket.socketpair()
        self.proc: subprocess.Popen | None = None
        self.removed = False

    def attach_socket(self, params):
        assert params == {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        return self._inside

    def start(self) -> None:
        from sandboxes.pool import _Spawner

        argv, via_launcher = self.engine.bwrap._launch(self.command)
        self.proc = _Spawner.popen(
            lambda: subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        )
        if via_launcher:  # as root, bubblewrap's launcher reports first; a real engine has none
            (length,) = struct.unpack(">I", self.proc.stdout.read(4))
            self.proc.stdout.read(length)
        self.attrs["State"]["Running"] = True
        threading.Thread(target=self._pump_in, daemon=True).start()
        for stream, pipe in ((1, self.proc.stdout), (2, self.proc.stderr)):
            threading.Thread(target=self._pump_out, args=(stream, pipe), daemon=True).start()

    def _pump_in(self) -> None:
        while True:
            try:
                data = self._outside.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
                return
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except OSError:
                return

    def _pump_out(self, stream: int, pipe) -> None:
        while True:
            data = os.read(pipe.fileno(), 65536)
            if not data:
                return
            try:  # Docker's framing: stream id, 3 zero bytes, big-endian payload length
                self._outside.sendall(struct.pack(">BxxxI", stream, len(data)) + data)
            except OSError:
                return

    def reload(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            self.attrs["State"].update(Running=False, ExitCode=self.proc.returncode)

    def logs(self, **_):
        return b""

    def remove(self, force: bool = False) -> None:
        assert force
        self.removed = True
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self.reload()
        for sock in (self._outside, self._inside):
            sock.close()


class _FakeEngine:
    def __init__(self, bwrap_sandbox) -> None:
        self.bwrap = bwrap_sandbox
        self.created: list[_FakeContainer] = []
        self.images = self
        self.containers = self

    def ping(self) -> bool:
        return True

    def get(self, image: str) -> str:  # images.get
        return image

    def create(self, image: str, command: list[str], **settings) -> _FakeContainer:  # containers.create
        container = _FakeContainer(self, command, settings)
        self.created.append(container)
        return container


@pytest.fixture
def fake_engine_sandbox():
    from sandboxes.local import BwrapSandbox

    try:
        bwrap = BwrapSandbox(pool_size=1, preload=[], heavy_preload=())
        bwrap.probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the stand-in engine runs containers in bubblewrap, unavailable here: {exc}")
    engine = _FakeEngine(bwrap)
    sandbox = DockerSandbox(
        docker_client=engine, pool_size=2, preload=[], heavy_preload=(), python_in_image=os.path.realpath(sys.executable)
    )
    yield sandbox, engine
    sandbox.close()
    bwrap.close()


def test_docker_backend_logic_against_stand_in_engine(fake_engine_sandbox):
    sandbox, engine = fake_engine_sandbox
    res = sandbox.run("import sys\nprint(input()[::-1])\nprint('warn', file=sys.stderr)", stdin="abc")
    assert res.ok and res.stdout == "cba\n" and res.stderr == "warn\n" and res.backend == "docker"
    settings = engine.created[0].settings
    assert settings["network_mode"] == "none" and settings["read_only"] is True
    assert settings["cap_drop"] == ["ALL"] and "no-new-privileges" in settings["security_opt"]
    assert settings["user"] != "0" and not settings["user"].startswith("0:") and settings["user"] != "root"
    assert settings["pids_limit"] > 0 and settings["mem_limit"] == settings["memswap_limit"]
    assert "/tmp" in settings["tmpfs"] and settings["stdin_open"] is True and settings["tty"] is False
    results = sandbox.run_batch([sandboxes.Job(f"print({i} * 2)") for i in range(10)])
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(10)]
    big = sandbox.run("print('x' * 300000)", limits=Limits(output_bytes=500_000))
    assert big.ok and len(big.stdout) == 300001  # frames split across many socket reads


def test_docker_backend_recycles_container_after_timeout(fake_engine_sandbox):
    sandbox, engine = fake_engine_sandbox
    assert sandbox.run("print(1)").ok
    before = len(engine.created)
    res = sandbox.run("while True:\n    pass", limits=Limits(time_s=0.5))
    assert res.timed_out and res.exit_code is None
    assert sandbox.run("print(2)").stdout == "2\n"
    assert any(c.removed for c in engine.created) and len(engine.created) > before
