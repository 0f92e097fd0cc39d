"""Reasoner–Tool rules without PettingZoo: answer extraction, reward formulas, prompts.

Rewards (Stronger-MAS, arXiv 2510.11062), each in [0, 1] before mixing:

* team ``r_team`` = 1 if the reasoner's final answer this turn is correct;
* reasoner ``r_local`` = 0.2·format (a non-empty ``\\boxed{}``) + 0.8·correct;
* tool ``r_local`` = 0.1·builds + 0.1·runs + 0.8·correct (the answer its program printed);
* an action's level ``alpha·r_team + r_local``; the action is paid the change of its agent's
  level since that agent's previous action (``turn_rewards="change"``, see
  :func:`llm_envs.envs._common.credit_team_and_local`), or the level itself with the paper's
  ``turn_rewards="paper"``.

With ``reward_mode="outcome"`` shaping is dropped: the level is ``alpha·r_team`` for both agents.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from llm_envs.envs._common import AGENT_MODES, REWARD_MODES  # noqa: F401  (re-exported)
from llm_envs.tasks import Problem
from llm_envs.verifiers.math import extract_boxed


@dataclass(frozen=True)
class ReasonerWeights:
    """Reasoner local reward weights: format, correct."""

    format: float = 0.2
    correct: float = 0.8


@dataclass(frozen=True)
class ToolWeights:
    """Tool local reward weights: builds, runs, correct."""

    builds: float = 0.1
    runs: float = 0.1
    correct: float = 0.8


def reasoner_local_reward(
    formatted: bool, correct: bool, weights: ReasonerWeights = ReasonerWeights()
) -> float:
    """``0.2·format + 0.8·correct`` (with the default weights)."""
    return weights.format * float(formatted) + weights.correct * float(correct)


def tool_local_reward(
    builds: bool, runs: bool, correct: bool, weights: ToolWeights = ToolWeights()
) -> float:
    """``0.1·builds + 0.1·runs + 0.8·correct`` (with the default weights)."""
    return (
        weights.builds * float(builds)
        + weights.runs * float(runs)
        + weights.correct * float(correct)
    )


# ---------------------------------------------------------------------------------------------
# answers

# "####", "Answer:", "**Final answer** =", "The answer is", "The final answer is:" ...
_ANSWER_PREFIX = re.compile(
    r"^(?:#+|\**\s*(?:the\s+)?(?:final\s+)?answer\b\s*\**\s*(?:is\b)?\s*[:=]?\**)\s*",
    re.IGNORECASE,
)
#: Longest printed line taken as an answer.
MAX_TOOL_ANSWER_CHARS = 1000


def reasoner_answer(text: str) -> str | None:
    """The reasoner's final answer: the content of its last ``\\boxed{}`` (None if absent)."""
    return extract_boxed(text)


def tool_answer(stdout: str) -> str | None:
    """The answer a program printed: its last ``\\boxed{}``, else its last non-empty line
    without a ``####`` / ``Answer:`` / ``The (final) answer is`` prefix. ``None`` if it printed
    nothing usable (an answer over :data:`MAX_TOOL_ANSWER_CHARS` included).

    The line is read as a whole (``3*sqrt(2)`` stays 3·√2); the released code ran
    math-verify's free-text extraction over the whole output instead, which reads the last
    number of an expression (``3*sqrt(2)`` as 3) and so pays wrong answers.
    """
    if not stdout:
        return None
    boxed = extract_boxed(stdout)
    if boxed is not None:
        return boxed if len(boxed) <= MAX_TOOL_ANSWER_CHARS else None
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    answer = _ANSWER_PREFIX.sub("", lines[-1]).strip()
    if not answer or len(answer) > MAX_TOOL_ANSWER_CHARS:
        return None
    return answer


# Tracebacks name the sandbox's per-run file ("/sandbox/job-7/main.py"); prompts show a stable
# name, so that the same program always gives the same observation.
_SANDBOX_FILE = re.compile(r'File "[^"\n]*main\.py"')


def stable_traceback(text: str) -> str:
    """``text`` with the sandbox's per-run program path replaced by ``program.py``."""
    return _SANDBOX_FILE.sub('File "program.py"', text)


# ---------------------------------------------------------------------------------------------
# prompts


@dataclass(frozen=True)
class ReasonerEntry:
    text: str
    answer: str | None


@dataclass(frozen=True)
class ToolEntry:
    code: str | None
    output: str
    answer: str | None


def clip_middle(text: str, head: int, tail: int) -> str:
    """The first ``head`` and last ``tail`` characters of ``text`` (the paper shows 500 + 500)."""
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n... [{len(text) - head - tail} characters cut] ...\n{text[-tail:]}"


def _answer_line(answer: str, head: int, tail: int) -> str:
    """An extracted answer as the history shows it: clipped like the text around it, and on the
    line of its label (a box may hold newlines: it could otherwise start lines that read as the
    history's own, a made-up turn or harness line, outside every fence)."""
    return " ".join(clip_middle(answer, head, tail).splitlines())


def _fenced(text: str, lang: str = "") -> str:
    return f"```{lang}\n" + text.replace("```", "`` `").rstrip("\n") + "\n```"


REASONER_INSTRUCTION_MULTI = (
    "You are the reasoning agent in a two-agent team that solves math problems: you reason "
    "step by step, a tool agent writes Python code that computes the answer. Both of you are "
    "rewarded when your final answer is correct.\n"
    "Think step by step, then give your final answer in \\boxed{}, e.g. \\boxed{42}. Only the "
    "last \\boxed{} of your reply counts; put nothing but the final answer inside it."
)
REASONER_INSTRUCTION_SINGLE = (
    "Solve the math problem. Think step by step, then give your final answer in \\boxed{}, "
    "e.g. \\boxed{42}. Only the last \\boxed{} of your reply counts; put nothing but the final "
    "answer inside it."
)
TOOL_INSTRUCTION = (
    "You are the tool agent in a two-agent team that solves math problems: you write Python "
    "code that computes the answer, a reasoning agent solves it step by step. Both of you are "
    "rewarded when the team's final answer is correct, and you are also rewarded when your "
    "program prints the correct answer.\n"
    "Reply with exactly one code block:\n```python\n# compute the answer\nprint(answer)\n```\n"
    "The program runs without input and without internet access (the standard library, plus "
    "any packages installed in the sandbox). The last line it prints is taken as its answer, so "
    "print the final answer last and on its own line (an exact fraction like 7/12 is fine)."
)


def history_section(
    reasoner_history: Sequence[ReasonerEntry],
    tool_history: Sequence[ToolEntry],
    head: int,
    tail: int,
) -> str:
    """Every earlier turn: the reasoning (clipped) and its answer, the code, output and answer."""
    parts = []
    for turn in range(max(len(reasoner_history), len(tool_history))):
        parts.append(f"--- Turn {turn + 1} ---")
        if turn < len(reasoner_history):
            entry = reasoner_history[turn]
            parts.append(
                "Reasoning agent's solution:\n"
                + _fenced(clip_middle(entry.text, head, tail))
            )
            shown = (
                _answer_line(entry.answer, head // 2, tail // 2)
                if entry.answer is not None
                else "(no \\boxed{} answer)"
            )
            parts.append(f"Reasoning agent's answer: {shown}")
        if turn < len(tool_history):
            tool = tool_history[turn]
            code = tool.code if tool.code is not None else "(no code block was found)"
            parts.append(
                "Tool agent's code:\n"
                + _fenced(clip_middle(code, head, tail), "python")
            )
            parts.append(
                "Its output:\n"
                + _fenced(
                    clip_middle(tool.output, head // 2, tail // 2)
                    or "(nothing printed)"
                )
            )
            parts.append(
                "Tool agent's answer: "
                + (_answer_line(tool.answer, head // 2, tail // 2) if tool.answer is not None else "(none)")
            )
    return "\n".join(parts)


def reasoner_prompt(problem: Problem, history: str | None) -> str:
    if not history:
        return f"Problem:\n{problem.prompt.strip()}"
    return (
        f"Problem:\n{problem.prompt.strip()}\n\nYour team's earlier attempts:\n{history}\n\n"
        "The two answers did not agree. Check both approaches, select or refine the best "
        "solution, and give your final answer in \\boxed{}."
    )


def tool_prompt(problem: Problem, history: str | None) -> str:
    if not history:
        return f"Problem:\n{problem.prompt.strip()}\n\nWrite a Python program that prints the answer."
    return (
        f"Problem:\n{problem.prompt.strip()}\n\nYour team's earlier attempts:\n{history}\n\n"
        "The two answers did not agree. Check both approaches, fix any mistake, and write a "
        "program that prints the correct answer."
    )


# ---------------------------------------------------------------------------------------------
# reference replies


def reference_reasoner_reply(problem: Problem) -> str:
    """A worked solution (when the source has one) ending with the true answer in a box."""
    assert problem.answer is not None
    worked = (problem.solution or "").strip()
    if worked and extract_boxed(worked) is not None:
        return worked
    lead = worked + "\n\n" if worked else ""
    return f"{lead}The final answer is \\boxed{{{problem.answer}}}."


def reference_tool_reply(problem: Problem) -> str:
    """The source's program when it has one (``metadata["program"]``), else one that prints the
    true answer."""
    assert problem.answer is not None
    program = (
        problem.metadata.get("program") if isinstance(problem.metadata, dict) else None
    )
    if not program:
        program = f"print({problem.answer!r})\n"
    return f"```python\n{program.rstrip()}\n```"
