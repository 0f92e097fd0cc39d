"""A deterministic rollout engine without a model: replies come from a function of the observation.

:class:`ScriptedEngine` speaks the :class:`~llm_trainers.rollout.RolloutEngine` protocol with
byte-level "tokens": an observation is encoded as the UTF-8 bytes of its JSON, and a reply's
token ids are the bytes of its text (log-probabilities 0). ``reply(policy, observation,
candidate)`` chooses the text, so a rollout with it depends only on the environments — which
is what the scale-out tests compare (a distributed rollout against the local one) and what the
throughput benchmarks measure (environment and sandbox time, no sampling). It needs no torch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ScriptedEngine", "ScriptedGeneration"]


@dataclass
class ScriptedGeneration:
    """One reply (the fields a rollout reads from a :class:`~llm_trainers.agents.hf.Generation`)."""

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str = "stop"


class ScriptedEngine:
    """Replies ``reply(policy, observation, candidate)`` for every request.

    Args:
        reply: The reply for candidate ``candidate`` (0..n-1) of a request.
        on_generate: Called with the call number before each ``generate_multi`` (tests use it to
            break things at a given moment).
    """

    name = "scripted"

    def __init__(self, reply: Callable[[str, Mapping[str, Any], int], str],
                 on_generate: Callable[[int], None] | None = None) -> None:
        self.reply = reply
        self.on_generate = on_generate
        self.calls = 0
        self.generated_tokens = 0

    def encode(self, policy: str, observation: Mapping[str, Any]) -> list[int]:
        return list(json.dumps(dict(observation), sort_keys=True).encode("utf-8"))

    def generate_multi(self, requests: Sequence[tuple[str, Sequence[int]]], n: int = 1,
                       sampling: Any = None) -> list[list[ScriptedGeneration]]:
        if self.on_generate is not None:
            self.on_generate(self.calls)
        self.calls += 1
        out = []
        for policy, prompt in requests:
            observation = json.loads(bytes(prompt).decode("utf-8"))
            row = []
            for c in range(n):
                text = self.reply(policy, observation, c)
                ids = list(text.encode("utf-8"))
                self.generated_tokens += len(ids)
                row.append(ScriptedGeneration(ids, [0.0] * len(ids), text))
            out.append(row)
        return out

    def sync(self, policies: Sequence[str] | None = None) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.calls = int(state["calls"])
