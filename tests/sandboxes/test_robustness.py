"""Arbitrary input never makes `run` raise; many runs leave no processes or directories behind."""

from __future__ import annotations

import os
import tempfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandboxes import Job, Limits, RunResult
from tests.sandboxes.conftest import alive, descendants, idle_tree_is_clean, make, sandbox_processes

QUICK = Limits(time_s=1.0, output_bytes=4096)

# Fragments that make random text more likely to be (almost) valid Python that does something.
_FRAGMENTS = [
    "print(", ")", "input()", "import os", "import sys", "\n", "    ", "while True:", "for i in range(3):",
    "pass", "x = ", "1/0", "[1] * 10", "'", '"', "def f():", "return", "raise", "sys.exit(", "os._exit(",
    "\x00", "\ud800", "lambda: ", "yield", "class A:", "#", "\\", "**", "{", "}",
]
python_ish = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=5)), max_size=25).map("".join)


@pytest.fixture(scope="module")
def sandbox():
    sb = make("bwrap")
    yield sb
    sb.close()


def _check(res: RunResult) -> None:
    assert isinstance(res, RunResult)
    assert isinstance(res.stdout, str) and isinstance(res.stderr, str)
    assert len(res.stdout.encode("utf-8", "surrogatepass")) <= 3 * QUICK.output_bytes
    assert res.exit_code is None or isinstance(res.exit_code, int)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=st.text(max_size=200), stdin=st.text(max_size=100))
def test_arbitrary_text_never_raises(sandbox, source, stdin):
    _check(sandbox.run(source, stdin=stdin, limits=QUICK))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=python_ish, stdin=st.text(max_size=50))
def test_python_like_text_never_raises(sandbox, source, stdin):
    _check(sandbox.run(source, stdin=stdin, limits=QUICK))


def _temp_entries() -> set[str]:
    # Workers name their host directories after this process, so parallel test processes and
    # other users of the machine do not disturb the count.
    prefix = f"sandbox-worker-{os.getpid()}-"
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith(prefix)}


@pytest.mark.parametrize("backend, runs", [("bwrap", 1000), ("process", 300), ("unsafe", 200)])
def test_many_runs_leave_no_processes_or_temp_dirs(backend, runs):
    programs = [
        ("print(sum(range({i})))", lambda i, r: r.ok and r.stdout == f"{sum(range(i))}\n"),
        ("raise ValueError({i})", lambda i, r: r.exit_code == 1 and f"ValueError: {i}" in r.stderr),
        ("import sys\nsys.exit({i} % 7)", lambda i, r: r.exit_code == i % 7),
        ("import os\nif os.fork() == 0:\n    import time\n    time.sleep(30)\nprint({i})", lambda i, r: r.ok and r.stdout == f"{i}\n"),
        ("open('f{i}', 'w').write('x')\nprint(open('f{i}').read())", lambda i, r: r.ok and r.stdout == "x\n"),
    ]
    temp_before = _temp_entries()
    options = {"allow_unsafe": True} if backend == "unsafe" else {}
    sandbox = make(backend, max_jobs_per_worker=100, **options)  # recycle workers along the way
    try:
        jobs, checks = [], []
        for i in range(runs):
            template, check = programs[i % len(programs)]
            jobs.append(Job(template.format(i=i)))
            checks.append((i, check))
        results = sandbox.run_batch(jobs)
        bad = [(i, r) for (i, check), r in zip(checks, results, strict=True) if not check(i, r)]
        assert not bad, bad[:3]
        # Every fifth program left a sleeping child: none may survive its run.
        assert idle_tree_is_clean(sandbox), {p: descendants(p) for p in sandbox.worker_pids()}
        ours = sandbox_processes(sandbox)
        if backend != "unsafe":
            assert _temp_entries() - temp_before == set()  # their work dirs live on private tmpfs
    finally:
        sandbox.close()
    # The kernel tears a pid namespace down asynchronously after its init dies: allow it a moment.
    deadline = time.monotonic() + 5
    while alive(ours) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(ours) == []
    assert _temp_entries() - temp_before == set()


def test_host_work_dirs_are_removed_even_when_a_worker_is_killed():
    # The unsafe backend keeps its work dirs on the host: they must go with the worker, also
    # when the worker is SIGKILLed and cannot tidy up itself.
    import signal

    before = _temp_entries()
    sandbox = make("unsafe", allow_unsafe=True, pool_size=1)
    try:
        assert sandbox.run("print(1)").ok
        created = _temp_entries() - before
        assert len(created) == 1
        for pid in sandbox.worker_pids():
            os.kill(pid, signal.SIGKILL)
        assert sandbox.run("print(2)").stdout == "2\n"  # a fresh worker
        assert not (created & _temp_entries()), "the killed worker's directory was left behind"
    finally:
        sandbox.close()
    assert _temp_entries() - before == set()
