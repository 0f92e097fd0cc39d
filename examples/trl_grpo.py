"""Train a small model with TRL's GRPOTrainer on one of our environments, through our rewards.

    python examples/trl_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct --env llm/PlanPath-v0 \\
        --env-arg agents=single --env-arg max_turns=1 --steps 200
    python examples/trl_grpo.py --model tiny --steps 2          # a tiny random model, offline
    python examples/trl_grpo.py --model smollm2 --steps 2       # SmolLM2-135M from its GGUF package, offline

How it maps onto TRL (``trl`` 1.x, the ``trl`` extra):

* **Dataset**: one row per episode: the ``seed`` and the trained agent's first observation as a
  conversational ``prompt`` (the instruction as the system message, the prompt as the user
  message), computed by resetting the environment with that seed (after the other agents' moves,
  if any come first: they are played by fixed agents, ``--others``).
* **Reward function** (TRL's ``reward_funcs`` hook): for each completion, the environment is
  reset with the row's seed again, the completion is played as the agent's action, the rest of
  the episode (if any) is played by the fixed agents (the trained agent's later turns too,
  ``--continuation``), and the reward is what our environment credited to *that* action's record
  by the episode's end (delayed credit included). With ``max_turns=1`` on a single-agent puzzle
  that is exactly the episode's return: GRPO's group of ``--num-generations`` completions per
  prompt are ``--num-generations`` independent attempts at the same puzzle.

Multi-turn training (the model playing every turn, token-exact across turns) is what
``llm-train`` does (AT-GRPO, REINFORCE++: docs/training.md); TRL's experimental
``rollout_func`` would be the hook for it here.

A step that the sandbox could not judge (``InfrastructureError``) gets reward ``None``, which
TRL leaves out of that sample's reward (never scored as a failure).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import llm_envs
from llm_envs.agents.base import play_fixed_agents
from llm_envs.agents.spec import build_agent
from llm_envs.cli._common import env_kwargs
from llm_envs.core.errors import InfrastructureError


def play_fixed(env: Any, agents: Mapping[str, Any], until: str | None = None) -> None:
    """Let the fixed agents move (dead steps included) until ``until`` is to act or the
    episode is over. A fixed agent that produced no action (``AgentOutput.error``: HTTP 429, out
    of memory) raises ``AgentError``, an ``InfrastructureError``: never played as an empty move."""
    play_fixed_agents(env, agents, until=until)


def build_dataset(env_id: str, options: Mapping[str, Any], trained: str, others: Mapping[str, Any],
                  episodes: int, seed: int) -> list[dict[str, Any]]:
    """One row per episode in which the trained agent gets to move: its seed and first prompt."""
    rows = []
    for s in range(seed, seed + episodes):
        env = llm_envs.make(env_id, **options)
        env.reset(seed=s)
        play_fixed(env, others, until=trained)
        if env.agents and not env.episode_over:
            observation = env.observe(trained)
            rows.append({
                "prompt": [{"role": "system", "content": observation["instruction"]},
                           {"role": "user", "content": observation["prompt"]}],
                "seed": s,
            })
        env.close()
    return rows


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or TRL's conversational list of messages."""
    if isinstance(completion, str):
        return completion
    return "".join(str(message.get("content") or "") for message in completion)


def make_reward_function(env_id: str, options: Mapping[str, Any], trained: str,
                         others: Mapping[str, Any], continuation: Any) -> Any:
    """TRL reward function: our environment's reward for each completion, played as the trained
    agent's move in the episode of the row's seed."""

    def environment_reward(completions: Sequence[Any], seed: Sequence[int], **kwargs: Any) -> list[float | None]:
        rewards: list[float | None] = []
        for completion, episode_seed in zip(completions, seed):
            env = llm_envs.make(env_id, **options)
            try:
                env.reset(seed=int(episode_seed))
                play_fixed(env, others, until=trained)
                env.step(completion_text(completion))
                record = env.records[-1]
                play_fixed(env, {**others, trained: continuation})
                rewards.append(float(record.reward))
            except InfrastructureError:
                rewards.append(None)  # not judged: TRL leaves it out of this sample's reward
            finally:
                env.close()
        return rewards

    environment_reward.__name__ = f"reward_{env_id.split('/')[-1]}"
    return environment_reward


def tiny_model(env_id: str, options: Mapping[str, Any], directory: str) -> str:
    """A tiny random-weight model whose tokenizer knows the environment's words (offline)."""
    from llm_trainers.tiny import build_tiny_model, env_corpus

    build_tiny_model(directory, env_corpus(env_id, episodes=20, **options), max_position_embeddings=2048)
    return directory


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="llm/PlanPath-v0", help="environment id")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE",
                   help="environment option (default for Plan-Path: agents=single, max_turns=1)")
    p.add_argument("--agent", help="the trained agent (default: the environment's first)")
    p.add_argument("--others", default="reference", help="spec of the fixed agents playing every other agent")
    p.add_argument("--continuation", default="reference",
                   help="spec of the agent playing the trained agent's later turns, if the episode has any")
    p.add_argument("--model", default="tiny",
                   help="model directory, hub id, .gguf file or smollm2 (converted once to a local float32 copy); "
                   "'tiny' builds a tiny random model offline")
    p.add_argument("--episodes", type=int, default=256, help="dataset rows (episodes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=100, help="optimizer steps")
    p.add_argument("--num-generations", type=int, default=4, help="completions per prompt (GRPO's group)")
    p.add_argument("--batch-size", type=int, default=4, help="completions per device per step")
    p.add_argument("--max-completion-length", type=int, default=256)
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--output-dir", default="runs/trl_grpo")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> Any:
    """Build everything and train; returns the trainer (its ``state.log_history`` has the rewards)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = parse_args(argv)
    options = env_kwargs(args.env_arg)
    if args.env == "llm/PlanPath-v0" and not args.env_arg:
        options = {"agents": "single", "max_turns": 1}
    probe = llm_envs.make(args.env, **options)
    trained = args.agent or probe.possible_agents[0]
    others = {a: build_agent(args.others) for a in probe.possible_agents if a != trained}
    probe.close()
    rows = build_dataset(args.env, options, trained, others, args.episodes, args.seed)
    model = args.model
    if model == "tiny":
        model = tiny_model(args.env, options, tempfile.mkdtemp(prefix="trl_tiny_"))
    else:
        from llm_trainers.policies import plain_model_dir

        # A GGUF file or a packaged model (smollm2) as the converted local copy: TRL would
        # otherwise look the name up on the hub.
        model = plain_model_dir(model)
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=args.learning_rate,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        use_cpu=args.model == "tiny" or not _cuda(),
        bf16=False,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=make_reward_function(args.env, options, trained, others, build_agent(args.continuation)),
        args=config,
        train_dataset=Dataset.from_list(rows),
    )
    trainer.train()
    return trainer


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
