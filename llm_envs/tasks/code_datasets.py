"""Code benchmarks from the Hugging Face Hub (or local copies in the same schema).

==================  ======================================  =================  ====================
name                hub id (config / files)                 splits             style
==================  ======================================  =================  ====================
``mbpp``            ``google-research-datasets/mbpp``       train/validation/  function (asserts)
                    (``full``; ``sanitized`` optional)      test (+ prompt)
``apps``            ``codeparrot/apps`` (``train.jsonl``,   train/test         stdin/stdout
                    ``test.jsonl``)
``code_contests``   ``deepmind/code_contests``              train/valid/test   stdin/stdout
``livecodebench``   ``livecodebench/code_generation_lite``  test               stdin/stdout
                    (``test6.jsonl`` = ``v6`` by default)
==================  ======================================  =================  ====================

Schemas (the fields read; a local JSONL/parquet copy must have them):

* **mbpp** ``full``: ``task_id`` (int), ``text`` (str), ``code`` (str), ``test_list`` (list of
  ``assert`` lines), ``test_setup_code`` (str). ``sanitized``: ``prompt`` instead of ``text``,
  ``test_imports`` (list of str) instead of ``test_setup_code``. Golden tests: ``test_list``; the
  first one is shown in the prompt as an example of the call (as in the MBPP paper's prompts).
  The entry point is the function that ``test_list[0]`` calls.
* **apps**: ``id`` (or ``problem_id``), ``question``, ``solutions`` (JSON text: list of Python
  programs), ``input_output`` (JSON text: ``{"inputs": [...], "outputs": [...], "fn_name"?}``),
  ``difficulty``, ``url``, ``starter_code``. Only stdin/stdout problems (no ``fn_name``) with at
  least one test are served; with ``require_solution=True`` (default) only those with a golden
  program. The hub repo has no loader that ``datasets`` 4+ runs, so its JSONL files are read.
* **code_contests**: ``name``, ``description``, ``public_tests`` / ``private_tests`` /
  ``generated_tests`` (``{"input": [str], "output": [str]}``), ``solutions``
  (``{"language": [int], "solution": [str]}``; language 3 = Python 3), ``difficulty``,
  ``time_limit`` (``{"seconds", "nanos"}``), ``source``, ``cf_rating``. Golden tests: public +
  private (+ generated with ``include_generated=True``); golden solution: the first Python 3
  solution (problems without one are skipped when ``require_solution=True``).
* **livecodebench**: ``question_id``, ``question_title``, ``question_content``, ``platform``,
  ``difficulty``, ``contest_date``, ``starter_code``, ``public_test_cases`` (JSON text: list of
  ``{"input", "output", "testtype"}``), ``private_test_cases`` (JSON text, or base64 of a
  zlib-compressed pickle of that JSON text: decoded with an unpickler that refuses every
  class, so a crafted file cannot run code), ``metadata`` (JSON text). Only ``stdin`` problems
  are served. LiveCodeBench ships **no golden solutions**: the coder-only variant works, the
  tester reward and the reference coder do not (the environment says so).
"""

from __future__ import annotations

import ast
import base64
import io
import json
import pickle
import zlib
from collections.abc import Mapping
from typing import Any

from sandboxes import parse_python

from llm_envs.tasks.base import Problem, register_task_source
from llm_envs.tasks.hub import HubSpec, Row, hub_factory

# ---------------------------------------------------------------------------------------------
# helpers


# Builtins that MBPP tests wrap around the call under test: `assert set(f(x)) == ...`.
_WRAPPERS = frozenset(
    {
        "set",
        "sorted",
        "list",
        "tuple",
        "abs",
        "round",
        "len",
        "str",
        "int",
        "float",
        "math",
    }
)


def called_function(test: str) -> str | None:
    """The name of the first plain function called in an assertion (``assert f(1) == 2`` -> f)."""
    try:
        tree = parse_python(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id not in _WRAPPERS
        ):
            return node.func.id
    return None


def defined_function(code: str) -> str | None:
    """The name of the first top-level function defined in ``code``."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node.name
    return None


def _as_text(value: Any) -> str:
    """A stdin/stdout field as text (APPS sometimes stores a list of lines)."""
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value) + ("\n" if value else "")
    return "" if value is None else str(value)


def _load_json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# MBPP


def _mbpp_text(row: Row) -> str:
    return str(row.get("text") or row.get("prompt") or "").strip()


def _mbpp_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    tests = tuple(str(t) for t in row["test_list"])
    entry_point = called_function(tests[0]) or defined_function(str(row["code"]))
    setup = row.get("test_setup_code")
    if not setup and row.get("test_imports"):
        setup = "\n".join(str(line) for line in row["test_imports"])
    prompt = (
        f"{_mbpp_text(row)}\nYour code should pass tests like this one:\n{tests[0]}"
    )
    return Problem(
        id=f"mbpp/{row.get('task_id', index)}",
        prompt=prompt,
        split=split,
        solution=str(row["code"]),
        tests=tests,
        style="function",
        entry_point=entry_point,
        setup=str(setup or ""),
        metadata={"source": "mbpp"},
    )


MBPP = HubSpec(
    name="mbpp",
    repo="google-research-datasets/mbpp",
    config="full",
    hub_splits=("train", "validation", "test", "prompt"),
    official_splits={"train": "train", "validation": "validation", "test": "test"},
    schema=(
        "full: {'task_id': int, 'text': str, 'code': str, 'test_list': list[str], "
        "'test_setup_code': str, 'challenge_test_list': list[str]}; sanitized: {'task_id', "
        "'prompt', 'code', 'test_imports': list[str], 'test_list': list[str]}"
    ),
    convert=_mbpp_convert,
    key=_mbpp_text,
    keep=lambda row, options: bool(row.get("test_list")) and bool(_mbpp_text(row)),
    default_options={"config": "full"},
)


# ---------------------------------------------------------------------------------------------
# APPS


def _apps_io(row: Row) -> dict[str, Any] | None:
    io_spec = _load_json(row.get("input_output"))
    return io_spec if isinstance(io_spec, dict) else None


def _apps_solutions(row: Row) -> list[str]:
    solutions = _load_json(row.get("solutions"))
    return (
        [s for s in solutions if isinstance(s, str) and s.strip()]
        if isinstance(solutions, list)
        else []
    )


def _apps_keep(row: Row, options: Mapping[str, Any]) -> bool:
    io_spec = _apps_io(row)
    if io_spec is None or io_spec.get("fn_name") or not io_spec.get("inputs"):
        return False
    if len(io_spec.get("inputs", [])) != len(io_spec.get("outputs", [])):
        return False
    return bool(_apps_solutions(row)) or not options.get("require_solution", True)


def _apps_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    io_spec = _apps_io(row) or {}
    tests = tuple(
        (_as_text(i), _as_text(o))
        for i, o in zip(io_spec.get("inputs", []), io_spec.get("outputs", []))
    )
    solutions = _apps_solutions(row)
    problem_id = row.get("problem_id", row.get("id", index))
    return Problem(
        id=f"apps/{problem_id}",
        prompt=str(row["question"]).strip(),
        split=split,
        solution=solutions[0] if solutions else None,
        tests=tests,
        style="io",
        metadata={
            "source": "apps",
            "difficulty": str(row.get("difficulty", "")),
            "url": str(row.get("url", "")),
        },
    )


APPS = HubSpec(
    name="apps",
    repo="codeparrot/apps",
    config=None,
    hub_splits=("train", "test"),
    official_splits={"train": "train", "test": "test"},
    schema=(
        "{'id' (or 'problem_id'): int, 'question': str, 'solutions': JSON str of list[str], "
        "'input_output': JSON str of {'inputs': list, 'outputs': list, 'fn_name'?: str}, "
        "'difficulty': str, 'url': str, 'starter_code': str}"
    ),
    convert=_apps_convert,
    key=lambda row: str(row["question"]),
    keep=_apps_keep,
    data_files=lambda options: {
        "train": ["hf://datasets/codeparrot/apps/train.jsonl"],
        "test": ["hf://datasets/codeparrot/apps/test.jsonl"],
    },
    default_options={"require_solution": True},
)


# ---------------------------------------------------------------------------------------------
# CodeContests

_PYTHON3 = 3  # deepmind/code_contests Language enum: 0 unknown, 1 Python 2, 2 C++, 3 Python 3, 4 Java


def _cc_tests(row: Row, options: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    groups = ["public_tests", "private_tests"] + (
        ["generated_tests"] if options.get("include_generated") else []
    )
    tests: list[tuple[str, str]] = []
    for group in groups:
        block = row.get(group) or {}
        inputs, outputs = block.get("input") or [], block.get("output") or []
        tests.extend((str(i), str(o)) for i, o in zip(inputs, outputs))
    return tuple(tests)


def _cc_python3(row: Row) -> str | None:
    block = row.get("solutions") or {}
    for language, solution in zip(
        block.get("language") or [], block.get("solution") or []
    ):
        if language == _PYTHON3 and solution and solution.strip():
            return str(solution)
    return None


def _cc_keep(row: Row, options: Mapping[str, Any]) -> bool:
    if not _cc_tests(row, options):
        return False
    return _cc_python3(row) is not None or not options.get("require_solution", True)


def _cc_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    time_limit = row.get("time_limit") or {}
    seconds = None
    if isinstance(time_limit, dict) and time_limit.get("seconds") is not None:
        seconds = (
            float(time_limit.get("seconds") or 0)
            + float(time_limit.get("nanos") or 0) / 1e9
        )
    return Problem(
        id=f"code_contests/{row.get('name', index)}",
        prompt=str(row["description"]).strip(),
        split=split,
        solution=_cc_python3(row),
        tests=_cc_tests(row, options),
        style="io",
        metadata={
            "source": "code_contests",
            "difficulty": row.get("difficulty"),
            "cf_rating": row.get("cf_rating"),
            "time_limit_s": seconds,
        },
    )


CODE_CONTESTS = HubSpec(
    name="code_contests",
    repo="deepmind/code_contests",
    config=None,
    hub_splits=("train", "valid", "test"),
    official_splits={"train": "train", "validation": "valid", "test": "test"},
    schema=(
        "{'name': str, 'description': str, 'public_tests'/'private_tests'/'generated_tests': "
        "{'input': list[str], 'output': list[str]}, 'solutions': {'language': list[int], "
        "'solution': list[str]} (3 = Python 3), 'difficulty': int, 'time_limit': {'seconds': "
        "int, 'nanos': int}, 'cf_rating': int}"
    ),
    convert=_cc_convert,
    key=lambda row: str(row["description"]),
    keep=_cc_keep,
    default_options={"require_solution": True, "include_generated": False},
    scan_fields=(
        "description",
        "public_tests",
        "private_tests",
        "generated_tests",
        "solutions",
    ),
)


# ---------------------------------------------------------------------------------------------
# LiveCodeBench


class _NoClassesUnpickler(pickle.Unpickler):
    """Unpickles plain data only: any class or function reference is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name} from a dataset file"
        )


def decode_lcb_tests(field: Any) -> list[dict[str, Any]]:
    """LiveCodeBench test cases from plain JSON text or base64(zlib(pickle(JSON text)))."""
    if isinstance(field, list):
        return [t for t in field if isinstance(t, dict)]
    if not isinstance(field, str) or not field.strip():
        return []
    decoded = _load_json(field)
    if decoded is None:
        try:
            raw = zlib.decompress(base64.b64decode(field.encode("ascii")))
            payload = _NoClassesUnpickler(io.BytesIO(raw)).load()
        except (
            ValueError,
            zlib.error,
            pickle.UnpicklingError,
            EOFError,
            UnicodeEncodeError,
        ) as error:
            raise ValueError(
                f"cannot decode LiveCodeBench test cases: {error}"
            ) from error
        decoded = _load_json(payload) if isinstance(payload, str) else payload
    return (
        [t for t in decoded if isinstance(t, dict)] if isinstance(decoded, list) else []
    )


def _lcb_keep(row: Row, options: Mapping[str, Any]) -> bool:
    public = decode_lcb_tests(row.get("public_test_cases"))
    return bool(public) and all(t.get("testtype") == "stdin" for t in public)


def _lcb_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    cases = decode_lcb_tests(row.get("public_test_cases")) + decode_lcb_tests(
        row.get("private_test_cases")
    )
    tests = tuple(
        (str(t.get("input", "")), str(t.get("output", "")))
        for t in cases
        if t.get("testtype", "stdin") == "stdin"
    )
    return Problem(
        id=f"livecodebench/{row.get('question_id', index)}",
        prompt=str(row["question_content"]).strip(),
        split=split,
        solution=None,
        tests=tests,
        style="io",
        metadata={
            "source": "livecodebench",
            "title": str(row.get("question_title", "")),
            "platform": str(row.get("platform", "")),
            "difficulty": str(row.get("difficulty", "")),
            "contest_date": str(row.get("contest_date", "")),
        },
    )


def lcb_files(version: str) -> list[str]:
    """Hub files of a LiveCodeBench version: ``"v6"`` -> test6.jsonl; ``"release_v6"`` -> 1..6."""
    names = {1: "test.jsonl", **{n: f"test{n}.jsonl" for n in range(2, 10)}}
    if version.startswith("release_v"):
        last = int(version[len("release_v") :])
        numbers = range(1, last + 1)
    elif version.startswith("v") and version[1:].isdigit():
        numbers = range(int(version[1:]), int(version[1:]) + 1)
    else:
        raise ValueError(
            f"LiveCodeBench version must look like 'v6' or 'release_v6', got {version!r}"
        )
    return [
        f"hf://datasets/livecodebench/code_generation_lite/{names[n]}" for n in numbers
    ]


LIVECODEBENCH = HubSpec(
    name="livecodebench",
    repo="livecodebench/code_generation_lite",
    config=None,
    hub_splits=("test",),
    official_splits={},
    schema=(
        "{'question_id': str, 'question_title': str, 'question_content': str, 'platform': str, "
        "'difficulty': str, 'contest_date': str, 'starter_code': str, 'public_test_cases': JSON "
        "str of list[{'input','output','testtype'}], 'private_test_cases': JSON str or "
        "base64(zlib(pickle(JSON str))), 'metadata': JSON str}"
    ),
    convert=_lcb_convert,
    key=lambda row: str(row["question_content"]),
    keep=_lcb_keep,
    data_files=lambda options: {"test": lcb_files(str(options.get("version", "v6")))},
    default_options={"version": "v6"},
    has_golden_solutions=False,
    scan_fields=("question_content", "public_test_cases"),
)


CODE_SPECS = (MBPP, APPS, CODE_CONTESTS, LIVECODEBENCH)

for _spec in CODE_SPECS:
    register_task_source(_spec.name, hub_factory(_spec))
