"""The signalling testbed environment: pure rules and the AEC layer."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import llm_envs
from llm_envs.envs.signalling import rules
from llm_envs.envs.signalling.env import SignallingEnv
from llm_envs.envs.signalling.rules import SignallingConfig

SYM = rules.DEFAULT_SYMBOLS


def test_parse_symbol_takes_the_first_symbol_word():
    assert rules.parse_symbol("I say Blue, then red", SYM) == "blue"
    assert rules.parse_symbol("reddish bluegreen", SYM) is None  # whole words only
    assert rules.parse_symbol("", SYM) is None
    assert rules.parse_symbol("\x00 yellow!!", SYM) == "yellow"


def test_reward_functions():
    assert rules.speaker_local_reward("red", "red") == 1.0
    assert rules.speaker_local_reward("blue", "red") == 0.0
    assert rules.speaker_local_reward(None, "red") == 0.0
    assert rules.listener_local_reward("red", "red") == 1.0
    assert rules.listener_local_reward(None, None) == 0.0
    assert rules.team_reward("green", "green") == 1.0 and rules.team_reward(None, "green") == 0.0


def test_config_validation():
    with pytest.raises(ValueError):
        SignallingConfig(symbols=("a",))
    with pytest.raises(ValueError):
        SignallingConfig(symbols=("Red", "blue"))
    with pytest.raises(ValueError):
        SignallingConfig(rounds=0)
    with pytest.raises(ValueError):
        SignallingConfig(format_penalty=0.5)
    # A negative weight pays a wrong answer (alpha=-1: the listener missing the target).
    for name in ("alpha", "speaker_local_weight", "listener_local_weight"):
        with pytest.raises(ValueError, match=name):
            SignallingConfig(**{name: -1.0})
    with pytest.raises(TypeError, match="valid options"):
        SignallingEnv(colour="red")


def test_the_symbol_is_read_from_the_message_the_listener_sees():
    # A word cut at the clip ("red" + "dish") is what the listener reads: the speaker is paid,
    # and the state shows, that symbol, not one read from text the listener never sees.
    env = SignallingEnv(speaker_local_weight=1.0, alpha=0.0)
    env.reset(seed=0)
    target = env._targets[0]
    other = next(s for s in env.config.symbols if s != target and not target.startswith(s))
    message = "x" * (rules.MAX_MESSAGE_CHARS - len(other) - 1) + " " + other + "dish, I mean " + target
    env.step(message)
    assert rules.clip_message(message).endswith(" " + other)
    assert env.records[-1].parsed["symbol"] == other and env.records[-1].reward == 0.0


def _play(env, actions):
    """Play the given actions in order (dead steps handled); return PettingZoo's reward sums."""
    totals = {a: 0.0 for a in env.possible_agents}
    it = iter(actions)
    for agent in env.agent_iter():
        _, reward, term, trunc, _ = env.last()
        totals[agent] += reward
        env.step(None if term or trunc else next(it))
    return totals


def test_rewards_with_delayed_team_credit_and_weights():
    env = SignallingEnv(rounds=2, listener_local_weight=0.5, alpha=2.0)
    env.reset(seed=1)
    targets = list(env._targets)
    wrong = next(s for s in SYM if s != targets[1])
    totals = _play(env, [targets[0], targets[0], wrong, wrong])
    r = env.records
    assert [x.agent for x in r] == ["speaker", "listener", "speaker", "listener"]
    assert [x.turn for x in r] == [0, 0, 1, 1]
    assert r[0].reward_components == {"local": 1.0, "team": 2.0}      # team credited later
    assert r[1].reward_components == {"team": 2.0, "local": 0.5}
    assert r[2].reward_components == {"local": 0.0, "team": 0.0}
    assert r[3].reward_components == {"team": 0.0, "local": 0.5}      # followed a wrong message
    assert env.episode_metrics()["success"] == 0.5
    # PettingZoo's rewards and the records agree per agent
    assert totals == pytest.approx(env.agent_rewards())


def test_format_penalty_and_prompts():
    env = SignallingEnv(format_penalty=-0.25)
    env.reset(seed=0)
    assert env.observe("speaker")["prompt"].startswith("Target: ")
    assert env.observe("listener")["prompt"] == "Waiting for the speaker."
    env.step("no symbols here")
    assert env.records[0].format_ok is False and env.records[0].reward == -0.25
    assert env.observe("listener")["prompt"] == "Message: no symbols here"
    env.step("")
    assert env.records[1].reward == pytest.approx(-0.25) and env.episode_over


def test_reference_agent_always_succeeds_and_random_agent_is_well_formed():
    from llm_envs.agents import RandomAgent, ReferenceAgent
    from llm_envs.agents.base import ActRequest

    env = SignallingEnv(rounds=3)
    rng_agent = RandomAgent(seed=0)
    for seed in range(20):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            _, _, term, trunc, _ = env.last()
            env.step(None if term or trunc else ReferenceAgent().act(env.observe(agent), agent, env))
        assert env.episode_metrics()["success"] == 1.0
        env.reset(seed=seed)
        env.step(rng_agent.act_batch([ActRequest(env.observe("speaker"), "speaker", env)])[0].text)
        assert env.records[0].format_ok


def test_clone_is_independent():
    env = SignallingEnv(rounds=2)
    env.reset(seed=4)
    clone = env.clone()
    clone.step("red")
    assert len(env.records) == 0 and len(clone.records) == 1
    assert clone.episode_id == env.episode_id


def test_pettingzoo_api_and_seed_tests():
    from pettingzoo.test import api_test, seed_test

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        api_test(llm_envs.make("llm/Signalling-v0", rounds=2), num_cycles=50)
        seed_test(lambda **kw: llm_envs.make("llm/Signalling-v0", rounds=3), num_cycles=20)


def test_seeded_targets_are_reproducible_and_cover_all_symbols():
    env = SignallingEnv()
    seen = []
    for seed in range(200):
        env.reset(seed=seed)
        seen.append(env._targets[0])
    env.reset(seed=7)
    first = env._targets[0]
    env.reset(seed=7)
    assert env._targets[0] == first
    counts = np.array([seen.count(s) for s in SYM])
    assert counts.min() > 25  # roughly uniform over the 4 symbols


def test_environment_does_not_import_torch():
    code = "import sys, llm_envs; e = llm_envs.make('llm/Signalling-v0'); e.reset(seed=0); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
