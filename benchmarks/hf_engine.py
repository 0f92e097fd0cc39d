"""The HF rollout engine: log-prob memory and continuous batching, before and after (issue 23).

**memory** — peak memory of one batch of sampling, each way in its own process (so the peak is
that of the case alone), reported as peak RSS above the RSS after the model was loaded:

* ``output_logits`` (before): ``model.generate(..., output_logits=True)``, then every step's
  logits stacked and log-softmaxed, as ``HFEngine`` did: ``[batch, steps, vocab]`` floats, twice;
* ``processor``: ``model.generate`` with :class:`llm_trainers.agents.hf.SampledLogprobs`, which
  keeps one step's log-probabilities (the engine's ``batching="static"`` path);
* ``continuous``: the engine's own decode loop (the default), one step's logits at a time.

Every case generates ``--new-tokens`` tokens per sequence: the end-of-sequence id is one that
``generate`` is forbidden to sample (and that the random model samples with probability about
1/vocabulary per step in the engine's loop).

**refill** — a multi-turn environment (default ``llm/PlanPath-v0``) played through the runner by an
``HFAgent``, the same episodes both ways: ``static`` (one ``generate`` per chunk of
``max_batch_size`` requests; a chunk lasts as long as its longest reply) and ``continuous`` (a
finished reply's slot goes to a waiting request at once, and finished rows leave the batch).
Reply lengths vary as a real model's do: a set of stop tokens is drawn so that a reply ends with
probability about ``--stop-rate`` per token (capped at ``--max-new-tokens``).

The model is a random-weight Llama-architecture decoder (vocabulary ``--vocab`` for the memory
part; for the refill part a tokenizer trained on the environment's texts); nothing is downloaded.
Outputs: tables on screen and ``benchmarks/results/hf_engine.{json,md}``. Quote the ratios
measured side by side in one run.

    python benchmarks/hf_engine.py               # both parts
    python benchmarks/hf_engine.py --quick       # smaller shapes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
MEMORY_MODES = ("output_logits", "processor", "continuous")


# ---------------------------------------------------------------------------- memory
def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _memory_model(vocab: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         tie_word_embeddings=False)
    return LlamaForCausalLM(config).eval()


def memory_case(mode: str, vocab: int, batch: int, new_tokens: int) -> dict[str, Any]:
    """Run one case in this process; return its peak memory above the loaded model's."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList

    from llm_trainers.agents.hf import HFEngine, SampledLogprobs
    from llm_trainers.policies import Policy, PolicySet
    from llm_trainers.sampling import SamplingParams

    torch.set_num_threads(1)
    model = _memory_model(vocab)
    never = vocab - 1

    def forbid_last(input_ids: Any, scores: Any) -> Any:
        scores[:, never] = float("-inf")
        return scores

    prompts = torch.randint(0, vocab - 1, (batch, 16))
    baseline = _rss_mb()
    started = time.perf_counter()
    with torch.no_grad():
        if mode == "continuous":
            class _Tok:  # what the engine reads of a tokenizer here
                pad_token_id = 0
                eos_token_id = never

                @staticmethod
                def decode(ids: Any, skip_special_tokens: bool = True) -> str:
                    return ""

            model.generation_config.eos_token_id = None
            engine = HFEngine(PolicySet("L1", {"shared": Policy("shared", model, _Tok())}),
                              SamplingParams(max_new_tokens=new_tokens), max_batch_size=batch)
            gens = engine.generate("shared", prompts.tolist())
            produced = sum(len(g[0].token_ids) for g in gens)
        else:
            config = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=True,
                                      temperature=1.0, top_k=0, top_p=1.0, eos_token_id=never, pad_token_id=0,
                                      return_dict_in_generate=True, output_logits=mode == "output_logits")
            processors = [forbid_last]
            recorder = SampledLogprobs(1.0)
            if mode == "processor":
                processors.append(recorder)
            out = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts),
                                 generation_config=config, logits_processor=LogitsProcessorList(processors))
            new = out.sequences[:, prompts.shape[1]:]
            if mode == "output_logits":  # what HFEngine._generate_chunk did before
                logits = torch.stack(out.logits, dim=1).float()
                logp_all = torch.log_softmax(logits, dim=-1)
                logps = logp_all.gather(-1, new[:, :, None]).squeeze(-1)
            else:
                logps = recorder.finish(new)
            produced = int(logps.numel())
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"mode": mode, "vocab": vocab, "batch": batch, "new_tokens": new_tokens, "tokens": produced,
            "peak_above_model_mb": peak - baseline, "wall_s": wall,
            "logits_array_mb": batch * new_tokens * vocab * 4 / 2**20}


def run_memory(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for mode in MEMORY_MODES:
        cmd = [sys.executable, __file__, "--memory-case", mode, "--vocab", str(args.vocab), "--batch",
               str(args.batch), "--new-tokens", str(args.new_tokens)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"  {mode:14s} peak +{r['peak_above_model_mb']:8.0f} MB  {r['wall_s']:6.1f} s", flush=True)
    return rows


# ---------------------------------------------------------------------------- refill
def run_refill(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    import numpy as np
    import torch

    from llm_envs.runner import Runner
    from llm_trainers.agents.hf import HFAgent, HFEngine
    from llm_trainers.policies import build_policies
    from llm_trainers.sampling import SamplingParams
    from llm_trainers.tiny import build_tiny_model, env_corpus

    torch.set_num_threads(1)
    path = build_tiny_model(workdir / "tiny", env_corpus(args.env, episodes=40), seed=0, hidden_size=64,
                            num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128)
    policies = build_policies("L1", ["*"], str(path), policy_map={"*": "shared"}, device="cpu")
    vocab = len(policies["shared"].tokenizer)
    rng = np.random.default_rng(0)
    stops = rng.choice(vocab, size=max(1, round(args.stop_rate * vocab)), replace=False).tolist()
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens, stop_token_ids=stops)
    rows = []
    for batching in ("static", "continuous"):
        engine = HFEngine(policies, params, seed=0, max_batch_size=args.max_batch_size, batching=batching)
        agent = HFAgent(engine, "shared")
        runner = Runner(args.env, agent, args.episodes, seed=0, concurrency=args.concurrency)
        started = time.perf_counter()
        results = runner.run()
        wall = time.perf_counter() - started
        tokens = sum(r.tokens()[1] for r in results)
        decisions = sum(s["requests"] for s in runner.stats)
        rows.append({"batching": batching, "env": args.env, "episodes": len(results), "wall_s": wall,
                     "decisions": decisions, "completion_tokens": tokens, "tokens_per_s": tokens / wall,
                     "decisions_per_s": decisions / wall, "mean_reply_tokens": tokens / max(1, decisions)})
        print(f"  {batching:10s} {wall:7.1f} s  {tokens / wall:8.1f} tok/s  {decisions / wall:6.2f} decisions/s",
              flush=True)
    return rows


# ---------------------------------------------------------------------------- report
def markdown(memory: list[dict[str, Any]], refill: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# HF engine (issue 23) — {meta['machine']}, torch threads 1", ""]
    if memory:
        m = memory[0]
        lines += [f"## Log-prob memory: batch {m['batch']}, {m['new_tokens']} new tokens, vocabulary {m['vocab']} "
                  f"(one [batch, steps, vocab] float32 array: {m['logits_array_mb']:.0f} MB)", "",
                  "| method | peak RSS above the model (MB) | vs output_logits | wall (s) |", "|---|---|---|---|"]
        ref = next(r for r in memory if r["mode"] == "output_logits")["peak_above_model_mb"]
        for r in memory:
            lines.append(f"| {r['mode']} | {r['peak_above_model_mb']:.0f} | "
                         f"{r['peak_above_model_mb'] / max(ref, 1e-9):.3f} | {r['wall_s']:.1f} |")
        lines.append("")
    if refill:
        r0 = refill[0]
        lines += [f"## Continuous batching: {r0['env']}, {r0['episodes']} episodes, concurrency {meta['concurrency']}, "
                  f"max_batch_size {meta['max_batch_size']}, replies ≤ {meta['max_new_tokens']} tokens", "",
                  "| batching | wall (s) | decisions/s | tokens/s | mean reply (tokens) | speed-up (decisions/s) |",
                  "|---|---|---|---|---|---|"]
        base = next(r for r in refill if r["batching"] == "static")["decisions_per_s"]
        for r in refill:
            lines.append(f"| {r['batching']} | {r['wall_s']:.1f} | {r['decisions_per_s']:.2f} | "
                         f"{r['tokens_per_s']:.1f} | {r['mean_reply_tokens']:.1f} | {r['decisions_per_s'] / base:.2f}× |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=("memory", "refill", "both"), default="both")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--vocab", type=int, default=49152, help="memory part: vocabulary (SmolLM2's by default)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--env", default="llm/PlanPath-v0")
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-batch-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=192)
    p.add_argument("--stop-rate", type=float, default=0.02)
    p.add_argument("--memory-case", choices=MEMORY_MODES, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.memory_case:
        print(json.dumps(memory_case(args.memory_case, args.vocab, args.batch, args.new_tokens)))
        return
    if args.quick:
        args.batch, args.new_tokens, args.episodes, args.concurrency, args.max_new_tokens = 8, 96, 8, 8, 96
        args.max_batch_size = 4
    meta = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "concurrency": args.concurrency,
            "max_batch_size": args.max_batch_size, "max_new_tokens": args.max_new_tokens, "args": vars(args)}
    memory = refill = []
    if args.part in ("memory", "both"):
        print("memory:", flush=True)
        memory = run_memory(args)
    if args.part in ("refill", "both"):
        print("refill:", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            refill = run_refill(args, Path(tmp))
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "hf_engine.json").write_text(json.dumps({"meta": meta, "memory": memory, "refill": refill},
                                                           indent=2))
    table = markdown(memory, refill, meta)
    (RESULTS_DIR / "hf_engine.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
