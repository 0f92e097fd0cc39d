"""Sokoban rules: push every box onto a target (pure logic).

Levels are read and shown in XSB with ``_`` for floor. The player walks onto floor or targets and
pushes a box one cell if the cell behind it is free; a move into a wall, or a push into a wall or
another box, is *blocked*. Answers are ``#### U R R D`` (also ``["U", "R"]``, ``URRD``). The
dense reward of a move list (:class:`SokobanRewards`) is its move costs plus the change of a
potential (:func:`potential`): boxes on targets, the boxes' distance to the targets and the
solved reward (``reward_shaping="paper"``: the released code's +1 onto / -0.5 off a target).

Levels equal up to the room's symmetries and the player's walkable area are one level
(:func:`canonical_level`, the split key). Small one-box rooms (the paper's 6x6) are enumerated
(:func:`level_classes`, one class per episode seed, :func:`~llm_envs.envs.puzzle_rules.pick_enumerated`);
larger rooms are sampled by reverse play (:func:`generate_room`) and checked by the BFS solver
(:func:`solve`). docs/envs/sokoban.md gives the text format, the reward formula and the
generator in full.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llm_envs.core.splits import split_generator, split_of
from llm_envs.envs._common import wrong_sign_holes
from llm_envs.envs.plan_path.rules import format_moves, move_answer_example, parse_moves
from llm_envs.envs.puzzle_rules import PlanOutcome, generate_in_split, pick_enumerated

MOVES: dict[str, tuple[int, int]] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "#_.$*@+"

Cell = tuple[int, int]


# ------------------------------------------------------------------------------------ board
@dataclass(frozen=True)
class Room:
    """The fixed part of a level: its size, walls and targets."""

    rows: int
    cols: int
    walls: frozenset[Cell]
    targets: frozenset[Cell]

    def is_open(self, cell: Cell) -> bool:
        """Inside the room and not a wall."""
        r, c = cell
        return 0 <= r < self.rows and 0 <= c < self.cols and cell not in self.walls

    def __deepcopy__(self, memo: dict) -> Room:  # immutable: clones share it
        return self


@dataclass(frozen=True)
class SokobanState:
    """A level in play: the room, the boxes and the player."""

    room: Room
    boxes: frozenset[Cell]
    player: Cell

    def __deepcopy__(self, memo: dict) -> SokobanState:  # immutable: clones share it
        return self


def is_solved(state: SokobanState) -> bool:
    return state.boxes <= state.room.targets


def box_distance(room: Room, boxes: frozenset[Cell]) -> int:
    """Sum over boxes of the Manhattan distance to the nearest target (the shaping potential)."""
    return sum(min(abs(b[0] - t[0]) + abs(b[1] - t[1]) for t in room.targets) for b in boxes)


def move(state: SokobanState, direction: str) -> tuple[SokobanState, bool, Cell | None]:
    """``(new state, moved, (from, to) of a pushed box or None)``; blocked moves change nothing."""
    dr, dc = MOVES[direction]
    room, (pr, pc) = state.room, state.player
    target = (pr + dr, pc + dc)
    if not room.is_open(target):
        return state, False, None
    if target in state.boxes:
        beyond = (target[0] + dr, target[1] + dc)
        if not room.is_open(beyond) or beyond in state.boxes:
            return state, False, None
        boxes = (state.boxes - {target}) | {beyond}
        return SokobanState(room, boxes, target), True, (target, beyond)
    return SokobanState(room, state.boxes, target), True, None


# ------------------------------------------------------------------------------------ text
def to_text(state: SokobanState) -> str:
    room = state.room
    lines = [f"{room.rows} {room.cols}"]
    for r in range(room.rows):
        row = []
        for c in range(room.cols):
            cell = (r, c)
            on_target = cell in room.targets
            if cell in room.walls:
                row.append(WALL)
            elif cell in state.boxes:
                row.append(BOX_ON_TARGET if on_target else BOX)
            elif cell == state.player:
                row.append(PLAYER_ON_TARGET if on_target else PLAYER)
            else:
                row.append(TARGET if on_target else FLOOR)
        lines.append("".join(row))
    return "\n".join(lines)


def from_text(text: str) -> SokobanState:
    """Parse the text format (``' '`` and ``'-'`` are accepted as floor too)."""
    lines = [line.rstrip("\n") for line in text.strip("\n").splitlines() if line.strip()]
    if not lines:
        raise ValueError("empty level")
    header = lines[0].split()
    if len(header) != 2 or not all(h.isdigit() for h in header):
        raise ValueError("first line must be 'rows cols'")
    rows, cols = int(header[0]), int(header[1])
    body = lines[1:]
    if len(body) != rows or any(len(line) > cols for line in body):
        raise ValueError(f"expected {rows} rows of at most {cols} characters")
    walls, targets, boxes = set(), set(), set()
    player = None
    for r, line in enumerate(body):
        for c, ch in enumerate(line.ljust(cols, FLOOR)):
            cell = (r, c)
            if ch == WALL:
                walls.add(cell)
            elif ch in (FLOOR, " ", "-"):
                pass
            elif ch == TARGET:
                targets.add(cell)
            elif ch in (BOX, BOX_ON_TARGET):
                boxes.add(cell)
                if ch == BOX_ON_TARGET:
                    targets.add(cell)
            elif ch in (PLAYER, PLAYER_ON_TARGET):
                if player is not None:
                    raise ValueError("more than one player")
                player = cell
                if ch == PLAYER_ON_TARGET:
                    targets.add(cell)
            else:
                raise ValueError(f"unknown character {ch!r}")
    if player is None:
        raise ValueError("no player '@'")
    if not boxes or len(boxes) != len(targets):
        raise ValueError("the level needs as many targets as boxes, and at least one box")
    return SokobanState(Room(rows, cols, frozenset(walls), frozenset(targets)), frozenset(boxes), player)


# ------------------------------------------------------------------------------------ solver
def live_cells(room: Room) -> frozenset[Cell]:
    """Cells from which a lone box can still be pushed to some target (the rest are dead:
    a box there can never be solved). Computed by pulling a box backwards from every target."""
    live = set(room.targets)
    queue = deque(room.targets)
    while queue:
        box = queue.popleft()
        for dr, dc in MOVES.values():
            # A box now at `box` could have come from `prev`, pushed by a player at `prev - d`.
            prev = (box[0] - dr, box[1] - dc)
            pusher = (prev[0] - dr, prev[1] - dc)
            if prev not in live and room.is_open(prev) and room.is_open(pusher):
                live.add(prev)
                queue.append(prev)
    return frozenset(live)


def solve(state: SokobanState, max_states: int = 500_000) -> tuple[str, ...] | None:
    """A shortest move list that solves ``state`` (breadth-first search over player + boxes,
    pruning boxes on dead cells); ``None`` if there is none or the search passes
    ``max_states`` states."""
    if is_solved(state):
        return ()
    live = live_cells(state.room)
    if not state.boxes <= live:
        return None
    start = (state.player, state.boxes)
    parent: dict[tuple[Cell, frozenset[Cell]], tuple[Any, str] | None] = {start: None}
    queue = deque([state])
    while queue:
        current = queue.popleft()
        key = (current.player, current.boxes)
        for direction in MOVES:
            nxt, moved, pushed = move(current, direction)
            if not moved or (pushed is not None and pushed[1] not in live):
                continue
            nkey = (nxt.player, nxt.boxes)
            if nkey in parent:
                continue
            parent[nkey] = (key, direction)
            if is_solved(nxt):
                moves = []
                while parent[nkey] is not None:
                    nkey, name = parent[nkey]
                    moves.append(name)
                return tuple(reversed(moves))
            if len(parent) > max_states:
                return None
            queue.append(nxt)
    return None


def single_step_plans(state: SokobanState) -> list[tuple[str, ...]]:
    """The one-move plans that change the state (a walk or a push), in the order U, D, L, R
    (the moves of the enumerable-moves hook). A blocked step is left out, unless every step is
    blocked: then all four are listed, so that the list is never empty. A solved level has
    none (moves after solving are ignored)."""
    if is_solved(state):
        return []
    steps = [(name,) for name in MOVES]
    moving = [plan for plan in steps if move(state, plan[0])[1]]
    return moving or steps


def count_pushes(state: SokobanState, moves: tuple[str, ...]) -> int:
    pushes = 0
    for direction in moves:
        state, _, pushed = move(state, direction)
        pushes += pushed is not None
    return pushes


# ------------------------------------------------------------------------------------ rewards
#: The released code's (and the paper's) weight of a push off a target: with +1 onto and -0.5
#: off, pushing a box on and off a target nets +0.5 a cycle (the hole of ``"paper"`` shaping).
PAPER_BOX_OFF_TARGET = -0.5


@dataclass(frozen=True)
class SokobanRewards:
    """Dense reward weights (docs/envs/sokoban.md has the formula).

    ``box_off_target=None`` is ``-box_on_target`` under ``"potential"`` shaping (the box term is
    then a potential difference) and the paper's ``-0.5`` under ``"paper"`` shaping."""

    valid_move: float = -0.01
    blocked_move: float = -0.05
    box_on_target: float = 1.0
    box_off_target: float | None = None
    shaping_scale: float = 0.1
    shaping_gamma: float = 1.0
    solved_reward: float = 10.0
    format_penalty: float = -2.0

    def off_target_weight(self, reward_shaping: str) -> float:
        """The weight of a push off a target under ``reward_shaping``."""
        if self.box_off_target is not None:
            return self.box_off_target
        return -self.box_on_target if reward_shaping == "potential" else PAPER_BOX_OFF_TARGET

    def reward_holes(self, reward_shaping: str) -> list[str]:
        """Why these weights let a play other than solving earn more ([] if they do not)."""
        holes = wrong_sign_holes(
            self,
            gains=("box_on_target", "shaping_scale", "solved_reward"),
            costs=("valid_move", "blocked_move", "format_penalty"),
        )
        off = self.off_target_weight(reward_shaping)
        if off != -self.box_on_target:
            holes.append(
                f"box_on_target={self.box_on_target:g} with box_off_target={off:g} pays "
                f"{self.box_on_target + off:+g} for pushing a box on and off a target (a shuttle "
                "plan farms it without solving)"
            )
        if self.shaping_gamma != 1.0:
            holes.append(
                f"shaping_gamma={self.shaping_gamma:g} pays (1 - gamma) x the box distance for a "
                "move that changes nothing (bumping into walls farms it)"
            )
        return holes


def potential(state: SokobanState, rewards: SokobanRewards) -> float:
    """The potential of ``"potential"`` shaping: ``box_on_target`` per box on a target, minus
    ``shaping_scale`` per unit of box distance, plus ``solved_reward`` when solved. A plan's
    reward is its move costs plus the change of this potential (gamma = 1)."""
    room = state.room
    return (
        rewards.box_on_target * len(state.boxes & room.targets)
        - rewards.shaping_scale * box_distance(room, state.boxes)
        + rewards.solved_reward * is_solved(state)
    )


def solving_margin(rewards: SokobanRewards) -> float:
    """How far below ``Ψ(solved)`` every unsolved state's potential lies at least (a box off
    its target, at distance >= 1): ``solved_reward + box_on_target + shaping_scale``."""
    return rewards.solved_reward + rewards.box_on_target + rewards.shaping_scale


def max_shortest_solution(open_cells: int, num_boxes: int) -> int:
    """A bound on the moves of a shortest solution of a room with ``open_cells`` cells that
    are not walls and ``num_boxes`` boxes: it never visits a (player, boxes) state twice, and
    there are at most ``F·C(F − 1, n)`` of them (F open cells)."""
    return open_cells * math.comb(max(open_cells - 1, 0), num_boxes)


def solving_pays_most(state: SokobanState, rewards: SokobanRewards, max_states: int = 500_000) -> bool:
    """Whether solving ``state`` by a shortest solution is worth more than any play that does
    not solve it: its move costs, ``−valid_move·L*``, stay within :func:`solving_margin`.

    Checked from the room's size first (:func:`max_shortest_solution`: no search for the
    paper's rooms with the default weights); otherwise by solving the level."""
    cost = -rewards.valid_move
    margin = solving_margin(rewards)
    if cost <= 0:
        return True
    room = state.room
    open_cells = room.rows * room.cols - len(room.walls)
    if cost * max_shortest_solution(open_cells, len(state.boxes)) <= margin:
        return True
    plan = solve(state, max_states)
    return plan is not None and cost * len(plan) <= margin


def apply_moves(
    state: SokobanState,
    moves: tuple[str, ...],
    rewards: SokobanRewards,
    reward_shaping: str = "potential",
) -> PlanOutcome:
    """Play ``moves`` from ``state`` and score them with the dense shaped reward.

    A move that is not ``U``/``D``/``L``/``R`` (an unknown element of a list answer) is charged
    as a blocked move and changes nothing. Under
    ``"potential"`` shaping every term but the move costs telescopes (see :func:`potential`);
    ``"paper"`` shaping pays the released code's weights (``+1`` onto a target, ``-0.5`` off).
    """
    room = state.room
    off_weight = rewards.off_target_weight(reward_shaping)
    move_total = on_target = off_target = shaping = 0.0
    used = blocked = pushes = unknown = 0
    for direction in moves:
        if is_solved(state):
            break
        used += 1
        if direction not in MOVES:
            unknown += 1
            blocked += 1
            move_total += rewards.blocked_move
            shaping += (rewards.shaping_gamma - 1.0) * -box_distance(room, state.boxes)
            continue
        before = box_distance(room, state.boxes)
        state, moved, pushed = move(state, direction)
        blocked += not moved
        move_total += rewards.valid_move if moved else rewards.blocked_move
        if pushed is not None:
            pushes += 1
            was_on, now_on = pushed[0] in room.targets, pushed[1] in room.targets
            on_target += rewards.box_on_target * (now_on and not was_on)
            off_target += off_weight * (was_on and not now_on)
        shaping += rewards.shaping_gamma * -box_distance(room, state.boxes) + before
    solved = is_solved(state)
    components = {
        "moves": move_total,
        "box_on_target": on_target,
        "box_off_target": off_target,
        "progress": rewards.shaping_scale * shaping,
    }
    if solved:
        components["solved"] = rewards.solved_reward
    placed = len(state.boxes & room.targets)
    summary = (
        f"{used} move(s) played, {blocked} blocked, {pushes} push(es); {placed} of "
        f"{len(state.boxes)} box(es) on targets"
    )
    if unknown:
        summary += f"; {unknown} unknown move(s) charged as blocked"
    if solved:
        summary += "; solved"
    if used < len(moves):
        summary += f"; {len(moves) - used} move(s) after solving ignored"
    return PlanOutcome(state, float(sum(components.values())), components, solved, summary)


# ------------------------------------------------------------------------------------ generator
def _connected(cells: set[Cell]) -> bool:
    if not cells:
        return False
    first = next(iter(cells))
    seen = {first}
    queue = deque([first])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES.values():
            n = (r + dr, c + dc)
            if n in cells and n not in seen:
                seen.add(n)
                queue.append(n)
    return len(seen) == len(cells)


def generate_room(
    rng: np.random.Generator,
    rows: int,
    cols: int,
    num_boxes: int,
    wall_density: float,
    reverse_steps: int,
    pull_probability: float = 0.8,
) -> SokobanState | None:
    """One candidate level by reverse play; ``None`` if this draw does not qualify.

    The border is wall; each inner cell is a wall with probability ``wall_density`` (the floor
    must stay connected). Targets and the player are placed on random floor cells with the
    boxes on the targets; then the player takes ``reverse_steps`` random steps, pulling the box
    behind it (with probability ``pull_probability``) whenever it walks away from one; the
    position of the walk with the largest box-to-target distance is kept. The caller then
    checks it with :func:`qualifies` (a breadth-first search; last, because it costs the most).
    """
    inner = [(r, c) for r in range(1, rows - 1) for c in range(1, cols - 1)]
    wall_mask = rng.random(len(inner)) < wall_density
    floor = {cell for cell, is_wall in zip(inner, wall_mask) if not is_wall}
    if len(floor) < num_boxes + 2 or not _connected(floor):
        return None
    walls = frozenset((r, c) for r in range(rows) for c in range(cols) if (r, c) not in floor)
    floor_list = sorted(floor)
    picks = rng.choice(len(floor_list), size=num_boxes + 1, replace=False)
    targets = frozenset(floor_list[i] for i in picks[:num_boxes])
    room = Room(rows, cols, walls, targets)
    boxes = set(targets)
    player = floor_list[picks[-1]]
    directions = list(MOVES.values())
    # Draw the whole walk at once (one generator call instead of two per step).
    steps = rng.integers(len(directions), size=reverse_steps).tolist()
    pulls = (rng.random(reverse_steps) < pull_probability).tolist()
    # Keep the position of the walk whose boxes lie farthest from the targets (as gym-sokoban
    # keeps its best-scoring reverse play): a plain last position often has the boxes home.
    best: tuple[frozenset[Cell], Cell] | None = None
    best_score = score = 0
    for direction, pull in zip(steps, pulls):
        dr, dc = directions[direction]
        ahead = (player[0] + dr, player[1] + dc)
        if ahead in walls or ahead in boxes:  # the border is wall, so `ahead` is inside
            continue
        behind = (player[0] - dr, player[1] - dc)
        if pull and behind in boxes:
            boxes.remove(behind)
            boxes.add(player)
            score = box_distance(room, frozenset(boxes))
        player = ahead
        if score >= best_score and score > 0:
            best, best_score = (frozenset(boxes), player), score
    return None if best is None else SokobanState(room, best[0], best[1])


def fewest_pushes(state: SokobanState, max_states: int = 500_000) -> int | None:
    """The fewest pushes of any solution (``None`` if there is none or the search passes
    ``max_states`` states): breadth-first search whose steps are pushes, the player walking
    for free between them. It depends only on the boxes and the area the player can walk in,
    so it is the same for every player cell of that area and every mirror image of the level."""
    room = state.room
    live = live_cells(room)
    start_area = player_area(state)
    seen = {(state.boxes, min(start_area))}
    frontier = [(state.boxes, start_area)]
    depth = 0
    while frontier:
        following = []
        for boxes, area in frontier:
            if boxes <= room.targets:
                return depth
            for box in boxes:
                for dr, dc in MOVES.values():
                    ahead = (box[0] + dr, box[1] + dc)
                    if (box[0] - dr, box[1] - dc) not in area or ahead not in live or ahead in boxes:
                        continue
                    moved = (boxes - {box}) | {ahead}
                    if (moved, box) in seen:  # the player stands where the box was
                        continue
                    reach = player_area(SokobanState(room, moved, box))
                    key = (moved, min(reach))
                    if key not in seen:
                        seen.add(key)
                        seen.add((moved, box))
                        following.append((moved, reach))
                        if len(seen) > 2 * max_states:
                            return None
        frontier = following
        depth += 1
    return None


def qualifies(state: SokobanState, min_pushes: int, max_states: int = 500_000) -> bool:
    """``state`` is solvable and needs at least ``min_pushes`` pushes (:func:`fewest_pushes`).

    (The box distance is only a lower bound on the pushes: a box next to its target may need a
    detour around a wall, so it cannot reject a level on its own.)"""
    pushes = fewest_pushes(state, max_states)
    return pushes is not None and pushes >= min_pushes


# ------------------------------------------------------------------------------------ symmetry
def room_symmetries(rows: int, cols: int) -> list[Callable[[Cell], Cell]]:
    """The maps of a ``rows`` x ``cols`` room onto itself: identity, the two mirrors and the
    half turn; for a square room also the quarter turns and the two diagonal mirrors."""
    last_r, last_c = rows - 1, cols - 1
    maps: list[Callable[[Cell], Cell]] = [
        lambda p: p,
        lambda p: (last_r - p[0], p[1]),
        lambda p: (p[0], last_c - p[1]),
        lambda p: (last_r - p[0], last_c - p[1]),
    ]
    if rows == cols:
        maps += [
            lambda p: (p[1], p[0]),
            lambda p: (last_c - p[1], p[0]),
            lambda p: (p[1], last_r - p[0]),
            lambda p: (last_c - p[1], last_r - p[0]),
        ]
    return maps


def player_area(state: SokobanState) -> frozenset[Cell]:
    """The cells the player can walk to without pushing a box."""
    room, seen = state.room, {state.player}
    queue = deque([state.player])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES.values():
            cell = (r + dr, c + dc)
            if cell not in seen and room.is_open(cell) and cell not in state.boxes:
                seen.add(cell)
                queue.append(cell)
    return frozenset(seen)


def transform(state: SokobanState, symmetry: Callable[[Cell], Cell], player: Cell) -> SokobanState:
    """``state`` under ``symmetry`` with the player on (the image of) ``player``."""
    room = state.room
    moved = Room(
        room.rows,
        room.cols,
        frozenset(map(symmetry, room.walls)),
        frozenset(map(symmetry, room.targets)),
    )
    return SokobanState(moved, frozenset(map(symmetry, state.boxes)), symmetry(player))


def canonical_level(state: SokobanState) -> SokobanState:
    """One representative of the level's class: over every room symmetry, with the player on
    the first cell (row-major) of its walkable area, the one whose (sorted walls, targets,
    boxes, player) sorts first."""
    area = player_area(state)
    room = state.room
    best: tuple | None = None
    best_symmetry: Callable[[Cell], Cell] = room_symmetries(room.rows, room.cols)[0]
    for symmetry in room_symmetries(room.rows, room.cols):
        form = (
            sorted(map(symmetry, room.walls)),
            sorted(map(symmetry, room.targets)),
            sorted(map(symmetry, state.boxes)),
            min(map(symmetry, area)),
        )
        if best is None or form < best:
            best, best_symmetry = form, symmetry
    assert best is not None
    image = transform(state, best_symmetry, state.player)
    return SokobanState(image.room, image.boxes, best[3])


def split_key(state: SokobanState) -> str:
    """The text the split is assigned on: the canonical level."""
    return "sokoban:" + to_text(canonical_level(state))


def random_variant(state: SokobanState, rng: np.random.Generator) -> SokobanState:
    """``state`` under a random room symmetry, the player on a random cell of its area."""
    symmetries = room_symmetries(state.room.rows, state.room.cols)
    area = sorted(player_area(state))
    player = area[int(rng.integers(len(area)))]
    return transform(state, symmetries[int(rng.integers(len(symmetries)))], player)


# ------------------------------------------------------------------------------------ enumeration
#: Rooms with at most this many inner cells and one box are enumerated (see :func:`level_classes`).
ENUMERATED_INNER_CELLS = 16


def level_classes(
    rows: int, cols: int, max_walls: int, min_pushes: int, max_states: int = 500_000
) -> tuple[SokobanState, ...]:
    """Every one-box level of a ``rows`` x ``cols`` room (border wall included) with at most
    ``max_walls`` inner walls and a connected floor that needs at least ``min_pushes`` pushes
    (:func:`qualifies`), one :func:`canonical_level` per class, sorted by text.

    Only wall layouts that are the first of their mirror images are expanded (the others give
    the same classes). For the 6x6 room: 848 classes with up to 3 walls (a second or two,
    once per process)."""
    return _level_classes(rows, cols, max_walls, min_pushes, max_states)


@functools.cache
def _level_classes(
    rows: int, cols: int, max_walls: int, min_pushes: int, max_states: int
) -> tuple[SokobanState, ...]:
    inner = [(r, c) for r in range(1, rows - 1) for c in range(1, cols - 1)]
    symmetries = room_symmetries(rows, cols)
    classes: dict[str, SokobanState] = {}
    for count in range(max_walls + 1):
        for wall_cells in itertools.combinations(inner, count):
            layout = sorted(wall_cells)
            if any(sorted(map(f, wall_cells)) < layout for f in symmetries):
                continue
            floor = set(inner) - set(wall_cells)
            if len(floor) < 3 or not _connected(floor):
                continue
            walls = frozenset((r, c) for r in range(rows) for c in range(cols) if (r, c) not in floor)
            for target in sorted(floor):
                room = Room(rows, cols, walls, frozenset([target]))
                for box in sorted(live_cells(room) - {target}):
                    rest = floor - {box}
                    while rest:  # one level per area the player can stand in
                        state = SokobanState(room, frozenset([box]), min(rest))
                        rest -= player_area(state)
                        key = split_key(state)
                        if key not in classes and qualifies(state, min_pushes, max_states):
                            classes[key] = canonical_level(state)
    return tuple(classes[key] for key in sorted(classes))


def split_level_classes(
    rows: int, cols: int, max_walls: int, min_pushes: int, split: str, max_states: int = 500_000
) -> tuple[SokobanState, ...]:
    """The :func:`level_classes` that belong to ``split``."""
    return _split_level_classes(rows, cols, max_walls, min_pushes, split, max_states)


@functools.cache
def _split_level_classes(
    rows: int, cols: int, max_walls: int, min_pushes: int, split: str, max_states: int
) -> tuple[SokobanState, ...]:
    return tuple(
        state
        for state in _level_classes(rows, cols, max_walls, min_pushes, max_states)
        if split_of("sokoban:" + to_text(state)) == split
    )


# ------------------------------------------------------------------------------------ the rules
REFERENCE_PROGRAM = (Path(__file__).with_name("reference_program.py")).read_text(encoding="utf-8")


@dataclass(frozen=True)
class SokobanRules:
    """Sokoban as :class:`~llm_envs.envs.puzzle_rules.PuzzleRules` (immutable, shared).

    Difficulty knobs: ``rows``/``cols`` (room size, border included), ``num_boxes``,
    ``min_pushes`` (the shortest solution pushes at least this many times). Enumerated rooms
    (one box, at most 16 inner cells, :attr:`enumerated`): ``max_walls`` (inner walls).
    Sampled rooms: ``wall_density`` (inner walls make narrow corridors), ``reverse_steps``
    (longer reverse play moves boxes farther from their targets).
    """

    rows: int = 6
    cols: int = 6
    num_boxes: int = 1
    wall_density: float = 0.1
    reverse_steps: int = 100
    min_pushes: int = 3
    max_walls: int = 3
    max_solver_states: int = 500_000
    rewards: SokobanRewards = SokobanRewards()
    reward_shaping: str = "potential"
    answer_format: str = "lenient"
    game_name: str = "Sokoban"

    def __post_init__(self) -> None:
        if self.rows < 3 or self.cols < 3:
            raise ValueError("a room needs at least 3x3 cells (border included)")
        if self.num_boxes < 1 or self.num_boxes + 1 > (self.rows - 2) * (self.cols - 2):
            raise ValueError("num_boxes must be >= 1 and leave room for the player")
        if not 0.0 <= self.wall_density < 1.0:
            raise ValueError("wall_density must be in [0, 1)")
        if self.max_walls < 0:
            raise ValueError("max_walls must be >= 0")

    @property
    def enumerated(self) -> bool:
        """Whether levels come from :func:`level_classes` (one box, a small room)."""
        return self.num_boxes == 1 and (self.rows - 2) * (self.cols - 2) <= ENUMERATED_INNER_CELLS

    @property
    def format_penalty(self) -> float:
        return self.rewards.format_penalty

    def generate(self, rng: np.random.Generator, split: str, index: int | None = None) -> SokobanState:
        if self.enumerated:
            classes = split_level_classes(
                self.rows, self.cols, self.max_walls, self.min_pushes, split, self.max_solver_states
            )
            if not classes:
                raise ValueError(
                    f"no {self.rows}x{self.cols} level with at most {self.max_walls} inner walls and "
                    f"{self.min_pushes}+ pushes belongs to the {split!r} split; raise max_walls or "
                    "lower min_pushes"
                )
            stream = split_generator(rng, split)
            state = random_variant(pick_enumerated(classes, split, index, stream), stream)
            self._check_solving_pays_most(state)
            return state
        return generate_in_split(
            rng,
            lambda r: generate_room(
                r,
                self.rows,
                self.cols,
                self.num_boxes,
                self.wall_density,
                self.reverse_steps,
            ),
            split_key,
            split,
            accept=lambda state: qualifies(state, self.min_pushes, self.max_solver_states)
            and solving_pays_most(state, self.rewards, self.max_solver_states),
        )

    def split_key(self, state: SokobanState) -> str:
        return split_key(state)

    def load(self, text: str) -> SokobanState:
        state = from_text(text)
        # The reward bounds and the state tensor are those of the configured room and box
        # count, which hold every level that fits in them.
        rows, cols, boxes = state.room.rows, state.room.cols, len(state.boxes)
        if rows > self.rows or cols > self.cols or boxes > self.num_boxes:
            raise ValueError(
                f"the level is {rows}x{cols} with {boxes} box(es); these rules hold levels of at "
                f"most rows={self.rows}, cols={self.cols}, num_boxes={self.num_boxes} (make the "
                "environment with the level's size)"
            )
        if is_solved(state):  # (any plan would be paid the solved reward without a push)
            raise ValueError("the level is already solved: every box is on a goal")
        if solve(state, self.max_solver_states) is None:
            raise ValueError("the level has no solution (or it is too large to check)")
        self._check_solving_pays_most(state)
        return state

    def _check_solving_pays_most(self, state: SokobanState) -> None:
        if not solving_pays_most(state, self.rewards, self.max_solver_states):
            raise ValueError(
                f"with valid_move={self.rewards.valid_move:g} a shortest solution of this level costs "
                f"more than solving gains over any unsolved state ({solving_margin(self.rewards):g} "
                "= solved_reward + box_on_target + shaping_scale), so not solving would earn more: "
                "lower the move cost or raise the solved reward"
            )

    def puzzle_text(self, state: SokobanState) -> str:
        return to_text(state)

    def status_text(self, state: Any) -> str:
        return ""  # the position is part of the puzzle text

    def parse_plan(self, state: SokobanState, text: str) -> tuple[str, ...]:
        return parse_moves(text, self.answer_format)

    def format_plan(self, plan: tuple[str, ...]) -> str:
        return format_moves(plan, self.answer_format)

    def apply_plan(self, state: SokobanState, plan: tuple[str, ...]) -> PlanOutcome:
        return apply_moves(state, plan, self.rewards, self.reward_shaping)

    def potential(self, state: SokobanState) -> float:
        return potential(state, self.rewards)

    def is_solved(self, state: SokobanState) -> bool:
        return is_solved(state)

    def solve(self, state: SokobanState) -> tuple[str, ...] | None:
        return solve(state, self.max_solver_states)

    def random_plan(self, state: SokobanState, rng: np.random.Generator) -> tuple[str, ...]:
        length = int(rng.integers(1, 2 * (state.room.rows + state.room.cols) + 1))
        return tuple(str(m) for m in rng.choice(list(MOVES), size=length))

    @property
    def max_legal_plans(self) -> int:
        """At most one plan per direction."""
        return len(MOVES)

    def legal_plans(self, state: SokobanState) -> list[tuple[str, ...]]:
        return single_step_plans(state)

    def rules_text(self) -> str:
        return (
            "Sokoban: push every box onto a target. Symbols: '#' wall, '_' floor, '.' target, "
            "'$' box, '*' box on a target, '@' you, '+' you on a target. Moves: U (up, row-1), "
            "D (down, row+1), L (left, column-1), R (right, column+1). Walking into a box pushes "
            "it one cell if the cell behind it is floor or an empty target; you cannot pull "
            "boxes, and a move into a wall or a blocked push does nothing. A box pushed into a "
            "corner that is not a target can never be solved.\n"
            "Input format: the first line is 'rows cols', then one line per row."
        )

    def answer_example(self) -> str:
        return move_answer_example(self.answer_format)

    def reference_program(self) -> str:
        return REFERENCE_PROGRAM

    def __deepcopy__(self, memo: dict[int, Any]) -> SokobanRules:
        return self
