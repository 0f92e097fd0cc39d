"""``llm-envs serve`` under load and faults, on 127.0.0.1 only.

Three measurements, one table each, JSON in ``benchmarks/results/serve.json``:

1. **Sessions held at once**: a server (``llm-envs serve``, a subprocess) with
   ``--max-sessions`` above the goal; ``--sessions`` WebSocket sessions are opened together
   (asyncio, one connection each), all reset before any steps (so every one is open at once),
   then each plays a whole episode with the reference actions the server exposes. A session is
   *mixed* if the transcript it ends with is not the in-process episode of its own seed, *lost*
   if it did not finish. The server's resident memory is read from /proc.
2. **Step latency added by the server**: the same episodes stepped in-process (``env.step``) and
   through the server (one ``step`` round trip of the sync WebSocket client), side by side in
   this run; p50/p99 of each, and their ratio.
3. **Kill and restart**: a client mid-episode; the server is SIGKILLed; what the client's next
   step raises and how long that takes; the server is restarted on the same port; how long
   until a new ``reset`` succeeds.

    python benchmarks/serve.py                  # 256 sessions, 2000 latency steps
    python benchmarks/serve.py --quick          # 32 sessions, 300 steps
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import llm_envs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "serve.json"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(env_id: str, port: int, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "llm_envs.cli", "serve", env_id, "--port", str(port), *args],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise TimeoutError("the server did not start")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def local_transcript(env_id: str, seed: int) -> str:
    env = llm_envs.make(env_id)
    env.reset(seed=seed)
    while not env.episode_over:
        env.step(env.reference_action(env.agent_selection))
    return env.transcript()


# ------------------------------------------------------------------ 1. sessions at once
async def hold_sessions(url: str, sessions: int, max_steps: int = 200) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    async def request(ws: Any, message: dict[str, Any]) -> dict[str, Any]:
        await ws.send(json.dumps(message))
        reply = json.loads(await asyncio.wait_for(ws.recv(), timeout=120))
        if reply["type"] == "error":
            raise RuntimeError(reply["data"]["message"])
        return reply["data"]

    opened = asyncio.Event()
    ready = 0

    async def one(seed: int) -> str:
        nonlocal ready
        async with connect(url.replace("http", "ws") + "/ws", max_size=None, open_timeout=120) as ws:
            frame = await request(ws, {"type": "reset", "data": {"seed": seed}})
            ready += 1
            if ready == sessions:
                opened.set()
            await opened.wait()  # every session is open before any steps
            for _ in range(max_steps):
                if frame["done"]:
                    break
                state = await request(ws, {"type": "state"})
                frame = await request(ws, {"type": "step", "data": {"agent": frame["observation"]["agent"],
                                                                      "text": state["reference_action"]}})
            return (await request(ws, {"type": "state"}))["transcript"]

    started = time.perf_counter()
    results = await asyncio.gather(*(one(seed) for seed in range(sessions)), return_exceptions=True)
    return {"results": results, "wall_s": time.perf_counter() - started}


def measure_sessions(env_id: str, sessions: int) -> dict[str, Any]:
    port = free_port()
    server = start_server(env_id, port, "--max-sessions", str(sessions + 8), "--expose-reference", "--idle-timeout", "600")
    try:
        rss_before = rss_mib(server.pid)
        run = asyncio.run(hold_sessions(f"http://127.0.0.1:{port}", sessions))
        rss_after = rss_mib(server.pid)
    finally:
        stop(server)
    expected = [local_transcript(env_id, seed) for seed in range(sessions)]
    lost = [i for i, r in enumerate(run["results"]) if isinstance(r, BaseException)]
    mixed = [i for i, r in enumerate(run["results"]) if not isinstance(r, BaseException) and r != expected[i]]
    return {
        "env_id": env_id, "sessions": sessions, "completed": sessions - len(lost), "lost": len(lost),
        "mixed": len(mixed), "wall_s": run["wall_s"], "server_rss_mib_idle": rss_before,
        "server_rss_mib_loaded": rss_after,
        "errors": sorted({repr(r)[:200] for r in run["results"] if isinstance(r, BaseException)}),
    }


# ------------------------------------------------------------------ 2. latency
def measure_latency(env_id: str, steps: int) -> dict[str, Any]:
    from llm_envs.interop.remote import RemoteEnv

    port = free_port()
    server = start_server(env_id, port, "--expose-reference")
    local_times: list[float] = []
    served_times: list[float] = []
    try:
        remote = RemoteEnv(f"http://127.0.0.1:{port}")
        local = llm_envs.make(env_id)
        seed = 0
        while len(local_times) < steps:
            local.reset(seed=seed)
            remote.reset(seed=seed)
            while local.agents and len(local_times) < steps:
                agent = local.agent_selection
                dead = local.terminations[agent] or local.truncations[agent]
                action = None if dead else local.reference_action(agent)
                t0 = time.perf_counter()
                local.step(action)
                t1 = time.perf_counter()
                remote.step(action)
                t2 = time.perf_counter()
                if not dead:
                    local_times.append(t1 - t0)
                    served_times.append(t2 - t1)
            seed += 1
        remote.close()
    finally:
        stop(server)

    def summary(values: list[float]) -> dict[str, float]:
        return {"p50_ms": 1e3 * percentile(values, 0.5), "p99_ms": 1e3 * percentile(values, 0.99),
                "mean_ms": 1e3 * statistics.fmean(values)}

    local_s, served_s = summary(local_times), summary(served_times)
    return {"env_id": env_id, "steps": len(local_times), "in_process": local_s, "served": served_s,
            "ratio_p50": served_s["p50_ms"] / local_s["p50_ms"], "ratio_p99": served_s["p99_ms"] / local_s["p99_ms"],
            "added_p50_ms": served_s["p50_ms"] - local_s["p50_ms"], "added_p99_ms": served_s["p99_ms"] - local_s["p99_ms"]}


# ------------------------------------------------------------------ 3. kill and restart
def measure_kill_restart(env_id: str) -> dict[str, Any]:
    from llm_envs.interop.remote import RemoteEnv

    port = free_port()
    server = start_server(env_id, port)
    env = RemoteEnv(f"http://127.0.0.1:{port}")
    env.reset(seed=0)
    server.send_signal(signal.SIGKILL)
    server.wait(timeout=30)
    t0 = time.perf_counter()
    try:
        env.step("red")
        seen = "an observation (wrong: the server is dead)"
    except Exception as exc:  # what the client sees is the measurement
        seen = f"{type(exc).__name__}: {exc}"
    error_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    server = start_server(env_id, port)
    restart_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    env.reset(seed=0)
    reconnect_s = time.perf_counter() - t2
    env.close()
    stop(server)
    return {"env_id": env_id, "client_sees": seen, "error_after_s": error_s, "server_restart_s": restart_s,
            "reset_after_restart_s": reconnect_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--env", default="llm/Signalling-v0")
    parser.add_argument("--latency-env", action="append", help="environments for the latency table (repeatable)")
    args = parser.parse_args(argv)
    sessions = args.sessions or (32 if args.quick else 256)
    steps = args.steps or (300 if args.quick else 2000)
    latency_envs = args.latency_env or ["llm/Signalling-v0", "llm/Sudoku-v0"]

    held = measure_sessions(args.env, sessions)
    print(f"\n1. sessions held at once ({held['env_id']}, one server process, loopback)")
    print(f"   sessions {held['sessions']}  completed {held['completed']}  lost {held['lost']}  mixed {held['mixed']}  "
          f"wall {held['wall_s']:.1f} s  server RSS {held['server_rss_mib_idle']:.0f} -> {held['server_rss_mib_loaded']:.0f} MiB")
    for error in held["errors"]:
        print(f"   error: {error}")

    latency = [measure_latency(env_id, steps) for env_id in latency_envs]
    print("\n2. step latency (ms): in-process env.step vs one round trip to the server")
    print(f"   {'environment':24} {'steps':>6} {'local p50':>10} {'local p99':>10} {'served p50':>11} {'served p99':>11} {'added p50':>10} {'ratio p50':>10}")
    for row in latency:
        print(f"   {row['env_id']:24} {row['steps']:>6} {row['in_process']['p50_ms']:>10.3f} {row['in_process']['p99_ms']:>10.3f} "
              f"{row['served']['p50_ms']:>11.3f} {row['served']['p99_ms']:>11.3f} {row['added_p50_ms']:>10.3f} {row['ratio_p50']:>10.1f}")

    fault = measure_kill_restart(args.env)
    print("\n3. server killed (SIGKILL) mid-episode, then restarted on the same port")
    print(f"   the client's next step raises after {fault['error_after_s'] * 1e3:.1f} ms: {fault['client_sees'][:160]}")
    print(f"   server restart {fault['server_restart_s']:.1f} s; the client's reset() reconnects in {fault['reset_after_restart_s'] * 1e3:.0f} ms")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                               "load_avg": os.getloadavg()},
                                   "sessions": held, "latency": latency, "kill_restart": fault}, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")
    return 0 if held["lost"] == 0 and held["mixed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
