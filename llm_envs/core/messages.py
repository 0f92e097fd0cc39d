"""Turning a text observation into the chat messages an LLM API expects."""

from __future__ import annotations

from collections.abc import Mapping


def to_chat_messages(observation: Mapping[str, str]) -> list[dict[str, str]]:
    """Return ``[{"role": "system", ...}, {"role": "user", ...}]`` for an observation.

    The role instruction becomes the system message and the current prompt the user message.
    An empty instruction is left out, since some chat templates reject empty system messages.
    """
    messages: list[dict[str, str]] = []
    instruction = observation.get("instruction", "")
    if instruction:
        messages.append({"role": "system", "content": instruction})
    messages.append({"role": "user", "content": observation.get("prompt", "")})
    return messages
