"""Wrapper-side move enumerators for environments that do not implement ``legal_actions``.

They stand in for the enumerable-moves hook (:mod:`llm_envs.interop.hooks`) and read only the
environments' public attributes. An environment's own ``legal_actions`` always wins, so these
can be deleted as soon as the environments implement the hook.

=================  ===========================================================================
Environment        One move (the texts are complete actions, parsed by the environment)
=================  ===========================================================================
Signalling         a symbol word, for speaker and listener (``"red"``)
Plan-Path,         one step that changes the state (``"#### U"``); a blocked step is not
Sokoban            listed (all four are, if every step is blocked)
Sudoku             the current board with one empty cell filled by a number that repeats in
                   no row, column or box (``"#### [[1, 0, 3, 4], ...]"``)
=================  ===========================================================================

For the puzzles' **tool** agent a move is a program that prints one such plan
(```` ```python\\nprint('#### U')\\n``` ````): it runs in the sandbox like any program, so the
tool's menu is the plan agent's menu, proposed through code. One step per turn means an
episode needs more turns than the paper's T = 4 to reach the goal: raise ``max_turns``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llm_envs.interop.hooks import register_moves

ANSWER_MARKER = "####"  # the puzzles' answer line marker (llm_envs.envs.puzzle_base)

# ------------------------------------------------------------------------------ signalling
register_moves(
    "llm_envs.envs.signalling.env:SignallingEnv",
    lambda env, agent: list(env.config.symbols),
    lambda env: len(env.config.symbols),
)


# ------------------------------------------------------------------------------ puzzles
def _puzzle_texts(env: Any, agent: str, plans: Iterable[Any]) -> list[str]:
    """Answer texts (plan/solver agent) or printing programs (tool agent) for ``plans``."""
    texts = []
    for plan in plans:
        answer = f"{ANSWER_MARKER} {env.rules.format_plan(plan)}"
        texts.append(f"```python\nprint({answer!r})\n```" if agent == "tool" else answer)
    return texts


def _step_moves(env: Any, agent: str) -> list[str]:
    """Plan-Path and Sokoban: the single steps U/D/L/R that change the state."""
    state = env.state
    steps = [(move,) for move in ("U", "D", "L", "R")]
    moving = [plan for plan in steps if env.rules.apply_plan(state, plan).state != state]
    return _puzzle_texts(env, agent, moving or steps)


def _sudoku_moves(env: Any, agent: str) -> list[str]:
    """Sudoku: fill one empty cell of the current board without a repeat."""
    from llm_envs.envs.sudoku.rules import has_conflict

    board = env.state.board
    size = env.state.puzzle.size
    plans = []
    for cell, value in enumerate(board):
        if value:
            continue
        for candidate in range(1, size + 1):
            grid = board[:cell] + (candidate,) + board[cell + 1 :]
            if not has_conflict(grid, size):
                plans.append(grid)
    return _puzzle_texts(env, agent, plans)


for _path in ("llm_envs.envs.plan_path.env:PlanPathEnv", "llm_envs.envs.sokoban.env:SokobanEnv"):
    register_moves(_path, _step_moves, lambda env: 4)
register_moves(
    "llm_envs.envs.sudoku.env:SudokuEnv",
    _sudoku_moves,
    lambda env: env.rules.size**3,  # at most every cell × every number
)
