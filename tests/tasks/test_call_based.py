"""Call-based problems: APPS rows with ``fn_name`` and LiveCodeBench ``"functional"`` rows load as
function-style problems whose golden assertion snippets run in the real sandbox. Local files in
the hub schema; nothing here touches the network."""

from __future__ import annotations

import json

import pytest

import sandboxes
from llm_envs.tasks import load_task_source
from llm_envs.tasks.code_datasets import (
    APPS_PRELUDE,
    LCB_PRELUDE,
    call_test,
    python_literal,
    solution_method,
)
from llm_envs.verifiers.code import judge

from .test_hub_loaders import apps_row, lcb_compressed, write_jsonl, write_parquet


@pytest.fixture(scope="module")
def sandbox():
    return sandboxes.shared_sandbox("auto")


def by_id(source) -> dict:
    return {p.id: p for p in source}


# ---------------------------------------------------------------------------------------------
# APPS


def apps_call_row(
    problem_id: int,
    fn_name: str,
    inputs: list,
    outputs: list,
    solution: str,
    starter_code: str = "",
    **overrides,
) -> dict:
    """A call-based APPS row in the hub schema (``input_output`` and ``solutions`` are JSON text)."""
    row = {
        "id": problem_id,
        "question": f"Problem {problem_id}: write `{fn_name}`.",
        "solutions": json.dumps([solution]),
        "input_output": json.dumps(
            {"fn_name": fn_name, "inputs": inputs, "outputs": outputs}
        ),
        "difficulty": "introductory",
        "url": f"https://www.codewars.com/kata/{problem_id}",
        "starter_code": starter_code,
    }
    row.update(overrides)
    return row


# Outputs wrapped in a one-element list, as in most APPS rows.
WRAPPED = apps_call_row(
    10,
    "double_sum",
    [[1, 2], [0, 0], [-3, 5]],
    [[6], [0], [4]],
    "def double_sum(a, b):\n    return 2 * (a + b)\n",
    starter_code="def double_sum(a, b):\n\t",
)
# The same answers stored bare, and list answers both wrapped ([[1, 5]]) and bare ([2, 2]); the
# golden solution returns a tuple.
BARE_AND_TUPLES = apps_call_row(
    11,
    "min_max",
    [[[3, 1, 5]], [[2, 2]]],
    [[[1, 5]], [2, 2]],
    "def min_max(values):\n    return min(values), max(values)\n",
    starter_code="def min_max(values):\n    ",
)
# LeetCode style inside APPS: `class Solution`, `List` from typing used without an import.
LEETCODE = apps_call_row(
    12,
    "maxProfit",
    [[[7, 1, 5, 3, 6, 4]], [[7, 6, 4, 3, 1]]],
    [5, 0],
    "class Solution:\n"
    "    def maxProfit(self, prices: List[int]) -> int:\n"
    "        best, low = 0, float('inf')\n"
    "        for p in prices:\n"
    "            low = min(low, p)\n"
    "            best = max(best, p - low)\n"
    "        return best\n",
    starter_code="class Solution:\n    def maxProfit(self, prices: List[int]) -> int:\n        ",
)
# JSON made the integer keys of the expected dict strings; infinity, and strings that look like
# code, must reach the sandbox as values.
QUOTED = "it's \"x\"\n\\ ''' __import__('os').system('false')"
ODD_VALUES = apps_call_row(
    13,
    "lengths",
    [[["ab", "cde", "fg"]], [[QUOTED]]],
    [[{"2": 2, "3": 1}], [{str(len(QUOTED)): 1}]],
    "def lengths(words):\n"
    "    out = {}\n"
    "    for w in words:\n"
    "        out[len(w)] = out.get(len(w), 0) + 1\n"
    "    return out\n",
)
INFINITY = apps_call_row(
    14,
    "inverse",
    [[0], [4]],
    [[float("inf")], [0.25]],
    "def inverse(x):\n    return float('inf') if x == 0 else 1 / x\n",
)
APPS_CALL_ROWS = [WRAPPED, BARE_AND_TUPLES, LEETCODE, ODD_VALUES, INFINITY]


def test_apps_call_based_rows_are_function_problems_and_the_golden_solutions_pass(
    tmp_path, sandbox
):
    write_jsonl(tmp_path / "test.jsonl", APPS_CALL_ROWS)
    problems = by_id(load_task_source("apps", split="test", path=tmp_path))
    assert sorted(problems) == [f"apps/{i}" for i in range(10, 15)]
    for row in APPS_CALL_ROWS:
        problem = problems[f"apps/{row['id']}"]
        cases = json.loads(row["input_output"])["inputs"]
        assert problem.style == "function" and len(problem.tests) == len(cases)
        assert problem.solution == json.loads(row["solutions"])[0]
        assert problem.setup == APPS_PRELUDE
        assert problem.metadata["skipped_tests"] == 0
        report = judge(sandbox, problem, problem.solution)
        assert report.pass_rate == 1.0, (problem.id, [r.error for r in report.results])
    wrapped = problems["apps/10"]
    assert (wrapped.entry_point, wrapped.call) == ("double_sum", "double_sum")
    assert wrapped.prompt.startswith("Problem 10")
    assert "```python\ndef double_sum(a, b):\n```" in wrapped.prompt
    leetcode = problems["apps/12"]
    assert (leetcode.entry_point, leetcode.call) == ("Solution", "Solution().maxProfit")
    assert "def maxProfit(self, prices: List[int]) -> int:" in leetcode.prompt


def test_apps_wrong_solutions_fail(tmp_path, sandbox):
    problems = by_id(
        load_task_source(
            "apps",
            split="test",
            path=write_jsonl(tmp_path / "test.jsonl", APPS_CALL_ROWS),
        )
    )
    wrong = {
        "apps/10": "def double_sum(a, b):\n    return a + b\n",  # passes only (0, 0)
        "apps/11": "def min_max(values):\n    return min(values)\n",  # half the answer
        "apps/12": "class Solution:\n    def maxProfit(self, prices):\n        return max(prices)\n",
        "apps/13": "def lengths(words):\n    return {str(len(w)): 1 for w in words}\n",
        "apps/14": "def inverse(x):\n    return 0\n",
    }
    rates = {
        pid: judge(sandbox, problems[pid], code).pass_rate
        for pid, code in wrong.items()
    }
    assert rates == {
        "apps/10": pytest.approx(1 / 3),
        "apps/11": 0.0,
        "apps/12": 0.0,
        "apps/13": 0.0,
        "apps/14": 0.0,
    }
    # The call-based problem needs the function itself: a stdin program defines nothing.
    report = judge(sandbox, problems["apps/10"], "print(6)\n")
    assert report.pass_rate == 0.0 and not report.ran


def test_the_one_element_list_quirk_is_accepted_both_ways_and_no_further(sandbox):
    # Expected [6] (APPS's wrapping) accepts 6 and [6]; expected 6 accepts only 6.
    def passes(code: str, expected, one_element_list: bool) -> bool:
        test = call_test("f", [], expected, one_element_list=one_element_list)
        report = sandboxes.run_function_tests(sandbox, code, [test], entry_point="f")
        return report.all_passed

    scalar, listed = "def f():\n    return 6\n", "def f():\n    return [6]\n"
    assert passes(scalar, [6], True) and passes(listed, [6], True)
    assert passes(scalar, 6, True) and not passes(listed, 6, True)
    assert passes("def f():\n    return (1, (2, 3))\n", [[1, [2, 3]]], True)
    assert not passes(
        "def f():\n    return 1\n", [1, 2], True
    )  # not a one-element list
    # LiveCodeBench's check has no such wrapping: [6] is a list of one 6.
    assert not passes(scalar, [6], False) and passes(listed, [6], False)
    assert passes("def f():\n    return (6,)\n", [6], False)


def test_python_literals_of_json_values():
    assert python_literal(
        [1, -2.5, "a'b\"c\n", None, True, {"k": [float("-inf")]}]
    ) == ("[1, -2.5, 'a\\'b\"c\\n', None, True, {'k': [float('-inf')]}]")
    assert python_literal(float("nan")) == "float('nan')"
    with pytest.raises(TypeError):
        python_literal({1, 2})


def test_bad_apps_call_rows_are_skipped(tmp_path):
    good = apps_call_row(20, "f", [[1]], [[1]], "def f(x):\n    return x\n")
    rows = [
        good,
        apps_call_row(
            21, "f", [[1], [2]], [[1]], "def f(x):\n    return x\n"
        ),  # lengths
        apps_call_row(22, "not a name", [[1]], [[1]], "x = 1\n"),
        apps_call_row(23, "class", [[1]], [[1]], "x = 1\n"),  # a keyword
        apps_call_row(
            24, "f", [1, 2], [1, 2], "def f(x):\n    return x\n"
        ),  # no arg lists
        apps_call_row(25, "f", [], [], "def f(x):\n    return x\n"),  # no tests
        {
            **good,
            "id": 26,
            "input_output": '{"fn_name": "f", "inputs": [[1]',
        },  # bad JSON
        {**good, "id": 27, "solutions": "[]"},  # no golden solution
    ]
    path = write_jsonl(tmp_path / "test.jsonl", rows)
    assert [p.id for p in load_task_source("apps", split="test", path=path)] == [
        "apps/20"
    ]
    assert [
        p.id
        for p in load_task_source(
            "apps", split="test", path=path, require_solution=False
        )
    ] == ["apps/20", "apps/27"]


def test_files_mixing_stdin_and_call_based_rows_load_both(tmp_path, sandbox):
    rows = [apps_row(1), WRAPPED, apps_row(2), LEETCODE]
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_parquet(tmp_path / "test.parquet", [apps_row(3), BARE_AND_TUPLES])
    train = by_id(load_task_source("apps", split="train", path=tmp_path))
    test = by_id(load_task_source("apps", split="test", path=tmp_path))
    assert {pid: p.style for pid, p in train.items()} == {
        "apps/1": "io",
        "apps/10": "function",
        "apps/2": "io",
        "apps/12": "function",
    }
    assert {pid: p.style for pid, p in test.items()} == {
        "apps/3": "io",
        "apps/11": "function",
    }
    for problem in [*train.values(), *test.values()]:
        assert judge(sandbox, problem, problem.solution).pass_rate == 1.0, problem.id


# ---------------------------------------------------------------------------------------------
# LiveCodeBench

TWO_SUM_STARTER = "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        "


def lcb_functional_row(
    question_id: str, public: list, private: list, **overrides
) -> dict:
    """A LeetCode row of ``livecodebench/code_generation_lite`` (private tests compressed)."""
    row = {
        "question_title": "Two Sum",
        "question_content": f"{question_id}: return the indices of the two numbers that add up "
        "to target.",
        "platform": "leetcode",
        "question_id": question_id,
        "contest_id": "weekly-contest-1",
        "contest_date": "2024-08-03T00:00:00",
        "starter_code": TWO_SUM_STARTER,
        "difficulty": "easy",
        "public_test_cases": json.dumps(public),
        "private_test_cases": lcb_compressed(private),
        "metadata": json.dumps({"func_name": "twoSum"}),
    }
    row.update(overrides)
    return row


def functional(args: list, expected) -> dict:
    return {
        "input": "\n".join(json.dumps(a) for a in args),
        "output": json.dumps(expected),
        "testtype": "functional",
    }


PUBLIC = [functional([[2, 7, 11, 15], 9], [0, 1]), functional([[3, 2, 4], 6], [1, 2])]
PRIVATE = [functional([[3, 3], 6], [0, 1]), functional([[1, 5, 8, 2], 10], [2, 3])]
TWO_SUM = (
    "class Solution:\n"
    "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        seen = {}\n"
    "        for i, n in enumerate(nums):\n"
    "            if target - n in seen:\n"
    "                return seen[target - n], i\n"  # a tuple: compared as a list
    "            seen[n] = i\n"
)


def stdin_row(question_id: str) -> dict:
    return {
        **lcb_functional_row(question_id, [], []),
        "question_content": f"{question_id}: read n, print 2n.",
        "platform": "atcoder",
        "starter_code": "",
        "public_test_cases": json.dumps(
            [{"input": "2\n", "output": "4\n", "testtype": "stdin"}]
        ),
        "private_test_cases": lcb_compressed(
            [{"input": "5\n", "output": "10\n", "testtype": "stdin"}]
        ),
        "metadata": "{}",
    }


def test_livecodebench_functional_rows_load_and_a_hand_written_solution_passes(
    tmp_path, sandbox
):
    rows = [stdin_row("abc001_a"), lcb_functional_row("lc1", PUBLIC, PRIVATE)]
    source = load_task_source(
        "livecodebench",
        split="test",
        split_policy="benchmark",
        path=write_jsonl(tmp_path / "test6.jsonl", rows),
    )
    assert source.has_golden_solutions is False
    problems = by_id(source)
    assert problems["livecodebench/abc001_a"].style == "io"
    problem = problems["livecodebench/lc1"]
    assert (problem.style, problem.entry_point, problem.call) == (
        "function",
        "Solution",
        "Solution().twoSum",
    )
    assert problem.solution is None and problem.setup == LCB_PRELUDE
    assert len(problem.tests) == 4 and problem.metadata["skipped_tests"] == 0
    assert (
        TWO_SUM_STARTER.rstrip() in problem.prompt
        and "Solution().twoSum(...)" in problem.prompt
    )
    report = judge(sandbox, problem, TWO_SUM)
    assert report.pass_rate == 1.0, [r.error for r in report.results]
    wrong = TWO_SUM.replace("seen[target - n], i", "i, seen[target - n]")
    assert judge(sandbox, problem, wrong).pass_rate == 0.0
    assert not judge(
        sandbox, problem, "def twoSum(nums, target):\n    return [0, 1]\n"
    ).ran


def test_bad_livecodebench_rows_are_skipped_and_bad_private_cases_counted(tmp_path):
    rows = [
        lcb_functional_row("ok", PUBLIC, PRIVATE),
        lcb_functional_row("no_starter", PUBLIC, PRIVATE, starter_code=""),
        lcb_functional_row(
            "no_method", PUBLIC, PRIVATE, starter_code="class Solution:\n    pass\n"
        ),
        lcb_functional_row(
            "bad_input",
            [{"input": "[2, 7\n9", "output": "[0, 1]", "testtype": "functional"}],
            PRIVATE,
        ),
        lcb_functional_row(
            "bad_output",
            [{"input": "[2, 7]\n9", "output": "[0, ", "testtype": "functional"}],
            PRIVATE,
        ),
        lcb_functional_row(
            "mixed",
            [PUBLIC[0], {"input": "2\n", "output": "4\n", "testtype": "stdin"}],
            PRIVATE,
        ),
        lcb_functional_row("undecodable", PUBLIC, PRIVATE, public_test_cases="%%%"),
        lcb_functional_row(
            "bad_private",
            PUBLIC,
            [
                PRIVATE[0],
                {"input": "not json", "output": "1", "testtype": "functional"},
            ],
        ),
    ]
    source = load_task_source(
        "livecodebench",
        split="test",
        split_policy="benchmark",
        path=write_jsonl(tmp_path / "test.jsonl", rows),
    )
    problems = by_id(source)
    assert sorted(problems) == ["livecodebench/bad_private", "livecodebench/ok"]
    bad_private = problems["livecodebench/bad_private"]
    assert len(bad_private.tests) == 3 and bad_private.metadata["skipped_tests"] == 1


def test_the_method_comes_from_the_starter_code():
    starter = (
        "# Definition for a binary tree node.\n# class TreeNode:\n#     pass\n"
        "class Solution:\n    def _helper(self):\n        pass\n"
        "    def first(self, a: int) -> int:\n        return a\n"
        "    def second(self, s: str) -> str:\n        "
    )
    assert solution_method(starter) == "first"
    assert solution_method(starter, "second") == "second"
    assert solution_method(starter, "missing") == "first"
    assert solution_method("def f(x):\n    ") is None
    assert solution_method("class Solution:\n    def f(self,") is None  # does not parse
