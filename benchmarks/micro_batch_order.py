"""What cutting micro-batches by length, and running each shared prompt once, save in a learner
step on SmolLM2-135M, side by side.

The learner shuffles a step's samples, then cuts them into micro-batches of
``train.micro_batch_size``; each micro-batch is padded to its longest prompt plus its longest
completion. Since 2026-11-28 the micro-batches are cut from the samples ordered by length
(:func:`llm_trainers.learner.by_length`), which leaves the step's gradient as it was (the loss is
a token sum over the mini-batch) and computes fewer pad positions. This script measures both
orders on the same samples, interleaved round by round so the shared machine's load hits both
alike:

* ``shuffled`` — the micro-batches cut in the shuffled order (the learner before), every row
  run whole;
* ``by length`` — cut by length, every row run whole (``train.share_prompts: false``);
* ``shared prompts`` — the learner now: cut by length, each distinct prompt of a micro-batch run
  once and its completions on its key/value cache (``train.share_prompts``, since 2026-11-29).

The samples are real prompts of a two-turn environment, ``llm/ReasonerTool-v0`` (arithmetic
level 1, ``max_turns: 2``): the reasoner's and the tool's observations through SmolLM2's chat
template, half of the episodes solved in turn 1 (reference reasoner) and half going on to turn 2
(random reasoner), whose prompts carry the first turn's answers and are about twice as long —
the mix of an AT-GRPO rollout of ``reasoner_tool_l2_turn2_sft_grpo_smollm2_cpu``. Each record is
repeated ``--k`` times (the K candidates of a tree group share their prompt). One LoRA policy
(r 8 on every linear layer), float32, learning rate 0 (the weights do not move between rounds).

Reports CPU seconds per update and per log-prob pass (this process, ``--threads`` torch threads),
the ratios, and the loss (equal in every mode, to floating-point order). Writes ``benchmarks/results/micro_batch_order.json``.

    python benchmarks/micro_batch_order.py              # 2 + 2 episodes, K 2, micro-batches of 4, 2 rounds
    python benchmarks/micro_batch_order.py --k 4 --micro-batch-size 8   # the SmolLM2 configs' K and micro-batch
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks._results import write_results  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "micro_batch_order.json"
ENV_KWARGS = {"agents": "multi", "max_turns": 2, "task": "arithmetic", "task_kwargs": {"level": 1}}


def rollout_records(episodes: int) -> list[dict]:
    """The records of ``episodes`` episodes solved in turn 1 and as many that go on to turn 2."""
    from llm_envs.agents.spec import build_agent, parse_agent_spec
    from llm_envs.runner import run_episodes

    out = []
    for reasoner, seed in (("reference", 0), ("random", 1000)):
        agents = {"reasoner": build_agent(parse_agent_spec(reasoner)), "tool": build_agent(parse_agent_spec("reference"))}
        for result in run_episodes("llm/ReasonerTool-v0", agents, episodes, seed=seed, env_kwargs=ENV_KWARGS):
            out.extend(result.records)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=2, help="episodes of each kind (turn 1 / turn 2)")
    parser.add_argument("--k", type=int, default=2, help="candidates per prompt")
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    from llm_trainers import learner as learner_mod
    from llm_trainers.agents.hf import encode_observation
    from llm_trainers.config import TrainConfig
    from llm_trainers.learner import Learner, UpdateSample
    from llm_trainers.policies import LoraSettings, build_policies

    torch.set_num_threads(args.threads)
    policies = build_policies("L1", ["reasoner", "tool"], "smollm2", device="cpu", dtype="float32",
                              lora=LoraSettings(r=8, alpha=16, target_modules="all-linear"))
    pol = policies["shared"]
    tok = pol.tokenizer
    prompts, completions = [], []
    for record in rollout_records(args.episodes):
        prompt = encode_observation(tok, record["observation"])
        completion = tok.encode(record["action"], add_special_tokens=False) + [tok.eos_token_id]
        for _ in range(args.k):
            prompts.append(prompt)
            completions.append(completion)
    g = torch.Generator().manual_seed(0)
    # the log-prob pass scores samples in the order it is given them: shuffled here, as the update
    # shuffles; a rollout that lists its records turn by turn would pad less before the change
    order = torch.randperm(len(prompts), generator=g).tolist()
    prompts, completions = [prompts[i] for i in order], [completions[i] for i in order]
    samples = [UpdateSample(p, c, torch.randn(len(c), generator=g), torch.zeros(len(c))) for p, c in zip(prompts, completions)]
    learner = Learner(policies, TrainConfig(lr=0.0, max_grad_norm=1.0, micro_batch_size=args.micro_batch_size))
    for s, lp in zip(samples, learner.logprobs("shared", prompts, completions)):
        s.old_logprobs = lp

    def shuffled_order(p, c):  # the order the micro-batches were cut in before by_length
        return list(range(len(p)))

    def update() -> float:
        return learner.update("shared", samples)["loss"]

    def scores() -> float:
        return float(sum(x.sum() for x in learner.logprobs("shared", prompts, completions)))

    def mode(order, share: bool):
        stack = contextlib.ExitStack()
        stack.enter_context(mock.patch.object(learner_mod, "by_length", order))
        stack.enter_context(mock.patch.object(learner.cfg, "share_prompts", share))
        return stack

    modes = {"shuffled": lambda: mode(shuffled_order, False),
             "by length": lambda: mode(learner_mod.by_length, False),
             "shared prompts": lambda: mode(learner_mod.by_length, True)}
    cpu = {m: {"update": [], "logprobs": []} for m in modes}
    values = {m: {"update": [], "logprobs": []} for m in modes}
    for _ in range(args.rounds):
        for name, patch in modes.items():
            with patch():
                for what, fn in (("update", update), ("logprobs", scores)):
                    start = time.process_time()
                    values[name][what].append(fn())
                    cpu[name][what].append(time.process_time() - start)
    turns = sorted({len(p) for p in prompts})
    print(f"llm/ReasonerTool-v0 two turns: {len(samples)} samples ({args.episodes}+{args.episodes} episodes, K "
          f"{args.k}), prompt tokens {turns[0]}-{turns[-1]}, micro-batches of {args.micro_batch_size}, "
          f"{args.rounds} rounds, {args.threads} thread(s), load average {os.getloadavg()[0]:.1f}")
    print(f"{'mode':15} {'update CPU s':>13} {'x shuffled':>11} {'log-probs CPU s':>16} {'x shuffled':>11} {'loss':>10}")
    rows = []
    base = {w: statistics.median(cpu["shuffled"][w]) for w in ("update", "logprobs")}
    for name in modes:
        med = {w: statistics.median(cpu[name][w]) for w in ("update", "logprobs")}
        rows.append({"mode": name, "cpu_s": cpu[name], "median": med,
                     "ratio": {w: med[w] / base[w] for w in med}, "loss": values[name]["update"][0],
                     "logprob_sum": values[name]["logprobs"][0]})
        print(f"{name:15} {med['update']:13.2f} {med['update'] / base['update']:11.2f} {med['logprobs']:16.2f} "
              f"{med['logprobs'] / base['logprobs']:11.2f} {values[name]['update'][0]:10.5f}")
    write_results(RESULTS, {"samples": len(samples), "episodes": args.episodes, "k": args.k,
                            "micro_batch_size": args.micro_batch_size, "rounds": args.rounds,
                            "threads": args.threads, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
