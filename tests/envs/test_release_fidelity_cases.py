"""The transcripts of issue 31's side-by-side run against the released code, with the values
THIS project gives them (docs/papers.md, "Side by side with the released code").

Each case is an agent text fed to our parsers/rules; the expected value is computed by hand
from our documented rules (never from the released code). Where the release reads the text
differently, the comment names the release's value and the docs/papers.md row that decides it;
a case without a comment reads the same in both.

Rewards used below:
* CoMAS (Forum): solver (τ − 1)/2, evaluator (3 − τ)/2, scorer 0; no valid score: (0, 0, −1).
* Multi-Agent Evolve: V = clip((X − 1)/9, 0, 1); no score: the neutral 0.5.
* Plan-Path (HAND grid of tests/envs/puzzles): the shortest path D D R R R U earns 7.44.
"""

from __future__ import annotations

import pytest

from llm_envs.envs.coder_tester import rules as coder_rules
from llm_envs.envs.debate import rules as debate_rules
from llm_envs.envs.debate.verifiers import GroundTruthVerifier
from llm_envs.envs.forum import rules as forum_rules
from llm_envs.envs.plan_path import rules as path_rules
from llm_envs.envs.proposer_solver_judge import rules as psj_rules
from llm_envs.envs.puzzle_rules import (
    PlanFormatError,
    extract_answer,
    extract_program,
    extract_program_output_plan,
)
from llm_envs.envs.reasoner_tool import rules as reasoner_rules
from llm_envs.envs.sudoku import rules as sudoku_rules
from llm_envs.tasks import Problem
from llm_envs.verifiers.code import extract_code, io_tests_block
from llm_envs.verifiers.math import extract_boxed

FAIL = (0.0, 0.0, -1.0)

# ----------------------------------------------------------------------------- CoMAS (Forum)
FORUM_CASES = [
    ("Reasons.\n<score>3</score>", (1.0, 0.0, 0.0)),
    ("<score>1</score>", (0.0, 1.0, 0.0)),
    ("<score> 2 </score>", (0.5, 0.5, 0.0)),
    ("<SCORE>3</SCORE>", (1.0, 0.0, 0.0)),
    ("<Score>1</Score>", (0.0, 1.0, 0.0)),
    ("<score>\n2\n</score>", (0.5, 0.5, 0.0)),
    ("<score>2</score><score>2</score>", (0.5, 0.5, 0.0)),
    ("<score>2 </score> the 1 issue", (0.5, 0.5, 0.0)),
    ("Score: 10 points; <score>2</score>", (0.5, 0.5, 0.0)),
    ("<score>3</score> but actually <score>", (1.0, 0.0, 0.0)),
    # released: the first tag, 1 -> (0, 1, 0)
    ("draft <score>1</score> final <score>3</score>", (1.0, 0.0, 0.0)),
    # released: clamped, 4 -> 3, 0 -> 1, 99 -> 3, "03" -> 3
    ("<score>4</score>", FAIL),
    ("<score>0</score>", FAIL),
    ("<score>99</score>", FAIL),
    ("<score>03</score>", FAIL),
    # released: the fallback (last standalone 1-3 of the text, else the neutral 2)
    ("I give it 3.", FAIL),
    ("The 3 mistakes are fatal.", FAIL),
    ("< score >2</ score >", FAIL),
    ("<score>two</score>", FAIL),
    ("<score>2.5</score>", FAIL),
    ("<score>-1</score>", FAIL),
    ("<score>+2</score>", FAIL),
    ("<score>3/3</score>", FAIL),
    ("<score>\uff13</score>", FAIL),  # a full-width 3
    ("<score>1</", FAIL),
    ("ok <score>3", FAIL),
    ("", FAIL),
    ("   ", FAIL),
    # released: the quoted tag counts (first), 1 -> (0, 1, 0)
    ("```\n<score>1</score>\n```\nMine: <score>3</score>", (1.0, 0.0, 0.0)),
    ("> <score>1</score>\n<score>2</score>", (0.5, 0.5, 0.0)),
]


@pytest.mark.parametrize("text, expected", FORUM_CASES)
def test_forum_scoring_of_the_side_by_side_transcripts(text, expected):
    score = forum_rules.parse_score(text)
    got = (
        forum_rules.solver_reward(score),
        forum_rules.evaluator_reward(score),
        forum_rules.scorer_reward(score),
    )
    assert got == expected


@pytest.mark.parametrize(
    "text, released",
    [
        ("draft <score>1</score> final <score>3</score>", 1),
        ("<score>4</score>", 3),
        ("<score>0</score>", 1),
        ("<score>03</score>", 3),
        ("<score>2.5</score>", 2),
        ("<score>-1</score>", 1),
        ("<score>\uff13</score>", 2),
        ("The 3 mistakes are fatal.", 3),
        ("", 2),
    ],
)
def test_forum_released_score_parsing_option_reads_as_the_release(text, released):
    # score_parsing="released": the values the released fork gives (read by hand from its
    # rule: first <score>N</score> clamped to 1..3, else the last standalone 1-3, else 2).
    assert forum_rules.parse_score_released(text) == released


# ------------------------------------------------------------------- Multi-Agent Evolve
JUDGE_CASES = [
    ("<score>8</score>", 7 / 9),
    ("<SCORE>8</SCORE>", 7 / 9),
    ("<Score>5</Score>", 4 / 9),
    ("<score> 10 </score>", 1.0),
    ("<score>\n9\n</score>", 8 / 9),
    ("<score>1</score>", 0.0),
    ("<score>7.5</score>", 6.5 / 9),
    ("<score>7.</score>", 6 / 9),
    ("<score>+8</score>", 7 / 9),
    ("<score>11</score>", 1.0),
    ("<score>0</score>", 0.0),
    ("<score>\uff18</score>", 7 / 9),  # a full-width 8 is a digit in both
    ("<score>great</score>", 0.5),
    ("<score>0/0</score>", 0.5),
    ("", 0.5),
    ("no score at all", 0.5),
    ("<score>1e1</score>", 0.5),
    ("<score>great</score><score>6</score>", 5 / 9),
    ("<score>7</score> then <score>9</score>", 8 / 9),  # released: the first, 6/9
    ("<score>8/10</score>", 0.5),  # released: 0.8 -> clip(-0.02) = 0
    ("<score>10/10</score>", 0.5),  # released: 1.0 -> 0
    ("<score>rate it 9 out of 10</score>", 0.5),  # released: 9 -> 8/9
    ("<score>-3</score>", 0.0),  # released: 3 -> 2/9
    ("<score>.5</score>", 0.0),  # 0.5 -> clip(-0.5/9) = 0; released: the digit 5 -> 4/9
    ("All 10 checks pass; I give it 9", 0.5),  # released: the last number, 9 -> 8/9
    ("<score></score> 6", 0.5),  # released: the last number, 6 -> 5/9
    ("<score>3/0</score> 7", 0.5),  # released: the last number, 7 -> 6/9
    ("<score>5", 0.5),  # released: the last number, 5 -> 4/9
    ("<score>6</score><score>great</score>", 0.5),  # released: the first number, 6 -> 5/9
    ("```\n<score>10</score>\n```\n<score>3</score>", 2 / 9),  # released: the quoted 10 -> 1.0
]


@pytest.mark.parametrize("text, expected", JUDGE_CASES)
def test_judge_score_of_the_side_by_side_transcripts(text, expected):
    assert psj_rules.parse_judge(text).value == pytest.approx(expected)


@pytest.mark.parametrize(
    "text, question",
    [
        ("<question>What is 2+2?</question>", "What is 2+2?"),
        ("<question>A</question><question>B</question>", "B"),
        ("<question> </question>", None),
        ("<QUESTION>Q</QUESTION>", None),
        ("no tags", None),
        ("<question>Q", None),
        ("<question>\nmulti\nline\n</question>", "multi\nline"),
        ("<question>A <question>B</question>", "A <question>B"),
        ("<question>B</question><question></question>", None),
        ("<question>\u00e9\u2260\u2211</question>", "\u00e9\u2260\u2211"),
    ],
)
def test_proposer_question_of_the_side_by_side_transcripts(text, question):
    # The same in both: the last pair, case-sensitive, an empty last question is none.
    assert psj_rules.last_tag(text, "question")[0] == question


# ------------------------------------------------------------------------------- MAPoRL
@pytest.mark.parametrize(
    "text, boxed",
    [
        ("\\boxed{90}", "90"),
        ("Answer: \\boxed{ 90 }", "90"),
        ("\\boxed{45} no wait \\boxed{90}", "90"),
        ("\\boxed{\\frac{180}{2}}", "\\frac{180}{2}"),  # released: "\frac{180" -> 180, wrong
        ("so the answer is 90", None),  # released: the digits of the text, 90: right
        ("\\boxed{90", None),  # released: no box, the digits of the text, 90: right
        ("18 + 72 = 90", None),  # released: 187290
        ("\\boxed{}", None),
    ],
)
def test_debate_math_answer_is_the_last_box(text, boxed):
    assert extract_boxed(text) == boxed


@pytest.mark.parametrize(
    "text, truth, right",
    [
        ("\\boxed{1,000}", "1000", True),
        ("\\boxed{\\$1,000}", "1000", True),
        ("\\boxed{1000} dollars", "1000", True),
        ("\\boxed{07}", "7", True),
        ("\\boxed{-5}", "-5", True),
        ("\\boxed{1000.}", "1000", True),  # released: int("1000.") fails, wrong
        ("\\boxed{1000.00}", "1000", True),  # released: wrong
        ("\\boxed{10^3}", "1000", True),  # released: 103, wrong
        ("\\boxed{\u22125}", "-5", True),  # a Unicode minus; released: 5, wrong
        ("\\boxed{7 (seven)}", "7", False),  # a product here; released: 7, right
        ("\\boxed{7}\\boxed{}", "7", False),  # the last box is empty (wrong in both)
    ],
)
def test_debate_ground_truth_of_the_side_by_side_numbers(text, truth, right):
    problem = Problem(id="p", prompt="q", answer=truth, split="train")
    assert GroundTruthVerifier().correct(problem, text) is right


ANLI = ("entailment", "neutral", "contradiction")


@pytest.mark.parametrize(
    "text, label",
    [
        ("\\boxed{entailment}", "entailment"),
        ("\\boxed{Entailment.}", "entailment"),
        ("\\boxed{ENTAILMENT}", "entailment"),
        ("\\boxed{'entailment'}", "entailment"),
        ("The answer is entailment", "entailment"),
        ("\\boxed{e}", None),
        ("contradiction, not entailment", "entailment"),  # the last label word, as released
        ("\\boxed{not entailment}", None),  # released: letters contain "entailment": right
        ("\\boxed{entailment or neutral}", None),  # released: "entailment" is checked first
        ("\\boxed{Entailment (premise implies)}", None),  # released: entailment
    ],
)
def test_debate_label_answers(text, label):
    assert debate_rules.extract_label(text, ANLI) == label


# ------------------------------------------------------------------ Stronger-MAS: Reasoner-Tool
@pytest.mark.parametrize(
    "text, answer",
    [
        ("\\boxed{90}", "90"),
        ("\\boxed{45} no: \\boxed{90}", "90"),  # released: {45, 90}, wrong
        ("so the answer is 90", None),  # released: free text, right
        ("Answer: 90", None),  # released: free text, right
        ("\\boxed{}", None),
        ("\\fbox{90}", "90"),  # released: math-verify reads no \fbox: wrong
    ],
)
def test_reasoner_answer_of_the_side_by_side_transcripts(text, answer):
    got = reasoner_rules.reasoner_answer(text)
    assert (got or None) == answer


@pytest.mark.parametrize(
    "stdout, answer",
    [
        ("90\n", "90"),
        ("The answer is 90\n", "90"),
        ("#### 90\n", "90"),
        ("Answer: 90", "90"),
        ("\\boxed{90}\n", "90"),
        ("90\nDone!\n", "Done!"),  # released: 90 (whole-output reading)
        ("[90]\n", "[90]"),  # equal to 90 here (a one-element list); released: no number read
        ("", None),
    ],
)
def test_tool_answer_of_the_side_by_side_transcripts(stdout, answer):
    assert reasoner_rules.tool_answer(stdout) == answer


@pytest.mark.parametrize(
    "text, code",
    [
        ("```python\nprint(90)\n```", "print(90)"),
        ("```\nprint(90)\n```", "print(90)"),
        ("```python\nprint(1)\n```\n```python\nprint(90)\n```", "print(90)"),
        ("text ```python\nprint(90)\n``` then ```text\n90\n```", "print(90)"),
        ("```py\nprint(90)\n```", "print(90)"),  # released: "py\nprint(90)", a NameError
        ("```python\nprint(90)", "print(90)"),  # released: the raw reply, a SyntaxError
        ("```python3\nprint(90)\n```", "print(90)"),  # released: "3\nprint(90)", prints 90 too
        ("print(90)", None),  # no fence: the whole reply runs (as released)
        ("```python print(90)```", "print(90)"),  # as released (was "python print(90)" here)
        ("```print(90)```", "print(90)"),
    ],
)
def test_tool_program_of_the_side_by_side_transcripts(text, code):
    got = extract_code(text)
    assert (got.strip() if got is not None else None) == code
    # The puzzles' tool agent reads its program the same way.
    program = extract_program(text)
    assert (program.strip() if program is not None else None) == code


# ------------------------------------------------------------------- Stronger-MAS: Coder-Tester
@pytest.mark.parametrize(
    "text, code",
    [
        ("```python\nprint(90)\n```", "print(90)"),
        ("```python\nx=1\n```\n```\nprint(2)\n```", "x=1"),
        ("```python print(90)```", "print(90)"),
        ("```python3\nprint(90)\n```", "3\nprint(90)"),  # as released (a harmless first line)
        ("```Python\nprint(90)\n```", None),
        ("```py\nprint(90)\n```", None),
        ("```python\nprint(90)", None),
        ("```\nprint(90)\n```", None),
        ("```python\n\n```", None),
        ("print(90)", None),
    ],
)
def test_coder_code_of_the_side_by_side_transcripts(text, code):
    assert coder_rules.strict_code(text) == code


@pytest.mark.parametrize(
    "text, pairs",
    [
        ("**Test Input:**\n```\n1 2\n```\n**Test Output:**\n```\n3\n```", [("1 2", "3")]),
        ("**Test Input:**\n```text\n1 2\n```\n**Test Output:**\n```text\n3\n```", [("1 2", "3")]),
        ("**Test Input:**\r\n```\r\n1 2\r\n```\r\n**Test Output:**\r\n```\r\n3\r\n```", [("1 2", "3")]),
        ("**Test Input:**\n```\n1\n```\n**Test Input:**\n```\n2\n```\n**Test Output:**\n```\n1\n```", [("1", "1")]),
        ("Input:\n1 2\nOutput:\n3", []),
        ("**test input:**\n```\n1\n```\n**test output:**\n```\n1\n```", []),
    ],
)
def test_tester_cases_of_the_side_by_side_transcripts(text, pairs):
    assert coder_rules.strict_io_tests_text(text) == io_tests_block(pairs)


# ------------------------------------------------------------------------- puzzles
def plan(text: str, answer_format: str = "list"):
    answer = extract_answer(text)
    if answer is None:
        return None
    try:
        return path_rules.parse_moves(answer, answer_format)
    except PlanFormatError:
        return None


@pytest.mark.parametrize(
    "text, moves",
    [
        ('#### ["U", "R", "D"]', ("U", "R", "D")),
        ("#### ['U','R']", ("U", "R")),
        ("#### [U, R]", ("U", "R")),
        ('#### ["D", "X", "R"]', ("D", "X", "R")),  # X: a blocked move, as released
        ("#### []", None),
        ('#### ["U", "R",]', ("U", "R")),  # as released (was a format error here)
        ('#### ["U", , "R"]', ("U", "R")),  # as released (was a format error here)
        ('#### ["U", "", "R"]', ("U", '""', "R")),  # "" is an unknown move, as released
        ('#### ["U" "R"]', ('U" "R',)),  # one unknown move; released: "UR", one unknown move
        ("#### [1, 2]", ("1", "2")),  # two blocked moves; released: no str list, -1
        ('#### [["U"]]', ('["U"]',)),  # one blocked move; released: no str list, -1
        ('####["U"]', ("U",)),  # released: "####" needs a space after it, no plan
        ('#### ["U"]\nDone.', ("U",)),  # released: the answer runs to the end of the text: none
        ('#### ["U"]\n#### ["D"]', ("D",)),  # released: the first (the rest is a comment)
        ('#### ["U"]\n```\n#### ["D"]\n```', ("U",)),  # released: none (the DOTALL capture)
        ('#### [\n"U"]', None),  # the answer is one line; released: a list over lines, U
        ("no answer", None),
    ],
)
def test_plan_answer_line_of_the_side_by_side_transcripts(text, moves):
    assert plan(text) == moves


def test_a_trailing_comma_plan_is_played_and_paid_as_the_same_plan_without_it():
    # The shortest path on the HAND grid earns -0.06 + 6 + 1 + 0.5 = 7.44 (tests/envs/puzzles).
    state = path_rules.from_text("3 4\nS.#.\n..#G\n....")
    moves = plan('#### ["D", "D", "R", "R", "R", "U",]')
    assert moves == ("D", "D", "R", "R", "R", "U")
    outcome = path_rules.apply_moves(state, moves, path_rules.PathRewards())
    assert outcome.reward == pytest.approx(7.44)


GRID = "[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]"
SOLVED = (1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1)


@pytest.mark.parametrize(
    "text, grid",
    [
        ("#### " + GRID, SOLVED),
        ("#### [[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1],]", SOLVED),
        ("#### [['1','2','3','4'],['3','4','1','2'],['2','1','4','3'],['4','3','2','1']]", SOLVED),
        ("#### [[1,2,3,4], [3,4,1,2], [2,1,4,3], [4,3,2,1]]", SOLVED),
        ("####" + GRID, SOLVED),  # released: no plan (a space after ####)
        ("#### " + GRID + "\nDone.", SOLVED),  # released: no plan
        ("#### [[1,2,3,4],[3,4,1,2],[2,1,4,3]]", None),
        ("#### [[1,2,3,5],[3,4,1,2],[2,1,4,3],[4,3,2,1]]", None),
        ("#### [[1.0,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]", None),  # released: int(1.0) = 1
    ],
)
def test_sudoku_answer_line_of_the_side_by_side_transcripts(text, grid):
    answer = extract_answer(text)
    try:
        got = sudoku_rules.parse_grid(answer, 4, "list")
    except PlanFormatError:
        got = None
    assert got == grid


def printed_plan(stdout: str, answer_format: str = "list"):
    text = extract_program_output_plan(stdout)
    if text is None:
        return None
    try:
        return path_rules.parse_moves(text, answer_format)
    except PlanFormatError:
        return None


@pytest.mark.parametrize(
    "stdout, moves",
    [
        ('**Actions List**: ["U", "R"]\n', ("U", "R")),
        ('**Actions List**: ["U"]\nDone\n', ("U",)),
        ('**Actions List**: ["U"]\n**Actions List**: ["D"]\n', ("D",)),
        ("**Actions List**: ['U','R']\n", ("U", "R")),
        ('["U", "R"]\n', ("U", "R")),
        ("[]\n", None),
        ('Actions: ["U", "R"]\n', ("U", "R")),  # as released (was no plan here)
        ('Actions: ["U"]\nDone\n', ("U",)),  # as released (was no plan here)
        ('**Actions List**: ["U", "X"]\n', ("U", "X")),  # released (Plan-Path): no plan, -2
        ('["U"]\n["D"]\n', ("D",)),  # the last line; released: the first list line, U
        ('["U"]\nDone\n', None),  # the last line; released: the list line, U
        ('#### ["U", "R"]\n', ("U", "R")),  # our prompt's marker; released: no plan
        ('**Actions List**: ["U",\n "R"]\n', None),  # one line; released: U R
        ("[1, 2]\n", ("1", "2")),  # two blocked moves; released (Plan-Path): no plan, -2
    ],
)
def test_tool_printed_plan_of_the_side_by_side_transcripts(stdout, moves):
    assert printed_plan(stdout) == moves
