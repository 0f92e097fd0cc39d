"""Code judging helpers: code blocks, tester test formats, and runs in the sandbox."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sandboxes
from llm_envs.verifiers.code import (
    code_blocks,
    compile_error,
    extract_code,
    function_tests_block,
    io_tests_block,
    judge_function,
    judge_io,
    parse_function_tests,
    parse_io_tests,
    ran_to_completion,
)


@pytest.fixture(scope="module")
def sandbox():
    return sandboxes.shared_sandbox("auto")


class _NoRuns:
    """A sandbox that must not be used: proves a run was skipped."""

    max_concurrency = 1

    def run(self, *args, **kwargs):
        raise AssertionError("the sandbox was called")

    def run_batch(self, *args, **kwargs):
        raise AssertionError("the sandbox was called")


# ---------------------------------------------------------------------------------------------
# code blocks


def test_extract_code_prefers_the_last_python_block():
    text = "```\nplain\n```\n```python\nfirst()\n```\ntext\n```py\nsecond()\n```\n```text\nnotes\n```"
    assert extract_code(text) == "second()\n"


def test_extract_code_falls_back_and_accepts_a_truncated_block():
    assert extract_code("```\nprint(1)\n```") == "print(1)\n"
    assert extract_code("Code:\n```python\nprint(2)\nprint(3)") == "print(2)\nprint(3)"
    assert extract_code("no code at all") is None
    assert extract_code("```python\n   \n```") is None
    assert extract_code("```print(4)```") == "print(4)"


def test_code_block_offsets_cover_the_fences():
    text = "ab```python\nx\n```cd"
    (block,) = code_blocks(text)
    assert text[block.start : block.end] == "```python\nx\n```" and block.closed


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "`",
                "```",
                "```python\n",
                "\n",
                "a",
                " ",
                "Input:",
                "Output:",
                "assert f(1) == 1",
            ]
        ),
        max_size=60,
    ).map("".join)
)
def test_code_parsing_never_raises(text):
    extract_code(text)
    parse_io_tests(text)
    parse_function_tests(text, "f")


def test_compile_error_never_executes_and_reports():
    assert compile_error("x = 1") is None
    assert compile_error("def f(:\n").startswith("SyntaxError")
    assert compile_error("x = 1\x00") is not None
    assert (
        compile_error("(" * 500 + ")" * 500) is not None
    )  # too deeply nested for the parser


# ---------------------------------------------------------------------------------------------
# tester formats


def test_function_tests_every_supported_shape_is_one_test_each(sandbox):
    reply = """**Tests:**
```python
import math
assert add(1, 2) == 3
offset = 10
assert add(offset, 1) == 11
def test_negative():
    assert add(-1, -1) == -2
import unittest
class TestAdd(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
def check(candidate):
    assert candidate(2, 2) == 4
if __name__ == "__main__":
    assert add(5, 5) == 10
    unittest.main()
```"""
    parsed = parse_function_tests(reply, "add")
    assert parsed.found == 6 and len(parsed.tests) == 6 and not parsed.problems
    good = judge_function(
        sandbox, "def add(a, b):\n    return a + b\n", parsed.tests, entry_point="add"
    )
    assert good.pass_rate == 1.0
    bad = judge_function(
        sandbox, "def add(a, b):\n    return None\n", parsed.tests, entry_point="add"
    )
    assert bad.passed == 0
    # Equality assertions explain themselves; every failure is an assertion (the code ran).
    assert bad.results[0].error == "AssertionError: expected 3, got None"
    assert bad.results[2].error == "AssertionError: expected -2, got None"
    assert all(ran_to_completion(r, io_style=False) for r in bad.results)


def test_a_test_is_shown_as_written_and_run_instrumented():
    # The equality asserts of a test are rewritten in place to explain themselves: what the
    # tester is shown must be the test as written, in every shape that is rewritten so.
    reply = """```python
def check(candidate):
    for x in range(2):
        assert candidate(x) == x
def test_one():
    assert f(1) == 1
for y in range(2):
    if y:
        assert f(y) == y
```"""
    parsed = parse_function_tests(reply, "f")
    assert parsed.shown == (
        "for x in range(2):\n    assert candidate(x) == x",
        "def test_one():\n    assert f(1) == 1",
        "for y in range(2):\n    if y:\n        assert f(y) == y",
    )
    assert all("__llm_envs_actual" not in label for label in parsed.shown)
    assert all("__llm_envs_actual = " in test for test in parsed.tests)


def test_function_tests_survive_a_broken_block_and_are_capped():
    reply = "```python\nassert f(1) == 1\nthis is not (python\nassert f(2) == 4\n```"
    parsed = parse_function_tests(reply, "f")
    assert parsed.shown == ("assert f(1) == 1", "assert f(2) == 4") and parsed.problems
    many = (
        "```python\n" + "\n".join(f"assert f({i}) == {i}" for i in range(40)) + "\n```"
    )
    capped = parse_function_tests(many, "f", max_tests=5)
    assert (
        capped.found == 40
        and len(capped.tests) == 5
        and "only the first 5" in capped.problems[0]
    )
    assert not parse_function_tests("no block", "f").valid
    assert not parse_function_tests("```python\nx = 1\n```", "f").valid


def test_a_crashing_function_did_not_run_its_tests(sandbox):
    parsed = parse_function_tests("```python\nassert f(1) == 1\n```", "f")
    report = judge_function(
        sandbox, "def f(x):\n    raise KeyError(x)\n", parsed.tests, entry_point="f"
    )
    assert report.results[0].error == "KeyError: 1" and not ran_to_completion(
        report.results[0], io_style=False
    )


def test_unittest_errors_are_not_mistaken_for_failures(sandbox):
    reply = "```python\nimport unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(f(1), 2)\n```"
    parsed = parse_function_tests(reply, "f")
    crash = judge_function(
        sandbox,
        "def f(x):\n    raise ValueError('boom')\n",
        parsed.tests,
        entry_point="f",
    )
    wrong = judge_function(
        sandbox, "def f(x):\n    return 3\n", parsed.tests, entry_point="f"
    )
    assert not ran_to_completion(crash.results[0], io_style=False)
    assert (
        ran_to_completion(wrong.results[0], io_style=False)
        and "3 != 2" in wrong.results[0].error
    )


def test_io_tests_pairs_with_labels_and_order():
    reply = """Two tests.
**Test Input:**
```
1 2
```
**Test Output:**
```
3
```
Input 2:
```text
5 5
```
Expected output:
```
10
```
**Test Output:**
```
orphan
```
**Test Input:**
```
unpaired
```"""
    parsed = parse_io_tests(reply)
    assert parsed.tests == (("1 2\n", "3\n"), ("5 5\n", "10\n"))
    assert len(parsed.problems) == 2  # the orphan output and the unpaired input
    assert not parse_io_tests("no blocks").valid


def test_reference_blocks_round_trip():
    cases = [("1 2\n", "3\n"), ("4\n5\n", "9\n")]
    assert parse_io_tests(io_tests_block(cases)).tests == tuple(cases)
    golden = [
        "from typing import List\ncandidate = f\nassert candidate([1]) == 1",
        "candidate = f\nassert candidate([]) == 0",
    ]
    assert len(parse_function_tests(function_tests_block(golden), "f").tests) == 2


def test_io_judging(sandbox):
    cases = [("1 2\n", "3\n"), ("5 5\n", "10\n")]
    assert (
        judge_io(
            sandbox, "a, b = map(int, input().split())\nprint(a + b)", cases
        ).pass_rate
        == 1.0
    )
    wrong = judge_io(sandbox, "print(3)", cases)
    assert (
        wrong.passed == 1
        and wrong.results[1].error == "wrong answer"
        and wrong.results[1].stdout == "3\n"
    )
    assert ran_to_completion(wrong.results[1], io_style=True)
    crash = judge_io(sandbox, "raise SystemExit(3)", cases)
    assert not any(ran_to_completion(r, io_style=True) for r in crash.results)


def test_code_that_does_not_compile_is_never_sent_to_the_sandbox():
    report = judge_function(_NoRuns(), "def f(:", ["assert f() == 1"], entry_point="f")
    assert not report.compiled and not report.ran and report.pass_rate == 0.0
    report = judge_io(_NoRuns(), "print(", [("", "1\n")])
    assert not report.compiled and report.results[0].error.startswith("SyntaxError")
