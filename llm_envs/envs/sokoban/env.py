"""Sokoban (Stronger-MAS): push the boxes onto the targets in a 6x6 room.

A tool agent writes a search program (BFS/A*) that the sandbox runs on the level; a plan agent
reads the program and its output and submits the final move list (``agents="single"``: one
``solver`` does both). The rules, the text format, the generator and the reward formula are in
:mod:`llm_envs.envs.sokoban.rules`; the turns, the sandbox run and the reward mixing in
:mod:`llm_envs.envs.puzzle_base`.

The spec (agents, actions, observations, rewards, splits, interop hooks) and the version history
are in docs/envs/sokoban.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llm_envs.core.bounds import UNBOUNDED
from llm_envs.core.env import TextEnv
from llm_envs.envs.puzzle_base import PuzzleConfig, PuzzleEnv
from llm_envs.envs.sokoban.rules import SokobanRewards, SokobanRules, SokobanState
from llm_envs.interop.puzzle_hooks import SingleStepCatalog


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
            answer_format=config.answer_format,
            reward_shaping=config.reward_shaping,
        )

    # ------------------------------------------------------------------ state tensor
    def _state_shape(self) -> tuple[int, int, int]:
        return (4, self.config.rows, self.config.cols)

    def _state_planes(self, state: SokobanState) -> np.ndarray:
        """Plane 0: walls; 1: targets; 2: boxes; 3: the player (as gym-sokoban's layers). A room
        smaller than the configured one fills the top-left corner, the cells beyond it walls."""
        planes = np.zeros(self._state_shape(), dtype=np.float32)
        planes[0] = 1.0
        planes[0][: state.room.rows, : state.room.cols] = 0.0
        for plane, cells in enumerate((state.room.walls, state.room.targets, state.boxes, (state.player,))):
            for cell in cells:
                planes[plane][cell] = 1.0
        return planes

    # ------------------------------------------------------------------ reward contract
    def _plan_reward_bounds(self) -> tuple[float, float]:
        """One plan from an unsolved state: its move costs (at most 0; no lower bound, a plan
        has no length limit below ``max_answer_chars``) plus the change of the potential
        ``Ψ = box_on_target·(boxes on targets) − shaping_scale·Σ(box distances) +
        solved_reward·[solved]``, at most ``num_boxes·box_on_target + shaping_scale·num_boxes·
        (rows + cols) + solved_reward`` (a box's Manhattan distance to a target is below
        ``rows + cols``). Weights that make the box term no potential difference
        (``box_off_target != −box_on_target``: a shuttle farms it) or pay a move
        (``shaping_gamma != 1``, a positive move cost) leave the reward unbounded.
        docs/envs/sokoban.md states the same bound."""
        c, w = self.config, self.config.rewards
        off = w.off_target_weight(c.reward_shaping)
        if w.valid_move > 0 or w.blocked_move > 0 or w.shaping_gamma != 1 or off != -w.box_on_target:
            return UNBOUNDED
        placing = c.num_boxes * abs(w.box_on_target)
        shaping = abs(w.shaping_scale) * c.num_boxes * (c.rows + c.cols)
        return (-math.inf, placing + shaping + max(w.solved_reward, 0.0))
