"""Sudoku splits are disjoint up to symmetry, and every split draws its own, diverse puzzles.

The equivalence checks here are written independently of ``rules.canonical_clues`` (pure
Python, symmetries built from scratch), so a wrong canonical form cannot hide an overlap.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import llm_envs
from llm_envs.core.splits import SPLITS, split_of
from llm_envs.envs.sudoku.rules import (
    SudokuRules,
    canonical_clues,
    count_solutions,
    puzzle_classes,
    split_classes,
    symmetry_maps,
)


def rename_by_first_appearance(grid):
    names: dict[int, int] = {}
    return tuple(names.setdefault(v, len(names) + 1) if v else 0 for v in grid)


def shidoku_symmetries():
    """The 128 cell maps of the 4x4 grid that keep every Sudoku valid, built from scratch."""
    line_orders = [
        [*first, *second]
        for bands in ([0, 1], [1, 0])
        for first in itertools.permutations([2 * bands[0], 2 * bands[0] + 1])
        for second in itertools.permutations([2 * bands[1], 2 * bands[1] + 1])
    ]
    maps = []
    for rows in line_orders:
        for cols in line_orders:
            maps.append([4 * r + c for r in rows for c in cols])
            maps.append([4 * c + r for r in rows for c in cols])  # transposed
    return maps


SHIDOKU = shidoku_symmetries()


def shidoku_class(clues):
    """Independent canonical form of a 4x4 puzzle under the whole group (cells and digits)."""
    return min(rename_by_first_appearance([clues[i] for i in m]) for m in SHIDOKU)


def renaming_class(clues):
    """Canonical form under digit renaming only (the former generator's split variants)."""
    return rename_by_first_appearance(clues)


def puzzles(size: int, split: str, seeds) -> list[tuple[int, ...]]:
    env = llm_envs.make("llm/Sudoku-v0", size=size, split=split)
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out.append(env.initial_state.puzzle.clues)
    env.close()
    return out


# (size, first N training seeds, evaluation seeds per split)
CASES = [(4, 300, 100), (6, 20, 6), (9, 12, 4)]


@pytest.mark.parametrize(("size", "train_count", "eval_count"), CASES)
def test_no_evaluation_puzzle_is_a_training_puzzle_up_to_symmetry(size, train_count, eval_count):
    """Formerly validation seed s was train seed s with its digits renamed (279 of 300 4x4
    seeds), and 274 of 299 distinct 4x4 test puzzles were renamed training puzzles."""
    train = puzzles(size, "train", range(train_count))
    seen_renamed = {renaming_class(p) for p in train}
    seen_full = {shidoku_class(p) for p in train} if size == 4 else set()
    seen_canonical = {canonical_clues(p, size) for p in train}
    for split in ("validation", "test"):
        for index, clues in enumerate(puzzles(size, split, range(eval_count))):
            assert renaming_class(clues) not in seen_renamed, (split, index)
            assert canonical_clues(clues, size) not in seen_canonical, (split, index)
            if size == 4:
                assert shidoku_class(clues) not in seen_full, (split, index)


@pytest.mark.parametrize(("size", "train_count", "eval_count"), CASES)
def test_puzzles_within_a_split_are_diverse(size, train_count, eval_count):
    """Distinct seeds give distinct puzzles (up to symmetry) until a split's puzzles run out:
    4x4 has 43 validation and 29 test classes, so seeds 0..42 play every validation class
    once; the larger sizes are sampled from spaces far too large to repeat."""
    classes = {split: len(split_classes(4, 6, split)) for split in SPLITS} if size == 4 else {}
    for split, count in (("train", train_count), ("validation", eval_count), ("test", eval_count)):
        if size == 4 and split != "train":
            count = classes[split]
        drawn = puzzles(size, split, range(count))
        keys = {shidoku_class(p) if size == 4 else canonical_clues(p, size) for p in drawn}
        assert len(keys) == count, split
        if size == 4 and split != "train":
            assert keys == {shidoku_class(c) for c in split_classes(4, 6, split)}


def test_seeds_beyond_a_small_split_repeat_it_evenly():
    classes = split_classes(4, 6, "test")
    drawn = puzzles(4, "test", range(2 * len(classes)))
    first, second = drawn[: len(classes)], drawn[len(classes) :]
    assert [shidoku_class(p) for p in first] == [shidoku_class(p) for p in second]
    assert first != second  # the same classes, shown under other symmetries and digit names


@pytest.mark.parametrize("size", [4, 6, 9])
def test_canonical_form_is_invariant_under_every_symmetry_used(size):
    rules = SudokuRules(size=size)
    rng = np.random.default_rng(size)
    maps = symmetry_maps(size)
    for _ in range(3 if size == 9 else 6):
        clues = rules.generate(rng, "train").puzzle.clues
        canonical = canonical_clues(clues, size)
        assert canonical == rename_by_first_appearance(canonical)
        for _ in range(5):
            moved = [clues[i] for i in maps[int(rng.integers(len(maps)))]]
            names = [int(v) + 1 for v in rng.permutation(size)]
            variant = tuple(names[v - 1] if v else 0 for v in moved)
            assert count_solutions(variant, size) == 1  # a symmetry keeps the puzzle valid
            assert canonical_clues(variant, size) == canonical
        if size == 4:
            assert canonical == shidoku_class(clues)
    assert len(maps) == {4: 128, 6: 3456, 9: 72}[size]
    assert len({tuple(m) for m in maps}) == len(maps)


def test_4x4_puzzle_counts_per_split_are_the_documented_ones():
    """docs/envs/sudoku.md: 376 classes of 4x4 puzzles with 6 clues: 304 train, 43 validation,
    29 test. Every class has a unique solution and exactly 6 clues."""
    classes = puzzle_classes(4, 6)
    assert len(classes) == 376
    assert {s: len(split_classes(4, 6, s)) for s in SPLITS} == {"train": 304, "validation": 43, "test": 29}
    assert all(count_solutions(c, 4) == 1 and sum(1 for v in c if v) == 6 for c in classes)
    assert {split_of(f"sudoku 4x4:{''.join(map(str, c))}") for c in split_classes(4, 6, "test")} == {"test"}


@pytest.mark.slow
def test_4x4_enumeration_agrees_with_brute_force():
    """Every 6-clue unique 4x4 puzzle, found by masking all 288 grids, falls into one of the
    enumerated classes and every class is met (independent canonical form)."""
    from llm_envs.envs.sudoku.rules import _search

    grids = _search((0,) * 16, 4, 1000, None)
    representatives = {shidoku_class(g): g for g in grids}
    found = set()
    for grid in representatives.values():
        for cells in itertools.combinations(range(16), 6):
            clues = tuple(v if i in cells else 0 for i, v in enumerate(grid))
            if count_solutions(clues, 4) == 1:
                found.add(shidoku_class(clues))
    assert found == {shidoku_class(c) for c in puzzle_classes(4, 6)}
