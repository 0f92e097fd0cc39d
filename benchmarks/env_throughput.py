"""Environment throughput: steps per second with the reference agents, and the cost of clone().

For every registered environment (``llm_envs.env_ids()``) this plays episodes with the
reference agents and measures

* **steps/s**: live ``env.step`` calls per second of time spent inside ``env.step``;
* **sandbox**: the part of that time spent inside the sandbox (the environment's sandbox object
  is wrapped in a timer), shown apart, with the steps/s the environment would reach without it;
* **agent**: time the scripted reference agent needs to choose an action (not part of steps/s);
* **clone()**: the cost of ``env.clone()`` at every live step of every episode (AT-GRPO's tree
  sampling clones K times per agent-turn), and ``reset()``.

Environments that fail to construct or have no reference agent are skipped with a printed
note (other environments are being built concurrently). Results are printed as a table and
written as JSON to ``benchmarks/results/env_throughput.json``.

    python benchmarks/env_throughput.py            # 20 episodes per environment
    python benchmarks/env_throughput.py --quick    # 3 episodes per environment
    python benchmarks/env_throughput.py --envs llm/Sudoku-v0 llm/PlanPath-v0
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import llm_envs

RESULTS = Path(__file__).resolve().parent / "results" / "env_throughput.json"


class TimedSandbox:
    """Wraps a sandbox and measures the wall time during which at least one call is running.

    Overlapping calls (an environment may run two programs at once from threads) count once:
    the clock runs from the moment the first call starts until the last running one ends.
    Everything else (attributes) is forwarded; helpers such as
    ``sandboxes.run_function_tests(sb, ...)`` go through ``run``/``run_batch`` and are timed.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.runs = 0
        self._active = 0
        self._since = 0.0
        self._lock = threading.Lock()

    def _enter(self, runs: int) -> None:
        with self._lock:
            if self._active == 0:
                self._since = time.perf_counter()
            self._active += 1
            self.runs += runs

    def _exit(self) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                self.seconds += time.perf_counter() - self._since

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self._enter(1)
        try:
            return self.inner.run(*args, **kwargs)
        finally:
            self._exit()

    def run_batch(self, jobs: Any, *args: Any, **kwargs: Any) -> Any:
        jobs = list(jobs)
        self._enter(len(jobs))
        try:
            return self.inner.run_batch(jobs, *args, **kwargs)
        finally:
            self._exit()

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        self._enter(1)
        try:
            return await self.inner.arun(*args, **kwargs)
        finally:
            self._exit()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def make_env(env_id: str, sandbox: TimedSandbox) -> tuple[Any, bool]:
    """The environment with the timed sandbox if it accepts one; ``(env, sandbox_timed)``."""
    try:
        return llm_envs.make(env_id, sandbox=sandbox), True
    except TypeError as error:
        if "sandbox" not in str(error):
            raise
    return llm_envs.make(env_id), False


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def play_reference_episode(env: Any, seed: int) -> None:
    env.reset(seed=seed)
    for agent in env.agent_iter(max_iter=10_000):
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else env.reference_action(agent))


def bench_env(env_id: str, episodes: int, sandbox: TimedSandbox) -> dict[str, Any]:
    """Play ``episodes`` reference episodes of ``env_id`` and time them."""
    env, timed = make_env(env_id, sandbox)
    # One unmeasured episode first: imports, lazily built tables and warm sandbox workers.
    play_reference_episode(env, seed=10**6)
    sandbox.seconds, sandbox.runs = 0.0, 0
    step_s = agent_s = reset_s = 0.0
    steps = 0
    clone_us: list[float] = []
    successes: list[float] = []
    for seed in range(episodes):
        start = time.perf_counter()
        env.reset(seed=seed)
        reset_s += time.perf_counter() - start
        for agent in env.agent_iter(max_iter=10_000):
            _, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            start = time.perf_counter()
            twin = env.clone()
            clone_us.append((time.perf_counter() - start) * 1e6)
            del twin
            start = time.perf_counter()
            action = env.reference_action(agent)
            agent_s += time.perf_counter() - start
            start = time.perf_counter()
            env.step(action)
            step_s += time.perf_counter() - start
            steps += 1
        successes.append(float(env.episode_metrics().get("success", 0.0)))
    env.close()
    sandbox_s = sandbox.seconds if timed else 0.0
    host_s = max(step_s - sandbox_s, 1e-12)
    return {
        "env_id": env_id,
        "episodes": episodes,
        "steps": steps,
        "steps_per_s": steps / step_s if step_s > 0 else float("inf"),
        "steps_per_s_without_sandbox": steps / host_s,
        "step_ms": 1e3 * step_s / max(steps, 1),
        "sandbox_timed": timed,
        "sandbox_runs": sandbox.runs if timed else None,
        "sandbox_ms_per_step": 1e3 * sandbox_s / max(steps, 1) if timed else None,
        "sandbox_share": sandbox_s / step_s if timed and step_s > 0 else None,
        "agent_ms_per_step": 1e3 * agent_s / max(steps, 1),
        "reset_ms": 1e3 * reset_s / episodes,
        "clone_us_mean": statistics.fmean(clone_us) if clone_us else float("nan"),
        "clone_us_p50": percentile(clone_us, 0.5),
        "clone_us_p90": percentile(clone_us, 0.9),
        "reference_success": statistics.fmean(successes) if successes else float("nan"),
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'environment':<28} {'eps':>4} {'steps':>6} {'steps/s':>9} {'no-sbx/s':>10} "
        f"{'sbx ms/st':>9} {'sbx %':>6} {'agent ms':>8} {'reset ms':>8} {'clone us':>9} "
        f"{'clone p90':>9} {'success':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        sbx_ms = f"{r['sandbox_ms_per_step']:.2f}" if r["sandbox_timed"] else "n/a"
        sbx_pct = f"{100 * r['sandbox_share']:.0f}" if r["sandbox_timed"] else "n/a"
        print(
            f"{r['env_id']:<28} {r['episodes']:>4} {r['steps']:>6} {r['steps_per_s']:>9.1f} "
            f"{r['steps_per_s_without_sandbox']:>10.1f} {sbx_ms:>9} {sbx_pct:>6} "
            f"{r['agent_ms_per_step']:>8.2f} {r['reset_ms']:>8.2f} {r['clone_us_mean']:>9.1f} "
            f"{r['clone_us_p90']:>9.1f} {r['reference_success']:>7.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 episodes per environment")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per environment")
    parser.add_argument("--envs", nargs="*", default=None, help="environment ids (default: all)")
    parser.add_argument("--sandbox", default="auto", help="sandbox spec (default: auto)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="JSON output path")
    args = parser.parse_args(argv)
    episodes = args.episodes or (3 if args.quick else 20)

    import sandboxes

    inner = sandboxes.shared_sandbox(args.sandbox)
    describe = getattr(inner, "describe", None)
    backend = describe() if callable(describe) else type(inner).__name__
    sandbox = TimedSandbox(inner)
    env_ids = args.envs or llm_envs.env_ids()
    print(f"env throughput: {len(env_ids)} environment(s), {episodes} episode(s) each")
    print(f"sandbox: {backend}")
    rows, skipped = [], {}
    for env_id in env_ids:
        try:
            rows.append(bench_env(env_id, episodes, sandbox))
        except Exception as error:  # noqa: BLE001 - report and go on with the others
            reason = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            skipped[env_id] = reason
            print(f"  skipped {env_id}: {reason}")
            if os.environ.get("BENCH_DEBUG"):
                traceback.print_exc()
    print()
    print_table(rows)
    print(
        "\nsteps/s: live env.step calls per second of time inside env.step (sandbox included); "
        "no-sbx/s: the same without the time inside sandbox calls; agent ms: the reference "
        "agent's own time per step (not in steps/s); clone us: env.clone() at every live step."
    )
    result = {
        "benchmark": "env_throughput",
        "quick": args.quick,
        "episodes_per_env": episodes,
        "sandbox": backend,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": rows,
        "skipped": skipped,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
