"""Plan-Path rules: board, text format, parser, solver, rewards (hand-computed), generator."""

from __future__ import annotations

import numpy as np
import pytest

from llm_envs.core.splits import split_of
from llm_envs.envs.plan_path import reference_program
from llm_envs.envs.plan_path.rules import (
    PathRewards,
    PlanPathRules,
    apply_moves,
    from_text,
    generate_grid,
    parse_moves,
    shortest_path,
    solving_pays_most,
    to_text,
)
from llm_envs.envs.puzzle_rules import PlanFormatError

# BFS distances to G (row 1, col 3), worked out by hand:
#   S . # .        6 5 # 1
#   . . # G        5 4 # 0
#   . . . .        4 3 2 1
HAND = "3 4\nS.#.\n..#G\n...."
RULES = PlanPathRules()


def test_text_round_trip_and_distances():
    state = from_text(HAND)
    assert to_text(state) == HAND
    assert state.position == (0, 0) and state.grid.goal == (1, 3)
    assert [list(row) for row in state.grid.distance] == [
        [6, 5, -1, 1],
        [5, 4, -1, 0],
        [4, 3, 2, 1],
    ]


@pytest.mark.parametrize(
    "bad",
    ["", "3 4\nS.#.\n..#G", "3 4\nS.#.\n..#G\n..x.", "2 2\nSS\n.G", "2 2\nS.\n..", "a b\n.."],
)
def test_malformed_text_is_rejected(bad):
    with pytest.raises(ValueError):
        from_text(bad)


def test_unreachable_goal_cannot_be_loaded():
    with pytest.raises(ValueError, match="cannot be reached"):
        RULES.load("2 3\nS#G\n.#.")


MANHATTAN = PathRewards(potential_distance="manhattan")


def test_with_the_manhattan_potential_a_grid_where_stalling_pays_more_is_refused():
    # S and G two cells apart, 400 moves around the wall: the path costs 4.0 and reaching the
    # goal gains at most 2.5 over a cell next to it, so answering nothing paid both agents more.
    far = "3 200\nS" + "." * 199 + "\n" + "#" * 199 + ".\nG" + "." * 199
    rules = PlanPathRules(rows=3, cols=200, rewards=MANHATTAN)
    assert from_text(far).grid.dist((0, 0)) == 400
    with pytest.raises(ValueError, match="costs more than reaching the goal gains"):
        rules.load(far)
    PlanPathRules(rows=3, cols=200).load(far)  # the BFS potential pays every step of it
    near = "3 20\nS" + "." * 19 + "\n" + "#" * 19 + ".\nG" + "." * 19
    assert solving_pays_most(rules.load(near), MANHATTAN)


def test_with_the_manhattan_potential_generated_grids_pay_solving_most():
    # A 1x400 corridor: start and goal up to 399 moves apart, of which only those within
    # (1 + 0.5 + 1) / 0.01 = 250 moves pay solving most.
    rules = PlanPathRules(rows=1, cols=400, obstacle_density=0.0, rewards=MANHATTAN)
    states = [rules.generate(np.random.default_rng(seed), "train") for seed in range(30)]
    distances = [state.grid.dist(state.position) for state in states]
    assert max(distances) <= 250 and min(distances) >= 1
    with pytest.raises(ValueError, match="min_distance"):
        PlanPathRules(rows=1, cols=400, min_distance=300, rewards=MANHATTAN)


def test_a_grid_larger_than_the_rules_cannot_be_loaded():
    with pytest.raises(ValueError, match="at most rows=10, cols=10"):
        RULES.load("2 11\nS.........G\n...........")
    RULES.load("2 10\nS........G\n..........")


def test_a_grid_whose_start_is_the_goal_cannot_be_loaded():
    # (a grid without "S" starts on the goal: any plan would be paid the goal)
    with pytest.raises(ValueError, match="already solved"):
        RULES.load("2 2\nG.\n..")


@pytest.mark.parametrize(
    ("text", "moves"),
    [
        ("U D L R", ("U", "D", "L", "R")),
        ('["U", "D", "L"]', ("U", "D", "L")),
        ("[U, R]", ("U", "R")),
        ("[U R R]", ("U", "R", "R")),  # lenient: spaces separate list elements too
        ("UDDR", ("U", "D", "D", "R")),
        ("up, down, LEFT, Right", ("U", "D", "L", "R")),
        ("(U, R); D", ("U", "R", "D")),
    ],
)
def test_parse_moves(text, moves):
    assert parse_moves(text) == moves


@pytest.mark.parametrize("text", ["", "[]", "U X", "north", "U D 3", "__import__('os')"])
def test_parse_moves_rejects(text):
    with pytest.raises(PlanFormatError):
        parse_moves(text)


def test_shortest_path_on_the_hand_grid():
    assert shortest_path(from_text(HAND)) == ("D", "D", "R", "R", "R", "U")


def test_rewards_hand_computed_partial_plan_with_a_blocked_move():
    # R: (0,0)->(0,1) valid, distance 6->5;  R: obstacle, blocked, 5->5;  D: (1,1), 5->4.
    outcome = apply_moves(from_text(HAND), ("R", "R", "D"), PathRewards())
    assert outcome.components["moves"] == pytest.approx(-0.01 - 0.10 - 0.01)
    assert outcome.components["progress"] == pytest.approx(2.0)
    assert "goal" not in outcome.components
    assert outcome.reward == pytest.approx(1.88)
    assert outcome.state.position == (1, 1) and not outcome.solved


def test_rewards_hand_computed_shortest_path():
    outcome = apply_moves(from_text(HAND), ("D", "D", "R", "R", "R", "U"), PathRewards())
    # 6 valid moves, progress 6, goal +1, shortest +0.5.
    assert outcome.reward == pytest.approx(-0.06 + 6 + 1 + 0.5)
    assert outcome.solved and outcome.components["optimal"] == 0.5


def test_moves_after_the_goal_are_ignored():
    outcome = apply_moves(from_text(HAND), tuple("DDRRRUUU"), PathRewards())
    assert outcome.reward == pytest.approx(7.44)
    assert "2 move(s) after reaching the goal ignored" in outcome.summary


def test_rewards_hand_computed_detour_gets_no_optimal_bonus():
    # R (+1 progress) L (-1) then the 6-move path: 8 valid moves, progress 6, goal, no bonus.
    outcome = apply_moves(from_text(HAND), tuple("RLDDRRRU"), PathRewards())
    assert outcome.components == pytest.approx(
        {"moves": -0.08, "progress": 6.0, "goal": 1.0, "optimal": 0.0}
    )


def test_released_code_gamma_pays_for_bumping_into_walls():
    # With gamma = 0.99 and phi = -distance, a blocked move at distance 6 earns
    # 0.99 * -6 + 6 = +0.06 of shaping: why the default gamma is 1.
    outcome = apply_moves(from_text(HAND), ("U",), PathRewards(shaping_gamma=0.99))
    assert outcome.components["progress"] == pytest.approx(0.06)
    assert outcome.reward == pytest.approx(-0.04)
    assert apply_moves(from_text(HAND), ("U",), PathRewards()).components["progress"] == 0.0


def test_generated_grids_are_solvable_and_respect_the_knobs():
    rng = np.random.default_rng(0)
    rules = PlanPathRules(min_distance=5)
    for _ in range(100):
        state = rules.generate(rng, "train")
        path = shortest_path(state)
        assert path is not None and len(path) >= 5
        assert apply_moves(state, path, PathRewards()).solved
        assert split_of(rules.split_key(state)) == "train"
        assert (state.grid.rows, state.grid.cols) == (10, 10)


def test_obstacle_density_knob():
    rng = np.random.default_rng(1)

    def density(value):
        states = [generate_grid(rng, 10, 10, value, 1) for _ in range(200)]
        grids = [s.grid.cells for s in states if s is not None]
        return np.mean([sum(row.count("#") for row in g) / 100 for g in grids])

    assert density(0.0) == 0.0
    assert 0.15 < density(0.22) < 0.3
    assert density(0.4) > density(0.22)


def test_generation_is_seeded():
    a = RULES.generate(np.random.default_rng(42), "test")
    b = RULES.generate(np.random.default_rng(42), "test")
    assert to_text(a) == to_text(b)


def test_reference_program_finds_shortest_paths():
    rng = np.random.default_rng(3)
    for _ in range(50):
        state = RULES.generate(rng, "train")
        moves = reference_program.solve(to_text(state))
        assert len(moves) == state.grid.dist(state.position)
        assert apply_moves(state, tuple(moves), PathRewards()).solved
    assert reference_program.solve("2 3\nS#G\n.#.") is None


def test_random_plans_are_well_formed():
    rng = np.random.default_rng(0)
    state = from_text(HAND)
    for _ in range(20):
        plan = RULES.random_plan(state, rng)
        assert RULES.parse_plan(state, RULES.format_plan(plan)) == plan
