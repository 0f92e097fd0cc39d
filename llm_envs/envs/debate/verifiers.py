"""Verifiers for ``llm/Debate-v0``: a score in [0, 1] for one agent's answer to a problem.

MAPoRL trains a verifier model; with ground truth available, exact answer correctness is the
verifier (arXiv 2502.18439). Any callable ``verifier(problem, response) -> float`` replaces it;
:class:`AgentVerifier` turns any :class:`~llm_envs.agents.base.Agent` (an LLM served anywhere)
into one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_envs.envs.debate import rules
from llm_envs.envs.forum.rules import clip_text, own_tag_contents, shown_to_reader
from llm_envs.tasks import Problem
from llm_envs.verifiers.math import check_answer, extract_boxed

#: ``verifier(problem, response) -> score in [0, 1]``.
Verifier = Callable[[Problem, str], float]


def labels_of(problem: Problem) -> list[str] | None:
    """The label set of a classification problem (``problem.metadata["labels"]``), if any."""
    labels = problem.metadata.get("labels") if problem.metadata else None
    return [str(label) for label in labels] if labels else None


class GroundTruthVerifier:
    """Ground-truth correctness: 1.0 if the response's final answer is the problem's answer.

    Math (default): the last ``\\boxed{}`` compared with
    :func:`~llm_envs.verifiers.math.check_answer`
    (math-verify). Classification (``problem.metadata["labels"]`` set, e.g. ANLI's
    entailment / neutral / contradiction): label match, see :func:`rules.extract_label`.
    A response without a final answer is wrong.
    """

    def __init__(self, timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s

    def answer(self, problem: Problem, response: str) -> str | None:
        labels = labels_of(problem)
        if labels:
            return rules.extract_label(response, labels)
        return extract_boxed(response)

    def correct(self, problem: Problem, response: str) -> bool:
        if problem.answer is None:
            raise ValueError(f"problem {problem.id!r} has no ground-truth answer")
        answer = self.answer(problem, response)
        return answer is not None and self.answer_is(problem, answer, problem.answer)

    def answer_is(self, problem: Problem, answer: str, other: str) -> bool:
        """Whether two extracted answers are the same (grouping for the majority vote)."""
        if labels_of(problem):
            return answer.strip().casefold() == other.strip().casefold()
        return answer.strip() == other.strip() or check_answer(
            answer, other, timeout_s=self.timeout_s
        )

    def __call__(self, problem: Problem, response: str) -> float:
        return float(self.correct(problem, response))


class AgentVerifier:
    """An agent as the verifier: it is asked for the probability that a response is correct.

    The agent answers with ``<score>p</score>``, p in [0, 1] (the last such pair it wrote
    itself counts); an output without a readable score gets ``unparsed_score``. The response
    it is shown has its ``<score>`` tags rewritten as ``[score]``, so a debater cannot write
    its own verifier score. The call is synchronous (one
    request per verified answer), so batch-minded setups may prefer a custom callable.
    """

    INSTRUCTION = (
        "You are a verifier. Judge whether a proposed solution to a problem is correct. Reply "
        "with your reasoning, then the probability that the final answer is correct, as a "
        "number between 0 and 1, inside <score></score> tags."
    )

    def __init__(self, agent: Any, *, unparsed_score: float = 0.0, max_chars: int = 8000) -> None:
        self.agent = agent
        self.unparsed_score = float(unparsed_score)
        self.max_chars = max_chars

    def __call__(self, problem: Problem, response: str) -> float:
        observation = {
            "instruction": self.INSTRUCTION,
            "prompt": (
                f"Problem:\n{problem.prompt}\n\nProposed solution:\n"
                f"{clip_text(shown_to_reader(response, ('score',)), self.max_chars)}\n\n"
                "Give the probability that the final answer is correct in <score></score>."
            ),
        }
        text = self.agent.act(observation, agent="verifier")
        return parse_probability(text, self.unparsed_score)


def parse_probability(text: str, default: float) -> float:
    """The last ``<score>p</score>`` pair the verifier wrote itself (outside fenced blocks and
    ``>`` quote lines), p a number clipped to [0, 1]; ``default`` when there is none or its
    content is not a number (an earlier pair never stands in for it)."""
    pairs = own_tag_contents(text or "", "score")
    if not pairs:
        return default
    try:
        value = float(pairs[-1].strip())
    except ValueError:
        return default
    if value != value:  # NaN
        return default
    return min(1.0, max(0.0, value))
