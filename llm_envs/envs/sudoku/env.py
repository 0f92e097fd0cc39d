"""Sudoku (Stronger-MAS): fill a 4x4 grid (9x9 option) whose solution is unique.

A tool agent writes a solver program (backtracking) that the sandbox runs on the puzzle; a plan
agent reads the program and its output and submits the final grid. The rules, the text format,
the generator and the reward formula are in :mod:`llm_envs.envs.sudoku.rules`; the turn
structure and the reward mixing in :mod:`llm_envs.envs.puzzle_base`.

=====================  ======================================================================
Import                 ``llm_envs.make("llm/Sudoku-v0")`` (``size=9`` for 9x9)
Agents                 ``["tool", "plan"]`` (``agents="single"``: ``["solver"]``)
Turn order             tool, plan, tool, plan, ... for at most ``max_turns`` = 4 turns
Actions                any text. Tool: one ```` ```python ```` block printing
                       ``#### [[...], ...]`` as its last line. Plan: a reply ending with
                       ``#### [[...], ...]`` (the whole grid on one line)
Observations           ``{"instruction": str, "prompt": str}``: role, rules, the puzzle in the
                       stdin text format, the board of the last accepted answer, previous
                       turns; the plan agent also sees the program, its output and the grid
                       read from it
Rewards (dense)        tool: ``r_local`` = shaped reward of its grid checked on a copy, plus
                       ``alpha * r_team`` when the plan agent has acted; plan: ``r_local +
                       alpha * r_team``, both the shaped reward of the real submission
                       (-0.01 step, +0.5 x fraction of correct cells, -0.5 if a unit repeats a
                       number, +2 solved; a submission that changes a clue is rejected with
                       -1 x fraction of clues changed); a missing or malformed grid: -1.0
Rewards (outcome)      ``r_local`` = 1 if the agent's own grid solves the puzzle; ``r_team`` =
                       1 if the puzzle is solved after this turn
Termination            the board equals the (unique) solution
Truncation             ``max_turns`` turns played without solving
Splits                 by a hash of the canonical form (``split`` config field): no puzzle is
                       in two splits, not even with its digits renamed or its grid permuted;
                       4x4 puzzles are enumerated (43 validation, 29 test classes with 6
                       clues) and seed k plays class k mod n of the split
Legal actions          ``legal_actions(agent)`` (the interop hook; ``max_legal_actions`` =
                       ``size**3``): for the agent to act, the current board with one empty
                       cell filled by a number not yet in its row, column or box, as
                       ``#### [[...], ...]`` (tool: a program printing that line); at a dead
                       end (no such fill, not solved) only the clues, i.e. start over. One
                       cell per turn, so raise ``max_turns``
Move catalog           ``action_catalog()``: ``r<row>c<col>=<digit>`` for every cell and
                       digit (index ``(row * size + col) * size + digit - 1``, 0-based row and
                       col), then ``restart`` (index ``size**3``); ``action_mask(agent)``: the
                       moves above; ``catalog_action(agent, index)``: the text that plays one
State tensor           ``state_tensor(agent)``: ``float32`` planes ``(size + 1, size, size)``:
                       one plane per digit (the board of the last accepted answer), then the
                       clue cells (the same for every agent; never the solution)
=====================  ======================================================================

Version history:

* v0: first release (Stronger-MAS games/planning MAS; every puzzle has a unique solution,
  answers must keep every clue; a real sandbox); ``legal_actions``/``max_legal_actions``
  added later without changing play (a given puzzle must now match ``size``); the move
  catalog and the state tensor (interop hooks) added later without changing play. Before
  the first release: splits assigned on a canonical form (digit renaming and grid symmetries),
  each split drawn from its own stream (validation seed k was train seed k with its digits
  renamed); 4x4 puzzles enumerated, one class per seed, with exactly ``num_clues`` clues.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llm_envs.core.env import TextEnv
from llm_envs.envs.puzzle_base import PuzzleConfig, PuzzleEnv
from llm_envs.envs.sudoku.rules import Grid, SudokuRewards, SudokuRules, SudokuState


@dataclass
class SudokuConfig(PuzzleConfig):
    """Sudoku options (the shared ones are documented on :class:`PuzzleConfig`).

    Attributes:
        size: 4 (paper), 6 or 9.
        num_clues: Clues left in the puzzle (default: 6 for 4x4, 14 for 6x6, 30 for 9x9). 4x4:
            exactly this many (4 to 15); 6x6 and 9x9: more remain when removing any further
            clue would make the solution ambiguous.
        rewards: Dense reward weights (:class:`SudokuRewards`).
    """

    size: int = 4
    num_clues: int | None = None
    rewards: SudokuRewards = SudokuRewards()


class SudokuEnv(PuzzleEnv):
    """The Sudoku environment (see the module docstring for the spec)."""

    metadata = {**TextEnv.metadata, "name": "sudoku_v0"}
    config_class = SudokuConfig

    def _make_rules(self, config: SudokuConfig) -> SudokuRules:
        return SudokuRules(size=config.size, num_clues=config.num_clues, rewards=config.rewards)

    # ------------------------------------------------------------------ move catalog
    def _catalog_names(self) -> list[str]:
        n = self.config.size
        fills = [f"r{r + 1}c{c + 1}={d}" for r in range(n) for c in range(n) for d in range(1, n + 1)]
        return [*fills, "restart"]

    def _catalog_plan(self, state: SudokuState, index: int) -> Grid:
        """Index ``(cell * size) + digit - 1``: the board with that cell set to that digit;
        the last index: the clues (start over)."""
        n = self.config.size
        if index == n**3:
            return state.puzzle.clues
        cell, digit = divmod(index, n)
        return state.board[:cell] + (digit + 1,) + state.board[cell + 1 :]

    def _catalog_index(self, state: SudokuState, plan: Grid) -> int:
        n = self.config.size
        changed = [i for i, (old, new) in enumerate(zip(state.board, plan)) if old != new]
        if len(changed) == 1 and state.board[changed[0]] == 0:
            return changed[0] * n + plan[changed[0]] - 1
        if plan == state.puzzle.clues:
            return n**3
        raise ValueError("not a one-cell fill of the board or the clues")

    # ------------------------------------------------------------------ state tensor
    def _state_shape(self) -> tuple[int, int, int]:
        n = self.config.size
        return (n + 1, n, n)

    def _state_planes(self, state: SudokuState) -> np.ndarray:
        """Planes ``0..size-1``: cells holding digit ``1..size`` on the board of the last
        accepted answer; plane ``size``: the clue cells."""
        n = self.config.size
        board = np.asarray(state.board, dtype=np.int64).reshape(n, n)
        planes = np.zeros(self._state_shape(), dtype=np.float32)
        for digit in range(1, n + 1):
            planes[digit - 1] = board == digit
        planes[n] = np.asarray(state.puzzle.clues, dtype=np.int64).reshape(n, n) > 0
        return planes
