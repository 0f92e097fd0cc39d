"""Sudoku (Stronger-MAS): fill a 4x4 grid (6x6 and 9x9 options) whose solution is unique.

A tool agent writes a solver program (backtracking) that the sandbox runs on the puzzle; a plan
agent reads the program and its output and submits the final grid (``agents="single"``: one
``solver`` does both). The rules, the text format, the generator and the reward formula are in
:mod:`llm_envs.envs.sudoku.rules`; the turns, the sandbox run and the reward mixing in
:mod:`llm_envs.envs.puzzle_base`.

The spec (agents, actions, observations, rewards, splits, interop hooks) and the version history
are in docs/envs/sudoku.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from llm_envs.core.bounds import either, summed, unit_weights
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

    paper_reward_hole: ClassVar[str] = (
        "pays the share of correct cells again at every submission (a near miss held for several turns earns more than solving at once)"
    )


class SudokuEnv(PuzzleEnv):
    """The Sudoku environment (see the module docstring for the spec)."""

    metadata = {**TextEnv.metadata, "name": "sudoku_v0"}
    config_class = SudokuConfig

    def _make_rules(self, config: SudokuConfig) -> SudokuRules:
        return SudokuRules(
            size=config.size,
            num_clues=config.num_clues,
            rewards=config.rewards,
            answer_format=config.answer_format,
            reward_shaping=config.reward_shaping,
        )

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

    # ------------------------------------------------------------------ reward contract
    def _plan_reward_bounds(self) -> tuple[float, float]:
        """One grid submitted on an unsolved board: the step cost plus either the clue
        penalty's share (a rejected grid, the board unchanged) or, accepted, the change of the
        potential ``Ψ = progress_weight·(share of right cells) − conflict_penalty·[a repeat] +
        solved_reward·[solved]`` from a board that is not the solution (``"potential"``), or
        ``Ψ`` itself, paid again at every submission (``"paper"``). Defaults: [−1.01, 2.99]
        (``"paper"``: [−1.01, 2.49]); docs/envs/sudoku.md states the same bounds."""
        w = self.config.rewards
        step = (w.step_cost, w.step_cost)
        rejected = summed(step, unit_weights([-w.clue_penalty]))
        after = unit_weights([w.progress_weight, -w.conflict_penalty, w.solved_reward])
        if self.config.reward_shaping == "paper":
            return either(rejected, summed(step, after))
        before = unit_weights([w.progress_weight, -w.conflict_penalty])  # never the solution
        return either(rejected, summed(step, (after[0] - before[1], after[1] - before[0])))

    def _potential_shortfall_bound(self) -> float:
        """An unsolved board's potential lies in ``[−conflict_penalty, progress_weight]`` (the
        signs the config accepts), so it falls at most their spread below the best reached:
        1.0 with the defaults (0.5 and 0.5)."""
        low, high = unit_weights([self.config.rewards.progress_weight, -self.config.rewards.conflict_penalty])
        return high - low
