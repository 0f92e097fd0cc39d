"""What one warm-start (``sft``) optimizer step costs on SmolLM2-135M, side by side.

The same demonstrations of a shipped config (default ``plan_path_l2_sft_grpo_smollm2_cpu``: the
tool's 333-token program after a ~300-token prompt, the plan agent's few tokens after a
~700-token prompt), one policy step each, in three ways, interleaved round by round so that the
shared machine's load hits all alike:

* ``full logits, fp32`` — the pass the warm start made before: right-padded rows, every position
  through the output layer (a 49,152-word vocabulary), cross-entropy on the action's positions;
* ``action logits, fp32`` — the warm start now (:meth:`llm_trainers.sft.WarmStart.loss_and_step`):
  the rollout's left-padded layout, the output layer on the action's positions only;
* ``action logits, bf16`` — the same under bfloat16 autocast (``train.bf16: true``).

Reports CPU seconds per step (this process, ``torch`` at ``--threads`` threads) and the ratios
to the first row; the losses of the three agree (the first two to float precision). Writes
``benchmarks/results/sft_step.json``.

    python benchmarks/sft_step.py                      # 2 examples per policy, 3 rounds
    python benchmarks/sft_step.py --examples 6 --rounds 2 --config reasoner_tool_l2_sft_grpo_smollm2_cpu
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks._results import write_results  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "sft_step.json"


def full_logits_step(stage, policy: str, examples, lr: float) -> float:
    """The warm start's step as it was before (right padding, logits at every position); returns
    the mean token loss. Kept here only as the baseline of the comparison."""
    import torch

    from llm_trainers.sft import IGNORE_INDEX

    pol = stage.policies[policy]
    opt = stage.optimizers[policy]
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad(set_to_none=True)
    total = sum(sum(1 for t in labels if t != IGNORE_INDEX) for _, labels in examples)
    pad = pol.tokenizer.pad_token_id if pol.tokenizer.pad_token_id is not None else 0
    loss_sum = 0.0
    with pol.activated() as model:
        model.train()
        try:
            for i in range(0, len(examples), stage.s.micro_batch_size):
                chunk = examples[i : i + stage.s.micro_batch_size]
                width = max(len(ids) for ids, _ in chunk)
                ids = torch.tensor([x + [pad] * (width - len(x)) for x, _ in chunk])
                labels = torch.tensor([y + [IGNORE_INDEX] * (width - len(y)) for _, y in chunk])
                attention = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x, _ in chunk])
                logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),
                                                         ignore_index=IGNORE_INDEX, reduction="sum")
                (loss / max(total, 1)).backward()
                loss_sum += float(loss.detach())
        finally:
            model.eval()
    torch.nn.utils.clip_grad_norm_(pol.trainable_parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss_sum / max(total, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="plan_path_l2_sft_grpo_smollm2_cpu")
    parser.add_argument("--examples", type=int, default=2, help="demonstrations per policy and step")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    from llm_trainers.config import load_config
    from llm_trainers.sft import WarmStart, example_stream
    from llm_trainers.trainer import Trainer

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(args.config, [f"run.output_dir={tmp}/run", "run.progress=false", "run.tensorboard=false",
                                        f"run.threads={args.threads}", "run.eval_at_start=false"])
        trainer = Trainer(cfg)
        stages = {bf16: WarmStart(cfg, trainer.policies, trainer.policies.agent_to_policy, Path(tmp) / str(bf16), bf16=bf16)
                  for bf16 in (False, True)}
        batch = next(stages[False].batches(example_stream(cfg)))
        batch = {policy: rows[: args.examples] for policy, rows in batch.items()}
        modes = {
            "full logits, fp32": lambda p, ex: full_logits_step(stages[False], p, ex, 0.0),
            "action logits, fp32": lambda p, ex: stages[False].loss_and_step(p, ex, 0.0)[f"sft/{p}/loss"],
            "action logits, bf16": lambda p, ex: stages[True].loss_and_step(p, ex, 0.0)[f"sft/{p}/loss"],
        }
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        losses: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for mode, step in modes.items():
                start = time.process_time()
                losses[mode].append(sum(step(p, ex) for p, ex in sorted(batch.items())))
                cpu[mode].append(time.process_time() - start)
        tokens = {p: [len(ids) for ids, _ in rows] for p, rows in batch.items()}
        trainer.close()
    base = statistics.median(cpu["full logits, fp32"])
    print(f"{args.config}: one warm-start step, {args.examples} demonstration(s) per policy "
          f"(tokens per example {tokens}), {args.rounds} rounds, {args.threads} thread(s), load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'mode':24} {'CPU s/step (median)':>20} {'x full fp32':>12} {'loss (sum over policies)':>26}")
    rows = []
    for mode in modes:
        median = statistics.median(cpu[mode])
        rows.append({"mode": mode, "cpu_s": cpu[mode], "cpu_s_median": median, "ratio": median / base,
                     "loss": losses[mode][0]})
        print(f"{mode:24} {median:20.2f} {median / base:12.2f} {losses[mode][0]:26.5f}")
    write_results(RESULTS, {"config": args.config, "examples": args.examples, "rounds": args.rounds,
                            "threads": args.threads, "tokens": tokens, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
