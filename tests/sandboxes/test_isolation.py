"""Hostile programs, each run on every isolated backend that works here (bwrap, process).

Each test checks the effect on the host (a listener that counts connections, canary files,
secret environment variables, leftover processes), not just what the program printed.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from sandboxes import Limits
from tests.sandboxes.conftest import ISOLATED_BACKENDS, alive, make, processes_with_marker, sandbox_processes

SHORT = Limits(time_s=1.0)


def _still_works(sandbox) -> None:
    res = sandbox.run("print(6 * 7)")
    assert res.ok and res.stdout == "42\n", res


def test_network_connect_to_host_listener_fails(isolated):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                accepted.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    program = f"""
import socket
for family, address in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_INET6, ("::1", {port}))):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(0.5)
        s.connect(address)
        print("CONNECTED", address)
    except OSError as exc:
        print("blocked", type(exc).__name__, exc)
try:
    socket.getaddrinfo("example.com", 80)
    print("RESOLVED")
except OSError as exc:
    print("no dns", exc)
"""
    try:
        res = isolated.run(program, limits=Limits(time_s=5))
    finally:
        time.sleep(0.1)
        stop.set()
        thread.join()
        server.close()
    assert res.exit_code == 0, res
    assert "CONNECTED" not in res.stdout and "RESOLVED" not in res.stdout, res.stdout
    assert accepted == []


def test_host_unix_sockets_cannot_be_reached_by_path(isolated, tmp_path):
    # Issue 22: the process backend connected to a mode-0777 socket under /run (the host's
    # Docker engine, D-Bus, a database... live there). Listeners under /run, /var/run, /tmp,
    # /dev/shm and the checkout's parent, each open to every uid, count what reaches them.
    token = uuid.uuid4().hex[:12]
    places = [f"/run/sandbox-test-{token}.sock", str(tmp_path / f"s-{token}.sock"), f"/dev/shm/sandbox-test-{token}.sock"]
    servers, accepted = [], []
    stop = threading.Event()
    for path in places:
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            server = socket.socket(socket.AF_UNIX, kind)
            server_path = path + ("" if kind == socket.SOCK_STREAM else ".dgram")
            server.bind(server_path)
            os.chmod(server_path, 0o777)
            if kind == socket.SOCK_STREAM:
                server.listen(8)
            server.settimeout(0.2)
            servers.append((server, server_path, kind))
    os.chmod(tmp_path, 0o777)

    def accept_loop(server: socket.socket, kind: int) -> None:
        while not stop.is_set():
            try:
                if kind == socket.SOCK_STREAM:
                    accepted.append(server.accept()[0])
                else:
                    accepted.append(server.recv(100))
            except OSError:
                continue

    threads = [threading.Thread(target=accept_loop, args=(srv, kind), daemon=True) for srv, _, kind in servers]
    for thread in threads:
        thread.start()
    paths = [p for _, p, _ in servers] + [p.replace("/run/", "/var/run/") for _, p, _ in servers if p.startswith("/run/")]
    program = f"""
import socket
for path in {paths!r}:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        try:
            s = socket.socket(socket.AF_UNIX, kind)
            s.settimeout(0.5)
            s.connect(path)
            s.send(b"x")
            print("CONNECTED", path)
        except OSError as exc:
            print("blocked", path, type(exc).__name__)
"""
    try:
        res = isolated.run(program, limits=Limits(time_s=10))
    finally:
        time.sleep(0.2)
        stop.set()
        for thread in threads:
            thread.join()
        for server, path, _ in servers:
            server.close()
            os.unlink(path)
    assert res.exit_code == 0, res
    assert "CONNECTED" not in res.stdout, res.stdout
    assert accepted == []
    _still_works(isolated)


def test_writes_outside_the_work_dir_leave_host_untouched(isolated, tmp_path):
    canary = tmp_path / "canary.txt"
    canary.write_text("original")
    new_in_tmp = f"/tmp/sandbox-escape-{uuid.uuid4().hex}"
    repo_file = os.path.abspath(f"sandbox-escape-{uuid.uuid4().hex}")
    program = f"""
import os
for path in ({str(canary)!r}, {new_in_tmp!r}, {repo_file!r}, "/root/sandbox-escape", "/usr/sandbox-escape",
             "/etc/sandbox-escape", {sys.executable!r}):
    try:
        with open(path, "w") as fh:
            fh.write("pwned")
        print("WROTE", path)
    except OSError as exc:
        print("denied", path, exc.errno)
try:
    os.remove({str(canary)!r})
    print("REMOVED canary")
except OSError as exc:
    print("cannot remove", exc.errno)
"""
    res = isolated.run(program)
    assert res.exit_code == 0, res
    assert canary.read_text() == "original"
    assert not os.path.exists(new_in_tmp)
    assert not os.path.exists(repo_file)
    assert not os.path.exists("/root/sandbox-escape")
    assert not os.path.exists("/usr/sandbox-escape")
    assert not os.path.exists("/etc/sandbox-escape")
    with open(sys.executable, "rb") as fh:
        assert b"pwned" not in fh.read(64)


def test_host_secret_file_unreadable(isolated, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    os.chmod(secret, 0o600)
    res = isolated.run(f"print(open({str(secret)!r}).read())")
    assert "TOP-SECRET-CONTENT" not in res.stdout
    assert res.exit_code != 0


@pytest.mark.parametrize("backend", ISOLATED_BACKENDS)
def test_caller_environment_is_not_visible(monkeypatch, backend):
    key = "sk-test-" + uuid.uuid4().hex
    monkeypatch.setenv("LLM_ENVS_TEST_API_KEY", key)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    program = """
import os, sys
print(dict(os.environ))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            print(open("/proc/%s/environ" % pid, "rb").read())
        except OSError:
            pass
print(repr(sys.modules.keys()))
"""
    sandbox = make(backend, pool_size=1)  # workers start after the secret is set
    try:
        res = sandbox.run(program)
    finally:
        sandbox.close()
    assert res.exit_code == 0, res
    assert key not in res.stdout and key not in res.stderr
    assert "LLM_ENVS_TEST_API_KEY" not in res.stdout


def test_cannot_signal_host_processes(isolated):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        res = isolated.run(
            f"import os, signal\ntry:\n    os.kill({victim.pid}, signal.SIGKILL)\n    print('KILLED')\n"
            "except OSError as exc:\n    print('denied', exc)\n"
        )
        time.sleep(0.1)
        assert victim.poll() is None, "the sandboxed program killed a host process"
        assert "KILLED" not in res.stdout or isolated.name == "bwrap"  # a pid inside bwrap names nothing on the host
    finally:
        victim.kill()
        victim.wait()


def test_infinite_loop_times_out(isolated):
    res = isolated.run("while True:\n    pass", limits=SHORT)
    assert res.timed_out and res.exit_code is None and not res.ok
    assert res.duration_s < SHORT.time_s + 1.0
    _still_works(isolated)


def test_sigterm_ignoring_program_is_killed(isolated):
    program = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.01)"
    start = time.monotonic()
    res = isolated.run(program, limits=SHORT)
    assert res.timed_out
    assert time.monotonic() - start < SHORT.time_s + 5
    _still_works(isolated)


def test_closing_own_pipes_then_spinning_times_out(isolated):
    program = "import os\nos.close(0)\nos.close(1)\nos.close(2)\nwhile True:\n    pass"
    res = isolated.run(program, limits=SHORT)
    assert res.timed_out and res.exit_code is None
    _still_works(isolated)


def test_memory_bomb_is_contained(isolated):
    res = isolated.run("x = bytearray(8 << 30)\nprint('ALLOCATED')", limits=Limits(memory_mb=256))
    assert res.oom and not res.ok and "ALLOCATED" not in res.stdout, res
    program = "chunks = []\nwhile True:\n    chunks.append(bytearray(50 << 20))"
    res = isolated.run(program, limits=Limits(memory_mb=256, time_s=10))
    assert res.oom and not res.timed_out, res
    # Stopped at the budget, long before its time limit (the program's own time: the wall time
    # around it also pays for replacing the worker, which a loaded machine can stretch).
    assert res.duration_s < 8, res
    _still_works(isolated)


@pytest.mark.parametrize("backend", ISOLATED_BACKENDS)
def test_fork_bomb_is_contained_and_leaves_nothing(backend):
    sandbox = make(backend, pool_size=1)
    try:
        _still_works(sandbox)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            start = time.monotonic()
            future = pool.submit(
                sandbox.run,
                "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
                limits=Limits(time_s=1.5, max_processes=16),
            )
            time.sleep(0.8)
            during = sandbox_processes(sandbox)  # the bomb's processes, seen from the host
            res = future.result()
        assert res.timed_out and not res.ok
        assert time.monotonic() - start < 10
        if sandbox.worker_pids() or during:  # host processes exist (not for docker containers)
            assert len(during) > 3, "the bomb should have been running"
            assert len(during) <= 16 + 4, f"process limit not enforced: {len(during)} processes"
        deadline = time.monotonic() + 5
        while alive(during) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(during) == [], "the bomb's processes outlived the run"
        _still_works(sandbox)
        during_close = sandbox_processes(sandbox)
    finally:
        sandbox.close()
    # The kernel tears a pid namespace down asynchronously after its init dies: allow it a moment.
    deadline = time.monotonic() + 5
    while alive(during_close) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(during_close) == [], "processes left after close()"


def test_process_limit_is_enforced(isolated):
    # As root this only holds because the sandbox drops to a non-root uid (RLIMIT_NPROC is not
    # enforced for uid 0): a regression test for that.
    program = """
import os, time
made = 0
for _ in range(150):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    made += 1
print(made)
"""
    res = isolated.run(program, limits=Limits(max_processes=16, time_s=10))
    assert res.exit_code == 0, res
    assert int(res.stdout) <= 16


def test_huge_output_is_capped(isolated):
    start = time.monotonic()
    res = isolated.run("import sys\nsys.stdout.write('x' * 100_000_000)\nsys.stdout.flush()", limits=Limits(output_bytes=64_000))
    assert res.stdout_truncated and len(res.stdout.encode()) <= 64_000
    assert res.exit_code is None and not res.ok
    assert time.monotonic() - start < 5
    res = isolated.run("import sys\nwhile True:\n    print('y' * 1000, file=sys.stderr)", limits=Limits(output_bytes=10_000))
    assert res.stderr_truncated and len(res.stderr.encode()) <= 10_000
    _still_works(isolated)


def test_daemonized_child_does_not_outlive_the_run(isolated):
    marker = "SANDBOX-DAEMON-" + uuid.uuid4().hex
    program = f"""
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
    os._exit(0)
os.wait()
print("parent done")
"""
    res = isolated.run(program)
    assert res.exit_code == 0 and "parent done" in res.stdout, res
    deadline = time.monotonic() + 3
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with_marker(marker) == []
    _still_works(isolated)


def test_background_child_holding_pipes_does_not_block(isolated):
    program = "import os, time\nif os.fork() == 0:\n    time.sleep(30)\nprint('main exits')"
    start = time.monotonic()
    res = isolated.run(program, limits=Limits(time_s=5))
    assert res.exit_code == 0 and res.stdout == "main exits\n" and not res.timed_out
    assert time.monotonic() - start < 3


def test_deep_recursion_is_contained(isolated):
    res = isolated.run("def f(n):\n    return f(n + 1)\nf(0)")
    assert res.exit_code == 1 and "RecursionError" in res.stderr
    res = isolated.run(
        "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)",
        limits=Limits(time_s=2, memory_mb=128),
    )
    # Contained either way: a crash (SIGSEGV, MemoryError) or the time limit while printing a
    # million-frame traceback. Reported, never raised.
    assert not res.ok
    _still_works(isolated)


def test_file_size_limit(isolated):
    res = isolated.run(
        "with open('big.bin', 'wb') as fh:\n    fh.write(b'0' * (64 << 20))", limits=Limits(file_size_mb=4)
    )
    assert not res.ok
    assert "File too large" in res.stderr or res.exit_code == -25  # SIGXFSZ


def test_programs_cannot_see_each_others_files(isolated):
    res = isolated.run("import os\nopen('/tmp/left-behind', 'w').write('x')\nopen('mine', 'w').write('x')\nprint(os.getcwd())")
    assert res.ok
    results = isolated.run_batch(
        [isolated_job("import os\nprint(os.path.exists('/tmp/left-behind'), os.path.exists('mine'), sorted(os.listdir('.')))")]
        * 4
    )
    for res in results:
        assert res.stdout.startswith("False False"), res


def isolated_job(source: str):
    from sandboxes import Job

    return Job(source)


def test_runs_as_non_root(isolated):
    res = isolated.run("import os\nprint(os.getuid(), os.geteuid(), os.getgid())")
    assert res.ok
    assert "0" not in res.stdout.split(), res.stdout


@pytest.mark.parametrize("source", ["import ctypes\nctypes.string_at(0)", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"])
def test_crashing_program_reports_signal(isolated, source):
    res = isolated.run(source)
    assert res.exit_code == -11 and not res.ok and not res.timed_out


def test_namespace_and_debugging_syscalls_are_denied(isolated):
    program = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
print("unshare", libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), ctypes.get_errno())
print("ptrace", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH to pid 1
"""
    res = isolated.run(program)
    assert res.ok, res
    assert "unshare -1" in res.stdout and "ptrace -1" in res.stdout
