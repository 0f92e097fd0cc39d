"""Pure rules of Multi-Agent Evolve: format reward, judge parsing, proposer/solver/judge rewards."""

from __future__ import annotations

import pytest

from llm_envs.envs.proposer_solver_judge import rules


@pytest.mark.parametrize(("pairs", "expected"), [(0, 0.0), (1, 1.0), (2, 0.5), (7, 0.5)])
def test_format_reward(pairs, expected):
    assert rules.format_reward(pairs) == expected


def test_first_tag_counts_pairs_in_the_completion_only():
    assert rules.first_tag("<question> Q1 </question>", "question") == ("Q1", 1)
    assert rules.first_tag("<question>A</question> and <question>B</question>", "question") == (
        "A",
        2,
    )
    assert rules.first_tag("no tags", "question") == (None, 0)
    assert rules.first_tag("<question>unclosed", "question") == (None, 0)
    assert rules.first_tag("<Answer>x < 5</Answer>", "answer") == ("x < 5", 1)


@pytest.mark.parametrize(
    ("text", "raw", "value", "fmt"),
    [
        ("good <score>10</score>", 10.0, 1.0, 1.0),
        ("<score>1</score>", 1.0, 0.0, 1.0),
        ("<score>7</score>", 7.0, 6 / 9, 1.0),
        ("<score>7</score> then <score>9</score>", 7.0, 6 / 9, 0.5),  # the first wins
        ("<score>15</score>", 15.0, 1.0, 1.0),  # clip((15 − 1)/9) = 1
        ("<score>0</score>", 0.0, 0.0, 1.0),  # clip(−1/9) = 0
        ("<score>7.5</score>", 7.5, 6.5 / 9, 1.0),
        ("<score>great</score>", None, 0.5, 0.0),  # not a number: not a score
        ("no score at all", None, 0.5, 0.0),
        ("<score>great</score><score>4</score>", 4.0, 3 / 9, 1.0),
    ],
)
def test_parse_judge(text, raw, value, fmt):
    judged = rules.parse_judge(text)
    assert judged.raw == raw
    assert judged.value == pytest.approx(value)
    assert judged.format == fmt


def test_unparsed_value_is_configurable():
    assert rules.parse_judge("none", unparsed_value=0.0).value == 0.0


def test_proposer_reward_paper_and_released_variant():
    # Paper: (Q + (1 − mean V) + F)/3 with Q = 0.8, answers V = [1, 0.5, 0, 0.5, 0.5] (mean 0.5).
    values = [1.0, 0.5, 0.0, 0.5, 0.5]
    parts = rules.proposer_reward(0.8, values, 1.0)
    assert parts == pytest.approx({"format": 1 / 3, "quality": 0.8 / 3, "difficulty": 0.5 / 3})
    assert sum(parts.values()) == pytest.approx((0.8 + 0.5 + 1.0) / 3)
    # Below the threshold the paper still counts difficulty; the released code drops it.
    low = rules.proposer_reward(0.6, values, 0.5)
    assert sum(low.values()) == pytest.approx((0.6 + 0.5 + 0.5) / 3)
    dropped = rules.proposer_reward(0.6, values, 0.5, drop_difficulty_below_threshold=True)
    assert dropped["difficulty"] == 0.0
    assert sum(dropped.values()) == pytest.approx((0.6 + 0.5) / 3)
    # Exactly at the threshold the difficulty term stays.
    kept = rules.proposer_reward(0.7, values, 1.0, drop_difficulty_below_threshold=True)
    assert kept["difficulty"] == pytest.approx(0.5 / 3)


def test_solver_and_judge_rewards():
    assert rules.solver_reward(0.8, 1.0) == pytest.approx(0.9)
    assert rules.solver_reward(1.0, 0.5) == pytest.approx(0.75)
    assert rules.solver_reward(0.0, 0.0) == 0.0
    assert rules.judge_reward(0.5) == 0.5


def test_difficulty_needs_answers():
    with pytest.raises(ValueError):
        rules.difficulty([])
    assert rules.difficulty([0.2, 0.4]) == pytest.approx(0.7)


def test_prompts_carry_the_output_format():
    assert "<question></question>" in rules.proposer_prompt(None)
    with_reference = rules.proposer_prompt("What is 2 + 2?")
    assert "What is 2 + 2?" in with_reference and "harder" in with_reference
    assert "<answer></answer>" in rules.solver_prompt("Q")
    assert "<score>" in rules.judge_question_prompt(
        "Q"
    ) and "1 to 3" in rules.judge_question_prompt("Q")
    assert "STRICT" in rules.judge_answer_prompt("Q", "A")
