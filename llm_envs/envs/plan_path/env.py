"""Plan-Path (Stronger-MAS): reach the goal on a 10x10 grid with obstacles.

A tool agent writes a search program (BFS/A*) that the sandbox runs on the grid; a plan agent
reads the program and its output and submits the final move list (``agents="single"``: one
``solver`` does both). The rules, the text format and the reward formula are in
:mod:`llm_envs.envs.plan_path.rules`; the turns, the sandbox run and the reward mixing in
:mod:`llm_envs.envs.puzzle_base`.

The spec (agents, actions, observations, rewards, splits, interop hooks) and the version history
are in docs/envs/plan_path.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llm_envs.core.bounds import UNBOUNDED
from llm_envs.core.env import TextEnv
from llm_envs.envs.plan_path.rules import PathRewards, PathState, PlanPathRules
from llm_envs.envs.puzzle_base import PuzzleConfig, PuzzleEnv
from llm_envs.interop.puzzle_hooks import SingleStepCatalog


@dataclass
class PlanPathConfig(PuzzleConfig):
    """Plan-Path options (the shared ones are documented on :class:`PuzzleConfig`).

    Attributes:
        rows, cols: Grid size (paper: 10x10).
        obstacle_density: Probability that a cell is an obstacle (released code: 0.22).
        min_distance: The shortest path has at least this many moves (paper: no minimum).
        rewards: Dense reward weights (:class:`PathRewards`).
        reference_program: The reference tool's program (and the single solver's, with
            ``reference_solver="program"``): ``"full"`` (default) the documented module
            ``reference_program.py``; ``"compact"`` the same search without docstrings or
            functions (``reference_program_compact.py``, 333 SmolLM2 tokens against 549), so
            that a small model's warm start and rollouts cost less. The rewards do not depend
            on it.
    """

    rows: int = 10
    cols: int = 10
    obstacle_density: float = 0.22
    min_distance: int = 1
    rewards: PathRewards = PathRewards()
    reference_program: str = "full"


class PlanPathEnv(SingleStepCatalog, PuzzleEnv):
    """The Plan-Path environment (see the module docstring for the spec)."""

    metadata = {**TextEnv.metadata, "name": "plan_path_v0"}
    config_class = PlanPathConfig

    def _make_rules(self, config: PlanPathConfig) -> PlanPathRules:
        return PlanPathRules(
            rows=config.rows,
            cols=config.cols,
            obstacle_density=config.obstacle_density,
            min_distance=config.min_distance,
            rewards=config.rewards,
            answer_format=config.answer_format,
            reference_program_style=config.reference_program,
        )

    # ------------------------------------------------------------------ state tensor
    def _state_shape(self) -> tuple[int, int, int]:
        return (3, self.config.rows, self.config.cols)

    def _state_planes(self, state: PathState) -> np.ndarray:
        """Plane 0: obstacles; 1: the current position; 2: the goal. A grid smaller than the
        configured one fills the top-left corner, the cells beyond it obstacles."""
        grid = state.grid
        planes = np.zeros(self._state_shape(), dtype=np.float32)
        planes[0] = 1.0
        obstacles = np.array([[cell == "#" for cell in row] for row in grid.cells], dtype=np.float32)
        planes[0][: obstacles.shape[0], : obstacles.shape[1]] = obstacles
        planes[1][state.position] = 1.0
        planes[2][grid.goal] = 1.0
        return planes

    # ------------------------------------------------------------------ reward contract
    def _plan_reward_bounds(self) -> tuple[float, float]:
        """One plan: move costs (at most 0; no lower bound, a plan has no length limit), the
        distance shaping (with γ = 1 it telescopes to at most the longest shortest path,
        ``rows·cols``), the goal reward and the optimal-path bonus. docs/envs/plan_path.md
        states the same bound."""
        c, w = self.config, self.config.rewards
        if w.valid_move > 0 or w.blocked_move > 0 or w.shaping_gamma != 1:
            return UNBOUNDED
        shaping = abs(w.shaping_scale) * c.rows * c.cols
        return (-math.inf, shaping + max(w.goal_reward, 0.0) + max(w.optimal_bonus, 0.0))
