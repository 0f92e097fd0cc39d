"""What every ``llm-envs`` subcommand shares: the user-error exception and small helpers."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from llm_envs.agents.spec import parse_option_value

EXIT_USAGE = 2


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


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    from llm_envs.evaluation.summary import _table

    return _table(rows, header)


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe form of ``text``, shortened with a hash suffix past ``limit``."""
    result = re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_") or "run"
    if len(result) > limit:
        result = result[: limit - 9] + "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return result
