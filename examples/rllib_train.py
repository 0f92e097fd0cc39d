"""RLlib: train PPO (one module per agent) on a text environment through the numeric view.

RLlib's ``PettingZooEnv`` wraps any AEC environment, text included, but its default RLModules
have no encoder for ``Text`` observations. Over :class:`~llm_envs.interop.NumericView` with
``observation="state"`` (the environment's state tensor, a float32 ``Box``), ``mask_in="info"``
(a plain observation) and ``Discrete`` actions over the fixed move catalog, the default PPO
module builds, and RLlib trains it. With the text observation instead, pass
``obs_dtype=np.float32``: RLlib's default encoders do not cast the ids.

Delayed credit needs nothing here: RLlib's ``PettingZooEnv`` reads each agent's reward through
PettingZoo's ``last()``, the sum of what the agent received since its previous move, delivered
at its next move or its dead step; so Signalling's speaker gets the team reward of its message.

The default module does not read the legal-move mask, so it may pick an index that is not legal
now; the view plays the empty action for it, which the environment scores as a malformed answer.
(For Signalling every symbol is legal for the agent to move. For masking, RLlib's action-masking
example module reads a ``Dict`` observation with an ``action_mask`` key:
``NumericView(..., mask_in="observation")`` provides one.)

Run (``ray[rllib]`` pins ``gymnasium==1.2.2``, so install it in its own environment)::

    pip install 'ray[rllib]==2.60.0' && python examples/rllib_train.py --iterations 10
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv

import llm_envs
from llm_envs.interop import NumericView

#: The environments' default training settings: team reward only for Signalling.
PRESETS: dict[str, dict[str, Any]] = {"llm/Signalling-v0": {"speaker_local_weight": 0.0}}


class TextEnvForRLlib(PettingZooEnv):
    """RLlib's PettingZoo wrapper over the numeric view of a registered text environment.

    ``env_config``: ``{"env_id": "llm/Signalling-v0", "observation": "state", "obs_length": 256,
    **env_kwargs}``.
    """

    def __init__(self, env_config: dict[str, Any] | None = None):
        env_config = dict(env_config or {})
        env_id = env_config.pop("env_id", "llm/Signalling-v0")
        observation = env_config.pop("observation", "state")
        obs_length = env_config.pop("obs_length", 256)
        text_env = llm_envs.make(env_id, **env_config)
        # RLlib's default encoders do not cast: text ids go as float32 (state tensors already are).
        view = NumericView(
            text_env, observation=observation, mask_in="info", obs_length=obs_length, obs_dtype=np.float32
        )
        super().__init__(view)


def make_config(env_id: str = "llm/Signalling-v0", observation: str = "state", **env_kwargs: Any) -> PPOConfig:
    """PPO with one module per agent (``policy_mapping_fn`` maps each agent to its own id);
    sampling in this process (no Ray workers)."""
    agents = list(llm_envs.entry(env_id).agents) if env_kwargs.get("agents") != "single" else ["solver"]
    return (
        PPOConfig()
        .environment(TextEnvForRLlib, env_config={"env_id": env_id, "observation": observation, **env_kwargs})
        .multi_agent(policies=set(agents), policy_mapping_fn=lambda agent_id, *args, **kwargs: agent_id)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
        .training(lr=3e-3, train_batch_size_per_learner=512, minibatch_size=128, num_epochs=6, gamma=0.9)
    )


def make_runner(env_id: str = "llm/Signalling-v0", obs_length: int = 256) -> MultiAgentEnvRunner:
    """A local environment runner over the text observation (collection only)."""
    config = make_config(env_id, observation="text", obs_length=obs_length)
    return MultiAgentEnvRunner(config=config)


def sample(runner: MultiAgentEnvRunner, episodes: int) -> list:
    """``episodes`` complete episodes (RLlib ``MultiAgentEpisode`` objects)."""
    return runner.sample(num_episodes=episodes, random_actions=False)


def train(env_id: str, iterations: int, **env_kwargs: Any) -> tuple[Any, list[float]]:
    """Train PPO for ``iterations`` iterations; returns the algorithm and the mean episode
    return after each iteration (summed over agents)."""
    if not ray.is_initialized():
        # A small local Ray (the learner and the sampling run in this process's workers).
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    algo = make_config(env_id, **env_kwargs).build_algo()
    curve = []
    for _ in range(iterations):
        result = algo.train()
        curve.append(float(result["env_runners"]["episode_return_mean"]))
    return algo, curve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="llm/Signalling-v0")
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args(argv)
    algo, curve = train(args.env, args.iterations, **PRESETS.get(args.env, {}))
    print(f"{args.env}: mean episode return per iteration: {[round(r, 2) for r in curve]}")
    algo.stop()


if __name__ == "__main__":
    main()
