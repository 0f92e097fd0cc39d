"""Our environments as `verifiers` environments (PrimeIntellect's library, classic API).

>>> from llm_envs.interop.verifiers import load_environment
>>> vf_env = load_environment("llm/Sudoku-v0", size=4)            # options as in llm_envs.make
>>> vf_env = load_environment("llm/Debate-v0", agent="debater_0", others="reference")

or from verifiers' own command line (the module is the "environment"; ``-a`` its arguments)::

    vf-eval llm_envs.interop.verifiers -a '{"env": "llm/Signalling-v0"}' -m MODEL -b URL/v1 -n 8

One agent is the model under evaluation or training; every other agent is played by a fixed
agent (``others``), as ``env.opponents`` does in ``llm-train``. Each dataset row is one episode
(its seed; the agent's first observation as the prompt); the rubric is our reward, the sum of
the rewards credited to the trained agent's records. A sandbox failure ends the rollout with
verifiers' ``InfraError``, never a score. Needs ``verifiers`` 0.2.1 in its own virtual
environment (its pins conflict with the serve extra): docs/interop.md ("verifiers").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import llm_envs
from llm_envs.agents.base import play_fixed_agents
from llm_envs.core.errors import InfrastructureError

#: Seeds of the evaluation rows start here, far from the training rows' seeds.
EVAL_SEED_OFFSET = 1_000_000


def _fixed_agents(env: Any, trained: str, others: str | Mapping[str, str]) -> dict[str, Any]:
    from llm_envs.agents.spec import build_agent

    specs = {a: others for a in env.possible_agents if a != trained} if isinstance(others, str) else dict(others)
    missing = sorted(set(env.possible_agents) - {trained} - set(specs))
    if missing:
        raise ValueError(f"others names no agent for {missing}; give a spec for every agent but {trained!r}")
    unknown = sorted(set(specs) - set(env.possible_agents))
    if unknown or trained in specs:
        raise ValueError(f"others names {sorted(set(specs) & ({trained} | set(unknown)))}: not a fixed agent of {env.possible_agents}")
    return {agent: build_agent(spec) for agent, spec in specs.items()}


def _advance(env: Any, trained: str, fixed: Mapping[str, Any]) -> None:
    """Let the fixed agents move (and dead steps happen) until ``trained`` is to act or the
    episode is over; a fixed agent that produced no action raises ``AgentError`` (an
    :class:`InfrastructureError`), never plays an empty move."""
    play_fixed_agents(env, fixed, until=trained)


def _messages(observation: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": observation["instruction"]}, {"role": "user", "content": observation["prompt"]}]


def _user(vf: Any, content: str) -> Any:
    """A user message in verifiers' own type where it has one (raw dicts cost it a validation)."""
    user_message = getattr(vf, "UserMessage", None)
    return user_message(content=content) if user_message is not None else {"role": "user", "content": content}


def _text(message: Any) -> str:
    """The text of a chat message (a string, or a list of content parts)."""
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", message)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        text = part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)
        parts.append(text or "")
    return "".join(parts)


def load_environment(
    env_id: str | None = None,
    *,
    env: str | None = None,
    imports: Sequence[str] = (),
    agent: str | None = None,
    others: str | Mapping[str, str] = "reference",
    num_train_examples: int = 64,
    num_eval_examples: int = 16,
    seed: int = 0,
    max_turns: int = 64,
    **options: Any,
) -> Any:
    """A verifiers ``MultiTurnEnv`` playing ``env_id`` (see the module docstring).

    Args:
        env_id: A registered environment id (default ``llm/Signalling-v0``).
        env: The same, under the name ``vf-eval -a '{"env": ...}'`` can pass (verifiers' own
            loader takes ``env_id`` for the module's name).
        imports: Modules to import first (a third party's package that registers environments).
        agent: The agent the model plays (default: the environment's first possible agent).
        others: Who plays every other agent: one spec for all, or agent → spec.
        num_train_examples, num_eval_examples: Episodes (rows) of the two datasets; training
            rows use seeds ``seed ..``, evaluation rows ``seed + EVAL_SEED_OFFSET ..``.
        seed: The first seed.
        max_turns: The most model turns per rollout (verifiers stops the rollout there).
        **options: Keyword options of ``llm_envs.make``.
    """
    import importlib

    try:
        import verifiers as vf
    except ImportError as exc:
        raise ImportError(
            "llm_envs.interop.verifiers needs the verifiers package (0.2.1), which lives in its own "
            "environment: run `make verifiers-venv` and use .venv-verifiers/bin/python (docs/interop.md)"
        ) from exc
    from datasets import Dataset

    if env_id is not None and env is not None and env_id != env:
        raise ValueError(f"env_id={env_id!r} and env={env!r}: give one")
    env_id = env_id or env or "llm/Signalling-v0"
    for module in imports:
        importlib.import_module(module)
    probe = llm_envs.make(env_id, **options)
    trained = agent if agent is not None else probe.possible_agents[0]
    if trained not in probe.possible_agents:
        raise ValueError(f"{env_id} has no agent {trained!r}; its agents: {probe.possible_agents}")
    fixed = _fixed_agents(probe, trained, others)

    def rows(first_seed: int, count: int) -> list[dict[str, Any]]:
        out = []
        for s in range(first_seed, first_seed + count):
            # A fresh instance per row, as each rollout gets one: episode ids (which seed the
            # random agents' decisions) then match between the row and its replay.
            env = llm_envs.make(env_id, **options)
            env.reset(seed=s)
            _advance(env, trained, fixed)
            if not env.episode_over and env.agents:  # else the trained agent never moved: no row
                out.append({"prompt": _messages(env.observe(trained)), "answer": "", "info": {"seed": s, "llm_env": env_id}})
            env.close()
        return out

    train_rows, eval_rows = rows(seed, num_train_examples), rows(seed + EVAL_SEED_OFFSET, num_eval_examples)
    probe.close()
    if not train_rows and not eval_rows:
        raise ValueError(f"in no episode of {env_id} did {trained!r} get to move")

    async def episode_reward(state: Any, **kwargs: Any) -> float:
        """The sum of the rewards credited to the trained agent's records."""
        return float(state.get("llm_envs", {}).get("reward", 0.0))

    async def success(state: Any, **kwargs: Any) -> float:
        return float(state.get("llm_envs", {}).get("metrics", {}).get("success", 0.0))

    rubric = vf.Rubric(funcs=[episode_reward], weights=[1.0])
    rubric.add_metric(success)

    class LLMEnvsEnv(vf.MultiTurnEnv):
        """One llm-envs environment instance per rollout (kept out of the state, which
        verifiers may copy or save)."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.live: dict[str, Any] = {}

        async def setup_state(self, state: Any) -> Any:
            env = llm_envs.make(env_id, **options)
            env.reset(seed=int(state["info"]["seed"]))
            try:
                _advance(env, trained, _fixed_agents(env, trained, others))
            except InfrastructureError as exc:
                raise vf.InfraError(str(exc)) from exc
            if [m["content"] for m in _messages(env.observe(trained))] != [_text(m) for m in list(state["prompt"])[-2:]]:
                raise vf.Error(f"{env_id} seed {state['info']['seed']} replayed to another first prompt")
            self.live[state["trajectory_id"]] = env
            state["llm_envs"] = {"reward": 0.0, "metrics": {}, "episode_id": env.episode_id}
            return state

        async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
            env = self.live[state["trajectory_id"]]
            try:
                env.step(_text(messages[-1]))
                _advance(env, trained, _fixed_agents(env, trained, others))
            except InfrastructureError as exc:
                raise vf.InfraError(str(exc)) from exc
            summary = state["llm_envs"]
            summary["reward"] = env.agent_rewards()[trained]
            if env.episode_over or not env.agents:
                summary["metrics"] = env.episode_metrics()
                summary["transcript"] = env.transcript()
                final = [_user(vf, f"The episode is over (success {summary['metrics'].get('success', 0.0):g}).")]
                state["final_env_response"] = final
                return final
            return [_user(vf, env.observe(trained)["prompt"])]

        @vf.cleanup
        async def close_episode(self, state: Any) -> None:
            env = self.live.pop(state.get("trajectory_id"), None)
            if env is not None:
                env.close()

    return LLMEnvsEnv(
        dataset=Dataset.from_list(train_rows) if train_rows else None,
        eval_dataset=Dataset.from_list(eval_rows) if eval_rows else None,
        rubric=rubric,
        max_turns=max_turns,
        # What verifiers' env server (vf-eval's default mode) calls to build the environment in
        # its workers: load_environment(env_id, **env_args), env_id being this module. Every
        # argument goes in env_args, the environment's id as ``env`` (``env_id`` is verifiers'
        # own positional argument: passing it again was a "multiple values" crash loop).
        env_id=__name__,
        env_args=_rebuild_args(env_id, imports, trained, others, num_train_examples, num_eval_examples, seed,
                               max_turns, options),
    )


def _rebuild_args(env_id: str, imports: Sequence[str], agent: str, others: str | Mapping[str, str],
                  num_train_examples: int, num_eval_examples: int, seed: int, max_turns: int,
                  options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments with which :func:`load_environment` builds the same environment
    again (as verifiers' env-server workers do); JSON-serialisable."""
    return {
        "env": env_id, "imports": list(imports), "agent": agent,
        "others": others if isinstance(others, str) else dict(others),
        "num_train_examples": num_train_examples, "num_eval_examples": num_eval_examples, "seed": seed,
        "max_turns": max_turns, **options,
    }
