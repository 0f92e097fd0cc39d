"""Wrapper-side move enumerators for environments that do not implement ``legal_actions``.

They stand in for the enumerable-moves hook (:mod:`llm_envs.interop.hooks`) and read only the
environments' public attributes. An environment's own ``legal_actions`` always wins, so each
entry can be deleted as soon as its environment implements the hook.

=================  ===========================================================================
Environment        One move (the texts are complete actions, parsed by the environment)
=================  ===========================================================================
Signalling         a symbol word, for speaker and listener (``"red"``)
=================  ===========================================================================

The puzzles (Plan-Path, Sokoban, Sudoku) implement the hook themselves
(:meth:`llm_envs.interop.puzzle_hooks.PuzzleHooks.legal_actions`). Signalling also has a fixed move
catalog (``action_catalog``, the same symbols in the same order), which serves
``NumericView(actions="fixed")``; this entry serves the menu form (``actions="legal"``).
"""

from __future__ import annotations

from llm_envs.interop.hooks import register_moves

# ------------------------------------------------------------------------------ signalling
register_moves(
    "llm_envs.envs.signalling.env:SignallingEnv",
    lambda env, agent: list(env.config.symbols),
    lambda env: len(env.config.symbols),
)
