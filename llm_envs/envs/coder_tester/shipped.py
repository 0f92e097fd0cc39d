"""The mutants of the bundled HumanEval problems, chosen before release and shipped with the
package, so that even the first tester step of such a problem anywhere (a fresh machine, an
empty cache) chooses nothing.

Choosing a problem's mutants (:func:`mutants.select_mutants`) runs up to
``max_mutant_candidates`` candidates on the golden tests: on a 2-core VM ~55-70 ms of CPU, more
than the whole of a tester step under the paper's reward (docs/benchmarks.md, issue 35). The
choice depends only on the problem, its golden tests and the options it is keyed by
(:func:`mutants.cache_key`), so the choice for the bundled problems under the default options is
made once before release (:mod:`~llm_envs.envs.coder_tester.make_shipped`) and stored as data:
``shipped_mutants.json`` maps each key to the chosen mutants' positions among the problem's
candidates (:class:`mutants.MutantSource`) and a hash of each mutant's text.

A step uses a shipped choice only where the mutant made at each stored position has the stored
hash (the candidate generator has not changed since); anything else (another option, a task of
your own, a changed generator, ``LLM_ENVS_SHIPPED_MUTANTS=off``) chooses as before, and caches
that choice in memory and on disk. The hashes do not see a change to how candidates are judged
(the guard, the harness): after one, regenerate the table (``python -m
llm_envs.envs.coder_tester.make_shipped``, ~1 minute on 2 cores); the test suite compares a
sample of it with the choice the current code makes
(tests/envs/code_math/test_coder_tester_shipped.py). A choice is the same on every machine
unless a candidate runs close to the time limit of a golden test (``mutant_test_time_s``): the
shipped one is the release machine's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TABLE = Path(__file__).with_name("shipped_mutants.json")
FORMAT = 1

#: The environment configurations whose choices are shipped: the default options on every split
#: of the bundled HumanEval (a memorisable problem's golden tests differ between splits:
#: ``llm_envs.tasks.memorisable``), and its benchmark split.
CONFIGURATIONS: tuple[dict[str, Any], ...] = (
    {"split": "train"},
    {"split": "validation"},
    {"split": "test"},
    {"split": "test", "task_kwargs": {"split_policy": "benchmark"}},
)


def enabled() -> bool:
    """Whether steps use the shipped choices (``LLM_ENVS_SHIPPED_MUTANTS=off`` turns it off)."""
    setting = os.environ.get("LLM_ENVS_SHIPPED_MUTANTS", "on").strip().lower()
    return setting not in ("", "0", "off", "false", "no")


def program_hash(program: str) -> str:
    """What the table stores of a mutant's text."""
    return hashlib.sha256(program.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def table() -> dict[str, list[list[Any]]]:
    """``{key: [[position, text hash], ...]}`` read from :data:`TABLE` (empty where it is
    missing or malformed)."""
    try:
        stored = json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    choices = stored.get("choices") if isinstance(stored, dict) and stored.get("format") == FORMAT else None
    return choices if isinstance(choices, dict) else {}


def lookup(key: str, make: Callable[[list[int]], Sequence[str | None]]) -> tuple[str, ...] | None:
    """The shipped choice for ``key``, its mutants made by ``make(positions)`` (a
    ``mutants.MutantSource``'s ``at``), or ``None`` where there is none, the table is off, or a
    stored hash does not match the mutant made at its position (logged: the candidate generator
    changed; the table needs regenerating)."""
    if not enabled():
        return None
    entry = table().get(key)
    if not isinstance(entry, list) or not all(
        isinstance(item, list) and len(item) == 2 and type(item[0]) is int and isinstance(item[1], str)
        for item in entry
    ):
        return None
    programs = list(make([position for position, _hash in entry]))
    if len(programs) != len(entry) or any(
        program is None or program_hash(program) != digest for program, (_p, digest) in zip(programs, entry)
    ):
        log.warning("the shipped mutants of %s do not match this code's mutants; choosing them", key[:12])
        return None
    if len(set(programs)) != len(programs):
        return None  # a choice never holds a program twice
    return tuple(p for p in programs if p is not None)


def entries(chosen: Sequence[tuple[str, Sequence[str], Sequence[int]]]) -> dict[str, list[list[Any]]]:
    """The table's ``choices`` from ``(key, programs, positions)`` of each chosen problem."""
    return {
        key: [[int(position), program_hash(program)] for program, position in zip(programs, positions)]
        for key, programs, positions in sorted(chosen)
    }
