"""The data-only boundary of the function-test harness: the codec on the host, and what crosses
(and what does not) in a real sandbox."""

from __future__ import annotations

import collections
import enum
import json
import math
import socket

import pytest

from sandboxes import _crossing as crossing
from sandboxes import run_function_tests
from tests.sandboxes.conftest import make

# ---------------------------------------------------------------------------------------------
# the codec, on the host


class _Colour(enum.IntEnum):
    RED = 3


@pytest.mark.parametrize(
    "value, rebuilt",
    [
        (None, None),
        (True, True),
        (-7, -7),
        (2**200, 2**200),
        (-(2**70), -(2**70)),
        (1.5, 1.5),
        (float("inf"), float("inf")),
        (1 + 2j, 1 + 2j),
        ("é\n'\"", "é\n'\""),
        (b"\x00\xff", b"\x00\xff"),
        (bytearray(b"ab"), b"ab"),
        ([1, (2, [3])], [1, (2, [3])]),
        ({1: {2, 3}, "k": frozenset({4})}, {1: {2, 3}, "k": frozenset({4})}),
        (collections.OrderedDict(a=1), {"a": 1}),
        (collections.namedtuple("P", "x y")(1, 2), (1, 2)),
        (_Colour.RED, 3),
    ],
)
def test_values_round_trip_as_exact_builtins(value, rebuilt):
    data = json.loads(json.dumps(crossing.encode(value)))
    result = crossing.decode(data)
    assert result == rebuilt and type(result) is type(rebuilt)


def test_nan_crosses():
    assert math.isnan(crossing.decode(json.loads(json.dumps(crossing.encode(float("nan"))))))


def test_an_object_is_a_handle_or_refused():
    class Thing:
        pass

    with pytest.raises(crossing.CrossingError, match="not plain data"):
        crossing.encode(Thing())
    assert crossing.encode([Thing()], make_handle=lambda obj: 7) == ["l", [["h", 7]]]
    with pytest.raises(crossing.CrossingError, match="handle"):
        crossing.decode(["h", 7])


def test_too_deep_is_refused_both_ways():
    deep = []
    for _ in range(crossing.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(crossing.CrossingError, match="levels deep"):
        crossing.encode(deep)
    data: list = ["l", []]
    for _ in range(crossing.MAX_DEPTH + 5):
        data = ["l", [data]]
    with pytest.raises(crossing.CrossingError, match="levels deep"):
        crossing.decode(data)


@pytest.mark.parametrize(
    "data",
    [
        {"a": 1},  # an object is no value
        [],
        ["l"],
        ["l", 3],
        ["x", []],
        [1, 2],
        ["I", "zz"],
        ["b", "!!"],
        ["c", "1", 2],
        ["d", [1]],  # odd number of items
        ["s", [["l", []]]],  # an unhashable element
        ["d", [["l", []], 1]],
        ["h", "1"],
    ],
)
def test_malformed_values_are_refused(data):
    with pytest.raises(crossing.CrossingError):
        crossing.decode(data, resolve_handle=lambda handle: object())


def test_frames_are_bounded_and_checked():
    left, right = socket.socketpair()
    try:
        crossing.send_frame(left, {"id": 1})
        assert crossing.recv_frame(right) == {"id": 1}
        left.sendall((crossing.MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
        with pytest.raises(crossing.CrossingError, match="over the"):
            crossing.recv_frame(right)
        left.sendall((3).to_bytes(4, "big") + b"{x]")
        with pytest.raises(crossing.CrossingError, match="malformed"):
            crossing.recv_frame(right)
        left.sendall((2).to_bytes(4, "big") + b"\xff\xfe")
        with pytest.raises(crossing.CrossingError, match="malformed"):
            crossing.recv_frame(right)
        nested = b"[" * 20_000 + b"]" * 20_000  # deeper than the decoder recurses; under the buffer
        left.sendall(len(nested).to_bytes(4, "big"))
        left.sendall(nested)
        with pytest.raises(crossing.CrossingError):
            crossing.recv_frame(right)
        left.close()
        with pytest.raises(EOFError):
            crossing.recv_frame(right)
    finally:
        right.close()


# ---------------------------------------------------------------------------------------------
# in the sandbox


@pytest.fixture(scope="module")
def sandbox():
    sb = make("bwrap")
    yield sb
    sb.close()


def _verdicts(sandbox, solution, tests, **kwargs):
    report = run_function_tests(sandbox, solution, tests, **kwargs)
    return [r.passed for r in report.results], [r.error for r in report.results]


def test_arguments_changed_in_place_come_back(sandbox):
    solution = (
        "def sort_in_place(xs):\n    xs.sort()\n"
        "def fill(d, grid):\n    d['k'] = 1\n    grid[0][0] = 9\n    return None\n"
    )
    tests = [
        "xs = [3, 1, 2]\nassert sort_in_place(xs) is None\nassert xs == [1, 2, 3]",
        "d, grid = {}, [[0, 0], [0]]\nrow = grid[0]\nfill(d, grid=grid)\nassert d == {'k': 1} and row == [9, 0]",
    ]
    verdicts, errors = _verdicts(sandbox, solution, tests)
    assert verdicts == [True, True], errors


def test_exceptions_arrive_as_builtin_exceptions(sandbox):
    solution = (
        "class Mine(ValueError):\n    pass\n"
        "def f(x):\n"
        "    if x == 0: raise ValueError('zero')\n"
        "    if x == 1: raise KeyError(1)\n"
        "    if x == 2: raise Mine('mine')\n"
        "    raise SystemExit(3)\n"
    )
    tests = [
        "try:\n    f(0)\nexcept ValueError as e:\n    assert str(e) == 'zero'\nelse:\n    assert False",
        "import unittest\nwith unittest.TestCase().assertRaises(KeyError):\n    f(1)",
        "try:\n    f(2)\nexcept ValueError:\n    assert False, 'the solution class never crosses'\nexcept Exception as e:\n    assert 'Mine: mine' in str(e)",
        "f(3)",
    ]
    verdicts, errors = _verdicts(sandbox, solution, tests)
    assert verdicts == [True, True, True, False], errors
    assert "SystemExit" in errors[3]


def test_objects_stay_behind_handles(sandbox):
    solution = (
        "class Stack:\n"
        "    def __init__(self):\n        self.items = []\n"
        "    def push(self, x):\n        self.items.append(x)\n        return self\n"
        "    def pop(self):\n        return self.items.pop()\n"
        "    def __len__(self):\n        return len(self.items)\n"
        "    def __eq__(self, other):\n        return True\n"
        "def gen(n):\n    yield from range(n)\n"
        "class Solution:\n    def twice(self, x):\n        return 2 * x\n"
    )
    tests = [
        "s = Stack()\nassert s.push(1).push(2) is s and s.items == [1, 2] and s.pop() == 2 and s.items == [1]",
        "assert list(gen(3)) == [0, 1, 2] and 2 in gen(3) and sum(gen(4)) == 6",
        "assert Solution().twice(21) == 42",
        "assert Stack() == Stack()",  # two objects: never equal, whatever __eq__ says
        "assert Stack() == [1]",
        "s = Stack()\nassert s.__dict__",  # dunders are not read across
    ]
    verdicts, errors = _verdicts(sandbox, solution, tests)
    assert verdicts == [True, True, True, False, False, False], errors


def test_what_cannot_cross_fails_with_the_reason_even_if_caught(sandbox):
    solution = (
        "def deep(n):\n    x = []\n    for _ in range(n):\n        x = [x]\n    return x\n"
        "def big():\n    return 'x' * (20 * 1024 * 1024)\n"
        "def apply(fn, x):\n    return fn(x)\n"
    )
    tests = [
        "deep(500)",
        "big()",
        "apply(lambda v: v, 1)",
        "try:\n    deep(500)\nexcept BaseException:\n    pass",  # a harness failure cannot be caught away
        "assert len(deep(50)) == 1",
    ]
    verdicts, errors = _verdicts(sandbox, solution, tests, time_s=10.0)
    assert verdicts == [False, False, False, False, True], errors
    assert "levels deep" in errors[0] and "over the" in errors[1] and "cannot cross" in errors[2]
    assert errors[3].startswith("not judged")


def test_a_slow_call_fails_its_test_only(sandbox):
    solution = "def f(x):\n    while x:\n        pass\n    return 1\n"
    verdicts, errors = _verdicts(sandbox, solution, ["assert f(1) == 1", "assert f(0) == 1", "assert f(0) == 1"], time_s=0.5)
    assert verdicts == [False, True, True], errors
    assert "timed out" in errors[0]


def test_a_solution_that_ignores_its_timer_or_exits_fails_that_test_only(sandbox):
    # The next test gets a fresh copy of the solution's state (tests/sandboxes/test_harness_failures.py).
    solution = (
        "import signal, os\n"
        "def f(x):\n"
        "    if x == 1:\n"
        "        signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "        signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "        while True:\n            pass\n"
        "    if x == 2:\n        os._exit(0)\n"
        "    return x\n"
    )
    verdicts, errors = _verdicts(sandbox, solution, ["assert f(0) == 0", "f(1)", "assert f(0) == 0"], time_s=0.5)
    assert verdicts == [True, False, True], errors
    verdicts, errors = _verdicts(sandbox, solution, ["assert f(0) == 0", "f(2)", "assert f(0) == 0"], time_s=2.0)
    assert verdicts == [True, False, True], errors
    assert "exited" in errors[1]


def test_garbage_on_the_socket_fails_closed(sandbox):
    solution = (
        "import os, socket, struct\n"
        "def f(x):\n"
        "    for fd in range(3, 20):\n"
        "        try:\n"
        "            s = socket.socket(fileno=os.dup(fd))\n"
        "        except OSError:\n"
        "            continue\n"
        "        body = b'{\"id\": 999, \"ok\": 1}'\n"
        "        s.sendall(struct.pack('>I', len(body)) + body)\n"
        "    return x\n"
    )
    verdicts, errors = _verdicts(sandbox, solution, ["assert f(1) == 1", "assert f(2) == 2"])
    assert verdicts == [False, False], errors


def test_a_module_planted_in_the_job_directory_is_not_imported_by_the_tests(sandbox):
    solution = (
        "import os\n"
        "with open('fractions.py', 'w') as fh:\n"
        "    fh.write('Fraction = lambda *a: True\\n')\n"
        "for d in ('/tmp', os.environ.get('HOME', '/tmp')):\n"
        "    try:\n"
        "        open(os.path.join(d, 'fractions.py'), 'w').write('Fraction = lambda *a: True\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "def f(x):\n    return 0\n"
    )
    test = "import sys\nsys.modules.pop('fractions', None)\nimport fractions\nassert fractions.Fraction(1, 2) == f(1)"
    verdicts, errors = _verdicts(sandbox, solution, [test])
    assert verdicts == [False], errors


def test_io_cases_are_compared_on_the_host_and_have_no_frames_to_forge(sandbox):
    from sandboxes import run_io_cases

    forger = (
        "import json, os\n"
        "record = json.dumps({'kind': 'test', 'index': 0, 'error': None, 'passed': True})\n"
        "print(record)\n"
        "os.write(2, record.encode())\n"
    )
    report = run_io_cases(sandbox, forger, [("", "3\n"), ("", "3\n")])
    assert report.passed == 0 and [r.error for r in report.results] == ["wrong answer"] * 2


def test_a_sandbox_that_refuses_non_dumpable_processes_is_a_sandbox_failure():
    """Where the sandbox will not let a run make itself non-dumpable, the two processes could
    read each other's memory: the driver says so before anything else runs, and the report is an
    infrastructure failure, never a verdict. The same record written later (by a tester's test,
    after the solution ran) changes nothing."""
    from sandboxes import RunResult
    from sandboxes.harness import Limits, _report_from_run

    secret = "s3cret"
    line = secret + json.dumps({"kind": "unisolated", "error": "refused"}) + "\n"
    report = _report_from_run(RunResult(stdout=line, stderr="", exit_code=0), ["assert True"], Limits(), secret)
    assert report.sandbox_error and "cannot be isolated" in report.sandbox_error and report.passed == 0
    later = "".join(
        secret + json.dumps(record) + "\n"
        for record in (
            {"kind": "compiled", "ok": True},
            {"kind": "ran", "ok": True, "error": None, "stdout": ""},
            {"kind": "unisolated", "error": "forged"},
            {"kind": "test", "index": 0, "error": "AssertionError", "stdout": "", "timed_out": False},
        )
    )
    report = _report_from_run(RunResult(stdout=later, stderr="", exit_code=0), ["assert False"], Limits(), secret)
    assert report.sandbox_error is None and report.passed == 0 and report.ran
