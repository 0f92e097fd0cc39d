"""Scripted agents that need no model: the reference agent and the random agent."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from llm_envs.agents.base import ActRequest, Agent, AgentOutput


class ReferenceAgent(Agent):
    """Plays :meth:`TextEnv.reference_action`: the environment's own scripted solution.

    Reference agents may read hidden state (the golden solution, the true answer); they prove
    that an environment is solvable and that its rewards are wired right.
    """

    name = "reference"

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        outputs = []
        for request in requests:
            if request.env is None:
                raise ValueError("ReferenceAgent needs the live environment in ActRequest.env")
            outputs.append(AgentOutput(text=request.env.reference_action(request.agent)))
        return outputs


class RandomAgent(Agent):
    """Plays :meth:`TextEnv.random_action`: a random but well-formed action, seeded."""

    name = "random"

    def __init__(self, seed: int | None = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        outputs = []
        for request in requests:
            if request.env is None:
                raise ValueError("RandomAgent needs the live environment in ActRequest.env")
            outputs.append(AgentOutput(text=request.env.random_action(request.agent, self.rng)))
        return outputs
