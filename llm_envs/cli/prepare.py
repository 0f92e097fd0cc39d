"""``llm-envs prepare ENV``: an environment's per-problem work done before training.

Some environments pay a cost on the first episode of each problem and keep the result for every
later episode and process; this command pays it for a whole split at once, spread over the
sandbox's workers, so that no training step pays it (``TextEnv.prepare``). CoderTester chooses
each problem's mutants (the wrong programs of its tester reward) and stores them in the disk
cache (``$LLM_ENVS_MUTANT_CACHE``, default ``~/.cache/llm_envs/mutants``), where a training
run with the same options finds them::

    llm-envs prepare llm/CoderTester-v0                 # the train split
    llm-envs prepare llm/CoderTester-v0 --split test --env-arg task=mbpp

An environment without such work prints that there is nothing to prepare. Exit status 3 where
a sandbox failure stopped it (what was prepared before is kept: run it again to finish).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ._common import EXIT_INCOMPLETE, CLIError, env_kwargs, resolve_env


def cmd_prepare(args: argparse.Namespace) -> int:
    if args.threads is not None and args.threads < 1:
        raise CLIError(f"--threads must be >= 1, got {args.threads}")
    if args.problems is not None and args.problems < 1:
        raise CLIError(f"--problems must be >= 1, got {args.problems}")
    import llm_envs
    from llm_envs.core.errors import InfrastructureError
    from llm_envs.evaluation.evaluate import env_supports_split, resolve_split

    entry = resolve_env(args.env_id)
    try:
        split = args.split or ("train" if env_supports_split(entry.id) else None)
        kwargs = resolve_split(entry.id, split, env_kwargs(args.env_arg))
        if args.backend:
            kwargs["sandbox"] = args.backend
        env = llm_envs.make(entry.id, **kwargs)
    except (TypeError, ValueError, ImportError) as exc:
        raise CLIError(f"cannot create {entry.id}: {exc}") from exc
    inner = env.unwrapped
    try:
        source = getattr(inner, "task_source", None)
        available = len(source) if source is not None else None
        problems = None
        if args.problems is not None:
            problems = range(min(args.problems, available) if available is not None else args.problems)
        started = time.perf_counter()
        shown = [started]

        def progress(finished: int, total: int) -> None:
            now = time.perf_counter()
            if now - shown[0] >= 5.0 and finished < total:  # a line every few seconds on long splits
                shown[0] = now
                print(f"prepared {finished}/{total} problems ({now - started:.0f} s)", file=sys.stderr, flush=True)

        try:
            done = inner.prepare(problems, threads=args.threads, progress=progress)
        except InfrastructureError as exc:
            print(f"error: {exc}\nthe problems prepared before it are kept; run the command again to finish",
                  file=sys.stderr)
            return EXIT_INCOMPLETE
        seconds = time.perf_counter() - started
    finally:
        env.close()
    where = f"{entry.id}" + (f" ({kwargs['split']} split)" if "split" in kwargs else "")
    if not done:
        print(f"{where}: nothing to prepare")
        return 0
    counts = ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in done.items())
    print(f"{where}: {counts}; {seconds:.1f} s", file=sys.stdout)
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "prepare",
        help="do an environment's per-problem work before training (CoderTester: choose the mutants)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("env_id", help="environment id, e.g. llm/CoderTester-v0")
    p.add_argument("--split", help="the data split (default: train, where the environment has splits)")
    p.add_argument("--problems", type=int, metavar="N", help="only the split's first N problems")
    p.add_argument("--threads", type=int, help="problems prepared at once (default: the sandbox's concurrency)")
    p.add_argument("--backend", help="sandbox backend: bwrap, process, docker (default: the environment's)")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment option (repeatable)")
    p.set_defaults(func=cmd_prepare)
