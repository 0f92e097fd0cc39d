"""Shared helpers for the Coder–Tester and Reasoner–Tool tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

import sandboxes
from tests.envs import helpers


def play(
    env,
    policy: Callable[[object, str], str],
    *,
    seed: int = 0,
    options: dict | None = None,
) -> dict[str, float]:
    """:func:`tests.envs.helpers.play`, from seed 0 unless told otherwise."""
    return helpers.play(env, policy, seed, options)


def components(env, agent: str, turn: int = 0) -> dict[str, float]:
    """The reward components of ``agent``'s record of ``turn``."""
    (record,) = [r for r in env.records if r.agent == agent and r.turn == turn]
    return record.reward_components


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
