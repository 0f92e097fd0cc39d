"""Pure rules of the CoMAS forum discussion: schedules, parsers, rewards and prompt text.

Nothing here knows about PettingZoo; :mod:`llm_envs.envs.forum.env` sequences the agents.
Source: CoMAS (arXiv 2510.08529; docs/papers.md). Per problem there are ``m`` rounds; a
round is one *solution* by an agent drawn uniformly from the pool, then ``n`` *evaluations*
(each by a uniformly drawn agent), each followed by a *scoring* of the (solution, evaluation)
pair by an agent drawn uniformly among those who wrote neither (``scorers="others"``; the
paper's uniform draw over the pool is ``scorers="any"``). The scorer answers an integer 1..3 inside ``<score>`` tags:

=====  ==========================================================================
score  meaning
=====  ==========================================================================
3      the solution is completely correct; no mistake the evaluation mentions is effective
2      the mentioned mistakes are minor and do not affect the overall correctness
1      some mentioned mistakes are fatal and lead to an incorrect answer
=====  ==========================================================================

Rewards with τ̂ the parsed score (paper Eq. 7-8)::

    solver     r(s)   = (τ̂ − 1) / 2          ∈ {0, 0.5, 1}
    evaluator  r(e)   = (3 − τ̂) / 2  = 1 − r(s)
    scorer     r(τ)   = 0 if τ̂ was parsed, −1 otherwise   (then solver and evaluator get 0)

Parsing is strict (no fallback score), so the −1 penalty is reachable.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

SCORE_VALUES = (1, 2, 3)

StepKind = Literal["solve", "evaluate", "score"]


# ---------------------------------------------------------------------------------------------
# Tags


def _tag_pairs(text: str, tag: str, case_sensitive: bool = False) -> list[tuple[int, int, str]]:
    """(start of the opening tag, end of the closing tag, content) of every complete
    ``<tag>...</tag>`` pair of ``text``, in order (see :func:`tag_contents`)."""
    # ASCII case only: Unicode case-insensitive matching would read "<ſcore>" (long s) or
    # "<\u212a...>" (Kelvin sign) as the tag, spellings no rewrite of tag names
    # (:func:`neutralise_tags`) can be trusted to cover.
    flags = re.ASCII if case_sensitive else re.IGNORECASE | re.ASCII
    opening = re.compile(rf"<{re.escape(tag)}>", flags)
    closing = re.compile(rf"</{re.escape(tag)}>", flags)
    pairs: list[tuple[int, int, str]] = []
    position = 0
    while True:
        start = opening.search(text, position)
        if start is None:
            return pairs
        end = closing.search(text, start.end())
        if end is None:
            return pairs
        pairs.append((start.start(), end.end(), text[start.end() : end.start()]))
        position = end.end()


def tag_contents(text: str, tag: str, case_sensitive: bool = False) -> list[str]:
    """The contents of the complete ``<tag>...</tag>`` pairs of ``text``, in order.

    Pairs are matched left to right without nesting: an opening tag pairs with the first
    closing tag after it. Tag names match case-insensitively unless ``case_sensitive``. Runs in
    linear time on any input (a plain non-greedy regex is quadratic on text full of unclosed
    opening tags).
    """
    return [content for _, _, content in _tag_pairs(text, tag, case_sensitive)]


_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
_QUOTE_LINE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of ``text`` that are quotations rather than the writer's own
    words: fenced blocks (```` ``` ```` or ``~~~`` lines, an unclosed fence runs to the end)
    and Markdown block-quote lines (starting with ``>``)."""
    spans: list[tuple[int, int]] = []
    fences = list(_FENCE.finditer(text))
    for k in range(0, len(fences), 2):
        start = fences[k].start()
        end = fences[k + 1].end() if k + 1 < len(fences) else len(text)
        spans.append((start, end))
    spans.extend((m.start(), m.end()) for m in _QUOTE_LINE.finditer(text))
    return spans


def own_tag_contents(text: str, tag: str, case_sensitive: bool = False) -> list[str]:
    """:func:`tag_contents` without the pairs that start inside quoted text
    (:func:`quoted_spans`): what a judge wrote itself, not what it quoted from another agent."""
    # The quoted spans merged into disjoint sorted ones, each pair's start looked up by
    # bisection: checking every pair against every span was quadratic (a 420 kB reply of
    # fenced tags took 12 s).
    starts: list[int] = []
    ends: list[int] = []
    for q_start, q_end in sorted(quoted_spans(text)):
        if ends and q_start <= ends[-1]:
            ends[-1] = max(ends[-1], q_end)
        else:
            starts.append(q_start)
            ends.append(q_end)
    own = []
    for start, _, content in _tag_pairs(text, tag, case_sensitive):
        k = bisect.bisect_right(starts, start) - 1
        if k < 0 or start >= ends[k]:
            own.append(content)
    return own


_ANY_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z_]+)\s*>")


def neutralise_tags(text: str, tags: Sequence[str]) -> str:
    """``text`` with every ``<tag>`` / ``</tag>`` of ``tags`` (any case, spaces inside the
    brackets allowed) rewritten as ``[tag]`` / ``[/tag]``.

    Applied to an agent's text before another agent (a judge, a scorer, a verifier) is shown
    it: whatever that text holds, and wherever the reader quotes it, it can no longer be parsed
    as the reader's score.
    """
    names = {tag.casefold() for tag in tags}

    def rewrite(match: re.Match[str]) -> str:
        if match.group(2).casefold() not in names:
            return match.group(0)
        return f"[{match.group(1)}{match.group(2)}]"

    return _ANY_TAG.sub(rewrite, text)


_FENCE_MARK = re.compile(r"`{3,}|~{3,}")
_QUOTE_MARK = re.compile(r"^([ \t]*)>", re.MULTILINE)


def shown_to_reader(text: str, tags: Sequence[str]) -> str:
    """An agent's text as an agent that rates it (a judge, a scorer, a verifier) is shown it:
    its tags of ``tags`` rewritten (:func:`neutralise_tags`), and its fence marks
    (runs of three or more ````` ` ````` or ``~``) and line-opening ``>`` broken up (into pairs
    with a space between: ```` `` ` ````; a zero-width space before the ``>``).

    Whatever the text holds, and wherever the reader quotes it, it can then neither be read as
    the reader's score, nor open a quotation (:func:`quoted_spans`) that would make the score
    the reader writes after the quote look quoted (and so lost: the reading falls back to the
    unparsed value, which may pay a wrong answer more than the reader's rating would).
    """
    text = neutralise_tags(text, tags)
    text = _FENCE_MARK.sub(lambda run: " ".join(run.group()[i : i + 2] for i in range(0, len(run.group()), 2)), text)
    return _QUOTE_MARK.sub("\\1\u200b>", text)


def parse_score(text: str) -> int | None:
    """The scorer's score τ̂ ∈ {1, 2, 3}, or ``None`` when the output has no valid score.

    Strict: the *last* complete ``<score>…</score>`` pair the scorer wrote itself (not inside a
    fenced block or a ``>`` quote line: :func:`own_tag_contents`) must contain exactly one of
    ``1``, ``2``, ``3`` (surrounding whitespace allowed). Anything else (no tag,
    ``<score>2.5</score>``, ``<score>4</score>``, ``<score>3/3</score>``, a bare digit outside
    tags) is a parse failure. The last pair counts because the instruction asks for the score
    at the end, after the reasons, and a tag the scorer quotes from the solution or the
    evaluation comes before it.
    """
    pairs = own_tag_contents(text, "score")
    if not pairs:
        return None
    content = pairs[-1].strip()
    return int(content) if content in {"1", "2", "3"} else None


_RELEASED_SCORE_TAG = re.compile(r"<\s*score\s*>\s*([0-9]+)\s*<\s*/\s*score\s*>", re.IGNORECASE | re.ASCII)
_RELEASED_SCORE_DIGIT = re.compile(r"\b([1-3])\b")


def parse_score_released(text: str) -> int:
    """The released code's reading (``wt-2048/comas``, ``_extract_score``): the *first*
    ``<score>N</score>`` (integer N, any case, spaces allowed) clamped to 1..3; else the last
    standalone digit 1-3 anywhere in the text; else 2. It never fails, so the scorer's −1 is
    unreachable, and a score quoted from another agent's text can win.
    """
    text = (text or "").strip()
    match = _RELEASED_SCORE_TAG.search(text)
    if match:
        return min(3, max(1, int(match.group(1))))
    digits = _RELEASED_SCORE_DIGIT.findall(text)
    if digits:
        return int(digits[-1])
    return 2


def parse_judgment(text: str) -> bool | None:
    """The verdict of an evaluation in the *without scoring* ablation.

    The last complete ``<judgment>…</judgment>`` pair the evaluator wrote itself must say ``correct`` or ``incorrect``
    (case-insensitive, surrounding whitespace allowed): ``True`` / ``False``; else ``None``.
    """
    pairs = own_tag_contents(text, "judgment")
    if not pairs:
        return None
    content = pairs[-1].strip().lower()
    if content == "correct":
        return True
    if content == "incorrect":
        return False
    return None


# ---------------------------------------------------------------------------------------------
# Rewards


def solver_reward(score: int | None) -> float:
    """r(s) = (τ̂ − 1)/2; 0 when the scoring failed to parse."""
    return 0.0 if score is None else (score - 1) / 2


def evaluator_reward(score: int | None) -> float:
    """r(e) = (3 − τ̂)/2 = 1 − r(s); 0 when the scoring failed to parse."""
    return 0.0 if score is None else (3 - score) / 2


def scorer_reward(score: int | None) -> float:
    """r(τ) = 0 if a score was parsed, −1 otherwise (the format penalty)."""
    return 0.0 if score is not None else -1.0


def vote_rewards(judgments: Sequence[bool | None]) -> tuple[float, list[float]]:
    """Rewards of the *without scoring* ablation for one solution and its evaluations.

    The paper (§4.3.1) replaces the scoring step by a vote: each evaluation ends in
    ``<judgment>correct</judgment>`` or ``<judgment>incorrect</judgment>``, and the evaluation
    reward becomes *consistency*. Our exact reading:

    * solver: the fraction of valid judgments that say ``correct`` (0 when none is valid);
    * evaluator with a valid judgment: the fraction of valid judgments (its own included)
      that agree with it — 1 when it is alone (n = 1) or unanimous;
    * evaluator without a valid judgment: −1, the same format penalty as a failed scoring.

    Approving everything earns every agent 1, which is the reward hacking the paper reports.
    """
    valid = [j for j in judgments if j is not None]
    solver = (sum(valid) / len(valid)) if valid else 0.0
    evaluators = []
    for judgment in judgments:
        if judgment is None:
            evaluators.append(-1.0)
        else:
            evaluators.append(sum(1 for other in valid if other == judgment) / len(valid))
    return solver, evaluators


# ---------------------------------------------------------------------------------------------
# Schedules


@dataclass(frozen=True)
class Step:
    """One action of the discussion, drawn in advance from the episode's generator.

    Attributes:
        kind: ``"solve"``, ``"evaluate"`` or ``"score"``.
        agent: Index of the acting agent in the pool.
        round: The discussion round (0-based).
        slot: The discussion within the round (always 0 in the paper's schedule; the solving
            agent's index in the released code's schedule).
        evaluation: For ``evaluate``/``score``: which of the ``n`` evaluations (0-based).
        references: Released schedule only: the slots of the previous round whose
            (solution, evaluations) the solver is shown.
    """

    kind: StepKind
    agent: int
    round: int
    slot: int = 0
    evaluation: int = -1
    references: tuple[int, ...] = ()

    def __deepcopy__(self, memo: dict) -> Step:
        return self  # immutable: clones share it


def paper_schedule(
    rng: np.random.Generator,
    num_agents: int,
    num_rounds: int,
    num_evaluations: int,
    *,
    evaluation: bool = True,
    scoring: bool = True,
    scorers: str = "others",
) -> list[Step]:
    """The paper's schedule: per round one solution, then ``n`` evaluations each followed by
    its scoring; solvers and evaluators drawn uniformly from the pool (self-evaluation allowed).

    ``scorers="others"`` draws each scorer uniformly among the agents who wrote neither the
    solution nor the evaluation it scores (it needs ``num_agents >= 3``, or ``>= 2`` without
    the evaluation step); ``scorers="any"`` is the paper's uniform draw over the whole pool,
    which lets an agent score its own work.

    Without ``evaluation`` (ablation) each of the ``n`` scorings scores the solution alone;
    without ``scoring`` (ablation) the evaluations carry a verdict instead.
    """
    _check_flags(evaluation, scoring)
    check_scorers(scorers, num_agents, evaluation, scoring)
    steps: list[Step] = []
    for round_index in range(num_rounds):
        solver = int(rng.integers(num_agents))
        steps.append(Step("solve", solver, round_index))
        for j in range(num_evaluations):
            authors = {solver}
            if evaluation:
                evaluator = int(rng.integers(num_agents))
                authors.add(evaluator)
                steps.append(Step("evaluate", evaluator, round_index, 0, j))
            if scoring:
                if scorers == "any":
                    scorer = int(rng.integers(num_agents))
                else:
                    eligible = [k for k in range(num_agents) if k not in authors]
                    scorer = eligible[int(rng.integers(len(eligible)))]
                steps.append(Step("score", scorer, round_index, 0, j))
    return steps


def released_schedule(
    rng: np.random.Generator,
    num_agents: int,
    num_rounds: int,
    num_evaluations: int,
    num_references: int,
    *,
    evaluation: bool = True,
    scoring: bool = True,
    scorers: str = "others",
) -> list[Step]:
    """The released code's schedule: in every round *every* agent solves (slot k = agent k),
    then each solution is evaluated, then each (solution, evaluation) pair is scored.

    Evaluators and scorers are assigned by a shuffled list of the agents, so each agent does
    exactly one evaluation (and one scoring) per evaluation index and round. In round r > 0
    each solver is shown ``num_references`` discussions drawn without replacement from the
    previous round (round 0 shows an empty discussion).

    ``scorers="others"``: the scorers' shuffled list is drawn among those in which no agent
    scores a pair it wrote (the solution of slot k is agent k's; rejection sampling, and where
    no such list exists for the evaluators drawn, the evaluators are drawn again);
    ``scorers="any"`` is the released code's plain shuffle, which lets an agent score its own
    work.
    """
    _check_flags(evaluation, scoring)
    check_scorers(scorers, num_agents, evaluation, scoring)
    steps: list[Step] = []
    shown = min(num_references, num_agents)
    for round_index in range(num_rounds):
        for slot in range(num_agents):
            references: tuple[int, ...] = ()
            if round_index > 0 and shown > 0:
                references = tuple(
                    int(k) for k in rng.choice(num_agents, size=shown, replace=False)
                )
            steps.append(Step("solve", slot, round_index, slot, -1, references))
        if scorers == "any":
            for kind, enabled in (("evaluate", evaluation), ("score", scoring)):
                if not enabled:
                    continue
                for j in range(num_evaluations):
                    order = rng.permutation(num_agents)
                    for slot in range(num_agents):
                        steps.append(Step(kind, int(order[slot]), round_index, slot, j))  # type: ignore[arg-type]
            continue
        evaluator_orders: list[np.ndarray | None] = []
        scorer_orders: list[np.ndarray] = []
        for _ in range(num_evaluations):
            if scoring:
                evaluators, order = _evaluators_and_scorers(rng, num_agents, evaluation)
                scorer_orders.append(order)
            else:
                evaluators = rng.permutation(num_agents)
            evaluator_orders.append(evaluators)
        for j, evaluators in enumerate(evaluator_orders):
            if evaluators is not None:
                for slot in range(num_agents):
                    steps.append(Step("evaluate", int(evaluators[slot]), round_index, slot, j))
        for j, order in enumerate(scorer_orders):
            for slot in range(num_agents):
                steps.append(Step("score", int(order[slot]), round_index, slot, j))
    return steps


def _evaluators_and_scorers(
    rng: np.random.Generator, num_agents: int, evaluation: bool
) -> tuple[np.ndarray | None, np.ndarray]:
    """One evaluation index of the released schedule with ``scorers="others"``: a shuffle of
    the evaluators (``None`` without the evaluation step) and a shuffle of the scorers in which
    no scorer wrote the solution (slot k: agent k) or the evaluation of its slot."""
    while True:
        evaluators = rng.permutation(num_agents) if evaluation else None
        for _ in range(64):
            order = rng.permutation(num_agents)
            slots = np.arange(num_agents)
            own = (order == slots) | (
                (order == evaluators) if evaluators is not None else np.zeros(num_agents, bool)
            )
            if not own.any():
                return evaluators, order


#: How scorers are drawn: among the agents who wrote neither the solution nor the evaluation
#: scored (default), or over the whole pool (the paper's and released code's draw).
SCORER_DRAWS = ("others", "any")


def check_scorers(scorers: str, num_agents: int, evaluation: bool, scoring: bool) -> None:
    """Refuse an unknown scorer draw, or ``"others"`` in a pool too small for it."""
    if scorers not in SCORER_DRAWS:
        raise ValueError(f"scorers must be one of {SCORER_DRAWS}, got {scorers!r}")
    authors = 2 if evaluation else 1
    if scoring and scorers == "others" and num_agents <= authors:
        raise ValueError(
            f"scorers='others' needs more than {authors} agent(s) (a scorer who wrote neither "
            f"the solution nor the evaluation it scores), got num_agents={num_agents}; "
            "scorers='any' (the paper's draw, in which an agent may score its own work) needs "
            "allow_reward_holes=True"
        )


def _check_flags(evaluation: bool, scoring: bool) -> None:
    if not evaluation and not scoring:
        raise ValueError("at least one of the evaluation and scoring steps must be enabled")


# ---------------------------------------------------------------------------------------------
# Answers


def wrong_answer(truth: str) -> str:
    """An answer that is certainly not ``truth`` (for scripted solvers that err on purpose)."""
    text = truth.strip()
    if re.fullmatch(r"-?\d+", text):
        return str(int(text) + 1)
    if re.fullmatch(r"-?\d+\.\d+", text):
        return f"{float(text) + 1:g}"
    return f"{text} + 1" if text else "1"


def clip_text(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters with a visible note, so echoed actions keep
    observations bounded whatever an agent wrote."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... {len(text) - max_chars} more characters not shown]"


# ---------------------------------------------------------------------------------------------
# Prompt text (gist of CoMAS Appendix B; one variant for answer tasks, one for code tasks)

SOLVER_INSTRUCTION = (
    "You are a member of a discussion forum that solves problems together. Your role now: "
    "SOLVER. Write a complete solution of the problem, using the discussion so far as a "
    "reference (it may contain mistakes)."
)
EVALUATOR_INSTRUCTION = (
    "You are a member of a discussion forum that solves problems together. Your role now: "
    "EVALUATOR. Examine the given solution critically and point out every possible error and "
    "defect. Do not simply agree with it."
)
SCORER_INSTRUCTION = (
    "You are a member of a discussion forum that solves problems together. Your role now: "
    "SCORER. Judge how rational the evaluation is and score the solution with an integer "
    "from 1 to 3."
)
IDLE_INSTRUCTION = (
    "You are a member of a discussion forum that solves problems together. Another member "
    "is acting now; you have nothing to do."
)

ANSWER_FORMAT = {
    "answer": (
        "Solve the problem step by step, then give the final answer inside \\boxed{} "
        "(for example: \\boxed{42}). Only the last \\boxed{} counts."
    ),
    "code": (
        "Analyse the requirements, plan your approach, then give your implementation as exactly "
        "one ```python``` code block."
    ),
}


def format_discussions(discussions: Sequence[tuple[str, Sequence[str]]], max_chars: int) -> str:
    """Render (solution, evaluations) pairs as CoMAS does: ``=== Discussion k ===`` blocks."""
    if not discussions:
        return "(Empty discussion)"
    blocks = []
    for k, (solution, evaluations) in enumerate(discussions, start=1):
        lines = [f"=== Discussion {k} ===", "Solution:", clip_text(solution, max_chars)]
        for evaluation in evaluations:
            lines += ["Evaluation:", clip_text(evaluation, max_chars)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def solver_prompt(problem: str, discussion: str, answer_format: str) -> str:
    return (
        f"The problem is presented as follows:\n{problem}\n\n"
        "Current discussion on the problem is presented as follows for your reference:\n"
        f"{discussion}\n\n"
        f"{ANSWER_FORMAT[answer_format]}"
    )


def evaluator_prompt(problem: str, discussion: str | None, solution: str, *, verdict: bool) -> str:
    parts = [f"The problem is presented as follows:\n{problem}"]
    if discussion is not None:
        parts.append(
            "Current discussion on the problem is presented as follows for your reference:\n"
            + discussion
        )
    parts.append(f"You are required to evaluate the following solution:\n{solution}")
    parts.append(
        "Point out every possible error and defect in the solution: list each mistake and "
        "explain why it is a mistake (for code: list failing test cases and why). Be concise."
    )
    if verdict:
        parts.append(
            "Finish with your verdict on the whole solution: <judgment>correct</judgment> or "
            "<judgment>incorrect</judgment>."
        )
    return "\n\n".join(parts)


def scorer_prompt(problem: str, solution: str, evaluation: str | None) -> str:
    parts = [
        f"The problem is presented as follows:\n{problem}",
        f"The solution to the problem is presented as follows:\n{solution}",
    ]
    if evaluation is not None:
        parts.append(f"The evaluation on the solution is presented as follows:\n{evaluation}")
        parts.append(
            "Consider the rationality of the evaluation and score the solution with an integer "
            "from 1 to 3:\n"
            "3 - the solution is completely correct and no mentioned mistake is effective;\n"
            "2 - some mentioned mistakes are minor and do not affect the overall correctness;\n"
            "1 - some mentioned mistakes are fatal and lead to an incorrect answer."
        )
    else:
        parts.append(
            "Check the solution yourself and score it with an integer from 1 to 3:\n"
            "3 - the solution is completely correct;\n"
            "2 - it has minor flaws that do not affect the overall correctness;\n"
            "1 - it has a fatal flaw that leads to an incorrect answer."
        )
    parts.append(
        "Give brief reasons, then put the score inside <score></score> tags at the end, for "
        "example: The evaluation correctly finds that the final sum is wrong. <score>1</score>"
    )
    return "\n\n".join(parts)
