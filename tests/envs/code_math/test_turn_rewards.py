"""Reasoner–Tool and Coder–Tester: delay never pays (issue 30).

Both episodes end only when the two agents agree, so with the paper's per-turn reward a team
that stays in disagreement on purpose is paid the same achievement again every turn. By default
(``turn_rewards="change"``) each action is paid the change of its agent's reward level since
that agent's previous action: the return is the level of the agent's last action, a solved
task is paid once, and candidates of one turn's group still rank as by their levels.
Every expected value below is computed by hand from docs/envs/reasoner_tool.md and
docs/envs/coder_tester.md.
"""

from __future__ import annotations

import pytest

from llm_envs.envs.coder_tester.env import CoderTesterEnv
from llm_envs.envs.reasoner_tool.env import ReasonerToolEnv
from tests.envs.helpers import ADD, TWELVE, ListSource

from .conftest import play, scripted

RIGHT = "3 × 4 = 12, so \\boxed{12}"
WRONG = "3 × 4 = 11, so \\boxed{11}"


def program(body: str) -> str:
    return f"```python\n{body}```"


def coder_reply(body: str) -> str:
    return f"**Code:**\n```python\n{body}```"


def unit_tests_reply(*lines: str) -> str:
    return "**Tests:**\n```python\n" + "\n".join(lines) + "\n```"


GOLDEN = coder_reply(ADD.solution)
GOLDEN_TESTS = unit_tests_reply(*ADD.tests)
# the golden tests plus one wrong test: the golden code fails it, so the agents never agree
STALLING_TESTS = unit_tests_reply(*ADD.tests, "assert add(2, 2) == 5")
HALF_RIGHT = coder_reply("def add(a, b):\n    return a + b if 0 <= a < 2 else -5\n")


def reasoner_tool(sandbox, **overrides) -> ReasonerToolEnv:
    return ReasonerToolEnv(task_source=ListSource([TWELVE]), sandbox=sandbox, **overrides)


def coder_tester(sandbox, **overrides) -> CoderTesterEnv:
    return CoderTesterEnv(task_source=ListSource([ADD]), sandbox=sandbox, **overrides)


def rewards_by_turn(env, agent: str) -> list[float]:
    return [r.reward for r in env.records if r.agent == agent]


# ---------------------------------------------------------------------------------------------
# Reasoner–Tool


def test_reasoner_tool_agreeing_at_once_earns_two_each(sandbox):
    env = reasoner_tool(sandbox)
    totals = play(env, scripted({"reasoner": [RIGHT], "tool": [program("print(12)\n")]}))
    assert totals == pytest.approx({"reasoner": 2.0, "tool": 2.0})
    assert env.episode_metrics()["turns"] == 1.0


def test_reasoner_tool_stalling_pays_under_the_papers_turn_rewards(sandbox):
    # The hole, reproduced: the reasoner is right every turn, the tool prints a wrong answer on
    # purpose, they never agree. Per turn: reasoner 1 + (0.2 + 0.8) = 2.0; tool 1 + (0.1 + 0.1).
    env = reasoner_tool(sandbox, turn_rewards="paper", allow_reward_holes=True)
    totals = play(env, scripted({"reasoner": [RIGHT], "tool": [program("print(7)\n")]}))
    assert env.episode_metrics()["turns"] == 4.0
    assert totals == pytest.approx({"reasoner": 4 * 2.0, "tool": 4 * 1.2})


def test_reasoner_tool_stalling_earns_no_more_than_solving(sandbox):
    env = reasoner_tool(sandbox)
    totals = play(env, scripted({"reasoner": [RIGHT], "tool": [program("print(7)\n")]}))
    assert env.episode_metrics()["turns"] == 4.0
    assert rewards_by_turn(env, "reasoner") == pytest.approx([2.0, 0.0, 0.0, 0.0])
    assert rewards_by_turn(env, "tool") == pytest.approx([1.2, 0.0, 0.0, 0.0])
    assert totals == pytest.approx({"reasoner": 2.0, "tool": 1.2})
    assert [r.info["reward_level"] for r in env.records if r.agent == "tool"] == (
        pytest.approx([1.2] * 4)
    )


def test_reasoner_tool_solving_late_earns_what_solving_at_once_earns(sandbox):
    # Turn 1: reasoner wrong but boxed (level 0.2), tool runs but is wrong (0 + 0.2).
    # Turn 2: both right (level 1 + 1.0 each): each is paid the change, 1.8.
    env = reasoner_tool(sandbox)
    totals = play(
        env,
        scripted(
            {
                "reasoner": [WRONG, RIGHT],
                "tool": [program("print(7)\n"), program("print(12)\n")],
            }
        ),
    )
    assert rewards_by_turn(env, "reasoner") == pytest.approx([0.2, 1.8])
    assert rewards_by_turn(env, "tool") == pytest.approx([0.2, 1.8])
    second = [r for r in env.records if r.turn == 1]
    assert [r.reward_components for r in second] == [
        pytest.approx({"team": 1.0, "local": 0.8}),
        pytest.approx({"team": 1.0, "local": 0.8}),
    ]
    assert totals == pytest.approx({"reasoner": 2.0, "tool": 2.0})


def test_reasoner_tool_going_wrong_is_paid_back(sandbox):
    # Turn 1: reasoner right (2.0), tool wrong (1.2). Turn 2: reasoner 11 (level 0.2: -1.8),
    # tool prints 11 (level 0 + 0.2: -1.0); they agree and the episode ends. Each return is the
    # level of the agent's last action.
    env = reasoner_tool(sandbox)
    totals = play(
        env,
        scripted(
            {
                "reasoner": [RIGHT, WRONG],
                "tool": [program("print(7)\n"), program("print(11)\n")],
            }
        ),
    )
    assert rewards_by_turn(env, "reasoner") == pytest.approx([2.0, -1.8])
    assert rewards_by_turn(env, "tool") == pytest.approx([1.2, -1.0])
    assert totals == pytest.approx({"reasoner": 0.2, "tool": 0.2})


def test_reasoner_tool_a_turns_group_still_prefers_the_right_answer(sandbox):
    # AT-GRPO's group: candidates of one decision, each scored on a clone of the same state.
    env = reasoner_tool(sandbox)
    env.reset(seed=0)
    env.step(RIGHT)
    env.step(program("print(7)\n"))  # turn 1: no agreement
    scores = {}
    for name, reply in {"right": RIGHT, "wrong": WRONG, "no box": "12"}.items():
        clone = env.clone()
        clone.step(reply)
        scores[name] = clone.records[-1].reward
    assert scores == pytest.approx({"right": 0.0, "wrong": -1.8, "no box": -2.0})
    env.step(RIGHT)
    tool_scores = {}
    for name, body in {"right": "print(12)\n", "wrong": "print(7)\n"}.items():
        clone = env.clone()
        clone.step(program(body))
        tool_scores[name] = clone.records[-1].reward
    assert tool_scores == pytest.approx({"right": 0.8, "wrong": 0.0})


def test_reasoner_tool_outcome_mode_pays_the_outcome_once(sandbox):
    env = reasoner_tool(sandbox, reward_mode="outcome")
    totals = play(env, scripted({"reasoner": [RIGHT], "tool": [program("print(7)\n")]}))
    assert env.episode_metrics()["turns"] == 4.0
    assert totals == pytest.approx({"reasoner": 1.0, "tool": 1.0})


# ---------------------------------------------------------------------------------------------
# Coder–Tester


def test_coder_tester_stalling_pays_under_the_papers_turn_rewards(sandbox):
    # The hole, reproduced: the coder submits the golden solution, the tester adds one wrong
    # test so the code never passes all its tests. Per turn: coder 1 + (0.1 + 0.1 + 0.8) = 2.0;
    # tester 1 + 0.2 + 0.8 · (golden passes 4 of 5) · (its golden tests catch every wrong
    # program) = 1.84.
    env = coder_tester(sandbox, turn_rewards="paper", allow_reward_holes=True)
    totals = play(env, scripted({"coder": [GOLDEN], "tester": [STALLING_TESTS]}))
    assert env.episode_metrics()["turns"] == 4.0
    assert totals == pytest.approx({"coder": 4 * 2.0, "tester": 4 * 1.84})
    assert sum(totals.values()) > 4.0


def test_coder_tester_stalling_earns_no_more_than_solving(sandbox):
    env = coder_tester(sandbox)
    solved = play(env, scripted({"coder": [GOLDEN], "tester": [GOLDEN_TESTS]}))
    assert env.episode_metrics()["turns"] == 1.0
    assert solved == pytest.approx({"coder": 2.0, "tester": 2.0})

    env = coder_tester(sandbox)
    stalled = play(env, scripted({"coder": [GOLDEN], "tester": [STALLING_TESTS]}))
    assert env.episode_metrics()["turns"] == 4.0
    assert rewards_by_turn(env, "coder") == pytest.approx([2.0, 0.0, 0.0, 0.0])
    assert rewards_by_turn(env, "tester") == pytest.approx([1.84, 0.0, 0.0, 0.0])
    assert stalled == pytest.approx({"coder": 2.0, "tester": 1.84})
    for agent in ("coder", "tester"):
        assert stalled[agent] <= solved[agent]
        assert max(rewards_by_turn(env, agent)) <= solved[agent]


def test_coder_tester_a_turns_group_still_prefers_the_golden_code(sandbox):
    env = coder_tester(sandbox, tester_reward="paper")
    env.reset(seed=0)
    env.step(GOLDEN)
    env.step(STALLING_TESTS)  # turn 1: coder level 2.0
    scores = {}
    for name, reply in {"golden": GOLDEN, "half right": HALF_RIGHT}.items():
        clone = env.clone()
        clone.step(reply)
        scores[name] = clone.records[-1].reward
    # half right: level 0.5 + (0.1 + 0.1 + 0.8 · 0.5) = 1.1, paid 1.1 - 2.0
    assert scores == pytest.approx({"golden": 0.0, "half right": -0.9})


# ---------------------------------------------------------------------------------------------
# the option


@pytest.mark.parametrize("env_class", [ReasonerToolEnv, CoderTesterEnv])
def test_the_papers_turn_rewards_need_allow_reward_holes(env_class):
    source = ListSource([TWELVE if env_class is ReasonerToolEnv else ADD])
    with pytest.raises(ValueError, match="allow_reward_holes=True"):
        env_class(task_source=source, turn_rewards="paper")
    with pytest.raises(ValueError, match="turn_rewards must be one of"):
        env_class(task_source=source, turn_rewards="absolute")
    # One turn, or one agent: nothing is paid twice, so the paper's reward is the same and allowed.
    env_class(task_source=source, turn_rewards="paper", max_turns=1)
    env_class(task_source=source, turn_rewards="paper", agents="single")
    env_class(task_source=source, turn_rewards="paper", allow_reward_holes=True)
