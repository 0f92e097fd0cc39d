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
