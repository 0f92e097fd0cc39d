"""Shared helpers for the Coder–Tester and Reasoner–Tool tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

import sandboxes
from llm_envs.tasks import Problem, TaskSource


class ListSource(TaskSource):
    """A task source over a fixed list of problems (for hand-computed reward checks)."""

    name = "list"

    def __init__(
        self, problems: Sequence[Problem], *, has_golden_solutions: bool = True
    ) -> None:
        self.problems = list(problems)
        self.split = self.problems[0].split
        self.has_golden_solutions = has_golden_solutions

    def __len__(self) -> int:
        return len(self.problems)

    def get(self, index: int) -> Problem:
        return self.problems[index]


def play(
    env,
    policy: Callable[[object, str], str],
    *,
    seed: int = 0,
    options: dict | None = None,
) -> dict[str, float]:
    """Play one episode; return per-agent sums of the rewards PettingZoo reported."""
    env.reset(seed=seed, options=options)
    totals = {a: 0.0 for a in env.possible_agents}
    for agent in env.agent_iter(max_iter=1000):
        _, reward, terminated, truncated, _ = env.last()
        totals[agent] += reward
        env.step(None if terminated or truncated else policy(env, agent))
    return totals


def scripted(replies: dict[str, Sequence[str]]) -> Callable[[object, str], str]:
    """A policy replaying fixed replies per agent (the last reply repeats)."""
    counters = {agent: 0 for agent in replies}

    def policy(env, agent: str) -> str:
        sequence = replies[agent]
        reply = sequence[min(counters[agent], len(sequence) - 1)]
        counters[agent] += 1
        return reply

    return policy


@pytest.fixture(scope="session")
def sandbox():
    return sandboxes.shared_sandbox("auto")
