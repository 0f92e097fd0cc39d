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

from pettingzoo.env_registry.exceptions import FailedToImport, PettingZooRegistryError
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
    except PettingZooRegistryError as error:
        if isinstance(error, FailedToImport):
            raise _import_failure(env_id, error) from error.__cause__
        # (PettingZoo's own message lists every environment it knows, Atari's included)
        raise UnknownEnvironmentError(unknown_environment_message(env_id)) from None


def _import_failure(env_id: str, error: FailedToImport) -> ImportError:
    # PettingZoo's message suggests ``pip install 'pettingzoo[llm]'``, which does not exist.
    return ImportError(
        f"could not import the environment {env_id!r}: {error.__cause__!r}. "
        "If a package is missing, install the matching extra of llm-envs "
        "(e.g. pip install 'llm-envs[code,math]')."
    )


def env_ids() -> list[str]:
    """Every registered environment id, sorted."""
    return sorted(_ENTRIES)


def entry(env_id: str) -> EnvEntry:
    """The registry entry of ``env_id`` (namespace optional)."""
    given = env_id
    if "/" not in env_id:
        env_id = f"{NAMESPACE}/{env_id}"
    if env_id not in _ENTRIES:
        raise UnknownEnvironmentError(unknown_environment_message(given))
    return _ENTRIES[env_id]


def option_names(env_id: str) -> frozenset[str] | None:
    """The keyword options the environment's constructor accepts (its config's fields and its
    own keyword parameters), or ``None`` where it cannot tell (it takes ``**kwargs`` without a
    config dataclass). Imports the environment's module."""
    import dataclasses
    import inspect

    cls = entry(env_id).load()
    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        config_class = getattr(cls, "config_class", None)
        if config_class is None or not dataclasses.is_dataclass(config_class):
            return None
        names |= {f.name for f in dataclasses.fields(config_class)}
    return frozenset(names)


class UnknownEnvironmentError(KeyError, ValueError):
    """An environment id that is not registered (a ``KeyError`` for lookups, a ``ValueError``
    for a configuration that names it). The message names the closest registered ids."""

    def __str__(self) -> str:  # (a KeyError's str quotes its message)
        return str(self.args[0]) if self.args else ""


def unknown_environment_message(env_id: str) -> str:
    """One line: ``env_id`` is not registered, with the closest registered ids if any."""
    import difflib

    ids = env_ids()
    names = {i.split("/", 1)[-1].lower(): i for i in ids}
    wanted = env_id.split("/", 1)[-1] if env_id.startswith(f"{NAMESPACE}/") or "/" not in env_id else env_id
    suggestion = [names[m] for m in difflib.get_close_matches(wanted.lower(), list(names), n=2, cutoff=0.75)]
    hint = f"did you mean {' or '.join(suggestion)}? " if suggestion else ""
    return f"unknown environment {env_id!r}; {hint}see `llm-envs list` (registered: {', '.join(ids)})"


def list_envs() -> list[EnvEntry]:
    """Every registry entry, sorted by id."""
    return [_ENTRIES[i] for i in env_ids()]
