"""Reasoner–Tool and Coder–Tester fed the transcripts of issue 31: each case where the released
PettingLLMs code (a054fb18) reads a reply differently, and what we decided (docs/papers.md,
"Reasoner–Tool" and "Coder–Tester"). Expected rewards are hand-computed from the env pages."""

from __future__ import annotations

import pytest

from llm_envs.envs.coder_tester import rules as coder_rules
from llm_envs.envs.coder_tester.env import CoderTesterEnv
from llm_envs.envs.reasoner_tool import rules as math_rules
from llm_envs.envs.reasoner_tool.env import ReasonerToolEnv
from llm_envs.tasks import Problem
from llm_envs.verifiers.code import parse_io_tests
from tests.envs.helpers import ListSource

from .conftest import components, play, scripted

NINETY = Problem(id="toy/90", prompt="What is 45 × 2?", split="train", answer="90", style="answer")
THREE = Problem(id="toy/3", prompt="What is 6 / 2?", split="train", answer="3", style="answer")
ADD = Problem(
    id="toy/add",
    prompt='def add(a, b):\n    """Return a + b."""\n',
    split="train",
    solution="def add(a, b):\n    return a + b\n",
    tests=("assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(2, 2) == 4"),
    style="function",
    entry_point="add",
)
SUM_IO = Problem(
    id="toy/sum",
    prompt="Read two integers a and b on one line and print a + b.",
    split="train",
    solution="a, b = map(int, input().split())\nprint(a + b)\n",
    tests=(("1 2\n", "3\n"), ("5 5\n", "10\n")),
    style="io",
)


def one_turn(problem: Problem, sandbox, replies: dict[str, str], **overrides):
    env_class = ReasonerToolEnv if problem.style == "answer" else CoderTesterEnv
    env = env_class(
        task_source=ListSource([problem]), sandbox=sandbox, max_turns=1, **overrides
    )
    play(env, scripted({agent: [reply] for agent, reply in replies.items()}))
    return env


# ---------------------------------------------------------------------------------------------
# Reasoner–Tool


@pytest.mark.parametrize(
    "reply",
    ["45 × 2 = 90, so the answer is 90", "45 × 2 = 90. \\boxed{} 90"],
    ids=["no box", "empty box"],
)
def test_a_reasoner_reply_without_a_boxed_answer_has_no_answer(sandbox, reply):
    # The release reads the whole reply with math-verify and pays both (2.0); here the answer
    # is the last non-empty box only: no format, no answer, 0.
    env = one_turn(NINETY, sandbox, {"reasoner": reply, "tool": "```python\nprint(90)\n```"})
    assert env.records[0].parsed["answer"] is None
    assert components(env, "reasoner") == {"team": 0.0, "local": 0.0}
    # the tool is right, the reasoner is not: team 0, local 0.1 + 0.1 + 0.8
    assert components(env, "tool") == pytest.approx({"team": 0.0, "local": 1.0})


def test_the_releases_free_text_reading_pays_wrong_answers():
    # Why: math-verify's free-text extraction (the release's reading of an unboxed reply and of
    # a program's output) reads the leading number of an expression.
    math_verify = pytest.importorskip("math_verify")
    for text, truth in [("so the answer is 10\\sqrt{2}", "10"), ("3*sqrt(2)", "3")]:
        assert math_verify.verify(math_verify.parse(truth), math_verify.parse(text))


@pytest.mark.parametrize(
    "printed, answer, local",
    [
        ("The answer is 90", "90", 1.0),
        ("The final answer is: 90", "90", 1.0),
        ("**Answer:** 90", "90", 1.0),
        ("90\nDone!", "Done!", 0.2),  # the last line is the answer (the release: 90)
    ],
)
def test_a_tool_answer_line_may_say_the_answer_is(sandbox, printed, answer, local):
    body = "".join(f"print({line!r})\n" for line in printed.split("\n"))
    env = one_turn(
        NINETY, sandbox, {"reasoner": "\\boxed{90}", "tool": f"```python\n{body}```"}
    )
    assert env.records[1].parsed["answer"] == answer
    assert components(env, "tool") == pytest.approx({"team": 1.0, "local": local})


def test_a_tool_expression_is_read_whole(sandbox):
    # 3·√2 is not 3 (the release's free-text reading pays it).
    env = one_turn(
        THREE, sandbox, {"reasoner": "\\boxed{3}", "tool": "```python\nprint('3*sqrt(2)')\n```"}
    )
    assert env.records[1].parsed["answer"] == "3*sqrt(2)"
    assert components(env, "tool") == pytest.approx({"team": 1.0, "local": 0.2})


def test_a_tool_program_that_prints_the_answer_then_crashes_is_not_scored(sandbox):
    # The release scores the output of a crashed program; here it did not run: builds only.
    env = one_turn(
        NINETY,
        sandbox,
        {"reasoner": "\\boxed{90}", "tool": "```python\nprint(90)\nraise SystemExit(3)\n```"},
    )
    assert env.records[1].parsed["answer"] is None
    assert components(env, "tool") == pytest.approx({"team": 1.0, "local": 0.1})


@pytest.mark.parametrize(
    "reply, local, format_ok",
    [
        ("print(45 * 2)", 1.0, False),  # the whole reply runs as the program, as in the release
        ("I would compute 45 * 2 and print it.", 0.0, False),  # not Python: does not build
        ("```python\nprint(45 * 2)\n```", 1.0, True),
    ],
)
def test_tool_code_without_a_fence_runs_as_the_program(sandbox, reply, local, format_ok):
    env = one_turn(NINETY, sandbox, {"reasoner": "\\boxed{90}", "tool": reply})
    assert components(env, "tool") == pytest.approx({"team": 1.0, "local": local})
    assert env.records[1].format_ok is format_ok


def test_tool_answer_prefixes():
    assert math_rules.tool_answer("The answer is 7/12\n") == "7/12"
    assert math_rules.tool_answer("Answers: 5") == "Answers: 5"  # a word, not the prefix


# ---------------------------------------------------------------------------------------------
# Coder–Tester


@pytest.mark.parametrize(
    "reply",
    [
        "```\ndef add(a, b):\n    return a + b\n```",
        "```py\ndef add(a, b):\n    return a + b\n```",
        "```python\ndef add(a, b):\n    return a + b\n",
    ],
    ids=["untagged", "py", "unclosed"],
)
def test_coder_code_must_be_a_closed_python_block(sandbox, reply):
    tests = "**Tests:**\n```python\nassert add(3, 4) == 7\n```"
    env = one_turn(ADD, sandbox, {"coder": reply, "tester": tests}, tester_reward="paper")
    # The release passes 0 tests (no ```python block): no code, 0.
    assert env.records[0].parsed["code"] is None
    assert components(env, "coder") == {"team": 0.0, "local": 0.0}
    env = one_turn(
        ADD,
        sandbox,
        {"coder": reply, "tester": tests},
        tester_reward="paper",
        reply_parsing="lenient",
    )
    assert components(env, "coder") == pytest.approx({"team": 1.0, "local": 1.0})


def test_strict_code_reads_the_last_closed_python_block():
    reply = "```python\nx = 1\n```\ntext\n```python\ny = 2\n```\n```python\nz = 3"
    assert coder_rules.strict_code(reply) == "y = 2"
    assert coder_rules.strict_code("```python\n\n```") is None


PLAIN_LABELS = "Input:\n```\n1 2\n```\nOutput:\n```\n3\n```"
RELEASE_LABELS = "**Test Input:**\n```text\n1 2\n```\n\n**Test Output:**\n```\n3\n```"


def test_plain_input_output_labels_give_no_test_unless_lenient(sandbox):
    golden = f"**Code:**\n```python\n{SUM_IO.solution}```"
    env = one_turn(
        SUM_IO, sandbox, {"coder": golden, "tester": PLAIN_LABELS}, tester_reward="paper"
    )
    # not valid: team 1 (the golden code passes both golden cases), local 0
    assert components(env, "tester") == pytest.approx({"team": 1.0, "local": 0.0})
    env = one_turn(
        SUM_IO,
        sandbox,
        {"coder": golden, "tester": PLAIN_LABELS},
        tester_reward="paper",
        reply_parsing="lenient",
    )
    assert components(env, "tester") == pytest.approx({"team": 1.0, "local": 1.0})
    env = one_turn(
        SUM_IO, sandbox, {"coder": golden, "tester": RELEASE_LABELS}, tester_reward="paper"
    )
    assert components(env, "tester") == pytest.approx({"team": 1.0, "local": 1.0})


def test_strict_io_tests_pair_inputs_and_outputs_in_order():
    reply = (
        "**Test Input:**\n```\n1 2\n```\n**Test Input:**\n```\n5 5\n```\n"
        "**Test Output:**\n```\n3\n```\n**Test Output:**\n```\n10\n```\n"
        "**Test Input:**\n```\n7 7\n```"  # no output for it: dropped, as in the release
    )
    parsed = parse_io_tests(coder_rules.strict_io_tests_text(reply))
    assert parsed.tests == (("1 2\n", "3\n"), ("5 5\n", "10\n"))


def test_reply_parsing_is_validated():
    with pytest.raises(ValueError, match="reply_parsing"):
        CoderTesterEnv(task_source=ListSource([ADD]), reply_parsing="loose")
