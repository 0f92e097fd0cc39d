"""Shared code files (sandboxes.core.SHARED_CODE_MAGIC): a pooled worker's zygote runs a kept
file's body once, every run given the file finds that module with the state its body left (not
what an earlier run did to it), a run not given the file finds nothing, and the file itself
still reaches every run whole. A file the zygote cannot hold is only a file."""

from __future__ import annotations

import hashlib
import marshal
import sys

import pytest

from sandboxes.core import SHARED_CODE_MAGIC, shared_code_file
from tests.sandboxes.conftest import make

# Over the file store's 8 KiB threshold: only a file sent again and again is kept (and held).
_PADDING = "x" * 10_000
_LIBRARY = f"""
CALLS = []
_PAD = {_PADDING!r}
def call(value):
    CALLS.append(value)
    return len(CALLS)
"""

# Reports what the run was given: the held module's answer (None: not held), the names the
# run finds, and the digest of the file in its directory.
_PROGRAM = """
import hashlib, sys
modules = sys.modules["_sandbox_shared_code"].modules
held = modules.get("lib.bin")
print(held.call("x") if held is not None else None, sorted(modules), end=" ")
try:
    print(hashlib.sha256(open("lib.bin", "rb").read()).hexdigest())
except FileNotFoundError:
    print("no-file")
"""


def _library_file() -> bytes:
    return shared_code_file(compile(_LIBRARY, "lib", "exec"))


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_a_held_module_reaches_each_run_given_it_fresh(backend):
    blob = _library_file()
    digest = hashlib.sha256(blob).hexdigest()
    with make(backend, pool_size=1) as sandbox:
        runs = [sandbox.run(_PROGRAM, files={"lib.bin": blob}) for _ in range(4)]
        assert all(run.ok for run in runs), [run.stderr for run in runs]
        # Seen once: inline, not held; then kept and held: each run's call is the first its
        # copy of the module saw (the body ran in the zygote; no run's call reaches another).
        assert [run.stdout.split() for run in runs] == [["None", "[]", digest]] + [["1", "['lib.bin']", digest]] * 3
        # A run not given the file finds nothing; the same content under another name is found
        # under that name.
        bare = sandbox.run(_PROGRAM)
        assert bare.stdout.split() == ["None", "[]", "no-file"], bare.stderr
        renamed = sandbox.run(_PROGRAM.replace('modules.get("lib.bin")', 'modules.get("other.bin")'), files={"other.bin": blob})
        assert renamed.stdout.split()[:2] == ["1", "['other.bin']"], renamed.stderr


def test_a_file_the_zygote_cannot_hold_is_only_a_file():
    code = compile(_LIBRARY, "lib", "exec")
    broken_body = compile(_LIBRARY + "\nraise RuntimeError('no')\n", "lib", "exec")
    cases = {
        "another interpreter's": shared_code_file(code, cache_tag="cpython-0"),
        "a body that raises": shared_code_file(broken_body),
        "not marked as shared code": _library_file()[len(SHARED_CODE_MAGIC) :],
        # Marked, but not made by shared_code_file here: bytes from anywhere else (a model's
        # output passed on as a file) are never run by the zygote, whatever they look like.
        "marked but not declared": SHARED_CODE_MAGIC
        + sys.implementation.cache_tag.encode("ascii")
        + b"\n"
        + marshal.dumps(compile(_LIBRARY + "\nX = 1\n", "lib", "exec")),
    }
    with make("bwrap", pool_size=1) as sandbox:
        for why, blob in cases.items():
            runs = [sandbox.run(_PROGRAM, files={"lib.bin": blob}) for _ in range(3)]
            digest = hashlib.sha256(blob).hexdigest()
            assert [run.stdout.split() for run in runs] == [["None", "[]", digest]] * 3, (why, runs[-1].stderr)
        # Holding switched off on the host: kept in the worker, never held by its zygote.
        sandbox._pool.set_shared_code(False)
        fresh = _library_file() + b"\n"  # new content: kept from now on
        runs = [sandbox.run(_PROGRAM, files={"lib.bin": fresh}) for _ in range(3)]
        assert [run.stdout.split()[:2] for run in runs] == [["None", "[]"]] * 3, runs[-1].stderr


def test_the_function_test_driver_is_held_and_grades_as_before():
    from sandboxes import harness

    solution = "def add(a, b):\n    return a + b\n"
    tests = ["assert add(1, 2) == 3", "assert add(2, 2) == 5"]
    with make("bwrap", pool_size=1) as sandbox:
        reports = [harness.run_function_tests(sandbox, solution, tests, entry_point="add") for _ in range(3)]
        # Run 1 carries the driver, run 2 has the worker keep it (and its zygote hold it), run 3
        # only names it: the verdicts never change.
        assert [[t.passed for t in report.results] for report in reports] == [[True, False]] * 3
        probe = "import sys\nheld = sys.modules['_sandbox_shared_code'].modules['harness_driver.bin']\nprint(callable(held._main))"
        run = sandbox.run(probe, files=harness._driver_for(sandbox))
        assert run.stdout.strip() == "True", run.stderr
