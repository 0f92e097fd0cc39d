"""Sokoban rules: text format, pushes, dead cells, solver, rewards (hand-computed), generator."""

from __future__ import annotations

import numpy as np
import pytest

from llm_envs.core.splits import split_of
from llm_envs.envs.sokoban import reference_program
from llm_envs.envs.sokoban.rules import (
    SokobanRewards,
    SokobanRules,
    apply_moves,
    box_distance,
    count_pushes,
    from_text,
    is_solved,
    live_cells,
    move,
    solve,
    to_text,
)

ONE_PUSH = "5 5\n#####\n#@$.#\n#___#\n#___#\n#####"
# Two boxes, two targets: box (1,2) starts on a target, box (2,3) does not.
TWO_BOXES = "5 6\n######\n#@*_.#\n#__$_#\n#____#\n######"


def test_text_round_trip():
    for text in (ONE_PUSH, TWO_BOXES):
        assert to_text(from_text(text)) == text
    state = from_text(TWO_BOXES)
    assert state.player == (1, 1)
    assert state.boxes == {(1, 2), (2, 3)}
    assert state.room.targets == {(1, 2), (1, 4)}


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "3 3\n###\n#$#\n###",  # no player
        "3 4\n####\n#@$#\n####",  # box without target
        "3 4\n####\n#@x#\n####",  # unknown character
        "3 4\n####\n#@@#\n####",  # two players
    ],
)
def test_malformed_levels_are_rejected(bad):
    with pytest.raises(ValueError):
        from_text(bad)


def test_push_and_blocked_moves():
    state = from_text(TWO_BOXES)
    # Pushing the box at (1,2) right into free floor.
    after, moved, pushed = move(state, "R")
    assert moved and pushed == ((1, 2), (1, 3)) and after.player == (1, 2)
    # Walking into the wall above does nothing.
    same, moved, pushed = move(state, "U")
    assert not moved and pushed is None and same == state
    # A box cannot be pushed into another box.
    blocked_level = from_text("4 6\n######\n#@$$.#\n#___.#\n######")
    same, moved, _ = move(blocked_level, "R")
    assert not moved and same == blocked_level
    # Nor into a wall.
    wall_level = from_text("3 5\n#####\n#_@*#\n#####")
    assert not move(wall_level, "R")[1]


def test_live_cells_exclude_corners_that_are_not_targets():
    room = from_text("5 5\n#####\n#@$.#\n#___#\n#___#\n#####").room
    live = live_cells(room)
    assert (1, 3) in live and (1, 2) in live
    assert (3, 1) not in live and (3, 3) not in live  # corners
    assert (3, 2) not in live  # along the bottom wall, no target on it


def test_solver_finds_shortest_solutions_and_detects_dead_ends():
    assert solve(from_text(ONE_PUSH)) == ("R",)
    two = solve(from_text(TWO_BOXES))
    assert two is not None and is_solved(apply_moves(from_text(TWO_BOXES), two, SokobanRewards()).state)
    # Box in a corner with the target elsewhere: no solution.
    assert solve(from_text("5 5\n#####\n#$__#\n#_@.#\n#___#\n#####")) is None
    # The level is solved already: the empty plan.
    assert solve(from_text("3 4\n####\n#@*#\n####")) == ()


def test_a_level_already_solved_cannot_be_loaded():
    # (any plan would be paid the solved reward without a push)
    with pytest.raises(ValueError, match="already solved"):
        SokobanRules().load("3 4\n####\n#@*#\n####")


def test_rewards_hand_computed_single_push_onto_target():
    outcome = apply_moves(from_text(ONE_PUSH), ("R",), SokobanRewards())
    # valid -0.01, box onto target +1, shaping 0.1 * (distance 1 -> 0), solved +10.
    assert outcome.components == pytest.approx(
        {"moves": -0.01, "box_on_target": 1.0, "box_off_target": 0.0, "progress": 0.1, "solved": 10.0}
    )
    assert outcome.reward == pytest.approx(11.09) and outcome.solved


def test_rewards_hand_computed_blocked_move_first():
    outcome = apply_moves(from_text(ONE_PUSH), ("U", "R", "L"), SokobanRewards())
    # U blocked -0.05; R as above; L after solving is ignored.
    assert outcome.reward == pytest.approx(-0.05 - 0.01 + 1 + 0.1 + 10)
    assert "1 move(s) after solving ignored" in outcome.summary


def test_rewards_hand_computed_push_off_then_onto_a_target():
    state = from_text(TWO_BOXES)
    assert box_distance(state.room, state.boxes) == 2
    # R: box (1,2) leaves its target for (1,3): one box fewer on a target (potential -1) and
    # distances 0+2 -> 1+2, so shaping 0.1 * -1.
    first = apply_moves(state, ("R",), SokobanRewards())
    assert first.components == pytest.approx(
        {"moves": -0.01, "box_on_target": 0.0, "box_off_target": -1.0, "progress": -0.1}
    )
    assert first.reward == pytest.approx(-1.11)
    # R R: the second push puts it on (1,4): +1, distances 3 -> 2, shaping +0.1.
    both = apply_moves(state, ("R", "R"), SokobanRewards())
    assert both.reward == pytest.approx(-1.11 + (-0.01 + 1.0 + 0.1))
    assert not both.solved
    # The paper's weights (+1 onto, -0.5 off): the same two pushes net +0.48, not -0.02.
    paper = apply_moves(state, ("R", "R"), SokobanRewards(), "paper")
    assert paper.components["box_off_target"] == pytest.approx(-0.5)
    assert paper.reward == pytest.approx(-0.61 + (-0.01 + 1.0 + 0.1))


def test_generated_levels_are_solvable_and_respect_the_knobs():
    rng = np.random.default_rng(0)
    rules = SokobanRules()
    for _ in range(60):
        state = rules.generate(rng, "train")
        plan = solve(state)
        assert plan is not None and count_pushes(state, plan) >= rules.min_pushes
        assert apply_moves(state, plan, SokobanRewards()).solved
        assert (state.room.rows, state.room.cols) == (6, 6) and len(state.boxes) == 1
        assert split_of(rules.split_key(state)) == "train"


def test_box_count_option():
    rng = np.random.default_rng(1)
    rules = SokobanRules(rows=7, cols=7, num_boxes=2, min_pushes=2)
    for _ in range(10):
        state = rules.generate(rng, "validation")
        assert len(state.boxes) == 2 == len(state.room.targets)
        assert solve(state) is not None


def test_generation_is_seeded():
    rules = SokobanRules()
    a = rules.generate(np.random.default_rng(5), "test")
    b = rules.generate(np.random.default_rng(5), "test")
    assert to_text(a) == to_text(b)


def test_reference_program_matches_the_solver():
    rng = np.random.default_rng(2)
    rules = SokobanRules()
    for _ in range(30):
        state = rules.generate(rng, "train")
        moves = reference_program.solve(to_text(state))
        assert moves is not None and len(moves) == len(solve(state))
        assert apply_moves(state, tuple(moves), SokobanRewards()).solved
    assert reference_program.solve("5 5\n#####\n#$__#\n#_@.#\n#___#\n#####") is None
