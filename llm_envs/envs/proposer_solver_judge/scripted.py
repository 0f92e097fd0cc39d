"""Scripted roles that exercise every reward path of ``llm/ProposerSolverJudge-v0``.

A :class:`PSJScriptedAgent` plays one fixed behaviour for whichever role it is asked to act
as, through :meth:`~llm_envs.envs.proposer_solver_judge.env.ProposerSolverJudgeEnv.scripted_action`
(which reads hidden state: the true answer of known questions). Examples:

* ``PSJScriptedAgent()`` everywhere: the reference play (proposer 2/3, solver 1, judge 1);
* ``PSJScriptedAgent(proposer="reuse")``: re-proposes a pool question (the pool does not grow);
* ``PSJScriptedAgent(solver="wrong")`` with an honest judge: solver 0.5, proposer difficulty 1;
* ``PSJScriptedAgent(judge="garbage")``: judge format 0, neutral V = 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_envs.agents.base import ActRequest, Agent, AgentOutput


class PSJScriptedAgent(Agent):
    """Fixed behaviours per role; see ``ProposerSolverJudgeEnv.scripted_action``.

    Args:
        proposer: ``"fresh"``, ``"reuse"``, ``"multi_tag"`` or ``"no_tag"``.
        solver: ``"correct"``, ``"wrong"``, ``"multi_tag"`` or ``"no_tag"``.
        judge: ``"honest"``, ``"generous"``, ``"harsh"``, ``"multi_tag"`` or ``"garbage"``.
    """

    def __init__(
        self, proposer: str = "fresh", solver: str = "correct", judge: str = "honest"
    ) -> None:
        self.behaviour = {"proposer": proposer, "solver": solver, "judge": judge}
        self.name = f"psj-scripted({proposer},{solver},{judge})"

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        outputs = []
        for request in requests:
            if request.env is None:
                raise ValueError("PSJScriptedAgent needs the live environment in ActRequest.env")
            text = request.env.scripted_action(request.agent, **self.behaviour)  # type: ignore[attr-defined]
            outputs.append(AgentOutput(text=text))
        return outputs
