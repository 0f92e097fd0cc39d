"""Fixtures shared by the discussion-environment tests (Forum, Proposer-Solver-Judge, Debate)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

import pytest

from llm_envs.agents.base import ActRequest, Agent
from llm_envs.tasks import Problem, TaskSource


class ListSource(TaskSource):
    """A fixed list of problems (test data, not a stand-in for our own code)."""

    name = "list"

    def __init__(self, problems: list[Problem], split: str = "train") -> None:
        self.problems = problems
        self.split = split

    def __len__(self) -> int:
        return len(self.problems)

    def get(self, index: int) -> Problem:
        return self.problems[index]


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


Policy = Callable[[object, str], str]


def agent_policy(agent_impl: Agent) -> Policy:
    return lambda env, name: (
        agent_impl.act_batch([ActRequest(env.observe(name), name, env)])[0].text
    )


def play(
    env, policies: Mapping[str, Policy] | Policy, seed: int | None = None, *, reset: bool = True
):
    """Play to the end; return (per-agent PettingZoo reward sums, per-step (agent, reward) list)."""
    if reset:
        env.reset(seed=seed)
    totals = {a: 0.0 for a in env.possible_agents}
    for agent in env.agent_iter(max_iter=100_000):
        _, reward, terminated, truncated, _ = env.last()
        totals[agent] += reward
        if terminated or truncated:
            env.step(None)
            continue
        policy = policies[agent] if isinstance(policies, Mapping) else policies
        env.step(policy(env, agent))
    return totals


@pytest.fixture(autouse=True)
def _quiet_style_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
