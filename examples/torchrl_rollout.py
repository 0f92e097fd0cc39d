"""TorchRL: roll out a text environment through TorchRL's ``PettingZooWrapper``.

TorchRL cannot carry text: a ``Text`` observation becomes a placeholder and a text action is
rejected. :class:`~llm_envs.interop.NumericView` turns observations into character ids, actions
into a ``Discrete`` index over legal moves (with a mask TorchRL applies to its action spec) or,
for free-text environments, into an array of character ids that the view decodes, and keeps
infos numeric and fixed in shape.

Two forms:

* AEC (``use_mask=True``: one group per agent, only the agent to move is unmasked), here on the
  Discrete-moves view of ``llm/Signalling-v0``;
* parallel (one group per name prefix, e.g. ``agent`` for ``agent_0, agent_1``), through
  :func:`~llm_envs.interop.parallel_env`, e.g. on the text-action view of ``llm/Debate-v0``.

Run::

    python examples/torchrl_rollout.py --env llm/Signalling-v0 --steps 12
    python examples/torchrl_rollout.py --env llm/Debate-v0 --parallel --actions text --steps 3

Needs ``pip install 'llm-envs[interop]'`` (torchrl).
"""

from __future__ import annotations

import argparse
import warnings

import torch
from pettingzoo import AECEnv
from tensordict import TensorDictBase
from torchrl.envs.libs.pettingzoo import PettingZooWrapper

import llm_envs
from llm_envs.interop import NumericView, parallel_env


def wrap(env: AECEnv, *, parallel: bool = False, seed: int = 0) -> PettingZooWrapper:
    """TorchRL's wrapper over a numeric view (``env``), in AEC or parallel form."""
    with warnings.catch_warnings():
        # "PettingZoo in TorchRL is tested using version == 1.24.3": 1.27 works for this path.
        warnings.filterwarnings("ignore", message="PettingZoo in TorchRL is tested")
        if parallel:
            return PettingZooWrapper(parallel_env(env), use_mask=True, seed=seed)
        return PettingZooWrapper(env, use_mask=True, seed=seed)


def rollout(env: PettingZooWrapper, steps: int) -> TensorDictBase:
    """``steps`` steps with random actions that respect the action masks (resets on episode end)."""
    return env.rollout(steps, break_when_any_done=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="llm/Signalling-v0")
    parser.add_argument("--actions", default="legal", choices=["legal", "candidates", "text"])
    parser.add_argument("--parallel", action="store_true", help="use the parallel form")
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    view = NumericView(llm_envs.make(args.env), actions=args.actions, obs_length=512, action_length=32)
    env = wrap(view, parallel=args.parallel)
    data = rollout(env, args.steps)
    print(data)
    for group in env.group_map:
        reward = data["next", group, "reward"]
        print(f"group {group!r}: reward sum {reward.sum().item():+.3f} over {args.steps} steps")


if __name__ == "__main__":
    main()
