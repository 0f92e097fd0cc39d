"""Docker backend: the missing-engine error everywhere; on a real engine, every setting it claims.

The real-engine tests use the engine that tests/sandboxes/conftest.py finds (DOCKER_HOST, or
the project's own one started by ``python -m sandboxes.docker_engine start``); without one they
skip with the reason, and fail instead where SANDBOX_TESTS_REQUIRE names docker (as `make test`
sets it once it brought the engine up). The isolation battery in test_isolation.py also runs on
docker (its ``docker`` parameter).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import sandboxes
from sandboxes import Limits, SandboxUnavailable, docker_engine
from tests.sandboxes.conftest import docker_engine_options, make

docker = pytest.importorskip("docker", reason="the docker SDK (the `docker` extra) is not installed")

from sandboxes import docker_backend
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
    assert "DOCKER_HOST" in message and "python -m sandboxes.docker_engine start" in message


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


def test_root_user_is_refused_before_anything_starts():
    for user in ("0", "root", "0:0", "1000:0", "root:root"):
        with pytest.raises(ValueError, match="never run as root"):
            DockerSandbox(user=user)


def test_image_tag_follows_the_recipe():
    tag = docker_engine.image_tag()
    assert tag == docker_backend.DEFAULT_IMAGE and tag.startswith("llm-envs-sandbox:")
    assert docker_engine.image_tag(dict(docker_engine.IMAGE_RECIPE)) == tag  # a copy hashes the same
    changed = dict(docker_engine.IMAGE_RECIPE, include=["python3"])
    assert docker_engine.image_tag(changed) != tag


def test_attach_stream_demux_never_buffers_a_whole_announced_frame():
    # Docker frames are only chunking: a header announcing 2 GiB of stdout must hand bytes on as
    # they come (the protocol layer above bounds its own frames), and stderr frames are kept
    # only as a short tail for error messages.
    worker = object.__new__(docker_backend._ContainerWorker)
    worker._raw, worker._frame_stream, worker._frame_left, worker._stderr_seen = bytearray(), 0, 0, b""
    header = struct.Struct(">BxxxI")
    worker._raw += header.pack(2, 5) + b"warn\n" + header.pack(1, 2**31) + b"0123456789"
    assert worker._demux() == b"0123456789"
    assert worker._stderr_seen == b"warn\n" and worker._frame_left == 2**31 - 10 and not worker._raw
    worker._raw += b"abc" + header.pack(2, 1)  # still inside the big stdout frame: all stdout
    assert worker._demux() == b"abc" + header.pack(2, 1)
    worker._frame_left = 0
    worker._raw += header.pack(2, 10_000) + b"e" * 10_000 + header.pack(1, 3) + b"end" + header.pack(1, 9)[:4]
    assert worker._demux() == b"end" and worker._stderr_seen == b"e" * 4000
    assert worker._raw == header.pack(1, 9)[:4]  # half a header waits for the rest


# ---------------------------------------------------------------------------------------------
# On a real engine
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_sandbox():
    sandbox = make("docker", pool_size=1, preload=[])
    yield sandbox
    sandbox.close()


@pytest.fixture
def client():
    """A client of the engine the docker tests use (skips as `make` does without one)."""
    make("docker", pool_size=1, preload=[]).close()  # skip or fail exactly as the backend does
    options = docker_engine_options()
    return options.get("docker_client") or docker.from_env()


def _containers(sandbox) -> list:
    """The containers of a sandbox's live workers."""
    pools = [sandbox._pool.light] + ([sandbox._pool.heavy] if sandbox._pool.heavy else [])
    return [worker.container for pool in pools for worker in list(pool._all)]


def _engine_env() -> dict[str, str]:
    """Environment for a child Python that must reach the same engine as these tests."""
    env = dict(os.environ)
    if not env.get("DOCKER_HOST") and docker_engine.engine_host():
        env["DOCKER_HOST"] = docker_engine.docker_host()
    return env


def test_engine_runs_program(engine_sandbox):
    res = engine_sandbox.run("import os\nprint(input(), os.getuid())", stdin="hello")
    assert res.ok and res.stdout.startswith("hello "), res
    uid = int(res.stdout.split()[1])
    assert uid not in (0, 65534) and uid >= 1_000_000  # a random uid of its own, not nobody's
    assert res.backend == "docker"


def test_engine_default_image_is_the_recipe_image_with_numpy_and_sympy(engine_sandbox):
    assert engine_sandbox.image == docker_engine.image_tag()
    res = engine_sandbox.run(
        "import sys, numpy, sympy\nprint(sys.version_info[:2] >= (3, 9), sympy.Integer(2) ** 10)",
        limits=Limits(time_s=60),  # a cold sympy import in a light container takes seconds on a loaded machine
    )
    assert res.ok and res.stdout == "True 1024\n", res


def test_engine_missing_image_is_a_clear_error(monkeypatch):
    options = docker_engine_options()
    make("docker", pool_size=1, preload=[]).close()
    with pytest.raises(SandboxUnavailable, match="docker pull"):
        DockerSandbox(image="llm-envs-sandbox:does-not-exist", **options)
    monkeypatch.setattr(docker_backend, "DEFAULT_IMAGE", "llm-envs-sandbox:does-not-exist")
    monkeypatch.setattr(docker_backend, "FALLBACK_IMAGE", "llm-envs-sandbox:not-this-either")
    with pytest.raises(SandboxUnavailable, match=r"python -m sandboxes\.docker_engine start"):
        DockerSandbox(**options)


def test_engine_refusing_a_container_is_a_sandbox_error_not_a_result(client):
    # An engine that cannot start a container (here: the image vanished) is an infrastructure
    # failure: run() raises SandboxError naming it, and leaves no half-made container behind.
    sandbox = make("docker", pool_size=1, preload=[])
    try:
        sandbox.image = "llm-envs-sandbox:vanished"
        with pytest.raises(sandboxes.SandboxError, match="cannot start a worker container"):
            sandbox.run("print(1)")
        containers = client.containers.list(all=True, filters={"label": "llm-envs.sandbox"})
        assert [c for c in containers if c.attrs["Config"]["Image"] == sandbox.image] == []
    finally:
        sandbox.close()


def test_engine_no_network_and_read_only_root(engine_sandbox):
    res = engine_sandbox.run(
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=1)\n    print('CONNECTED')\n"
        "except OSError as exc:\n    print('blocked')\n"
        "print(sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]))\n"
        "for path in ('/usr/x', '/etc/x', '/x', '/dev/x'):\n"
        "    try:\n        open(path, 'w')\n        print('WROTE', path)\n    except OSError:\n        print('ro')"
    )
    assert res.ok, res
    assert "CONNECTED" not in res.stdout and "WROTE" not in res.stdout
    assert "['lo']" in res.stdout  # no interface but loopback: network_mode=none
    assert res.stdout.count("ro") == 4


def test_engine_process_has_no_privileges(engine_sandbox):
    res = engine_sandbox.run(
        "fields = dict(line.split(':', 1) for line in open('/proc/self/status'))\n"
        "print({k: fields[k].strip() for k in ('CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs', 'Seccomp', 'Uid')})"
    )
    assert res.ok, res
    status = eval(res.stdout)  # noqa: S307 - a dict literal we printed ourselves
    assert int(status["CapEff"], 16) == int(status["CapPrm"], 16) == int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"] == "1"
    assert status["Seccomp"] == "2"  # a filter (docker's, and ours stacked on it)
    assert "0" not in status["Uid"].split()


def test_engine_container_settings_hold(engine_sandbox):
    engine_sandbox.run("pass")
    (container,) = _containers(engine_sandbox)
    container.reload()
    host, config = container.attrs["HostConfig"], container.attrs["Config"]
    assert (
        host["NetworkMode"] == "none" and config["NetworkDisabled"] is True and host["ReadonlyRootfs"] is True
    )
    assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
    assert "no-new-privileges" in host["SecurityOpt"] and not host.get("Privileged")
    assert host["Memory"] > 0 and host["MemorySwap"] == host["Memory"]
    assert 0 < host["PidsLimit"] <= 1024 and host["NanoCpus"] > 0
    assert host["LogConfig"]["Type"] == "none"  # job sources and outputs never land on disk
    assert config["StdinOnce"] is True and config["User"].split(":")[0] not in ("", "0", "root")
    assert set(host["Tmpfs"]) == {"/sandbox", "/tmp"}


def test_engine_timeout_recycles_container(engine_sandbox):
    engine_sandbox.run("pass")
    (before,) = _containers(engine_sandbox)
    res = engine_sandbox.run("while True:\n    pass", limits=Limits(time_s=1))
    assert res.timed_out
    assert engine_sandbox.run("print(1)").stdout == "1\n"
    assert before.id not in [c.id for c in _containers(engine_sandbox)]


def test_engine_container_killed_while_idle_is_replaced(engine_sandbox):
    engine_sandbox.run("pass")
    (container,) = _containers(engine_sandbox)
    container.kill()  # from outside, as an engine restart or `docker kill` would
    res = engine_sandbox.run("print('still served')")
    assert res.ok and res.stdout == "still served\n", res
    assert container.id not in [c.id for c in _containers(engine_sandbox)]


def test_engine_memory_limit_covers_the_whole_process_tree():
    # Each child stays under its own RLIMIT_AS (64 MiB), but together they pass the run's limit:
    # the worker's per-run accounting (or, past 2 * 64 + 256 MiB, the container's memory cgroup)
    # kills the run, and it is reported as oom either way.
    program = """
import os, time
children = []
for _ in range(12):
    pid = os.fork()
    if pid == 0:
        block = bytearray(48 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(2)
        os._exit(0)
    children.append(pid)
print(sorted(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children))
"""
    sandbox = make("docker", pool_size=1, default_limits=Limits(memory_mb=64, time_s=30))
    try:
        res = sandbox.run(program)
        assert res.oom and not res.timed_out, res
        after = sandbox.run("print(len(bytearray(32 * 1024 * 1024)))")  # a fresh container, fully usable
        assert after.ok and after.stdout == f"{32 * 1024 * 1024}\n" and not after.oom
    finally:
        sandbox.close()


@pytest.mark.parametrize("place", ["/tmp", "/dev/shm", "/sandbox"])
def test_engine_no_file_survives_into_the_next_run(place):
    # Every writable place of a container is memory (tmpfs) and is emptied after each run (or
    # the container replaced): the next run, in the same container or not, sees nothing.
    sandbox = make("docker", pool_size=1)
    try:
        planted = sandbox.run(
            f"open('{place}/left-behind', 'w').write('x')\nimport os\nos.mkdir('{place}/dir')"
        )
        assert planted.ok, planted
        later = sandbox.run(
            f"import os\nprint(sorted(set(os.listdir('{place}')) - {{os.path.basename(os.getcwd())}}))"
        )
        assert later.stdout == "[]\n", later
    finally:
        sandbox.close()


def test_engine_tmpfs_is_capped():
    sandbox = make("docker", pool_size=1)
    try:
        res = sandbox.run(
            "try:\n    open('/tmp/big', 'wb').write(b'x' * (200 * 1024 * 1024))\n"
            "except OSError as exc:\n    print('capped', exc.errno)",
            limits=Limits(file_size_mb=512),
        )
        assert "capped 28" in res.stdout, res  # ENOSPC: the 128 MiB tmpfs is full
        assert sandbox.run("print(1)").stdout == "1\n"
    finally:
        sandbox.close()


def test_engine_pids_limit_holds_beyond_the_rlimit():
    # A run allowed 10 000 processes by its limits still cannot pass the container's pids limit.
    sandbox = make("docker", pool_size=1)
    try:
        pids_limit = sandbox.pids_limit
        res = sandbox.run(
            "import os, time\ncount = 0\nfor _ in range(2000):\n    try:\n        pid = os.fork()\n"
            "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
            "    count += 1\nprint(count)",
            limits=Limits(max_processes=10_000, time_s=20),
        )
        assert res.ok, res
        assert 0 < int(res.stdout) < pids_limit, (res.stdout, pids_limit)
        assert sandbox.run("print(1)").stdout == "1\n"  # the leftovers were killed
    finally:
        sandbox.close()


def test_engine_concurrent_runs_do_not_share_a_process_count():
    # RLIMIT_NPROC counts the processes of a uid across the whole host. With one uid for every
    # container (as with user="65534:65534"), one run's children would make another run's fork
    # fail: each container has a uid of its own.
    program = (
        "import os, time\nforked = 0\nfor _ in range(25):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n"
        "    forked += 1\nprint(forked)"
    )
    sandbox = make("docker", pool_size=2, default_limits=Limits(max_processes=32, time_s=20))
    try:
        sandbox.warm()
        results = sandbox.run_batch([sandboxes.Job(program), sandboxes.Job(program)])
        assert [r.stdout for r in results] == ["25\n", "25\n"], results
        users = {c.attrs["Config"]["User"] for c in _containers(sandbox)}
        assert len(users) == 2
    finally:
        sandbox.close()


def test_engine_close_removes_every_container(client):
    sandbox = make("docker", pool_size=2)
    sandbox.run_batch([sandboxes.Job("print(1)"), sandboxes.Job("import time; time.sleep(0.3)")])
    ids = [c.id for c in _containers(sandbox)]
    assert ids
    sandbox.close()
    left = [
        c.id for c in client.containers.list(all=True, filters={"label": "llm-envs.sandbox"}) if c.id in ids
    ]
    assert left == []


_CHILD = """
import json, os, signal, sys
import sandboxes
sandbox = sandboxes.make_sandbox("docker", pool_size=1, preload=[])
sandbox.warm()
assert sandbox.run("print(1)").ok
print(json.dumps([w.container.id for w in sandbox._pool.light._all]), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
# "exit": leave without close(); the exit handler must remove the containers
"""


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_engine_dead_host_process_leaves_no_container(client, how):
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, how], env=_engine_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.stdout, proc.stderr
    ids = set(json.loads(proc.stdout.splitlines()[-1]))
    assert len(ids) == 1

    def ours(**filters):
        return [
            c
            for c in client.containers.list(all=True, filters={"label": "llm-envs.sandbox", **filters})
            if c.id in ids
        ]

    if how == "exit":
        assert ours() == []  # removed by the exit handler
        return
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 20
    while ours(status="running") and time.monotonic() < deadline:  # stdin closed: the workers exit
        time.sleep(0.2)
    assert ours(status="running") == []
    make("docker", pool_size=1).close()  # any new sandbox on the engine removes the orphans
    assert ours() == []


# ---------------------------------------------------------------------------------------------
# The engine script itself (python -m sandboxes.docker_engine)
# ---------------------------------------------------------------------------------------------


def _engine_cli(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sandboxes.docker_engine", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"])


def test_engine_script_lifecycle_on_private_paths(tmp_path):
    """start (idempotent), status, stop by pid, and a pid file naming another process."""
    if os.geteuid() != 0:
        pytest.skip("starting a Docker engine needs root")
    if docker_engine.missing_packages():
        if "docker" in os.environ.get("SANDBOX_TESTS_REQUIRE", "").split(","):
            pytest.fail(
                f"SANDBOX_TESTS_REQUIRE names docker but {docker_engine.missing_packages()} are missing"
            )
        pytest.skip(
            f"{', '.join(docker_engine.missing_packages())} not installed (`python -m sandboxes.docker_engine start` installs them)"
        )
    # Unix socket paths are short (108 bytes), so the run directory must be (unlike tmp_path).
    run_dir = Path(tempfile.mkdtemp(prefix="sbx-", dir="/tmp")) / "run"
    env = dict(
        os.environ, SANDBOX_DOCKER_RUN_DIR=str(run_dir), SANDBOX_DOCKER_DATA_DIR=str(tmp_path / "data")
    )
    sleeper = _sleeper()
    try:
        first = _engine_cli(["start", "--no-image"], env)
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip() == f"export DOCKER_HOST=unix://{run_dir}/docker.sock"
        pid = int((run_dir / "dockerd.pid").read_text())
        again = _engine_cli(["start", "--no-image"], env)
        assert again.returncode == 0 and "already up" in again.stderr, again.stderr
        assert int((run_dir / "dockerd.pid").read_text()) == pid
        status = _engine_cli(["status"], env)
        state = json.loads(status.stdout)
        assert state["running"] and state["pid"] == pid and state["storage_driver"] in ("overlay2", "vfs")
        assert status.returncode == 1 and state["image_present"] is False  # no image built here
        assert _engine_cli(["stop"], env).returncode == 0
        assert (
            not os.path.exists(f"/proc/{pid}") or b"dockerd" not in open(f"/proc/{pid}/cmdline", "rb").read()
        )
        assert not (run_dir / "docker.sock").exists()
        assert "not running" in _engine_cli(["stop"], env).stderr  # stopping twice is fine
        # A stale pid file whose pid now belongs to another process: stop must not touch it.
        (run_dir / "dockerd.pid").write_text(str(sleeper.pid))
        assert _engine_cli(["stop"], env).returncode == 0
        assert sleeper.poll() is None
        assert _engine_cli(["host"], env).returncode == 1
        # A run directory too long for the engine's sockets is refused with the reason.
        long_env = dict(env, SANDBOX_DOCKER_RUN_DIR=str(tmp_path / ("x" * 60)))
        refused = _engine_cli(["start", "--no-image"], long_env)
        assert refused.returncode == 1 and "too long" in refused.stderr, refused.stderr
    finally:
        _engine_cli(["stop"], env)
        sleeper.kill()
        sleeper.wait()
        shutil.rmtree(run_dir.parent, ignore_errors=True)


def test_engine_run_wrapper_requires_docker_and_passes_the_exit_status():
    if docker_engine.engine_host() is None:
        make("docker", pool_size=1).close()  # skips (or fails where required) with the reason
        pytest.skip("the project's engine is not up (only DOCKER_HOST's): nothing to wrap")
    probe = "import os, sys; print(os.environ['SANDBOX_TESTS_REQUIRE']); sys.exit(3)"
    env = dict(os.environ, SANDBOX_TESTS_REQUIRE="bwrap")
    proc = _engine_cli(["run", "--", sys.executable, "-c", probe], env)
    assert proc.returncode == 3 and proc.stdout == "bwrap,docker\n", proc.stderr
    assert docker_engine.engine_host() is not None  # an engine it did not start stays up


def test_engine_run_wrapper_without_root_runs_the_command_anyway(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SANDBOX_DOCKER_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("SANDBOX_TESTS_REQUIRE", "bwrap")
    monkeypatch.setattr(docker_engine.os, "geteuid", lambda: 1000)
    command = [
        sys.executable,
        "-c",
        "import os, sys; sys.exit(7 if 'docker' in os.environ.get('SANDBOX_TESTS_REQUIRE', '') else 5)",
    ]
    messages: list[str] = []
    assert docker_engine.run(command, log=messages.append) == 5
    assert "needs root" in messages[-1] and "tests will skip" in messages[-1]
    assert docker_engine.run(command, require=True, log=messages.append) == 1
    assert "required but could not be started" in messages[-1]


# ---------------------------------------------------------------------------------------------
# The backend's own logic (container settings, Docker's multiplexed attach stream, the pool,
# recycling) against a stand-in for the engine: a docker-SDK-shaped client whose "containers"
# are bubblewrap sandboxes. Only the engine is replaced; the worker, framing and pool are real.
# ---------------------------------------------------------------------------------------------

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
            lambda: subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
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
        docker_client=engine,
        pool_size=2,
        preload=[],
        heavy_preload=(),
        python_in_image=os.path.realpath(sys.executable),
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
