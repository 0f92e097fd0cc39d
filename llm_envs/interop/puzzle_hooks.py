"""The interop hooks of the puzzle environments (Sudoku, Sokoban, Plan-Path).

:class:`PuzzleHooks` gives :class:`~llm_envs.envs.puzzle_base.PuzzleEnv` the optional hooks of
:mod:`llm_envs.interop.hooks`: enumerable moves (``legal_actions``, ``max_legal_actions``), the
fixed move catalog (``action_catalog``, ``action_mask``, ``catalog_action``) and the state
tensor (``state_space``, ``state_tensor``, ``state_text``). A small move is one of the game's
``rules.legal_plans`` (one step for Plan-Path and Sokoban, one cell for Sudoku), played as the
answer line ``#### <plan>`` or, by the tool agent, as a one-line program printing it. Each game's
``env.py`` says how its moves map to catalog indices (:class:`SingleStepCatalog` for the grid
walks) and draws its state planes. docs/interop.md says which wrapper uses which hook.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from llm_envs.core.env import EnvStateError
from llm_envs.envs.puzzle_rules import ANSWER_MARKER

__all__ = ["PuzzleHooks", "SingleStepCatalog"]


class PuzzleHooks:
    """The interop hooks, mixed into :class:`~llm_envs.envs.puzzle_base.PuzzleEnv`: they read
    its ``rules``, ``state``, ``config`` and the AEC attributes, and change nothing.

    A game implements ``_catalog_names``, ``_catalog_plan`` and ``_catalog_index`` (the move
    catalog), and ``_state_shape`` and ``_state_planes`` (the state tensor).
    """

    # Set by PuzzleEnv (declared for readers and type checkers).
    rules: Any
    state: Any
    config: Any
    turn: int
    possible_agents: list[str]
    agent_selection: str
    episode_over: bool

    # ------------------------------------------------------------------ enumerable moves
    @property
    def max_legal_actions(self) -> int:
        """Upper bound on ``len(legal_actions(agent))``; fixed by the config (4 for Plan-Path and
        Sokoban, ``size**3`` for Sudoku)."""
        return int(self.rules.max_legal_plans)

    def legal_actions(self, agent: str) -> list[str]:
        """The enumerable-moves hook (:mod:`llm_envs.interop.hooks`): the complete action texts
        ``agent`` may play now, one per small move of the game (``rules.legal_plans``).

        The plan agent and the single solver answer ``#### <plan>``; the tool agent's move is a
        one-line program printing that answer line (it runs in the sandbox like any program).
        Empty before the first reset, after the episode and for an agent that is not to act now.
        A one-move plan per turn needs more turns than the paper's T = 4: raise ``max_turns``.
        """
        if self.puzzle_state is None or self.episode_over or agent != self.agent_selection:
            return []
        return [self._move_text(agent, plan) for plan in self.rules.legal_plans(self.puzzle_state)]

    def _move_text(self, agent: str, plan: Any) -> str:
        """The complete action that plays ``plan``: ``#### <plan>``, or for the tool agent a
        one-line program printing that line."""
        answer = f"{ANSWER_MARKER} {self.rules.format_plan(plan)}"
        return f"```python\nprint({answer!r})\n```" if agent == "tool" else answer

    # ------------------------------------------------------------------ fixed move catalog
    # The interop hook (llm_envs.interop.hooks): every small move of the game at a fixed index,
    # with a mask of the moves legal now. The legal entries are exactly rules.legal_plans, so
    # the catalog and legal_actions never disagree. Subclasses say how moves and indices map:
    # _catalog_names, _catalog_plan and _catalog_index.
    def action_catalog(self) -> list[str]:
        """Every small move of the game in a fixed order (index ``i`` always means the same
        move; the list depends on the configuration only). Plan-Path and Sokoban:
        ``#### U``, ``#### D``, ``#### L``, ``#### R``; Sudoku: ``r<row>c<col>=<digit>`` for
        every cell and digit, then ``restart``."""
        return list(self._catalog())

    def action_mask(self, agent: str) -> np.ndarray:
        """``int8`` over :meth:`action_catalog`: 1 for the moves of :meth:`legal_actions` now;
        all 0 before reset, after the episode and for an agent that is not to act now."""
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        mask = np.zeros(len(self._catalog()), dtype=np.int8)
        if self.puzzle_state is None or self.episode_over or agent != self.agent_selection:
            return mask
        for plan in self.rules.legal_plans(self.puzzle_state):
            mask[self._catalog_index(self.puzzle_state, plan)] = 1
        return mask

    def catalog_action(self, agent: str, index: int) -> str:
        """The complete action text that plays catalog move ``index`` for ``agent`` now (the
        same text :meth:`legal_actions` lists for that move when it is legal)."""
        if not 0 <= index < len(self._catalog()):
            raise IndexError(f"catalog index {index} outside [0, {len(self._catalog())})")
        if self.puzzle_state is None:
            raise EnvStateError("call reset() before using the environment")
        return self._move_text(agent, self._catalog_plan(self.puzzle_state, index))

    def _catalog(self) -> tuple[str, ...]:
        names = self.__dict__.get("_catalog_cache")
        if names is None:
            names = self._catalog_cache = tuple(self._catalog_names())
        return names

    def _catalog_names(self) -> list[str]:
        raise NotImplementedError

    def _catalog_plan(self, state: Any, index: int) -> Any:
        """The plan that catalog move ``index`` stands for in ``state``."""
        raise NotImplementedError

    def _catalog_index(self, state: Any, plan: Any) -> int:
        """The catalog index of ``plan``, one of ``rules.legal_plans(state)``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ state tensor
    # The interop hook: the puzzle as one-hot planes (channel first), what every agent sees in
    # its prompt (the tool's program and output of the current turn are not in it).
    def state_space(self) -> spaces.Box:
        """``Box(0, 1, shape, float32)`` of :meth:`state_tensor`; the shape depends on the
        configuration only (per game: :meth:`_state_shape`)."""
        box = self.__dict__.get("_state_space_cache")
        if box is None:
            box = self._state_space_cache = spaces.Box(0.0, 1.0, self._state_shape(), np.float32)
        return box

    def state_tensor(self, agent: str) -> np.ndarray:
        """The current puzzle as ``float32`` one-hot planes (zeros before the first reset)."""
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        if self.puzzle_state is None:
            return np.zeros(self._state_shape(), dtype=np.float32)
        return self._state_planes(self.puzzle_state)

    def state_text(self, agent: str) -> str:
        """The part of the prompt that holds the state: the turn, the puzzle text and the
        game's status line (Sudoku: the board of the last accepted answer)."""
        if self.puzzle_state is None:
            return ""
        turn = min(self.turn, self.config.max_turns - 1) + 1
        parts = [f"{self.rules.game_name} | turn {turn} of {self.config.max_turns}", self.rules.puzzle_text(self.puzzle_state)]
        status = self.rules.status_text(self.puzzle_state)
        if status:
            parts.append(status)
        return "\n".join(parts)

    def _state_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def _state_planes(self, state: Any) -> np.ndarray:
        raise NotImplementedError


class SingleStepCatalog:
    """The move catalog of the grid games whose small move is one step (Plan-Path, Sokoban):
    ``#### U``, ``#### D``, ``#### L``, ``#### R`` at indices 0-3 (``#### ["U"]``, ... under
    ``answer_format="list"``; mixed into a PuzzleEnv)."""

    STEPS: ClassVar[tuple[str, ...]] = ("U", "D", "L", "R")

    def _catalog_names(self) -> list[str]:
        rules = self.rules  # type: ignore[attr-defined]
        return [f"{ANSWER_MARKER} {rules.format_plan((step,))}" for step in self.STEPS]

    def _catalog_plan(self, state: Any, index: int) -> tuple[str, ...]:
        return (self.STEPS[index],)

    def _catalog_index(self, state: Any, plan: tuple[str, ...]) -> int:
        if len(plan) != 1 or plan[0] not in self.STEPS:
            raise ValueError(f"not a single-step plan: {plan!r}")
        return self.STEPS.index(plan[0])
