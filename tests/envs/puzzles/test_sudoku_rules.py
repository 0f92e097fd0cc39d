"""Sudoku rules: solver and uniqueness, generator, parser, clue keeping, rewards (by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from llm_envs.core.splits import split_of
from llm_envs.envs.puzzle_rules import PlanFormatError
from llm_envs.envs.sudoku import reference_program
from llm_envs.envs.sudoku.rules import (
    SudokuRewards,
    SudokuRules,
    SudokuState,
    apply_grid,
    clues_text,
    count_solutions,
    format_grid,
    has_conflict,
    parse_grid,
    parse_puzzle_text,
    relabel,
    solve_grid,
    units,
)

SOLUTION = (1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1)
# Four clues (minimum for 4x4) with exactly one solution, SOLUTION.
PUZZLE_TEXT = "4\n1 0 0 4\n0 0 0 0\n0 0 0 0\n0 3 2 0"
# The grid printed as the example in the released code's prompts.
RELEASED_EXAMPLE = "[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]"


@pytest.fixture
def state():
    puzzle = parse_puzzle_text(PUZZLE_TEXT)
    return SudokuState(puzzle, puzzle.clues)


def test_parse_puzzle_and_unique_solution(state):
    assert state.puzzle.solution == SOLUTION
    assert clues_text(state.puzzle) == PUZZLE_TEXT
    assert state.puzzle.clue_cells == (0, 3, 13, 14)


def test_count_solutions():
    clues = parse_puzzle_text(PUZZLE_TEXT).clues
    assert count_solutions(clues, 4) == 1
    assert count_solutions((0,) * 16, 4, limit=1000) == 288  # every 4x4 Sudoku grid
    assert count_solutions((1, 1) + (0,) * 14, 4) == 0  # a clue conflict
    assert solve_grid(clues, 4) == SOLUTION
    # The released code's fallback puzzle: two 4s in one box, no solution at all.
    assert count_solutions((1, 0, 0, 4, 0, 0, 1, 0, 0, 4, 0, 0, 4, 0, 0, 1), 4) == 0


@pytest.mark.parametrize(
    "bad",
    [
        "4\n1 0 0 4\n0 0 0 0\n0 0 0 0",  # 3 rows
        "5\n" + "\n".join(["0 0 0 0 0"] * 5),  # unsupported size
        "4\n1 0 0 4\n0 0 0 0\n0 0 0 0\n0 0 0 0",  # several solutions
        "4\n1 1 0 0\n0 0 0 0\n0 0 0 0\n0 0 0 0",  # no solution
        "4\n1 0 0 9\n0 0 0 0\n0 0 0 0\n0 3 2 0",  # out of range
    ],
)
def test_only_unique_well_formed_puzzles_load(bad):
    with pytest.raises(ValueError):
        parse_puzzle_text(bad)


def test_units_and_conflicts():
    assert len(units(4)) == 12 and len(units(9)) == 27
    assert sorted(units(4)[8]) == [0, 1, 4, 5]  # the top-left box
    assert not has_conflict(SOLUTION, 4)
    assert has_conflict((1, 0, 0, 0, 0, 1) + (0,) * 10, 4)  # 1 twice in the top-left box


@pytest.mark.parametrize(
    "text",
    [
        RELEASED_EXAMPLE,
        "[[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]",
        "[['1','2','3','4'],['3','4','1','2'],['2','1','4','3'],['4','3','2','1']]",
        "1234 3412 2143 4321",
        "1234/3412/2143/4321",
    ],
)
def test_parse_grid_formats(text):
    assert parse_grid(text, 4) == SOLUTION


@pytest.mark.parametrize(
    "text",
    ["[ [1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1] ]", "[\t[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]]"],
)
def test_the_list_format_takes_a_nested_list_with_space_inside_its_brackets(text):
    # (as Python's literal reader, the released code's, takes it)
    assert parse_grid(text, 4, answer_format="list") == SOLUTION
    with pytest.raises(PlanFormatError):
        parse_grid("1234 3412 2143 4321", 4, answer_format="list")


def test_a_puzzle_without_an_empty_cell_is_refused():
    with pytest.raises(ValueError, match="no empty cell"):
        parse_puzzle_text("4\n1 2 3 4\n3 4 1 2\n2 1 4 3\n4 3 2 1")


def test_parse_grid_blanks():
    assert parse_grid("[[1,.,_,4],[0,0,0,0],[0,0,0,0],[0,3,2,0]]", 4) == parse_puzzle_text(
        PUZZLE_TEXT
    ).clues


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[[1,2,3,4],[3,4,1,2],[2,1,4,3]]",  # 3 rows
        "[[1,2,3,4,5],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",
        "[[1,2,3,9],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",  # 9 out of range
        "[[1,2,3,-4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",
        "print(1) [[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",
        "__import__('os').system('x')",
        "1234 3412 2143",
        # digits that str.isdigit() admits and int() refuses, and a cell past int()'s limit
        "1\u00b234 3412 2143 4321",
        "[[1,\u00b2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",
        "[[1,\u0662,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",
        "[[" + "1" * 5000 + ",2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]",
    ],
)
def test_parse_grid_rejects(text):
    with pytest.raises(PlanFormatError):
        parse_grid(text, 4)


def test_format_grid_round_trip():
    assert format_grid(SOLUTION, 4) == RELEASED_EXAMPLE
    assert parse_grid(format_grid(SOLUTION, 4), 4) == SOLUTION


def test_reward_solved(state):
    outcome = apply_grid(state, SOLUTION, SudokuRewards())
    assert outcome.solved and outcome.reward == pytest.approx(-0.01 + 0.5 + 2.0)  # 2.49
    assert outcome.state.board == SOLUTION


def test_reward_half_filled(state):
    # Six of the twelve empty cells filled correctly, the rest left empty: no conflict.
    grid = list(state.puzzle.clues)
    for i in [1, 2, 4, 5, 6, 7]:
        grid[i] = SOLUTION[i]
    outcome = apply_grid(state, tuple(grid), SudokuRewards())
    assert outcome.components == pytest.approx({"step": -0.01, "progress": 0.25, "conflict": 0.0})
    assert outcome.reward == pytest.approx(0.24) and not outcome.solved


def test_reward_conflict(state):
    # Swap cells (1,0) and (1,1): 10 of 12 correct, column 0 then holds 4 twice.
    grid = list(SOLUTION)
    grid[4], grid[5] = grid[5], grid[4]
    outcome = apply_grid(state, tuple(grid), SudokuRewards())
    assert outcome.reward == pytest.approx(-0.01 + 0.5 * 10 / 12 - 0.5)
    assert not outcome.solved


def test_a_submission_that_changes_a_clue_is_rejected(state):
    grid = list(SOLUTION)
    grid[0] = 2  # the clue at (0,0) is 1
    outcome = apply_grid(state, tuple(grid), SudokuRewards())
    assert outcome.components == pytest.approx({"step": -0.01, "clues": -0.25})
    assert outcome.state is state and not outcome.solved


def test_blanking_a_clue_also_counts_as_changing_it(state):
    grid = list(SOLUTION)
    grid[0] = grid[3] = 0
    outcome = apply_grid(state, tuple(grid), SudokuRewards())
    assert outcome.reward == pytest.approx(-0.01 - 0.5) and outcome.state is state


def test_the_released_codes_reward_hack_fails():
    # The released code accepted any valid grid as "solved". Here the example grid, a valid
    # Sudoku, is rejected on a puzzle whose clues it contradicts.
    base = parse_puzzle_text(PUZZLE_TEXT)
    other = relabel(base, [2, 1, 3, 4])
    assert count_solutions(other.clues, 4) == 1
    state = SudokuState(other, other.clues)
    outcome = apply_grid(state, parse_grid(RELEASED_EXAMPLE, 4), SudokuRewards())
    assert not outcome.solved and outcome.reward < 0 and "rejected" in outcome.summary


@pytest.mark.parametrize(("size", "count"), [(4, 300), (6, 20), (9, 15)])
def test_generated_puzzles_have_exactly_one_solution(size, count):
    rules = SudokuRules(size=size)
    rng = np.random.default_rng(size)
    for _ in range(count):
        state = rules.generate(rng, "train")
        puzzle = state.puzzle
        assert count_solutions(puzzle.clues, size, limit=2) == 1
        assert solve_grid(puzzle.clues, size) == puzzle.solution
        assert sum(1 for v in puzzle.clues if v) == rules.target_clues
        assert split_of(rules.split_key(state)) == "train"
        assert state.board == puzzle.clues


def test_num_clues_knob_stops_at_uniqueness():
    # 9x9: asking for 1 clue leaves as few as uniqueness allows (well above 1).
    rules = SudokuRules(size=9, num_clues=1)
    counts = {sum(1 for v in rules.generate(np.random.default_rng(s), "train").puzzle.clues if v) for s in range(3)}
    assert min(counts) >= 17
    # 4x4 puzzles are enumerated with exactly num_clues clues; a unique one needs at least 4.
    for clues in (4, 8, 12):
        state = SudokuRules(num_clues=clues).generate(np.random.default_rng(0), "train")
        assert sum(1 for v in state.puzzle.clues if v) == clues
    with pytest.raises(ValueError, match="at least 4"):
        SudokuRules(num_clues=3)
    with pytest.raises(ValueError, match="no 4x4 puzzle with 15 clues"):  # 2 classes, both train
        SudokuRules(num_clues=15).generate(np.random.default_rng(0), "test")
    with pytest.raises(ValueError):
        SudokuRules(num_clues=16)


def test_generation_is_seeded():
    rules = SudokuRules(size=9)
    a = rules.generate(np.random.default_rng(9), "validation")
    b = rules.generate(np.random.default_rng(9), "validation")
    assert a == b


def test_relabel_keeps_uniqueness():
    base = parse_puzzle_text(PUZZLE_TEXT)
    moved = relabel(base, [4, 3, 2, 1])
    assert moved.clues[0] == 4 and moved.solution == tuple(5 - v for v in SOLUTION)
    assert count_solutions(moved.clues, 4) == 1


def test_reference_program_solves_4x4_and_9x9():
    for size in (4, 9):
        rules = SudokuRules(size=size)
        rng = np.random.default_rng(11)
        for _ in range(10):
            puzzle = rules.generate(rng, "test").puzzle
            grid = reference_program.solve(clues_text(puzzle))
            assert tuple(v for row in grid for v in row) == puzzle.solution


def test_random_plans_keep_clues_and_are_well_formed(state):
    rules = SudokuRules()
    rng = np.random.default_rng(0)
    for _ in range(20):
        plan = rules.random_plan(state, rng)
        assert all(plan[i] == state.puzzle.clues[i] for i in state.puzzle.clue_cells)
        assert rules.parse_plan(state, rules.format_plan(plan)) == plan
