"""Scripted debaters that exercise every reward path of ``llm/Debate-v0``.

A :class:`DebateScriptedAgent` follows a *plan*: one letter per turn, ``R`` (the true answer),
``W`` (a wrong one) or ``N`` (no final answer); the last letter repeats. It reads the hidden
true answer through :meth:`~llm_envs.envs.debate.env.DebateEnv.scripted_action`. For example
``agent_0="WRR"`` and ``agent_1="RRW"`` trigger +α1 (agent_0 persuaded at turn 1), −β1 (agent_0's
turn-1 answer while the other flips to wrong) and −α1 (agent_1 at turn 2) in one episode.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_envs.agents.base import ActRequest, Agent, AgentOutput


class DebateScriptedAgent(Agent):
    """Answers right (``R``), wrong (``W``) or not at all (``N``) per turn, as ``plan`` says."""

    def __init__(self, plan: str = "R") -> None:
        if not plan or any(letter not in "RWNrwn" for letter in plan):
            raise ValueError(f"a plan is a non-empty string of R, W and N letters, got {plan!r}")
        self.plan = plan.upper()
        self.name = f"debate-scripted({self.plan})"

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        outputs = []
        for request in requests:
            if request.env is None:
                raise ValueError("DebateScriptedAgent needs the live environment in ActRequest.env")
            text = request.env.scripted_action(request.agent, self.plan)  # type: ignore[attr-defined]
            outputs.append(AgentOutput(text=text))
        return outputs
