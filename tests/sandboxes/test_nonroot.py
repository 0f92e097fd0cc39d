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

SMOKE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import sandboxes
from sandboxes import Limits
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
        out[backend] = {
            "hello": sb.run("print('hello')").stdout,
            "socket": sb.run("import socket\nsocket.socket()").exit_code,
            "forks": forks.stdout.strip(),
            "timeout": sb.run("while True: pass", limits=Limits(time_s=0.5)).timed_out,
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
        [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-c", SMOKE, str(REPO)],
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
        assert result["hello"] == "hello\n"
        assert result["socket"] == 1  # socket(AF_INET) denied
        assert int(result["forks"]) <= 10  # RLIMIT_NPROC holds in the sandbox's own user namespace
        assert result["timeout"] is True
        assert "LLM_ENVS_TEST_API_KEY" not in result["secret"]
