"""Fixtures shared by the discussion-environment tests (Forum, Proposer-Solver-Judge, Debate)."""

from __future__ import annotations

import warnings

import pytest

from llm_envs.tasks import Problem
from tests.envs.helpers import ListSource


def math_problems(count: int = 12) -> list[Problem]:
    return [
        Problem(
            id=f"sum/{k}",
            prompt=f"What is {k} + {2 * k + 5}?",
            split="train",
            answer=str(3 * k + 5),
        )
        for k in range(count)
    ]


@pytest.fixture
def math_source() -> ListSource:
    return ListSource(math_problems())


@pytest.fixture
def one_problem_source() -> ListSource:
    return ListSource([Problem(id="p", prompt="What is 6 times 7?", split="train", answer="42")])


@pytest.fixture(autouse=True)
def _quiet_style_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
