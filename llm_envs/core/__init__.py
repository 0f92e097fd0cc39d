"""The text-environment contract shared by every environment in :mod:`llm_envs`."""

from llm_envs.core.env import EnvStateError, Observation, TextEnv
from llm_envs.core.errors import InfrastructureError, SandboxFailure
from llm_envs.core.messages import to_chat_messages
from llm_envs.core.records import ActionRecord, format_transcript
from llm_envs.core.spaces import FreeText
from llm_envs.core.splits import SPLITS, check_split, split_of, split_seed

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
]
