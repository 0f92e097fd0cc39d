"""Throughput of the evaluation runner, in two parts (``--mode http``, ``--mode hf``; default both).

**http: no batch barrier.** A loopback OpenAI-compatible server answers each request after a
latency of its own (log-normal, median 60 ms, heavy tail capped at 1.5 s, drawn from the
request's bytes, so both modes below see exactly the same latencies), like a real server whose
replies have different lengths. The same episodes are played twice, side by side:

* **per episode**: the HTTP agent as shipped: each request is sent the moment it is made and
  each episode goes on as soon as its own reply arrives;
* **lockstep**: the same agent behind a wrapper that only offers ``act_batch_async``, which is
  how the runner drove it before: all pending requests go out as one batch and no episode moves
  on before the slowest reply of its batch is in.

Reported: episodes/s, and how long an episode took against the time its own requests took
(1.0 = it never waited for another episode). I/O only: no torch needed.

**hf: batched model calls versus one call at a time.** For each concurrency (environment
instances in play) the same episodes are played twice, side by side in one process:

* **batched**: the runner sends every pending request of the model in one ``act_batch`` call
  (one ``generate`` over a left-padded batch);
* **one at a time**: the same runner with ``max_batch_size=1``, i.e. one ``generate`` per
  decision, as a naive loop over environments would do.

The model is a tiny causal LM with random weights built from a config, with a tokenizer trained
on the spot on the environment's own texts (nothing is downloaded), played through
``llm_trainers.agents.hf.HFAgent`` (the ``hf:PATH`` spec of ``llm-envs eval``; needs the
``train`` extra). ``--model PATH`` runs any local model instead
(on the GPU when one is available: ``--device cuda``).

Outputs: tables on screen, ``benchmarks/results/eval_throughput_http.json`` (http) and
``eval_throughput.json`` (hf), each with a ``.md``. Quote the ratios measured side by side in one
run, not the absolute numbers.

    python benchmarks/eval_throughput.py --mode http    # per-episode vs lockstep, concurrency 8, 32
    python benchmarks/eval_throughput.py --mode hf      # concurrency 1, 2, 4, 8, 16
    python benchmarks/eval_throughput.py --quick        # fewer episodes and repeats
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llm_envs
from llm_envs.agents import Agent, ReferenceAgent
from llm_envs.runner import Runner

RESULTS_DIR = Path(__file__).resolve().parent / "results"
PREFERRED_ENVS = ("llm/Signalling-v0", "llm/PlanPath-v0", "llm/Sudoku-v0")


# ---------------------------------------------------------------------------- environment
def pick_env(requested: str | None) -> str:
    """The requested environment, or the first preferred one that plays with its reference."""
    candidates = [requested] if requested else list(PREFERRED_ENVS) + llm_envs.env_ids()
    problems = []
    for env_id in candidates:
        try:
            Runner(env_id, ReferenceAgent(), 1).run()
            return env_id
        except Exception as exc:  # noqa: BLE001 - environments are still being built; try the next
            problems.append(f"{env_id}: {type(exc).__name__}: {exc}")
    raise SystemExit("no environment could be played:\n  " + "\n  ".join(problems))


# ---------------------------------------------------------------------------- model
def build_tiny_model(path: Path, env_id: str) -> Path:
    """A random-weight decoder and a tokenizer trained on the environment's own texts."""
    from llm_trainers.tiny import build_tiny_model as build
    from llm_trainers.tiny import env_corpus

    return build(
        path,
        env_corpus(env_id, episodes=60),
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=128,
    )


def make_agent(path: str, max_new_tokens: int, device: str) -> tuple[Agent, str]:
    """The Hugging Face agent of llm_trainers, built from an ``hf:`` spec as ``eval`` does."""
    from llm_envs.agents.spec import build_agent, parse_agent_spec

    spec = parse_agent_spec(f"hf:{path}").with_options(
        {"max_tokens": max_new_tokens, "temperature": 1.0, "device": device}
    )
    return build_agent(spec), "llm_trainers.agents.hf.HFAgent"


# ---------------------------------------------------------------------------- measuring
def _faster(best: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """Keep the fastest of repeated measurements: the one least disturbed by other load."""
    return new if best is None or new["wall_s"] < best["wall_s"] else best


def measure(
    env_id: str, agent: Agent, episodes: int, concurrency: int, max_batch_size: int | None
) -> dict[str, Any]:
    """Play ``episodes`` episodes (seeds 0..episodes-1) and report the rates."""
    runner = Runner(env_id, agent, episodes, seed=0, concurrency=concurrency, max_batch_size=max_batch_size)
    started = time.perf_counter()
    results = runner.run()
    wall = time.perf_counter() - started
    calls = sum(s["calls"] for s in runner.stats)
    requests = sum(s["requests"] for s in runner.stats)
    completion = sum(r.tokens()[1] for r in results)
    return {
        "episodes": len(results),
        "wall_s": wall,
        "episodes_per_s": len(results) / wall,
        "model_calls": calls,
        "model_calls_per_s": calls / wall,
        "decisions_per_s": requests / wall,
        "mean_batch_size": requests / max(1, calls),
        "completion_tokens_per_s": completion / wall,
    }


def markdown_table(rows: list[dict[str, Any]]) -> str:
    header = [
        "concurrency",
        "batched ep/s",
        "1-at-a-time ep/s",
        "speed-up",
        "batched calls/s",
        "1-at-a-time calls/s",
        "mean batch",
        "batched tokens/s",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        b, s = row["batched"], row["one_at_a_time"]
        single = (f"{s['episodes_per_s']:.2f} | {row['speedup']:.2f}x" if s else "- | -")
        lines.append(
            f"| {row['concurrency']} | {b['episodes_per_s']:.2f} | {single} | {b['model_calls_per_s']:.1f} | "
            f"{s['model_calls_per_s']:.1f} | " if s else f"| {row['concurrency']} | {b['episodes_per_s']:.2f} | {single} | "
            f"{b['model_calls_per_s']:.1f} | - | "
        )
        lines[-1] += f"{b['mean_batch_size']:.1f} | {b['completion_tokens_per_s']:.0f} |"
    return "\n".join(lines)


# ---------------------------------------------------------------------------- http: no barrier
HTTP_ENV = "llm/Signalling-v0"
HTTP_ENV_KWARGS = {"rounds": 4}  # 8 decisions per episode, whatever the answers


def latency_of(body: bytes, median_s: float = 0.06, sigma: float = 0.8, cap_s: float = 1.5) -> float:
    """A log-normal reply latency drawn from the request's own bytes (so that both modes see
    the same latency for the same request)."""
    import hashlib
    import random
    import statistics

    seed = int.from_bytes(hashlib.sha256(body).digest()[:8], "big")
    z = statistics.NormalDist().inv_cdf(min(max(random.Random(seed).random(), 1e-9), 1 - 1e-9))
    return min(cap_s, median_s * float(2.718281828459045 ** (sigma * z)))


class LoopbackServer:
    """A minimal OpenAI-compatible chat server on 127.0.0.1 with varied reply latencies."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(latency_of(body))
                payload = json.dumps(
                    {
                        "object": "chat.completion",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "red"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": len(body) // 4, "completion_tokens": 1},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        class Server(ThreadingHTTPServer):
            request_queue_size = 1024  # many clients connect at once

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Lockstep(Agent):
    """The HTTP agent as the runner drove it before per-request dispatch: every pending request
    in one ``act_batch_async`` call, answered all together when the slowest reply is in."""

    def __init__(self, inner: Agent) -> None:
        self.inner = inner
        self.name = inner.name

    def act_batch(self, requests):  # pragma: no cover - the runner calls the async form
        return self.inner.act_batch(requests)

    async def act_batch_async(self, requests):
        return await self.inner.act_batch_async(requests)

    async def aclose(self) -> None:
        await self.inner.aclose()


def measure_http(base_url: str, episodes: int, concurrency: int, lockstep: bool) -> dict[str, Any]:
    from llm_envs.agents import OpenAIHTTPAgent

    http = OpenAIHTTPAgent(base_url, "bench", max_concurrency=concurrency, max_tokens=8, max_retries=0)
    agent: Agent = Lockstep(http) if lockstep else http
    runner = Runner(HTTP_ENV, agent, episodes, seed=0, concurrency=concurrency, env_kwargs=HTTP_ENV_KWARGS)
    started = time.perf_counter()
    results = runner.run()
    wall = time.perf_counter() - started
    own = [sum(float(s["meta"].get("latency_s", 0.0)) for s in r.steps) for r in results]
    durations = [r.duration_s for r in results]
    return {
        "episodes": len(results),
        "wall_s": wall,
        "episodes_per_s": len(results) / wall,
        "mean_episode_s": sum(durations) / len(durations),
        "mean_own_request_s": sum(own) / len(own),
        "episode_over_own_requests": sum(durations) / sum(own),
        "requests": sum(s["requests"] for s in runner.stats),
    }


def http_markdown(rows: list[dict[str, Any]]) -> str:
    header = [
        "concurrency",
        "per-episode ep/s",
        "lockstep ep/s",
        "speed-up",
        "episode time / own request time: per-episode",
        "lockstep",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        a, b = row["per_episode"], row["lockstep"]
        lines.append(
            f"| {row['concurrency']} | {a['episodes_per_s']:.2f} | {b['episodes_per_s']:.2f} | "
            f"{row['speedup']:.2f}x | {a['episode_over_own_requests']:.2f} | {b['episode_over_own_requests']:.2f} |"
        )
    return "\n".join(lines)


def run_http(args: argparse.Namespace) -> None:
    """Per-episode dispatch versus lockstep batches against a varied-latency loopback server."""
    levels = args.concurrency or ([8] if args.quick else [8, 32])
    episodes = args.episodes or (32 if args.quick else 64)
    repeats = min(args.repeats, 2) if args.quick else args.repeats
    server = LoopbackServer()
    try:
        measure_http(server.base_url, 4, 4, lockstep=False)  # warm-up
        rows = []
        for concurrency in levels:
            best: dict[str, dict[str, Any] | None] = {"per_episode": None, "lockstep": None}
            for _ in range(repeats):  # alternate the modes so that other load hits both alike
                best["per_episode"] = _faster(
                    best["per_episode"], measure_http(server.base_url, episodes, concurrency, False)
                )
                best["lockstep"] = _faster(
                    best["lockstep"], measure_http(server.base_url, episodes, concurrency, True)
                )
            per_episode, lockstep = best["per_episode"], best["lockstep"]
            assert per_episode is not None and lockstep is not None
            rows.append(
                {
                    "concurrency": concurrency,
                    "per_episode": per_episode,
                    "lockstep": lockstep,
                    "speedup": per_episode["episodes_per_s"] / lockstep["episodes_per_s"],
                }
            )
            print(
                f"concurrency {concurrency:>3}: per-episode {per_episode['episodes_per_s']:.2f} ep/s, "
                f"lockstep {lockstep['episodes_per_s']:.2f} ep/s",
                file=sys.stderr,
            )
    finally:
        server.close()
    report = {
        "benchmark": "eval_throughput_http",
        "env_id": HTTP_ENV,
        "env_kwargs": HTTP_ENV_KWARGS,
        "latency": "log-normal per request: median 60 ms, sigma 0.8, capped at 1.5 s",
        "episodes_per_measurement": episodes,
        "repeats_best_of": repeats,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1_5_15_min": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "python": platform.python_version(),
        },
        "rows": rows,
    }
    table = http_markdown(rows)
    title = (
        f"{HTTP_ENV} (rounds=4, 8 decisions per episode) against a loopback server with log-normal "
        f"latencies (median 60 ms, capped at 1.5 s), {episodes} episodes per cell, best of {repeats}"
    )
    print(f"\n{title}\n\n{table}")
    out = RESULTS_DIR / "eval_throughput_http.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text(f"# eval_throughput (http)\n\n{title}\n\n{table}\n")
    print(f"\nwrote {out} and {out.with_suffix('.md')}")


# ---------------------------------------------------------------------------- hf: batching
def run_hf(args: argparse.Namespace) -> None:
    """Batched model calls versus one call at a time (the hf part)."""

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    levels = args.concurrency or ([1, 4, 16] if args.quick else [1, 2, 4, 8, 16])
    repeats = min(args.repeats, 2) if args.quick else args.repeats
    default_episodes = args.episodes or (16 if args.quick else 32)
    env_id = pick_env(args.env)
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            model_path = args.model
        else:
            print(
                f"building a tiny random model with a tokenizer trained on {env_id}'s texts...",
                file=sys.stderr,
            )
            model_path = str(build_tiny_model(Path(tmp) / "tiny", env_id))
        agent, agent_kind = make_agent(model_path, args.max_new_tokens, args.device)
        measure(env_id, agent, 4, 4, None)  # warm-up (lazy initialisation, caches)

        rows = []
        for concurrency in levels:
            episodes = args.episodes_per_slot * concurrency if args.episodes_per_slot else default_episodes
            # Alternate the two modes (ABAB...) so that load from elsewhere hits both alike.
            batched, single = None, None
            for _ in range(repeats):
                batched = _faster(batched, measure(env_id, agent, episodes, concurrency, None))
                if not args.batched_only:
                    single = _faster(single, measure(env_id, agent, episodes, concurrency, 1))
            rows.append(
                {
                    "concurrency": concurrency,
                    "episodes": episodes,
                    "batched": batched,
                    "one_at_a_time": single,
                    "speedup": batched["episodes_per_s"] / single["episodes_per_s"] if single else None,
                }
            )
            print(
                f"concurrency {concurrency:>3}: batched {batched['episodes_per_s']:.2f} ep/s"
                + (f", one at a time {single['episodes_per_s']:.2f} ep/s" if single else ""),
                file=sys.stderr,
            )

    report = {
        "benchmark": "eval_throughput",
        "env_id": env_id,
        "agent": agent_kind,
        "model": args.model or "tiny random-weight decoder (2 layers, hidden 64), word-level tokenizer",
        "max_new_tokens": args.max_new_tokens,
        "episodes_per_measurement": args.episodes_per_slot and f"{args.episodes_per_slot} x concurrency" or default_episodes,
        "repeats_best_of": repeats,
        "device": args.device,
        "torch_threads": torch.get_num_threads(),
        "machine": {
            "cpus": os.cpu_count(),
            # Other load disturbs CPU timings; the best of --repeats alternating runs counts.
            "load_average_1_5_15_min": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        },
        "rows": rows,
    }
    table = markdown_table(rows)
    print(
        f"\n{env_id}, {agent_kind}, {rows[-1]['episodes']} episodes in the last cell, "
        f"{args.max_new_tokens} new tokens, device {args.device}\n"
    )
    print(table)
    out = args.out or RESULTS_DIR / "eval_throughput.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text(
        f"# eval_throughput\n\n{env_id}, {agent_kind}, {rows[-1]['episodes']} episodes in the last cell, "
        f"{args.max_new_tokens} new tokens, device {args.device}, {os.cpu_count()} CPUs, "
        f"{torch.get_num_threads()} torch thread(s), best of {repeats} alternating runs, "
        f"load average {os.getloadavg()[0]:.1f} at the end\n\n{table}\n"
    )
    print(f"\nwrote {out} and {out.with_suffix('.md')}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mode", choices=("all", "hf", "http"), default="all", help="which part to run (default: both)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer episodes, repeats and levels")
    parser.add_argument(
        "--env", help="hf: environment id (default: the first of Signalling, PlanPath, Sudoku that plays)"
    )
    parser.add_argument("--model", help="hf: a local model path instead of the tiny random one")
    parser.add_argument("--device", default="cpu", help="hf: cpu (default), cuda, auto")
    parser.add_argument("--episodes", type=int, help="episodes per measurement (default: hf 32, http 64)")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="hf: new tokens per decision")
    parser.add_argument("--concurrency", type=int, nargs="+", help="concurrency levels")
    parser.add_argument(
        "--episodes-per-slot",
        type=int,
        help="hf: play this many episodes per concurrent slot (episodes = N x concurrency) instead of --episodes",
    )
    parser.add_argument(
        "--batched-only",
        action="store_true",
        help="hf: skip the one-at-a-time side (the batched rate at concurrency 1 is one at a time)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per cell; the fastest counts (default 3)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="hf: torch intra-op threads on the CPU (default 1: a tiny model gains nothing "
        "from more, and spinning threads collapse on a busy machine)",
    )
    parser.add_argument(
        "--out", type=Path, help="hf: result file (default benchmarks/results/eval_throughput.json)"
    )
    args = parser.parse_args(argv)
    if args.mode in ("all", "http"):
        run_http(args)
    if args.mode in ("all", "hf"):
        run_hf(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
