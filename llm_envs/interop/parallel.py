"""PettingZoo ``ParallelEnv`` forms of the text environments.

Two forms, picked by :func:`parallel_env`:

* :class:`SimultaneousParallelEnv`, for environments that declare simultaneous cycles
  (``metadata["is_parallelizable"] = True``; :mod:`llm_envs.interop.hooks`): one parallel
  ``step`` plays one cycle, each action against the observation given at its start, with
  run-time checks of the promises (:class:`ParallelOrderError`) and a clean end mid-cycle.
* :class:`TurnBasedParallelEnv`, for strictly turn-based environments: PettingZoo's
  ``turn_based_aec_to_parallel`` with three fixes for PettingZoo 1.27.0 (``step`` after the
  episode returns five empty dicts, ``reset`` infos carry ``active_agent``, infos are copies).

Both accept any AEC environment built on :class:`~llm_envs.core.env.TextEnv`, bare or wrapped
(e.g. in a ``NumericView``), and pass :func:`pettingzoo.test.parallel_api_test`.
docs/interop.md ("The parallel API") has the fixes and the caveats of the turn-based form.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import turn_based_aec_to_parallel_wrapper

from llm_envs.interop.hooks import is_simultaneous

__all__ = [
    "ParallelOrderError",
    "SimultaneousParallelEnv",
    "TurnBasedParallelEnv",
    "parallel_env",
]


class ParallelOrderError(RuntimeError):
    """The AEC environment broke a condition of simultaneous cycles (the message says which)."""


def parallel_env(env: AECEnv | str, *, mode: str = "auto", **make_kwargs: Any) -> ParallelEnv:
    """The parallel form of a text environment.

    Args:
        env: An AEC text environment (bare or wrapped), or a registered id such as
            ``"llm/Debate-v0"`` (then ``make_kwargs`` go to :func:`llm_envs.make`).
        mode: ``"auto"`` (simultaneous if the environment declares it, else turn-based),
            ``"simultaneous"`` or ``"turn_based"``.
    """
    if isinstance(env, str):
        import llm_envs

        env = llm_envs.make(env, **make_kwargs)
    elif make_kwargs:
        raise TypeError("make_kwargs are only used with an environment id")
    if mode == "auto":
        mode = "simultaneous" if is_simultaneous(env) else "turn_based"
    if mode == "simultaneous":
        return SimultaneousParallelEnv(env)
    if mode == "turn_based":
        return TurnBasedParallelEnv(env)
    raise ValueError(f"mode must be 'auto', 'simultaneous' or 'turn_based', got {mode!r}")


class SimultaneousParallelEnv(ParallelEnv):
    """One parallel step = one cycle of an AEC environment whose cycles are simultaneous.

    Args:
        aec_env: The AEC environment.
        check: Verify at every step that each agent's observation did not change in mid-cycle
            (a string comparison of the text observations; cheap next to any LLM call).
        force: Accept an environment that does not declare ``is_parallelizable`` (the checks
            still run).
    """

    def __init__(self, aec_env: AECEnv, *, check: bool = True, force: bool = False):
        if not force and not is_simultaneous(aec_env):
            raise ValueError(
                f"{aec_env.unwrapped.metadata.get('name')} does not declare simultaneous cycles "
                "(metadata['is_parallelizable']); use TurnBasedParallelEnv, or force=True"
            )
        self.aec_env = aec_env
        self.check = check
        self.metadata = aec_env.metadata
        self.possible_agents = list(aec_env.possible_agents)
        self.agents: list[str] = []
        self.render_mode = getattr(aec_env, "render_mode", None)

    # ------------------------------------------------------------------ spaces and passthrough
    def observation_space(self, agent: str) -> spaces.Space:
        return self.aec_env.observation_space(agent)

    def action_space(self, agent: str) -> spaces.Space:
        return self.aec_env.action_space(agent)

    @property
    def unwrapped(self) -> AECEnv:
        return self.aec_env.unwrapped

    def render(self) -> Any:
        return self.aec_env.render()

    def close(self) -> None:
        self.aec_env.close()

    def state(self) -> Any:
        return self.aec_env.state()

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        aec = self.aec_env
        aec.reset(seed=seed, options=options)
        self.agents = list(aec.agents)
        observations = {agent: aec.observe(agent) for agent in self.agents}
        infos = {agent: dict(aec.infos[agent]) for agent in self.agents}
        return observations, infos

    def step(self, actions: dict[str, Any]):
        aec = self.aec_env
        if not aec.agents:
            self.agents = []
            return {}, {}, {}, {}, {}
        cycle = list(aec.agents)
        missing = [agent for agent in cycle if agent not in actions]
        if missing:
            raise KeyError(f"no action given for live agent(s) {missing}")
        text_env = aec.unwrapped
        seen = {agent: text_env.observe(agent) for agent in cycle} if self.check else {}
        rewards: dict[str, float] = defaultdict(float)
        # A cycle is played whole or not at all: an action that raises (a sandbox failure, an
        # action of the wrong type) after an earlier one was played puts the environment back
        # as it was before the cycle, so the same step can be sent again. (The first action
        # stayed played, its reward unreported, and every later step was out of order.)
        snapshot = text_env.clone() if len(cycle) > 1 and callable(getattr(text_env, "restore", None)) else None
        try:
            for agent in cycle:
                if not aec.agents or self._done(aec.agent_selection):
                    break  # the episode ended before the cycle did: later actions are not played
                if aec.agent_selection != agent:
                    raise ParallelOrderError(
                        f"expected {agent!r} to act next in the cycle {cycle}, but the environment "
                        f"selected {aec.agent_selection!r}: its agents do not act in cycles"
                    )
                if self.check and text_env.observe(agent) != seen[agent]:
                    raise ParallelOrderError(
                        f"the observation of {agent!r} changed in mid-cycle: it would see an action "
                        "of the same cycle, so this environment is not simultaneous"
                    )
                aec.step(actions[agent])
                for other, reward in aec.rewards.items():
                    rewards[other] += float(reward)
        except BaseException:
            if snapshot is not None:
                text_env.restore(snapshot)
            raise
        observations = {agent: aec.observe(agent) for agent in cycle}
        terminations = {agent: bool(aec.terminations[agent]) for agent in cycle}
        truncations = {agent: bool(aec.truncations[agent]) for agent in cycle}
        infos = {agent: dict(aec.infos[agent]) for agent in cycle}
        if not any(terminations.values()) and not any(truncations.values()):
            if aec.agent_selection != cycle[0] or list(aec.agents) != cycle:
                raise ParallelOrderError(
                    f"after the cycle {cycle} the environment selected {aec.agent_selection!r} "
                    "instead of starting the next cycle"
                )
        while aec.agents and self._done(aec.agent_selection):
            aec.step(None)  # PettingZoo's dead steps, on behalf of the user
        self.agents = list(aec.agents)
        return observations, {agent: rewards[agent] for agent in cycle}, terminations, truncations, infos

    def _done(self, agent: str) -> bool:
        return bool(self.aec_env.terminations[agent] or self.aec_env.truncations[agent])

    def __str__(self) -> str:
        return f"SimultaneousParallelEnv<{self.aec_env!s}>"


class TurnBasedParallelEnv(turn_based_aec_to_parallel_wrapper):
    """PettingZoo's ``turn_based_aec_to_parallel`` with the fixes listed in the module docstring.

    Args:
        aec_env: The AEC environment.
        active_agent_info: Add ``infos[agent]["active_agent"]`` (the agent to move next). Default:
            on, except over a ``NumericView`` (whose infos must stay numeric).
    """

    def __init__(self, aec_env: AECEnv, *, active_agent_info: bool | None = None):
        super().__init__(aec_env)
        if active_agent_info is None:
            from llm_envs.interop.numeric import NumericView

            active_agent_info = not _has_wrapper(aec_env, NumericView)
        self.active_agent_info = active_agent_info

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        observations, infos = super().reset(seed=seed, options=options)
        return observations, self._copy_infos(infos)

    def step(self, actions: dict[str, Any]):
        aec = self.aec_env
        if not self.agents:
            return {}, {}, {}, {}, {}
        agent = aec.agent_selection
        if agent not in actions:
            raise KeyError(f"no action given for {agent!r}, the agent to move")
        aec.step(actions[agent])
        rewards = {a: float(r) for a, r in aec.rewards.items()}
        terminations = {a: bool(v) for a, v in aec.terminations.items()}
        truncations = {a: bool(v) for a, v in aec.truncations.items()}
        infos = {a: dict(aec.infos[a]) for a in aec.agents}
        observations = {a: aec.observe(a) for a in aec.agents}
        while aec.agents and (aec.terminations[aec.agent_selection] or aec.truncations[aec.agent_selection]):
            aec.step(None)
        self.agents = list(aec.agents)
        return observations, rewards, terminations, truncations, self._copy_infos(infos)

    def _copy_infos(self, infos: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        copied = {agent: dict(info) for agent, info in infos.items()}
        if self.active_agent_info and self.aec_env.agents:
            for agent in copied:
                copied[agent]["active_agent"] = self.aec_env.agent_selection
        return copied

    def __str__(self) -> str:
        return f"TurnBasedParallelEnv<{self.aec_env!s}>"


def _has_wrapper(env: Any, wrapper_type: type) -> bool:
    while True:
        if isinstance(env, wrapper_type):
            return True
        inner = env.__dict__.get("env")
        if inner is None:
            return False
        env = inner
