"""play_fixed_agents: the one check that a fixed (not trained) agent produced an action, shared
by the verifiers adapter and examples/trl_grpo.py (the trainer's rollout batches the same
check, output_failure). A failed agent reports ``AgentOutput.error`` with ``text=""``: that
must raise, never be played as an empty move."""

from __future__ import annotations

import pytest

from llm_envs.agents import AgentError, ReferenceAgent
from llm_envs.agents.base import Agent, AgentOutput, play_fixed_agents
from tests.runner.toy_envs import SumsEnv


class RateLimited(Agent):
    name = "rate-limited"

    def act_batch(self, requests):
        return [AgentOutput(text="", error="HTTP 429: slow down", meta={"error_kind": "rate_limited", "status": 429})
                for _ in requests]


def test_a_failed_fixed_agent_raises_and_nothing_is_played():
    env = SumsEnv()
    env.reset(seed=0)
    with pytest.raises(AgentError, match="'alice' gave no action: HTTP 429") as raised:
        play_fixed_agents(env, {"alice": RateLimited(), "bob": ReferenceAgent()}, until=None)
    assert raised.value.kind == "rate_limited" and raised.value.status == 429
    assert env.records == []  # no empty move was played


def test_fixed_agents_play_until_the_trained_agent_is_to_act_and_to_the_end():
    env = SumsEnv()
    env.reset(seed=0)
    reference = ReferenceAgent()
    play_fixed_agents(env, {"alice": reference}, until="bob")
    assert env.agent_selection == "bob" and [r.agent for r in env.records] == ["alice"]
    play_fixed_agents(env, {"alice": reference, "bob": reference})
    assert env.episode_over and all(r.format_ok for r in env.records)
