"""An agent whose server goes down, to test that an arena never scores an infrastructure failure."""

from __future__ import annotations

from pathlib import Path

from llm_envs.agents.base import AgentOutput
from llm_envs.agents.scripted import ReferenceAgent


class ServerDownAgent(ReferenceAgent):
    """The reference agent, except that after ``answered`` successful calls its answers are
    connection failures until the file ``healed`` exists."""

    name = "reference"

    def __init__(self, answered: int, healed: str) -> None:
        self.answered = int(answered)
        self.healed = Path(healed)
        self.calls = 0

    def act_batch(self, requests):
        self.calls += 1
        if self.calls <= self.answered or self.healed.exists():
            return super().act_batch(requests)
        return [AgentOutput(text="", error="connection refused (the test's server is down)",
                            meta={"error_kind": "connection"}) for _ in requests]
