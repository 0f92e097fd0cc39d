"""PettingZoo's parallel API on the text environments, with no other library.

``parallel_env`` picks the form: a debate turn is simultaneous (every agent answers against the
previous turns only), so one ``step`` takes every agent's answer; a puzzle is turn-based, so one
``step`` plays the action of the agent whose turn it is (``infos[agent]["active_agent"]``) and
ignores the others. ``pettingzoo.make("parallel", "llm/Debate-v0")`` gives the same object once
``llm_envs.interop`` is imported.

Run::

    python examples/pettingzoo_parallel.py --env llm/Signalling-v0
    python examples/pettingzoo_parallel.py --env llm/Debate-v0     # needs its task source
"""

from __future__ import annotations

import argparse

from pettingzoo import ParallelEnv

from llm_envs.interop import parallel_env


def play(env: ParallelEnv, seed: int = 0) -> dict[str, float]:
    """One episode with the scripted reference actions; returns each agent's reward sum."""
    observations, infos = env.reset(seed=seed)
    text_env = env.unwrapped  # the text environment: reference actions, records, metrics
    totals = dict.fromkeys(env.possible_agents, 0.0)
    while env.agents:
        # Text actions for everyone; a turn-based form uses only the active agent's.
        actions = {}
        for agent in env.agents:
            active = infos[agent].get("active_agent", agent)
            actions[agent] = text_env.reference_action(agent) if active == agent else ""
        observations, rewards, terminations, truncations, infos = env.step(actions)
        for agent, reward in rewards.items():
            totals[agent] += reward
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="llm/Signalling-v0")
    args = parser.parse_args(argv)
    env = parallel_env(args.env)
    print(f"{args.env}: {type(env).__name__}")
    print("reward sums:", play(env))
    print("metrics:", env.unwrapped.episode_metrics())


if __name__ == "__main__":
    main()
