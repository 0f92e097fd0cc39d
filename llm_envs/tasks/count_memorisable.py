"""``python -m llm_envs.tasks.count_memorisable SOURCE``: count a code source's memorisable problems.

Loads every problem of the source (by default its benchmark split: all problems, memorisable
ones kept) and prints how many a lookup table of the prompt's examples passes
(:mod:`llm_envs.tasks.memorisable`), with their ids: the numbers in docs/tasks.md.
"""

from __future__ import annotations

import argparse
import sys

from llm_envs.tasks import load_task_source
from llm_envs.tasks.base import DatasetUnavailableError
from llm_envs.tasks.memorisable import count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llm_envs.tasks.count_memorisable", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a code task source: humaneval, mbpp, apps, code_contests, livecodebench")
    parser.add_argument("--split", default="test", help="default: test")
    parser.add_argument("--split-policy", default="benchmark", help="default: benchmark (every problem as test)")
    parser.add_argument("--path", help="a local copy in the hub schema (hub sources)")
    args = parser.parse_args(argv)
    kwargs: dict = {"split_policy": args.split_policy, "keep_memorisable": True}
    if args.path:
        kwargs["path"] = args.path
    try:
        source = load_task_source(args.source, split=args.split, **kwargs)
    except (KeyError, ValueError, TypeError, OSError, DatasetUnavailableError) as exc:  # a typo, no data: one line
        parser.exit(2, f"error: {str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else exc}\n")
    seen, ids = count(source)
    print(f"{args.source} ({args.split}, {args.split_policy}): {len(ids)} of {seen} problems are memorisable")
    for problem_id in ids:
        print(f"  {problem_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
