"""Helpers shared by the environment tests: playing an episode, and a fixed-list task source."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from llm_envs.agents.base import ActRequest, Agent
from llm_envs.tasks import Problem, TaskSource

#: ``policy(env, agent) -> action text``.
Policy = Callable[[Any, str], str]


class ListSource(TaskSource):
    """A task source over a fixed list of problems (test data, not a stand-in for our own code);
    its split is that of the first problem."""

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


def agent_policy(agent_impl: Agent) -> Policy:
    """The policy that asks ``agent_impl`` for each action, as the runner would."""
    return lambda env, name: (
        agent_impl.act_batch([ActRequest(env.observe(name), name, env)])[0].text
    )


def play(
    env,
    policy: Mapping[str, Policy] | Policy,
    seed: int | None = None,
    options: dict | None = None,
    *,
    reset: bool = True,
) -> dict[str, float]:
    """Play to the end of the episode, dead steps included (after ``reset(seed, options)``
    unless ``reset=False``); return per-agent sums of the rewards PettingZoo reported.

    ``policy`` is one policy for every agent or a mapping agent -> policy.
    """
    if reset:
        env.reset(seed=seed, options=options)
    totals = {a: 0.0 for a in env.possible_agents}
    for agent in env.agent_iter(max_iter=100_000):
        _, reward, terminated, truncated, _ = env.last()
        totals[agent] += reward
        if terminated or truncated:
            env.step(None)
            continue
        acting = policy[agent] if isinstance(policy, Mapping) else policy
        env.step(acting(env, agent))
    return totals


def registered_for_a_test(env_id: str, entry_point: str, agents: Sequence[str], task: str,
                          description: str) -> Iterator[str]:
    """Register a test environment, yield its id, unregister it (a generator for fixtures):
    registered only while a test runs, it never joins the suites parametrized over the registry."""
    from pettingzoo.env_registry.registration import aec_registry

    import llm_envs.registry as registry

    registry.register_env(env_id, entry_point, agents=tuple(agents), task=task, description=description)
    try:
        yield env_id
    finally:
        registry._ENTRIES.pop(env_id, None)
        aec_registry.pop(env_id, None)


# Toy problems shared by the Coder–Tester / Reasoner–Tool reward tests.
#: ``add(a, b)`` with four golden tests (a function-style code problem).
ADD = Problem(
    id="toy/add",
    prompt='def add(a, b):\n    """Return a + b."""\n',
    split="train",
    solution="def add(a, b):\n    return a + b\n",
    tests=(
        "assert add(1, 2) == 3",
        "assert add(0, 0) == 0",
        "assert add(-1, 1) == 0",
        "assert add(2, 2) == 4",
    ),
    style="function",
    entry_point="add",
)
#: "What is 3 × 4?" (an answer-style math problem).
TWELVE = Problem(id="toy/12", prompt="What is 3 × 4?", split="train", answer="12", style="answer")
