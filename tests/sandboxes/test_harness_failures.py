"""The function-test harness: a harness failure is never a pass nor a catch (issue 30, item 4),
and the behaviour issue 34 asked for (a fresh solution process after a call it had to abandon,
prints reaching a test's ``redirect_stdout``).

Every case runs on the isolated backends (bwrap, process; docker where an engine answers).
"""

from __future__ import annotations

import pytest

from llm_envs.envs.coder_tester import mutants
from sandboxes import run_function_tests, run_io_cases


def _run(sandbox, solution, tests, **kwargs):
    report = run_function_tests(sandbox, solution, tests, **kwargs)
    assert report.ran, report.error
    return report.results


# ---------------------------------------------------------------------------------------------
# handles


FALSY = (
    "class Falsy:\n"
    "    def __bool__(self):\n        return False\n"
    "    def __len__(self):\n        return 3\n"
    "    def __iter__(self):\n        return iter([1, 2, 3])\n"
    "    def __contains__(self, item):\n        return True\n"
    "    def __eq__(self, other):\n        return True\n"
    "    def __lt__(self, other):\n        return True\n"
    "def f(x):\n    return Falsy() if x == 1 else x\n"
)


def test_a_handle_refuses_truth_len_iteration_and_comparison_saying_why(isolated):
    tests = [
        "assert not f(1)",
        "assert len(f(1)) == 3",
        "assert list(f(1)) == [1, 2, 3]",
        "assert 2 in f(1)",
        "assert f(1) != 5",
        "assert not (f(1) == 5)",
        "assert f(1) > 0 or True",
        "assert f(2) == 2",  # data crosses as before
    ]
    results = _run(isolated, FALSY, tests)
    assert [r.passed for r in results] == [False] * 7 + [True], [r.error for r in results]
    for result in results[:7]:
        assert "not plain data" in result.error and result.error.startswith("not judged")
        assert result.harness_failure and "not plain data" in result.harness_failure


def test_a_falsy_object_no_longer_passes_a_truth_test(isolated):
    # Issue 30: `assert f(1)` passed for a solution returning a falsy object (4/4 against 3/4).
    solution = FALSY.replace("return Falsy() if x == 1 else x", "return Falsy() if x == 1 else bool(x)")
    results = _run(isolated, solution, ["assert f(1)", "assert f(2)", "assert f(3)", "assert not f(0)"])
    assert [r.passed for r in results] == [False, True, True, True]


def test_generators_and_builtin_iterators_cross_as_their_items(isolated):
    solution = (
        "def gen(n):\n    yield from range(n)\n"
        "def pairs(xs):\n    return zip(xs, xs[1:])\n"
        "def forever():\n    while True:\n        yield 1\n"
        "def total(xs):\n    return sum(xs)\n"
    )
    tests = [
        "assert list(gen(3)) == [0, 1, 2] and 2 in gen(3) and sum(gen(4)) == 6",
        "assert list(pairs([1, 2, 3])) == [(1, 2), (2, 3)]",
        "g = gen(2)\nassert g and g != [0, 1] and next(g) == 0",  # truthy, unequal to a list: as in Python
        "assert total(x * 2 for x in range(3)) == 6",  # a generator of the test's crosses too
        "next(forever())",
    ]
    results = _run(isolated, solution, tests, time_s=1.0)
    assert [r.passed for r in results] == [True, True, True, True, False], [r.error for r in results]
    assert results[4].timed_out and results[4].harness_failure == "timed out"


def test_stop_iteration_leaving_the_solution_is_a_runtime_error(isolated):
    # Issue 30: a StopIteration ended the test's map/zip early, so the test passed.
    solution = "def f(x):\n    if x == 2:\n        raise StopIteration\n    return x\n"
    tests = [
        "assert list(map(f, [1, 2, 3])) == [1]",
        "for a, b in zip(map(f, [1, 2]), [1, 5]):\n    assert a == b",
        "try:\n    f(2)\nexcept RuntimeError as e:\n    assert 'StopIteration' in str(e)",
    ]
    results = _run(isolated, solution, tests)
    assert [r.passed for r in results] == [False, False, True], [r.error for r in results]
    assert results[0].error.startswith("RuntimeError")


# ---------------------------------------------------------------------------------------------
# harness failures are marked, even when the test turns them into an AssertionError


CATCH_ALL = "try:\n    {call}\nexcept BaseException:\n    assert False"


def test_a_harness_failure_caught_and_reraised_is_marked_and_never_a_catch(isolated):
    solution = (
        "def big():\n    return 'x' * (17 * 1024 * 1024)\n"
        "def slow():\n    while True:\n        pass\n"
        "class Obj:\n    pass\n"
        "def obj():\n    return Obj()\n"
        "def wrong():\n    return 1\n"
    )
    tests = [
        "assert wrong() == 2",  # the test's own assertion about a value
        CATCH_ALL.format(call="big()"),  # over the frame limit
        CATCH_ALL.format(call="slow()"),  # a time-out
        CATCH_ALL.format(call="bool(obj())"),  # a refused handle
    ]
    results = _run(isolated, solution, tests, time_s=1.0)
    assert [r.passed for r in results] == [False] * 4
    assert all(r.error.startswith("AssertionError") for r in results), [r.error for r in results]
    assert results[0].harness_failure is None
    assert "over the" in results[1].harness_failure
    assert results[2].harness_failure == "timed out"
    assert "truth value" in results[3].harness_failure
    caught = [mutants.checked_failure(r, io_style=False) for r in results]
    assert caught == [True, False, False, False]


def test_a_failing_test_after_a_harness_failure_is_marked_too(isolated):
    # Tests share the test process: a first test keeps the outcome of a harness failure where a
    # later one can read it and fail by its own assertion. That later failure is no catch either.
    solution = "def big():\n    return 'x' * (17 * 1024 * 1024)\ndef one():\n    return 1\n"
    tests = [
        "assert one() == 1",
        "assert one() == 2",  # a real check, before any harness failure
        "import builtins\ntry:\n    big()\n    builtins.crossed = True\nexcept BaseException:\n    builtins.crossed = False",
        "import builtins\nassert builtins.crossed",
        "assert one() == 1",
    ]
    results = _run(isolated, solution, tests)
    assert [r.passed for r in results] == [True, False, False, False, True], [r.error for r in results]
    assert results[1].harness_failure is None and mutants.checked_failure(results[1], io_style=False)
    assert results[3].error.startswith("AssertionError")
    assert "after a harness failure in test 2" in results[3].harness_failure
    assert not mutants.checked_failure(results[3], io_style=False)
    assert results[4].harness_failure is None  # a pass stays a pass


CLEAR_MARKS = (
    "import gc\n"
    "try:\n    {call}\nexcept BaseException:\n"
    "    for o in gc.get_objects():\n"
    "        if type(o).__name__ == '_Connection':\n            o.poison = None\n"
    "    assert False"
)
GIVE_UP_IN_A_THREAD = (
    "import threading\n"
    "done = []\n"
    "t = threading.Thread(target=lambda: done.append({call}), daemon=True)\n"
    "t.start()\nt.join(0.5)\n"
    "assert done"
)
FORGE_A_RECORD = (
    "import gc, os\n"
    "try:\n    {call}\nexcept BaseException:\n"
    "    for o in gc.get_objects():\n"
    "        if type(o).__name__ == 'function' and o.__name__ == 'emit' and o.__closure__:\n"
    "            o({{'kind': 'test', 'index': 0, 'error': 'AssertionError', 'stdout': '', 'timed_out': False}})\n"
    "            o({{'kind': 'done'}})\n"
    "            os._exit(0)\n"
    "assert True"
)


def test_a_test_that_hides_a_harness_failure_in_its_own_process_is_marked_by_the_solutions_side(isolated):
    # The test process's marks are within the tests' reach (a tester's test): it clears them, or
    # gives up on a call in a thread before any time-out, or writes its own record. The
    # solution's side's ledger still shows the harness failure, so none of these is a catch.
    solution = (
        "def big():\n    return 'x' * (17 * 1024 * 1024)\n"
        "def slow():\n    while True:\n        pass\n"
        "def one():\n    return 1\n"
    )
    (cleared,) = _run(isolated, solution, [CLEAR_MARKS.format(call="big()")])
    (gave_up,) = _run(isolated, solution, [GIVE_UP_IN_A_THREAD.format(call="slow()")], time_s=3.0)
    assert cleared.error.startswith("AssertionError") and "frame limit" in cleared.harness_failure
    assert gave_up.error.startswith("AssertionError") and "still running" in gave_up.harness_failure
    (forged,) = _run(isolated, solution, [FORGE_A_RECORD.format(call="big()")])
    assert forged.error == "AssertionError" and forged.harness_failure
    assert not any(mutants.checked_failure(r, io_style=False) for r in (cleared, gave_up, forged))
    # The same tests on calls that succeed: the first two pass, nothing is marked.
    results = _run(isolated, solution, [CLEAR_MARKS.format(call="one()"), GIVE_UP_IN_A_THREAD.format(call="one()")])
    assert [(r.passed, r.harness_failure) for r in results] == [(True, None), (True, None)]


def test_no_frame_of_the_solutions_process_reaches_the_tests(isolated):
    # From a frame, the test could walk to the server's own state (the ledger's secret).
    solution = "import sys\nasync def coroutine():\n    return 1\ndef f():\n    return coroutine()\n"
    (result,) = _run(isolated, solution, ["c = f()\nframe = c.cr_frame\nassert frame.f_back is not None"])
    assert not result.passed and "cannot be reached" in result.error


# ---------------------------------------------------------------------------------------------
# issue 34: the state, a fresh process after an abandoned call, prints


def test_tests_share_the_solutions_state_in_order(isolated):
    solution = "calls = []\ndef f(x):\n    calls.append(x)\n    return len(calls)\n"
    results = _run(isolated, solution, ["assert f(0) == 1", "assert f(0) == 2", "assert f(0) == 3"])
    assert [r.passed for r in results] == [True, True, True], [r.error for r in results]


UNINTERRUPTIBLE = (
    "import os, signal\n"
    "calls = []\n"
    "def f(x):\n"
    "    calls.append(x)\n"
    "    if x == 1:\n"
    "        signal.setitimer(signal.ITIMER_REAL, 0)\n"
    "        signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
    "        while True:\n            pass\n"
    "    if x == 2:\n        os._exit(0)\n"
    "    return len(calls)\n"
)


@pytest.mark.parametrize("bad_call", ["f(1)", "f(2)"])
def test_a_fresh_solution_process_serves_the_tests_after_an_abandoned_call(isolated, bad_call):
    # Before: every later test failed ("stopped answering" / "exited during an earlier call").
    tests = ["assert f(0) == 1", "assert f(0) == 2", bad_call, "assert f(0) == 1", "assert f(0) == 2"]
    results = _run(isolated, UNINTERRUPTIBLE, tests, time_s=0.5)
    assert [r.passed for r in results] == [True, True, False, True, True], [r.error for r in results]
    assert results[2].harness_failure  # a time-out or a process that died: not the test's check


def test_the_tests_left_after_an_abandoned_call_run_in_a_fresh_run_their_failures_marked(isolated):
    # A run of one program has no spare copy of the solution (issue 35): the test process ends the
    # run after the test that dropped the solution's process, and the host runs the rest anew.
    tests = ["assert f(0) == 1", "f(2)", "assert f(0) == 1", "assert f(0) == 5", "assert f(0) == 3"]
    report = run_function_tests(isolated, UNINTERRUPTIBLE, tests, time_s=0.5)
    results = report.results
    assert [r.index for r in results] == [0, 1, 2, 3, 4]
    assert [r.passed for r in results] == [True, False, True, False, True], [r.error for r in results]
    assert len(report.runs) == 2 and report.compiled and report.ran
    assert results[1].harness_failure
    # A failure after the replacement is the harness's (an earlier test may have left its
    # outcome), never a catch.
    assert "after a harness failure in test 1" in results[3].harness_failure
    assert results[3].error.startswith("AssertionError")
    assert not mutants.checked_failure(results[3], io_style=False)


@pytest.mark.parametrize("solution", ["slow", "catches its time-out", "uninterruptible"])
def test_with_stop_at_timeout_no_test_runs_after_one_that_timed_out(isolated, solution):
    """The choice of a problem's mutants keeps no candidate that reaches a golden test's time
    limit, whatever its other tests give: with ``stop_at_timeout`` the run ends there (no test
    after it, no fresh run for the rest), and the candidate is judged as the whole run judges
    it."""
    program = {
        "slow": "def f(x):\n    while x == 1:\n        pass\n    return x - 1\n",
        # returns a value the test accepts, after its time: a harness failure, not a pass
        "catches its time-out": (
            "def f(x):\n    if x == 1:\n        try:\n            while True:\n                pass\n"
            "        except BaseException:\n            return 0\n    return x - 1\n"
        ),
        "uninterruptible": UNINTERRUPTIBLE,
    }[solution]
    tests = ["assert f(0) == 1", "assert f(1) == 0", "assert f(0) == 1", "assert f(3) == 2"]
    whole = run_function_tests(isolated, program, tests, time_s=0.5)
    stopped = run_function_tests(isolated, program, tests, time_s=0.5, stop_at_timeout=True)
    assert [r.index for r in stopped.results] == [0, 1, 2, 3]
    assert stopped.results[:2] == whole.results[:2] and mutants.reached_time_limit(stopped.results[1])
    assert all(r.error == "not run: test 1 reached its time limit" and not r.passed for r in stopped.results[2:])
    assert len(stopped.runs) == 1 and len(whole.runs) == (2 if solution == "uninterruptible" else 1)
    assert any(r.passed for r in whole.results[2:])  # the tests it left would have run
    assert mutants.wrong_on_golden(stopped, False) is mutants.wrong_on_golden(whole, False) is False


@pytest.mark.parametrize("loops", [True, False])
def test_with_stop_at_timeout_no_case_starts_after_a_wave_in_which_one_timed_out(isolated, loops):
    """Stdin/stdout, the same choice: the cases run in waves of the sandbox's concurrency and
    none starts after a wave in which a case timed out; the candidate is judged as running every
    case judges it. A program that never times out runs every case, as without the stop."""
    program = "n = int(input())\nwhile n == 1:\n    pass\nprint(n + 1)\n" if loops else "print(int(input()) + 1)\n"
    width = max(1, isolated.max_concurrency)
    cases = [(f"{n}\n", f"{n + 1}\n") for n in (0, 1, *range(2, 2 + 2 * width))]
    whole = run_io_cases(isolated, program, cases, time_s=0.5)
    stopped = run_io_cases(isolated, program, cases, time_s=0.5, stop_at_timeout=True)
    assert [r.index for r in stopped.results] == list(range(len(cases)))
    made = len(stopped.runs)
    pairs = [(r.passed, r.error) for r in stopped.results]
    assert pairs[:made] == [(r.passed, r.error) for r in whole.results[:made]]
    if loops:
        assert made == max(width, 2)  # up to the wave with case 1, no other
        assert stopped.results[1].timed_out and mutants.reached_time_limit(stopped.results[1])
        assert all(r.error == "not run: case 1 reached its time limit" and not r.passed for r in stopped.results[made:])
        assert all(r.passed for r in whole.results[made:])  # the cases it left would have passed
        assert mutants.wrong_on_golden(stopped, True) is mutants.wrong_on_golden(whole, True) is False
    else:
        assert made == len(cases) and pairs == [(r.passed, r.error) for r in whole.results]
        assert all(r.passed for r in stopped.results)


def test_a_replaced_record_printed_by_a_test_does_not_split_the_run(isolated):
    # Without the run's secret a line on stdout is not the test process's record: the run is not
    # ended early, and a later test's failure is still an ordinary one (a catch).
    solution = "def f(x):\n    return x\n"
    forged = 'print("replaced")\nimport sys\nsys.stdout.write(\'{"kind": "replaced", "next": 2}\\n\')\nassert f(1) == 1'
    report = run_function_tests(isolated, solution, [forged, "assert f(2) == 3", "assert f(3) == 3"])
    assert [r.passed for r in report.results] == [True, False, True]
    assert len(report.runs) == 1
    assert mutants.checked_failure(report.results[1], io_style=False)


def test_an_object_of_a_replaced_process_is_refused(isolated):
    solution = UNINTERRUPTIBLE + "class Box:\n    def get(self):\n        return 7\n"
    tests = [
        "import builtins\nbuiltins.kept = Box()\nassert builtins.kept.get() == 7",
        "f(2)",
        "import builtins\nassert builtins.kept.get() == 7",
        "assert Box().get() == 7",
    ]
    results = _run(isolated, solution, tests)
    assert [r.passed for r in results] == [True, False, False, True], [r.error for r in results]
    assert "replaced" in results[2].error


def test_what_the_solution_prints_reaches_the_tests_redirect_stdout(isolated):
    solution = "def greet(name):\n    print('hello', name)\n    return len(name)\n"
    tests = [
        "import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
        "    assert greet('ann') == 3\nassert buf.getvalue() == 'hello ann\\n', buf.getvalue()",
        "assert greet('bo') == 2",
    ]
    results = _run(isolated, solution, tests)
    assert [r.passed for r in results] == [True, True], [r.error for r in results]
    assert results[0].stdout == "" and results[1].stdout == "hello bo\n"


def test_iterators_are_encoded_as_their_items_and_rebuilt_as_an_iterator():
    from sandboxes import _crossing as crossing

    for value in ((x for x in range(3)), map(int, "012"), iter([0, 1, 2]), zip([0, 1, 2]), enumerate("ab")):
        data = crossing.encode(value)
        assert data[0] == "it"
        rebuilt = crossing.decode(data)
        assert iter(rebuilt) is rebuilt and not isinstance(rebuilt, (list, tuple))
    assert list(crossing.decode(crossing.encode(x * 2 for x in range(3)))) == [0, 2, 4]
    with pytest.raises(crossing.CrossingError):
        crossing.encode(iter([object()]))  # items must be data too


def test_a_replaced_record_is_taken_only_after_a_failed_test_and_before_the_last():
    from sandboxes.harness import TestReport, TestResult, _replaced_at

    results = [
        TestResult(index=0, name="a", passed=True),
        TestResult(index=1, name="b", passed=False, error="not judged: the solution's process exited during a call"),
        TestResult(index=2, name="c", passed=False, error="not run"),
    ]
    report = TestReport(results=results, compiled=True, ran=True)

    def replaced(next_test):
        return [("tests", {"kind": "replaced", "next": next_test})]

    assert _replaced_at(replaced(2), report) == 2
    assert _replaced_at(replaced(1), report) is None  # test 0 passed: nothing was dropped there
    assert _replaced_at(replaced(3), report) is None and _replaced_at(replaced(0), report) is None
    assert _replaced_at(replaced("2"), report) is None
    assert _replaced_at([("solution", {"kind": "replaced", "next": 2})], report) is None
