"""Coder–Tester rules without PettingZoo: reward formulas, feedback, prompts, reference replies.

Rewards (Stronger-MAS, arXiv 2510.11062), each in [0, 1] before mixing:

* team ``r_team`` = golden pass rate of the coder's code this turn;
* coder ``r_local`` = 0.1·builds + 0.1·runs on the first golden tests + 0.8·golden pass rate;
* tester ``r_local``, by default (:func:`tester_catch_reward`, a departure from the paper):
  0.2·valid + 0.8·golden pass rate·catch rate, where the catch rate is the fraction of wrong
  programs (mutants of the golden solution, the coder's failing attempts) that at least one of
  the tester's golden-passing tests rejects; with ``tester_reward="paper"``
  (:func:`tester_local_reward`): 0.2·valid + 0.8·pass rate of the **golden solution** on the
  tester's tests;
* an action's level ``alpha·r_team + r_local`` (``alpha`` = 1 in the paper); the action is paid
  the change of its agent's level since that agent's previous action (``turn_rewards="change"``,
  see :func:`llm_envs.envs._common.credit_team_and_local`), or the level itself with the
  paper's ``turn_rewards="paper"``.

With ``reward_mode="outcome"`` shaping is dropped: the level is ``alpha·1[the coder's code
passes every golden test]`` for both agents.

Sandbox runs happen in :mod:`llm_envs.envs.coder_tester.env`; everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from llm_envs.core.writing import fenced
from llm_envs.envs._common import AGENT_MODES, REWARD_MODES  # noqa: F401  (re-exported)
from llm_envs.tasks import Problem
from llm_envs.verifiers.code import function_tests_block, io_tests_block

#: ``tester_reward=``: paid for tests that catch wrong code (default), or the paper's reward.
TESTER_REWARDS = ("catch", "paper")
#: ``catch_runs=``: the catch reward's wrong programs graded by value in one run where every
#: test is a call on literals and a check of the value, else one sandbox run each (default);
#: one sandbox run each always; or all of them with the golden solution in one run (needs
#: ``allow_reward_holes``).
CATCH_RUNS = ("by_value", "per_program", "one_run")
#: ``reply_parsing=``: the released code's reply formats (default), or our lenient reading.
REPLY_PARSINGS = ("strict", "lenient")


@dataclass(frozen=True)
class CoderWeights:
    """Coder local reward weights: builds, runs on the first tests, golden pass rate."""

    builds: float = 0.1
    runs: float = 0.1
    golden: float = 0.8


@dataclass(frozen=True)
class TesterWeights:
    """Tester local reward weights: tests valid, golden solution's pass rate on them."""

    valid: float = 0.2
    golden: float = 0.8


def coder_local_reward(
    builds: bool,
    runs: bool,
    golden_pass_rate: float,
    weights: CoderWeights = CoderWeights(),
) -> float:
    """``0.1·builds + 0.1·runs + 0.8·golden pass rate`` (with the default weights)."""
    return (
        weights.builds * float(builds) + weights.runs * float(runs) + weights.golden * float(golden_pass_rate)
    )


def tester_local_reward(
    valid: bool,
    golden_solution_pass_rate: float,
    weights: TesterWeights = TesterWeights(),
) -> float:
    """The paper's tester reward (``tester_reward="paper"``): ``0.2·valid + 0.8·pass rate of the
    golden solution on the generated tests``. Any test the golden passes earns in full, a
    vacuous one too: see :func:`tester_catch_reward` for the default."""
    return weights.valid * float(valid) + weights.golden * float(golden_solution_pass_rate)


def catch_rate(caught: int, wrong_programs: int) -> float:
    """Fraction of the wrong programs that the tester's tests caught; 0.0 when there is no wrong
    program to catch (the grader cannot tell a useful test from a vacuous one then, and what it
    cannot check it does not pay)."""
    if wrong_programs <= 0:
        return 0.0
    return min(max(caught, 0), wrong_programs) / wrong_programs


def tester_catch_reward(
    valid: bool,
    golden_solution_pass_rate: float,
    caught: int,
    wrong_programs: int,
    weights: TesterWeights = TesterWeights(),
) -> float:
    """The default tester reward: ``0.2·valid + 0.8·golden pass rate·catch rate``.

    * golden pass rate: the fraction of the tester's tests that the golden solution passes (a
      test the golden fails is wrong, and lowers the reward);
    * catch rate (:func:`catch_rate`): of the episode's wrong programs — up to ``max_mutants``
      mutants of the golden solution that fail a golden test, and the coder's attempts that
      failed one — the fraction rejected by at least one of the tester's tests **that the golden
      passes**, by an assertion on a value (a wrong program runs guarded, so it never crashes
      or changes type where the golden does not; see :mod:`llm_envs.envs.coder_tester.mutants`).

    So tests that catch nothing (``assert True``, ``assert callable(f)``, ``r == r``, type
    checks) earn 0.2, exactly what a test the golden fails earns; the golden tests themselves
    catch every wrong program by construction and earn 1.0. Replaces the paper's
    :func:`tester_local_reward`, which paid 1.0 for any test the golden passes
    (``tester_reward="paper"`` restores it).
    """
    return weights.valid * float(valid) + weights.golden * float(golden_solution_pass_rate) * catch_rate(
        caught, wrong_programs
    )


def mixed_reward(team: float, local: float, alpha: float) -> float:
    """``alpha·team + local`` (Stronger-MAS reward mixing)."""
    return alpha * team + local


# ---------------------------------------------------------------------------------------------
# reply parsing (reply_parsing="strict": the released PettingLLMs code's formats)

_PYTHON_BLOCK = re.compile(r"```python(.*?)```", re.DOTALL)
_TEST_BLOCK = r"\*\*Test {label}:\*\*\s*```(?:[A-Za-z0-9_+\-]*\n)?(.*?)```"
_TEST_INPUT_BLOCK = re.compile(_TEST_BLOCK.format(label="Input"), re.DOTALL)
_TEST_OUTPUT_BLOCK = re.compile(_TEST_BLOCK.format(label="Output"), re.DOTALL)


def strict_code(text: str) -> str | None:
    """The coder's program as the released code reads it: the last **closed** block opened by
    ```` ```python ```` (what follows the tag on its line is part of the code), stripped.
    ``None`` when there is none or it is empty: an untagged block, ```` ```py ```` or a block
    left open at the end is not code here (``reply_parsing="lenient"`` reads them)."""
    if not isinstance(text, str):
        return None
    blocks = _PYTHON_BLOCK.findall(text)
    code = blocks[-1].strip() if blocks else ""
    return code or None


def strict_io_tests_text(text: str) -> str:
    """A tester's stdin/stdout reply reduced to the tests the released code reads: the closed
    block after each ``**Test Input:**`` and after each ``**Test Output:**`` (an optional
    language tag on the fence's line is dropped), paired in order, the extra ones of the longer
    list dropped. Returned in the canonical format of
    :func:`llm_envs.verifiers.code.io_tests_block`; ``""`` when there is no pair, so plain
    ``Input:`` / ``Output:`` labels give no test."""
    if not isinstance(text, str):
        return ""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    inputs = [block.strip() for block in _TEST_INPUT_BLOCK.findall(text)]
    outputs = [block.strip() for block in _TEST_OUTPUT_BLOCK.findall(text)]
    return io_tests_block(list(zip(inputs, outputs)))


# ---------------------------------------------------------------------------------------------
# feedback


@dataclass(frozen=True)
class Mismatch:
    """A tester's test that the coder's code failed, for the next turn's prompts.

    Attributes:
        test: The test as written (the assertion, or the stdin for I/O problems).
        expected: The tester's expected output (I/O problems), else ``None``.
        actual: What the code printed (I/O problems), else ``None``.
        error: Why it failed (``wrong answer``, an exception, ``timed out``...).
    """

    test: str
    expected: str | None
    actual: str | None
    error: str | None


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    head = max(1, limit * 2 // 3)
    tail = max(1, limit - head)
    return f"{text[:head]}\n... [{len(text) - head - tail} characters cut] ...\n{text[-tail:]}"


def format_mismatches(
    mismatches: Sequence[Mismatch],
    *,
    passed: int,
    total: int,
    limit: int,
    field_chars: int = 600,
) -> str:
    """The mismatch section of a later-turn prompt."""
    if total == 0:
        return "The tester wrote no valid tests, so the code was not checked against any."
    lines = [f"The code passed {passed} of the tester's {total} tests."]
    for number, mismatch in enumerate(mismatches[:limit], start=1):
        lines.append(f"\nFailed test {number}:")
        if mismatch.expected is None:
            lines.append(fenced(clip(mismatch.test, field_chars * 2)))
            lines.append(f"Result: {clip(mismatch.error or 'failed', field_chars)}")
        else:
            lines.append("Input:")
            lines.append(fenced(clip(mismatch.test, field_chars)))
            lines.append("Expected output (from the tester):")
            lines.append(fenced(clip(mismatch.expected, field_chars)))
            if mismatch.error == "wrong answer":
                lines.append("Actual output (from the code):")
                lines.append(fenced(clip(mismatch.actual or "", field_chars)))
            else:
                lines.append(f"The code failed: {clip(mismatch.error or 'failed', field_chars)}")
                if mismatch.actual:
                    lines.append("Output before it failed:")
                    lines.append(fenced(clip(mismatch.actual, field_chars)))
    if len(mismatches) > limit:
        lines.append(f"\n({len(mismatches) - limit} more failed tests not shown.)")
    return "\n".join(lines)


_FENCE = "```"


# ---------------------------------------------------------------------------------------------
# prompts


def coder_instruction(style: str, entry_point: str | None, multi_agent: bool, call: str | None = None) -> str:
    """The coder's role and reply format; ``call`` is how the tests call the code when it is not
    ``entry_point`` itself (``Solution().twoSum``: a method of the class ``entry_point``)."""
    team = (
        "You are the coder in a two-agent team: you write the solution, a tester writes unit "
        "tests for it. Both of you are rewarded when your code passes the hidden reference tests.\n"
        if multi_agent
        else "You are an expert Python programmer. Your code is judged by hidden reference tests.\n"
    )
    if style == "function":
        target = (
            f"the function `{entry_point}` with the signature given in the problem"
            if call is None or call == entry_point
            else f"the class `{entry_point}` of the starter code given in the problem (the tests "
            f"call `{call}(...)`)"
        )
        task = (
            f"Write a complete Python solution that defines {target}. Include the imports and "
            "helper functions it needs. Do not read input, do not print, and do not write tests "
            "or example calls."
        )
    else:
        task = (
            "Write a complete Python 3 program that reads the input from standard input (input() "
            "or sys.stdin) and prints the answer to standard output, exactly in the format the "
            "problem asks for. Print nothing else (no prompts, no debugging output)."
        )
    return (
        team + task + "\n\nReply format: optional brief reasoning, then exactly one code block:\n"
        "**Code:**\n```python\n# your complete solution\n```\n"
        "Only the last ```python block of your reply is used."
    )


def tester_instruction(style: str, entry_point: str | None, max_tests: int) -> str:
    """The tester's role and reply format; ``entry_point`` is what the tests call (for a
    LeetCode-style class, ``Solution().method``: :attr:`Problem.call`)."""
    head = (
        "You are the tester in a two-agent team: a coder writes the solution, you write unit "
        "tests that a correct solution passes and a wrong solution fails. You are rewarded when "
        "the reference solution passes your tests, so every expected value must be right: work "
        "it out carefully from the problem statement.\n"
    )
    if style == "function":
        fmt = (
            f"Write your tests as Python assert statements that call `{entry_point}` directly, one "
            f"per line, in one code block (at most {max_tests} tests; each assert is one test):\n"
            "**Tests:**\n```python\n"
            f"assert {entry_point}(...) == ...\n"
            f"assert {entry_point}(...) == ...\n```\n"
            "Do not define the function under test and do not write a solution."
        )
    else:
        fmt = (
            f"Write each test as an input block followed by its expected output block (at most "
            f"{max_tests} tests):\n"
            "**Test Input:**\n```\n<the exact text given on standard input>\n```\n"
            "**Test Output:**\n```\n<the exact expected standard output>\n```"
        )
    return head + fmt


def problem_section(problem: Problem) -> str:
    """The problem as prompts show it: a function-style prompt is code (HumanEval's signature and
    docstring) shown in a ```python block, unless it is text with its own code blocks (the
    statement and starter code of APPS / LiveCodeBench call-based problems)."""
    if problem.style == "function":
        call = problem.call
        what = (
            f"the function `{problem.entry_point}`"
            if call == problem.entry_point
            else f"the method `{str(call).rpartition('.')[2]}` of the class `{problem.entry_point}`"
        )
        if _FENCE in problem.prompt:
            return f"Problem (complete {what}):\n{problem.prompt.rstrip()}"
        return f"Problem (complete {what}):\n```python\n{problem.prompt.rstrip()}\n```"
    return f"Problem:\n{problem.prompt.rstrip()}"


def coder_prompt(problem: Problem, previous_code: str | None, feedback: str | None, shown_chars: int) -> str:
    parts = [problem_section(problem)]
    if previous_code is None and feedback is None:
        parts.append("Write your solution.")
        return "\n\n".join(parts)
    parts.append("Your previous solution:\n" + _code_or_none(previous_code, shown_chars))
    if feedback:
        parts.append("Result on the tester's tests:\n" + feedback)
    parts.append(
        "For each failed test decide whether your code or the test is wrong (the tester can make "
        "mistakes too). Then write your improved, complete solution."
    )
    return "\n\n".join(parts)


def tester_prompt(
    problem: Problem,
    previous_tests: str | None,
    coder_code: str | None,
    feedback: str | None,
    shown_chars: int,
) -> str:
    parts = [problem_section(problem)]
    if previous_tests is None and feedback is None:
        parts.append("Write your tests.")
        return "\n\n".join(parts)
    parts.append(
        "Your previous tests:\n"
        + (fenced(clip(previous_tests, shown_chars)) if previous_tests else "(none)")
    )
    parts.append("The coder's code:\n" + _code_or_none(coder_code, shown_chars))
    if feedback:
        parts.append("Result of the code on your tests:\n" + feedback)
    parts.append(
        "For each failed test decide whether the code or your test is wrong. Then write your "
        "corrected, complete set of tests (they replace the previous ones)."
    )
    return "\n\n".join(parts)


def _code_or_none(code: str | None, shown_chars: int) -> str:
    if code is None:
        return "(no code block was found in that reply)"
    return fenced(clip(code, shown_chars), "python")


# ---------------------------------------------------------------------------------------------
# reference and random replies


def reference_coder_reply(problem: Problem) -> str:
    """The golden solution as a coder reply (a stub comment when the dataset has none)."""
    if problem.solution is None:
        return "**Code:**\n```python\n# this dataset ships no golden solution\n```"
    return f"**Code:**\n```python\n{problem.solution.rstrip()}\n```"


def reference_tester_reply(problem: Problem, max_tests: int) -> str:
    """The first ``max_tests`` golden tests in the tester format."""
    tests = list(problem.tests)[:max_tests]
    if problem.style == "function":
        return "**Tests:**\n" + function_tests_block(tests)
    return io_tests_block(tests)
