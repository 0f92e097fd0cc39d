"""TorchRL: train a policy per agent (REINFORCE) through TorchRL's ``PettingZooWrapper``.

TorchRL cannot carry text: a ``Text`` observation becomes a placeholder and a text action is
rejected. :class:`~llm_envs.interop.NumericView` gives it the environment's state tensor
(``observation="state"``) and a ``Discrete`` action over the fixed move catalog with a mask, which
TorchRL applies to its action spec. In AEC form (``use_mask=True``) every agent is its own group;
at each step only the agent to move is unmasked (``(group, "mask")``).

Delayed credit: TorchRL records, at every step and for every group, the reward the environment
emitted for that agent at that step. A team reward that reaches the speaker when the listener
answers sits in the speaker's group at the listener's step, where the speaker is masked. So the
return of a move is computed over the *whole* time axis of its group (reward-to-go, reset at
episode ends), and the log-probability counts only where the agent acted: the speaker's move is
credited with the answer that followed it.

The learner is REINFORCE with a mean baseline and an entropy bonus, written out in
:func:`reinforce_loss` (the math in small named functions, as in CleanRL).

Two forms of rollout are shown (``--parallel`` uses :func:`~llm_envs.interop.parallel_env`):

    python examples/torchrl_train.py                          # Signalling
    python examples/torchrl_train.py --iterations 2 --env llm/Debate-v0 --parallel --actions text

(the second only rolls out: free-text actions have no policy to learn here).

Needs ``pip install 'llm-envs[interop]'`` (torchrl).
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import torch
from pettingzoo import AECEnv
from tensordict import TensorDictBase
from torch import nn
from torchrl.envs.libs.pettingzoo import PettingZooWrapper

import llm_envs
from llm_envs.interop import NumericView, parallel_env

#: Extra environment settings per id (none by default: Signalling keeps its speaker's local
#: reward; with the team reward alone, plain REINFORCE tends to settle on a partial code).
PRESETS: dict[str, dict[str, Any]] = {}


def wrap(env: AECEnv, *, parallel: bool = False, seed: int = 0) -> PettingZooWrapper:
    """TorchRL's wrapper over a numeric view (``env``), in AEC or parallel form."""
    with warnings.catch_warnings():
        # "PettingZoo in TorchRL is tested using version == 1.24.3": 1.27 works for this path.
        warnings.filterwarnings("ignore", message="PettingZoo in TorchRL is tested")
        if parallel:
            return PettingZooWrapper(parallel_env(env), use_mask=True, seed=seed)
        return PettingZooWrapper(env, use_mask=True, seed=seed)


def random_rollout(env: PettingZooWrapper, steps: int) -> TensorDictBase:
    """``steps`` steps with random actions that respect the action masks (resets on episode end)."""
    return env.rollout(steps, break_when_any_done=False)


class GroupPolicies(nn.Module):
    """One small MLP per agent group: observation -> logits over its ``Discrete`` moves."""

    def __init__(self, env: PettingZooWrapper, hidden: int = 64):
        super().__init__()
        self.groups = list(env.group_map)
        self.nets = nn.ModuleDict()
        for group in self.groups:
            obs_size = env.observation_spec[group, "observation", "observation"].shape[-1]
            n_actions = env.full_action_spec[group, "action"].space.n
            self.nets[group] = nn.Sequential(nn.Linear(obs_size, hidden), nn.Tanh(), nn.Linear(hidden, n_actions))

    def logits(self, td: TensorDictBase, group: str) -> torch.Tensor:
        """Masked logits of ``group`` (illegal moves at -inf)."""
        raw = self.nets[group](td[group, "observation", "observation"].float())
        return raw.masked_fill(~td[group, "action_mask"], float("-inf"))

    @torch.no_grad()
    def forward(self, td: TensorDictBase) -> TensorDictBase:
        """Sample an action for every group (TorchRL's AEC form wants one per group; only the
        agent to move plays its own)."""
        for group in self.groups:
            td[group, "action"] = torch.distributions.Categorical(logits=self.logits(td, group)).sample()
        return td


def rewards_to_go(rewards: torch.Tensor, dones: torch.Tensor, gamma: float) -> torch.Tensor:
    """``G_t = r_t + gamma * G_{t+1}``, restarting after every step that ends an episode.
    ``rewards`` and ``dones`` are ``[T]``; the last (unfinished) episode is cut at ``T``."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros(())
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running * (~dones[t])
        returns[t] = running
    return returns


def reinforce_loss(logits: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor, acting: torch.Tensor, entropy_coef: float) -> torch.Tensor:
    """``-mean over acted steps of (G - baseline) * log pi(a | o)`` minus an entropy bonus."""
    distribution = torch.distributions.Categorical(logits=logits[acting])
    advantage = returns[acting] - returns[acting].mean()
    return -(advantage * distribution.log_prob(actions[acting])).mean() - entropy_coef * distribution.entropy().mean()


def train(
    env: PettingZooWrapper,
    *,
    iterations: int = 30,
    steps_per_iteration: int = 256,
    lr: float = 0.02,
    gamma: float = 0.9,
    entropy_coef: float = 0.01,
    seed: int = 0,
) -> tuple[GroupPolicies, float]:
    """REINFORCE for every group; returns the policies and the wall time in seconds."""
    torch.manual_seed(seed)
    policies = GroupPolicies(env)
    optimizer = torch.optim.Adam(policies.parameters(), lr=lr)
    start = time.perf_counter()
    for _ in range(iterations):
        data = env.rollout(steps_per_iteration, policy=policies, break_when_any_done=False)
        dones = data["next", "done"].reshape(-1)
        loss = torch.zeros(())
        for group in policies.groups:
            acting = data[group, "mask"].reshape(-1)
            if not acting.any():
                continue
            returns = rewards_to_go(data["next", group, "reward"].reshape(-1), dones, gamma)
            logits = policies.logits(data, group).reshape(len(acting), -1)
            actions = data[group, "action"].reshape(-1)
            loss = loss + reinforce_loss(logits, actions, returns, acting, entropy_coef)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return policies, time.perf_counter() - start


@torch.no_grad()
def greedy_success(env: PettingZooWrapper, policies: GroupPolicies, steps: int = 400) -> float:
    """Mean episode success of the greedy policies over the episodes that end within ``steps``."""

    def greedy(td: TensorDictBase) -> TensorDictBase:
        for group in policies.groups:
            td[group, "action"] = policies.logits(td, group).argmax(-1)
        return td

    data = env.rollout(steps, policy=greedy, break_when_any_done=False)
    ended = data["next", "done"].reshape(-1)
    group = policies.groups[0]
    success = data["next", group, "info", "success"].reshape(-1)
    return float(success[ended].mean()) if ended.any() else 0.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="llm/Signalling-v0")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--steps-per-iteration", type=int, default=256)
    parser.add_argument("--eval-steps", type=int, default=400)
    parser.add_argument("--parallel", action="store_true")
    parser.add_argument("--actions", default="auto", choices=["auto", "text"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny networks: threads only add overhead
    text_env = llm_envs.make(args.env, **PRESETS.get(args.env, {}))
    if args.actions == "text":
        view = NumericView(text_env, actions="text", action_length=16, obs_length=256)
        env = wrap(view, parallel=args.parallel, seed=args.seed)
        data = random_rollout(env, args.iterations)
        print(f"{args.env}: rolled out {data.batch_size[0]} steps; groups {list(env.group_map)}")
        return
    env = wrap(NumericView(text_env, observation="state"), parallel=args.parallel, seed=args.seed)
    before = greedy_success(env, GroupPolicies(env), args.eval_steps)
    policies, seconds = train(
        env, iterations=args.iterations, steps_per_iteration=args.steps_per_iteration, seed=args.seed
    )
    after = greedy_success(env, policies, args.eval_steps)
    print(f"{args.env}: greedy success {before:.2f} before, {after:.2f} after "
          f"{args.iterations} REINFORCE iterations ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
