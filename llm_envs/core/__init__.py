"""The text-environment contract shared by every environment in :mod:`llm_envs`.

:class:`TextEnv` (and what comes with it from ``core/env.py``) is imported on first use, because
it is a PettingZoo ``AECEnv``: the pure parts (records, splits, errors, messages, spaces) stay
importable without PettingZoo, so the environments' ``rules.py`` modules can use them and remain
pure (tests/envs/test_rules_purity.py).
"""

from typing import TYPE_CHECKING, Any

from llm_envs.core.errors import InfrastructureError, SandboxFailure
from llm_envs.core.messages import to_chat_messages
from llm_envs.core.records import ActionRecord, format_transcript
from llm_envs.core.spaces import FreeText
from llm_envs.core.splits import SPLITS, check_split, split_of, split_seed

if TYPE_CHECKING:
    from llm_envs.core.env import EnvStateError, Observation, TextEnv, UnreadResetOptionWarning

#: The names that come from ``llm_envs.core.env`` (imported, with PettingZoo, when first read).
_FROM_ENV = ("EnvStateError", "Observation", "TextEnv", "UnreadResetOptionWarning")


def __getattr__(name: str) -> Any:
    if name in _FROM_ENV:
        from llm_envs.core import env

        return getattr(env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SPLITS",
    "ActionRecord",
    "EnvStateError",
    "FreeText",
    "InfrastructureError",
    "Observation",
    "SandboxFailure",
    "TextEnv",
    "check_split",
    "format_transcript",
    "split_of",
    "split_seed",
    "to_chat_messages",
    "UnreadResetOptionWarning",
]
