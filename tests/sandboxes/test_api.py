"""The public interface: results, limits, batch and async forms, backend selection."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
import time

import pytest

import sandboxes
from sandboxes import Job, Limits, RunResult, SandboxError, SandboxUnavailable
from tests.sandboxes.conftest import alive, make, sandbox_processes


def test_stdout_stdin_exit_code(isolated):
    res = isolated.run("import sys\nline = input()\nprint(line[::-1])\nprint('err', file=sys.stderr)\nsys.exit(3)", stdin="abc\n")
    assert isinstance(res, RunResult)
    assert res.stdout == "cba\n" and res.stderr == "err\n"
    assert res.exit_code == 3 and not res.ok and not res.timed_out and not res.oom
    assert res.backend == isolated.name
    assert 0 < res.duration_s < 5


def test_ok_and_flags(isolated):
    res = isolated.run("print('hi')")
    assert res.ok and res.exit_code == 0 and res.stdout == "hi\n" and res.stderr == ""
    assert not res.stdout_truncated and not res.stderr_truncated


def test_uncaught_exception_traceback_reads_like_python(isolated):
    res = isolated.run("def f():\n    raise ValueError('boom')\nf()")
    assert res.exit_code == 1
    assert res.stderr.startswith("Traceback (most recent call last):")
    assert "ValueError: boom" in res.stderr and "main.py" in res.stderr
    assert "_run_program" not in res.stderr and "<string>" not in res.stderr


def test_syntax_error_program(isolated):
    res = isolated.run("def broken(:\n")
    assert res.exit_code == 1 and "SyntaxError" in res.stderr


def test_system_exit_variants(isolated):
    assert isolated.run("raise SystemExit").exit_code == 0
    assert isolated.run("raise SystemExit(7)").exit_code == 7
    res = isolated.run("raise SystemExit('bad input')")
    assert res.exit_code == 1 and "bad input" in res.stderr
    assert isolated.run("import os\nos._exit(5)").exit_code == 5


def test_files_are_placed_in_the_work_dir(isolated):
    res = isolated.run(
        "import json, os\nfrom helper import double\nprint(double(21), open('data/input.txt').read(), open('blob.bin', 'rb').read())",
        files={"helper.py": "def double(x):\n    return 2 * x\n", "data/input.txt": "hello", "blob.bin": b"\x00\xff"},
    )
    assert res.ok, res
    assert res.stdout == "42 hello b'\\x00\\xff'\n"


@pytest.mark.parametrize("name", ["/etc/passwd", "../escape", "a/../../b", "", "main.py", "a//b"])
def test_bad_file_names_are_rejected(isolated, name):
    with pytest.raises(ValueError):
        isolated.run("pass", files={name: "x"})


def test_unicode_round_trip(isolated):
    res = isolated.run("s = input()\nprint(s, len(s))\nprint('\\udcff'.encode('utf-8', 'surrogateescape'))", stdin="héllo ✓ 你好")
    assert res.stdout.startswith("héllo ✓ 你好 10\n"), res


def test_invalid_utf8_output_is_replaced(isolated):
    res = isolated.run("import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end')")
    assert res.ok and res.stdout == "ok \ufffd\ufffd end"


def test_time_limit_close_to_requested(isolated):
    res = isolated.run("import time\ntime.sleep(10)", limits=Limits(time_s=0.5))
    assert res.timed_out and 0.5 <= res.duration_s < 1.5


def test_memory_limit_is_relative_to_preloaded_interpreter(isolated):
    # 100 MB fits in a 256 MB budget, 400 MB does not, whatever the worker preloaded.
    ok = isolated.run("x = bytearray(100 << 20)\nprint(len(x))", limits=Limits(memory_mb=256))
    assert ok.ok, ok
    too_big = isolated.run("x = bytearray(400 << 20)", limits=Limits(memory_mb=256))
    assert too_big.oom and not too_big.ok


def test_random_state_differs_between_runs(isolated):
    program = "import random\nprint(random.random())"
    outputs = {isolated.run(program).stdout for _ in range(5)}
    assert len(outputs) == 5


def test_programs_do_not_share_state(isolated):
    isolated.run("import json\njson.SENTINEL = 1\nimport builtins\nbuiltins.LEAK = 2")
    res = isolated.run("import json, builtins\nprint(hasattr(json, 'SENTINEL'), hasattr(builtins, 'LEAK'))")
    assert res.stdout == "False False\n"


def test_name_main_and_argv(isolated):
    res = isolated.run("import sys\nif __name__ == '__main__':\n    print('main', sys.argv[0].endswith('main.py'))")
    assert res.stdout == "main True\n"


def test_threads_are_joined_before_exit(isolated):
    program = "import threading, time\ndef work():\n    time.sleep(0.2)\n    print('thread done', flush=True)\nthreading.Thread(target=work).start()\nprint('main done')"
    res = isolated.run(program)
    assert res.ok and "thread done" in res.stdout and "main done" in res.stdout


def test_run_batch_preserves_order(isolated):
    jobs = [Job(f"import time, random\ntime.sleep(random.random() / 50)\nprint({i} * {i})") for i in range(12)]
    results = isolated.run_batch(jobs)
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(12)]
    assert isolated.run_batch([]) == []


def test_run_batch_mixed_limits_and_stdin(isolated):
    results = isolated.run_batch(
        [
            Job("print(input())", stdin="a"),
            Job("while True: pass", limits=Limits(time_s=0.5)),
            Job("print(open('f').read())", files={"f": "file"}),
        ]
    )
    assert results[0].stdout == "a\n" and results[1].timed_out and results[2].stdout == "file\n"


def test_arun(isolated):
    async def main():
        return await asyncio.gather(*(isolated.arun(f"print({i})") for i in range(6)))

    results = asyncio.run(main())
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]


def test_context_manager_and_close():
    with make("bwrap", pool_size=1) as sandbox:
        assert sandbox.run("print(1)").ok
    with pytest.raises(SandboxError):
        sandbox.run("print(1)")
    sandbox.close()  # idempotent


def test_limits_validation_and_frozen():
    limits = Limits()
    assert (limits.time_s, limits.memory_mb, limits.max_processes, limits.output_bytes, limits.file_size_mb, limits.open_files) == (
        5.0, 512, 32, 64_000, 16, 64
    )  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.time_s = 1  # type: ignore[misc]
    for bad in ({"time_s": 0}, {"memory_mb": 0}, {"max_processes": -1}, {"output_bytes": 1.5}, {"open_files": 3}):
        with pytest.raises(ValueError):
            Limits(**bad)


@pytest.mark.parametrize(
    "bad",
    [
        {"time_s": float("inf")},  # issue 11 (6): accepted, then run() raised OverflowError
        {"time_s": 1e12},
        {"time_s": float("nan")},
        {"time_s": -1.0},
        {"time_s": True},
        {"time_s": "5"},
        {"memory_mb": 1 << 40},
        {"memory_mb": -512},
        {"memory_mb": True},
        {"max_processes": 10**9},
        {"output_bytes": 1 << 40},
        {"file_size_mb": 0},
        {"open_files": 1 << 30},
    ],
)
def test_bad_limits_are_refused_where_they_are_made(bad):
    ((name, value),) = bad.items()
    with pytest.raises(ValueError, match=f"Limits.{name} must be"):
        Limits(**bad)


def test_largest_limits_still_run(isolated):
    res = isolated.run("print('ok')", limits=Limits(time_s=24 * 3600.0, memory_mb=4096, open_files=4096))
    assert res.ok and res.stdout == "ok\n", res


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_packages_on_the_import_path_are_importable_wherever_they_live(backend, tmp_path):
    # Issue 11 (8): the process backend hid a virtual environment under /tmp behind its private
    # /tmp, so `import sympy` failed where bwrap imported it. tmp_path lives under /tmp too.
    package = tmp_path / "lib" / "tinypkg_sandbox_test"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 42\n")
    sandbox = make(backend, pool_size=1, extra_paths=[str(tmp_path / "lib")])
    try:
        res = sandbox.run("import tinypkg_sandbox_test\nprint(tinypkg_sandbox_test.VALUE)")
        assert res.ok and res.stdout == "42\n", res
    finally:
        sandbox.close()


def test_open_files_limit(isolated):
    res = isolated.run("fds = [open('f%d' % i, 'w') for i in range(100)]", limits=Limits(open_files=20))
    assert res.exit_code == 1 and "Too many open files" in res.stderr


def test_default_preload_makes_heavy_imports_cheap():
    sandbox = sandboxes.make_sandbox("bwrap", pool_size=1)
    try:
        sandbox.warm()
        res = sandbox.run("import sympy, numpy\nprint(sympy.factor('x**2 - 1'), numpy.arange(3).sum())")
        assert res.ok and res.stdout == "(x - 1)*(x + 1) 3\n", res
        durations = [sandbox.run("import sympy\nprint(sympy.sqrt(8))").duration_s for _ in range(5)]
        assert min(durations) < 0.2  # a fresh interpreter needs ~0.5 s just to import sympy
    finally:
        sandbox.close()


def test_make_sandbox_rejects_unknown_and_unsafe():
    with pytest.raises(ValueError):
        sandboxes.make_sandbox("chroot")
    with pytest.raises(SandboxError, match="allow_unsafe=True"):
        sandboxes.make_sandbox("unsafe")


def test_unsafe_backend_only_when_allowed():
    with sandboxes.make_sandbox("unsafe", allow_unsafe=True, pool_size=1, preload=[]) as sandbox:
        res = sandbox.run("print('unsafe ok')")
        assert res.ok and res.backend == "unsafe"


def test_auto_picks_strongest_and_logs_one_line(caplog):
    caplog.set_level(logging.INFO, logger="sandboxes")
    sandbox = sandboxes.make_sandbox("auto", pool_size=1, preload=[])
    try:
        lines = [r.getMessage() for r in caplog.records if r.name == "sandboxes"]
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"sandboxes: using {sandbox.name}")
        if sandbox.name != "docker":
            assert "skipped docker:" in lines[0]
        assert sandbox.name in ("docker", "bwrap", "process")
        assert sandbox.run("print(1)").ok
    finally:
        sandbox.close()


def test_sandbox_backend_env_override(monkeypatch):
    monkeypatch.setenv("SANDBOX_BACKEND", "process")
    with sandboxes.make_sandbox("auto", pool_size=1, preload=[]) as sandbox:
        assert sandbox.name == "process"


def test_auto_never_falls_back_to_unsafe_silently(monkeypatch, tmp_path):
    # Make bwrap unavailable and break the process backend's launcher: auto must raise, not
    # quietly run programs unisolated.
    from sandboxes import factory

    def broken(**_):
        raise SandboxUnavailable("disabled for this test")

    monkeypatch.setitem(factory._CONSTRUCTORS, "bwrap", broken)
    monkeypatch.setitem(factory._CONSTRUCTORS, "process", broken)
    monkeypatch.setitem(factory._CONSTRUCTORS, "docker", broken)
    with pytest.raises(SandboxUnavailable, match="allow_unsafe=True"):
        sandboxes.make_sandbox("auto")
    with sandboxes.make_sandbox("auto", allow_unsafe=True, pool_size=1, preload=[]) as sandbox:
        assert sandbox.name == "unsafe"


def test_missing_bwrap_binary_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("SANDBOX_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        sandboxes.make_sandbox("bwrap", bwrap="/nonexistent/bwrap")


def test_shared_sandbox_is_cached_per_spec():
    first = sandboxes.shared_sandbox("bwrap", pool_size=1, preload=[])
    try:
        assert sandboxes.shared_sandbox("bwrap", pool_size=1, preload=[]) is first
        other = sandboxes.shared_sandbox("process", pool_size=1, preload=[])
        assert other is not first
        first.close()
        assert sandboxes.shared_sandbox("bwrap", pool_size=1, preload=[]) is not first  # closed ones are replaced
    finally:
        sandboxes.close_shared_sandboxes()


def test_importable_with_standard_library_only(tmp_path):
    # A bare interpreter (-S: no site-packages) can import the package and its harness.
    root = os.path.dirname(os.path.dirname(sandboxes.__file__))
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import sandboxes, sandboxes.harness, sandboxes.local, sandboxes.docker_backend\n"
        "assert 'docker' not in sys.modules, 'docker imported eagerly'\n"
        "print('ok')" % root
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout == "ok\n", proc.stderr


def test_non_str_source_is_a_caller_error(isolated):
    with pytest.raises(TypeError):
        isolated.run(b"print(1)")  # type: ignore[arg-type]


def test_worker_killed_from_outside_is_replaced(isolated):
    import signal as _signal

    assert isolated.run("print(1)").ok
    victims = sandbox_processes(isolated)
    for pid in isolated.worker_pids():
        os.kill(pid, _signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive(victims) and time.monotonic() < deadline:  # dead, not yet noticed by the pool
        time.sleep(0.01)
    # The pool finds out only when it hands over the next job: the dead worker never
    # acknowledges it, so the job goes to a fresh worker instead of failing.
    res = isolated.run("print(2)")
    assert res.ok and res.stdout == "2\n", res


def test_job_killing_its_own_worker_gets_a_result(isolated):
    # Where the worker is pid 1 of its namespace the kill is simply ignored; elsewhere the worker
    # dies. Either way the caller gets a result, never an exception, and the next run works.
    res = isolated.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(0.5)", limits=Limits(time_s=3))
    assert isinstance(res, RunResult)
    assert isolated.run("print(3)").stdout == "3\n"


def test_forked_child_cannot_use_parents_sandbox(isolated):
    assert isolated.run("print(1)").ok
    pid = os.fork()
    if pid == 0:
        try:
            isolated.run("print(1)")
            os._exit(1)
        except SandboxError as exc:
            os._exit(0 if "after fork()" in str(exc) else 2)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert isolated.run("print(2)").stdout == "2\n"


def test_a_program_sees_its_own_proc_files(isolated):
    # The worker is not dumpable, and a job inherits that: it must be undone, or a program could
    # not list its own descriptors or read its own memory maps.
    res = isolated.run("import os\nprint(sorted(os.listdir('/proc/self/fd'))[:3], len(open('/proc/self/maps').read()) > 0)")
    assert res.ok and res.stdout == "['0', '1', '2'] True\n", res


@pytest.mark.skipif(os.geteuid() != 0, reason="uid blocks are reserved by root only (the per-run uids need root)")
def test_uid_blocks_are_never_shared_while_held():
    from sandboxes.local import _UID_BLOCK, reserve_uid_block

    held = [reserve_uid_block() for _ in range(4)]
    try:
        bases = [base for base, _ in held]
        assert all(fd is not None for _, fd in held)
        assert len(set(bases)) == 4 and all(base % _UID_BLOCK == 0 and base >= 1 << 30 for base in bases)
        _released_base, released_fd = held.pop(1)
        os.close(released_fd)
        again = reserve_uid_block()
        held.append(again)
        assert again[0] not in [base for base, _ in held[:-1]]
    finally:
        for _, fd in held:
            os.close(fd)
