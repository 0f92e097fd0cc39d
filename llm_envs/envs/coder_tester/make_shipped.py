"""Regenerate ``shipped_mutants.json``, the mutant choices shipped with the package
(:mod:`llm_envs.envs.coder_tester.shipped`): ``python -m llm_envs.envs.coder_tester.make_shipped``
chooses the mutants of every problem of ``shipped.CONFIGURATIONS`` with this code (~1 minute on 2
cores) and writes the table. For maintainers, after a change to the candidates, the guard or the
harness that judges them (the test suite compares a sample with this code's choice)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import sandboxes
from llm_envs.envs.coder_tester import mutants, shipped
from llm_envs.envs.coder_tester.env import CoderTesterEnv


def regenerate(*, threads: int | None = None, backend: str = "auto") -> dict[str, Any]:
    """Choose the mutants of every problem of :data:`shipped.CONFIGURATIONS` with this code (nothing
    shipped, nothing cached read) and write :data:`shipped.TABLE`. Returns what was written."""
    saved = {name: os.environ.get(name) for name in ("LLM_ENVS_SHIPPED_MUTANTS", "LLM_ENVS_MUTANT_CACHE")}
    with tempfile.TemporaryDirectory(prefix="shipped-mutants-") as directory:
        os.environ["LLM_ENVS_SHIPPED_MUTANTS"] = "off"
        os.environ["LLM_ENVS_MUTANT_CACHE"] = directory
        mutants.clear_cache()
        sandbox = sandboxes.make_sandbox(backend)
        try:
            for options in shipped.CONFIGURATIONS:
                env = CoderTesterEnv(sandbox=sandbox, **options)
                env.prepare(threads=threads)
        finally:
            sandbox.close()
            mutants.clear_cache()
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        chosen = []
        for path in sorted(Path(directory).glob("*.json")):
            stored = json.loads(path.read_text(encoding="utf-8"))
            positions = stored.get("positions")
            if positions is None or len(positions) != len(stored["mutants"]):
                raise RuntimeError(f"the choice in {path.name} has no positions")
            chosen.append((stored["key"], stored["mutants"], positions))
    about = "python -m llm_envs.envs.coder_tester.make_shipped"
    written = {"format": shipped.FORMAT, "about": about, "choices": shipped.entries(chosen)}
    # One problem a line: a regenerated table's diff shows which choices changed.
    lines = [f"{json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}" for key, value in written["choices"].items()]
    text = '{"format": %d, "about": %s, "choices": {\n%s\n}}\n' % (shipped.FORMAT, json.dumps(about), ",\n".join(lines))
    shipped.TABLE.write_text(text, encoding="utf-8")
    shipped.table.cache_clear()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="Regenerate " + shipped.TABLE.name + " (the shipped mutant choices).")
    parser.add_argument("--threads", type=int, default=None, help="problems at once (default: the sandbox's)")
    parser.add_argument("--backend", default="auto", help="sandbox backend (default auto)")
    args = parser.parse_args()
    written = regenerate(threads=args.threads, backend=args.backend)
    choices = written["choices"]
    print(f"wrote {shipped.TABLE}: {len(choices)} problems, {sum(len(c) for c in choices.values())} mutants")


if __name__ == "__main__":
    main()
