"""SuperSuit: preprocess the numeric view and vectorise it the way CleanRL's PettingZoo scripts do.

SuperSuit's wrappers need ``Box``/``Discrete`` spaces; text makes them fail. Over
:class:`~llm_envs.interop.NumericView` with ``mask_in="info"`` (a plain ``Box`` observation; the
legal-move mask in ``infos[agent]["action_mask"]``) they work:

1. ``parallel_env(view)``: the PettingZoo parallel form (turn-based here: each step plays the
   action of the agent to move; the others' actions are ignored);
2. ``dtype_v0`` + ``normalize_obs_v0``: ids to floats in ``[0, 1]``;
3. ``frame_stack_v1``: the last two observations side by side;
4. ``pettingzoo_env_to_vec_env_v1`` + ``concat_vec_envs_v1``: agents × copies as one Gymnasium
   vector environment (parameter sharing, as in CleanRL's ``ppo_pettingzoo_ma_atari.py``).

Run::

    python examples/supersuit_vector.py --env llm/Signalling-v0 --steps 20

Needs ``pip install 'llm-envs[interop]'`` (supersuit).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import supersuit as ss
from gymnasium.vector import VectorEnv
from pettingzoo import AECEnv

import llm_envs
from llm_envs.interop import NumericView, parallel_env


def make_vec_env(make_text_env: Callable[[], AECEnv], copies: int = 2, obs_length: int = 256) -> VectorEnv:
    """``copies`` copies of the environment × its agents, as one vector environment."""

    def make_parallel():
        view = NumericView(make_text_env(), mask_in="info", obs_length=obs_length)
        env = parallel_env(view)
        env = ss.dtype_v0(env, np.float32)
        env = ss.normalize_obs_v0(env, env_min=0.0, env_max=1.0)
        return ss.frame_stack_v1(env, 2)

    vec = ss.pettingzoo_env_to_vec_env_v1(make_parallel())
    return ss.concat_vec_envs_v1(vec, copies, num_cpus=0, base_class="gymnasium")


def masked_random_actions(infos: list[dict], rng: np.random.Generator) -> np.ndarray:
    """One random legal action per row of the vector environment (masks come from the infos)."""
    return np.array([rng.choice(np.flatnonzero(info["action_mask"])) for info in infos])


def run(vec: VectorEnv, steps: int, seed: int = 0) -> dict[str, float]:
    """Step ``vec`` with random legal actions; return the reward sum and the episodes finished."""
    rng = np.random.default_rng(seed)
    observations, infos = vec.reset(seed=seed)
    total_reward, episode_ends = 0.0, 0
    for _ in range(steps):
        actions = masked_random_actions(infos, rng)
        observations, rewards, terminations, truncations, infos = vec.step(actions)
        total_reward += float(np.sum(rewards))
        episode_ends += int(np.sum(terminations | truncations))
    return {"reward_sum": total_reward, "agent_episode_ends": episode_ends, "obs_shape": observations.shape}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="llm/Signalling-v0")
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    vec = make_vec_env(lambda: llm_envs.make(args.env), copies=args.copies)
    # SuperSuit's vector envs keep Gym's older convention: the spaces are those of one row.
    print(f"{vec.num_envs} rows (agents x copies), obs {vec.observation_space.shape}, "
          f"actions {vec.action_space}")
    print(run(vec, args.steps))
    vec.close()


if __name__ == "__main__":
    main()
