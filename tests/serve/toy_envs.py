"""A two-agent toy environment for server tests: agents ``a`` and ``b`` alternate for three turns
and earn the length of their text; ``crash`` raises a :class:`SandboxFailure` before anything
changes (as a real sandbox failure does), ``block`` waits for :data:`RELEASE` (a step that
blocks, to show that one slow session does not stall the others)."""

from __future__ import annotations

import threading
from typing import Any

from llm_envs.core import TextEnv
from llm_envs.core.errors import SandboxFailure
from tests.envs.helpers import registered_for_a_test

TOY_ID = "llm/ServeToy-v0"
#: Set by a test to let a ``block`` step finish; :data:`BLOCKED` tells the test one is waiting.
RELEASE = threading.Event()
BLOCKED = threading.Event()


class ServeToyEnv(TextEnv):
    metadata = {**TextEnv.metadata, "name": "serve_toy_v0"}

    def __init__(self, turns: int = 3, render_mode: str | None = None) -> None:
        super().__init__(["a", "b"], render_mode=render_mode)
        self.turns = turns

    def _start_episode(self, options: dict[str, Any]) -> str:
        self.secret = int(self.np_random.integers(0, 1000))
        return "a"

    def _apply_action(self, agent: str, action: str) -> str | None:
        if action == "crash":
            raise SandboxFailure("the sandbox failed under the program (test)")
        if action == "block":
            BLOCKED.set()
            if not RELEASE.wait(timeout=30):
                raise AssertionError("the test never released the blocked step")
        record = self._add_record(agent, action)
        self._credit(record, "length", float(len(action)))
        if agent == "b":
            self.turn += 1
            if self.turn >= self.turns:
                self._end_episode()
                return None
        return "b" if agent == "a" else "a"

    def _instruction(self, agent: str) -> str:
        return f"You are {agent}."

    def _prompt(self, agent: str) -> str:
        return f"turn {self.turn}, secret {self.secret}"

    def reference_action(self, agent: str) -> str:
        return f"{agent}{self.turn}"

    def _episode_metrics(self) -> dict[str, float]:
        return {"success": 1.0 if self._episode_over else 0.0}


def register():
    """A generator for fixtures: the toy is registered while the test runs."""
    return registered_for_a_test(TOY_ID, "tests.serve.toy_envs:ServeToyEnv", ["a", "b"], "toy", "server test toy")
