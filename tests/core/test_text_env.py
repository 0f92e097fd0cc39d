"""The TextEnv base class on its own, through a minimal environment."""

from __future__ import annotations

import functools

import pytest
from pettingzoo.test import api_test, render_test, seed_test

from llm_envs.core import EnvStateError, to_chat_messages
from tests.core.toy_env import GuessConfig, GuessEnv


def play(env, policy):
    """Play one episode; return the per-agent sums of the rewards PettingZoo reported."""
    totals = {a: 0.0 for a in env.possible_agents}
    for agent in env.agent_iter():
        _, reward, terminated, truncated, _ = env.last()
        totals[agent] += reward
        env.step(None if terminated or truncated else policy(env, agent))
    return totals


def test_pettingzoo_tests_pass_on_the_base_class():
    api_test(GuessEnv(), num_cycles=200)
    seed_test(functools.partial(GuessEnv))
    render_test(lambda render_mode=None: GuessEnv(render_mode=render_mode))


def test_delayed_credit_lands_on_the_earlier_record_and_sums_agree():
    env = GuessEnv()
    env.reset(seed=3)
    totals = play(env, lambda e, a: e.reference_action(a))
    guess = env.records[0]
    assert guess.agent == "guesser"
    assert guess.reward_components == {"outcome": 1.0}
    assert env.records[1].reward_components == {"check": 0.5}
    assert totals == pytest.approx(env.agent_rewards())
    assert all(r.final for r in env.records)
    assert env.episode_metrics()["success"] == 1.0


def test_wrong_guesses_truncate_at_the_turn_limit():
    env = GuessEnv(max_turns=2)
    env.reset(seed=0)
    wrong = str((env.target + 1) % 10)
    totals = play(env, lambda e, a: wrong if a == "guesser" else "nonsense")
    assert env.turn == 2
    assert totals == {"guesser": 0.0, "checker": -1.0}
    assert not env.agents  # every agent went through its dead step


def test_clone_is_independent_and_replays_identically():
    env = GuessEnv()
    env.reset(seed=5)
    env.step("1")
    twin = env.clone()
    assert twin.np_random is not env.np_random
    twin.step("1")
    assert len(env.records) == 1 and len(twin.records) == 2
    env.step("1")
    assert env.transcript() == twin.transcript()
    assert twin.np_random.integers(1 << 30) == env.np_random.integers(1 << 30)


def test_misuse_gives_clear_errors():
    env = GuessEnv()
    with pytest.raises(EnvStateError, match="reset"):
        env.step("1")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="str"):
        env.step(42)
    with pytest.raises(KeyError):
        env.observe("nobody")
    with pytest.raises(TypeError, match="unknown option"):
        GuessEnv(max_turnz=3)
    with pytest.raises(ValueError, match="render_mode"):
        GuessEnv(render_mode="rgb_array")


def test_a_credit_that_is_not_a_finite_number_is_refused():
    # (a NaN reward reached the trainer, where one update wrote NaN into every weight)
    env = GuessEnv()
    env.reset(seed=0)
    env.step("1")
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="must be a finite number"):
            env._credit(env.records[-1], "check", bad)
    assert env.records[-1].reward == 0.0 and env.rewards == {agent: 0.0 for agent in env.agents}


def test_config_overrides_and_instances():
    assert GuessEnv(GuessConfig(upper=3), max_turns=7).config == GuessConfig(max_turns=7, upper=3)


def test_chat_messages_from_an_observation():
    env = GuessEnv()
    env.reset(seed=0)
    messages = to_chat_messages(env.observe("guesser"))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "guesser" in messages[0]["content"]
    assert to_chat_messages({"instruction": "", "prompt": "hi"}) == [{"role": "user", "content": "hi"}]


def test_seeding_ignores_global_rngs():
    import random

    import numpy as np

    env = GuessEnv()
    random.seed(1)
    np.random.seed(1)
    env.reset(seed=11)
    first = env.target
    random.seed(2)
    np.random.seed(2)
    env.reset(seed=11)
    assert env.target == first
