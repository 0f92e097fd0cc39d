"""Scripted agents that need no model: the reference agent and the random agent."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

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

    def action_probabilities(self, requests: Sequence[ActRequest]) -> list[dict[str, float] | None]:
        """The environment's ``reference_policy(agent)`` where it has one (mixed strategies such
        as a CFR equilibrium), else None for that request."""
        return [_env_policy(r, "reference_policy") for r in requests]


class RandomAgent(Agent):
    """Plays :meth:`TextEnv.random_action`: a random but well-formed action, seeded.

    Args:
        seed: Seed of the agent's generator.
        per_decision_seed: If False (the default), every decision draws from one generator
            stream, so actions depend on the order in which decisions arrive. If True, each
            decision gets its own generator seeded from ``(seed, episode id, agent, number of
            records so far)``: an episode's random actions then depend only on the episode,
            never on how many other episodes ran beside it or in which order, which makes
            batched, concurrent and resumed runs give identical results. (Two clones of the
            same episode state then draw the same action.)
    """

    name = "random"

    def __init__(self, seed: int | None = 0, *, per_decision_seed: bool = False) -> None:
        self.seed = seed
        self.per_decision_seed = per_decision_seed
        self.rng = np.random.default_rng(seed)
        # Without a seed, per-decision generators still need one fixed key for the run.
        self._key_seed = int(seed) if seed is not None else int(np.random.SeedSequence().entropy % 2**63)

    def settings(self) -> dict[str, Any]:
        """The base settings with the seed and how it is drawn from (they decide every action:
        a resumed tournament with another seed mixed two agents' games under one name)."""
        return {**super().settings(), "seed": self.seed, "per_decision_seed": self.per_decision_seed}

    def _generator_for(self, request: ActRequest) -> np.random.Generator:
        if not self.per_decision_seed:
            return self.rng
        env = request.env
        # crc32 is stable across processes (unlike hash() of a str).
        key = [
            self._key_seed,
            zlib.crc32(str(getattr(env, "episode_id", "")).encode("utf-8")),
            zlib.crc32(request.agent.encode("utf-8")),
            len(getattr(env, "records", ())),
        ]
        return np.random.default_rng(key)

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        outputs = []
        for request in requests:
            if request.env is None:
                raise ValueError("RandomAgent needs the live environment in ActRequest.env")
            text = request.env.random_action(request.agent, self._generator_for(request))
            outputs.append(AgentOutput(text=text))
        return outputs

    def action_probabilities(self, requests: Sequence[ActRequest]) -> list[dict[str, float] | None]:
        """The environment's ``random_policy(agent)`` where it has one (uniform over legal
        moves), else None for that request."""
        return [_env_policy(r, "random_policy") for r in requests]


def _env_policy(request: ActRequest, method: str) -> dict[str, float] | None:
    policy = getattr(request.env, method, None) if request.env is not None else None
    return policy(request.agent) if callable(policy) else None
