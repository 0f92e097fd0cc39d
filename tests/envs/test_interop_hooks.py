"""The environments' interop hooks: the fixed move catalog and the state tensor.

Checked for every environment that implements them (the puzzles and Signalling), along random
episodes, against what the environment itself does: the catalog's legal entries are exactly
``legal_actions`` (and play the same), the catalog never changes, masks are empty for agents not
to act, and the state planes decode back to the puzzle text the prompts show.
"""

from __future__ import annotations

import numpy as np
import pytest

import llm_envs
from llm_envs.envs.plan_path import rules as path_rules
from llm_envs.envs.sokoban import rules as sokoban_rules
from llm_envs.interop import find_catalog, has_state_tensor

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

HOOKED = {
    "planpath-single": lambda: llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=12),
    "planpath-multi": lambda: llm_envs.make("llm/PlanPath-v0", max_turns=3),
    "sokoban-single": lambda: llm_envs.make("llm/Sokoban-v0", agents="single", max_turns=12),
    "sudoku-single": lambda: llm_envs.make("llm/Sudoku-v0", agents="single", max_turns=12),
    "sudoku-multi": lambda: llm_envs.make("llm/Sudoku-v0", max_turns=2),
    "signalling": lambda: llm_envs.make("llm/Signalling-v0", rounds=3),
}


def random_catalog_episode(env, seed, check):
    """Play one episode choosing uniformly among the legal catalog moves; call ``check(env)``
    before every action and once at the end."""
    rng = np.random.default_rng(seed)
    catalog = find_catalog(env)  # catalog_action where the env has it, else the entry text
    env.reset(seed=seed)
    for agent in env.agent_iter():
        check(env)
        _, _, termination, truncation, _ = env.last()
        if termination or truncation:
            env.step(None)
            continue
        legal = np.flatnonzero(env.action_mask(agent))
        env.step(catalog.text(agent, int(rng.choice(legal))))
    check(env)


@pytest.mark.parametrize("name", sorted(HOOKED))
def test_catalog_legal_entries_are_exactly_the_legal_actions(name):
    env = HOOKED[name]()
    catalog = env.action_catalog()
    assert len(set(catalog)) == len(catalog) and find_catalog(env) is not None

    def check(env):
        assert env.action_catalog() == catalog  # fixed, whatever the state
        for agent in env.possible_agents:
            mask = env.action_mask(agent)
            assert mask.dtype == np.int8 and mask.shape == (len(catalog),)
            acting = not env.episode_over and agent == env.agent_selection
            if not acting:
                assert not mask.any()
                continue
            texts = find_catalog(env).legal_texts(agent)
            expected = env.legal_actions(agent) if hasattr(env, "legal_actions") else list(catalog)
            assert sorted(texts) == sorted(expected) and len(texts) == len(set(texts))

    for seed in range(3):
        random_catalog_episode(env, seed, check)
    assert HOOKED[name]().action_catalog() == catalog  # the same before the first reset


@pytest.mark.parametrize("name", sorted(HOOKED))
def test_masks_are_empty_before_reset_and_after_the_episode(name):
    env = HOOKED[name]()
    for agent in env.possible_agents:
        assert not env.action_mask(agent).any()
    random_catalog_episode(env, 0, lambda env: None)
    assert env.episode_over
    for agent in env.possible_agents:
        assert not env.action_mask(agent).any()
    with pytest.raises(KeyError):
        env.action_mask("nobody")


def test_catalog_indices_keep_their_meaning():
    """Plan-Path: index i is always direction i; Sudoku: index (cell * n + digit - 1) fills
    that cell with that digit, whatever else is on the board."""
    path = llm_envs.make("llm/PlanPath-v0", agents="single", max_turns=30)
    seen = {i: set() for i in range(4)}
    for seed in range(10):
        path.reset(seed=seed)
        for i in np.flatnonzero(path.action_mask("solver")):
            seen[int(i)].add(path.catalog_action("solver", int(i)))
    assert seen == {0: {"#### U"}, 1: {"#### D"}, 2: {"#### L"}, 3: {"#### R"}}

    sudoku = llm_envs.make("llm/Sudoku-v0", agents="single", max_turns=20)
    sudoku.reset(seed=4)
    n = sudoku.config.size
    rng = np.random.default_rng(0)
    for _ in range(6):
        mask = sudoku.action_mask("solver")
        if not mask.any():
            break
        index = int(rng.choice(np.flatnonzero(mask)))
        before = sudoku.puzzle_state.board
        sudoku.step(sudoku.catalog_action("solver", index))
        if index < n**3:
            cell, digit = divmod(index, n)
            assert sudoku.action_catalog()[index] == f"r{cell // n + 1}c{cell % n + 1}={digit + 1}"
            assert sudoku.puzzle_state.board == before[:cell] + (digit + 1,) + before[cell + 1 :]
        else:
            assert sudoku.puzzle_state.board == sudoku.puzzle_state.puzzle.clues


def test_catalog_moves_play_through_the_real_parser_and_sandbox():
    """The tool agent's catalog move is a program run in the sandbox; its plan is the move."""
    env = llm_envs.make("llm/PlanPath-v0", max_turns=2)
    env.reset(seed=3)
    index = int(np.flatnonzero(env.action_mask("tool"))[0])
    env.step(env.catalog_action("tool", index))
    record = env.records[-1]
    assert record.parsed["program_status"] == "ok" and record.parsed["plan"] == "UDLR"[index]
    assert env.catalog_action("plan", index) == env.action_catalog()[index]


# ------------------------------------------------------------------------------ state tensors
def decode_plan_path(planes: np.ndarray) -> str:
    rows, cols = planes.shape[1:]
    lines = [f"{rows} {cols}"]
    for r in range(rows):
        line = ""
        for c in range(cols):
            if planes[2, r, c]:
                line += path_rules.GOAL
            elif planes[1, r, c]:
                line += path_rules.START
            else:
                line += path_rules.OBSTACLE if planes[0, r, c] else path_rules.FREE
        lines.append(line)
    return "\n".join(lines)


def decode_sokoban(planes: np.ndarray) -> str:
    rows, cols = planes.shape[1:]
    lines = [f"{rows} {cols}"]
    for r in range(rows):
        line = ""
        for c in range(cols):
            wall, target, box, player = planes[:, r, c]
            if wall:
                line += sokoban_rules.WALL
            elif box:
                line += sokoban_rules.BOX_ON_TARGET if target else sokoban_rules.BOX
            elif player:
                line += sokoban_rules.PLAYER_ON_TARGET if target else sokoban_rules.PLAYER
            else:
                line += sokoban_rules.TARGET if target else sokoban_rules.FLOOR
        lines.append(line)
    return "\n".join(lines)


def check_planes_decode_to_the_state(env):
    if env.puzzle_state is None:
        return
    for agent in env.possible_agents:
        planes = env.state_tensor(agent)
        assert planes.dtype == np.float32 and env.state_space().contains(planes)
        game = env.rules.game_name
        if game == "Plan-Path":
            assert decode_plan_path(planes) == path_rules.to_text(env.puzzle_state)
        elif game == "Sokoban":
            assert decode_sokoban(planes) == sokoban_rules.to_text(env.puzzle_state)
        else:
            n = env.config.size
            digits = planes[:n]
            assert digits.sum(axis=0).max() <= 1  # one digit per cell at most
            filled = digits.sum(axis=0) > 0
            board = tuple(int(v) for v in np.where(filled, np.argmax(digits, axis=0) + 1, 0).flat)
            assert board == env.puzzle_state.board
            assert tuple(planes[n].astype(int).flat) == tuple(int(v > 0) for v in env.puzzle_state.puzzle.clues)
        assert env.rules.puzzle_text(env.puzzle_state) in env.state_text(agent)
        assert env.rules.puzzle_text(env.puzzle_state) in env.observe(agent)["prompt"]


@pytest.mark.parametrize("name", [n for n in sorted(HOOKED) if n != "signalling"])
def test_puzzle_planes_decode_back_to_the_puzzle(name):
    env = HOOKED[name]()
    assert has_state_tensor(env) and env.state_space() is env.state_space()
    assert not env.state_tensor(env.possible_agents[0]).any()  # before the first reset
    for seed in range(3):
        random_catalog_episode(env, seed, check_planes_decode_to_the_state)


def test_state_space_follows_the_config():
    assert llm_envs.make("llm/PlanPath-v0", rows=5, cols=7).state_space().shape == (3, 5, 7)
    assert llm_envs.make("llm/Sokoban-v0", rows=7, cols=8).state_space().shape == (4, 7, 8)
    assert llm_envs.make("llm/Sudoku-v0", size=9).state_space().shape == (10, 9, 9)
    assert llm_envs.make("llm/Signalling-v0", symbols=("a", "b", "c")).state_space().shape == (10,)
    assert len(llm_envs.make("llm/Sudoku-v0", size=9).action_catalog()) == 9**3 + 1


def test_signalling_state_shows_only_what_the_prompt_shows():
    env = llm_envs.make("llm/Signalling-v0", rounds=2)
    symbols = env.config.symbols
    n = len(symbols)
    listener_views = {}
    for seed in range(12):
        env.reset(seed=seed)
        target = env._targets[0]
        speaker = env.state_tensor("speaker")
        assert speaker[:2].tolist() == [1, 0] and speaker[2 + symbols.index(target)] == 1
        assert not env.state_tensor("listener")[2:-1].any()  # waiting: nothing but its role
        env.step("my message: blue")
        assert not env.state_tensor("speaker")[2:-1].any()  # the target is no longer shown
        listener = env.state_tensor("listener")
        assert listener[2 + n + symbols.index("blue")] == 1 and not listener[2 : 2 + n].any()
        listener_views.setdefault(listener.tobytes(), set()).add(target)
        env.step("blue")
        assert env.state_tensor("speaker")[-1] == 0.5  # round 2 of 2
    assert len(listener_views) == 1 and len(next(iter(listener_views.values()))) > 1  # never the target
    env.reset(seed=0)
    env.step("nothing useful")
    assert env.state_tensor("listener")[2 + 2 * n] == 1  # a message that names no symbol
