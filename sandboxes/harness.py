"""Test harnesses on top of a sandbox, as the code environments use them.

* `run_function_tests`: HumanEval / MBPP style. The solution (after an optional ``setup``) is
  executed once inside the sandbox, then each test snippet runs on its own with its own time
  limit, and each is counted on its own with its error text. The tests run in a process that
  never executes the solution and reach it only through plain data
  (``sandboxes/_function_driver.py``, ``sandboxes/_crossing.py``). `split_check_function` turns
  a HumanEval ``check(candidate)`` function into such snippets.
* `run_io_cases`: APPS / CodeContests style. The program runs once per case with that case's
  stdin and its own time limit; stdout is compared with the expected output, ignoring
  differences in whitespace.

Nothing here executes model output on the host: programs are only parsed (``ast``) for
reporting, and run in the sandbox.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import marshal
import secrets
import sys
import threading
import warnings
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ._case_state import keeps_to_itself
from ._parse import parse_python
from .core import SHARED_CODE_MAGIC, Job, Limits, RunResult, Sandbox, shared_code_file

#: Captured stdout per function test, in characters (the rest is dropped).
_TEST_STDOUT_CHARS = 2000

@dataclasses.dataclass(frozen=True)
class TestResult:
    """Outcome of one test (one assertion snippet, or one stdin/stdout case).

    Attributes:
        index: position in the list of tests or cases.
        name: a short label: the test's source (function tests) or ``"case <i>"``.
        passed: the test passed.
        error: why it failed (exception text, ``timed out``, ``wrong answer``), else ``None``.
        stdout: what the code printed during this test (for I/O cases: the program's output).
        expected: expected output (I/O cases), else ``None``.
        timed_out: this test hit its time limit.
        harness_failure: function tests: why the harness, not the test's own check, failed
            this test (a time-out, a value that cannot cross as data, a handle asked for its
            truth value, a solution process that died), else ``None``. Set even where the test
            caught that failure and raised something else (an ``AssertionError``), and on every
            test that fails after such a failure in the same run (tests share a process, so an
            earlier test can hand a harness failure's outcome to a later one): a test marked so
            never counts as having caught a wrong program. Set by either side: the test
            process, or the solution's side's ledger of calls (a harness event it recorded
            before this test's record, a call left running, a ledger cut short: see
            `_solution_marks`), which the tests cannot reach.
    """

    __test__ = False  # not a pytest test class

    index: int
    name: str
    passed: bool
    error: str | None = None
    stdout: str = ""
    expected: str | None = None
    timed_out: bool = False
    harness_failure: str | None = None

    @property
    def actual(self) -> str:
        """Alias of `stdout` (the program's actual output for I/O cases)."""
        return self.stdout


@dataclasses.dataclass(frozen=True)
class TestReport:
    """All test outcomes for one solution.

    Attributes:
        results: one `TestResult` per test, in order.
        compiled: the solution parsed (and, for function tests, compiled) without a syntax error.
        ran: the solution executed without crashing: for function tests, its top level
            (definitions, imports) ran to the end; for I/O cases, at least one case exited
            normally (status 0, in time).
        error: what went wrong before any test could run (e.g. the syntax error), else ``None``.
        runs: the raw sandbox results behind this report (one for function tests, one per case).
        skipped: the solution did not run: enough programs before it were wrong programs
            (`run_io_programs` with ``enough``). Not a verdict: nothing was judged.
    """

    __test__ = False

    results: list[TestResult]
    compiled: bool
    ran: bool
    error: str | None = None
    runs: list[RunResult] = dataclasses.field(default_factory=list)
    skipped: bool = False

    @property
    def passed(self) -> int:
        return sum(1 for r in self.results if r.passed)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def pass_rate(self) -> float:
        """Fraction of tests passed (0.0 when there are no tests)."""
        return self.passed / self.total if self.results else 0.0

    @property
    def all_passed(self) -> bool:
        return bool(self.results) and self.passed == self.total

    @property
    def sandbox_error(self) -> str | None:
        """Set when the sandbox failed under one of the runs (`RunResult.sandbox_error`): the
        tests it carried were not judged, which is an infrastructure failure, not the solution's."""
        return next((run.sandbox_error for run in self.runs if run.sandbox_error), None)


# ---------------------------------------------------------------------------------------------
# function-style tests
# ---------------------------------------------------------------------------------------------

# The driver runs inside the sandbox: the data codec, then its processes' code (see
# sandboxes/_function_driver.py). Each result line T writes is prefixed with a per-run secret,
# read from stdin (gone from every descriptor before any other code runs), so that nothing else
# that reaches the run's stdout can pass for a result. It is sent compiled (marshal, without
# docstrings), since compiling 50 KB of source in every run would cost more than the tests
# themselves. The source goes along only where the sandbox's interpreter turned out to be
# another version than this one (its first run there says so and is sent again with the
# source): every byte of a job's files is copied host -> worker -> the run's file system, and
# the source would add two thirds to the driver's share of that. The compiled form is a shared
# code file (sandboxes.core.shared_code_file): a pooled sandbox's zygote runs its body once per
# worker and the loader calls that module's `_main` rather than reading, unmarshalling and
# running 70 KB in every run (its body only defines names).
#: What the loader writes to stderr, and the status it exits with, when the compiled driver is
#: for another interpreter and no source came with it.
_NEEDS_SOURCE = "harness driver: compiled for another interpreter"
_NEEDS_SOURCE_STATUS = 87
#: Sandboxes (by identity, weakly) whose interpreter needs the driver's source.
_SOURCE_NEEDED: weakref.WeakSet[Sandbox] = weakref.WeakSet()


@functools.lru_cache(maxsize=1)
def _driver_files() -> dict[str, str | bytes]:
    """The driver's compiled form and its source, made once per process on first use."""
    source = (
        Path(__file__).with_name("_crossing.py").read_text(encoding="utf-8")
        + "\n"
        + Path(__file__).with_name("_function_driver.py").read_text(encoding="utf-8")
    )
    # optimize=2 drops docstrings (78 KB -> 70 KB; the driver has no assert statements of its
    # own, and the tests and the solution are compiled inside the run with their own flags).
    # (Dropping the line tables too, 52 KB, broke the driver's handling of a frame over the
    # limit in CPython 3.11: the run exited with status 1.)
    code = compile(source, "harness_driver.py", "exec", dont_inherit=True, optimize=2)
    return {"harness_driver.bin": shared_code_file(code), "harness_driver.py": source}


def _driver_for(sandbox: Sandbox, with_source: bool = False) -> dict[str, str | bytes]:
    """The driver's files for a run on `sandbox`: the compiled form, and the source where this
    sandbox needs it (or `with_source`)."""
    files = _driver_files()
    if with_source or _known_to_need_source(sandbox):
        return files
    return {"harness_driver.bin": files["harness_driver.bin"]}


def _known_to_need_source(sandbox: Sandbox) -> bool:
    try:
        return sandbox in _SOURCE_NEEDED
    except TypeError:  # a sandbox object that cannot be hashed or weakly referenced
        return False


def _remember_needs_source(sandbox: Sandbox) -> None:
    try:
        _SOURCE_NEEDED.add(sandbox)
    except TypeError:
        pass  # such a sandbox pays a second run each time; it still grades correctly


_LOADER = f"""\
import marshal, sys
held = sys.modules["_sandbox_shared_code"].modules.get("harness_driver.bin") if "_sandbox_shared_code" in sys.modules else None
if held is not None:
    held._entry()
else:
    with open("harness_driver.bin", "rb") as handle:
        tag, _, blob = handle.read().partition(b"\\n")
    if tag == {SHARED_CODE_MAGIC!r} + (sys.implementation.cache_tag or "none").encode("ascii"):
        code = marshal.loads(blob)
    else:
        try:
            handle = open("harness_driver.py", encoding="utf-8")
        except FileNotFoundError:
            sys.stderr.write({_NEEDS_SOURCE!r} + "\\n")
            sys.exit({_NEEDS_SOURCE_STATUS})
        with handle:
            code = compile(handle.read(), "harness_driver.py", "exec", dont_inherit=True)
    del tag, blob, handle
    exec(code)
"""
_TESTS_FILE = "harness_tests.json"


def _wipes_scratch(sandbox: Sandbox) -> bool:
    """Whether each run of `sandbox` finds the directories a program may write outside its own
    (``/tmp``, ``/dev/shm``) as the sandbox left them, private to it: then a run of many programs
    also finds what one program left there and removes it (sandboxes/_function_driver.py,
    ``_sweep_scratch``). Not on the unsafe backend, whose ``/tmp`` is the host's."""
    return getattr(sandbox, "strength", 0) > 0


def _run_driver(sandbox: Sandbox, stdin: str, job_files: dict[str, str | bytes], limits: Limits) -> RunResult:
    """One run of the harness driver with `job_files`; again with the driver's source where the
    sandbox's interpreter turned out to need it (see `_NEEDS_SOURCE`)."""
    driver = _driver_for(sandbox)
    run = sandbox.run(_LOADER, stdin=stdin, files={**driver, **job_files}, limits=limits)
    if _needs_source(run) and "harness_driver.py" not in driver:
        _remember_needs_source(sandbox)
        driver = _driver_for(sandbox, with_source=True)
        run = sandbox.run(_LOADER, stdin=stdin, files={**driver, **job_files}, limits=limits)
    return run
_SOLUTION_FILE = "harness_solution.json"


def _test_label(test: str) -> str:
    lines = [line for line in test.strip().splitlines() if line.strip()]
    label = lines[-1].strip() if lines else "<empty test>"
    return label if len(label) <= 200 else label[:197] + "..."


def _test_snippets(tests: Sequence[str] | str, entry_point: str | None) -> list[str]:
    """The tests as a list of snippets; a single string is test *code*, split by its asserts."""
    if isinstance(tests, str):
        return split_test_code(tests, entry_point)
    if isinstance(tests, (bytes, bytearray, memoryview)) or not isinstance(tests, Iterable):
        raise TypeError(
            f"tests must be a list of test snippets or a string of test code, got {type(tests).__name__}"
        )
    snippets = list(tests)
    for index, test in enumerate(snippets):
        if not isinstance(test, str):
            raise TypeError(f"tests[{index}] must be a str (one test snippet), got {type(test).__name__}")
    return snippets


def split_test_code(test_code: str, entry_point: str | None = None) -> list[str]:
    """Turn test code given as one string into snippets counted one by one.

    * HumanEval style (the code defines ``check(candidate)``, perhaps with ``METADATA``, imports
      and helpers): `split_check_function` with `entry_point`, which it needs (``ValueError``
      without one).
    * Otherwise (MBPP style: imports, helpers and top-level asserts): one snippet per top-level
      statement that contains an ``assert``, each preceded by the statements before it that
      contain none (imports, helpers, setup), so it runs on its own.

    Raises:
        ValueError: the code does not parse, or contains no assert to count.
    """
    try:
        module = parse_python(test_code)
    except SyntaxError as exc:
        raise ValueError(f"test code does not parse: {exc}") from None
    if any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "check"
        for node in module.body
    ):
        if not entry_point:
            raise ValueError(
                "the test code defines check(candidate) (HumanEval style): pass entry_point= the name of the "
                "function under test, so each assert can be run against it"
            )
        snippets = split_check_function(test_code, entry_point)
    else:
        snippets, context = [], []
        for statement in module.body:
            text = ast.unparse(statement)
            if any(isinstance(node, ast.Assert) for node in ast.walk(statement)):
                snippets.append("\n".join(context + [text]))
            else:
                context.append(text)
    if not snippets:
        raise ValueError("the test code contains no assert: nothing to count")
    return snippets


def run_function_tests(
    sandbox: Sandbox,
    solution: str,
    tests: Sequence[str] | str,
    *,
    setup: str = "",
    entry_point: str | None = None,
    time_s: float = 5.0,
    memory_mb: int = 512,
    stop_at_timeout: bool = False,
) -> TestReport:
    """Run `setup` then `solution` once in the sandbox, then each test snippet on its own.

    If the solution's top level does not complete (exception, ``sys.exit``, time limit), no
    test runs and each fails with that reason, as when the tests follow ``python solution.py``.

    Args:
        sandbox: where to run (any backend).
        solution: the code under test (e.g. a model's completion defining a function).
        tests: snippets, e.g. ``["assert add(1, 2) == 3"]``; each runs in a fresh namespace
            (the setup's names and proxies of the solution's), with its own time limit, and is
            counted on its own. The solution's state is one process's, shared by the tests in
            order (as when HumanEval's ``check`` calls the candidate again and again), except
            that after a call the harness had to abandon (a time-out the solution did not
            honour, a process that died or answered garbage) the next test gets a fresh copy
            of the state its top level left (the tests left run in a fresh run; their failures
            are harness failures, `TestResult.harness_failure`).
            Where `entry_point` is given, ``candidate`` is bound to it (HumanEval style). A
            single string is test *code* (a HumanEval ``check(candidate)`` module, or MBPP-style
            top-level asserts), split into one snippet per assert by `split_test_code`; a bare
            string is never iterated character by character. Anything else raises ``TypeError``.
        setup: code run before the solution (imports, helpers, a problem's prompt prefix).
        entry_point: name the solution must define; a missing one makes `ran` False.
        time_s: time limit for the solution's top level and for each test.
        memory_mb: memory budget of the whole run.
        stop_at_timeout: after a test that took its whole time (it timed out, or the solution
            caught its time-out: a harness failure), run no more: each later test fails
            ``"not run: test <i> reached its time limit"`` (the choice of a problem's mutants,
            which keeps no candidate that reached a golden test's time limit, whatever its other
            tests give).

    The tests never share a process with the solution: they run in a process of their own in
    which every name the solution defines is a proxy, and each call crosses as plain data
    (`sandboxes._crossing`), so nothing of the solution's can take part in a comparison; an
    object that is not data stays behind a handle that refuses ``bool()``, ``len()``, iteration
    and comparison; a ``StopIteration`` leaving the solution arrives as a ``RuntimeError`` (PEP
    479); what a call prints reaches the test's ``sys.stdout``. See docs/sandboxes.md.

    Returns:
        A `TestReport`; a solution that crashes, hangs, exits early or floods output fails the
        tests it did not get to, with the reason in each `TestResult.error`.
    """
    tests = _test_snippets(tests, entry_point)
    report, next_test = _function_tests_run(
        sandbox, solution, tests, setup, entry_point, time_s, memory_mb, stop_at_timeout
    )
    # After a call the harness had to give up on (the solution's process stopped answering,
    # died or answered garbage), the run ends after that test (its test process says which test
    # comes next) and the tests left run in a fresh run: a fresh copy of the state the solution's
    # top level left. Each further run starts at a later test, so there are at most len(tests).
    results, runs = list(report.results), list(report.runs)
    while next_test is not None:
        replaced_in = next_test - 1
        rest, next_in_rest = _function_tests_run(
            sandbox, solution, tests[next_test:], setup, entry_point, time_s, memory_mb, stop_at_timeout
        )
        results = results[:next_test] + [
            _after_replacement(result, next_test, replaced_in) for result in rest.results
        ]
        runs += rest.runs
        next_test = None if next_in_rest is None else next_test + next_in_rest
    return dataclasses.replace(report, results=results, runs=runs)


def _function_tests_run(
    sandbox: Sandbox,
    solution: str,
    tests: list[str],
    setup: str,
    entry_point: str | None,
    time_s: float,
    memory_mb: int,
    stop_at_timeout: bool = False,
) -> tuple[TestReport, int | None]:
    """One run of the function-test driver: its `TestReport` (of `tests`), and the index of the
    first test it left to a fresh run (None: none; see `run_function_tests`)."""
    secret = secrets.token_hex(16)
    # The solution's side's own secret for its ledger of calls (`_solution_marks`): it travels
    # in the solution's file, which the test process never reads.
    solution_secret = secrets.token_hex(16)
    common = {"entry_point": entry_point, "time_s": float(time_s), "stdout_chars": _TEST_STDOUT_CHARS}
    # Two files: the test process reads and deletes the tests, the solution's process the
    # solution, before either runs anything else (see sandboxes/_function_driver.py).
    tests_payload = dict(common, setup=setup, tests=list(tests))
    if stop_at_timeout:
        tests_payload["stop_at_timeout"] = True
    solution_payload = dict(common, setup=setup, solution=solution, record_secret=solution_secret)
    # The run as a whole: per-test limits plus slack, so one slow test cannot starve the rest.
    limits = Limits(
        time_s=float(time_s) * (len(tests) + 3) + 2.0,
        memory_mb=memory_mb,
        output_bytes=max(1_000_000, 8 * _TEST_STDOUT_CHARS * (len(tests) + 2)),
    )
    job_files = {_TESTS_FILE: json.dumps(tests_payload), _SOLUTION_FILE: json.dumps(solution_payload)}
    run = _run_driver(sandbox, secret + "\n", job_files, limits)
    stream = _stream(run, secret, solution_secret)
    report = _report_from_run(run, tests, limits, secret, solution_secret, stream=stream)
    return report, _replaced_at(stream, report)


def _replaced_at(stream: list[tuple[str, dict]], report: TestReport) -> int | None:
    """Where the test process ended its run after dropping the solution's process: the index
    of the first test it left (its ``replaced`` record), if that test is after a test it reported
    and before the end; else None. (The record is the test process's word: at worst, tests that
    would have run here run in a fresh run, and their failures count as harness failures.)"""
    for who, record in stream:
        if who == "tests" and record.get("kind") == "replaced":
            next_test = record.get("next")
            if (
                type(next_test) is int
                and 0 < next_test < len(report.results)
                and report.results[next_test - 1].error
            ):
                return next_test
            return None
    return None


def _after_replacement(result: TestResult, offset: int, replaced_in: int) -> TestResult:
    """`result` of a run of the tests left after the solution's process was replaced, as the
    test at `offset` + its index: a failure is a harness failure, as any test that fails after
    a harness failure is (an earlier test could have left the outcome for it)."""
    result = dataclasses.replace(result, index=result.index + offset)
    if result.passed:
        return result
    where = f"test {replaced_in}: the solution's process was replaced; this test ran in a fresh run"
    return dataclasses.replace(
        result,
        error=f"{result.error} (after a harness failure in {where})",
        harness_failure=result.harness_failure or f"after a harness failure in {where}",
    )


_SLOTS_FILE = "harness_slots.json"


@dataclasses.dataclass(frozen=True)
class SlotResult:
    """One program's outcome in a run of many programs (`run_function_tests_slots`).

    Attributes:
        report: its `TestReport`, read from its slot's records and ledger as for a run of its own;
            ``None`` where the run could not establish it (the run failed, was cut short before
            this slot ended, or could not isolate or filter its test processes).
        complete: the slot's test process reported every test and its end.
        stopped_at: the test at which the run's process ended the slot early (it failed that
            test by its own assertion where the golden slot passed it), else ``None``; the
            tests after it were not run.
        position: the slot's place in the run (its order was drawn at random by the host).
        seconds: the slot's wall time in the run, by the run's process (benchmarks), or ``None``.
    """

    report: TestReport | None
    complete: bool
    stopped_at: int | None
    position: int
    seconds: float | None = None


@functools.lru_cache(maxsize=1)
def _test_process_filter() -> str:
    """The test-process filter of a run of many programs, hex-encoded ("" where no filter can be
    built for this machine: the run then grades nothing, see `run_function_tests_slots`)."""
    from . import seccomp

    if not seccomp.supported():
        return ""
    return seccomp.build_test_process_filter().hex()


def run_function_tests_slots(
    sandbox: Sandbox,
    solutions: Sequence[str],
    tests: Sequence[str],
    *,
    setup: str = "",
    entry_point: str | None = None,
    time_s: float = 5.0,
    memory_mb: int = 512,
    golden: int | None = None,
    early_stop: bool = True,
) -> list[SlotResult]:
    """Run the same `tests` against each of `solutions` in **one** sandbox run; a `SlotResult`
    per solution, in the order given.

    Meant for trusted programs (the Coder–Tester's guarded golden solution and its mutants)
    against a tester's tests, where each program would otherwise need a run of its own. Each
    program is a *slot*: its own test process, solution zygote and servers, as in
    `run_function_tests`, run one slot at a time, in an order drawn here at random
    (``secrets.SystemRandom``) and sent only in the programs' file, which the run's process reads
    after it forked every test process. Each test process runs under a seccomp filter against
    what could outlive it (`sandboxes.seccomp.build_test_process_filter`), with a secret of its
    own; each program's ledger has its own secret; every process of a slot is killed and reaped
    before the next slot starts (sandboxes/_function_driver.py, ``_slots_main``).

    `golden`: the index in `solutions` of the program whose passes allow early stop: with
    `early_stop`, once the golden slot has ended, a later slot is ended at its first test that
    failed by the test's own assertion where the golden passed (`SlotResult.stopped_at`).

    Fails closed: a slot that did not end with every test reported is not `complete`; every slot
    has ``report=None`` where the run failed as a whole (a sandbox error, a process that could
    not be made non-dumpable or filtered, the run's process missing its own record of a slot).
    """
    import random

    tests = _test_snippets(tests, entry_point)
    solutions = list(solutions)
    count = len(solutions)
    if count == 0:
        return []
    order = list(range(count))  # order[position] = index in `solutions`
    random.SystemRandom().shuffle(order)
    run_secret = secrets.token_hex(16)
    test_secrets = [secrets.token_hex(16) for _ in range(count)]
    ledger_secrets = [secrets.token_hex(16) for _ in range(count)]
    common = {"entry_point": entry_point, "time_s": float(time_s), "stdout_chars": _TEST_STDOUT_CHARS}
    # The time of one program's run of its own, per slot (what run_function_tests allows).
    slot_time_s = float(time_s) * (len(tests) + 3) + 2.0
    tests_payload = dict(
        common, setup=setup, tests=list(tests), slots=count, filter=_test_process_filter(), scratch=_wipes_scratch(sandbox)
    )
    programs_payload = {
        "slots": [
            dict(common, setup=setup, solution=solutions[index], record_secret=ledger_secrets[position])
            for position, index in enumerate(order)
        ],
        "golden": order.index(golden) if golden is not None else None,
        "early_stop": bool(early_stop and golden is not None),
        "slot_time_s": slot_time_s,
    }
    limits = Limits(
        time_s=slot_time_s * count + 2.0,
        memory_mb=memory_mb,
        output_bytes=count * max(1_000_000, 8 * _TEST_STDOUT_CHARS * (len(tests) + 2)),
    )
    job_files = {_TESTS_FILE: json.dumps(tests_payload), _SLOTS_FILE: json.dumps(programs_payload)}
    stdin = "\n".join([run_secret, *test_secrets]) + "\n"
    run = _run_driver(sandbox, stdin, job_files, limits)
    slot_limits = dataclasses.replace(limits, time_s=slot_time_s)
    own = [record for _who, record in _stream(run, run_secret, None)]
    slot_records = {
        record.get("slot"): record
        for record in own
        if record.get("kind") == "slot" and type(record.get("slot")) is int and "error" not in record
    }
    run_ok = (
        not run.sandbox_error
        and any(record.get("kind") == "done" for record in own)
        and len(slot_records) == count
        and not any(record.get("kind") == "unisolated" for record in own)
    )
    results: list[SlotResult | None] = [None] * count
    for position, index in enumerate(order):
        stream = _stream(run, test_secrets[position], ledger_secrets[position])
        kinds = [record.get("kind") for who, record in stream if who == "tests"]
        slot = slot_records.get(position, {})
        stopped_at = slot.get("stopped_at")
        stopped_at = stopped_at if type(stopped_at) is int and 0 <= stopped_at < len(tests) else None
        established = (
            run_ok and "unfiltered" not in kinds and "unisolated" not in kinds and "compiled" in kinds
        )
        report = (
            _report_from_run(run, tests, slot_limits, test_secrets[position], ledger_secrets[position])
            if established
            else None
        )
        complete = established and kinds.count("done") == 1 and slot.get("timed_out") is False
        if report is not None and not complete:
            report = _slot_cut_short(report, run, slot, stopped_at)
        seconds = slot.get("seconds")
        results[index] = SlotResult(
            report=report,
            complete=complete,
            stopped_at=stopped_at,
            position=position,
            seconds=float(seconds) if type(seconds) in (int, float) else None,
        )
    return [result for result in results if result is not None]


_CALLS_FILE = "harness_calls.json"
#: The setup, epilogue and programs of a run graded by value, compiled here (see
#: `_value_checks_code`; read by ``_precompiled`` in the driver, which shares these names).
_CALLS_CODE_FILE = "harness_calls_code.bin"
#: MiB a value-check run's budget holds beyond `memory_mb` per program's process, for what the
#: run's process and each program's process hold beyond the worker's zygote (a few MiB: the
#: driver and the compiled programs).
_VALUE_RUN_OVERHEAD_MB = 32
_CALLS_CODE_MAGIC = b"#value-checks-code "


#: Held while warnings are silenced: `warnings.catch_warnings` saves and restores the process's
#: filters, so two threads inside it at once could leave them silenced for good.
_SILENCED_WARNINGS = threading.Lock()


@functools.lru_cache(maxsize=1024)
def _compiled_once(source: str, filename: str) -> Any:
    """`source` compiled as the driver compiles a program (its compile-time warnings dropped),
    or None where it does not compile. Cached: a problem's programs are the same at every step."""
    try:
        with _SILENCED_WARNINGS, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compile(source, filename, "exec", dont_inherit=True, optimize=0)
    except Exception:  # SyntaxError, ValueError (a NUL), RecursionError, MemoryError
        return None


def compiles(source: str) -> bool:
    """Whether `source` compiles as the driver compiles a program of `run_value_checks`; the
    code is kept (`_compiled_once`) for the run that sends it, so a caller that checks its
    programs before a run does not compile them twice."""
    return _compiled_once(source, "solution.py") is not None


def _value_checks_code(setup: str, epilogue: str, programs: Sequence[str], filename: str = "solution.py") -> bytes:
    """The content of the driver's `_CALLS_CODE_FILE`: the run's setup, epilogue and programs
    compiled here, once per distinct program, for this interpreter (a sandbox whose
    interpreter is another, or runs with ``-O``, compiles them itself from the sources)."""
    codes = (
        _compiled_once(setup, "setup.py"),
        _compiled_once(epilogue, "epilogue.py") if epilogue else None,
        tuple(_compiled_once(program, filename) for program in programs),
    )
    tag = (sys.implementation.cache_tag or "none").encode("ascii")
    return _CALLS_CODE_MAGIC + tag + b"\n" + marshal.dumps(codes)


@dataclasses.dataclass(frozen=True)
class ValueCheck:
    """A test that is one ``assert`` whose only link to the program is calls of its entry point,
    spelled ``candidate``, on data: ``assert candidate([1, 2], k=3) == [3]``, ``assert
    abs(candidate(2.0) - 1.5) < 1e-6``. What `run_value_checks` runs without a test process.

    Made by ``llm_envs.verifiers.code.value_check``, which admits only expressions of literals,
    operators and a few pure builtins (no attribute, no comprehension, no name but
    ``candidate`` and those builtins), so the assert can reach nothing but the values the calls
    return. Hashable.

    Attributes:
        source: The ``assert`` statement.
        builtins: The builtins it names (a run checks that the program's setup left them
            alone).
    """

    source: str
    builtins: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ValueCheckResult:
    """One program's outcome in `run_value_checks`.

    Attributes:
        ran: its setup and top level completed and defined the entry point.
        outcomes: one per check, in order, as far as the program's checks went: ``"pass"``,
            ``"fail"`` (the assert failed), ``"error"`` (the assert's own expressions raised),
            ``"raised <ExceptionName>"`` (a call of the program raised; later checks still ran),
            or, ending the program's checks (after them a test run's failures are the
            harness's): ``"timeout"`` (the check's timer fired, even where the program caught
            it), ``"uncrossable"`` (a value that is not plain data, or over the limits) and
            ``"unestablished"`` (the program's setup or top level bound a builtin the check
            names, or the check met ``MemoryError``: the program's process is out of its
            address space).
        error: why the top level did not complete, or ``None``.
        stopped: the program's checks stopped at its last outcome, a ``"fail"`` on a check the
            golden program passed (`run_value_checks` with ``golden``); the checks after it did
            not run.
        skipped: the program did not run: enough programs before it were wrong programs
            (`run_value_checks` with ``enough``). Not a verdict: the program is not judged.
    """

    ran: bool
    outcomes: tuple[str, ...]
    error: str | None = None
    stopped: bool = False
    skipped: bool = False


def run_value_checks(
    sandbox: Sandbox,
    programs: Sequence[str],
    checks: Sequence[ValueCheck],
    *,
    setup: str = "",
    entry_point: str,
    time_s: float = 5.0,
    memory_mb: int = 512,
    parallel: int = 2,
    golden: int | None = None,
    epilogue: str = "",
    reference: str = "",
    enough: int | None = None,
) -> list[ValueCheckResult | None]:
    """Run every check on each of `programs` in **one** sandbox run; a `ValueCheckResult` per
    program, in order (``None`` where the run did not establish it: the run failed, that
    program's process did not finish within its time, or it ran beside a program that left a
    file in the job's directory, ``/tmp`` or ``/dev/shm``, where a run of its own would find
    none; those are removed as each program ends, except on the unsafe backend).

    For trusted programs only (the Coder–Tester's mutants), with tests that are `ValueCheck`
    values: each program runs in a process of its own, forked from the run's process (which
    holds every program compiled before its first fork), killed and reaped with its process
    group when it is done. There each check runs as a test process would run it, with
    ``candidate`` standing for the program's entry point behind the same crossing: the arguments and the value are encoded and rebuilt as plain data
    (`sandboxes._crossing`), so the assert compares exactly what a test process would compare,
    and reaches nothing of the program's but those values. No test code of another kind runs.
    The checks share the program's state in order, as a test run's tests share the solution's
    process. Each check has `time_s` (the program's top level too); a program that keeps a
    check's time-out from ending it (catching it at every level of a recursion, or inside a long
    loop in C) ends there all the same, that check ``"timeout"`` (its alarm fires again every
    0.1 s, and a CPU timer 0.5 s past the limit ends its process). `parallel` programs'
    processes run at a time (1-8; they share nothing, and no check can read a clock): less wall
    time on a machine with the cores, the same CPU. Each program's process may grow its address
    space by `memory_mb` (``RLIMIT_AS``; a run of its own may hold that much), and a check that
    meets ``MemoryError`` there ends the program's checks, not established
    (``"unestablished"``); the run's memory budget is `memory_mb` for each program's process
    that may run at once, plus what the run's processes hold beyond the worker's. A run that
    goes over it (or fails otherwise) establishes nothing: every result is ``None``.

    `golden`: the index of the golden program, whose passes allow an early stop. Its process
    starts first; once it has ended, each program started after it stops at its first failed
    assert on a check the golden passed (``ValueCheckResult.stopped``): whether a wrong program
    is caught (``llm_envs.envs.coder_tester.mutants.caught_by_values``) is settled there. A
    stopped result that the golden's own result does not bear out is not established
    (``None``).

    `epilogue`: trusted code that runs in each program's namespace after its top level (but the
    golden's), under a timer of its own, as if appended to the program (the Coder–Tester's
    guard of a wrong program, ``mutants.guard_epilogue``), compiled once for all the programs.
    With a `golden`, the epilogue finds ``__golden_code__`` bound while it runs (not before it,
    not after it): ``(setup, setup's code, golden program, its code)``, the sources and the
    code objects the run's programs run, so that it can run the golden without compiling it in
    every program's process. `reference`: in a run without a `golden`, a trusted program that
    is not graded, found as the golden is (the Coder–Tester's golden solution where its
    mutants are chosen).

    `enough` (a run without a `golden`): no program starts once `enough` of the programs that
    have ended are *wrong programs* (the run's process reads each report as it comes: it ran,
    every check reported, an assert failed, and no check timed out, ended on a value that cannot
    cross or a builtin the program bound, or saw the program raise ``AssertionError``); the
    programs not started are ``skipped``, not judged (the choice of a problem's mutants keeps the
    first wrong ones, and `enough` of them are then among the programs started before).

    The setup, the epilogue and the programs are compiled here, once per distinct source (a
    problem's are the same at every step), and sent with the run; a sandbox whose interpreter
    is another version compiles them itself from the sources.
    """
    if not 1 <= parallel <= 8:
        raise ValueError("parallel must be between 1 and 8")
    programs = list(programs)
    if not programs:
        return []
    if golden is not None and not 0 <= golden < len(programs):
        raise ValueError(f"golden must index programs (0-{len(programs) - 1}), got {golden}")
    if golden is not None and reference:
        raise ValueError("a reference is for a run without a golden among its programs")
    if enough is not None and (golden is not None or type(enough) is not int or enough < 1):
        raise ValueError(f"enough must be a positive int, in a run without a golden; got {enough!r}")
    checks = list(checks)
    payload = {
        "setup": setup,
        "entry_point": entry_point,
        "time_s": float(time_s),
        "programs": programs,
        "checks": [[c.source, list(c.builtins)] for c in checks],
        "parallel": int(parallel),
        "golden": golden,
        "epilogue": epilogue,
        "reference": reference,
        "enough": enough,
        "memory_mb": int(memory_mb),
        "scratch": _wipes_scratch(sandbox),
    }
    program_time_s = float(time_s) * (len(checks) + 2) + 1.0
    limits = Limits(
        time_s=program_time_s * len(programs) + 2.0,  # (as if one at a time)
        # The run's memory is counted over all its processes: `memory_mb` for each program's
        # process that may run at once, as a run of its own would have (each process's address
        # space may grow by that much: the driver's limit), and what the run's process and each
        # program's process hold beyond the worker's zygote (the driver, the compiled programs).
        memory_mb=(memory_mb + _VALUE_RUN_OVERHEAD_MB) * min(parallel, len(programs)) + _VALUE_RUN_OVERHEAD_MB,
        output_bytes=1_000_000 + 8000 * len(programs),
    )
    secret = secrets.token_hex(16)
    job_files: dict[str, str | bytes] = {
        _CALLS_FILE: json.dumps(payload),
        _CALLS_CODE_FILE: _value_checks_code(setup, epilogue, programs + ([reference] if reference else [])),
    }
    run = _run_driver(sandbox, secret + "\n", job_files, limits)
    records = [record for _who, record in _stream(run, secret, None)]
    results: list[ValueCheckResult | None] = [None] * len(programs)
    if run.sandbox_error or not any(record.get("kind") == "done" for record in records):
        return results
    ending = ("timeout", "uncrossable", "unestablished")
    for record in records:
        index = record.get("program")
        if record.get("kind") != "calls" or type(index) is not int or not 0 <= index < len(programs):
            continue
        if record.get("skipped") is True and enough is not None:
            results[index] = ValueCheckResult(
                ran=False, outcomes=(), error="not run: enough programs before it were wrong", skipped=True
            )
            continue
        if record.get("killed") or record.get("left_files") or record.get("harness") or type(record.get("ran")) is not bool:
            continue
        outcomes = record.get("outcomes")
        if (
            type(outcomes) is not list
            or not all(type(o) is str for o in outcomes)
            or len(outcomes) > len(checks)
        ):
            continue
        stopped = record.get("stopped") is True
        if stopped and not (golden is not None and index != golden and record["ran"] and outcomes[-1:] == ["fail"]):
            continue
        if record["ran"] and len(outcomes) < len(checks) and not stopped and not (outcomes and outcomes[-1] in ending):
            continue  # checks missing without a reason: not established
        error = record.get("error")
        results[index] = ValueCheckResult(
            ran=record["ran"], outcomes=tuple(outcomes), error=error if type(error) is str else None, stopped=stopped
        )
    # A stop stands only on a check the golden passed, by the golden's own result.
    reference = results[golden] if golden is not None else None
    for index, result in enumerate(results):
        if result is not None and result.stopped:
            at = len(result.outcomes) - 1
            if reference is None or len(reference.outcomes) <= at or reference.outcomes[at] != "pass":
                results[index] = None
    return results


def _slot_cut_short(report: TestReport, run: RunResult, slot: dict, stopped_at: int | None) -> TestReport:
    """`report` of a slot the run's process ended early, its tests without a record saying why
    (rather than the run's own end)."""
    unrun = _run_failure(run, "before this test ran")
    if stopped_at is not None:
        why = f"not run: the program was stopped after test {stopped_at} caught it"
    elif slot.get("timed_out") is True:
        why = "not run: the slot hit its time limit"
    else:
        return report
    results = [dataclasses.replace(r, error=why) if r.error == unrun else r for r in report.results]
    return dataclasses.replace(report, results=results)


def _needs_source(run: RunResult) -> bool:
    """The run stopped in the loader: the sandbox's interpreter cannot load the compiled driver.
    (Only the loader runs before this; no test or solution has run.)"""
    return run.exit_code == _NEEDS_SOURCE_STATUS and run.stderr.strip() == _NEEDS_SOURCE and not run.stdout


#: A line of the solution's ledger that is not a well-formed event (only its writer, the
#: solution's side, holds the secret): the ledger is then incomplete.
_MALFORMED = {"e": "malformed"}


def _stream(run: RunResult, secret: str, solution_secret: str | None) -> list[tuple[str, dict]]:
    """The records of both sides in the order they reached the run's stdout: ``("tests",
    record)`` for the test process's (prefixed with `secret`), ``("solution", event)`` for the
    solution's ledger (prefixed with `solution_secret`)."""
    stream: list[tuple[str, dict]] = []
    for line in run.stdout.splitlines():
        if line.startswith(secret):
            who, body = "tests", line[len(secret) :]
        elif solution_secret and line.startswith(solution_secret):
            who, body = "solution", line[len(solution_secret) :]
        else:
            continue
        try:
            record = json.loads(body)
        except (ValueError, RecursionError):
            record = None
        if isinstance(record, dict):
            stream.append((who, record))
        elif who == "solution":
            stream.append((who, _MALFORMED))
    return stream


@dataclasses.dataclass
class _Marks:
    """What the solution's ledger says about one record of the test process: `failing` (why a
    failing test may not count as having caught anything), `passing` (why a passing test does not
    pass)."""

    failing: str | None = None
    passing: str | None = None


def _solution_marks(stream: list[tuple[str, dict]]) -> list[_Marks | None]:
    """For each entry of `stream`: the `_Marks` of a test process's ``test`` record (``None`` for
    every other entry), from the solution's ledger (``sandboxes/_function_driver.py``).

    Where the program is trusted (a golden solution or a harness-made mutant, graded against a
    tester's tests), the ledger is the record the test process cannot touch: it was written by
    another process, with a secret the test process never held, into a pipe that cannot be
    unwritten. Its events are tied to no test (the test process names the tests, and may lie):
    they are placed by their position in the pipe, which is causal: a server writes a call's end
    before it sends the reply, so a record the test process writes after it read a reply comes
    after that call's end. Rules, each failing closed:

    * a failing record counts as a catch only if, where it stands, **no call has begun without
      ending** (a call the test gave up on, in a thread, or whose server was ended) and **no
      harness event came before it** (a time-out, also one the program caught, a reply over the
      frame limit, a value that cannot cross, an unreadable request): a later test may hold the
      outcome of an earlier failure, as in the test process's own rule;
    * a passing record does not pass if the server of that moment recorded a harness event since
      the test process's previous test record (the calls of this test);
    * where the ledger is **incomplete** (no ``final`` event: the run was cut short, its output
      flooded, the zygote killed; or a malformed or out-of-order event), no failing record counts
      as a catch. (The zygote writes ``final`` when the test process is done; the last server
      may still write a call's end after it.)

    A call sent but not yet read by its server when the test process writes a record is not seen
    at that record (a server starved of the CPU for as long as the test waits).
    """
    marks: list[_Marks | None] = [None] * len(stream)
    open_calls: dict[int, int] = {}  # server -> call begun and not ended
    first_event: str | None = None
    recent: dict[int, str] = {}  # server -> its first harness event since the last test record
    server, final, broken = 0, False, False
    for position, (who, record) in enumerate(stream):
        if who == "tests":
            if record.get("kind") != "test":
                continue
            failing = first_event
            if open_calls:
                failing = failing or "a call of the solution's was still running (the test gave up on it)"
            marks[position] = _Marks(failing=failing, passing=recent.get(server))
            recent = {}
            continue
        event = record.get("e")
        number = record.get("s")
        if type(number) not in (int, type(None)) or (final and event not in ("b", "e", "bad")):
            broken = True
        elif event == "server" and type(number) is int and number == server + 1:
            server = number
        elif (
            event == "b" and type(number) is int and number not in open_calls and type(record.get("c")) is int
        ):
            open_calls[number] = record["c"]
        elif event == "e" and type(number) is int and open_calls.get(number) == record.get("c"):
            del open_calls[number]
            harness = record.get("h")
            if harness is not None:
                reason = f"the solution's side: {str(harness)[:300]}"
                first_event = first_event or reason
                recent.setdefault(number, reason)
        elif event == "bad" and type(number) is int:
            reason = f"the solution's side: {str(record.get('h'))[:300]}"
            first_event = first_event or reason
            recent.setdefault(number, reason)
        elif event == "final" and number is None:
            final = True
        else:
            broken = True
    if broken or not final:
        why = "the solution's side's record of the run is incomplete"
        for mark in marks:
            if mark is not None and mark.failing is None:
                mark.failing = why
    return marks


def _report_from_run(
    run: RunResult,
    tests: list[str],
    limits: Limits,
    secret: str | None = None,
    solution_secret: str | None = None,
    stream: list[tuple[str, dict]] | None = None,
) -> TestReport:
    """The `TestReport` of a function-test run, from the records its test process wrote and the
    solution's side's ledger (`_solution_marks`).

    Fails closed: a test passes only on exactly one well-formed record for it that reports no
    error, where neither side marked a harness event; a missing, malformed or repeated record
    fails it. A failing test is marked (``harness_failure``: never counted as having caught a
    wrong program) where either side marked a harness event, and wherever the solution's ledger
    is missing (no `solution_secret`) or incomplete."""
    if stream is None:
        stream = _stream(run, secret, solution_secret) if secret is not None else []
    records = [record for who, record in stream if who == "tests"]
    marks_of: dict[int, _Marks] = {}
    if solution_secret is not None:
        marks_of = {
            id(record): mark
            for (_who, record), mark in zip(stream, _solution_marks(stream), strict=True)
            if mark
        }
    # Only as the one record of a run: written before anything but the driver runs. A test
    # that writes one later (a tester's) cannot turn its verdicts into a sandbox failure.
    unisolated = records[0] if len(records) == 1 and records[0].get("kind") == "unisolated" else None
    if unisolated is not None and not run.sandbox_error:
        # The sandbox cannot keep the test process and the solution's apart (it refuses
        # non-dumpable processes): no verdict, an infrastructure failure (see docs/sandboxes.md).
        run = dataclasses.replace(
            run, sandbox_error=f"function tests cannot be isolated in this sandbox: {unisolated.get('error')}"
        )
        reason = f"not judged: {run.sandbox_error}"
        results = [
            TestResult(index=i, name=_test_label(t), passed=False, error=reason) for i, t in enumerate(tests)
        ]
        return TestReport(results=results, compiled=False, ran=False, error=reason, runs=[run])
    compiled_record = next((r for r in records if r.get("kind") == "compiled"), None)
    ran_record = next((r for r in records if r.get("kind") == "ran"), None)
    by_index: dict[int, dict | None] = {}
    for record in records:
        index = record.get("index")
        if record.get("kind") != "test" or type(index) is not int or not 0 <= index < len(tests):
            continue
        well_formed = (
            (record.get("error") is None or isinstance(record.get("error"), str))
            and isinstance(record.get("stdout", ""), str)
            and isinstance(record.get("timed_out", False), bool)
            and (record.get("harness") is None or isinstance(record.get("harness"), str))
        )
        if well_formed and index not in by_index:
            record = _with_solution_marks(record, marks_of.get(id(record)))
        by_index[index] = None if index in by_index or not well_formed else record
    if compiled_record is None:
        reason = _run_failure(run, "before the solution was compiled")
    elif run.timed_out:
        reason = f"not run: the whole run hit its time limit ({limits.time_s:g}s)"
    else:
        reason = _run_failure(run, "before this test ran")
    results = []
    for index, test in enumerate(tests):
        if index not in by_index:
            results.append(
                TestResult(
                    index=index, name=_test_label(test), passed=False, error=reason, timed_out=run.timed_out
                )
            )
            continue
        record = by_index[index]
        if record is None:
            results.append(
                TestResult(
                    index=index,
                    name=_test_label(test),
                    passed=False,
                    error="not judged: conflicting or malformed results",
                )
            )
            continue
        results.append(
            TestResult(
                index=index,
                name=_test_label(test),
                passed=record.get("error") is None,
                error=record.get("error"),
                stdout=record.get("stdout", ""),
                timed_out=record.get("timed_out", False),
                harness_failure=record.get("harness"),
            )
        )
    compiled = bool(compiled_record and compiled_record.get("ok") is True)
    error = None
    if compiled_record is None:
        error = reason
    elif not compiled:
        error = str(compiled_record.get("error"))
    elif ran_record is not None and ran_record.get("ok") is not True:
        error = str(ran_record.get("error"))
    return TestReport(
        results=results,
        compiled=compiled,
        ran=bool(ran_record and ran_record.get("ok") is True),
        error=error,
        runs=[run],
    )


def _with_solution_marks(record: dict, marks: _Marks | None) -> dict:
    """`record` (a test process's ``test`` record) with what the solution's ledger says: a pass
    where the server recorded a harness event is not judged; a failure where the ledger rules out
    a catch carries that as its ``harness`` mark (the test process's own mark first)."""
    if marks is None:
        marks = _Marks(failing="the solution's side's record of the run is missing")
    record = dict(record)
    if record.get("error") is None:
        if marks.passing is not None:
            record["error"] = f"not judged: {marks.passing}"
            record["harness"] = record.get("harness") or marks.passing
    elif record.get("harness") is None:
        record["harness"] = marks.failing or marks.passing
    return record


def _run_failure(run: RunResult, when: str) -> str:
    if run.sandbox_error:
        return f"not judged: the sandbox failed {when} ({run.sandbox_error})"
    if run.timed_out:
        return f"timed out {when}"
    if run.oom:
        return f"out of memory {when}"
    if run.stdout_truncated:
        return f"output limit exceeded {when}"
    tail = run.stderr.strip().splitlines()[-1:] if run.stderr.strip() else []
    detail = f": {tail[0]}" if tail else ""
    return f"the program exited (status {run.exit_code}) {when}{detail}"


def split_check_function(test_code: str, entry_point: str) -> list[str]:
    """Split a HumanEval-style test module into one snippet per assertion.

    The module defines ``check(candidate)`` whose body holds asserts (possibly mixed with helper
    statements and loops). Each top-level statement of ``check`` that contains an ``assert``
    becomes one snippet; it is preceded by the module's other top-level code (imports,
    ``METADATA``, helpers), by ``candidate = <entry_point>``, and by the non-assert statements
    of ``check`` that come before it (so a snippet that uses an earlier helper variable still
    runs alone). Parsed with `ast`; nothing is executed.

    Raises:
        ValueError: the code does not parse, or has no ``check`` function.
    """
    try:
        module = parse_python(test_code)
    except SyntaxError as exc:
        raise ValueError(f"test code does not parse: {exc}") from None
    check = next(
        (
            node
            for node in module.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "check"
        ),
        None,
    )
    if check is None:
        raise ValueError("test code defines no `check` function")
    param = check.args.args[0].arg if check.args.args else "candidate"
    prelude = [ast.unparse(node) for node in module.body if node is not check and not _is_check_call(node)]
    header = "\n".join(prelude + [f"{param} = {entry_point}"])
    snippets: list[str] = []
    context: list[str] = []
    for statement in check.body:
        text = ast.unparse(statement)
        if any(isinstance(node, ast.Assert) for node in ast.walk(statement)):
            snippets.append("\n".join([header] + context + [text]))
        elif not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)):
            context.append(text)  # helper statement (docstrings dropped)
    return snippets


def _is_check_call(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "check"
    )


# ---------------------------------------------------------------------------------------------
# stdin/stdout cases
# ---------------------------------------------------------------------------------------------


def outputs_match(actual: str, expected: str) -> bool:
    """Whitespace-tolerant comparison: equal as sequences of whitespace-separated tokens."""
    return actual.split() == expected.split()


@functools.lru_cache(maxsize=4096)  # a problem's programs are graded again at every step
def _parses(program: str) -> tuple[bool, str | None]:
    try:
        parse_python(program)
    except SyntaxError as exc:
        return False, f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    return True, None


def run_io_cases(
    sandbox: Sandbox,
    program: str,
    cases: list[tuple[str, str]],
    *,
    time_s: float = 5.0,
    memory_mb: int = 512,
    output_bytes: int = 1_000_000,
    stop_at_timeout: bool = False,
) -> TestReport:
    """Run `program` once per ``(stdin, expected_stdout)`` case, concurrently, each with `time_s`.

    A case passes when the program exits with status 0 within its time limit and its stdout
    matches the expected output up to whitespace (`outputs_match`).

    With `stop_at_timeout` (the choice of a problem's mutants, which keeps no candidate that
    reaches a case's time limit), the cases run in waves of the sandbox's `max_concurrency`
    and no wave starts after one in which a case timed out: every case after the first that
    timed out fails ``"not run: case i reached its time limit"`` (``runs`` holds only the runs
    made). A program that loops on every case then costs one wave's time limit, not one per
    case.
    """
    compiled, syntax_error = _parses(program)
    if not compiled:
        results = [
            TestResult(index=i, name=f"case {i}", passed=False, error=syntax_error, expected=expected)
            for i, (_stdin, expected) in enumerate(cases)
        ]
        return TestReport(results=results, compiled=False, ran=False, error=syntax_error)
    limits = Limits(time_s=float(time_s), memory_mb=memory_mb, output_bytes=output_bytes)
    jobs = [Job(program, stdin=stdin, limits=limits) for stdin, _expected in cases]
    runs: list[RunResult] = []
    if stop_at_timeout:
        width = max(1, int(getattr(sandbox, "max_concurrency", 1) or 1))
        while len(runs) < len(jobs) and not any(run.timed_out for run in runs):
            runs.extend(sandbox.run_batch(jobs[len(runs) : len(runs) + width]))
    else:
        runs = list(sandbox.run_batch(jobs))
    first_timeout = next((i for i, run in enumerate(runs) if run.timed_out), None)
    results = []
    for index, (_stdin, expected) in enumerate(cases):
        error: str | None
        if index >= len(runs):
            results.append(
                TestResult(
                    index=index,
                    name=f"case {index}",
                    passed=False,
                    error=f"not run: case {first_timeout} reached its time limit",
                    expected=expected,
                )
            )
            continue
        run = runs[index]
        if run.sandbox_error:
            error = f"not judged: the sandbox failed ({run.sandbox_error})"
        elif run.timed_out:
            error = f"timed out after {time_s:g}s"
        elif run.oom:
            error = "out of memory"
        elif run.stdout_truncated:
            error = "output limit exceeded"
        elif run.exit_code != 0:
            tail = run.stderr.strip().splitlines()[-1:] if run.stderr.strip() else []
            error = f"exit status {run.exit_code}" + (f": {tail[0]}" if tail else "")
        elif not outputs_match(run.stdout, expected):
            error = "wrong answer"
        else:
            error = None
        results.append(
            TestResult(
                index=index,
                name=f"case {index}",
                passed=error is None,
                error=error,
                stdout=run.stdout,
                expected=expected,
                timed_out=run.timed_out,
            )
        )
    ran = any(run.exit_code == 0 and not run.timed_out for run in runs)
    return TestReport(results=results, compiled=True, ran=ran, runs=list(runs))


_IO_FILE = "harness_io.json"
#: What a run of stdin/stdout programs holds beyond the worker's zygote (the driver, the
#: compiled programs, the cases), per process.
_IO_RUN_OVERHEAD_MB = 32


def run_io_programs(
    sandbox: Sandbox,
    programs: Sequence[str],
    cases: Sequence[tuple[str, str]],
    *,
    time_s: float = 5.0,
    memory_mb: int = 512,
    output_bytes: int = 1_000_000,
    golden: int | None = None,
    enough: int | None = None,
    stop_at_timeout: bool = False,
) -> list[TestReport | None]:
    """Run each of `programs` on every ``(stdin, expected_stdout)`` case in **one** sandbox run;
    a `TestReport` per program, as `run_io_cases` reports it (the same errors: ``wrong answer``,
    ``timed out after ...``, ``exit status N: <last line of stderr>``, ``output limit
    exceeded``), or ``None`` where the run did not establish it (the run failed, a case's process
    ended by a signal the run did not send, a case without a record).

    For trusted programs only (the Coder–Tester's golden solution and its mutants; the cases are
    data): a process forked from the run's process runs the cases one after another, each as the
    sandbox runs ``python main.py`` (a fresh ``__main__``, the case's input on descriptor 0 in an
    unnamed file, stdout and stderr into files the run's process reads, the same exit status and
    traceback, ``os._exit`` in the middle of a case included), in a working directory emptied
    between cases. Between cases it puts back what a case could leave to the next: the builtins,
    ``sys.modules`` (a module a case imported stays, as an import cache), the recursion,
    integer-string and thread-switch limits, ``os.environ``, decimal's context, the threads'
    stack size, ``sys.path`` (read-only entries only), ``sys``'s streams, the exit handlers, the
    random seed. A case that leaves a thread running ends the process (the next
    case gets a new one), and so does a case past `time_s` (killed with its process group). A
    program that assigns to anything it did not make itself (a module's attribute or item,
    ``os.environ``, ``getcontext().prec``: `_case_state.keeps_to_itself`) runs each case in a process of its
    own, so that no case reads what an earlier one left in a module. The process may grow its
    address space by `memory_mb` (a program that needs more meets ``MemoryError``: ``exit status
    1``, where a run of its own reports ``out of memory``; neither passes nor is a wrong
    answer); a case's stdout is cut at `output_bytes` (a write past it fails: ``output limit
    exceeded``).

    `golden`: the index of the golden program; its cases start first, no other program runs a
    case the golden did not pass (``not run: the golden did not pass case i``: no answer there
    can tell a wrong program), and a program stops at a case where it printed a wrong answer and
    the golden passed (the cases after it are ``not run: the program was stopped after case i
    caught it``); a stop, or a case left out, that the golden's own report does not bear out is
    not established. `stop_at_timeout`: a program runs no case after one that
    timed out (``not run: case i reached its time limit``). `enough` (without a `golden`): no
    program starts once `enough` of those that have ended are wrong programs (compiled, no case
    timed out, a wrong answer): the others are reported ``skipped`` with no results.
    """
    programs = list(programs)
    cases = [(str(stdin), str(expected)) for stdin, expected in cases]
    if golden is not None and not 0 <= golden < len(programs):
        raise ValueError(f"golden must index programs (0-{len(programs) - 1}), got {golden}")
    if enough is not None and (golden is not None or type(enough) is not int or enough < 1):
        raise ValueError(f"enough must be a positive int, in a run without a golden; got {enough!r}")
    results: list[TestReport | None] = [None] * len(programs)
    parsing = [_parses(program) for program in programs]
    for index, (parsed, syntax_error) in enumerate(parsing):
        if not parsed:
            results[index] = TestReport(
                results=[
                    TestResult(index=i, name=f"case {i}", passed=False, error=syntax_error, expected=expected)
                    for i, (_stdin, expected) in enumerate(cases)
                ],
                compiled=False,
                ran=False,
                error=syntax_error,
            )
    runnable = [index for index, (parsed, _error) in enumerate(parsing) if parsed]
    if not runnable or not cases:
        for index in runnable:
            results[index] = TestReport(results=[], compiled=True, ran=False)
        return results
    if golden is not None and golden not in runnable:
        golden = None
    payload = {
        "programs": [programs[index] for index in runnable],
        "fresh": [not keeps_to_itself(programs[index]) for index in runnable],
        "cases": [list(case) for case in cases],
        "time_s": float(time_s),
        "output_bytes": int(output_bytes),
        "memory_mb": int(memory_mb),
        "golden": runnable.index(golden) if golden is not None else None,
        "enough": enough,
        "stop_at_timeout": bool(stop_at_timeout),
        "scratch": _wipes_scratch(sandbox),
    }
    limits = Limits(
        time_s=(float(time_s) + 0.5) * len(runnable) * len(cases) + 2.0,  # (one case at a time)
        memory_mb=memory_mb + 2 * _IO_RUN_OVERHEAD_MB,
        output_bytes=1_000_000 + 4200 * len(runnable) * (len(cases) + 1),
    )
    secret = secrets.token_hex(16)
    # The programs compiled here, once per distinct program (a problem's are the same at every
    # step), in the file the driver reads compiled code from (`_value_checks_code`'s format).
    code = _value_checks_code("", "", payload["programs"], filename="main.py")
    run = _run_driver(sandbox, secret + "\n", {_IO_FILE: json.dumps(payload), _CALLS_CODE_FILE: code}, limits)
    records = [record for _who, record in _stream(run, secret, None)]
    if run.sandbox_error or not any(record.get("kind") == "done" for record in records):
        return results
    outcome_of: dict[tuple[int, int], dict] = {}
    program_of: dict[int, dict] = {}
    for record in records:
        at = record.get("program")
        if type(at) is not int or not 0 <= at < len(runnable):
            continue
        if record.get("kind") == "io_case" and type(record.get("case")) is int and 0 <= record["case"] < len(cases):
            outcome_of[(at, record["case"])] = record
        elif record.get("kind") == "io_program":
            program_of[at] = record
    reference = None
    golden_failed: frozenset[int] = frozenset()
    if golden is not None:
        reference = _io_report(payload["golden"], cases, outcome_of, program_of.get(payload["golden"]), time_s)
        if reference is not None:
            golden_failed = frozenset(result.index for result in reference.results if not result.passed)
    reports = [
        reference if at == payload["golden"] and golden is not None
        else _io_report(at, cases, outcome_of, program_of.get(at), time_s, golden_failed)
        for at in range(len(runnable))
    ]
    # A stop stands only on a case the golden passed, by the golden's own report.
    for at, report in enumerate(reports):
        stop = (program_of.get(at) or {}).get("stopped")
        if report is not None and stop is not None:
            if reference is None or not reference.results[stop].passed or report.results[stop].error != "wrong answer":
                reports[at] = None
    for at, index in enumerate(runnable):
        results[index] = reports[at]
    return results


def _io_report(
    at: int,
    cases: list[tuple[str, str]],
    outcome_of: dict[tuple[int, int], dict],
    program: dict | None,
    time_s: float,
    golden_failed: frozenset[int] = frozenset(),
) -> TestReport | None:
    """Program `at`'s `TestReport` from the records of a run of `run_io_programs`, or ``None``
    where they do not establish it. `golden_failed`: the cases the golden's own report does not
    pass, which a program other than the golden does not run."""
    if program is None:
        return None
    if program.get("skipped") is True:
        return TestReport(results=[], compiled=True, ran=False, error="not run: enough programs before it were wrong", skipped=True)
    stopped, timeout_stop = program.get("stopped"), program.get("timeout_stop")
    for mark in (stopped, timeout_stop):
        if mark is not None and not (type(mark) is int and 0 <= mark < len(cases)):
            return None
    results = []
    ran = False
    for index, (_stdin, expected) in enumerate(cases):
        record = outcome_of.get((at, index))
        if record is None:
            if stopped is not None and index > stopped:
                why = f"not run: the program was stopped after case {stopped} caught it"
            elif index in golden_failed:
                why = f"not run: the golden did not pass case {index}"
            elif timeout_stop is not None and index != timeout_stop:
                why = f"not run: case {timeout_stop} reached its time limit"
            else:
                return None
            results.append(TestResult(index=index, name=f"case {index}", passed=False, error=why, expected=expected))
            continue
        outcome, stdout = record.get("outcome"), record.get("stdout")
        stdout = stdout if type(stdout) is str else ""
        status, tail = record.get("status"), record.get("error")
        if outcome == "pass":
            error = None
        elif outcome == "wrong answer":
            error = "wrong answer"
        elif outcome == "timeout":
            error = f"timed out after {time_s:g}s"
        elif outcome == "output":
            error = "output limit exceeded"
        elif outcome == "exit" and type(status) is int and status != 0:
            error = f"exit status {status}" + (f": {tail}" if type(tail) is str and tail else "")
        else:
            return None  # unestablished, or not a record the driver writes
        ran = ran or outcome in ("pass", "wrong answer")
        results.append(
            TestResult(
                index=index,
                name=f"case {index}",
                passed=error is None,
                error=error,
                stdout=stdout,
                expected=expected,
                timed_out=outcome == "timeout",
            )
        )
    return TestReport(results=results, compiled=True, ran=ran)
