"""What every ``llm-envs`` subcommand shares: the user-error exception and small helpers."""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Sequence
from typing import Any

from llm_envs.agents.spec import parse_option_value

#: Exit status of a user error (a mistyped id, spec or path; a misconfigured server).
EXIT_USAGE = 2
#: Exit status of a run that infrastructure failures left incomplete (``--resume`` completes it).
EXIT_INCOMPLETE = 3


class CLIError(Exception):
    """A user error: printed as ``error: ...`` with exit status 2."""


def env_kwargs(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``--env-arg key=value`` pairs as keyword arguments (values parsed as YAML scalars)."""
    kwargs: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--env-arg takes key=value, got {pair!r}")
        kwargs[key.strip()] = parse_option_value(value)
    return kwargs


def resolve_env(env_id: str) -> Any:
    """The registry entry of ``env_id``, or a one-line :class:`CLIError` naming the closest
    registered ids (never PettingZoo's list of every environment it knows)."""
    import llm_envs
    from llm_envs.registry import NAMESPACE, entry

    try:
        return entry(env_id)
    except KeyError:
        pass
    ids = llm_envs.env_ids()
    names = {i.split("/", 1)[-1].lower(): i for i in ids}
    wanted = env_id.split("/", 1)[-1] if env_id.startswith(f"{NAMESPACE}/") or "/" not in env_id else env_id
    suggestion = [names[m] for m in difflib.get_close_matches(wanted.lower(), list(names), n=2, cutoff=0.75)]
    hint = f"did you mean {' or '.join(suggestion)}? " if suggestion else ""
    raise CLIError(f"unknown environment {env_id!r}; {hint}see `llm-envs list` (registered: {', '.join(ids)})")


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    from llm_envs.evaluation.summary import _table

    return _table(rows, header)


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe form of ``text``, shortened with a hash suffix past ``limit``."""
    result = re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_") or "run"
    if len(result) > limit:
        result = result[: limit - 9] + "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return result
