"""Plan-Path rules: a grid with obstacles, a start, a goal, and moves U/D/L/R (pure logic).

A move into an obstacle or off the grid is *blocked* (the agent stays); moves after the goal is
reached are ignored. Answers are ``#### U R R D`` (also ``["U", "R"]``, ``URRD``, ``up, right``;
an unknown element of a list is played as a blocked move).
The dense reward of a move list (:class:`PathRewards`) adds the move costs, a potential-based
shaping on the BFS distance ``d`` to the goal around obstacles (``phi = -d``, ``gamma = 1``, so it
telescopes to the progress in BFS distance), the goal reward and a bonus for a shortest path.

docs/envs/plan_path.md gives the text format, the reward formula with its two deliberate changes
from the released PettingLLMs code, the generator and its knobs.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llm_envs.envs._common import wrong_sign_holes
from llm_envs.envs.puzzle_rules import PlanFormatError, PlanOutcome, generate_in_split

MOVES: dict[str, tuple[int, int]] = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
_WORDS = {"UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}
FREE, OBSTACLE, START, GOAL = ".", "#", "S", "G"


# ------------------------------------------------------------------------------------ board
@dataclass(frozen=True)
class Grid:
    """An immutable grid: ``cells[r][c]`` is ``'.'`` or ``'#'``; ``goal`` is a free cell.

    ``distance[r][c]`` is the BFS distance from (r, c) to the goal (``-1`` if unreachable).
    """

    cells: tuple[str, ...]
    goal: tuple[int, int]
    distance: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.cells or any(len(row) != len(self.cells[0]) for row in self.cells):
            raise ValueError("grid rows must be non-empty and of equal length")
        if any(ch not in (FREE, OBSTACLE) for row in self.cells for ch in row):
            raise ValueError("grid cells must be '.' or '#'")
        if not self.is_free(self.goal):
            raise ValueError(f"goal {self.goal} must be a free cell")
        object.__setattr__(self, "distance", _bfs_distances(self.cells, self.goal))

    @property
    def rows(self) -> int:
        return len(self.cells)

    @property
    def cols(self) -> int:
        return len(self.cells[0])

    def is_free(self, cell: tuple[int, int]) -> bool:
        r, c = cell
        return 0 <= r < self.rows and 0 <= c < self.cols and self.cells[r][c] == FREE

    def dist(self, cell: tuple[int, int]) -> int:
        return self.distance[cell[0]][cell[1]]

    def __deepcopy__(self, memo: dict) -> Grid:  # immutable: clones share it
        return self


@dataclass(frozen=True)
class PathState:
    """The agent's position on a grid, and the moves played since the episode's start.

    ``start_distance`` is the BFS distance of the episode's start (``None``: the position is
    the start, nothing was played); a shortest path of the whole episode plays exactly that
    many moves (the optimal-path bonus). Two states compare equal when the agent stands on the
    same cell of the same grid: the counters are the episode's bookkeeping, not the puzzle."""

    grid: Grid
    position: tuple[int, int]
    moves_played: int = field(default=0, compare=False)
    start_distance: int | None = field(default=None, compare=False)

    @property
    def episode_start_distance(self) -> int:
        return self.grid.dist(self.position) if self.start_distance is None else self.start_distance

    def __deepcopy__(self, memo: dict) -> PathState:  # immutable: clones share it
        return self


def _bfs_distances(cells: tuple[str, ...], goal: tuple[int, int]) -> tuple[tuple[int, ...], ...]:
    rows, cols = len(cells), len(cells[0])
    dist = [[-1] * cols for _ in range(rows)]
    dist[goal[0]][goal[1]] = 0
    queue = deque([goal])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES.values():
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and cells[nr][nc] == FREE and dist[nr][nc] < 0:
                dist[nr][nc] = dist[r][c] + 1
                queue.append((nr, nc))
    return tuple(tuple(row) for row in dist)


def step(grid: Grid, position: tuple[int, int], move: str) -> tuple[tuple[int, int], bool]:
    """``(new position, moved)``; a blocked move leaves the position unchanged."""
    dr, dc = MOVES[move]
    target = (position[0] + dr, position[1] + dc)
    if grid.is_free(target):
        return target, True
    return position, False


# ------------------------------------------------------------------------------------ text
def to_text(state: PathState) -> str:
    """The documented text format (see the module docstring)."""
    grid = state.grid
    lines = [f"{grid.rows} {grid.cols}"]
    for r, row in enumerate(grid.cells):
        chars = list(row)
        chars[grid.goal[1]] = GOAL if r == grid.goal[0] else chars[grid.goal[1]]
        if r == state.position[0] and state.position != grid.goal:
            chars[state.position[1]] = START
        lines.append("".join(chars))
    return "\n".join(lines)


def from_text(text: str) -> PathState:
    """Parse the text format; raises ``ValueError`` when malformed."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        raise ValueError("empty puzzle")
    header = lines[0].split()
    if len(header) != 2 or not all(h.isdigit() for h in header):
        raise ValueError("first line must be 'rows cols'")
    rows, cols = int(header[0]), int(header[1])
    body = lines[1:]
    if len(body) != rows or any(len(line) != cols for line in body):
        raise ValueError(f"expected {rows} rows of {cols} characters")
    start = goal = None
    cells = []
    for r, line in enumerate(body):
        for c, ch in enumerate(line):
            if ch == START:
                if start is not None:
                    raise ValueError("more than one 'S'")
                start = (r, c)
            elif ch == GOAL:
                if goal is not None:
                    raise ValueError("more than one 'G'")
                goal = (r, c)
            elif ch not in (FREE, OBSTACLE):
                raise ValueError(f"unknown cell character {ch!r}")
        cells.append(line.replace(START, FREE).replace(GOAL, FREE))
    if goal is None:
        raise ValueError("no goal 'G'")
    grid = Grid(tuple(cells), goal)
    return PathState(grid, start if start is not None else goal)


# ------------------------------------------------------------------------------------ plans
#: How an unknown element of a list answer is shown (it is played as a blocked move).
_UNKNOWN_SHOWN_CHARS = 20


def parse_moves(text: str, answer_format: str = "lenient") -> tuple[str, ...]:
    """Parse a move list such as ``["U", "R"]``, ``U R R D``, ``URRD`` or ``up, right``.

    A bracketed list (``[...]``, as the released code asks for) is split on commas (and, under
    ``"lenient"``, on spaces too); each element, stripped of quotes and spaces, is a move if it
    is exactly ``U``, ``D``, ``L`` or ``R``, else an *unknown move* that is kept (cut to 20
    characters) and charged as a blocked move when played, as the released code does; missing
    elements (``["U", "R",]``) are dropped, as there.
    ``answer_format="list"`` accepts nothing else.
    ``"lenient"`` also accepts unbracketed text: brackets, quotes and commas are separators,
    and every token must be a move letter sequence or a move word (else the whole answer is a
    format error). Raises :class:`PlanFormatError`; never evaluates the text.
    """
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        inner = stripped[1:-1].strip()
        separators = r"," if answer_format == "list" else r"[,\s]+"
        # Missing elements (a trailing comma, ``["U", , "R"]``) are dropped, as the released
        # code does (Python's list syntax allows the trailing comma; its fallback drops both);
        # a quoted empty element ``""`` is an element, so an unknown move, as there.
        raw_elements = [e.strip() for e in re.split(separators, inner)] if inner else []
        elements = [e.strip("\"'").strip() or e for e in raw_elements if e]
        if not elements:
            raise PlanFormatError("the move list is empty")
        return tuple(element if element in MOVES else element[:_UNKNOWN_SHOWN_CHARS] for element in elements)
    if answer_format == "list":
        raise PlanFormatError('expected a bracketed list of moves, e.g. ["U", "R", "D"]')
    cleaned = text
    for ch in "[]()\"',;":
        cleaned = cleaned.replace(ch, " ")
    moves: list[str] = []
    for token in cleaned.split():
        upper = token.upper()
        if upper in _WORDS:
            moves.append(_WORDS[upper])
        elif all(ch in MOVES for ch in upper):
            moves.extend(upper)
        else:
            raise PlanFormatError(f"not a move: {token[:20]!r} (use U, D, L, R)")
    if not moves:
        raise PlanFormatError("the move list is empty")
    return tuple(moves)


def move_answer_example(answer_format: str) -> str:
    """The answer line the prompts show for a move list."""
    if answer_format == "list":
        return '#### ["U", "R", "R", "D"]   (the moves in order, as a bracketed list)'
    return "#### U R R D   (the moves in order, separated by spaces)"


def format_moves(moves: tuple[str, ...], answer_format: str = "lenient") -> str:
    """The answer text of ``moves``: ``U R R D`` (lenient), ``["U", "R", "R", "D"]`` (list).
    A plan with unknown moves is always written as a list (the only form that keeps them)."""
    if answer_format == "list" or any(move not in MOVES for move in moves):
        return "[" + ", ".join(f'"{move}"' for move in moves) + "]"
    return " ".join(moves)


def single_step_plans(state: PathState) -> list[tuple[str, ...]]:
    """The one-move plans that change the position, in the order U, D, L, R (the moves of the
    enumerable-moves hook). A blocked step is left out, unless every step is blocked: then all
    four are listed, so that the list is never empty (such a start cannot reach any goal, so
    this does not happen in a served puzzle). At the goal there are none (moves after reaching
    it are ignored)."""
    if state.position == state.grid.goal:
        return []
    steps = [(name,) for name in MOVES]
    moving = [plan for plan in steps if step(state.grid, state.position, plan[0])[1]]
    return moving or steps


def shortest_path(state: PathState) -> tuple[str, ...] | None:
    """A shortest move list from the position to the goal (``None`` if unreachable).

    Follows the BFS distance field downhill, trying moves in the order U, D, L, R.
    """
    grid, position = state.grid, state.position
    if grid.dist(position) < 0:
        return None
    moves: list[str] = []
    while position != grid.goal:
        for move in MOVES:
            nxt, moved = step(grid, position, move)
            if moved and grid.dist(nxt) == grid.dist(position) - 1:
                moves.append(move)
                position = nxt
                break
    return tuple(moves)


# ------------------------------------------------------------------------------------ rewards
#: ``PathRewards.optimal_bonus_scope`` values: ``"episode"`` (the released code: every move of
#: the episode against the start's distance) or ``"plan"`` (this plan against its own start).
OPTIMAL_BONUS_SCOPES = ("episode", "plan")
#: ``PathRewards.potential_distance`` values: ``"bfs"`` (around obstacles) or ``"manhattan"``
#: (the released code's, which ignores obstacles).
POTENTIAL_DISTANCES = ("bfs", "manhattan")


@dataclass(frozen=True)
class PathRewards:
    """Dense reward weights (docs/envs/plan_path.md has the formula)."""

    valid_move: float = -0.01
    blocked_move: float = -0.10
    shaping_scale: float = 1.0
    shaping_gamma: float = 1.0
    goal_reward: float = 1.0
    optimal_bonus: float = 0.5
    optimal_bonus_scope: str = "episode"
    potential_distance: str = "bfs"
    format_penalty: float = -2.0

    def __post_init__(self) -> None:
        if self.potential_distance not in POTENTIAL_DISTANCES:
            raise ValueError(
                f"potential_distance must be one of {POTENTIAL_DISTANCES}, got "
                f"{self.potential_distance!r}"
            )
        if self.optimal_bonus_scope not in OPTIMAL_BONUS_SCOPES:
            raise ValueError(
                f"optimal_bonus_scope must be one of {OPTIMAL_BONUS_SCOPES}, got "
                f"{self.optimal_bonus_scope!r}"
            )

    def reward_holes(self, reward_shaping: str) -> list[str]:
        """Why these weights let a play other than solving earn more ([] if they do not)."""
        holes = wrong_sign_holes(
            self,
            gains=("shaping_scale", "goal_reward", "optimal_bonus"),
            costs=("valid_move", "blocked_move", "format_penalty"),
        )
        if (
            self.potential_distance == "bfs"
            and self.shaping_scale >= 0
            and self.shaping_scale + self.valid_move < 0
        ):
            # A step along a shortest path gains shaping_scale and costs -valid_move; when it
            # costs more, a long path costs more than the goal pays and standing still wins.
            holes.append(
                f"shaping_scale={self.shaping_scale:g} with valid_move={self.valid_move:g}: a "
                "step toward the goal costs more than it gains, so far from the goal not moving "
                "earns more than solving (shaping_scale + valid_move must be >= 0)"
            )
        if self.shaping_gamma != 1.0:
            holes.append(
                f"shaping_gamma={self.shaping_gamma:g} pays (1 - gamma) x the distance to the goal "
                "for a move into an obstacle (bumping into walls farms it)"
            )
        return holes


def solving_pays_most(state: PathState, rewards: PathRewards) -> bool:
    """Whether solving ``state`` by a shortest path earns more than any play that does not
    reach the goal. With the BFS potential each step along a shortest path gains
    ``shaping_scale + valid_move`` (``PathRewards.reward_holes`` checks its sign); with the
    Manhattan potential a detour around obstacles gains nothing, so the path's move costs,
    ``-valid_move * d0``, must stay within what reaching the goal gains over the best cell short
    of it, ``goal_reward + optimal_bonus + shaping_scale`` (Ψ ≤ −shaping_scale off the goal)."""
    cost = -rewards.valid_move
    if rewards.potential_distance != "manhattan" or cost <= 0:
        return True
    margin = rewards.goal_reward + rewards.optimal_bonus + rewards.shaping_scale
    return cost * state.grid.dist(state.position) <= margin


def shaping_distance(grid: Grid, cell: tuple[int, int], rewards: PathRewards) -> int:
    """The distance the shaping uses: BFS around obstacles, or Manhattan (the released code's)."""
    if rewards.potential_distance == "manhattan":
        return abs(cell[0] - grid.goal[0]) + abs(cell[1] - grid.goal[1])
    return grid.dist(cell)


def potential(state: PathState, rewards: PathRewards) -> float:
    """``-shaping_scale * d(position) + goal_reward * [at the goal]``: a plan's reward is its
    move costs, the change of this potential (gamma = 1) and the optimal-path bonus."""
    at_goal = state.position == state.grid.goal
    distance = shaping_distance(state.grid, state.position, rewards)
    return -rewards.shaping_scale * distance + rewards.goal_reward * at_goal


def apply_moves(state: PathState, moves: tuple[str, ...], rewards: PathRewards) -> PlanOutcome:
    """Play ``moves`` from ``state`` and score them with the dense shaped reward.

    A move that is not ``U``/``D``/``L``/``R`` (an unknown element of a list answer) is charged
    as a blocked move. The optimal-path bonus is paid on reaching the goal when the moves played
    (blocked and unknown ones included) equal the start's BFS distance: the episode's start and
    every move of the episode (``optimal_bonus_scope="episode"``), or this plan's start and
    moves (``"plan"``).
    """
    grid = state.grid
    position = state.position
    move_total = shaping = 0.0
    used = blocked = unknown = 0
    for move in moves:
        if position == grid.goal:
            break
        used += 1
        if move in MOVES:
            nxt, moved = step(grid, position, move)
        else:
            nxt, moved = position, False
            unknown += 1
        blocked += not moved
        move_total += rewards.valid_move if moved else rewards.blocked_move
        shaping += rewards.shaping_gamma * -shaping_distance(grid, nxt, rewards) + shaping_distance(
            grid, position, rewards
        )
        position = nxt
    reached = position == grid.goal
    if rewards.optimal_bonus_scope == "episode":
        shortest, played = state.episode_start_distance, state.moves_played + used
    else:
        shortest, played = grid.dist(state.position), used
    optimal = reached and played == shortest
    components = {"moves": move_total, "progress": rewards.shaping_scale * shaping}
    if reached:
        components["goal"] = rewards.goal_reward
        components["optimal"] = rewards.optimal_bonus if optimal else 0.0
    summary = (
        f"{used} move(s) played, {blocked} blocked; now at row {position[0]}, column "
        f"{position[1]}, {grid.dist(position)} step(s) from the goal"
    )
    if unknown:
        summary += f"; {unknown} unknown move(s) charged as blocked"
    if reached:
        summary += "; goal reached" + (" by a shortest path" if optimal else "")
    if used < len(moves):
        summary += f"; {len(moves) - used} move(s) after reaching the goal ignored"
    after = PathState(grid, position, state.moves_played + used, state.episode_start_distance)
    return PlanOutcome(after, float(sum(components.values())), components, reached, summary)


# ------------------------------------------------------------------------------------ generator
def generate_grid(
    rng: np.random.Generator, rows: int, cols: int, obstacle_density: float, min_distance: int
) -> PathState | None:
    """One candidate: obstacles i.i.d. with probability ``obstacle_density``, start and goal
    two distinct free cells. ``None`` unless the goal is reachable in >= ``min_distance`` moves.
    """
    blocked = rng.random((rows, cols)) < obstacle_density
    free = np.flatnonzero(~blocked)
    if free.size < 2:
        return None
    start_index, goal_index = rng.choice(free, size=2, replace=False)
    cells = tuple("".join(OBSTACLE if b else FREE for b in row) for row in blocked)
    grid = Grid(cells, (int(goal_index) // cols, int(goal_index) % cols))
    start = (int(start_index) // cols, int(start_index) % cols)
    distance = grid.dist(start)
    if distance < max(1, min_distance):  # -1 (unreachable) is rejected here too
        return None
    return PathState(grid, start)


# ------------------------------------------------------------------------------------ symmetry
GRID_SYMMETRIES: tuple[Callable[[np.ndarray], np.ndarray], ...] = (
    lambda a: a,
    lambda a: a[::-1],
    lambda a: a[:, ::-1],
    lambda a: a[::-1, ::-1],
    # Square grids only: the transposition, the quarter turns and the anti-transposition.
    lambda a: a.T,
    lambda a: a.T[::-1],
    lambda a: a.T[:, ::-1],
    lambda a: a.T[::-1, ::-1],
)


def canonical_text(state: PathState) -> str:
    """The puzzle's text under the grid symmetry that sorts first (mirrors and the half turn;
    for a square grid also the quarter turns and the diagonal mirrors): the same text for every
    mirror image or rotation of the puzzle."""
    chars = np.array([list(line) for line in to_text(state).splitlines()[1:]])
    rows, cols = chars.shape
    forms = []
    for symmetry in GRID_SYMMETRIES[: 8 if rows == cols else 4]:
        image = symmetry(chars)
        forms.append(f"{image.shape[0]} {image.shape[1]}\n" + "\n".join("".join(row) for row in image))
    return min(forms)


def split_key(state: PathState) -> str:
    """The text the split is assigned on: :func:`canonical_text`."""
    return "plan_path:" + canonical_text(state)


# ------------------------------------------------------------------------------------ the rules
REFERENCE_PROGRAM = (Path(__file__).with_name("reference_program.py")).read_text(encoding="utf-8")
#: The same breadth-first search in 0.6 of the tokens (no docstrings, no functions):
#: the tool's reference action with ``reference_program="compact"``, for small models' warm starts.
COMPACT_REFERENCE_PROGRAM = (
    Path(__file__).with_name("reference_program_compact.py").read_text(encoding="utf-8")
)
#: ``PlanPathConfig.reference_program`` values.
REFERENCE_PROGRAM_STYLES = ("full", "compact")


@dataclass(frozen=True)
class PlanPathRules:
    """Plan-Path as :class:`~llm_envs.envs.puzzle_rules.PuzzleRules` (immutable, shared).

    Difficulty knobs: ``rows``/``cols`` (grid size), ``obstacle_density`` (probability that a
    cell is an obstacle; more obstacles give longer detours), ``min_distance`` (the shortest
    path has at least this many moves).
    """

    rows: int = 10
    cols: int = 10
    obstacle_density: float = 0.22
    min_distance: int = 1
    rewards: PathRewards = PathRewards()
    answer_format: str = "lenient"
    reference_program_style: str = "full"
    game_name: str = "Plan-Path"

    def __post_init__(self) -> None:
        if self.rows < 1 or self.cols < 1 or self.rows * self.cols < 2:
            raise ValueError("the grid needs at least two cells")
        if not 0.0 <= self.obstacle_density < 1.0:
            raise ValueError("obstacle_density must be in [0, 1)")
        if self.min_distance > self.rows * self.cols - 1:
            raise ValueError("min_distance is longer than any path on this grid")
        cost, margin = -self.rewards.valid_move, self.rewards.goal_reward + self.rewards.optimal_bonus + self.rewards.shaping_scale
        if self.rewards.potential_distance == "manhattan" and cost > 0 and cost * self.min_distance > margin:
            raise ValueError(
                f"with the Manhattan potential a path of min_distance={self.min_distance} moves costs more "
                "than reaching the goal gains (see solving_pays_most): no grid would pay solving most"
            )
        if self.reference_program_style not in REFERENCE_PROGRAM_STYLES:
            raise ValueError(
                f"reference_program must be one of {REFERENCE_PROGRAM_STYLES}, got "
                f"{self.reference_program_style!r}"
            )

    @property
    def format_penalty(self) -> float:
        return self.rewards.format_penalty

    def generate(self, rng: np.random.Generator, split: str, index: int | None = None) -> PathState:
        # The space of 10x10 grids is far too large for two seeds to meet by chance: no
        # enumeration, ``index`` is not needed.
        return generate_in_split(
            rng,
            lambda r: generate_grid(r, self.rows, self.cols, self.obstacle_density, self.min_distance),
            split_key,
            split,
            accept=lambda state: solving_pays_most(state, self.rewards),
        )

    def split_key(self, state: PathState) -> str:
        return split_key(state)

    def load(self, text: str) -> PathState:
        state = from_text(text)
        # The reward bounds and the state tensor are those of the configured grid, which holds
        # every grid that fits in it.
        rows, cols = len(state.grid.cells), len(state.grid.cells[0])
        if rows > self.rows or cols > self.cols:
            raise ValueError(
                f"the grid is {rows}x{cols}; these rules hold grids of at most rows={self.rows}, "
                f"cols={self.cols} (make the environment with the grid's size)"
            )
        if state.grid.dist(state.position) < 0:
            raise ValueError("the goal cannot be reached from the start")
        if self.is_solved(state):  # (any plan would be paid the goal without a move)
            raise ValueError("the puzzle is already solved: the start is the goal")
        if not solving_pays_most(state, self.rewards):
            raise ValueError(
                f"with the Manhattan potential and valid_move={self.rewards.valid_move:g}, this "
                f"grid's shortest path ({state.grid.dist(state.position)} moves) costs more than "
                "reaching the goal gains (goal_reward + optimal_bonus + shaping_scale), so not "
                "solving would earn more: use the BFS potential or lower the move cost"
            )
        return state

    def puzzle_text(self, state: PathState) -> str:
        return to_text(state)

    def status_text(self, state: Any) -> str:
        return ""  # the position is part of the puzzle text

    def parse_plan(self, state: PathState, text: str) -> tuple[str, ...]:
        return parse_moves(text, self.answer_format)

    def format_plan(self, plan: tuple[str, ...]) -> str:
        return format_moves(plan, self.answer_format)

    def apply_plan(self, state: PathState, plan: tuple[str, ...]) -> PlanOutcome:
        return apply_moves(state, plan, self.rewards)

    def potential(self, state: PathState) -> float:
        return potential(state, self.rewards)

    def is_solved(self, state: PathState) -> bool:
        return state.position == state.grid.goal

    def solve(self, state: PathState) -> tuple[str, ...] | None:
        return shortest_path(state)

    def random_plan(self, state: PathState, rng: np.random.Generator) -> tuple[str, ...]:
        length = int(rng.integers(1, state.grid.rows + state.grid.cols + 1))
        return tuple(str(m) for m in rng.choice(list(MOVES), size=length))

    @property
    def max_legal_plans(self) -> int:
        """At most one plan per direction."""
        return len(MOVES)

    def legal_plans(self, state: PathState) -> list[tuple[str, ...]]:
        return single_step_plans(state)

    def rules_text(self) -> str:
        return (
            "Plan-Path: move from S to G on the grid. '.' is free, '#' is an obstacle. Moves: "
            "U (up, row-1), D (down, row+1), L (left, column-1), R (right, column+1); rows are "
            "numbered from the top, columns from the left. A move into an obstacle or off the "
            "grid is blocked (you stay). Reach G, ideally by a shortest path.\n"
            "Input format: the first line is 'rows cols', then one line per row."
        )

    def answer_example(self) -> str:
        return move_answer_example(self.answer_format)

    def reference_program(self) -> str:
        return COMPACT_REFERENCE_PROGRAM if self.reference_program_style == "compact" else REFERENCE_PROGRAM

    def __deepcopy__(self, memo: dict[int, Any]) -> PlanPathRules:
        return self
