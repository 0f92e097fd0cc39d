"""The puzzles' enumerable-moves hook: ``legal_actions`` / ``max_legal_actions``.

The pure move lists (``single_step_plans``, ``single_fill_plans``) are checked against brute
force written here from the rules' definitions; the env-level tests play the listed texts
through the real parser, rewards and (for the tool agent) the real sandbox.
"""

from __future__ import annotations

import numpy as np
import pytest

import sandboxes
from llm_envs.envs.plan_path import rules as path_rules
from llm_envs.envs.plan_path.env import PlanPathEnv
from llm_envs.envs.puzzle_rules import ANSWER_MARKER, extract_answer
from llm_envs.envs.sokoban import rules as sokoban_rules
from llm_envs.envs.sokoban.env import SokobanEnv
from llm_envs.envs.sudoku import rules as sudoku_rules
from llm_envs.envs.sudoku.env import SudokuEnv
from llm_envs.interop import find_moves

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

ENV_CLASSES = [PlanPathEnv, SokobanEnv, SudokuEnv]
DIRECTIONS = ("U", "D", "L", "R")
# Plan-Path grid of test_plan_path_rules.py: S at (0, 0), G at (1, 3).
PATH_HAND = "3 4\nS.#.\n..#G\n...."
# Sokoban: the player at (1, 1) can walk down or push the box right onto the target.
SOKOBAN_HAND = "5 5\n#####\n#@$.#\n#___#\n#___#\n#####"
# Sudoku with four clues and exactly one solution (test_sudoku_rules.py).
SUDOKU_HAND = "4\n1 0 0 4\n0 0 0 0\n0 0 0 0\n0 3 2 0"
SUDOKU_SOLUTION = (1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1)


@pytest.fixture(scope="module")
def sandbox():
    return sandboxes.shared_sandbox("auto")


# ------------------------------------------------------------------------------ brute force
def brute_force_fills(board: tuple[int, ...], size: int) -> list[tuple[int, ...]]:
    """Every board with one empty cell filled by a number absent from that cell's row, column
    and box, from coordinates (independent of the rules' ``units``/``peers``)."""
    box_rows, box_cols = sudoku_rules.BOX_SHAPES[size]
    fills = []
    for cell in range(size * size):
        if board[cell]:
            continue
        r, c = divmod(cell, size)
        seen = set()
        for other in range(size * size):
            orow, ocol = divmod(other, size)
            same_box = orow // box_rows == r // box_rows and ocol // box_cols == c // box_cols
            if other != cell and (orow == r or ocol == c or same_box):
                seen.add(board[other])
        for number in range(1, size + 1):
            if number not in seen:
                fills.append(board[:cell] + (number,) + board[cell + 1 :])
    return fills


def expected_fills(state) -> list[tuple[int, ...]]:
    """The brute-force fills, else [] for a solved board, else the clues (start over)."""
    fills = brute_force_fills(state.board, state.puzzle.size)
    if fills or state.board == state.puzzle.solution:
        return fills
    return [state.puzzle.clues]


def changing_steps(rules, state) -> list[tuple[str, ...]]:
    """Plan-Path/Sokoban: the one-step plans whose outcome differs from ``state``."""
    return [(d,) for d in DIRECTIONS if rules.apply_plan(state, (d,)).state != state]


# ------------------------------------------------------------------------------ pure rules
def test_plan_path_single_steps_by_hand():
    state = path_rules.from_text(PATH_HAND)
    # U and L leave the grid.
    assert path_rules.single_step_plans(state) == [("D",), ("R",)]
    walled_in = path_rules.PathState(path_rules.Grid((".#", "#."), (1, 1)), (0, 0))
    assert path_rules.single_step_plans(walled_in) == [(d,) for d in DIRECTIONS]


def test_sokoban_single_steps_by_hand():
    state = sokoban_rules.from_text(SOKOBAN_HAND)
    assert sokoban_rules.single_step_plans(state) == [("D",), ("R",)]  # R pushes the box
    # Box against the wall: the push is blocked, the walks are not.
    stuck = sokoban_rules.from_text("5 5\n#####\n#_@$#\n#__.#\n#___#\n#####")
    assert sokoban_rules.single_step_plans(stuck) == [("D",), ("L",)]


def test_sudoku_single_fills_by_hand():
    puzzle = sudoku_rules.parse_puzzle_text(SUDOKU_HAND)
    state = sudoku_rules.SudokuState(puzzle, puzzle.clues)
    plans = sudoku_rules.single_fill_plans(state)
    # Cell (0,1) sees 1 and 4 in its row, 3 in its column: only 2 fits.
    assert [p for p in plans if p[1]] == [(1, 2, 0, 4) + puzzle.clues[4:]]
    # Each plan fills exactly one empty cell and keeps every clue.
    for plan in plans:
        changed = [i for i in range(16) if plan[i] != state.board[i]]
        assert len(changed) == 1 and state.board[changed[0]] == 0
    # A full board that is not the solution: the only move is to start over.
    wrong = sudoku_rules.SudokuState(puzzle, (1, 2, 3, 4) * 4)
    assert sudoku_rules.single_fill_plans(wrong) == [puzzle.clues]
    assert sudoku_rules.single_fill_plans(sudoku_rules.SudokuState(puzzle, SUDOKU_SOLUTION)) == []


@pytest.mark.parametrize("size", [4, 6, 9])
def test_sudoku_fills_match_brute_force_on_random_boards(size):
    rules = sudoku_rules.SudokuRules(size=size)
    rng = np.random.default_rng(size)
    restarts = 0
    for _ in range(8 if size == 4 else 2):
        state = rules.generate(rng, "train")
        # Random walks over the listed moves: they often end in a dead end (start over).
        while True:
            plans = sudoku_rules.single_fill_plans(state)
            assert plans == expected_fills(state)
            assert len(plans) <= rules.max_legal_plans
            if not plans or plans == [state.puzzle.clues]:
                restarts += bool(plans)
                break
            state = rules.apply_plan(state, plans[int(rng.integers(len(plans)))]).state
        # Boards with a repeat (a free-text answer can leave one) follow the same definition.
        board = list(state.board)
        empty = [i for i, v in enumerate(board) if not v]
        if empty:
            board[empty[0]] = next(v for v in board if v)
            repeated = sudoku_rules.SudokuState(state.puzzle, tuple(board))
            assert sudoku_rules.single_fill_plans(repeated) == expected_fills(repeated)
    if size == 4:
        assert restarts > 0  # the start-over move was exercised


@pytest.mark.parametrize(
    ("module", "rules"),
    [(path_rules, path_rules.PlanPathRules()), (sokoban_rules, sokoban_rules.SokobanRules())],
    ids=["plan_path", "sokoban"],
)
def test_single_steps_match_brute_force_on_random_walks(module, rules):
    rng = np.random.default_rng(7)
    for _ in range(10):
        state = rules.generate(rng, "train")
        for _ in range(20):
            plans = module.single_step_plans(state)
            if rules.is_solved(state):  # moves after solving are ignored: none are listed
                assert plans == [] and changing_steps(rules, state) == []
                break
            assert plans == (changing_steps(rules, state) or [(d,) for d in DIRECTIONS])
            assert 1 <= len(plans) <= rules.max_legal_plans
            state = rules.apply_plan(state, plans[int(rng.integers(len(plans)))]).state


# ------------------------------------------------------------------------------ env: single
def check_every_listed_action(env, agent: str) -> list[str]:
    """Play each listed action on a clone: well-formed, no format penalty, the shaped reward
    (less the shortfall of the state's potential below the best reached, paid again below it)."""
    texts = env.legal_actions(agent)
    assert 1 <= len(texts) <= env.max_legal_actions
    assert len(set(texts)) == len(texts)
    for text in texts:
        clone = env.clone()
        before = clone.puzzle_state
        clone.step(text)
        record = clone.records[-1]
        assert record.format_ok, (text, record.parsed)
        assert record.parsed["error"] is None and record.parsed["plan_source"] == "answer"
        plan = env.rules.parse_plan(before, extract_answer(text))
        expected = env.rules.apply_plan(before, plan).reward - env.potential_shortfall()
        assert record.reward_components["local"] == pytest.approx(expected)
        assert record.reward_components["local"] != env.rules.format_penalty
    return texts


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_single_agent_random_legal_play_is_always_well_formed(cls):
    env = cls(agents="single", max_turns=25)
    assert find_moves(env).source == "env"  # the wrapper uses the env's own hook
    assert env.legal_actions("solver") == []  # before the first reset
    rng = np.random.default_rng(1)
    for seed in range(3):
        env.reset(seed=seed)
        while not env.episode_over:
            texts = check_every_listed_action(env, "solver")
            assert all(t.startswith(ANSWER_MARKER + " ") for t in texts)
            env.step(texts[int(rng.integers(len(texts)))])
        assert env.episode_metrics()["answer_format_ok"] == 1.0
        assert env.legal_actions("solver") == []  # after the episode


@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_legal_moves_suffice_to_solve(cls):
    """Choosing among the listed moves only, a player that knows the solution reaches it."""
    env = cls(agents="single", max_turns=100)
    for seed in range(3):
        env.reset(seed=seed)
        while not env.episode_over:
            if cls is SudokuEnv:
                solution = env.rules.solve(env.puzzle_state)
                good = [
                    text
                    for text in env.legal_actions("solver")
                    if all(
                        value in (0, right)
                        for value, right in zip(env.rules.parse_plan(env.puzzle_state, text[5:]), solution)
                    )
                ]
            else:
                first = env.rules.solve(env.puzzle_state)[0]
                good = [t for t in env.legal_actions("solver") if t == f"{ANSWER_MARKER} {first}"]
            assert good
            env.step(good[0])
        assert env.episode_metrics()["success"] == 1.0


def test_sudoku_dead_end_offers_only_a_restart_that_is_well_formed():
    env = SudokuEnv(agents="single", max_turns=10)
    env.reset(options={"puzzle": SUDOKU_HAND})
    clues = env.puzzle_state.puzzle.clues
    env.step("#### [[1,2,3,4],[1,2,3,4],[1,2,3,4],[1,3,2,4]]")  # clues kept, full, wrong
    assert env.records[-1].format_ok and env.puzzle_state.board != clues
    restart = check_every_listed_action(env, "solver")
    assert restart == [f"{ANSWER_MARKER} {env.rules.format_plan(clues)}"]
    env.step(restart[0])
    assert env.puzzle_state.board == clues


def test_max_legal_actions_follows_the_config():
    assert PlanPathEnv(rows=5, cols=7).max_legal_actions == 4
    assert SokobanEnv().max_legal_actions == 4
    assert SudokuEnv().max_legal_actions == 64
    big = SudokuEnv(size=9, agents="single")
    assert big.max_legal_actions == 729
    big.reset(seed=0)
    assert 1 <= len(big.legal_actions("solver")) <= 729
    # The bound depends on the size, so a given puzzle must have the configured size.
    with pytest.raises(ValueError, match="size"):
        big.reset(options={"puzzle": SUDOKU_HAND})


# ------------------------------------------------------------------------------ env: tool + plan
@pytest.mark.parametrize("cls", ENV_CLASSES)
def test_tool_and_plan_moves_are_well_formed(cls, sandbox):
    env = cls(sandbox=sandbox, max_turns=3)
    env.reset(seed=4)
    assert env.agent_selection == "tool"
    assert env.legal_actions("plan") == []  # not its turn
    tool_texts = env.legal_actions("tool")
    assert 1 <= len(tool_texts) <= env.max_legal_actions
    plans = env.rules.legal_plans(env.puzzle_state)
    plan_texts = [f"{ANSWER_MARKER} {env.rules.format_plan(plan)}" for plan in plans]
    # Every tool move is a program that runs in the sandbox and prints a well-formed plan.
    for text, answer in zip(tool_texts, plan_texts, strict=True):
        clone = env.clone()
        clone.step(text)
        record = clone.records[-1]
        assert record.format_ok and record.parsed["program_status"] == "ok"
        assert f"{ANSWER_MARKER} {record.parsed['plan']}" == answer
        assert record.reward_components["local"] != env.rules.format_penalty
    # A whole episode of random listed moves: no format penalty for either agent.
    rng = np.random.default_rng(0)
    while not env.episode_over:
        agent = env.agent_selection
        texts = env.legal_actions(agent)
        assert 1 <= len(texts) <= env.max_legal_actions
        prefix = "```python\nprint(" if agent == "tool" else f"{ANSWER_MARKER} "
        assert all(text.startswith(prefix) for text in texts)
        env.step(texts[int(rng.integers(len(texts)))])
        assert env.records[-1].format_ok
    metrics = env.episode_metrics()
    assert metrics["answer_format_ok"] == 1.0 and metrics["program_plan_ok"] == 1.0
    assert env.legal_actions("tool") == env.legal_actions("plan") == []
