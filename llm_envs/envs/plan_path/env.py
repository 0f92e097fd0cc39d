"""Plan-Path (Stronger-MAS): reach the goal on a 10x10 grid with obstacles.

A tool agent writes a search program (BFS/A*) that the sandbox runs on the grid; a plan agent
reads the program and its output and submits the final move list. The rules, the text format
and the reward formula are in :mod:`llm_envs.envs.plan_path.rules`; the turn structure and the
reward mixing in :mod:`llm_envs.envs.puzzle_base`.

=====================  ======================================================================
Import                 ``llm_envs.make("llm/PlanPath-v0")``
Agents                 ``["tool", "plan"]`` (``agents="single"``: ``["solver"]``)
Turn order             tool, plan, tool, plan, ... for at most ``max_turns`` = 4 turns
Actions                any text. Tool: one ```` ```python ```` block printing ``#### U R ...``
                       as its last line. Plan: a reply ending with ``#### U R ...``
Observations           ``{"instruction": str, "prompt": str}``: role, rules, the grid in the
                       stdin text format, previous turns; the plan agent also sees the
                       program, its output and the plan read from it
Rewards (dense)        tool: ``r_local`` = shaped reward of its plan simulated on a copy,
                       plus ``alpha * r_team`` when the plan agent has acted; plan:
                       ``r_local + alpha * r_team``, both the shaped reward of the real move
                       list (blocked/valid move costs, BFS-distance progress, +1 goal, +0.5
                       shortest); a missing or malformed plan: -2.0
Rewards (outcome)      ``r_local`` = 1 if the agent's own plan reaches the goal; ``r_team`` =
                       1 if the goal is reached after this turn
Termination            the goal is reached
Truncation             ``max_turns`` turns played without reaching it
Splits                 by a hash of the canonical form, the grid's mirror image or rotation
                       whose text sorts first (``split`` config field): never overlap
Legal actions          ``legal_actions(agent)`` (the interop hook; ``max_legal_actions`` = 4):
                       for the agent to act, each single step U/D/L/R that moves, as
                       ``#### U`` (tool: a program ``print('#### U')``); one step per turn,
                       so raise ``max_turns`` to reach the goal this way
Move catalog           ``action_catalog()`` = ``#### U``, ``#### D``, ``#### L``, ``#### R``
                       (fixed indices 0-3) and ``action_mask(agent)``: the steps above
State tensor           ``state_tensor(agent)``: ``float32`` planes ``(3, rows, cols)``:
                       obstacles, current position, goal (the same for every agent)
=====================  ======================================================================

Version history:

* v0: first release (Stronger-MAS games/planning MAS, with BFS-distance shaping and a real
  sandbox); ``legal_actions``/``max_legal_actions`` added later without changing play;
  the move catalog and the state tensor (interop hooks) added later without changing play.
  Before the first release: splits assigned on the canonical form, each split drawn from its
  own stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llm_envs.core.env import TextEnv
from llm_envs.envs.plan_path.rules import PathRewards, PathState, PlanPathRules
from llm_envs.envs.puzzle_base import PuzzleConfig, PuzzleEnv, SingleStepCatalog


@dataclass
class PlanPathConfig(PuzzleConfig):
    """Plan-Path options (the shared ones are documented on :class:`PuzzleConfig`).

    Attributes:
        rows, cols: Grid size (paper: 10x10).
        obstacle_density: Probability that a cell is an obstacle (released code: 0.22).
        min_distance: The shortest path has at least this many moves (paper: no minimum).
        rewards: Dense reward weights (:class:`PathRewards`).
    """

    rows: int = 10
    cols: int = 10
    obstacle_density: float = 0.22
    min_distance: int = 1
    rewards: PathRewards = PathRewards()


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
        )

    # ------------------------------------------------------------------ state tensor
    def _state_shape(self) -> tuple[int, int, int]:
        return (3, self.config.rows, self.config.cols)

    def _state_planes(self, state: PathState) -> np.ndarray:
        """Plane 0: obstacles; 1: the current position; 2: the goal."""
        grid = state.grid
        planes = np.zeros(self._state_shape(), dtype=np.float32)
        planes[0] = np.array([[cell == "#" for cell in row] for row in grid.cells], dtype=np.float32)
        planes[1][state.position] = 1.0
        planes[2][grid.goal] = 1.0
        return planes
