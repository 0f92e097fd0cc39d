"""An agent that kills its own process once, to test how evaluation survives a lost worker."""

from __future__ import annotations

import os
from pathlib import Path

from llm_envs.agents.scripted import ReferenceAgent


class CrashOnceAgent(ReferenceAgent):
    """The reference agent, except that the first process to be asked for a decision of the episode
    started from ``crash_seed`` exits at once (``marker`` records that it happened)."""

    name = "reference"

    def __init__(self, marker: str, crash_seed: int) -> None:
        self.marker = Path(marker)
        self.crash_seed = int(crash_seed)

    def act_batch(self, requests):
        for request in requests:
            if request.env._last_seed == self.crash_seed and not self.marker.exists():
                self.marker.write_text(str(os.getpid()))
                os._exit(1)  # the worker process dies mid-episode, as on a lost node
        return super().act_batch(requests)


class FlakyAgent(ReferenceAgent):
    """The reference agent, except that its answers in the episode started from ``fail_seed``
    are connection failures (an infrastructure failure, reported in the batch: the other
    requests of the batch are answered) until the file ``healed`` exists."""

    name = "reference"

    def __init__(self, fail_seed: int, healed: str) -> None:
        self.fail_seed = int(fail_seed)
        self.healed = Path(healed)

    def act_batch(self, requests):
        from llm_envs.agents.base import AgentOutput

        outputs = super().act_batch(requests)
        if self.healed.exists():
            return outputs
        return [AgentOutput(text="", error="connection refused (the test's server is down)",
                            meta={"error_kind": "connection"}) if r.episode_seed == self.fail_seed else out
                for r, out in zip(requests, outputs, strict=True)]
