"""The offline ``arithmetic`` source: deterministic, verifiable, and split-disjoint."""

from __future__ import annotations

from fractions import Fraction

import pytest

import sandboxes
from llm_envs.core.splits import split_of
from llm_envs.tasks import load_task_source
from llm_envs.tasks.arithmetic import LEVELS, ArithmeticSource, format_answer
from llm_envs.verifiers.math import check_answer, extract_boxed


def test_problem_i_is_a_pure_function_of_split_and_index():
    first = [load_task_source("arithmetic", split="train").get(i) for i in range(20)]
    again = [ArithmeticSource("train").get(i) for i in range(20)]
    assert first == again
    assert len({p.prompt for p in first}) > 15  # not one problem repeated


def test_splits_never_share_a_question_and_follow_the_content_hash():
    questions = {}
    for split in ("train", "validation", "test"):
        source = load_task_source("arithmetic", split=split)
        problems = [source.get(i) for i in range(700)]
        assert all(p.split == split and split_of(p.prompt) == split for p in problems)
        questions[split] = {p.prompt for p in problems}
    assert not questions["train"] & questions["test"]
    assert not questions["train"] & questions["validation"]
    assert not questions["validation"] & questions["test"]


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_has_a_boxed_worked_solution_with_the_right_answer(level):
    source = load_task_source("arithmetic", split="test", level=level)
    for i in range(40):
        problem = source.get(i)
        assert problem.metadata["level"] == level
        assert problem.style == "answer" and problem.answer
        assert extract_boxed(problem.solution) == problem.answer
        assert check_answer(problem.answer, problem.answer)


def test_the_reference_programs_print_the_answer_in_the_sandbox():
    source = load_task_source("arithmetic", split="validation")
    problems = [source.get(i) for i in range(60)]
    sandbox = sandboxes.shared_sandbox("auto")
    runs = sandbox.run_batch([sandboxes.Job(p.metadata["program"]) for p in problems])
    for problem, run in zip(problems, runs):
        assert run.ok, (problem.prompt, run.stderr)
        assert check_answer(run.stdout.strip().splitlines()[-1], problem.answer), (
            problem.prompt,
            run.stdout,
        )


def test_levels_option_is_checked():
    assert ArithmeticSource("train", levels=[4, 2]).levels == (2, 4)
    with pytest.raises(ValueError):
        ArithmeticSource("train", levels=[6])
    with pytest.raises(ValueError):
        ArithmeticSource("train", levels=[])
    with pytest.raises(ValueError):
        ArithmeticSource("train", level=1, levels=[1])
    with pytest.raises(ValueError):
        ArithmeticSource("holdout")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Fraction(42), "42"),
        (Fraction(-7), "-7"),
        (Fraction(25, 2), "12.5"),
        (Fraction(-13, 4), "-3.25"),
        (Fraction(1, 16), "0.0625"),
        (Fraction(1, 32), "1/32"),  # five decimals: stated as a fraction
        (Fraction(7, 12), "7/12"),
    ],
)
def test_format_answer(value, text):
    assert format_answer(value) == text
    assert Fraction(text) == value
