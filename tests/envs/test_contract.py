"""The contract every registered environment must honour (parametrized over the registry).

PettingZoo's own ``api_test``, ``seed_test`` and ``render_test`` run unmodified; on top of them:
clone independence at every decision point, fuzzed actions never raising, one record per action
agreeing with PettingZoo's rewards, seeding that ignores the global RNGs, reset options read
exactly as declared, and reference agents that solve every episode (20 seeds; fewer where an
episode is expensive, see ``reference_seeds``). tests/envs/test_add_env_guide.py plays broken
variants of a small environment through these tests: each must fail.
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


def snapshot(env, *, transcript: bool = False) -> dict[str, str]:
    """What an agent, a runner or a trainer can read of the episode now, the instance generator
    included, as text (two snapshots compare even where a metric is NaN). Without the time a
    step took (a record's ``*_s`` info: the sandbox's wall time) and, unless asked, the
    transcript (made of the records and metrics compared here; the costliest part)."""
    try:
        state = repr(env.state())
    except NotImplementedError:
        state = "-"
    records = [
        (r.index, r.agent, r.role, r.turn, r.action, r.parsed, r.format_ok, r.reward_components, r.reward,
         r.final, {k: v for k, v in r.info.items() if not str(k).endswith("_s")}, r.credits)
        for r in env.records
    ]
    view = {
        "agents": repr((env.agents, env.agent_selection)),
        "observations": repr({a: env.observe(a) for a in env.possible_agents}),
        "rewards": repr((env.rewards, env._cumulative_rewards)),
        "terminations": repr((env.terminations, env.truncations)),
        "infos": repr(env.infos),
        "state": state,
        "records": repr(records),
        "metrics": repr(env.episode_metrics()),
        "generator": repr(env.unwrapped.np_random.bit_generator.state),
    }
    if transcript:
        view["transcript"] = env.transcript()
    return view


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return [key for key in before if before[key] != after.get(key)]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_clone_is_independent(env_id):
    """At every decision point of an episode, right after reset included: a clone starts equal
    to its original; the clone stepped with another action leaves everything of the original
    as it was, and the original stepped with the reference's leaves the clone as it was. A
    clone taken at reset and given the original's actions ends in the same state, generator
    included. (Cloning only after two steps missed state shared by every instance: a
    two-action episode was over by then.)"""
    env = make(env_id)
    env.reset(seed=1)
    first = env.clone()
    rng = np.random.default_rng(7)
    now = snapshot(env)
    for point in range(10_000):
        if not env.agents:
            break
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            first.step(None)
            env.step(None)
            now = snapshot(env)
            continue
        twin = env.clone()
        differs = changed(now, snapshot(twin))
        assert differs == [], f"decision point {point}: a clone differs from its original in {differs}"
        action = reference_policy(env, agent)
        # Another action than the original's: a random one, else a malformed one.
        other = next(a for a in (env.random_action(agent, rng), "", "?") if a != action)
        twin.step(other)
        differs = changed(now, snapshot(env))
        assert differs == [], f"decision point {point}: stepping a clone ({agent}: {other!r:.60}) changed the original's {differs}"
        twin_now = snapshot(twin)
        # The clone from reset steps first: it never commits to a shared pool, the original
        # does when its episode ends (Proposer–Solver–Judge), which would change its replay.
        first.step(action)
        env.step(action)
        differs = changed(twin_now, snapshot(twin))
        assert differs == [], f"decision point {point}: stepping the original ({agent}: {action!r:.60}) changed its clone's {differs}"
        now = snapshot(env)
    # (infos aside: a clone that does not commit to a shared pool says so there.)
    differs = [key for key in changed(snapshot(env, transcript=True), snapshot(first, transcript=True)) if key != "infos"]
    assert differs == [], f"a clone taken at reset, given the same actions, ends with another {differs}"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_record_sums_equal_pettingzoo_rewards(env_id):
    """Each agent's records sum to the rewards PettingZoo reported to it, every record is final
    once the episode ends, and there is one record per action, in order of play, holding the
    action as played (besides the *passive* records of players who earned a reward without
    acting, marked so in their info)."""
    env = make(env_id)
    for seed, policy in [(0, reference_policy), (1, random_policy_factory(1))]:
        played = []

        def playing(env, agent, policy=policy, played=played):
            played.append((agent, policy(env, agent)))
            return played[-1][1]

        totals = play(env, playing, seed)
        assert totals == pytest.approx(env.agent_rewards(), abs=1e-9)
        records = list(env.records)
        assert all(record.final for record in records)
        acted = [(r.agent, r.action) for r in records if not r.info.get("passive")]
        assert acted == played, f"seed {seed}: {len(acted)} records of actions for {len(played)} actions played"
        assert [r.index for r in records] == list(range(len(records)))


def global_rng_states() -> tuple:
    state = np.random.get_state()
    return random.getstate(), state[0], state[1].tolist(), *state[2:]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_episode_whatever_the_global_rngs(env_id):
    """The global ``random`` and ``numpy.random`` states are never read (the same seed plays
    the same episode whatever they are) nor changed (making and playing leave the caller's
    states as they were: TextArena's Taboo drew from Python's at construction)."""
    transcripts = []
    for global_seed in (123, 456):
        random.seed(global_seed)
        np.random.seed(global_seed)
        before = global_rng_states()
        env = make(env_id)
        play(env, random_policy_factory(3), seed=17)
        transcripts.append(env.transcript())
        assert global_rng_states() == before, "making or playing the environment changed the global random states"
    assert transcripts[0] == transcripts[1]


#: Seeds the reference agents play. A reference that solves 70% of the episodes passes 20 seeds
#: with probability 0.08% (3 seeds, as before: 34%; a newcomer's reference that was wrong on
#: every even number passed them, its three numbers being odd).
REFERENCE_SEEDS = 20
#: Fewer where an episode is expensive: Coder–Tester runs programs in the sandbox (~0.2 s an
#: episode; 8 seeds: a 70% reference passes with 6%); and the games, whose success says only that
#: the game ended by its rules (nobody lost by invalid moves, no truncation: the reference agents
#: are opponents, not solvers) and whose 36 environments play ~50 ms–0.4 s episodes (10 seeds:
#: 2.8%; TextArena's MemoryGame reference lost by invalid moves on seed 6).
FEWER_REFERENCE_SEEDS = {"llm/CoderTester-v0": 8}
GAME_REFERENCE_SEEDS = 10
#: Seeds the random agents play where they must do worse (task environments).
RANDOM_SEEDS = range(3)


@functools.cache
def is_game(env_id: str) -> bool:
    """No agent's return, nor the team's, is bounded by the reference agents' (the registry's
    local environment: a served one does not say)."""
    env = llm_envs.make(env_id)
    return not any(env.reference_is_ceiling(agent) for agent in [None, *env.possible_agents])


def reference_seeds(env_id: str) -> range:
    if env_id in FEWER_REFERENCE_SEEDS:
        return range(FEWER_REFERENCE_SEEDS[env_id])
    return range(GAME_REFERENCE_SEEDS if is_game(env_id) else REFERENCE_SEEDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reference_agents_solve_and_random_agents_do_worse(env_id):
    """The reference agents solve every episode (README: "the reference agents solve every
    episode"); in a task environment random agents succeed less often. In a game success only
    says that the game ended, which random play does too (the arena compares them there)."""
    env = make(env_id)
    failed = {}
    for seed in reference_seeds(env_id):
        play(env, reference_policy, seed)
        metrics = env.episode_metrics()
        assert {"success", "turns"} <= set(metrics) and 0.0 <= metrics["success"] <= 1.0, f"seed {seed}: {metrics}"
        if metrics["success"] != 1.0:
            failed[seed] = metrics["success"]
    assert not failed, f"reference agents failed on seeds {failed} of {reference_seeds(env_id)}"
    if is_game(env_id):
        return
    randoms = []
    for seed in RANDOM_SEEDS:
        play(env, random_policy_factory(seed), seed)
        assert 0.0 <= env.episode_metrics()["success"] <= 1.0
        randoms.append(env.episode_metrics()["success"])
    assert np.mean(randoms) < 1.0, f"random agents solve as often as the reference: {randoms}"


# (not the games: a player can be left with no legal move, as in TextArena's IndianPoker after a
# bankruptcy, so a random move there cannot always be well formed)
@pytest.mark.parametrize("env_id", [env_id for env_id in ENV_IDS if not is_game(env_id)])
def test_random_actions_are_well_formed(env_id):
    """``random_action`` is "a random but well-formed action" in a task environment (the random
    agents' baseline would otherwise measure format penalties)."""
    env = make(env_id)
    play(env, random_policy_factory(5), seed=5)
    malformed = [(r.agent, r.action[:80]) for r in env.records if not r.format_ok and not r.info.get("passive")]
    assert not malformed, f"random actions not well formed: {malformed}"


RESET_SENTINEL = "contract_suite_sentinel"


class ReadLog(dict):
    """Reset options that log every key looked up (present or not) and whether they were
    iterated over (which reads every key present)."""

    def __init__(self, options):
        super().__init__(options)
        self.read: set = set()
        self.iterated = False

    def _look(self, key):
        self.read.add(key)

    def _iterate(self):
        self.iterated = True
        self.read.update(dict.keys(self))

    def __getitem__(self, key):
        self._look(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._look(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._look(key)
        return super().__contains__(key)

    def pop(self, key, *default):
        self._look(key)
        return super().pop(key, *default)

    def setdefault(self, key, default=None):
        self._look(key)
        return super().setdefault(key, default)

    def __iter__(self):
        self._iterate()
        return super().__iter__()

    def keys(self):
        self._iterate()
        return super().keys()

    def values(self):
        self._iterate()
        return super().values()

    def items(self):
        self._iterate()
        return super().items()


def logged_reset(env, seed, options):
    """``env.reset(seed, options)`` with the options ``_start_episode`` receives logged (the
    environment may keep them and read them later: inspect the log after playing)."""
    inner = env.unwrapped
    start = inner._start_episode
    logs = []

    def logging_start(options):
        logs.append(ReadLog(options))
        return start(logs[-1])

    inner._start_episode = logging_start  # (shadows the method on this instance only)
    try:
        env.reset(seed=seed, options=options)
    finally:
        del inner._start_episode
    return logs[0]


def play_some(env, steps: int = 6) -> None:
    for _ in range(steps):
        if not env.agents:
            return
        agent = env.agent_selection
        env.step(None if env.terminations[agent] or env.truncations[agent] else reference_policy(env, agent))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_reads_the_options_it_declares_and_no_other(env_id):
    """``reset_options`` names the options ``_start_episode`` reads: every key the episode looks
    up is declared (an undeclared one was read while reset warned "not read"), every declared
    key is looked up (one that is not is accepted without a warning and ignored), and an
    undeclared option, warned about, changes nothing of the episode."""
    from llm_envs.core import UnreadResetOptionWarning

    env = make(env_id)
    declared = set(env.unwrapped.reset_options)
    log = logged_reset(env, 1, None)
    play_some(env)
    plain = snapshot(env, transcript=True)
    assert log.read <= declared, (
        f"the episode reads reset option(s) {sorted(log.read - declared)} but reset_options declares "
        f"{sorted(declared)}: reset warns that they are not read"
    )
    if not log.iterated:  # (a copy of the options would read every key without looking any up)
        assert declared <= log.read, (
            f"reset_options declares {sorted(declared - log.read)}, which the episode never looks up: "
            "reset accepts them without a warning and ignores them"
        )
    with pytest.warns(UnreadResetOptionWarning, match=RESET_SENTINEL):
        log = logged_reset(env, 1, {RESET_SENTINEL: object()})
    play_some(env)
    assert RESET_SENTINEL not in log.read, f"the episode read the undeclared option {RESET_SENTINEL!r}"
    differs = changed(plain, snapshot(env, transcript=True))
    assert differs == [], f"an undeclared reset option changed the episode's {differs}"


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
