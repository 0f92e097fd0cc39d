"""The code path of an ordinary (non-root) user, exercised from a root test run.

Root takes a different path (a launcher switches to a fresh uid first). Most developers are not
root, so when these tests run as root they re-run a smoke test as uid 65534 (nobody) with the
system interpreter: bwrap then creates its own user namespace, and the process backend uses an
unprivileged user namespace of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sandboxes.local import find_bwrap

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534

# Without root every run shares its worker's uid: only the worker's own protections (pid 1,
# non-dumpable, signals ignored) and the job's seccomp filter keep a run from its worker.
ATTACK = r"""
import ctypes, json, os, resource, signal, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
me = os.getpid()
others = sorted({os.getppid(), 1} | {int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me} - {0, me})
got = []
for pid in others:
    for name, how in (("mem", "r+b"), ("environ", "rb"), ("fd/4", "wb")):
        try:
            open("/proc/%d/%s" % (pid, name), how).close()
            got.append("%s %d" % (name, pid))
        except OSError:
            pass
    pidfd = libc.syscall(434, pid, 0)
    if pidfd >= 0:
        got.append("pidfd_open %d" % pid)
    for how, call in (("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (8, 8))),
                      ("renice", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
                      ("SIGSTOP", lambda: os.kill(pid, signal.SIGSTOP)), ("SIGINT", lambda: os.kill(pid, signal.SIGINT)),
                      ("SIGKILL", lambda: os.kill(pid, signal.SIGKILL))):
        try:
            call()
            got.append("%s %d" % (how, pid))
        except OSError:
            pass
# Signal redirection: the kernel would SIGKILL the owner (the zygote) when the worker reads our
# stdout pipe (F_SETOWN + F_SETSIG + O_ASYNC), checking only that we share its uid.
import fcntl, struct
for fd in (1, 2):
    for pid in others:
        for name, cmd, arg in (("F_SETOWN", 8, pid), ("F_SETOWN_EX", 15, struct.pack("ii", 1, pid))):
            try:
                fcntl.fcntl(fd, cmd, arg)
                got.append("%s %d %d" % (name, fd, pid))
            except OSError:
                pass
    try:
        fcntl.fcntl(fd, 10, signal.SIGKILL)
        got.append("F_SETSIG %d" % fd)
    except OSError:
        pass
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
# Reopening the run's own stdout or stderr for reading: from a pipe it would take what the run's
# other processes wrote before the worker read it (the function harness's records and secret).
for fd in (1, 2):
    try:
        os.close(os.open("/proc/self/fd/%d" % fd, os.O_RDONLY | os.O_NONBLOCK))
        got.append("reopened %d" % fd)
    except OSError:
        pass
for _ in range(20):
    os.write(1, b"." * 500 + b"\n")
    time.sleep(0.005)
for path in ("/sandbox/left", "/tmp/left", "/dev/shm/left", "../left", "/left"):
    try:
        open(path, "w").write("x")
    except OSError:
        pass
os.makedirs("/tmp/locked/deep")
open("/tmp/locked/deep/file", "w").write("x")
os.chmod("/tmp/locked/deep", 0)
os.chmod("/tmp/locked", 0)  # the worker, same uid, must still empty /tmp (and leave /tmp itself alone)
# The work area and the scratch directories themselves, made unusable for the next job.
for place in (os.path.dirname(os.getcwd()), "/tmp", "/dev/shm"):
    try:
        os.chmod(place, 0)
    except OSError:
        pass
time.sleep(0.2)
print(json.dumps(got))
"""
LOOK = r"""
import os
print(sorted(p for p in ("/sandbox/left", "/tmp/left", "/dev/shm/left", "../left", "/left", "/tmp/locked") if os.path.lexists(p)), oct(os.stat("/tmp").st_mode & 0o7777))
"""

SMOKE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import sandboxes
from sandboxes import Limits
ATTACK, LOOK = sys.argv[2], sys.argv[3]
out = {"uid": os.getuid()}
for backend in ("bwrap", "process"):
    try:
        sb = sandboxes.make_sandbox(backend, pool_size=1, preload=[], heavy_preload=())
    except sandboxes.SandboxUnavailable as exc:
        out[backend] = {"unavailable": str(exc)}
        continue
    with sb:
        forks = sb.run(
            "import os, time\nmade = 0\nfor _ in range(60):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
            "    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    made += 1\nprint(made)",
            limits=Limits(max_processes=10),
        )
        attack = sb.run(ATTACK, limits=Limits(time_s=10))
        after_attack = sb.run("import os, sys\nprint(6 * 7, os.getpriority(os.PRIO_PROCESS, 0))\nsys.exit(4)")
        leftovers = sb.run(LOOK)
        out[backend] = {
            "attack": attack.stdout.strip().splitlines()[-1:] or [attack.stderr[-300:]],
            "after_attack": [after_attack.stdout, after_attack.exit_code],
            "leftovers": leftovers.stdout.strip(),
            "hello": sb.run("print('hello')").stdout,
            "socket": sb.run("import socket\nsocket.socket()").exit_code,
            "forks": forks.stdout.strip(),
            "timeout": sb.run("while True: pass", limits=Limits(time_s=0.5)).timed_out,
            # 128 MiB of memfds or shared anonymous memory at a budget of 64: denied (the
            # accounting could not bound them), or stopped.
            "hoards": [
                sb.run(
                    hoard + "print('HELD', flush=True)\ntime.sleep(10)", limits=Limits(memory_mb=64, time_s=20, file_size_mb=64)
                ).stdout
                for hoard in (
                    "import os, time\nfor i in range(8):\n    fd = os.memfd_create('m')\n    for _ in range(16):\n"
                    "        os.write(fd, b'm' * (1 << 20))\n",
                    "import mmap, time\nm = mmap.mmap(-1, 128 << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)\n"
                    "m[::4096] = b'x' * len(m[::4096])\n",
                )
            ],
            "secret": sb.run("import os\nprint(sorted(os.environ))").stdout,
        }
print(json.dumps(out))
"""


def _system_python() -> str | None:
    for candidate in ("/usr/bin/python3", shutil.which("python3") or ""):
        if candidate and os.path.exists(candidate):
            try:
                ok = subprocess.run([candidate, "-c", "import sys; assert sys.version_info >= (3, 10)"], timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            if ok:
                return candidate
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="already running as a non-root user: the whole suite covers this path")
def test_backends_work_for_an_unprivileged_user():
    setpriv = shutil.which("setpriv")
    python = _system_python()
    bwrap, _ = find_bwrap()
    if not setpriv or not python:
        pytest.skip("needs util-linux `setpriv` and a system python3 >= 3.10")
    probe = subprocess.run(
        [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-c", f"import os; os.listdir({str(REPO)!r})"],
        capture_output=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"uid {NOBODY} cannot read the checkout at {REPO} with {python}")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LLM_ENVS_TEST_API_KEY": "sk-nonroot-secret"}
    if bwrap:
        env["SANDBOX_BWRAP"] = bwrap
    proc = subprocess.run(
        [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-c", SMOKE, str(REPO), ATTACK, LOOK],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["uid"] == NOBODY
    for backend in ("bwrap", "process"):
        result = out[backend]
        if "unavailable" in result and backend == "bwrap" and not bwrap:
            continue
        assert "unavailable" not in result, (backend, result)
        assert result["attack"] == ["[]"], (backend, result["attack"])
        # The next run's niceness is the worker's, inherited from this test: the attack's 19 did not stick.
        assert result["after_attack"] == [f"42 {os.getpriority(os.PRIO_PROCESS, 0)}\n", 4], (backend, result)
        assert result["leftovers"] == "[] 0o1777", (backend, result)
        assert result["hello"] == "hello\n"
        assert result["socket"] == 1  # socket(AF_INET) denied
        assert int(result["forks"]) <= 10  # RLIMIT_NPROC holds in the sandbox's own user namespace
        assert result["timeout"] is True
        assert result["hoards"] == ["", ""], result["hoards"]
        assert "LLM_ENVS_TEST_API_KEY" not in result["secret"]
