"""Sudoku rules: fill an N x N grid (4x4 by default; 6x6, 9x9) so that every row, column and box
holds 1..N once, keeping every clue (pure logic).

Puzzles are read as ``N`` then N lines of N numbers (0 = empty); answers are the whole grid on
one line, ``#### [[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]`` (or rows of digits). Every generated
puzzle has exactly one solution (:func:`count_solutions`); a submission that changes or blanks a
clue is rejected and the board does not change. The dense reward of a submission
(:class:`SudokuRewards`) is a step cost plus the change of a potential (:func:`potential`: the
fraction of correct cells, a conflict penalty, the solved reward), or for a rejected one a
penalty by the fraction of clues changed.

Splits are assigned on :func:`canonical_clues` (the same for every digit renaming and grid
symmetry); 4x4 puzzles are enumerated (:func:`puzzle_classes`), larger ones sampled
(:func:`make_puzzle`). docs/envs/sudoku.md gives the formats, the reward formula and how it
differs from the released PettingLLMs code.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llm_envs.core.splits import check_split, split_generator, split_of
from llm_envs.envs._common import wrong_sign_holes
from llm_envs.envs.puzzle_rules import (
    PlanFormatError,
    PlanOutcome,
    generate_in_split,
    pick_enumerated,
)

Grid = tuple[int, ...]  # row-major, N * N values, 0 = empty

#: Box shape (rows, columns) for each supported size.
BOX_SHAPES: dict[int, tuple[int, int]] = {4: (2, 2), 6: (2, 3), 9: (3, 3)}


# ------------------------------------------------------------------------------------ board
@dataclass(frozen=True)
class Puzzle:
    """An immutable puzzle: its clues and its (unique) solution."""

    size: int
    clues: Grid
    solution: Grid

    @property
    def box_shape(self) -> tuple[int, int]:
        return BOX_SHAPES[self.size]

    @property
    def clue_cells(self) -> tuple[int, ...]:
        return tuple(i for i, v in enumerate(self.clues) if v)

    def __deepcopy__(self, memo: dict) -> Puzzle:  # immutable: clones share it
        return self


@dataclass(frozen=True)
class SudokuState:
    """A puzzle and the board of the last accepted submission (the clues at the start)."""

    puzzle: Puzzle
    board: Grid

    def __deepcopy__(self, memo: dict) -> SudokuState:  # immutable: clones share it
        return self


def units(size: int) -> list[list[int]]:
    """Every row, column and box as a list of cell indices."""
    box_rows, box_cols = BOX_SHAPES[size]
    rows = [[r * size + c for c in range(size)] for r in range(size)]
    cols = [[r * size + c for r in range(size)] for c in range(size)]
    boxes = [
        [(br + r) * size + (bc + c) for r in range(box_rows) for c in range(box_cols)]
        for br in range(0, size, box_rows)
        for bc in range(0, size, box_cols)
    ]
    return rows + cols + boxes


def has_conflict(grid: Grid, size: int) -> bool:
    """True if some row, column or box holds a non-zero number twice."""
    for unit in units(size):
        values = [grid[i] for i in unit if grid[i]]
        if len(values) != len(set(values)):
            return True
    return False


@functools.cache
def peers(size: int) -> tuple[frozenset[int], ...]:
    """For each cell, the other cells that share a row, column or box with it."""
    related: list[set[int]] = [set() for _ in range(size * size)]
    for unit in units(size):
        for cell in unit:
            related[cell].update(unit)
    return tuple(frozenset(cells - {cell}) for cell, cells in enumerate(related))


def single_fill_plans(state: SudokuState) -> list[Grid]:
    """The one-cell moves of the enumerable-moves hook, as whole grids (the answer format).

    Each is the current board with one empty cell filled by a number that is not already in
    that cell's row, column or box; cells in row-major order, numbers ascending. On a board
    without repeats (every board that such moves reach) this is exactly "fill one cell without
    creating a repeat". A board where no cell can be filled that way (a dead end: every empty
    cell sees all numbers, or a full board that is not the solution) gets one move instead:
    the clues, i.e. start over. Empty only for a solved board.
    """
    puzzle, board = state.puzzle, state.board
    size = puzzle.size
    cell_peers = peers(size)
    plans: list[Grid] = []
    for cell, value in enumerate(board):
        if value:
            continue
        seen = {board[other] for other in cell_peers[cell]}
        for number in range(1, size + 1):
            if number not in seen:
                plans.append(board[:cell] + (number,) + board[cell + 1 :])
    if not plans and board != puzzle.solution:
        return [puzzle.clues]
    return plans


# ------------------------------------------------------------------------------------ solver
def _search(grid: Grid, size: int, limit: int, rng: np.random.Generator | None) -> list[Grid]:
    """Up to ``limit`` solutions of ``grid`` by backtracking on bitmasks, always filling the
    cell with the fewest candidates first. ``rng`` shuffles the order values are tried in."""
    box_rows, box_cols = BOX_SHAPES[size]
    boxes_per_row = size // box_cols
    row_used = [0] * size
    col_used = [0] * size
    box_used = [0] * size
    cell_units = []
    cells = list(grid)
    for i in range(size * size):
        r, c = divmod(i, size)
        b = (r // box_rows) * boxes_per_row + c // box_cols
        cell_units.append((r, c, b))
        v = cells[i]
        if v:
            if not 1 <= v <= size:
                return []
            bit = 1 << v
            if row_used[r] & bit or col_used[c] & bit or box_used[b] & bit:
                return []
            row_used[r] |= bit
            col_used[c] |= bit
            box_used[b] |= bit
    empties = [i for i in range(size * size) if not cells[i]]
    full = ((1 << (size + 1)) - 1) & ~1
    solutions: list[Grid] = []

    def recurse(remaining: list[int]) -> bool:
        if not remaining:
            solutions.append(tuple(cells))
            return len(solutions) >= limit
        best_pos, best_mask, best_count = -1, 0, size + 1
        for pos, i in enumerate(remaining):
            r, c, b = cell_units[i]
            mask = full & ~(row_used[r] | col_used[c] | box_used[b])
            count = bin(mask).count("1")
            if count < best_count:
                best_pos, best_mask, best_count = pos, mask, count
                if count <= 1:
                    break
        if best_count == 0:
            return False
        i = remaining[best_pos]
        rest = remaining[:best_pos] + remaining[best_pos + 1 :]
        r, c, b = cell_units[i]
        values = [v for v in range(1, size + 1) if best_mask >> v & 1]
        if rng is not None:
            values = [values[k] for k in rng.permutation(len(values))]
        for v in values:
            bit = 1 << v
            cells[i] = v
            row_used[r] |= bit
            col_used[c] |= bit
            box_used[b] |= bit
            if recurse(rest):
                return True
            row_used[r] &= ~bit
            col_used[c] &= ~bit
            box_used[b] &= ~bit
        cells[i] = 0
        return False

    recurse(empties)
    return solutions


def count_solutions(grid: Grid, size: int, limit: int = 2) -> int:
    """The number of solutions of ``grid``, counting at most ``limit``."""
    return len(_search(grid, size, limit, None))


def solve_grid(grid: Grid, size: int) -> Grid | None:
    """One solution of ``grid`` (``None`` if it has none)."""
    found = _search(grid, size, 1, None)
    return found[0] if found else None


# ------------------------------------------------------------------------------------ generator
def random_solution(rng: np.random.Generator, size: int) -> Grid:
    """A uniformly shuffled complete grid (randomised backtracking from an empty grid)."""
    return _search((0,) * (size * size), size, 1, rng)[0]


def make_puzzle(rng: np.random.Generator, size: int, num_clues: int) -> Puzzle:
    """Remove cells of a random complete grid in random order while the solution stays
    unique, until ``num_clues`` clues remain or no cell can be removed (then more remain)."""
    solution = random_solution(rng, size)
    clues = list(solution)
    remaining = size * size
    for i in rng.permutation(size * size):
        if remaining <= num_clues:
            break
        value, clues[i] = clues[i], 0
        if count_solutions(tuple(clues), size, 2) == 1:
            remaining -= 1
        else:
            clues[i] = value
    return Puzzle(size, tuple(clues), solution)


def relabel(puzzle: Puzzle, permutation: list[int]) -> Puzzle:
    """The same puzzle with digit ``d`` written as ``permutation[d - 1]`` (unique stays unique)."""

    def apply(grid: Grid) -> Grid:
        return tuple(permutation[v - 1] if v else 0 for v in grid)

    return Puzzle(puzzle.size, apply(puzzle.clues), apply(puzzle.solution))


# ------------------------------------------------------------------------------------ symmetry
def _line_orders(blocks: int, width: int, *, within: bool) -> list[list[int]]:
    """Orders of ``blocks * width`` lines that keep every block of ``width`` lines together:
    every order of the blocks, and (``within``) every order of the lines inside each block."""
    inner = list(itertools.permutations(range(width))) if within else [tuple(range(width))]
    return [
        [block * width + offset for block, order in zip(blocks_order, orders) for offset in order]
        for blocks_order in itertools.permutations(range(blocks))
        for orders in itertools.product(inner, repeat=blocks)
    ]


@functools.cache
def symmetry_maps(size: int) -> np.ndarray:
    """Cell maps of the grid symmetries used for canonical forms, one per row:
    ``transformed[i] = grid[maps[k, i]]``. Each keeps every valid grid valid.

    * 4x4: the whole group: band and stack orders, row and column orders within them, and the
      transposition (128 maps);
    * 6x6 (2x3 boxes): every band, stack, row and column order (3456 maps; a transposition
      would turn 2x3 boxes into 3x2 ones);
    * 9x9: band and stack orders and the transposition (72 of the 3,359,232 maps of the
      whole group, which is too large to search for every puzzle; digit renaming, the way
      the former generator made its split variants, is always covered).
    """
    box_rows, box_cols = BOX_SHAPES[size]
    within = size != 9
    rows = _line_orders(size // box_rows, box_rows, within=within)
    cols = _line_orders(size // box_cols, box_cols, within=within)
    cells = np.arange(size * size).reshape(size, size)
    maps = []
    for row_order in rows:
        for col_order in cols:
            moved = cells[np.ix_(row_order, col_order)]
            maps.append(moved.ravel())
            if box_rows == box_cols:
                maps.append(moved.T.ravel())
    return np.array(maps, dtype=np.intp)


def canonical_clues(clues: Grid, size: int) -> Grid:
    """The canonical form of a puzzle's clues: the smallest grid (row-major, 0 < every digit)
    among all of :func:`symmetry_maps` combined with every renaming of the digits.

    For each map the best renaming numbers the digits in order of first appearance; a map
    whose first clue comes earlier than another's can never win (its first clue is a 1 where
    the other still has a 0), so only maps with the latest first clue are compared in full.
    Equal for every variant of the same puzzle under these symmetries (tested).
    """
    grids = np.asarray(clues, dtype=np.int64)[symmetry_maps(size)]
    filled = grids != 0
    first_clue = filled.argmax(axis=1)
    grids = grids[first_clue == first_clue.max()]
    cells = size * size
    first_seen = np.full((len(grids), size + 1), cells, dtype=np.int64)
    first_seen[:, 0] = -1  # the blank stays 0
    for digit in range(1, size + 1):
        hits = grids == digit
        first_seen[:, digit] = np.where(hits.any(axis=1), hits.argmax(axis=1), cells)
    rank = np.argsort(np.argsort(first_seen, axis=1, kind="stable"), axis=1)
    renamed = np.take_along_axis(rank, grids, axis=1)
    # Lexicographic minimum: pack each row into base-(size + 1) numbers, a few cells each.
    chunk = 16
    keys = [
        renamed[:, start : start + chunk] @ ((size + 1) ** np.arange(min(chunk, cells - start) - 1, -1, -1))
        for start in range(0, cells, chunk)
    ]
    best = int(np.lexsort(keys[::-1])[0])
    return tuple(int(v) for v in renamed[best])


def split_key(puzzle: Puzzle) -> str:
    """The text the split is assigned on: the canonical form of the clues."""
    return _key_text(canonical_clues(puzzle.clues, puzzle.size), puzzle.size)


def _key_text(canonical: Grid, size: int) -> str:
    return f"sudoku {size}x{size}:" + "".join(str(v) for v in canonical)


#: Sizes whose puzzles are enumerated (every class, then one per seed) instead of sampled.
ENUMERATED_SIZES = (4,)


@functools.cache
def puzzle_classes(size: int, num_clues: int) -> tuple[Grid, ...]:
    """Every puzzle of ``size`` with exactly ``num_clues`` clues and a unique solution, one
    canonical form per class (sorted). Meant for 4x4 (288 complete grids): a puzzle's solution
    maps onto one of the essentially different complete grids, so masking the clue cells of
    those covers every class; a mask is a unique puzzle when exactly one complete grid agrees
    with it on the masked cells."""
    cells = size * size
    grids = np.array(_search((0,) * cells, size, 10**6, None), dtype=np.int64)
    weights = 1 << np.arange(cells, dtype=np.int64)
    masks = np.array(
        [sum(1 << i for i in chosen) for chosen in itertools.combinations(range(cells), num_clues)],
        dtype=np.int64,
    )
    representatives = {canonical_clues(tuple(int(v) for v in g), size): g for g in grids}
    maps = symmetry_maps(size)
    classes: set[Grid] = set()
    for grid in representatives.values():
        agree = ((grids == grid) * weights).sum(axis=1)  # cells where each grid equals this one
        unique = ((agree[None, :] & masks[:, None]) == masks[:, None]).sum(axis=1) == 1
        kept = (masks[unique, None] >> np.arange(cells)) & 1
        # Masks that a symmetry of this grid maps onto each other give the same class: keep
        # the smallest of each orbit before the (costlier) canonical forms.
        automorphisms = maps[[_is_renaming(grid[m], grid) for m in maps]]
        orbit_min = (kept[:, automorphisms] @ weights).min(axis=1)
        kept = kept[orbit_min == kept @ weights]
        classes.update(_canonical_many(kept * grid, size))
    return tuple(sorted(classes))


def _is_renaming(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether grid ``a`` is grid ``b`` with its digits renamed (a bijection)."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len({x for x, _ in pairs}) == len({y for _, y in pairs})


def _canonical_many(puzzles: np.ndarray, size: int) -> list[Grid]:
    """:func:`canonical_clues` of many small puzzles at once (rows of ``puzzles``; every
    canonical grid must pack into 63 bits, true for 4x4)."""
    grids = puzzles[:, symmetry_maps(size)]  # (puzzle, map, cell)
    cells = size * size
    first_seen = np.full((*grids.shape[:2], size + 1), cells, dtype=np.int64)
    first_seen[..., 0] = -1
    for digit in range(1, size + 1):
        hits = grids == digit
        first_seen[..., digit] = np.where(hits.any(axis=2), hits.argmax(axis=2), cells)
    rank = np.argsort(np.argsort(first_seen, axis=2, kind="stable"), axis=2)
    renamed = np.take_along_axis(rank, grids, axis=2)
    packed = renamed @ ((size + 1) ** np.arange(cells - 1, -1, -1))
    best = renamed[np.arange(len(renamed)), packed.argmin(axis=1)]
    return [tuple(int(v) for v in row) for row in best]


@functools.cache
def split_classes(size: int, num_clues: int, split: str) -> tuple[Grid, ...]:
    """The :func:`puzzle_classes` that belong to ``split``."""
    return tuple(
        clues for clues in puzzle_classes(size, num_clues) if split_of(_key_text(clues, size)) == split
    )


def random_variant(clues: Grid, size: int, rng: np.random.Generator) -> Puzzle:
    """The puzzle ``clues`` under a random symmetry and a random renaming of its digits."""
    maps = symmetry_maps(size)
    moved = [clues[i] for i in maps[int(rng.integers(len(maps)))]]
    names = [int(v) + 1 for v in rng.permutation(size)]
    variant = tuple(names[v - 1] if v else 0 for v in moved)
    solution = solve_grid(variant, size)
    assert solution is not None  # a symmetry of a unique puzzle is a unique puzzle
    return Puzzle(size, variant, solution)


def generate_puzzle(
    rng: np.random.Generator,
    size: int,
    num_clues: int,
    split: str,
    index: int | None = None,
    *,
    max_tries: int = 10_000,
) -> Puzzle:
    """A unique-solution puzzle whose canonical form (:func:`split_key`) belongs to ``split``.

    4x4 (few puzzles): every class with exactly ``num_clues`` clues is enumerated; the
    episode's ``index`` picks one (:func:`~llm_envs.envs.puzzle_rules.pick_enumerated`: distinct
    seeds give distinct puzzles until the split's classes are used up), shown under a random
    symmetry and renaming. 6x6 and 9x9: :func:`make_puzzle` draws from the split's own stream
    until a puzzle's canonical form hashes to the split.
    """
    check_split(split)
    if size in ENUMERATED_SIZES:
        classes = split_classes(size, num_clues, split)
        if not classes:
            raise ValueError(
                f"no {size}x{size} puzzle with {num_clues} clues belongs to the {split!r} split "
                f"({len(puzzle_classes(size, num_clues))} puzzles in all, up to symmetry); "
                "choose another num_clues"
            )
        stream = split_generator(rng, split)
        return random_variant(pick_enumerated(classes, split, index, stream), size, stream)
    return generate_in_split(
        rng, lambda r: make_puzzle(r, size, num_clues), split_key, split, max_tries=max_tries
    )


# ------------------------------------------------------------------------------------ text
def grid_text(grid: Grid, size: int) -> str:
    return "\n".join(" ".join(str(v) for v in grid[r * size : (r + 1) * size]) for r in range(size))


def clues_text(puzzle: Puzzle) -> str:
    """The documented stdin format of the puzzle's clues (also its canonical text)."""
    return f"{puzzle.size}\n{grid_text(puzzle.clues, puzzle.size)}"


def parse_puzzle_text(text: str) -> Puzzle:
    """Parse the stdin format; the puzzle must have exactly one solution."""
    lines = [line.split() for line in text.strip().splitlines() if line.strip()]
    if not lines or len(lines[0]) != 1 or not lines[0][0].isdigit():
        raise ValueError("first line must be the size N")
    size = int(lines[0][0])
    if size not in BOX_SHAPES:
        raise ValueError(f"size must be one of {sorted(BOX_SHAPES)}")
    rows = lines[1:]
    if len(rows) != size or any(len(row) != size for row in rows):
        raise ValueError(f"expected {size} rows of {size} numbers")
    try:
        clues = tuple(int(v) for row in rows for v in row)
    except ValueError as error:
        raise ValueError("cells must be integers") from error
    if any(not 0 <= v <= size for v in clues):
        raise ValueError(f"cells must be in 0..{size}")
    if 0 not in clues:  # (nothing to solve: any answer would be paid the solved grid)
        raise ValueError("the puzzle has no empty cell (0): it is already solved")
    found = _search(clues, size, 2, None)
    if len(found) != 1:
        raise ValueError(f"the puzzle must have exactly one solution, it has {len(found)}+")
    return Puzzle(size, clues, found[0])


_BLANKS = {".", "_", "0"}
_CELL_NUMBER = re.compile(r"[0-9]{1,3}")
_ROW_GROUP = re.compile(r"\[([^\[\]]*)\]")


def parse_grid(text: str, size: int, answer_format: str = "lenient") -> Grid:
    """Parse one answer line into a grid; raises :class:`PlanFormatError` (never evaluates).

    Accepted: nested lists ``[[1,2,3,4],...]`` (numbers may be quoted) or, unless
    ``answer_format="list"`` (the released code's: nested lists only), ``size`` groups of
    ``size`` digits separated by spaces, commas, slashes or ``|`` (``1234 3412 ...``, sizes up
    to 9). ``0``, ``.`` or ``_`` leave a cell empty.
    """

    def cell(token: str) -> int:
        token = token.strip().strip("'\"")
        if token in _BLANKS:
            return 0
        # ASCII digits only: ``str.isdigit`` also admits "²" and other digits ``int`` refuses,
        # and a cell of thousands of digits is past ``int``'s limit on a string's length.
        if not _CELL_NUMBER.fullmatch(token) or not 1 <= int(token) <= size:
            raise PlanFormatError(f"cell {token[:10]!r} is not a number from 1 to {size}")
        return int(token)

    groups = _ROW_GROUP.findall(text)
    # (a nested list as Python writes or reads it: "[[1, 2], ...]" or "[ [1, 2], ... ]")
    if answer_format == "list" and not (groups and re.match(r"\[\s*\[", text.strip())):
        raise PlanFormatError(f"expected the grid as a list of {size} rows, e.g. [[1,2,...], ...]")
    if groups:
        if _ROW_GROUP.sub("", text).strip(" [],\t") != "":
            raise PlanFormatError("unexpected text around the grid")
        rows = [[cell(t) for t in re.split(r"[,\s]+", g.strip()) if t.strip()] for g in groups]
    else:
        tokens = [t for t in re.split(r"[\s,/|;]+", text.strip()) if t]
        if len(tokens) != size or size > 9:
            raise PlanFormatError(f"expected a list of {size} rows, e.g. [[...], ...]")
        rows = [[cell(ch) for ch in token] for token in tokens]
    if len(rows) != size or any(len(row) != size for row in rows):
        raise PlanFormatError(f"expected {size} rows of {size} numbers")
    return tuple(v for row in rows for v in row)


def format_grid(grid: Grid, size: int) -> str:
    rows = (",".join(str(v) for v in grid[r * size : (r + 1) * size]) for r in range(size))
    return "[" + ",".join(f"[{row}]" for row in rows) + "]"


# ------------------------------------------------------------------------------------ rewards
@dataclass(frozen=True)
class SudokuRewards:
    """Dense reward weights (see the module docstring for the formula)."""

    step_cost: float = -0.01
    progress_weight: float = 0.5
    conflict_penalty: float = 0.5
    clue_penalty: float = 1.0
    solved_reward: float = 2.0
    format_penalty: float = -1.0

    def reward_holes(self, reward_shaping: str) -> list[str]:
        """Why these weights let a play other than solving earn more ([] if they do not): a
        gain or penalty amount below 0 (a negative ``clue_penalty`` pays a rejected submission
        at every turn), a positive cost, or a solved reward that does not cover one
        submission's cost (then a malformed reply every turn earns more than solving)."""
        holes = wrong_sign_holes(
            self,
            gains=("progress_weight", "conflict_penalty", "clue_penalty", "solved_reward"),
            costs=("step_cost", "format_penalty"),
        )
        if self.solved_reward >= 0 and self.solved_reward + self.step_cost < 0:
            holes.append(
                f"solved_reward={self.solved_reward:g} with step_cost={self.step_cost:g}: the "
                "submission that solves costs more than solving pays (solved_reward + step_cost "
                "must be >= 0)"
            )
        return holes


def potential(state: SudokuState, rewards: SudokuRewards) -> float:
    """The potential of ``"potential"`` shaping: ``progress_weight`` x the share of the
    puzzle's empty cells that hold the solution's value, ``- conflict_penalty`` if a row,
    column or box repeats a number, ``+ solved_reward`` when solved. An accepted submission's
    reward is the step cost plus the change of this potential."""
    puzzle, board = state.puzzle, state.board
    empty_cells = [i for i in range(len(board)) if not puzzle.clues[i]]
    correct = sum(board[i] == puzzle.solution[i] for i in empty_cells)
    return (
        rewards.progress_weight * correct / len(empty_cells)
        - rewards.conflict_penalty * has_conflict(board, puzzle.size)
        + rewards.solved_reward * (board == puzzle.solution)
    )


def apply_grid(
    state: SudokuState, grid: Grid, rewards: SudokuRewards, reward_shaping: str = "potential"
) -> PlanOutcome:
    """Submit ``grid`` for ``state``'s puzzle and score it with the dense shaped reward.

    ``"potential"`` shaping pays the change of :func:`potential` from the board of the last
    accepted submission; ``"paper"`` shaping pays the absolute share of correct cells, the
    conflict penalty and the solved reward again at every submission.
    """
    puzzle = state.puzzle
    clue_cells = puzzle.clue_cells
    changed = [i for i in clue_cells if grid[i] != puzzle.clues[i]]
    if changed:
        components = {
            "step": rewards.step_cost,
            "clues": -rewards.clue_penalty * len(changed) / len(clue_cells),
        }
        summary = (
            f"rejected: the answer changes {len(changed)} of the {len(clue_cells)} clues; "
            "the board did not change"
        )
        solved = state.board == puzzle.solution
        return PlanOutcome(state, float(sum(components.values())), components, solved, summary)
    empty_cells = [i for i in range(len(grid)) if not puzzle.clues[i]]
    after = SudokuState(puzzle, grid)
    filled = sum(bool(grid[i]) for i in empty_cells)
    conflict = has_conflict(grid, puzzle.size)
    solved = grid == puzzle.solution
    if reward_shaping == "potential":
        before = state
    else:  # "paper": measured against nothing, so every submission pays it again
        before = SudokuState(puzzle, puzzle.clues)

    def share(board: Grid) -> float:
        return sum(board[i] == puzzle.solution[i] for i in empty_cells) / len(empty_cells)

    components = {
        "step": rewards.step_cost,
        "progress": rewards.progress_weight * (share(grid) - share(before.board)),
        "conflict": -rewards.conflict_penalty
        * (conflict - has_conflict(before.board, puzzle.size)),
    }
    if solved and before.board != puzzle.solution:
        components["solved"] = rewards.solved_reward
    summary = (
        f"accepted: {filled} of {len(empty_cells)} empty cells filled"
        + ("; a row, column or box repeats a number" if conflict else "")
        + ("; solved" if solved else "; not solved")
    )
    return PlanOutcome(after, float(sum(components.values())), components, solved, summary)


# ------------------------------------------------------------------------------------ the rules
REFERENCE_PROGRAM = (Path(__file__).with_name("reference_program.py")).read_text(encoding="utf-8")


@dataclass(frozen=True)
class SudokuRules:
    """Sudoku as :class:`~llm_envs.envs.puzzle_rules.PuzzleRules` (immutable, shared).

    Difficulty knobs: ``size`` (4, 6 or 9) and ``num_clues`` (fewer clues are harder; the
    generator stops earlier if removing any further clue would make the solution ambiguous).
    """

    size: int = 4
    num_clues: int | None = None
    rewards: SudokuRewards = SudokuRewards()
    reward_shaping: str = "potential"
    answer_format: str = "lenient"
    game_name: str = "Sudoku"

    def __post_init__(self) -> None:
        if self.size not in BOX_SHAPES:
            raise ValueError(f"size must be one of {sorted(BOX_SHAPES)}, got {self.size}")
        if self.num_clues is not None and not 1 <= self.num_clues < self.size * self.size:
            raise ValueError(f"num_clues must be in 1..{self.size * self.size - 1}")
        if self.size in ENUMERATED_SIZES and self.num_clues is not None and self.num_clues < 4:
            raise ValueError("a 4x4 puzzle with a unique solution has at least 4 clues")

    @property
    def target_clues(self) -> int:
        """``num_clues``, or the default for the size: 6 (4x4), 14 (6x6), 30 (9x9)."""
        if self.num_clues is not None:
            return self.num_clues
        return {4: 6, 6: 14, 9: 30}[self.size]

    @property
    def format_penalty(self) -> float:
        return self.rewards.format_penalty

    def generate(self, rng: np.random.Generator, split: str, index: int | None = None) -> SudokuState:
        puzzle = generate_puzzle(rng, self.size, self.target_clues, split, index)
        return SudokuState(puzzle, puzzle.clues)

    def split_key(self, state: SudokuState) -> str:
        return split_key(state.puzzle)

    def load(self, text: str) -> SudokuState:
        puzzle = parse_puzzle_text(text)
        # The prompts state the configured size, and the bound on the moves depends on it.
        if puzzle.size != self.size:
            raise ValueError(
                f"the puzzle is {puzzle.size}x{puzzle.size}, the rules are for size={self.size}"
            )
        return SudokuState(puzzle, puzzle.clues)

    def puzzle_text(self, state: SudokuState) -> str:
        # Programs always get the original puzzle: answers replace the whole board, so the clues
        # are all a solver needs, and a wrong earlier answer cannot make the input unsolvable.
        return clues_text(state.puzzle)

    def status_text(self, state: SudokuState) -> str:
        if state.board == state.puzzle.clues:
            return ""
        return (
            "Board after your last accepted answer (0 = empty):\n"
            f"```\n{grid_text(state.board, state.puzzle.size)}\n```"
        )

    def parse_plan(self, state: SudokuState, text: str) -> Grid:
        return parse_grid(text, state.puzzle.size, self.answer_format)

    def format_plan(self, plan: Grid) -> str:
        return format_grid(plan, math.isqrt(len(plan)))

    def apply_plan(self, state: SudokuState, plan: Grid) -> PlanOutcome:
        return apply_grid(state, plan, self.rewards, self.reward_shaping)

    def potential(self, state: SudokuState) -> float:
        return potential(state, self.rewards)

    def is_solved(self, state: SudokuState) -> bool:
        return state.board == state.puzzle.solution

    def solve(self, state: SudokuState) -> Grid | None:
        return solve_grid(state.puzzle.clues, state.puzzle.size)

    def random_plan(self, state: SudokuState, rng: np.random.Generator) -> Grid:
        """The clues kept and every empty cell filled with a random number."""
        size = state.puzzle.size
        return tuple(v if v else int(rng.integers(1, size + 1)) for v in state.puzzle.clues)

    @property
    def max_legal_plans(self) -> int:
        """Every cell times every number (a bound; the real count is much smaller)."""
        return self.size**3

    def legal_plans(self, state: SudokuState) -> list[Grid]:
        return single_fill_plans(state)

    def rules_text(self) -> str:
        n = self.size
        box_rows, box_cols = BOX_SHAPES[n]
        return (
            f"Sudoku {n}x{n}: fill every empty cell (0) with a number from 1 to {n} so that "
            f"each row, each column and each {box_rows}x{box_cols} box contains every number "
            "exactly once. Keep every given number (clue) unchanged: an answer that changes a "
            "clue is rejected. The puzzle has exactly one solution.\n"
            f"Input format: the first line is N ({n}), then N lines of N numbers separated by "
            "spaces, 0 for an empty cell."
        )

    def answer_example(self) -> str:
        return (
            f"#### [[row 1], [row 2], ...]   (the whole {self.size}x{self.size} grid on one line: "
            f"a list of {self.size} rows, each a list of {self.size} numbers)"
        )

    def reference_program(self) -> str:
        return REFERENCE_PROGRAM

    def __deepcopy__(self, memo: dict[int, Any]) -> SudokuRules:
        return self
