"""Tianshou: train one DQN per agent on a text environment through the numeric view.

Tianshou's ``PettingZooEnv`` turns an AEC environment into a single-agent-style one whose
observation is ``{"agent_id", "obs", "mask"}``; it needs identical spaces for all agents and
reads the legal-move mask from ``obs["action_mask"]``. :class:`~llm_envs.interop.NumericView`
gives exactly that. Here it serves the environment's *state tensor* (``observation="state"``:
one-hot planes of the grid, or Signalling's small vector) and a ``Discrete`` action over its
*fixed move catalog* (``actions="fixed"``, the default: index ``i`` is always the same move, U/D/L/R
or a symbol, with a mask of the legal ones), which is what a Q-network can learn from.

Each agent gets its own DQN (``MultiAgentOffPolicyAlgorithm``). Two details make a multi-agent
game learn:

* **Delayed credit.** Tianshou stores one transition per AEC step, with the reward *every* agent
  got at that step, and gives an agent its own column. A team reward known only after a later
  agent acts (Signalling's speaker is credited when the listener answers) lands on that later
  step. With ``n_step_return_horizon = len(agents)`` (strict rotation), the n-step return of an
  agent's move sums its column over the others' moves up to its own next move and bootstraps
  from its own next observation: exactly the agent's own transition. With 1-step returns the
  speaker never sees the team reward, and bootstraps from the *listener's* observation.
* **Exploration.** Tianshou 2.0.1's ``MultiAgentPolicy`` does not pass the trainer's
  "within a training step" flag on to the agents' policies, so their ``eps_training`` is never
  used (every action would be greedy). :func:`set_exploration` sets the agents' epsilon directly
  (``eps_inference`` too) during training and back to 0 for evaluation.

Run::

    python examples/tianshou_train.py                              # Signalling, team reward only
    python examples/tianshou_train.py --env llm/PlanPath-v0 --steps 30000

Needs ``pip install 'llm-envs[interop]'`` (tianshou).
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tianshou.algorithm import DQN
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.multiagent.marl import MultiAgentOffPolicyAlgorithm
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Batch, Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv, PettingZooEnv
from tianshou.trainer import OffPolicyTrainerParams
from tianshou.utils.net.common import Net

import llm_envs
from llm_envs.interop import NumericView

# Tianshou logs a warning per collect for multi-agent returns (one column per agent).
logging.getLogger("tianshou.data.stats").setLevel(logging.ERROR)

#: What each environment is trained on by default (``main``): team reward only for Signalling,
#: one agent and one step per turn for Plan-Path.
PRESETS: dict[str, dict[str, Any]] = {
    "llm/Signalling-v0": {"speaker_local_weight": 0.0},
    "llm/PlanPath-v0": {"agents": "single", "max_turns": 30},
}


def make_env(env_id: str, *, observation: str = "state", obs_length: int = 256, **env_kwargs: Any) -> PettingZooEnv:
    """A registered text environment, as Tianshou's ``PettingZooEnv`` over the numeric view."""
    view = NumericView(llm_envs.make(env_id, **env_kwargs), observation=observation, obs_length=obs_length)
    return PettingZooEnv(view)


@dataclass
class TrainConfig:
    """DQN settings (defaults: small and quick on a CPU).

    ``n_step=None`` means one step per agent of the game (see the module docstring). Epsilon
    falls linearly from ``eps_start`` to ``eps_final`` over the first ``explore_fraction`` of
    the steps.
    """

    steps: int = 6_000
    num_envs: int = 4
    hidden: tuple[int, ...] = (128, 128)
    lr: float = 1e-3
    gamma: float = 0.9
    n_step: int | None = None
    batch_size: int = 64
    buffer_size: int = 20_000
    updates_per_step: float = 0.25
    target_update_freq: int = 100
    eps_start: float = 1.0
    eps_final: float = 0.05
    explore_fraction: float = 0.5
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)


def build_algorithm(env: PettingZooEnv, config: TrainConfig) -> MultiAgentOffPolicyAlgorithm:
    """One DQN (an MLP Q-network over the flattened observation) per agent."""
    n_step = config.n_step or len(env.agents)
    obs_size = int(np.prod(env.observation_space["observation"].shape))
    algorithms = []
    for _ in env.agents:
        q_network = Net(state_shape=obs_size, action_shape=env.action_space.n, hidden_sizes=list(config.hidden))
        policy = DiscreteQLearningPolicy(model=q_network, action_space=env.action_space)
        algorithms.append(
            DQN(
                policy=policy,
                optim=AdamOptimizerFactory(lr=config.lr),
                gamma=config.gamma,
                n_step_return_horizon=n_step,
                target_update_freq=config.target_update_freq,
            )
        )
    return MultiAgentOffPolicyAlgorithm(algorithms=algorithms, env=env)


def set_exploration(algorithm: MultiAgentOffPolicyAlgorithm, eps: float) -> None:
    """Epsilon of every agent's policy, in training and inference alike (see the docstring)."""
    for policy in algorithm.policy.policies.values():
        policy.set_eps_training(eps)
        policy.set_eps_inference(eps)


def epsilon(config: TrainConfig, step: int) -> float:
    """The linear epsilon schedule."""
    progress = min(1.0, step / max(1.0, config.explore_fraction * config.steps))
    return config.eps_start + progress * (config.eps_final - config.eps_start)


def train(make: Callable[[], PettingZooEnv], config: TrainConfig) -> tuple[MultiAgentOffPolicyAlgorithm, float]:
    """Train for ``config.steps`` AEC steps (all agents' moves); return the algorithm and the
    wall time in seconds."""
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)  # Tianshou's epsilon-greedy draws from NumPy's global generator
    envs = DummyVectorEnv([make for _ in range(config.num_envs)])
    envs.seed(config.seed)
    algorithm = build_algorithm(make(), config)
    buffer = VectorReplayBuffer(config.buffer_size, config.num_envs)
    collector = Collector(algorithm.policy, envs, buffer, exploration_noise=True)
    epoch_steps = min(1_000, config.steps)
    start = time.perf_counter()
    algorithm.run_training(
        OffPolicyTrainerParams(
            training_collector=collector,
            max_epochs=math.ceil(config.steps / epoch_steps),
            epoch_num_steps=epoch_steps,
            collection_step_num_env_steps=4 * config.num_envs,
            update_step_num_gradient_steps_per_sample=config.updates_per_step,
            batch_size=config.batch_size,
            training_fn=lambda epoch, env_step: set_exploration(algorithm, epsilon(config, env_step)),
            verbose=False,
            show_progress=False,
        )
    )
    seconds = time.perf_counter() - start
    envs.close()
    set_exploration(algorithm, 0.0)
    return algorithm, seconds


@dataclass
class Evaluation:
    """Per-episode success (the environment's metric) and return (summed over agents)."""

    success: np.ndarray
    returns: np.ndarray

    def summary(self) -> dict[str, tuple[float, float, float]]:
        """``(mean, low, high)`` of a 95% interval: Wilson for success, normal for the return."""
        return {"success": wilson_interval(self.success), "return": mean_interval(self.returns)}


def play(make: Callable[[], PettingZooEnv], choose: Callable[[dict], int], episodes: int, seed: int) -> Evaluation:
    """Play ``episodes`` episodes with seeds ``seed, seed + 1, ...``; ``choose`` maps Tianshou's
    observation dict to an action index."""
    env = make()
    success, returns = [], []
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            observation, rewards, terminated, truncated, _ = env.step(choose(observation))
            total += float(np.sum(rewards))
            done = terminated or truncated
        success.append(env.env.unwrapped.episode_metrics()["success"])
        returns.append(total)
    return Evaluation(np.asarray(success, dtype=float), np.asarray(returns, dtype=float))


def greedy(algorithm: MultiAgentOffPolicyAlgorithm) -> Callable[[dict], int]:
    """The trained agents' greedy, masked choice."""
    algorithm.policy.eval()
    set_exploration(algorithm, 0.0)

    def choose(observation: dict) -> int:
        batch = Batch(
            obs=Batch(
                agent_id=np.array([observation["agent_id"]], dtype=object),
                obs=np.asarray(observation["obs"])[None],
                mask=np.asarray(observation["mask"])[None],
            ),
            info=Batch(),
        )
        with torch.no_grad():
            return int(algorithm.policy(batch).act[0])

    return choose


def uniform_random(seed: int) -> Callable[[dict], int]:
    """A uniformly random legal move (the baseline)."""
    rng = np.random.default_rng(seed)
    return lambda observation: int(rng.choice(np.flatnonzero(observation["mask"])))


def wilson_interval(successes: np.ndarray, z: float = 1.96) -> tuple[float, float, float]:
    """Mean and Wilson score interval of a 0/1 (or fractional) success rate."""
    n = len(successes)
    p = float(np.mean(successes))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, centre - half, centre + half


def mean_interval(values: np.ndarray, z: float = 1.96) -> tuple[float, float, float]:
    """Mean and normal-approximation interval of the mean."""
    mean = float(np.mean(values))
    half = z * float(np.std(values, ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return mean, mean - half, mean + half


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="llm/Signalling-v0")
    parser.add_argument("--steps", type=int, default=6_000)
    parser.add_argument("--episodes", type=int, default=200, help="evaluation episodes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    env_kwargs = PRESETS.get(args.env, {})
    make = lambda: make_env(args.env, **env_kwargs)  # noqa: E731
    config = TrainConfig(steps=args.steps, seed=args.seed)
    baseline = play(make, uniform_random(args.seed), args.episodes, seed=100_000)
    algorithm, seconds = train(make, config)
    trained = play(make, greedy(algorithm), args.episodes, seed=100_000)
    print(f"{args.env} {env_kwargs}: {args.steps} steps of DQN in {seconds:.0f} s")
    for name, result in (("random", baseline), ("trained (greedy)", trained)):
        parts = [f"{key} {m:.3f} [{lo:.3f}, {hi:.3f}]" for key, (m, lo, hi) in result.summary().items()]
        print(f"  {name:17s} " + "   ".join(parts))


if __name__ == "__main__":
    main()
