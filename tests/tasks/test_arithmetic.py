"""The offline ``arithmetic`` source: deterministic, verifiable, and split-disjoint."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

import sandboxes
from llm_envs.core.splits import split_of
from llm_envs.tasks import arithmetic, load_task_source
from llm_envs.tasks.arithmetic import LEVELS, ArithmeticSource, format_answer
from llm_envs.verifiers.math import check_answer, extract_boxed


def test_problem_i_is_a_pure_function_of_split_and_index():
    first = [load_task_source("arithmetic", split="train").get(i) for i in range(20)]
    again = [ArithmeticSource("train").get(i) for i in range(20)]
    assert first == again
    assert len({p.prompt for p in first}) > 15  # not one problem repeated


def test_splits_never_share_a_problem_and_follow_the_content_hash():
    questions = {}
    for split in ("train", "validation", "test"):
        source = load_task_source("arithmetic", split=split)
        problems = [source.get(i) for i in range(700)]
        assert all(p.split == split for p in problems)
        assert all(split_of(f"{p.metadata['kind']}\n{p.metadata['program']}") == split for p in problems)
        questions[split] = {p.prompt for p in problems}
    assert not questions["train"] & questions["test"]
    assert not questions["train"] & questions["validation"]
    assert not questions["validation"] & questions["test"]


_WORDINGS = re.compile(r"^(?:What is |Compute |Calculate )(.*?)[?.]$")


def test_no_held_out_problem_is_a_training_problem_reworded_or_renamed():
    # The split was drawn from the question's text: "What is 4 + 5?" (test) was "Calculate
    # 4 + 5." in train, 290 of 300 level-0 test questions; a level-4 word problem came back
    # with another name in it.
    def asked(problem):
        match = _WORDINGS.match(problem.prompt)
        return match.group(1) if match else problem.prompt

    train = {asked(p) for p in (ArithmeticSource("train", level=0).get(i) for i in range(3000))}
    for split in ("validation", "test"):
        held_out = {asked(p) for p in (ArithmeticSource(split, level=0).get(i) for i in range(200))}
        assert len(train) > 100 and len(held_out) > 20
        assert not train & held_out, sorted(train & held_out)[:5]
    names = re.compile(r"\b(" + "|".join(arithmetic._NAMES) + r")\b")
    train_word = {names.sub("NAME", p.prompt) for p in (ArithmeticSource("train", level=4).get(i) for i in range(3000))}
    test_word = {names.sub("NAME", p.prompt) for p in (ArithmeticSource("test", level=4).get(i) for i in range(300))}
    assert not train_word & test_word, sorted(train_word & test_word)[:3]


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
