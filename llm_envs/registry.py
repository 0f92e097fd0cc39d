"""The registry of text environments, on top of PettingZoo's registry (1.27+).

Every environment is registered twice: in PettingZoo's AEC registry under the ``llm``
namespace, so ``pettingzoo.make("aec", "llm/PlanPath-v0")`` works once ``llm_envs`` is imported,
and here, with the facts that ``llm-envs list`` prints (agents, task, description) available
without importing the environment's module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from pettingzoo.env_registry.exceptions import FailedToImport
from pettingzoo.env_registry.registration import make as _pz_make
from pettingzoo.env_registry.registration import register as _pz_register

NAMESPACE = "llm"
#: Every namespace ids may live in: ours, and TextArena's games under their own names.
NAMESPACES = (NAMESPACE, "textarena")


@dataclass(frozen=True)
class EnvEntry:
    """What the registry knows about one environment without importing it."""

    id: str
    entry_point: str
    agents: tuple[str, ...]
    task: str
    description: str
    paper: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)

    def load(self) -> type:
        module_name, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module_name), attr)


_ENTRIES: dict[str, EnvEntry] = {}


def register_env(
    env_id: str,
    entry_point: str,
    *,
    agents: tuple[str, ...],
    task: str,
    description: str,
    paper: str = "",
    kwargs: dict[str, Any] | None = None,
) -> None:
    """Register an environment here and in PettingZoo's AEC registry.

    Args:
        env_id: ``"llm/Name-vN"`` (or ``"textarena/Name-vN"`` for TextArena's games); bump ``N``
            whenever behaviour changes.
        entry_point: ``"module:Class"``, imported lazily on first ``make``.
        agents: The default agent ids (shown by ``llm-envs list``).
        task: The task source in one phrase (shown by ``llm-envs list``).
        description: One line.
        paper: The paper whose system the environment reproduces.
        kwargs: Default keyword arguments for the constructor.
    """
    if env_id.split("/", 1)[0] not in NAMESPACES or "/" not in env_id:
        raise ValueError(f"environment ids live in the namespaces {NAMESPACES}: got {env_id!r}")
    entry = EnvEntry(env_id, entry_point, tuple(agents), task, description, paper, dict(kwargs or {}))
    _ENTRIES[env_id] = entry
    _pz_register("aec", env_id, entry_point=entry_point, kwargs=dict(kwargs or {}))


def make(env_id: str, **kwargs: Any):
    """Create a registered environment: ``llm_envs.make("llm/Sudoku-v0", size=9)``.

    The namespace may be left out (``make("Sudoku-v0")``) and so may the version, which then
    resolves to the highest registered one.
    """
    if "/" not in env_id:
        env_id = f"{NAMESPACE}/{env_id}"
    try:
        return _pz_make("aec", env_id, **kwargs)
    except FailedToImport as error:
        # PettingZoo's message suggests ``pip install 'pettingzoo[llm]'``, which does not exist.
        cause = error.__cause__
        raise ImportError(
            f"could not import the environment {env_id!r}: {cause!r}. "
            "If a package is missing, install the matching extra of llm-envs "
            "(e.g. pip install 'llm-envs[code,math]')."
        ) from cause


def env_ids() -> list[str]:
    """Every registered environment id, sorted."""
    return sorted(_ENTRIES)


def entry(env_id: str) -> EnvEntry:
    """The registry entry of ``env_id`` (namespace optional)."""
    if "/" not in env_id:
        env_id = f"{NAMESPACE}/{env_id}"
    if env_id not in _ENTRIES:
        raise KeyError(f"unknown environment {env_id!r}; registered: {', '.join(env_ids())}")
    return _ENTRIES[env_id]


def list_envs() -> list[EnvEntry]:
    """Every registry entry, sorted by id."""
    return [_ENTRIES[i] for i in env_ids()]
