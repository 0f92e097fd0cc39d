"""Milliseconds per decode step: ``model.generate`` against the HF rollout engine, on one model.

    python benchmarks/decode_step.py --model PATH --device cuda          # batches 1 and 64
    python benchmarks/decode_step.py --model PATH --batch 1 8 --new-tokens 32

For each batch size the same prompts (a chat prompt of Signalling, repeated) are sampled three
ways, side by side in one process, each forced to ``--new-tokens`` tokens (no stop token):

* ``generate``: transformers' ``model.generate`` alone (sampling, KV cache);
* ``engine static``: ``HFEngine(batching="static")``: the same ``generate`` plus the engine's
  log-prob recorder (one step's log-softmax kept);
* ``engine continuous``: the engine's own decode loop (its default).

Reported: milliseconds per decode step (one forward of the whole batch), and the weight bytes read
per second against a bandwidth given with ``--bandwidth`` (bytes/s; every decode step reads every
weight once). The best of ``--repeats`` runs counts. Writes ``benchmarks/results/decode_step.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a local model directory")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 64])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--bandwidth", type=float, default=None, help="bytes/s to compare against (e.g. a measured copy rate)")
    p.add_argument("--out", default=str(RESULTS / "decode_step.json"))
    args = p.parse_args(argv)

    import torch
    from transformers import GenerationConfig

    from llm_trainers.agents.hf import HFEngine, SamplingParams
    from llm_trainers.policies import build_policies

    policies = build_policies("L1", ["*"], args.model, policy_map={"*": "shared"}, device=args.device, dtype="auto")
    pol = policies["shared"]
    weight_bytes = sum(t.numel() * t.element_size() for t in pol.model.parameters())
    sampling = SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, stop_token_ids=None)
    engines = {mode: HFEngine(policies, sampling, seed=0, batching=mode, max_batch_size=max(args.batch))
               for mode in ("static", "continuous")}
    prompt = engines["static"].encode("shared", {"instruction": "You are the speaker.", "prompt": "Round 1. Target: blue"})
    eos = pol.tokenizer.eos_token_id

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    def raw(batch: int) -> int:
        ids = torch.tensor([prompt] * batch, device=pol.device)
        config = GenerationConfig(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=True,
                                  temperature=1.0, top_k=0, top_p=1.0, pad_token_id=pol.tokenizer.pad_token_id,
                                  eos_token_id=eos)
        with torch.no_grad():
            out = pol.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config)
        return out.shape[1] - len(prompt)

    def engine(mode: str, batch: int) -> int:
        rows = engines[mode].generate("shared", [prompt] * batch)
        return max(len(r[0].token_ids) for r in rows)

    rows = []
    for batch in args.batch:
        cases = {"generate": lambda b=batch: raw(b),
                 "engine static": lambda b=batch: engine("static", b),
                 "engine continuous": lambda b=batch: engine("continuous", b)}
        for fn in cases.values():  # warm-up
            fn()
        best: dict[str, tuple[float, int]] = {}
        for _ in range(args.repeats):
            for name, fn in cases.items():
                sync()
                t0 = time.perf_counter()
                steps = fn()
                sync()
                elapsed = time.perf_counter() - t0
                if name not in best or elapsed / steps < best[name][0] / best[name][1]:
                    best[name] = (elapsed, steps)
        for name, (elapsed, steps) in best.items():
            ms = 1000 * elapsed / steps
            row = {"batch": batch, "mode": name, "decode_steps": steps, "ms_per_step": ms,
                   "tokens_per_s": batch * steps / elapsed, "weight_bytes_s": weight_bytes * steps / elapsed}
            if args.bandwidth:
                row["x_bandwidth"] = row["weight_bytes_s"] / args.bandwidth
            rows.append(row)
            print(f"batch {batch:>3} {name:<18} {ms:7.1f} ms/step  {row['tokens_per_s']:8.0f} tok/s"
                  + (f"  {row['x_bandwidth']:.3f} x bandwidth" if args.bandwidth else ""), flush=True)
    meta = {"model": args.model, "weight_bytes": weight_bytes, "device": args.device,
            "card": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor(),
            "torch": torch.__version__, "new_tokens": args.new_tokens, "repeats": args.repeats}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
