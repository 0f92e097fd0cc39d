"""The host never trusts what a worker sends.

A subverted or broken worker is played here by a real process that speaks the pool's protocol
badly (too large, malformed, replayed, mistyped frames): the pool must bound and check every
frame, report the run as a *sandbox* failure (never as a result, never as an exception in the
caller), and replace the worker.
"""

from __future__ import annotations

import resource
import sys
import time

import pytest

from sandboxes import Limits
from sandboxes.pool import WarmPool, Worker, WorkerSpec

# A worker that answers the first job honestly, then misbehaves as told by argv[1].
HOSTILE_WORKER = r"""
import json, os, struct, sys, time
MODE = sys.argv[1]

def read_exact(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data

def recv():
    (length,) = struct.unpack(">I", read_exact(4))
    return json.loads(read_exact(length))

def send_raw(data):
    os.write(1, data)

def send(obj):
    body = json.dumps(obj).encode()
    send_raw(struct.pack(">I", len(body)) + body)

def honest(job):
    return {"id": job["id"], "stdout": "honest\n", "stderr": "", "stdout_truncated": False, "stderr_truncated": False,
            "exit_code": 0, "timed_out": False, "oom": False, "duration_s": 0.01, "worker_clean": True, "leftover_processes": 0}

recv()  # config
if MODE == "dies_starting":  # (killed while it starts: the OOM killer, an operator)
    time.sleep(0.5)
    sys.exit(3)
send({"ready": True, "pid": os.getpid(), "uid": os.getuid(), "work_dir": "/nonexistent"})
first = recv()
send({"accepted": first["id"]})
send(honest(first))
job = recv()
if MODE == "bad_ack":
    send({"accepted": "someone-else"})
    time.sleep(30)
send({"accepted": job["id"]})
bad = dict(honest(job))
if MODE == "huge_header":
    send_raw(struct.pack(">I", 2**31) + b"{" * 65536)
    time.sleep(30)
elif MODE == "not_json":
    send_raw(struct.pack(">I", 9) + b"not json!")
elif MODE == "not_object":
    send([1, 2, 3])
elif MODE == "replay":
    send(honest(first))  # the previous job's result again
elif MODE == "wrong_types":
    bad["exit_code"] = "0"
    send(bad)
elif MODE == "bool_exit":
    bad["exit_code"] = True
    send(bad)
elif MODE == "too_long":
    bad["stdout"] = "x" * 5000  # the job's cap is 1000
    send(bad)
elif MODE == "nan_duration":
    body = json.dumps(bad).replace('"duration_s": 0.01', '"duration_s": NaN').encode()
    send_raw(struct.pack(">I", len(body)) + body)
elif MODE == "missing_field":
    del bad["oom"]
    send(bad)
elif MODE == "half_frame":
    send_raw(struct.pack(">I", 100) + b"{")
    sys.exit(0)
elif MODE == "silent":
    time.sleep(60)
time.sleep(30)
"""

LIMITS = Limits(time_s=1.0, output_bytes=1000)


def _pool(mode: str) -> tuple[WarmPool, list[Worker]]:
    started: list[Worker] = []

    def spawn() -> Worker:
        spec = WorkerSpec(argv=[sys.executable, "-I", "-S", "-c", HOSTILE_WORKER, mode], config={}, env={}, startup_timeout_s=30)
        worker = Worker(spec, "hostile")
        started.append(worker)
        return worker

    return WarmPool(spawn, size=1, max_jobs_per_worker=100, backend="hostile"), started


@pytest.mark.parametrize(
    "mode",
    ["huge_header", "not_json", "not_object", "replay", "wrong_types", "bool_exit", "too_long", "nan_duration", "missing_field", "half_frame", "bad_ack"],
)
def test_a_bad_frame_is_a_sandbox_failure_and_costs_the_worker(mode):
    pool, started = _pool(mode)
    try:
        first = pool.run("print(1)", "", {}, LIMITS)
        assert first.ok and first.stdout == "honest\n" and first.sandbox_error is None
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        began = time.monotonic()
        res = pool.run("print(2)", "", {}, LIMITS)
        elapsed = time.monotonic() - began
        assert res.sandbox_error and not res.ok and res.exit_code is None, res
        assert res.stdout == "" and "honest" not in res.stdout
        assert elapsed < 10, f"the bad frame held the caller for {elapsed:.1f}s"
        # A 2 GiB announcement is refused before anything is read or allocated.
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 64 * 1024
        assert not started[0].alive(), "the lying worker was kept"
        again = pool.run("print(3)", "", {}, LIMITS)  # a fresh worker, honest on its first job
        assert again.ok and again.stdout == "honest\n" and len(started) == 2
    finally:
        pool.close()


def test_a_silent_worker_is_a_sandbox_failure_after_the_deadline(monkeypatch):
    import sandboxes.pool

    monkeypatch.setattr(sandboxes.pool, "_HOST_GRACE_S", 1.0)  # the grace a wedged worker gets
    pool, started = _pool("silent")
    try:
        assert pool.run("print(1)", "", {}, LIMITS).ok
        res = pool.run("print(2)", "", {}, Limits(time_s=0.5, output_bytes=1000))
        assert res.sandbox_error and "in time" in res.sandbox_error and not res.timed_out, res
    finally:
        pool.close()


def test_harness_reports_a_sandbox_failure_as_such():
    # A test report built on a run whose sandbox failed says so: not the solution's failure.
    import sandboxes
    from sandboxes.pool import PooledSandbox

    class Lying(PooledSandbox):
        name = "hostile"

        def _spawn_worker(self, preload):
            spec = WorkerSpec(argv=[sys.executable, "-I", "-S", "-c", HOSTILE_WORKER, "not_json"], config={}, env={})
            return Worker(spec, self.name)

    sandbox = Lying(pool_size=1, preload=[], heavy_preload=(), max_jobs_per_worker=100, default_limits=None)
    try:
        honest = sandboxes.run_function_tests(sandbox, "def f():\n    return 1\n", ["assert f() == 1"])
        assert honest.sandbox_error is None and not honest.all_passed  # its canned stdout is no harness output
        report = sandboxes.run_function_tests(sandbox, "def f():\n    return 1\n", ["assert f() == 1"])
        assert report.sandbox_error and report.passed == 0
        assert "sandbox failed" in report.results[0].error and "sandbox failed" in report.error
        cases = sandboxes.run_io_cases(sandbox, "print(1)", [("", "1\n")])
        assert cases.sandbox_error is None  # a fresh lying worker answers honestly once
        cases = sandboxes.run_io_cases(sandbox, "print(1)", [("", "1\n")])
        assert cases.sandbox_error and "sandbox failed" in cases.results[0].error
    finally:
        sandbox.close()


def test_a_worker_that_fails_to_start_wakes_the_callers_waiting_for_one():
    # Caller A's worker dies while it starts; B, waiting for the pool's one slot, was never
    # woken (no worker live or starting, nothing queued): a rollout wave hung for ever.
    import threading

    modes = iter(["dies_starting", "honest"])

    def spawn() -> Worker:
        spec = WorkerSpec(argv=[sys.executable, "-I", "-S", "-c", HOSTILE_WORKER, next(modes)], config={}, env={},
                          startup_timeout_s=30)
        return Worker(spec, "hostile")

    pool = WarmPool(spawn, size=1, max_jobs_per_worker=100, backend="hostile")
    outcome: dict[str, object] = {}

    def call(name: str) -> None:
        try:
            outcome[name] = pool.run("print(1)", "", {}, LIMITS).stdout
        except Exception as exc:  # noqa: BLE001 - what the caller meets is the point
            outcome[name] = exc

    first = threading.Thread(target=call, args=("A",), daemon=True)
    first.start()
    time.sleep(0.2)  # A is starting its worker; B finds the pool full and waits
    second = threading.Thread(target=call, args=("B",), daemon=True)
    second.start()
    first.join(30)
    second.join(30)
    try:
        assert not second.is_alive(), "a caller waiting for a worker was never woken"
        assert outcome["B"] == "honest\n"
    finally:
        pool.close()


def test_closing_the_pool_wakes_the_callers_waiting_for_a_worker():
    # close() queued no wake-up, nor did the busy worker's release on a closed pool: callers
    # waiting for the one worker hung instead of meeting "closed".
    import threading

    import sandboxes
    from sandboxes import SandboxError

    sandbox = sandboxes.make_sandbox("process", pool_size=1)
    outcome: dict[str, object] = {}

    def call(name: str, source: str) -> None:
        try:
            outcome[name] = sandbox.run(source).stdout
        except Exception as exc:  # noqa: BLE001 - what the caller meets is the point
            outcome[name] = exc

    busy = threading.Thread(target=call, args=("A", "import time; time.sleep(2); print('a')"), daemon=True)
    busy.start()
    time.sleep(0.8)  # A holds the one worker
    waiting = [threading.Thread(target=call, args=(name, "print(1)"), daemon=True) for name in ("B", "C")]
    for thread in waiting:
        thread.start()
    time.sleep(0.3)
    sandbox.close()
    busy.join(30)
    for thread in waiting:
        thread.join(30)
        assert not thread.is_alive(), "a caller waiting for a worker hung after close()"
    assert all(isinstance(outcome[name], SandboxError) and "closed" in str(outcome[name]) for name in ("B", "C")), outcome
