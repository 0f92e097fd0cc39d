"""Tianshou: collect episodes of a text environment with Tianshou's ``Collector``.

Tianshou's ``PettingZooEnv`` turns an AEC environment into a single-agent-style one whose
observation is ``{"agent_id", "obs", "mask"}``; it needs identical spaces for all agents and
reads the legal-move mask from ``obs["action_mask"]``. :class:`~llm_envs.interop.NumericView`
gives exactly that: character ids as the observation and a ``Discrete`` action over the
environment's legal moves (here the symbols of ``llm/Signalling-v0``).

The first agent is played by a DQN policy (a small Q-network over the character ids, untrained:
plug in Tianshou's trainer to learn), the others by Tianshou's masked random policy.

Run::

    python examples/tianshou_collect.py --env llm/Signalling-v0 --episodes 8

Needs ``pip install 'llm-envs[interop]'`` (tianshou).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import torch
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.multiagent.marl import MultiAgentPolicy
from tianshou.algorithm.random import MARLRandomDiscreteMaskedOffPolicyAlgorithm
from tianshou.data import Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv, PettingZooEnv
from tianshou.utils.net.common import Net

import llm_envs
from llm_envs.interop import NumericView


def make_env(env_id: str = "llm/Signalling-v0", obs_length: int = 256, **env_kwargs) -> PettingZooEnv:
    """A registered text environment, as Tianshou's ``PettingZooEnv`` over the numeric view."""
    return PettingZooEnv(NumericView(llm_envs.make(env_id, **env_kwargs), obs_length=obs_length))


def build_policy(env: PettingZooEnv) -> MultiAgentPolicy:
    """DQN for the first agent, masked random play for the others."""
    obs_length = env.observation_space["observation"].shape[0]
    n_actions = env.action_space.n
    q_network = Net(state_shape=obs_length, action_shape=n_actions, hidden_sizes=[64])
    policies = {
        agent: MARLRandomDiscreteMaskedOffPolicyAlgorithm(env.action_space).policy
        for agent in env.agents
    }
    policies[env.agents[0]] = DiscreteQLearningPolicy(
        model=q_network, action_space=env.action_space, eps_inference=0.1
    )
    return MultiAgentPolicy(policies)


def collect(make: Callable[[], PettingZooEnv], n_episodes: int = 8, num_envs: int = 2, seed: int = 0):
    """Collect ``n_episodes`` episodes from ``num_envs`` environments; return Tianshou's stats."""
    np.random.seed(seed)  # Tianshou's random policy draws from NumPy's global generator
    torch.manual_seed(seed)
    envs = DummyVectorEnv([make for _ in range(num_envs)])
    envs.seed(seed)
    policy = build_policy(make())
    buffer = VectorReplayBuffer(total_size=2_000, buffer_num=num_envs)
    collector = Collector(policy, envs, buffer)
    stats = collector.collect(n_episode=n_episodes, reset_before_collect=True)
    envs.close()
    return stats, buffer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="llm/Signalling-v0")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--num-envs", type=int, default=2)
    args = parser.parse_args(argv)
    stats, buffer = collect(lambda: make_env(args.env), args.episodes, args.num_envs)
    returns = stats.returns  # one row per episode, one column per agent
    print(f"{args.env}: {stats.n_collected_episodes} episodes, {stats.n_collected_steps} steps")
    print(f"mean return per agent: {np.round(returns.mean(axis=0), 3).tolist()}")
    print(f"replay buffer: {len(buffer)} transitions, obs shape {buffer.obs.obs.shape[1:]}")


if __name__ == "__main__":
    main()
