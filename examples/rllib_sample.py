"""RLlib: sample episodes of a text environment with an RLlib ``MultiAgentEnvRunner``.

RLlib's ``PettingZooEnv`` wraps any AEC environment, text included, but its default RLModules
have no encoder for ``Text`` observations. Over :class:`~llm_envs.interop.NumericView` (``Box``
observation of character ids, ``Discrete`` actions, ``mask_in="info"``) the default PPO module
builds (with ``obs_dtype=np.float32``: its encoders do not cast), and an environment runner
samples episodes in this process: no Ray cluster is started.

The default module does not read the legal-move mask, so it may pick an index outside the
menu; the view plays the empty action for it, which the environment scores as a malformed
answer. (For masking, RLlib's action-masking example module reads a ``Dict`` observation with an
``action_mask`` key: ``NumericView(..., mask_in="observation")`` provides one.)

Run (``ray[rllib]`` pins ``gymnasium==1.2.2``, so install it in its own environment)::

    pip install 'ray[rllib]==2.60.0' && python examples/rllib_sample.py --episodes 4
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv

import llm_envs
from llm_envs.interop import NumericView


class TextEnvForRLlib(PettingZooEnv):
    """RLlib's PettingZoo wrapper over the numeric view of a registered text environment.

    ``env_config``: ``{"env_id": "llm/Signalling-v0", "obs_length": 256, **env_kwargs}``.
    """

    def __init__(self, env_config: dict[str, Any] | None = None):
        env_config = dict(env_config or {})
        env_id = env_config.pop("env_id", "llm/Signalling-v0")
        obs_length = env_config.pop("obs_length", 256)
        text_env = llm_envs.make(env_id, **env_config)
        # RLlib's default encoders do not cast: give them the ids as float32.
        view = NumericView(text_env, mask_in="info", obs_length=obs_length, obs_dtype=np.float32)
        super().__init__(view)


def make_runner(env_id: str = "llm/Signalling-v0", obs_length: int = 256) -> MultiAgentEnvRunner:
    """A local environment runner; all agents share one default PPO module."""
    config = (
        PPOConfig()
        .environment(TextEnvForRLlib, env_config={"env_id": env_id, "obs_length": obs_length})
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: "shared")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
    )
    return MultiAgentEnvRunner(config=config)


def sample(runner: MultiAgentEnvRunner, episodes: int) -> list:
    """``episodes`` complete episodes (RLlib ``MultiAgentEpisode`` objects)."""
    return runner.sample(num_episodes=episodes, random_actions=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="llm/Signalling-v0")
    parser.add_argument("--episodes", type=int, default=4)
    args = parser.parse_args(argv)
    runner = make_runner(args.env)
    episodes = sample(runner, args.episodes)
    for episode in episodes:
        returns = {agent: round(float(e.get_return()), 3) for agent, e in episode.agent_episodes.items()}
        print(f"episode {episode.id_[:8]}: {len(episode)} env steps, returns {returns}")
    runner.stop()


if __name__ == "__main__":
    main()
