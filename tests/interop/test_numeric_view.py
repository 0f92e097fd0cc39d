"""NumericView: numeric observations, Discrete/MultiDiscrete actions, fixed-shape infos."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pettingzoo.test import api_test, seed_test

import llm_envs
from llm_envs.interop import (
    CharEncoder,
    NumericView,
    encode_fixed,
    find_catalog,
    find_moves,
    has_state_tensor,
)
from llm_envs.interop.encoding import TokenizerEncoder
from tests.interop.toy_envs import CorridorEnv, GuessEnv, LockEnv, SumsTaskSource

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pettingzoo.test.api_test")

INFO_KEYS = {"turn", "acting", "episode_over", "success"}

VIEWS = {
    "corridor-legal": lambda: NumericView(CorridorEnv(), obs_length=128),
    "corridor-legal-info-mask": lambda: NumericView(CorridorEnv(), obs_length=128, mask_in="info"),
    "corridor-candidates": lambda: NumericView(CorridorEnv(), actions="candidates", num_candidates=3),
    "corridor-text": lambda: NumericView(CorridorEnv(), actions="text", action_length=12, obs_length=64),
    "lock-fixed-state": lambda: NumericView(LockEnv(), observation="state"),
    "lock-legal-from-catalog": lambda: NumericView(LockEnv(), actions="legal", obs_length=64),
    "guess-text-float": lambda: NumericView(GuessEnv(), actions="text", action_length=2, obs_dtype=np.float32),
    "signalling-legal": lambda: NumericView(llm_envs.make("llm/Signalling-v0", rounds=3), obs_length=256),
    "signalling-fixed-state-info-mask": lambda: NumericView(
        llm_envs.make("llm/Signalling-v0", rounds=3), observation="state", mask_in="info"
    ),
    "planpath-single-legal": lambda: NumericView(
        llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=12), actions="legal", obs_length=512
    ),
    "planpath-single-fixed-state": lambda: NumericView(
        llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=12), observation="state"
    ),
    "planpath-multi-fixed-both": lambda: NumericView(
        llm_envs.make("llm/PlanPath-v0", max_turns=4), observation="both", obs_length=256
    ),
    "sokoban-single-fixed-both": lambda: NumericView(
        llm_envs.make("llm/Sokoban-v0", agents="single", max_turns=12), observation="both", obs_length=256
    ),
    "sudoku-single-legal": lambda: NumericView(
        llm_envs.make("llm/Sudoku-v0", agents="single", max_turns=8), actions="legal", obs_length=512
    ),
    "sudoku-single-fixed-state": lambda: NumericView(
        llm_envs.make("llm/Sudoku-v0", agents="single", max_turns=8), observation="state"
    ),
    "debate-candidates": lambda: NumericView(
        llm_envs.make("llm/Debate-v0", task_source=SumsTaskSource()), actions="candidates", obs_length=512
    ),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_pettingzoo_api_and_seed_tests_pass(name):
    make = VIEWS[name]
    api_test(make(), num_cycles=60)
    seed_test(make, num_cycles=60)


def test_puzzle_tool_agent_moves_are_programs_run_in_the_sandbox():
    view = NumericView(llm_envs.make("llm/PlanPath-v0", max_turns=3), obs_length=512)
    view.reset(seed=3)
    assert view.agent_selection == "tool"
    menu = view.menu("tool")  # fixed catalog: one entry per direction, "" where not legal now
    assert len(menu) == 4 and all(move.startswith("```python") for move in menu if move)
    index = int(np.flatnonzero(view.action_mask("tool"))[0])
    view.step(index)
    record = view.unwrapped.records[-1]
    assert record.agent == "tool" and record.parsed["program_status"] == "ok"
    assert record.parsed["plan"] == "UDLR"[index] == menu[index].split("#### ")[1].split("'")[0]
    plan_menu = view.menu("plan")
    assert any(plan_menu) and all(move.startswith("#### ") for move in plan_menu if move)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_spaces_are_equal_across_agents_and_infos_are_tensor_friendly(name):
    view = VIEWS[name]()
    first = view.possible_agents[0]
    for agent in view.possible_agents:
        assert view.observation_space(agent) == view.observation_space(first)
        assert view.action_space(agent) == view.action_space(first)
    view.reset(seed=1)
    rng = np.random.default_rng(0)
    for agent in view.agent_iter(max_iter=40):
        _, _, termination, truncation, _ = view.last()
        for info in view.infos.values():
            keys = set(info) - {"action_mask"}
            assert keys == INFO_KEYS
            for value in info.values():
                torch.as_tensor(value)
        if termination or truncation:
            view.step(None)
            continue
        space = view.action_space(agent)
        if view.actions == "text":
            view.step(space.sample())
        else:
            view.step(int(rng.choice(np.flatnonzero(view.action_mask(agent)))))


def test_discrete_space_is_padded_to_the_largest_menu_and_masks_the_rest():
    view = NumericView(CorridorEnv(length=5))
    assert view.action_space("scout").n == view.action_space("walker").n == CorridorEnv.max_legal_actions
    view.reset(seed=0)
    observation = view.observe("scout")
    assert observation["action_mask"].tolist() == [1, 1, 1]
    assert view.observe("walker")["action_mask"].tolist() == [1, 0, 0]  # not its turn: index 0 only
    view.step(0)
    walker_moves = view.menu("walker")
    assert 1 <= len(walker_moves) <= 2
    assert view.observe("walker")["action_mask"].sum() == len(walker_moves)


def test_an_index_plays_its_menu_text_and_an_illegal_index_plays_the_empty_action():
    view = NumericView(CorridorEnv())
    view.reset(seed=4)
    menu = view.menu("scout")
    view.step(2)
    assert view.unwrapped.records[-1].action == menu[2]
    assert len(view.menu("walker")) <= 2
    view.step(np.int64(2) if len(view.menu("walker")) < 3 else 5)  # masked off: no third move
    record = view.unwrapped.records[-1]
    assert record.action == "" and not record.format_ok
    view.step("hint: left")  # a str is played as is
    assert view.unwrapped.records[-1].action == "hint: left"


def test_text_actions_decode_to_the_text_played():
    encoder = CharEncoder()
    view = NumericView(CorridorEnv(), actions="text", action_length=16, encoder=encoder)
    view.reset(seed=0)
    view.step(encode_fixed(encoder, "hint: right", 16))
    assert view.unwrapped.records[-1].action == "hint: right"
    assert view.action_space("scout").nvec.tolist() == [encoder.vocab_size] * 16


def test_observation_encodes_the_text_and_the_numbered_moves():
    encoder = CharEncoder()
    view = NumericView(CorridorEnv(), obs_length=4096, encoder=encoder)
    view.reset(seed=2)
    decoded = encoder.decode(view.observe("scout")["observation"])
    text = view.unwrapped.observe("scout")
    assert decoded.startswith(text["instruction"] + "\n\n" + text["prompt"])
    assert decoded.endswith("Moves:\n[0] hint: left\n[1] hint: right\n[2] hint: stay")
    tail = NumericView(CorridorEnv(), obs_length=8, encoder=encoder, show_moves=False)
    tail.reset(seed=2)  # a long text keeps its end
    assert encoder.decode(tail.observe("walker")["observation"]) == tail.unwrapped.observe("walker")["prompt"][-8:]


def test_the_text_environment_underneath_is_untouched():
    """The same texts played through the view and on a bare env give the same episode."""
    texts = []
    view = NumericView(CorridorEnv())
    view.reset(seed=7)
    rng = np.random.default_rng(0)
    view_rewards = {a: 0.0 for a in view.possible_agents}
    for agent in view.agent_iter():
        _, reward, termination, truncation, _ = view.last()
        view_rewards[agent] += reward
        if termination or truncation:
            view.step(None)
            continue
        index = int(rng.integers(0, 3))
        menu = view.menu(agent)
        texts.append(menu[index] if index < len(menu) else "")
        view.step(index)
    bare = CorridorEnv()
    bare.reset(seed=7)
    bare_rewards = {a: 0.0 for a in bare.possible_agents}
    played = iter(texts)
    for agent in bare.agent_iter():
        _, reward, termination, truncation, _ = bare.last()
        bare_rewards[agent] += reward
        bare.step(None if termination or truncation else next(played))
    assert view_rewards == pytest.approx(bare_rewards)
    assert [r.action for r in view.unwrapped.records] == [r.action for r in bare.records]
    assert view.unwrapped.agent_rewards() == pytest.approx(bare.agent_rewards())


@pytest.mark.parametrize("make", [lambda: CorridorEnv(), lambda: llm_envs.make("llm/Signalling-v0", rounds=4)])
def test_reference_moves_through_the_discrete_view_succeed(make):
    view = NumericView(make())
    for seed in range(5):
        view.reset(seed=seed)
        for agent in view.agent_iter():
            _, _, termination, truncation, info = view.last()
            if termination or truncation:
                assert info["success"] == 1.0 and info["episode_over"] == 1
                view.step(None)
                continue
            view.step(view.menu(agent).index(view.unwrapped.reference_action(agent)))


def test_candidate_menus_hold_the_reference_and_are_seeded():
    def menus(seed):
        view = NumericView(GuessEnv(), actions="candidates", num_candidates=4)
        view.reset(seed=seed)
        return view.menu("agent_0"), view.menu("agent_1"), view.unwrapped.reference_action("agent_0")

    first, second, reference = menus(5)
    assert reference in first and reference in second
    assert len(first) == len(set(first)) == 4
    assert menus(5)[:2] == (first, second)
    view = NumericView(GuessEnv(), actions="candidates", num_candidates=4)
    view.reset(seed=5)
    shown = view.menu("agent_1")
    view.step(0)  # agent_0 acts; agent_1's menu must stay the one it was shown this cycle
    assert view.menu("agent_1") == shown
    view.step(1)
    assert view.unwrapped.records[-1].action == shown[1]


def test_environments_without_moves_need_another_action_mode():
    with pytest.raises(ValueError, match="candidates"):
        NumericView(GuessEnv())
    view = NumericView(CorridorEnv(), num_actions=2)
    view.reset(seed=0)
    with pytest.raises(ValueError, match="num_actions"):
        view.menu("scout")
    with pytest.raises(TypeError):
        NumericView(object())  # not a text environment


# ------------------------------------------------------------------------------ fixed moves
def test_auto_picks_the_fixed_catalog_then_the_legal_menu():
    assert NumericView(llm_envs.make("llm/PlanPath-v0", agents="single")).actions == "fixed"
    assert NumericView(llm_envs.make("llm/Signalling-v0")).actions == "fixed"
    assert NumericView(LockEnv()).actions == "fixed"
    assert NumericView(CorridorEnv()).actions == "legal"  # a menu but no catalog
    with pytest.raises(ValueError, match="catalog"):
        NumericView(CorridorEnv(), actions="fixed")
    with pytest.raises(ValueError, match="num_actions"):
        NumericView(llm_envs.make("llm/PlanPath-v0"), num_actions=3)
    padded = NumericView(llm_envs.make("llm/PlanPath-v0", agents="single"), num_actions=6)
    padded.reset(seed=0)
    assert padded.action_space("solver").n == 6 and not padded.action_mask("solver")[4:].any()


def played_texts_per_index(actions, episodes=6):
    """Plan-Path episodes with random legal indices: {index: set of texts it played}."""
    view = NumericView(llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=15), actions=actions)
    rng = np.random.default_rng(0)
    played = {}
    for seed in range(episodes):
        view.reset(seed=seed)
        for _agent in view.agent_iter():
            observation, _, termination, truncation, _ = view.last()
            if termination or truncation:
                view.step(None)
                continue
            index = int(rng.choice(np.flatnonzero(observation["action_mask"])))
            view.step(index)
            played.setdefault(index, set()).add(view.unwrapped.records[-1].action)
    return played


def test_a_fixed_index_always_plays_the_same_move_and_a_menu_index_does_not():
    fixed = played_texts_per_index("fixed")
    assert fixed == {0: {"#### U"}, 1: {"#### D"}, 2: {"#### L"}, 3: {"#### R"}}
    legal = played_texts_per_index("legal")
    assert len(legal[0]) > 1  # the compacted menu: index 0 is whichever move is legal first


def test_a_masked_off_fixed_index_plays_the_empty_action():
    view = NumericView(llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=30))
    for seed in range(20):
        view.reset(seed=seed)
        blocked = np.flatnonzero(view.action_mask("solver") == 0)
        if blocked.size:
            break
    assert blocked.size, "no start cell with a blocked step in 20 grids"
    assert view.action_text("solver", int(blocked[0])) == ""
    view.step(int(blocked[0]))
    record = view.unwrapped.records[-1]
    assert record.action == "" and not record.format_ok
    assert view.action_text("solver", 99) == ""  # out of range: the empty action too


def test_masks_for_agents_not_to_act_and_for_agents_without_moves_enable_index_0_only():
    view = NumericView(llm_envs.make("llm/Signalling-v0"))
    view.reset(seed=0)
    assert view.action_mask("speaker").tolist() == [1, 1, 1, 1]
    assert view.action_mask("listener").tolist() == [1, 0, 0, 0]  # not its turn: a placeholder
    lock = NumericView(LockEnv(digits=3, max_turns=5))
    lock.reset(seed=0)
    lock.unwrapped.tried = [0, 1, 2]  # every move used up (a state the env lists as no move)
    assert lock.action_mask("picker").tolist() == [1, 0, 0]
    lock.step(0)
    assert lock.unwrapped.records[-1].action == ""  # the placeholder plays nothing


def test_a_catalog_without_catalog_action_plays_its_entries_and_serves_the_legal_menu():
    view = NumericView(LockEnv(digits=4))
    view.reset(seed=1)
    view.step(2)
    assert view.unwrapped.records[-1].action == "try 2"
    assert view.action_mask("picker").tolist() == [1, 1, 0, 1]
    assert find_moves(LockEnv()).source == "catalog"
    menu_view = NumericView(LockEnv(digits=4), actions="legal")
    menu_view.reset(seed=1)
    menu_view.step(2)
    assert menu_view.menu("picker") == ["try 0", "try 1", "try 3"]  # compacted, catalog order


def test_broken_catalog_hooks_fail_with_a_message_that_names_the_environment():
    view = NumericView(LockEnv(broken_mask=True))
    view.reset(seed=0)
    with pytest.raises(ValueError, match="LockEnv.action_mask.*shape"):
        view.observe("picker")

    class Repeating(LockEnv):
        def action_catalog(self):
            return ["try 0", "try 0"]

    with pytest.raises(ValueError, match="repeats"):
        find_catalog(Repeating())


# ------------------------------------------------------------------------------ observations
def test_state_observations_are_the_environment_state_tensor():
    base = llm_envs.make("llm/Sokoban-v0", agents="single", max_turns=6)
    view = NumericView(base, observation="both", obs_length=256)
    space = view.observation_space("solver")
    assert space["observation"]["state"].shape == (4, 6, 6) and space["observation"]["text"].shape == (256,)
    view.reset(seed=2)
    observation = view.observe("solver")["observation"]
    assert np.array_equal(observation["state"], base.state_tensor("solver"))
    assert space.contains(view.observe("solver"))
    state_only = NumericView(llm_envs.make("llm/Signalling-v0"), observation="state", mask_in="info")
    state_only.reset(seed=0)
    assert state_only.observe("speaker").shape == (12,) and state_only.observe("speaker")[0] == 1
    assert has_state_tensor(base) and not has_state_tensor(CorridorEnv())
    with pytest.raises(ValueError, match="state tensor"):
        NumericView(CorridorEnv(), observation="state")


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("llm/PlanPath-v0", {"agents": "single", "max_turns": 30}),
        ("llm/PlanPath-v0", {"max_turns": 12}),
        ("llm/Sokoban-v0", {"agents": "single", "max_turns": 20}),
        ("llm/Sudoku-v0", {"agents": "single", "max_turns": 14}),
        ("llm/Signalling-v0", {"rounds": 3}),
    ],
    ids=["planpath-single", "planpath-multi", "sokoban", "sudoku", "signalling"],
)
def test_the_default_text_keeps_the_whole_state_at_every_turn_at_obs_length_256(env_id, kwargs):
    """The issue: with keep='end' the grid was cut away at reset (obs_length=256) or from
    turn 16 on (2048). With the default keep='state' it is always there, whole, first."""
    encoder = CharEncoder()
    view = NumericView(llm_envs.make(env_id, **kwargs), obs_length=256, encoder=encoder)
    rng = np.random.default_rng(0)
    view.reset(seed=5)
    steps = 0
    for _agent in view.agent_iter():
        for other in view.possible_agents:
            if other in view.agents:
                decoded = encoder.decode(view.observe(other)["observation"])
                assert decoded.startswith(view.unwrapped.state_text(other) + "\n\n")
        observation, _, termination, truncation, _ = view.last()
        if termination or truncation:
            view.step(None)
            continue
        view.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))
        steps += 1
    assert steps >= 3


def test_keeping_the_end_loses_the_grid_which_is_why_it_is_not_the_default():
    encoder = CharEncoder()
    base = llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=30)
    view = NumericView(base, obs_length=256, encoder=encoder, keep="end")
    view.reset(seed=5)
    grid = base.rules.puzzle_text(base.puzzle_state)
    assert grid not in encoder.decode(view.observe("solver")["observation"])


def test_a_state_longer_than_obs_length_is_an_error_not_a_silent_cut():
    view = NumericView(llm_envs.make("llm/PlanPath-v0", agents="single"), obs_length=64)
    view.reset(seed=0)
    with pytest.raises(ValueError, match="obs_length"):
        view.observe("solver")


# ------------------------------------------------------------------------------ every environment
def registered_view(env_id, mask_in):
    env = llm_envs.make(env_id)
    actions = "auto" if find_catalog(env) is not None or find_moves(env) is not None else "candidates"
    observation = "both" if has_state_tensor(env) else "text"
    return NumericView(env, actions=actions, observation=observation, obs_length=256, mask_in=mask_in)


# TextArena's games share one adapter (and the contract suite plays every one of them): a few
# of different shapes stand for the rest here, where each costs seconds of candidate search.
TEXTARENA_SAMPLE = ("textarena/TicTacToe-v0", "textarena/KuhnPoker-v0", "textarena/SimpleNegotiation-v0",
                    "textarena/ThreePlayerTicTacToe-v0")
VIEW_ENV_IDS = [e for e in llm_envs.env_ids() if not e.startswith("textarena/") or e in TEXTARENA_SAMPLE]


@pytest.mark.parametrize("mask_in", ["observation", "info"])
@pytest.mark.parametrize("env_id", VIEW_ENV_IDS)
def test_registered_environments_pass_the_api_test_as_a_numeric_view(env_id, mask_in):
    view = registered_view(env_id, mask_in)
    if env_id in ("llm/PlanPath-v0", "llm/Sokoban-v0", "llm/Sudoku-v0", "llm/Signalling-v0"):
        assert view.actions == "fixed" and view.observation == "both"
    api_test(view, num_cycles=20)


def test_two_debate_questions_that_differ_in_their_operator_are_two_observations(caplog):
    # Seeds 1233 and 1323: "Compute 2/7 − 3/2" and "Compute 2/7 ÷ 3/2" (answers -17/14, 4/21)
    # were one array with the default encoder; no numeric policy could tell them apart.
    view = NumericView(llm_envs.make("llm/Debate-v0"), actions="text")
    observations = []
    for seed in (1233, 1323):
        view.reset(seed=seed)
        observations.append(view.observe(view.agent_selection).copy())
    assert not np.array_equal(observations[0], observations[1])
    # A character outside the charset is reported once, naming it.
    emoji = NumericView(llm_envs.make("llm/Debate-v0"), actions="text", encoder=CharEncoder("abc"))
    with caplog.at_level("WARNING", logger="llm_envs.interop.numeric"):
        emoji.reset(seed=0)
        emoji.observe(emoji.agent_selection)
        emoji.observe(emoji.agent_selection)
    warnings = [r for r in caplog.records if "outside its charset" in r.getMessage()]
    assert len(warnings) == 1 and "ByteEncoder" in warnings[0].getMessage()


def test_a_float_dtype_that_cannot_hold_every_id_is_refused():
    # float16 is exact only up to 2048: with a 50k vocabulary ids 40001 and 40002 were both 40000.
    big = TokenizerEncoder(lambda text: [40001] * len(text), 50_000, decode=lambda ids: "")
    with pytest.raises(ValueError, match="cannot hold every id"):
        NumericView(llm_envs.make("llm/Signalling-v0"), encoder=big, obs_dtype=np.float16)
    NumericView(llm_envs.make("llm/Signalling-v0"), encoder=big, obs_dtype=np.float32)
    NumericView(llm_envs.make("llm/Signalling-v0"), obs_dtype=np.float16)  # the charset's ids fit
