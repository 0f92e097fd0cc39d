"""Pure rules of MAPoRL's collaborative debate: rewards, incentives, majority vote, parsing.

Source: MAPoRL (arXiv 2502.18439; docs/papers.md). Turns are numbered ``0 … T−1`` here
(the paper writes ``1 … T``); A agents answer in every turn.

Influence-aware verification reward of agent a's answer at turn t (Definition 1)::

    R(q, s_{t,a}) = [ V(s_{t,a}) + Σ_{t'=t+1}^{T−1} Σ_{j=1}^{A} (1/A)·γ^{t'−t}·V(s_{t',j}) ]
                    / Σ_{t'=t}^{T−1} γ^{t'−t}

(the inner mean over j includes agent a itself). Incentives on ground-truth correctness
(R = right, W = wrong):

* own revision, applied to the answer at t+1 for t = 0 … T−2 (Table 1), "majority" = the
  other agents at t: R→W with majority R: −α1; R→W with majority W: −α0; W→R with majority W:
  +α0; W→R with majority R: +α1;
* influence, applied to the answer at t for t = 0 … T−2 (Table 2; the paper's t = 1 … T−1),
  "majority" = the other agents, t → t+1: R→W while own answer R: −β1; R→W while own W: −β0;
  W→R while own W: +β0; W→R while own R: +β1. (The released code gives no incentive at all to
  the first turn's answers; the environment's ``first_turn_incentive=False`` does the same.)

The majority of the others is R when more than half of them are right, W when more than half
are wrong, and a tie on an exact half (possible with an odd number of agents): Table 1 pays
nothing when the others were tied at t; Table 2 counts a tie as halfway between W and R, so a
move into or out of a tie pays ±β/2 (docs/envs/debate.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Literal

from llm_envs.verifiers.math import extract_boxed

Majority = Literal["R", "W"]


# ---------------------------------------------------------------------------------------------
# Influence-aware verification reward


def discount_normaliser(turn: int, num_turns: int, gamma: float) -> float:
    """Σ_{t'=turn}^{T−1} γ^{t'−turn} (1 at the last turn)."""
    return sum(gamma ** (later - turn) for later in range(turn, num_turns))


def influence_weight(turn: int, later: int, num_agents: int, num_turns: int, gamma: float) -> float:
    """Weight of one answer at ``later`` > ``turn`` in the reward of an answer at ``turn``:
    (1/A)·γ^{later−turn} / Σ_{t'=turn}^{T−1} γ^{t'−turn}."""
    if not turn < later < num_turns:
        raise ValueError(f"need turn < later < num_turns, got {turn}, {later}, {num_turns}")
    return gamma ** (later - turn) / (num_agents * discount_normaliser(turn, num_turns, gamma))


def influence_reward(
    scores: Sequence[Sequence[float]], turn: int, agent: int, gamma: float
) -> float:
    """R(q, s_{turn,agent}) from the verifier scores ``scores[t][j]`` of a whole debate."""
    num_turns = len(scores)
    num_agents = len(scores[turn])
    future = sum(
        gamma ** (later - turn) * scores[later][j] / num_agents
        for later in range(turn + 1, num_turns)
        for j in range(num_agents)
    )
    return (scores[turn][agent] + future) / discount_normaliser(turn, num_turns, gamma)


# ---------------------------------------------------------------------------------------------
# Incentives


def majority(correct: Sequence[bool]) -> Majority | None:
    """R if more than half of ``correct`` are true, W if more than half are false, else None."""
    right = sum(bool(c) for c in correct)
    wrong = len(correct) - right
    if right > wrong:
        return "R"
    if wrong > right:
        return "W"
    return None


def revision_incentive(
    before: bool, after: bool, others_before: Sequence[bool], alpha0: float, alpha1: float
) -> float:
    """Table 1: the incentive of an agent's answer at t+1 for its own change t → t+1, given the
    other agents' correctness at t."""
    if before == after:
        return 0.0
    others = majority(others_before)
    if others is None:
        return 0.0
    if before and not after:  # R → W
        return -alpha1 if others == "R" else -alpha0
    return alpha0 if others == "W" else alpha1  # W → R


def influence_incentive(
    own: bool,
    others_before: Sequence[bool],
    others_after: Sequence[bool],
    beta0: float,
    beta1: float,
) -> float:
    """Table 2: the incentive of an agent's answer at t for the change of the other agents'
    majority from t to t+1: ``±β1`` for a right answer, ``±β0`` for a wrong one, positive for
    R → W's reverse (W → R).

    Where the others can tie (an even number of them, which the paper's table does not cover),
    a tie counts as halfway: R → tie and tie → W each pay half of R → W. So the incentives of an
    answer that stays the same telescope: a run of the others' majority that ends where it
    started pays nothing. (A tie paying 0 let an agent that answered right throughout lead the
    others R → tie → W, unpaid, and be paid β1 for bringing them back.)"""
    start, end = majority(others_before), majority(others_after)
    change = (_MAJORITY_LEVEL[end] - _MAJORITY_LEVEL[start]) / 2
    return change * (beta1 if own else beta0) if change else 0.0


#: The others' majority as a level: a tie (None) is halfway between W and R.
_MAJORITY_LEVEL = {"R": 1.0, None: 0.0, "W": -1.0}


# ---------------------------------------------------------------------------------------------
# Incentive weights that let a wrong answer pay


def incentive_hole(
    num_agents: int,
    num_turns: int,
    gamma: float,
    alpha0: float,
    alpha1: float,
    beta0: float,
    beta1: float,
    first_turn_incentive: bool = True,
) -> str | None:
    """Why these incentive weights let a wrong answer earn more than a right one, or ``None``.

    With the ground-truth verifier a wrong answer at turn t forgoes at least
    ``u = 1/Z_0`` of verifier reward (``Z_0 = Σ_{k<T} γ^k``; a turn-0 answer forgoes exactly
    ``u``, later ones more: ``1/Z_t`` plus their delayed credit). The cheapest deviation is a
    wrong first answer followed by right ones. Three conditions, each necessary:

    * **record** (a per-turn learner): when the others' majority flips, Table 2 pays the wrong
      answer ``±β0`` and the right one ``±β1``: ``|β0 − β1| ≤ u``.
    * **agent** (one agent's return, the others' play fixed): starting wrong and turning right
      gains Table 1's ``α1`` (others right) plus ``(β1 − β0)⁺`` if the others then turn wrong,
      or ``α0`` (others wrong) plus ``(β0 − β1)⁺`` if they turn right:
      ``max(α1 + (β1 − β0)⁺, α0 + (β0 − β1)⁺) ≤ u``.
    * **team** (the sum over agents): k of the A agents start wrong and all turn right. A wrong
      agent gains ``α0 + β0`` when more than half of its others are wrong (k − 1 > (A − 1)/2),
      ``α1`` when fewer, ``β0/2`` on a tie; every right agent gains ``β1`` when more than half
      of its others are wrong (k > (A − 1)/2), ``β1/2`` on a tie:
      ``k·gain_wrong + (A − k)·gain_right ≤ k·u`` for every k = 1 … A. With two agents this is
      ``max(α1 + β1, α0 + β0) ≤ u``.
    * **steer** (an agent right throughout that leads the others astray and back): Table 2
      telescopes over an answer that stays right, so from the others' first answers (given
      before anyone has read anyone) it pays at most what their turning right at once pays.
      Without the incentive at turn 0 (``first_turn_incentive=False``, the released code), the
      others' answers at turn 1, which the agent's first text can sway, are the start instead:
      an agent that talks them wrong and back earns ``β1``, so ``β1`` must be 0 (T ≥ 3).

    Together they are sufficient too: enumerating every correctness pattern of 2 to 4 agents
    and 2 to 4 turns finds no record, agent or team that earns more than with all answers
    right whenever they hold (tests/envs/discussion/test_debate_rules.py). One agent or one
    turn: no incentive ever applies. A custom verifier that scores wrong answers above 0
    shrinks ``u``; the check assumes the ground-truth verifier.
    """
    if num_agents < 2 or num_turns < 2:
        return None
    if min(alpha0, alpha1, beta0, beta1) < 0:
        return (
            "negative incentive weights turn the tables around: a negative α pays an agent "
            "for being persuaded to the wrong answer, a negative β for leading others away "
            "from the right one"
        )
    forgone = 1.0 / discount_normaliser(0, num_turns, gamma)
    tolerance = 1e-12
    if abs(beta0 - beta1) > forgone + tolerance:
        return (
            f"|beta0 - beta1| = {abs(beta0 - beta1):g} exceeds 1/Z_0 = {forgone:.4g} (Z_0 = "
            "sum of gamma^k over the turns): when the other agents' majority flips, a wrong "
            "answer's record earns more than a right one's"
        )
    agent_gain = max(alpha1 + max(0.0, beta1 - beta0), alpha0 + max(0.0, beta0 - beta1))
    if agent_gain > forgone + tolerance:
        return (
            f"max(alpha1 + (beta1 - beta0)+, alpha0 + (beta0 - beta1)+) = {agent_gain:g} "
            f"exceeds 1/Z_0 = {forgone:.4g}, the verifier reward a wrong first answer forgoes: "
            "an agent that starts wrong on purpose and turns right earns more than one that "
            "answers right throughout"
        )
    if not first_turn_incentive and beta1 > tolerance and num_turns >= 3:
        return (
            f"beta1 = {beta1:g} > 0 without the turn-0 incentive (first_turn_incentive=False, the "
            "released code): an agent that answers right throughout but talks the others into a "
            "wrong answer at turn 1 is paid beta1 when it brings them back"
        )
    half = (num_agents - 1) / 2
    for wrong in range(1, num_agents + 1):
        if wrong - 1 > half:
            gain_wrong = alpha0 + beta0
        elif wrong - 1 < half:
            gain_wrong = alpha1
        else:
            gain_wrong = beta0 / 2
        gain_right = beta1 if wrong > half else beta1 / 2 if wrong == half else 0.0
        team_gain = wrong * gain_wrong + (num_agents - wrong) * gain_right
        if team_gain > wrong * forgone + tolerance:
            return (
                f"when {wrong} of {num_agents} agents start wrong and turn right, the team "
                f"gains {team_gain:g} in incentives against {wrong} x 1/Z_0 = "
                f"{wrong * forgone:.4g} of verifier reward forgone (Z_0 = sum of gamma^k over "
                "the turns): starting wrong on purpose pays the team"
            )
    return None


def episode_rewards(
    correct: Sequence[Sequence[bool]],
    gamma: float,
    alpha0: float = 0.0,
    alpha1: float = 0.0,
    beta0: float = 0.0,
    beta1: float = 0.0,
    first_turn_incentive: bool = True,
) -> list[list[float]]:
    """The total reward of every answer ``[t][a]`` of a whole debate from its ground-truth
    correctness ``correct[t][a]`` with the ground-truth verifier (V = correctness): the
    influence-aware reward plus both incentives. The environment credits the same terms as
    they become known; this is their sum, for analysis and tests."""
    num_turns, num_agents = len(correct), len(correct[0])
    scores = [[float(c) for c in row] for row in correct]
    rewards = [
        [influence_reward(scores, t, a, gamma) for a in range(num_agents)]
        for t in range(num_turns)
    ]

    def others(t: int, a: int) -> list[bool]:
        return [bool(c) for j, c in enumerate(correct[t]) if j != a]

    for t in range(num_turns):
        for a in range(num_agents):
            if t >= 1:
                rewards[t][a] += revision_incentive(
                    bool(correct[t - 1][a]), bool(correct[t][a]), others(t - 1, a), alpha0, alpha1
                )
            if t <= num_turns - 2 and (t >= 1 or first_turn_incentive):
                rewards[t][a] += influence_incentive(
                    bool(correct[t][a]), others(t, a), others(t + 1, a), beta0, beta1
                )
    return rewards


# ---------------------------------------------------------------------------------------------
# Majority vote with the tie rule


def majority_vote_accuracy(
    answers: Sequence[str | None],
    correct: Sequence[bool],
    same: Callable[[str, str], bool],
) -> float:
    """Accuracy of the majority vote over one turn's answers, with MAPoRL's tie rule.

    Answers are grouped with ``same``; ``None`` (no valid answer) forms its own "invalid" group,
    which is dropped from a tie with valid answers. The credit is (number of correct groups in
    the tied set) / |tied set| — 1/|tied set| when the truth is among the tied answers.
    """
    groups: list[dict] = []
    for answer, is_correct in zip(answers, correct, strict=True):
        for group in groups:
            if (answer is None) == (group["answer"] is None) and (
                answer is None or same(answer, group["answer"])
            ):
                group["count"] += 1
                group["correct"] = group["correct"] or bool(is_correct)
                break
        else:
            groups.append(
                {"answer": answer, "count": 1, "correct": bool(is_correct) and answer is not None}
            )
    if not groups:
        return 0.0
    top = max(group["count"] for group in groups)
    tied = [group for group in groups if group["count"] == top]
    if len(tied) > 1:
        tied = [group for group in tied if group["answer"] is not None]
    return sum(group["correct"] for group in tied) / len(tied)


# ---------------------------------------------------------------------------------------------
# Answers


def extract_label(text: str, labels: Sequence[str]) -> str | None:
    """The label an answer commits to (classification tasks such as ANLI).

    The content of the last ``\\boxed{}`` if it is a label (case-insensitive; surrounding
    spaces, quotes and a trailing ``.``/``!`` ignored, so ``\\boxed{Entailment.}`` is
    ``entailment`` as in the released code); otherwise the last label word in the text (whole
    words, case-insensitive). Returns the label as spelled in ``labels``.
    """
    if not labels:
        return None
    by_fold = {label.casefold(): label for label in labels}
    boxed = extract_boxed(text)
    if boxed is not None:
        return by_fold.get(boxed.strip(" \t\n'\"`.!").casefold())
    longest_first = sorted(labels, key=len, reverse=True)
    pattern = r"\b(" + "|".join(re.escape(label) for label in longest_first) + r")\b"
    matches = re.findall(pattern, text, flags=re.IGNORECASE)
    if not matches:
        return None
    # The regex folds case as Unicode does, casefold() not always alike ("posıtıve", a dotless
    # i, matches "positive" but casefolds to itself): the label is the one the word matched.
    word = matches[-1]
    found = by_fold.get(word.casefold())
    if found is None:
        found = next(label for label in longest_first if re.fullmatch(re.escape(label), word, flags=re.IGNORECASE))
    return found


_BUCKETS = (
    (0.3, "highly likely wrong"),
    (0.6, "might be wrong"),
    (0.8, "seems right, but check it"),
)


def describe_score(score: float) -> str:
    """MAPoRL's verbal bucket for a verifier score shown to agents."""
    for bound, words in _BUCKETS:
        if score < bound:
            return words
    return "likely right with high probability"


# ---------------------------------------------------------------------------------------------
# Prompt text (gist of MAPoRL's GSM8K / ANLI prompts)

INSTRUCTION = (
    "You are {agent}, one of {count} agents who solve a problem together through debate. "
    "In the first turn you answer on your own; in later turns you see the other agents' "
    "answers, reconsider, and give an updated answer."
)


def answer_format(labels: Sequence[str] | None) -> str:
    if labels:
        choices = ", ".join(f"'{label}'" for label in labels)
        return (
            f"Give a concise reasoning, then your final answer, one of {choices}, in "
            "\\boxed{} (for example: \\boxed{" + labels[0] + "})."
        )
    return (
        "Provide a reasoning for your solution. At the end, you MUST write the answer in the "
        "format \\boxed{ANSWER} (for example: Answer: \\boxed{42})."
    )


def first_turn_prompt(question: str, labels: Sequence[str] | None) -> str:
    return f"Question: {question}\n\n{answer_format(labels)}"


def later_turn_prompt(
    question: str,
    own: Sequence[tuple[int, str, float | None]],
    others: Sequence[tuple[str, int, str, float | None]],
    labels: Sequence[str] | None,
) -> str:
    """Prompt of a turn t >= 1.

    Args:
        own: (turn, answer, verifier score or None) of the agent's own previous answers.
        others: (agent, turn, answer, verifier score or None) of the other agents' answers.
    """
    lines = [f"Question: {question}", "", "Your previous answers:"]
    for turn, text, score in own:
        lines.append(f"Your solution (turn {turn + 1}): ```{text}```")
        if score is not None:
            lines.append(
                f"Reward from a verifier of your answer: {score:.3f} out of 1.0, which means "
                f"{describe_score(score)}."
            )
    lines += ["", "These are the solutions to the problem from other agents:"]
    for agent, turn, text, score in others:
        lines.append(f"{agent} solution (turn {turn + 1}): ```{text}```")
        if score is not None:
            lines.append(
                f"Reward from a verifier of this answer: {score:.3f} out of 1.0 (the verifier's "
                f"probability that it is correct), which means {describe_score(score)}."
            )
    lines += [
        "",
        "Using the solutions from other agents as additional advice, give an updated answer "
        "that considers your own previous solution but also takes into account the answers "
        "from other agents. If you believe your previous answer was incorrect, feel free to "
        "revise it. However, do not simply repeat your previous answer without checking it.",
        f"Once again, the question is: {question}",
        "",
        answer_format(labels),
    ]
    return "\n".join(lines)
