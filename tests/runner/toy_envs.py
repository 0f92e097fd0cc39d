"""A small two-agent environment for the agent, runner and evaluation tests.

``alice`` and ``bob`` take turns answering "What is A + B?". A correct integer answer earns 1,
anything else 0, and text that is not an integer is a format error. When every answer of the
episode was right, each record gets a delayed ``team`` bonus of 0.5 at the end. The right answer
can be read off the prompt, so a test server can answer like the reference agent does
(:func:`solve_prompt`).

The environment is registered only for the duration of a test (:func:`register_sums_env`), so it
never leaks into other test modules' parametrisations over the registry.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from llm_envs.core import TextEnv
from tests.envs.helpers import registered_for_a_test

SUMS_ENV_ID = "llm/RunnerTestSums-v0"
_QUESTION = re.compile(r"What is (\d+) \+ (\d+)\?")


@dataclass
class SumsConfig:
    rounds: int = 2  # questions per agent
    upper: int = 50
    stop_on_error: bool = False  # end the episode at the first wrong answer


class SumsEnv(TextEnv):
    metadata = {**TextEnv.metadata, "name": "runner_test_sums_v0"}
    config_class = SumsConfig

    def __init__(self, config: SumsConfig | None = None, *, render_mode=None, **overrides):
        self.config = self._build_config(config, overrides)
        super().__init__(["alice", "bob"], render_mode=render_mode)

    def _new_question(self) -> None:
        self.a = int(self.np_random.integers(0, self.config.upper))
        self.b = int(self.np_random.integers(0, self.config.upper))

    def _start_episode(self, options):
        self._new_question()
        self.correct = 0
        return "alice"

    def _apply_action(self, agent, action):
        text = action.strip()
        format_ok = bool(re.fullmatch(r"-?\d{1,9}", text))
        record = self._add_record(agent, action, format_ok=format_ok, parsed={"answer": text})
        right = format_ok and int(text) == self.a + self.b
        self._credit(record, "answer", 1.0 if right else 0.0)
        self.correct += int(right)
        self.turn += 1
        if self.turn >= 2 * self.config.rounds or (self.config.stop_on_error and not right):
            if self.correct == self.turn:
                for r in self.records:
                    self._credit(r, "team", 0.5)
            self._end_episode(truncated=False)
            return None
        self._new_question()
        return "bob" if agent == "alice" else "alice"

    def _instruction(self, agent):
        return f"You are {agent}. Answer with the number only."

    def _prompt(self, agent):
        return f"Question {self.turn}: What is {self.a} + {self.b}?"

    def _episode_metrics(self):
        return {
            "success": float(self.correct == 2 * self.config.rounds),
            "accuracy": self.correct / max(1, self.turn),
        }

    def reference_action(self, agent):
        return str(self.a + self.b)

    def random_action(self, agent, rng):
        return str(int(rng.integers(0, 2 * self.config.upper)))


def solve_prompt(prompt: str) -> str:
    """The right answer to a SumsEnv prompt (what a perfect model would say)."""
    match = _QUESTION.search(prompt)
    return str(int(match.group(1)) + int(match.group(2))) if match else "?"


def register_sums_env() -> Iterator[str]:
    """Register :class:`SumsEnv` under :data:`SUMS_ENV_ID`; unregister when done."""
    return registered_for_a_test(SUMS_ENV_ID, f"{__name__}:SumsEnv", ("alice", "bob"), "sums of two numbers",
                                 "Test environment of the runner tests.")


@pytest.fixture
def sums_env_id() -> Iterator[str]:
    yield from register_sums_env()
