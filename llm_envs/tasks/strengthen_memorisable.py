"""``python -m llm_envs.tasks.strengthen_memorisable humaneval``: generate golden tests for the
memorisable problems of a source and write its data file (:mod:`llm_envs.tasks.strengthen`).

Deterministic: the same data and the same golden solutions give the same file. It runs the
golden solutions in the sandbox (``--backend``).
"""

from __future__ import annotations

import json
import sys

from llm_envs.tasks.memorisable import is_memorisable
from llm_envs.tasks.strengthen import DATA_DIR, data_path, generate_tests


def main(argv: list[str] | None = None) -> int:
    """Generate the tests of a source's memorisable problems and write its data file."""
    import argparse

    import sandboxes
    from llm_envs.tasks import load_task_source

    parser = argparse.ArgumentParser(prog="python -m llm_envs.tasks.strengthen_memorisable", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", choices=["humaneval"], help="the source (HumanEval runs offline)")
    parser.add_argument("--backend", default="auto", help="sandbox backend (default: auto)")
    args = parser.parse_args(argv)
    source = load_task_source(args.source, split="test", split_policy="benchmark", keep_memorisable=True,
                              strengthen=False)
    sandbox = sandboxes.shared_sandbox(args.backend)
    generated: dict[str, list[str]] = {}
    for problem in source:
        if not is_memorisable(problem):
            continue
        tests = generate_tests(sandbox, problem)
        print(f"{problem.id}: {len(tests)} generated test(s)")
        if tests:
            generated[problem.id] = tests
    DATA_DIR.mkdir(exist_ok=True)
    data_path(args.source).write_text(json.dumps(generated, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {data_path(args.source)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
