"""The optional hooks an environment can implement so that interop wrappers can do more.

Every hook is optional; an environment that implements none still works with every wrapper in
:mod:`llm_envs.interop` (as a turn-based environment with free-text actions).

=======================  ===================================================================
Hook                     Methods (on the unwrapped text environment)
=======================  ===================================================================
Simultaneous cycles      ``metadata["is_parallelizable"] = True`` (PettingZoo's own flag)
Fixed move catalog       ``action_catalog()``, ``action_mask(agent)``; optionally
                         ``catalog_action(agent, index)``
Enumerable moves         ``legal_actions(agent)``, ``max_legal_actions``
State tensor             ``state_space()``, ``state_tensor(agent)``; optionally
                         ``state_text(agent)``
=======================  ===================================================================

Simultaneous cycles promise that each cycle steps every live agent once, in order, that an
agent's observation does not change when earlier agents of its cycle act, and that an episode
ends only after a cycle's last agent. Where an environment lacks ``legal_actions``, an enumerator
registered with :func:`register_moves` stands in. docs/interop.md ("The hooks an environment
implements", "The parallel API") specifies each hook and lists what every environment offers;
the puzzles' implementation is :mod:`llm_envs.interop.puzzle_hooks`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "ActionCatalog",
    "Catalog",
    "LegalActions",
    "MoveSet",
    "SIMULTANEOUS_FALLBACK",
    "StateTensor",
    "candidate_actions",
    "find_catalog",
    "find_moves",
    "has_state_tensor",
    "is_simultaneous",
    "register_moves",
    "state_text",
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
    """The move enumerator for ``env``: its own ``legal_actions`` hook first, else a registered
    fallback, else the legal entries of its fixed move catalog (``source="catalog"``)."""
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
    catalog = find_catalog(env)
    if catalog is not None:
        return MoveSet(lambda e, agent: catalog.legal_texts(agent), lambda e: len(catalog), "catalog")
    return None


# ------------------------------------------------------------------------------ move catalog
@runtime_checkable
class ActionCatalog(Protocol):
    """The fixed-move-catalog hook (see the module docstring); ``catalog_action`` is optional."""

    def action_catalog(self) -> list[str]: ...

    def action_mask(self, agent: str) -> np.ndarray: ...


class Catalog:
    """The fixed move catalog of one environment, read through its hooks and checked.

    The catalog is read once: it is fixed by the environment's configuration. Every mask is
    checked against it (length, values), so that a broken hook fails with a message that names
    the environment instead of silently shifting what the indices mean.
    """

    def __init__(self, env: Any):
        self.base = env.unwrapped
        names = self.base.action_catalog()
        if not isinstance(names, (list, tuple)) or not names:
            raise ValueError(f"{self._env_name}.action_catalog() must be a non-empty list of str")
        if not all(isinstance(name, str) for name in names):
            raise TypeError(f"{self._env_name}.action_catalog() holds a non-str entry")
        if len(set(names)) != len(names):
            raise ValueError(f"{self._env_name}.action_catalog() repeats an entry: indices would be ambiguous")
        self.names: tuple[str, ...] = tuple(names)
        play = getattr(self.base, "catalog_action", None)
        self._play = play if callable(play) else None

    @property
    def _env_name(self) -> str:
        return type(self.base).__name__

    def __len__(self) -> int:
        return len(self.names)

    def mask(self, agent: str) -> np.ndarray:
        """The environment's ``int8`` mask for ``agent`` (1 where legal now), checked."""
        mask = np.asarray(self.base.action_mask(agent))
        if mask.shape != (len(self.names),):
            raise ValueError(
                f"{self._env_name}.action_mask({agent!r}) has shape {mask.shape}; the catalog "
                f"has {len(self.names)} entries"
            )
        if mask.size and not np.isin(mask, (0, 1)).all():
            raise ValueError(f"{self._env_name}.action_mask({agent!r}) holds values other than 0 and 1")
        return mask.astype(np.int8, copy=False)

    def text(self, agent: str, index: int) -> str:
        """The complete action text that plays catalog move ``index`` for ``agent`` now."""
        if not 0 <= index < len(self.names):
            raise IndexError(f"catalog index {index} outside [0, {len(self.names)})")
        if self._play is None:
            return self.names[index]
        return str(self._play(agent, index))

    def legal_texts(self, agent: str) -> list[str]:
        """The action texts of the moves legal for ``agent`` now, in catalog order."""
        return [self.text(agent, int(i)) for i in np.flatnonzero(self.mask(agent))]


def find_catalog(env: Any) -> Catalog | None:
    """``env``'s fixed move catalog, or ``None`` if it does not implement the hook."""
    base = env.unwrapped
    if callable(getattr(base, "action_catalog", None)) and callable(getattr(base, "action_mask", None)):
        return Catalog(env)
    return None


# ------------------------------------------------------------------------------ state tensor
@runtime_checkable
class StateTensor(Protocol):
    """The state-tensor hook (see the module docstring); ``state_text`` is optional."""

    def state_space(self) -> Any: ...

    def state_tensor(self, agent: str) -> np.ndarray: ...


def has_state_tensor(env: Any) -> bool:
    """Whether ``env`` implements ``state_space()`` and ``state_tensor(agent)``."""
    base = env.unwrapped
    return callable(getattr(base, "state_space", None)) and callable(getattr(base, "state_tensor", None))


def state_text(env: Any, agent: str) -> str | None:
    """``env.state_text(agent)`` where the environment implements it, else ``None``."""
    method = getattr(env.unwrapped, "state_text", None)
    return str(method(agent)) if callable(method) else None


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
