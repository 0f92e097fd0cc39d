"""Pure rules of MAPoRL's debate: influence-aware reward, incentives, majority vote."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from llm_envs.envs.debate import rules
from llm_envs.verifiers.math import check_answer


def test_discount_normaliser():
    assert rules.discount_normaliser(0, 3, 0.3) == pytest.approx(1.39)
    assert rules.discount_normaliser(1, 3, 0.3) == pytest.approx(1.3)
    assert rules.discount_normaliser(2, 3, 0.3) == 1.0


def test_influence_reward_hand_computed():
    # Two agents, three turns, γ = 0.3; verifier scores per turn.
    scores = [[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]
    # Turn 0, agent 0: [0 + 0.3·(1+1)/2 + 0.09·(1+0)/2] / 1.39 = 0.345 / 1.39.
    assert rules.influence_reward(scores, 0, 0, 0.3) == pytest.approx(0.345 / 1.39)
    assert rules.influence_reward(scores, 0, 1, 0.3) == pytest.approx(1.345 / 1.39)
    # Turn 1: [1 + 0.3·(1+0)/2] / 1.3.
    assert rules.influence_reward(scores, 1, 0, 0.3) == pytest.approx(1.15 / 1.3)
    # Last turn: the own score only.
    assert rules.influence_reward(scores, 2, 1, 0.3) == 0.0
    # γ = 0: only the own score; γ = 1: a plain average over the own score and the future means.
    assert rules.influence_reward(scores, 0, 0, 0.0) == 0.0
    assert rules.influence_reward(scores, 0, 0, 1.0) == pytest.approx((0 + 1 + 0.5) / 3)


def test_influence_weight_sums_with_own_weight_to_one():
    # Own weight 1/Z plus A·(weights of every later turn) = 1: the reward is an average.
    for turn in range(3):
        total = 1 / rules.discount_normaliser(turn, 4, 0.3)
        total += sum(
            3 * rules.influence_weight(turn, later, 3, 4, 0.3) for later in range(turn + 1, 4)
        )
        assert total == pytest.approx(1.0)
    with pytest.raises(ValueError):
        rules.influence_weight(2, 2, 2, 3, 0.3)


@pytest.mark.parametrize(
    ("before", "after", "others", "expected"),
    [
        # Table 1 (α0 = 0.1, α1 = 0.2): own answer t -> t+1, majority of the others at t.
        (True, False, [True], -0.2),  # R -> W, majority R: −α1
        (True, False, [False], -0.1),  # R -> W, majority W: −α0
        (False, True, [False], 0.1),  # W -> R, majority W: +α0
        (False, True, [True], 0.2),  # W -> R, majority R: +α1
        (True, True, [False], 0.0),  # no change
        (False, False, [True], 0.0),
        (False, True, [True, False], 0.0),  # no majority among the others
        (True, False, [True, True, False], -0.2),
    ],
)
def test_revision_incentive_table_1(before, after, others, expected):
    assert rules.revision_incentive(before, after, others, alpha0=0.1, alpha1=0.2) == pytest.approx(
        expected
    )


@pytest.mark.parametrize(
    ("own", "others_before", "others_after", "expected"),
    [
        # Table 2 (β0 = 0.3, β1 = 0.4): majority of the others t -> t+1, own answer at t.
        (True, [True], [False], -0.4),  # majority R -> W, own R: −β1
        (False, [True], [False], -0.3),  # majority R -> W, own W: −β0
        (False, [False], [True], 0.3),  # majority W -> R, own W: +β0
        (True, [False], [True], 0.4),  # majority W -> R, own R: +β1
        (True, [True], [True], 0.0),
        # A tie (an even number of others) is halfway: half of the move between R and W.
        (False, [True, False], [True, True], 0.15),  # tie -> R, own W: +β0/2
        (True, [True, True], [True, False], -0.2),  # R -> tie, own R: −β1/2
        (True, [True, False], [False, False], -0.2),  # tie -> W, own R: −β1/2
        (True, [False, True], [True, False], 0.0),  # tie -> tie
    ],
)
def test_influence_incentive_table_2(own, others_before, others_after, expected):
    assert rules.influence_incentive(
        own, others_before, others_after, beta0=0.3, beta1=0.4
    ) == pytest.approx(expected)


def test_majority():
    assert rules.majority([True]) == "R"
    assert rules.majority([False, False, True]) == "W"
    assert rules.majority([True, False]) is None
    assert rules.majority([]) is None


def same_math(a, b):
    return a == b or check_answer(a, b)


@pytest.mark.parametrize(
    ("answers", "correct", "expected"),
    [
        (["5", "5"], [True, True], 1.0),
        (["5", "6"], [True, False], 0.5),  # tie of two: 1/2
        (["5", "6", "6"], [True, False, False], 0.0),  # wrong majority
        (["5", "5", "6"], [True, True, False], 1.0),
        (["5", "6", "7"], [False, False, True], 1 / 3),
        ([None, "5"], [False, True], 1.0),  # invalid is dropped from a tie
        ([None, None, "5"], [False, False, True], 0.0),  # invalid wins outright
        ([None, None], [False, False], 0.0),
        (["0.5", "1/2", "3"], [True, True, False], 1.0),  # equivalent answers vote together
    ],
)
def test_majority_vote_accuracy_with_the_tie_rule(answers, correct, expected):
    assert rules.majority_vote_accuracy(answers, correct, same_math) == pytest.approx(expected)


def test_extract_label():
    labels = ["entailment", "neutral", "contradiction"]
    assert rules.extract_label("so \\boxed{Neutral}", labels) == "neutral"
    assert rules.extract_label("not entailment but contradiction.", labels) == "contradiction"
    assert rules.extract_label("\\boxed{maybe}", labels) is None
    assert rules.extract_label("no label here", labels) is None
    # A word the regex matches by Unicode case folding that casefold() does not map back (a
    # dotless i, a long s): the label it matched, never a KeyError.
    assert rules.extract_label("I say posıtıve", ["positive", "negative"]) == "positive"
    assert rules.extract_label("ſo: NEUTRAL, not contradictıon", labels) == "contradiction"
    assert rules.extract_label("entailments", labels) is None  # whole words only


def test_describe_score_buckets():
    assert rules.describe_score(0.1) == "highly likely wrong"
    assert rules.describe_score(0.5) == "might be wrong"
    assert rules.describe_score(0.7) == "seems right, but check it"
    assert rules.describe_score(0.95) == "likely right with high probability"


# ---------------------------------------------------------------------------------------------
# Incentive weights that open a reward hole: rules.incentive_hole against every pattern.


def _patterns(num_agents, num_turns):
    for bits in itertools.product([False, True], repeat=num_agents * num_turns):
        yield [list(bits[t * num_agents : (t + 1) * num_agents]) for t in range(num_turns)]


def _wrong_pays(num_agents, num_turns, gamma, weights, first_turn_incentive):
    """The first pattern where a wrong answer pays: a record (one answer flipped to right
    earns less), an agent (its answers all right, the others' unchanged, earn less), the team
    (all answers right earn less in total) or a steering agent (right throughout, it earns more
    than if the others, after their first answers, which no one has read anyone's before, had
    been right: it led them astray to be paid for leading them back); None if there is none."""

    def rewards(correct):
        return rules.episode_rewards(correct, gamma, *weights, first_turn_incentive)

    right = [[True] * num_agents for _ in range(num_turns)]
    team_right = sum(map(sum, rewards(right)))
    for correct in _patterns(num_agents, num_turns):
        got = rewards(correct)
        if sum(map(sum, got)) > team_right + 1e-9:
            return "team", correct
        led_back = [correct[0]] + right[1:]
        for a in range(num_agents):
            if all(row[a] for row in correct) and sum(r[a] for r in got) > sum(r[a] for r in rewards(led_back)) + 1e-9:
                return "steer", correct
            honest = [row[:a] + [True] + row[a + 1 :] for row in correct]
            if sum(r[a] for r in got) > sum(r[a] for r in rewards(honest)) + 1e-9:
                return "agent", correct
            for t in range(num_turns):
                if not correct[t][a]:
                    fixed = [row[:] for row in correct]
                    fixed[t][a] = True
                    if got[t][a] > rewards(fixed)[t][a] + 1e-9:
                        return "record", correct
    return None


@pytest.mark.parametrize(
    ("num_agents", "num_turns"), [(2, 2), (2, 3), (2, 4), (3, 2), (3, 3), (4, 2)]
)
def test_incentive_hole_is_exact_on_every_pattern(num_agents, num_turns):
    rng = np.random.default_rng(num_agents * 10 + num_turns)
    grid = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0]
    for _ in range(12 if num_agents * num_turns <= 6 else 3):
        gamma = float(rng.choice([0.0, 0.3, 1.0]))
        weights = [float(rng.choice(grid)) for _ in range(4)]
        for first_turn in (True, False):
            hole = rules.incentive_hole(num_agents, num_turns, gamma, *weights, first_turn_incentive=first_turn)
            found = _wrong_pays(num_agents, num_turns, gamma, weights, first_turn)
            if hole is None:  # accepted weights: nothing pays a wrong answer
                assert found is None, (gamma, weights, first_turn, found)
            elif first_turn:  # refused weights: the hole is real (exact with Table 2 at turn 0)
                assert found is not None, (gamma, weights, hole)


def test_incentive_hole_two_agent_closed_form():
    # T = 3, γ = 0.3: 1/Z_0 = 1/1.39 = 0.7194.
    assert rules.incentive_hole(2, 3, 0.3, 0.0, 2.0, 2.0, 0.0) is not None  # the old docs example
    assert rules.incentive_hole(2, 3, 0.3, 0.2, 0.3, 0.2, 0.3) is None  # 0.6
    assert rules.incentive_hole(2, 3, 0.3, 0.0, 0.4, 0.0, 0.31) is None  # α1 + β1 = 0.71
    assert rules.incentive_hole(2, 3, 0.3, 0.0, 0.4, 0.0, 0.33) is not None  # 0.73
    assert rules.incentive_hole(2, 3, 0.3, 0.4, 0.0, 0.33, 0.0) is not None  # α0 + β0 = 0.73
    assert rules.incentive_hole(2, 3, 0.3, -0.1, 0.0, 0.0, 0.0) is not None  # negative
    assert rules.incentive_hole(1, 3, 0.3, 5.0, 5.0, 5.0, 5.0) is None  # no other agents
    assert rules.incentive_hole(2, 1, 0.3, 5.0, 5.0, 5.0, 5.0) is None  # one turn
