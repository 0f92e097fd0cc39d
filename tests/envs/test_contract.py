"""The contract every registered environment must honour (parametrized over the registry).

PettingZoo's own ``api_test``, ``seed_test`` and ``render_test`` run unmodified; on top of them:
clone independence, fuzzed actions never raising, records agreeing with PettingZoo's rewards,
seeding that ignores the global RNGs, and reference agents that solve the task.
"""

from __future__ import annotations

import functools
import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, render_test, seed_test

import llm_envs
from llm_envs.agents import RandomAgent, ReferenceAgent
from tests.envs.helpers import agent_policy, play

ENV_IDS = llm_envs.env_ids()


def make(env_id, **kwargs):
    return llm_envs.make(env_id, **kwargs)


reference_policy = agent_policy(ReferenceAgent())


def random_policy_factory(seed):
    return agent_policy(RandomAgent(seed))


@pytest.fixture(autouse=True)
def _quiet_style_warnings():
    # api_test warns about text spaces not being Box/Discrete and about agent naming; those are
    # style advice for numeric environments, not contract violations.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_api_test(env_id):
    api_test(make(env_id), num_cycles=300)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_seed_test(env_id):
    seed_test(functools.partial(make, env_id), num_cycles=100)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pettingzoo_render_test(env_id):
    render_test(lambda render_mode=None: make(env_id, render_mode=render_mode))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_last_before_reset_is_a_clear_error_and_state_is_pettingzoos(env_id):
    from llm_envs.core.env import EnvStateError

    env = make(env_id)
    with pytest.raises(EnvStateError):
        env.last()
    with pytest.raises(EnvStateError):
        env.agent_iter()
    env.reset(seed=0)
    # PettingZoo's state(): a global view, or NotImplementedError where there is none (an
    # attribute of the environment's own called `state` made it "not callable").
    try:
        env.state()
    except NotImplementedError:
        pass


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_observations_are_valid_for_every_agent_at_any_time(env_id):
    env = make(env_id)
    env.reset(seed=0)
    for agent in env.agent_iter(max_iter=10_000):
        for other in env.possible_agents:
            obs = env.observe(other)
            assert env.observation_space(other).contains(obs)
            assert isinstance(obs["prompt"], str) and isinstance(obs["instruction"], str)
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else reference_policy(env, agent))
    for other in env.possible_agents:
        assert env.observation_space(other).contains(env.observe(other))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_a_clones_spaces_sample_independently(env_id):
    """Seeding or sampling a clone's action and observation spaces never moves the original's
    (they were one object: the clone's seed changed what the original sampled next)."""
    env = make(env_id)
    env.reset(seed=0)
    agent = env.possible_agents[0]
    env.action_space(agent).seed(1)
    expected = make(env_id)
    expected.action_space(agent).seed(1)
    twin = env.clone()
    assert twin.action_space(agent) is not env.action_space(agent)
    assert twin.observation_space(agent) is not env.observation_space(agent)
    twin.action_space(agent).seed(99)
    twin.action_space(agent).sample()
    assert env.action_space(agent).sample() == expected.action_space(agent).sample()
    state_space = getattr(env.unwrapped, "state_space", None)
    if callable(state_space):  # the numeric view's state tensor space (OpenSpiel's was shared)
        assert twin.unwrapped.state_space() is not state_space()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_says_which_options_it_does_not_read(env_id):
    """A mistyped option, or ``problem_index`` where problems are not chosen by index, was
    silently ignored (Debate played its seed's problem for ``problem_index=5``). It is still
    not read (PettingZoo's api_test resets with ``{"options": 1}``), with a warning that names
    the options the environment reads; a ``problem_index`` must be an integer in range."""
    from llm_envs.core import UnreadResetOptionWarning

    env = make(env_id)
    accepted = env.unwrapped.reset_options
    assert accepted is not None, "every registered environment declares its reset options"
    with pytest.warns(UnreadResetOptionWarning, match=r"\['probelm_index'\] not read"):
        env.reset(seed=1, options={"probelm_index": 5})
    if "problem_index" not in accepted:
        with pytest.warns(UnreadResetOptionWarning, match="problem_index"):
            env.reset(seed=1, options={"problem_index": 5})
    else:
        env.reset(seed=1, options={"problem_index": 5})
        assert env.unwrapped.problem.id == env.unwrapped.task_source.get(5).id
        for bad in (True, 1.9, "1", -1, len(env.unwrapped.task_source)):
            with pytest.raises((TypeError, ValueError), match="problem_index"):
                env.reset(seed=1, options={"problem_index": bad})


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_clone_is_independent(env_id):
    env = make(env_id)
    env.reset(seed=1)
    rng_policy = random_policy_factory(7)
    # Advance a little so that the clone carries real state.
    for _ in range(2):
        if not env.agents or env.episode_over:
            break
        env.step(rng_policy(env, env.agent_selection))
    before = env.transcript()
    twin = env.clone()
    twin_actions = []
    while twin.agents:
        agent = twin.agent_selection
        dead = twin.terminations[agent] or twin.truncations[agent]
        action = None if dead else reference_policy(twin, agent)
        twin_actions.append(action)
        twin.step(action)
    assert env.transcript() == before, "stepping a clone changed the original"
    # The same actions on the original reproduce the clone's episode.
    for action in twin_actions:
        env.step(action)
    assert env.transcript() == twin.transcript()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_record_sums_equal_pettingzoo_rewards(env_id):
    env = make(env_id)
    for seed, policy in [(0, reference_policy), (1, random_policy_factory(1))]:
        totals = play(env, policy, seed)
        assert totals == pytest.approx(env.agent_rewards(), abs=1e-9)
        assert all(record.final for record in env.records)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_episode_whatever_the_global_rngs(env_id):
    transcripts = []
    for global_seed in (123, 456):
        random.seed(global_seed)
        np.random.seed(global_seed)
        env = make(env_id)
        play(env, random_policy_factory(3), seed=17)
        transcripts.append(env.transcript())
    assert transcripts[0] == transcripts[1]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reference_agents_solve_and_random_agents_do_worse(env_id):
    env = make(env_id)
    seeds = range(3)
    reference = []
    for seed in seeds:
        play(env, reference_policy, seed)
        reference.append(env.episode_metrics()["success"])
    randoms = []
    for seed in seeds:
        play(env, random_policy_factory(seed), seed)
        randoms.append(env.episode_metrics()["success"])
    assert reference == [1.0] * len(reference), f"reference agents failed: {reference}"
    assert np.mean(randoms) <= np.mean(reference)


FUZZ_TEXT = st.one_of(
    st.just(""),
    st.just("x" * (1 << 20)),
    st.text(max_size=200),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=31), max_size=50),
    st.sampled_from(
        [
            "```python\nimport os\nos.system('echo hi')\n```",
            "<answer></answer><answer>1</answer>",
            "<score>9999999999999999999</score>",
            "<question>?</question>",
            "\\boxed{\\frac{1}{0}}",
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
            "\x00\x1b[2J\ud7ff\ufffd",
            "(" * 5000,
        ]
    ),
)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_fuzzed_actions_never_raise(env_id):
    env = make(env_id)

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(actions=st.lists(FUZZ_TEXT, min_size=1, max_size=6), seed=st.integers(0, 3))
    def run(actions, seed):
        env.reset(seed=seed)
        for action in actions:
            if not env.agents:
                break
            agent = env.agent_selection
            dead = env.terminations[agent] or env.truncations[agent]
            env.step(None if dead else action)
            assert env.observation_space(agent).contains(env.observe(agent))
        assert all(isinstance(r.reward, float) for r in env.records)

    run()


def _env_classes():
    classes = {}
    for env_id in ENV_IDS:
        try:
            cls = llm_envs.registry.entry(env_id).load()
        except ImportError:  # an optional backend (the games) not installed
            continue
        if getattr(cls, "config_class", None) is not None:
            classes[cls.__name__] = cls
    return sorted(classes.items())


@pytest.mark.parametrize(("name", "cls"), _env_classes())
def test_every_number_of_a_config_is_checked_for_what_no_comparison_catches(name, cls):
    # NaN passes every `x < 0` check and inf every `x <= 0`: each float option refuses both, and
    # an int option refuses a float (max_turns=2.5), before anything is built.
    import dataclasses

    fields = dataclasses.fields(cls.config_class)
    floats = [f.name for f in fields if type(getattr(cls.config_class(), f.name)) is float]
    ints = [f.name for f in fields if type(getattr(cls.config_class(), f.name)) is int]
    for field in floats:
        for bad in (float("nan"), float("inf"), -float("inf")):
            with pytest.raises(ValueError, match=field):
                cls._build_config(None, {field: bad})
        with pytest.raises(TypeError, match=f"{field} must be a number, got 'abc'"):
            cls._build_config(None, {field: "abc"})  # (an --env-arg that is not a number)
    for field in ints:
        with pytest.raises(TypeError, match=field):
            cls._build_config(None, {field: 2.5})
    assert floats or ints or name in ("TextArenaEnv",), name  # every config has numbers to check


def test_a_non_finite_option_is_refused_by_make():
    with pytest.raises(ValueError, match="alpha must be a finite number"):
        make("llm/ReasonerTool-v0", alpha=float("nan"))
    with pytest.raises(ValueError, match="program_time_s"):
        make("llm/ReasonerTool-v0", program_time_s=float("nan"))
    with pytest.raises(TypeError, match="num_solver_samples must be an integer"):
        make("llm/ProposerSolverJudge-v0", num_solver_samples=2.5)


def test_a_bool_for_a_number_and_text_for_a_group_of_options_are_refused_by_make():
    # (``--env-arg rows=true`` reached numpy as True; ``rewards=foo`` failed mid-episode)
    with pytest.raises(TypeError, match="rows must be a number"):
        make("llm/PlanPath-v0", rows=True)
    with pytest.raises(TypeError, match="max_turns must be a number"):
        make("llm/Sudoku-v0", max_turns=True)
    with pytest.raises(TypeError, match="rewards must be a PathRewards"):
        make("llm/PlanPath-v0", rewards="foo")


def test_human_rendering_prints_a_lone_surrogate_as_its_escape(capsys):
    env = make("llm/Debate-v0", render_mode="human")
    env.reset(seed=0)
    env.step("my answer \ud800 is 4")
    env.render()
    assert "\\ud800" in capsys.readouterr().out
