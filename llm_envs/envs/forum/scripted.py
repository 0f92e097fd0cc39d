"""Scripted forum members that exercise every reward path of ``llm/Forum-v0``.

Each :class:`ForumScriptedAgent` plays whatever role the schedule gives it with a fixed
behaviour per role, reading the environment's hidden state (the true answer) through
:meth:`~llm_envs.envs.forum.env.ForumEnv.scripted_action`. Mix them in one pool to reach each
reward: an honest pool earns solver 1 / evaluator 0 / scorer 0; a ``solver="wrong"`` member with
an honest scorer gives solver 0 / evaluator 1; ``scorer="lenient"`` gives 0.5 / 0.5;
``scorer="garbage"`` gives the −1 format penalty (and 0 to solver and evaluator).

>>> agents = {name: ForumScriptedAgent() for name in env.possible_agents}          # doctest: +SKIP
>>> agents["agent_1"] = ForumScriptedAgent(solver="wrong", scorer="garbage")        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_envs.agents.base import ActRequest, Agent, AgentOutput


class ForumScriptedAgent(Agent):
    """A forum member with a fixed behaviour per role (see ``ForumEnv.scripted_action``).

    Args:
        solver: ``"correct"``, ``"wrong"`` or ``"unboxed"``.
        critic: ``"honest"`` (finds the flaw of a wrong solution), ``"misses"`` (never finds
            one) or ``"harsh"`` (always claims one).
        scorer: ``"honest"``, ``"lenient"`` (always 2), ``"garbage"`` (no tag) or
            ``"invalid"`` (an out-of-range score).
    """

    def __init__(
        self, solver: str = "correct", critic: str = "honest", scorer: str = "honest"
    ) -> None:
        self.behaviour = {"solver": solver, "critic": critic, "scorer": scorer}
        self.name = f"forum-scripted({solver},{critic},{scorer})"

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        outputs = []
        for request in requests:
            if request.env is None:
                raise ValueError("ForumScriptedAgent needs the live environment in ActRequest.env")
            text = request.env.scripted_action(request.agent, **self.behaviour)  # type: ignore[attr-defined]
            outputs.append(AgentOutput(text=text))
        return outputs
