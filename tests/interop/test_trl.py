"""The TRL recipe (examples/trl_grpo.py): TRL's GRPOTrainer runs two steps on the CPU with a
tiny random model, rewarded by our environment; the reward function pays what the environment
pays (the reference answer solves, nonsense earns the format penalty)."""

from __future__ import annotations

import math

import pytest

from tests.scripts import load_script

pytest.importorskip("trl", reason="the trl extra is not installed")

import llm_envs  # noqa: E402
from llm_envs.agents.spec import build_agent  # noqa: E402

OPTIONS = {"agents": "single", "max_turns": 1}


@pytest.fixture(scope="module")
def recipe():
    return load_script("examples/trl_grpo.py")


def test_the_reward_function_pays_what_the_environment_pays(recipe):
    reward = recipe.make_reward_function("llm/PlanPath-v0", OPTIONS, "solver", {}, build_agent("reference"))
    env = llm_envs.make("llm/PlanPath-v0", **OPTIONS)
    env.reset(seed=3)
    solution = env.reference_action("solver")
    env.step(solution)
    solved = env.records[-1].reward
    env.reset(seed=3)
    env.step("no idea")
    nonsense = env.records[-1].reward
    assert solved > nonsense
    got = reward([[{"role": "assistant", "content": solution}], "no idea"], seed=[3, 3])
    assert got == pytest.approx([solved, nonsense])


def test_two_grpo_steps_on_cpu(recipe, tmp_path):
    trainer = recipe.main([
        "--model", "tiny", "--steps", "2", "--episodes", "4", "--num-generations", "2", "--batch-size", "2",
        "--max-completion-length", "8", "--learning-rate", "1e-3", "--output-dir", str(tmp_path),
    ])
    assert trainer.state.global_step == 2
    logged = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logged) == 2 and all(math.isfinite(row["reward"]) for row in logged)
    assert any(key.startswith("rewards/reward_PlanPath") for key in logged[0])


def test_a_fixed_agent_that_failed_is_not_played_as_an_empty_move(recipe):
    """The failed agent reports ``AgentOutput.error`` with ``text=""`` (an HTTP 429): the
    reward is None (not judged), never the reward of an episode with an empty move in it."""
    from llm_envs.agents.base import Agent, AgentOutput

    class Failing(Agent):
        def act_batch(self, requests):
            return [AgentOutput(text="", error="HTTP 429", meta={"error_kind": "rate_limited"}) for _ in requests]

    env = llm_envs.make("llm/PlanPath-v0")  # two agents: the tool moves first
    env.reset(seed=0)
    first, trained = env.agent_selection, "plan"
    assert first == "tool"
    reward = recipe.make_reward_function("llm/PlanPath-v0", {}, trained, {first: Failing()}, Failing())
    assert reward(["anything"], seed=[0]) == [None]
