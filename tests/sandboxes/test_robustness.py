"""Arbitrary input never makes `run` raise; many runs leave no processes or directories behind."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandboxes import Job, Limits, RunResult
from tests.sandboxes.conftest import descendants, make

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
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("sandbox-")}


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
    procs_before = set(descendants())
    options = {"allow_unsafe": True} if backend == "unsafe" else {}
    sandbox = make(backend, max_jobs_per_worker=100, **options)  # recycle workers along the way
    try:
        jobs, checks = [], []
        for i in range(runs):
            template, check = programs[i % len(programs)]
            jobs.append(Job(template.format(i=i)))
            checks.append((i, check))
        results = sandbox.run_batch(jobs)
        bad = [(i, r) for (i, check), r in zip(checks, results) if not check(i, r)]
        assert not bad, bad[:3]
    finally:
        sandbox.close()
    assert set(descendants()) - procs_before == set()
    assert _temp_entries() - temp_before == set()
