"""NumericView: numeric observations, Discrete/MultiDiscrete actions, fixed-shape infos."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pettingzoo.test import api_test, seed_test

import llm_envs
from llm_envs.interop import CharEncoder, NumericView, encode_fixed
from tests.interop.toy_envs import CorridorEnv, GuessEnv, SumsTaskSource

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pettingzoo.test.api_test")

INFO_KEYS = {"turn", "acting", "episode_over", "success"}

VIEWS = {
    "corridor-legal": lambda: NumericView(CorridorEnv(), obs_length=128),
    "corridor-legal-info-mask": lambda: NumericView(CorridorEnv(), obs_length=128, mask_in="info"),
    "corridor-candidates": lambda: NumericView(CorridorEnv(), actions="candidates", num_candidates=3),
    "corridor-text": lambda: NumericView(CorridorEnv(), actions="text", action_length=12, obs_length=64),
    "guess-text-float": lambda: NumericView(GuessEnv(), actions="text", action_length=2, obs_dtype=np.float32),
    "signalling-legal": lambda: NumericView(llm_envs.make("llm/Signalling-v0", rounds=3), obs_length=256),
    "planpath-single-legal": lambda: NumericView(
        llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=12), obs_length=512
    ),
    "sokoban-single-legal": lambda: NumericView(
        llm_envs.make("llm/Sokoban-v0", agents="single", max_turns=12), obs_length=512
    ),
    "sudoku-single-legal": lambda: NumericView(
        llm_envs.make("llm/Sudoku-v0", agents="single", max_turns=8), obs_length=512
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
