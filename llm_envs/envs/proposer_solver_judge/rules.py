"""Pure rules of Multi-Agent Evolve's proposer–solver–judge loop: parsers, rewards, prompts.

Source: Multi-Agent Evolve (arXiv 2510.23595; docs/papers.md).

* Tags: proposer ``<question>…</question>``, solver ``<answer>…</answer>``, judge reasons and
  then ``<score>X</score>`` with X in 1..10, normalised ``V = clip((X − 1)/9, 0, 1)``.
  The last pair counts (the released code's choice); tag names are case-sensitive, as in the
  released code (``case_sensitive=False`` accepts ``<QUESTION>``); a question that is empty
  after stripping is no question (the released code pays it 0).
* The judge's score is read from the last ``<score>`` pair the judge wrote itself (not in a
  fenced block or a ``>`` quote line), and agent text shown to the judge has its score tags
  rewritten (:func:`shown_to_judge`): no agent can write the judge's score.
* Format reward of a completion: 1 for exactly one tag pair, 0.5 for several, 0 for none,
  counted in the completion only (the released code also counted the prompt's template tags).
* Proposer: ``R_P = λq·R_quality + λd·R_difficulty + λf·R_format`` with λ = 1/3 each,
  ``R_quality`` the judge's V for the question and ``R_difficulty = 1 − mean_i V_J(a_i, q)``
  over the ``N_sample`` solver answers. Released-code variant: the difficulty term is dropped
  when ``R_quality`` is below the quality threshold (0.7).
* Solver: ``R_S = 0.5·V_J(a, q) + 0.5·R_format``. Judge: ``R_J = R_format``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# The tag helpers of the forum are the same game logic (linear-time, case-insensitive).
from llm_envs.envs.forum.rules import (
    clip_text,
    neutralise_tags,
    own_tag_contents,
    shown_to_reader,
    tag_contents,
    wrong_answer,
)

__all__ = [
    "clip_text",
    "neutralise_tags",
    "shown_to_reader",
    "tag_contents",
    "wrong_answer",
]

SCORE_MIN, SCORE_MAX = 1.0, 10.0
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")


def format_reward(pairs: int) -> float:
    """1.0 for exactly one tag pair, 0.5 for more than one, 0.0 for none."""
    if pairs == 1:
        return 1.0
    return 0.5 if pairs > 1 else 0.0


def last_tag(text: str, tag: str, case_sensitive: bool = True) -> tuple[str | None, int]:
    """(content of the last ``<tag>`` pair stripped, number of pairs) of a completion.

    The content is ``None`` without a pair, or when the last pair is empty after stripping
    (an empty question is no question).
    """
    pairs = tag_contents(text, tag, case_sensitive=case_sensitive)
    content = pairs[-1].strip() if pairs else ""
    return (content or None), len(pairs)


def shown_to_judge(text: str) -> str:
    """An agent's text as the judge is shown it (:func:`shown_to_reader`): its ``<score>`` tags
    rewritten as ``[score]`` and its fences and quote marks broken up, so quoting it can neither
    hand the judge a score nor make the judge's own score look quoted."""
    return shown_to_reader(text, ("score",))


def _plain_number(content: str) -> float | None:
    content = content.strip()
    if len(content) <= 32 and _NUMBER.fullmatch(content):
        return float(content)
    return None


def judge_scores(text: str, case_sensitive: bool = False) -> list[float]:
    """Every ``<score>X</score>`` pair the judge wrote itself (outside quoted text) whose X is
    a plain number (``8``, ``7.5``, ``-3``), in order. ``<score>great</score>``,
    ``<score>8/10</score>`` and ``<score>9 out of 10</score>`` are not scores."""
    values = (_plain_number(c) for c in own_tag_contents(text, "score", case_sensitive))
    return [v for v in values if v is not None]


def normalise_score(raw: float) -> float:
    """V = clip((X − 1)/9, 0, 1)."""
    return min(1.0, max(0.0, (raw - SCORE_MIN) / (SCORE_MAX - SCORE_MIN)))


@dataclass(frozen=True)
class JudgeOutput:
    """A judge completion, parsed: the score read (normalised), and the format reward."""

    raw: float | None
    value: float
    format: float

    @property
    def parsed(self) -> bool:
        return self.raw is not None


def parse_judge(
    text: str, unparsed_value: float = 0.5, *, case_sensitive_format: bool = True
) -> JudgeOutput:
    """Parse a judge completion: the score is the content of the *last* ``<score>`` pair the
    judge wrote itself (any case; not inside a fenced block or a ``>`` quote line), when that
    content is a plain number; else the value is ``unparsed_value`` (the released code's
    neutral 0.5) and the format 0. The format counts every pair the judge wrote with the tag
    spelled ``<score>``, whatever it holds (the paper's "exactly one tag pair", counted as the
    released code counts tags; with ``case_sensitive_format=False`` any case): a draft
    ``<score>TBD</score>`` before the score makes two pairs (0.5), as two answer pairs do for
    the solver.
    """
    own = own_tag_contents(text, "score")
    raw = _plain_number(own[-1]) if own else None
    if raw is None:
        return JudgeOutput(None, float(unparsed_value), 0.0)
    pairs = len(own_tag_contents(text, "score", case_sensitive_format))
    return JudgeOutput(raw, normalise_score(raw), format_reward(pairs))


_RELEASED_FRACTION = re.compile(r"\b(\d+)/(\d+)\b")
_RELEASED_FLOAT = re.compile(r"\b(\d+\.\d+)\b")
_RELEASED_INTEGER = re.compile(r"\b(\d+)\b")
_RELEASED_ANY_NUMBER = re.compile(r"\b\d+/\d+\b|\b\d+\.\d+\b|\b\d+\b")


def _released_number(token: str) -> float | None:
    if "/" in token:
        numerator, denominator = token.split("/")
        return int(numerator) / int(denominator) if int(denominator) != 0 else None
    return float(token)


def released_judge_scores(text: str) -> list[float]:
    """The released code's reading (``extract_score_from_tags``): for every ``<score>`` pair
    (any case) a fraction ``a/b`` (as a/b), else the first decimal, else the first integer of
    the content (signs ignored); without any, the last number anywhere in the text."""
    scores: list[float] = []
    for content in tag_contents(text, "score"):
        content = content.strip()
        fraction = _RELEASED_FRACTION.search(content)
        if fraction:
            if int(fraction.group(2)) != 0:
                scores.append(int(fraction.group(1)) / int(fraction.group(2)))
            continue
        number = _RELEASED_FLOAT.search(content) or _RELEASED_INTEGER.search(content)
        if number:
            scores.append(float(number.group(1)))
    if not scores:
        numbers = _RELEASED_ANY_NUMBER.findall(text)
        if numbers:
            value = _released_number(numbers[-1])
            if value is not None:
                scores.append(value)
    return scores


def parse_judge_released(
    text: str, unparsed_value: float = 0.5, *, case_sensitive_format: bool = True
) -> JudgeOutput:
    """The released code's reading: the *first* of :func:`released_judge_scores`, normalised
    as ``clip((X − 1)/9, 0, 1)``; ``unparsed_value`` when there is none. The format is
    :func:`parse_judge`'s (a format reward is ours either way)."""
    scores = released_judge_scores(text)
    fmt = parse_judge(text, case_sensitive_format=case_sensitive_format).format
    if not scores:
        return JudgeOutput(None, float(unparsed_value), fmt)
    return JudgeOutput(scores[0], normalise_score(scores[0]), fmt)


@dataclass(frozen=True)
class ProposerWeights:
    quality: float = 1 / 3
    difficulty: float = 1 / 3
    format: float = 1 / 3


def difficulty(solver_values: Sequence[float]) -> float:
    """R_difficulty = 1 − mean of the judge's values of the solver's answers."""
    if not solver_values:
        raise ValueError("difficulty needs at least one judged answer")
    return 1.0 - sum(solver_values) / len(solver_values)


def proposer_reward(
    quality: float,
    solver_values: Sequence[float],
    format_value: float,
    *,
    weights: ProposerWeights = ProposerWeights(),
    threshold: float = 0.7,
    drop_difficulty_below_threshold: bool = False,
) -> dict[str, float]:
    """The proposer's reward components ``{"format", "quality", "difficulty"}``.

    With ``drop_difficulty_below_threshold`` (released code) a question whose quality is below
    ``threshold`` earns no difficulty term.
    """
    keep_difficulty = not (drop_difficulty_below_threshold and quality < threshold)
    return {
        "format": weights.format * format_value,
        "quality": weights.quality * quality,
        "difficulty": weights.difficulty * difficulty(solver_values) if keep_difficulty else 0.0,
    }


def solver_reward(
    judge_value: float, format_value: float, judge_weight: float = 0.5, format_weight: float = 0.5
) -> float:
    """R_S = 0.5·V_J(a, q) + 0.5·R_format."""
    return judge_weight * judge_value + format_weight * format_value


def judge_reward(format_value: float) -> float:
    """R_J = R_format."""
    return format_value


# ---------------------------------------------------------------------------------------------
# Prompt text (gist of MAE's default templates)

PROPOSER_INSTRUCTION = (
    "You are the PROPOSER. You create challenging, original tasks that test reasoning. A task "
    "must be self-contained, non-trivial, deterministic (one correct answer) and must not "
    "depend on culture or real-time information."
)
SOLVER_INSTRUCTION = (
    "You are the SOLVER. Generate a high-quality response to the question: think step by step, "
    "then put your final response inside <answer></answer> tags."
)
JUDGE_INSTRUCTION = (
    "You are the JUDGE. You evaluate strictly and fairly. Analyse first, then give your score "
    "as an integer from 1 to 10 inside <score></score> tags, exactly once, at the end."
)
IDLE_INSTRUCTION = "You take part in a proposer-solver-judge game. Another role is acting now."


def proposer_prompt(reference: str | None) -> str:
    if reference is None:
        head = (
            "Create a challenging and original task. Write a new question that a strong "
            "student can solve with careful reasoning."
        )
    else:
        head = (
            "Create a challenging and modified version of the reference task below: apply "
            "controlled changes that make it harder while keeping it well-defined and solvable."
            f"\n\nReference task:\n{reference}"
        )
    return (
        f"{head}\n\nMAKE SURE THAT EVERY GENERATED QUESTION AND ONLY THE GENERATED QUESTION IS "
        "INSIDE THE <question></question> TAGS. Output exactly one question."
    )


def solver_prompt(question: str) -> str:
    return (
        f"Question:\n{question}\n\n"
        "Think step by step, then put your final response inside <answer></answer> tags "
        "(for a math question, put the final result in \\boxed{} inside the answer tags)."
    )


def judge_question_prompt(question: str) -> str:
    question = shown_to_judge(question)
    return (
        "Rate the quality of the following question.\n\n"
        f"Question:\n{question}\n\n"
        "Rubric: unsolvable, contradictory, violating common sense, unsafe, not a question, or "
        "too open-ended -> 1 to 3; ambiguous or missing constraints -> 4 to 7; clear, "
        "feasible, self-contained and concise -> 8 to 10.\n"
        "Analyse the question, then end with <score>X</score>, X an integer from 1 to 10."
    )


def judge_answer_prompt(question: str, response: str) -> str:
    question, response = shown_to_judge(question), shown_to_judge(response)
    return (
        "Rate the following answer to the question. Be STRICT.\n\n"
        f"Question:\n{question}\n\nAnswer:\n{response}\n\n"
        "Rubric: any factual, arithmetic or logical error, heavy repetition or hallucination "
        "-> 1 to 3; missing steps or a partial answer -> 4 to 7; only a flawless, concise answer "
        "that follows the instructions -> 8 to 10.\n"
        "Analyse the answer, then end with <score>X</score>, X an integer from 1 to 10."
    )
