"""``llm-envs demo``: every environment with its reference agents and the random agent, one table."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ._common import table


def cmd_demo(args: argparse.Namespace) -> int:
    from llm_envs.evaluation.evaluate import DEMO_HEADER, run_demo

    started = time.perf_counter()
    print(
        f"demo: every environment, {args.episodes} episodes each with its reference agents and "
        f"with the random agent (seed {args.seed})"
    )
    rows = run_demo(
        episodes=args.episodes,
        concurrency=args.concurrency,
        seed=args.seed,
        out_dir=args.out,
        env_ids=args.env or None,
    )
    print()
    print(table([r.cells() for r in rows], DEMO_HEADER))
    played = sum(1 for r in rows if r.success is not None)
    print(f"\n{played} runs in {time.perf_counter() - started:.1f}s; results under {args.out}/")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("demo", help="every environment with reference and random agents, one table")
    p.add_argument("--episodes", type=int, default=20, help="episodes per environment and agent (default 20)")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/demo", help="results directory (default: runs/demo)")
    p.add_argument("--env", action="append", help="only these environments (repeatable)")
    p.set_defaults(func=cmd_demo)
