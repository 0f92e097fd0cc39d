"""Generated golden tests for memorisable problems (the golden solution computes the answers).

A memorisable problem (:mod:`llm_envs.tasks.memorisable`) pays a lookup table of its prompt's
examples. Adding tests on inputs the prompt does not show, whose expected values the golden
solution computes, makes the table fail them. The inputs are derived deterministically from the
shown examples' arguments (:func:`variants`: integers ±1 and doubled, lists reversed or with an
element dropped or repeated, strings reversed or extended), the golden solution runs on them in
the sandbox, and a generated test is kept only when its expected value is a plain literal (it
survives ``repr`` → ``ast.literal_eval``), the golden solution then passes it under the real
harness, and it expects something other than the lookup table's default.

``python -m llm_envs.tasks.strengthen_memorisable humaneval`` writes the tests of HumanEval's memorisable
problems to ``llm_envs/tasks/data/strengthened_humaneval.json``; the HumanEval source adds them
(``strengthen=True``, the default) so those problems stay in ``train`` as ordinary problems.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llm_envs.tasks.base import Problem
from llm_envs.tasks.memorisable import _call_and_expected, lookup_default, shown_tests

#: Where the generated tests of each source live (problem id -> test snippets).
DATA_DIR = Path(__file__).with_name("data")

#: New tests per problem at most.
MAX_NEW_TESTS = 6


def data_path(source: str) -> Path:
    return DATA_DIR / f"strengthened_{source}.json"


def load_generated(source: str) -> dict[str, list[str]]:
    """The generated tests of ``source`` (``{}`` when none were generated)."""
    path = data_path(source)
    if not path.exists():
        return {}
    return {str(k): [str(t) for t in v] for k, v in json.loads(path.read_text(encoding="utf-8")).items()}


def _variants_of(value: Any) -> Iterator[Any]:
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield from (value + 1, value - 1, value * 2 + 3)
    elif isinstance(value, float):
        yield from (value + 0.5, value * 2)
    elif isinstance(value, str):
        yield from (value[::-1], value + value[:1], value[1:])
    elif isinstance(value, list):
        if value:
            yield from (value[::-1], value[:-1], value + value[:1])
        if value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            yield [v + 1 for v in value]
    elif isinstance(value, tuple):
        yield from (tuple(v) for v in _variants_of(list(value)))


def variants(args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """New argument tuples, each changing one argument of ``args`` (deterministic order)."""
    out = []
    for i, value in enumerate(args):
        for changed in _variants_of(value):
            new = args[:i] + (changed,) + args[i + 1 :]
            if new != args and new not in out:
                out.append(new)
    return out


def _shown_arguments(problem: Problem) -> list[tuple[Any, ...]]:
    names = {"candidate", problem.entry_point or ""}
    found = []
    for test, shown in zip(problem.tests, shown_tests(problem), strict=True):
        if not shown:
            continue
        parsed = _call_and_expected(str(test), names)
        if parsed is None or parsed[0].keywords:
            continue
        try:
            found.append(tuple(ast.literal_eval(a) for a in parsed[0].args))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return found


def _golden_values(sandbox: Any, problem: Problem, calls: list[tuple[Any, ...]]) -> list[str | None]:
    """``repr`` of the golden solution's result on each call (``None``: it raised or the
    result is not a plain literal), from one sandbox run."""
    from llm_envs.verifiers.code import run_program

    program = (
        (problem.setup or "") + "\n" + (problem.solution or "") + "\n"
        "import ast as _ast, json as _json\n"
        f"_calls = {calls!r}\n"
        "_out = []\n"
        "for _args in _calls:\n"
        "    try:\n"
        f"        _r = repr({problem.entry_point}(*_args))\n"
        "        _ast.literal_eval(_r)\n"
        "        _out.append(_r)\n"
        "    except Exception:\n"
        "        _out.append(None)\n"
        "print(_json.dumps(_out))\n"
    )
    result = run_program(sandbox, program)
    try:
        values = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [None] * len(calls)
    return values if isinstance(values, list) and len(values) == len(calls) else [None] * len(calls)


def generate_tests(sandbox: Any, problem: Problem, max_new: int = MAX_NEW_TESTS) -> list[str]:
    """Golden tests on new inputs for a function-style ``problem`` (module docstring); ``[]``
    where none can be made."""
    from llm_envs.verifiers.code import judge

    if problem.style != "function" or not problem.entry_point or not problem.solution:
        return []
    default = lookup_default(problem)
    shown = _shown_arguments(problem)
    seen = {repr(args) for args in shown}
    calls: list[tuple[Any, ...]] = []
    for args in shown:
        for new in variants(args):
            if repr(new) not in seen:
                seen.add(repr(new))
                calls.append(new)
    if not calls:
        return []
    tests = []
    for args, value in zip(calls, _golden_values(sandbox, problem, calls), strict=True):
        if value is None or value == default:
            continue
        arguments = ", ".join(repr(a) for a in args)
        tests.append(f"candidate = {problem.entry_point}\nassert candidate({arguments}) == {value}")
        if len(tests) >= max_new:
            break
    if not tests:
        return []
    report = judge(sandbox, problem, problem.solution, tests)
    return [t for t, r in zip(tests, report.results, strict=True) if r.passed]
