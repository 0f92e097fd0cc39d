"""Sokoban (Stronger-MAS): push the boxes onto the targets in a 6x6 room.

A tool agent writes a search program (BFS/A*) that the sandbox runs on the level; a plan agent
reads the program and its output and submits the final move list. The rules, the text format,
the generator and the reward formula are in :mod:`llm_envs.envs.sokoban.rules`; the turn
structure and the reward mixing in :mod:`llm_envs.envs.puzzle_base`.

=====================  ======================================================================
Import                 ``llm_envs.make("llm/Sokoban-v0")``
Agents                 ``["tool", "plan"]`` (``agents="single"``: ``["solver"]``)
Turn order             tool, plan, tool, plan, ... for at most ``max_turns`` = 4 turns
Actions                any text. Tool: one ```` ```python ```` block printing ``#### U R ...``
                       as its last line. Plan: a reply ending with ``#### U R ...``
Observations           ``{"instruction": str, "prompt": str}``: role, rules, the level in the
                       stdin text format, previous turns; the plan agent also sees the
                       program, its output and the plan read from it
Rewards (dense)        tool: ``r_local`` = shaped reward of its plan simulated on a copy,
                       plus ``alpha * r_team`` when the plan agent has acted; plan:
                       ``r_local + alpha * r_team``, both the shaped reward of the real move
                       list (move costs, +1 box onto / -0.5 box off a target, 0.1 x box-
                       distance progress, +10 solved); a missing or malformed plan: -2.0
Rewards (outcome)      ``r_local`` = 1 if the agent's own plan solves the level; ``r_team`` =
                       1 if the level is solved after this turn
Termination            every box on a target
Truncation             ``max_turns`` turns played without solving
Splits                 by a hash of the canonical level (room symmetries, the player's
                       walkable area; ``split`` config field): never overlap. The 6x6
                       one-box levels are enumerated (848: 689/79/80 per split); seed k
                       plays level k mod n of its split
Legal actions          ``legal_actions(agent)`` (the interop hook; ``max_legal_actions`` = 4):
                       for the agent to act, each single step U/D/L/R that walks or pushes
                       (all four if every step is blocked), as ``#### U`` (tool: a program
                       ``print('#### U')``); one step per turn, so raise ``max_turns``
Move catalog           ``action_catalog()`` = ``#### U``, ``#### D``, ``#### L``, ``#### R``
                       (fixed indices 0-3) and ``action_mask(agent)``: the steps above
State tensor           ``state_tensor(agent)``: ``float32`` planes ``(4, rows, cols)``: walls,
                       targets, boxes, player (the same for every agent)
=====================  ======================================================================

Version history:

* v0: first release (Stronger-MAS games/planning MAS; reverse-play generation verified by a
  BFS solver; a real sandbox); ``legal_actions``/``max_legal_actions`` added later without
  changing play; the move catalog and the state tensor (interop hooks) added later without
  changing play. Before the first release:
  canonical-form splits, each split drawn from its own stream; 6x6 one-box levels enumerated;
  ``min_pushes`` counts the fewest pushes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llm_envs.core.env import TextEnv
from llm_envs.envs.puzzle_base import PuzzleConfig, PuzzleEnv, SingleStepCatalog
from llm_envs.envs.sokoban.rules import SokobanRewards, SokobanRules, SokobanState


@dataclass
class SokobanConfig(PuzzleConfig):
    """Sokoban options (the shared ones are documented on :class:`PuzzleConfig`).

    Attributes:
        rows, cols: Room size including the border wall (paper: 6x6).
        num_boxes: Boxes (and targets) per level (paper: 1).
        min_pushes: The shortest solution pushes at least this many times.
        max_walls: Inner walls of an enumerated room (one box, at most 16 inner cells, e.g.
            the paper's 6x6): every level with up to this many is in the level set.
        wall_density: Sampled rooms (larger, or several boxes): probability that an inner cell
            is a wall.
        reverse_steps: Sampled rooms: random reverse-play steps used to scatter the boxes.
        rewards: Dense reward weights (:class:`SokobanRewards`).
    """

    rows: int = 6
    cols: int = 6
    num_boxes: int = 1
    min_pushes: int = 3
    max_walls: int = 3
    wall_density: float = 0.1
    reverse_steps: int = 100
    rewards: SokobanRewards = SokobanRewards()


class SokobanEnv(SingleStepCatalog, PuzzleEnv):
    """The Sokoban environment (see the module docstring for the spec)."""

    metadata = {**TextEnv.metadata, "name": "sokoban_v0"}
    config_class = SokobanConfig

    def _make_rules(self, config: SokobanConfig) -> SokobanRules:
        return SokobanRules(
            rows=config.rows,
            cols=config.cols,
            num_boxes=config.num_boxes,
            wall_density=config.wall_density,
            reverse_steps=config.reverse_steps,
            min_pushes=config.min_pushes,
            max_walls=config.max_walls,
            rewards=config.rewards,
        )

    # ------------------------------------------------------------------ state tensor
    def _state_shape(self) -> tuple[int, int, int]:
        return (4, self.config.rows, self.config.cols)

    def _state_planes(self, state: SokobanState) -> np.ndarray:
        """Plane 0: walls; 1: targets; 2: boxes; 3: the player (as gym-sokoban's layers)."""
        planes = np.zeros(self._state_shape(), dtype=np.float32)
        for plane, cells in enumerate((state.room.walls, state.room.targets, state.boxes, (state.player,))):
            for cell in cells:
                planes[plane][cell] = 1.0
        return planes
