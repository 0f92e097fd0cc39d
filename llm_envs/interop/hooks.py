"""The optional hooks an environment can implement so that interop wrappers can do more.

Two hooks, both optional; an environment that implements neither still works with every wrapper
in :mod:`llm_envs.interop` (as a turn-based environment with free-text actions).

**Simultaneous cycles** (for the parallel API). An environment declares
``metadata["is_parallelizable"] = True`` (PettingZoo's own flag, which
:func:`pettingzoo.utils.conversions.aec_to_parallel` requires) when its AEC sequencing is one
*cycle* per round and the agents of a cycle act as if simultaneously:

1. each cycle steps every live agent exactly once, in the order of ``env.agents``;
2. an agent's observation does not change when earlier agents of the same cycle act (it sees the
   previous cycles only: a debate turn shows the *previous* turn's answers);
3. the episode ends only after the last agent of a cycle (then every agent is done at once).

:class:`~llm_envs.interop.parallel.SimultaneousParallelEnv` checks 1 and 2 at run time and raises
an error that names the violation.

**Enumerable moves** (for the ``Discrete`` action view). An environment whose moves can be listed
implements::

    max_legal_actions: int                      # an upper bound on len(legal_actions(agent))
    def legal_actions(self, agent: str) -> list[str]:
        '''The action texts ``agent`` may play now, in a stable order; [] if none.'''

Each text is a complete action exactly as an LLM would write it (e.g. ``"#### U"``), so playing it
goes through the environment's normal parser and rewards. Where an environment has no such
method, a *wrapper-side* enumerator registered with :func:`register_moves` stands in (those that
ship are in :mod:`llm_envs.interop.fallback_moves`: Signalling (the puzzles implement the hook themselves)).
:func:`candidate_actions` builds a generic menu for any environment instead: the reference action
plus well-formed random actions, shuffled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "LegalActions",
    "MoveSet",
    "SIMULTANEOUS_FALLBACK",
    "candidate_actions",
    "find_moves",
    "is_simultaneous",
    "register_moves",
]


def _class_paths(env: Any) -> list[str]:
    """``"module:QualName"`` of the class of ``env.unwrapped`` and of its bases."""
    return [f"{cls.__module__}:{cls.__qualname__}" for cls in type(env.unwrapped).__mro__]


# ------------------------------------------------------------------------------ simultaneity
#: Environments known to satisfy the simultaneous-cycle conditions above although they do not
#: set ``metadata["is_parallelizable"]`` (yet). Each entry is verified by the interop tests and
#: still checked at run time by ``SimultaneousParallelEnv``.
SIMULTANEOUS_FALLBACK: set[str] = set()


def is_simultaneous(env: Any) -> bool:
    """Whether ``env`` (an AEC environment, possibly wrapped) declares simultaneous cycles."""
    base = env.unwrapped
    if bool(getattr(base, "metadata", {}).get("is_parallelizable", False)):
        return True
    return any(path in SIMULTANEOUS_FALLBACK for path in _class_paths(env))


# ------------------------------------------------------------------------------ legal moves
@runtime_checkable
class LegalActions(Protocol):
    """The enumerable-moves hook (see the module docstring)."""

    max_legal_actions: int

    def legal_actions(self, agent: str) -> list[str]: ...


@dataclass(frozen=True)
class MoveSet:
    """How to enumerate the moves of one environment.

    Attributes:
        legal_actions: ``(env, agent) -> list[str]``, ``env`` being the unwrapped text env.
        max_actions: ``env -> int``, an upper bound on the length of those lists.
        source: ``"env"`` (the environment's own hook) or ``"wrapper"`` (a registered fallback).
    """

    legal_actions: Callable[[Any, str], list[str]]
    max_actions: Callable[[Any], int]
    source: str


_FALLBACK_MOVES: dict[str, MoveSet] = {}


def register_moves(
    class_path: str,
    legal_actions: Callable[[Any, str], list[str]],
    max_actions: Callable[[Any], int],
) -> None:
    """Register a wrapper-side move enumerator for the environment class at ``class_path``.

    ``class_path`` is ``"module:QualName"``; subclasses match too. Registering does not import
    the environment.
    """
    _FALLBACK_MOVES[class_path] = MoveSet(legal_actions, max_actions, "wrapper")


def find_moves(env: Any) -> MoveSet | None:
    """The move enumerator for ``env``: its own hook first, else a registered fallback."""
    base = env.unwrapped
    if callable(getattr(base, "legal_actions", None)) and hasattr(base, "max_legal_actions"):
        return MoveSet(
            lambda e, agent: list(e.legal_actions(agent)),
            lambda e: int(e.max_legal_actions),
            "env",
        )
    for path in _class_paths(env):
        if path in _FALLBACK_MOVES:
            return _FALLBACK_MOVES[path]
    return None


# ------------------------------------------------------------------------------ candidates
def candidate_actions(env: Any, agent: str, rng: np.random.Generator, count: int) -> list[str]:
    """A generic menu of at most ``count`` distinct action texts for ``agent``, shuffled.

    It holds ``env.reference_action(agent)`` (when the environment has a reference agent) and
    ``env.random_action(agent, rng)`` draws, so a policy that picks well from the menu solves the
    task: a multiple-choice *testbed* for numeric MARL code, not the environment's real task.
    """
    base = env.unwrapped
    texts: list[str] = []
    try:
        texts.append(base.reference_action(agent))
    except NotImplementedError:
        pass
    for _ in range(4 * count):  # random actions may repeat; a bounded number of tries
        if len(texts) >= count:
            break
        text = base.random_action(agent, rng)
        if text not in texts:
            texts.append(text)
    order = rng.permutation(len(texts))
    return [texts[int(i)] for i in order]
