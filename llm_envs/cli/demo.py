"""``llm-envs demo``: every environment with its reference agents and the random agent, one table."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ._common import CLIError, resolve_env, seed_value, table


def cmd_demo(args: argparse.Namespace) -> int:
    from llm_envs.evaluation.evaluate import DEMO_HEADER, run_demo

    if args.episodes < 1:
        raise CLIError(f"--episodes must be >= 1, got {args.episodes}")
    if args.concurrency < 1:
        raise CLIError(f"--concurrency must be >= 1, got {args.concurrency}")
    env_ids = [resolve_env(env_id).id for env_id in args.env] if args.env else None
    started = time.perf_counter()
    print(
        f"demo: {'every environment' if env_ids is None else ', '.join(env_ids)}, {args.episodes} episodes "
        "each with its reference agents and "
        f"with the random agent (seed {args.seed})"
    )
    rows = run_demo(
        episodes=args.episodes,
        concurrency=args.concurrency,
        seed=args.seed,
        out_dir=args.out,
        env_ids=env_ids,
    )
    print()
    print(table([r.cells() for r in rows], DEMO_HEADER))
    played = sum(1 for r in rows if r.success is not None)
    print(f"\n{played} runs in {time.perf_counter() - started:.1f}s; results under {args.out}/")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("demo", help="every environment with reference and random agents, one table")
    p.add_argument("--episodes", type=int, default=20, help="episodes per environment and agent (default 20)")
    p.add_argument(
        "--concurrency", type=int, default=4, help="environment instances in play at once (default 4)"
    )
    p.add_argument("--seed", type=seed_value, default=0, help="episode i is played from seed SEED+i (default 0)")
    p.add_argument("--out", default="runs/demo", help="results directory (default: runs/demo)")
    p.add_argument("--env", action="append", metavar="ENV", help="only these environments (repeatable)")
    p.set_defaults(func=cmd_demo)
