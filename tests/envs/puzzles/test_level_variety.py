"""Sokoban and Plan-Path: distinct seeds give distinct levels within a split, and no evaluation
level is a training level up to symmetry.

The canonical forms here are written independently of the rules' own (``split_key``), so a
wrong canonical form cannot hide a repeat or an overlap.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

import llm_envs
from llm_envs.core.splits import SPLITS
from llm_envs.envs.sokoban import rules as sokoban

MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))


def sokoban_class(state) -> str:
    """Independent canonical form: the 8 symmetries of the square room as coordinate maps,
    the player replaced by its whole walkable area."""
    room = state.room
    n = room.rows
    assert room.rows == room.cols
    area, stack = {state.player}, [state.player]
    while stack:
        r, c = stack.pop()
        for dr, dc in MOVES:
            cell = (r + dr, c + dc)
            if cell not in area and cell not in room.walls and cell not in state.boxes:
                area.add(cell)
                stack.append(cell)
    forms = []
    for swap, flip_r, flip_c in itertools.product((False, True), repeat=3):

        def f(cell, swap=swap, flip_r=flip_r, flip_c=flip_c):
            r, c = (cell[1], cell[0]) if swap else cell
            return (n - 1 - r if flip_r else r, n - 1 - c if flip_c else c)

        forms.append(
            repr(
                (
                    sorted(map(f, room.walls)),
                    sorted(map(f, room.targets)),
                    sorted(map(f, state.boxes)),
                    sorted(map(f, area)),
                )
            )
        )
    return min(forms)


def plan_path_class(state) -> str:
    grid = state.grid
    chars = np.array([list(row) for row in grid.cells])
    chars[state.position] = "S"
    chars[grid.goal] = "G"
    forms = []
    for k in range(4):
        turned = np.rot90(chars, k)
        forms += ["/".join(map("".join, turned)), "/".join(map("".join, turned[::-1]))]
    return min(forms)


def levels(env_id: str, split: str, seeds) -> list:
    env = llm_envs.make(env_id, split=split)
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out.append(env.initial_state)
    env.close()
    return out


def test_sokoban_seeds_walk_through_every_level_of_a_split_once():
    """Formerly 300 validation seeds gave 209 distinct level texts — 111 distinct levels up to
    symmetry and the player's position in its area, one of them 61 times. Now seeds 0..n-1 play
    each of the split's n levels once (79 validation, 80 test: docs/envs/sokoban.md)."""
    for split in ("validation", "test"):
        count = len(sokoban.split_level_classes(6, 6, 3, 3, split))
        drawn = [sokoban_class(s) for s in levels("llm/Sokoban-v0", split, range(count + 10))]
        assert len(set(drawn[:count])) == count, split
        assert drawn[count:] == drawn[:10]  # then the same order again
        # ... each time shown under another symmetry or player cell, at least sometimes
    assert {split: len(sokoban.split_level_classes(6, 6, 3, 3, split)) for split in SPLITS} == {
        "train": 689,
        "validation": 79,
        "test": 80,
    }
    train = [sokoban_class(s) for s in levels("llm/Sokoban-v0", "train", range(300))]
    assert len(set(train)) == 300


def test_no_sokoban_evaluation_level_is_a_training_level_up_to_symmetry():
    train = {sokoban_class(s) for s in levels("llm/Sokoban-v0", "train", range(689))}
    assert len(train) == 689  # every training level
    for split in ("validation", "test"):
        assert not train & {sokoban_class(s) for s in levels("llm/Sokoban-v0", split, range(90))}


def test_sokoban_surface_forms_vary_and_stay_solvable():
    states = levels("llm/Sokoban-v0", "test", range(80, 160))  # the second pass over the split
    first = levels("llm/Sokoban-v0", "test", range(80))
    assert sum(a != b for a, b in zip(states, first)) > 40  # another symmetry or player cell
    for state in states[:20]:
        plan = sokoban.solve(state)
        assert plan is not None and sokoban.count_pushes(state, plan) >= 3
        assert sokoban.fewest_pushes(state) >= 3


def test_larger_sokoban_rooms_are_sampled_and_still_split_by_canonical_form():
    rules = sokoban.SokobanRules(rows=7, cols=7, num_boxes=2, min_pushes=2)
    assert not rules.enumerated and sokoban.SokobanRules().enumerated
    keys = {split: set() for split in SPLITS}
    for split in SPLITS:
        for seed in range(8):
            keys[split].add(sokoban_class(rules.generate(np.random.default_rng(seed), split)))
    assert not keys["train"] & keys["validation"] and not keys["train"] & keys["test"]


def test_plan_path_levels_are_distinct_and_disjoint_up_to_symmetry():
    drawn = {split: [plan_path_class(s) for s in levels("llm/PlanPath-v0", split, range(150))] for split in SPLITS}
    for split in SPLITS:
        assert len(set(drawn[split])) == 150, split
    assert not set(drawn["train"]) & (set(drawn["validation"]) | set(drawn["test"]))


@pytest.mark.slow
def test_sokoban_enumeration_agrees_with_brute_force():
    """Every one-box level of the 6x6 room with up to 2 inner walls that needs 3+ pushes, found
    by trying every wall layout, target, box and player area (no symmetry shortcuts; the
    independent canonical form), is one of the enumerated classes, and back. (A box next to
    its target can need 3 pushes around a wall: the former shortcut on the box distance
    dropped such levels.)"""
    inner = [(r, c) for r in range(1, 5) for c in range(1, 5)]
    found, rejected = set(), set()
    for count in range(3):
        for wall_cells in itertools.combinations(inner, count):
            floor = set(inner) - set(wall_cells)
            walls = frozenset((r, c) for r in range(6) for c in range(6) if (r, c) not in floor)
            if not sokoban._connected(floor):
                continue
            for target, box in itertools.permutations(sorted(floor), 2):
                room = sokoban.Room(6, 6, walls, frozenset([target]))
                rest = floor - {box}
                while rest:  # one player cell per walkable area
                    state = sokoban.SokobanState(room, frozenset([box]), min(rest))
                    rest -= sokoban.player_area(state)
                    key = sokoban_class(state)
                    if key not in found and key not in rejected:
                        (found if (sokoban.fewest_pushes(state) or 0) >= 3 else rejected).add(key)
    enumerated = Counter(sokoban_class(s) for s in sokoban.level_classes(6, 6, 2, 3))
    assert set(enumerated) == found and max(enumerated.values()) == 1
    assert len(found) == 274


def test_fewest_pushes_by_hand():
    # The box next to its target: one push. Diagonal to it in an open room: 2 + 2 = 4 pushes
    # (the shortest *move* solution also pushes 4 times here).
    assert sokoban.fewest_pushes(sokoban.from_text("5 5\n#####\n#@$.#\n#___#\n#___#\n#####")) == 1
    diagonal = sokoban.from_text("6 6\n######\n#@___#\n#_$__#\n#____#\n#___.#\n######")
    assert sokoban.fewest_pushes(diagonal) == 4
    # In a corner that is not a target the box is lost.
    assert sokoban.fewest_pushes(sokoban.from_text("5 5\n#####\n#$__#\n#_@_#\n#__.#\n#####")) is None
    # The same for every cell of the player's area and every mirror image.
    for player in [(1, 3), (3, 1), (4, 4)]:
        moved = sokoban.SokobanState(diagonal.room, diagonal.boxes, player)
        assert sokoban.fewest_pushes(moved) == 4
