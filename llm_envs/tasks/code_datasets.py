"""Code benchmarks from the Hugging Face Hub (or local copies in the same schema).

==================  ======================================  =================  ====================
name                hub id (config / files)                 splits             style
==================  ======================================  =================  ====================
``mbpp``            ``google-research-datasets/mbpp``       train/validation/  function (asserts)
                    (``full``; ``sanitized`` optional)      test (+ prompt)
``apps``            ``codeparrot/apps`` (``train.jsonl``,   train/test         stdin/stdout, or
                    ``test.jsonl``)                                            function (call-based)
``code_contests``   ``deepmind/code_contests``              train/valid/test   stdin/stdout
``livecodebench``   ``livecodebench/code_generation_lite``  test               stdin/stdout, or
                    (``test6.jsonl`` = ``v6`` by default)                      function (functional)
==================  ======================================  =================  ====================

Call-based problems (APPS ``fn_name``, LiveCodeBench ``"functional"``) become ordinary
function-style problems: each case is one golden assertion snippet (:func:`call_test`) whose
arguments and expected value are written as Python literals of the parsed JSON (nothing from the
dataset is evaluated on the host), with the comparison helper defined inside every snippet
after the solution ran. LiveCodeBench's private tests are decoded with an unpickler that
refuses every class. Rows that cannot be used are skipped. docs/tasks.md gives the fields read
from each dataset ("Fields read from the code datasets") and the call-based rules in full
("Call-based problems").
"""

from __future__ import annotations

import ast
import base64
import io
import json
import keyword
import math
import pickle
import zlib
from collections.abc import Mapping
from typing import Any

from llm_envs.tasks.base import Problem, register_task_source
from llm_envs.tasks.golden_tests import checking_tests, checks_something, prints_something
from llm_envs.tasks.hub import HubSpec, Row, hub_factory
from sandboxes import parse_python

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
# call-based problems (APPS `fn_name`, LiveCodeBench "functional"): function-style golden tests

#: What APPS's official checker imports before a call-based solution (numpy where installed).
APPS_PRELUDE = """\
import sys
import time
import itertools
from itertools import accumulate, product, permutations, combinations
import collections
from collections import Counter, OrderedDict, deque, defaultdict, ChainMap
from functools import lru_cache
import math
from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2
import fractions
from typing import List, Tuple
import random
import heapq
from heapq import *
try:
    import numpy as np
except ImportError:
    pass
"""

#: What LiveCodeBench's official checker imports before every solution.
LCB_PRELUDE = """\
from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string
import re
import datetime
import collections
import heapq
import bisect
import copy
import math
import random
import statistics
import itertools
import functools
import operator
import io
import sys
import json
sys.setrecursionlimit(50000)
"""

# Defined inside every golden test (after the solution ran), so a solution cannot replace it.
_EQUAL_HELPER = """\
def __llm_envs_equal(actual, expected, one_element_list=False):
    # Equal as JSON data: tuples count as lists; with one_element_list (APPS), [x] also accepts x.
    def plain(value):
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        return value
    actual = plain(actual)
    if actual == expected:
        return True
    return one_element_list and isinstance(expected, list) and len(expected) == 1 and actual == expected[0]
"""


def python_literal(value: Any) -> str:
    """Python source for a JSON value (``NaN`` and ``Infinity`` included); never evaluated here.

    Raises:
        TypeError: ``value`` is not JSON data.
        RecursionError: absurdly deep nesting.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is None or isinstance(value, (str, int, float)):  # bool is an int
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(python_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items()
            )
            + "}"
        )
    raise TypeError(f"not JSON data: {type(value).__name__}")


def call_test(
    call: str, args: list[Any], expected: Any, *, one_element_list: bool = False
) -> str:
    """A golden assertion snippet: ``call(*args)`` returns ``expected`` (as JSON data).

    ``call`` is a function name or ``Solution().method``; ``args`` and ``expected`` are parsed
    JSON, written into the snippet as literals. Tuples returned compare as lists; with
    ``one_element_list`` (APPS's checker) an expected ``[x]`` also accepts ``x``.
    """
    arguments = ", ".join(python_literal(a) for a in args)
    flag = ", one_element_list=True" if one_element_list else ""
    return (
        f"{_EQUAL_HELPER}"
        f"assert __llm_envs_equal({call}({arguments}), {python_literal(expected)}{flag})"
    )


def is_identifier(name: Any) -> bool:
    """``name`` can be written as a Python name in a test (not a keyword)."""
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def _starter_module(starter_code: str) -> ast.Module | None:
    """Starter code parsed; a last ``def`` left without a body (LeetCode's) gets ``pass``."""
    code = starter_code.rstrip()
    lines = code.splitlines()
    attempts = [code]
    if lines:
        indent = lines[-1][: len(lines[-1]) - len(lines[-1].lstrip())]
        attempts.append(f"{code}\n{indent}    pass")
    for attempt in attempts:
        try:
            return parse_python(attempt)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def _solution_class(starter_code: str) -> ast.ClassDef | None:
    """The top-level ``class Solution`` of starter code, if it has one."""
    module = _starter_module(starter_code) if starter_code.strip() else None
    if module is None:
        return None
    return next(
        (
            node
            for node in module.body
            if isinstance(node, ast.ClassDef) and node.name == "Solution"
        ),
        None,
    )


def solution_method(starter_code: str, preferred: str | None = None) -> str | None:
    """The method of ``class Solution`` in LeetCode starter code that the tests call:
    ``preferred`` if the class defines it, else its first public method; ``None`` without one.
    """
    cls = _solution_class(starter_code)
    if cls is None:
        return None
    methods = [
        node.name
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not node.name.startswith("_")
    ]
    if preferred in methods:
        return preferred
    return methods[0] if methods else None


def _call_prompt(question: str, starter_code: str, call: str) -> str:
    """The statement of a call-based problem: the question, how it is called, the starter code."""
    how = (
        f"Solve it in Python: the tests call `{call}(...)` with the arguments of each case and "
        "compare the value it returns (do not read input or print)."
    )
    starter = starter_code.rstrip().lstrip("\n")
    if not starter.strip():
        return f"{question.strip()}\n\n{how}"
    return f"{question.strip()}\n\n{how} Complete this starter code:\n```python\n{starter}\n```"


def _int_keys(value: Any) -> Any:
    """A dict with its JSON string keys turned back into ints, where every key is one (APPS)."""
    if isinstance(value, dict):
        try:
            return {int(k): v for k, v in value.items()}
        except (TypeError, ValueError):
            return value
    return value


# ---------------------------------------------------------------------------------------------
# MBPP


def _mbpp_text(row: Row) -> str:
    text = row.get("text") or row.get("prompt") or ""
    return text.strip() if isinstance(text, str) else ""


def _is_list_of_text(value: Any) -> bool:
    """A non-empty list whose items are all text."""
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(item, str) for item in value)


def _mbpp_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    tests = tuple(str(t) for t in row["test_list"])
    entry_point = called_function(tests[0]) or defined_function(str(row["code"]))
    # (none of MBPP's tests compares the program with itself; a local file's may, and then
    # every other test still checks it; a problem whose every test does keeps them)
    tests = checking_tests(tests, entry_point) or tests
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
    screens_memorisable=True,
    convert=_mbpp_convert,
    key=_mbpp_text,
    # (a test_list given as one string was read one character a test; a test without an
    # assertion, "f(1)", passed a program returning -1)
    keep=lambda row, options: (_is_list_of_text(row.get("test_list")) and bool(_mbpp_text(row))
                               and all(checks_something(test) for test in row["test_list"])),
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
    if io_spec is None:
        return False
    inputs, outputs = io_spec.get("inputs"), io_spec.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        return False
    if not inputs or len(inputs) != len(outputs):
        return False
    fn_name = io_spec.get("fn_name")
    if fn_name and not (
        is_identifier(fn_name) and all(isinstance(i, list) for i in inputs)
    ):
        return False  # call-based, but no usable function name or argument lists
    if not fn_name and not prints_something([_as_text(o) for o in outputs]):
        return False  # every expected output blank: a program printing nothing passes
    return bool(_apps_solutions(row)) or not options.get("require_solution", True)


def _apps_call_tests(
    call: str, inputs: list[Any], outputs: list[Any]
) -> tuple[tuple[str, ...], int]:
    """Golden snippets of an APPS call-based problem, and how many cases could not be written.

    As APPS's checker: JSON turned the keys of a dict argument (the first) or of an expected
    dict into strings, so integer-looking keys become ints again; an expected ``[x]`` also
    accepts ``x``; tuples compare as lists.
    """
    tests: list[str] = []
    skipped = 0
    for args, expected in zip(inputs, outputs):
        args = [_int_keys(args[0]), *args[1:]] if args else []
        if isinstance(expected, list) and len(expected) == 1:
            expected = [_int_keys(expected[0])]
        else:
            expected = _int_keys(expected)
        try:
            tests.append(call_test(call, args, expected, one_element_list=True))
        except (TypeError, RecursionError):
            skipped += 1
    return tuple(tests), skipped


def _apps_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    io_spec = _apps_io(row) or {}
    solutions = _apps_solutions(row)
    problem_id = row.get("problem_id", row.get("id", index))
    metadata = {
        "source": "apps",
        "difficulty": str(row.get("difficulty", "")),
        "url": str(row.get("url", "")),
    }
    fn_name = io_spec.get("fn_name")
    if fn_name:
        # Call-based (Codewars functions, LeetCode `class Solution` methods): function style.
        starter = str(row.get("starter_code") or "")
        in_class = _solution_class(starter) is not None or "class Solution" in starter
        call = f"Solution().{fn_name}" if in_class else str(fn_name)
        tests, skipped = _apps_call_tests(
            call, io_spec.get("inputs", []), io_spec.get("outputs", [])
        )
        return Problem(
            id=f"apps/{problem_id}",
            prompt=_call_prompt(str(row["question"]), starter, call),
            split=split,
            solution=solutions[0] if solutions else None,
            tests=tests,
            style="function",
            entry_point="Solution" if in_class else str(fn_name),
            setup=APPS_PRELUDE,
            metadata={**metadata, "call": call, "skipped_tests": skipped},
        )
    tests_io = tuple(
        (_as_text(i), _as_text(o))
        for i, o in zip(io_spec.get("inputs", []), io_spec.get("outputs", []))
    )
    return Problem(
        id=f"apps/{problem_id}",
        prompt=str(row["question"]).strip(),
        split=split,
        solution=solutions[0] if solutions else None,
        tests=tests_io,
        style="io",
        metadata=metadata,
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
    screens_memorisable=True,
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
    tests = _cc_tests(row, options)
    if not tests or not prints_something([output for _, output in tests]):
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
    screens_memorisable=True,
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


def _lcb_public(row: Row) -> list[dict[str, Any]]:
    try:
        return decode_lcb_tests(row.get("public_test_cases"))
    except ValueError:
        return []


def _lcb_method(row: Row) -> str | None:
    """The ``Solution`` method a functional problem's tests call, from its starter code
    (``metadata["func_name"]`` chooses among several methods)."""
    meta = _load_json(row.get("metadata"))
    preferred = meta.get("func_name") if isinstance(meta, dict) else None
    return solution_method(str(row.get("starter_code") or ""), preferred)


def _lcb_functional_case(case: Mapping[str, Any]) -> tuple[list[Any], Any] | None:
    """``(arguments, expected)`` of a functional test case (one JSON value per input line, one
    for the output), or ``None`` if it is not one."""
    text, output = case.get("input"), case.get("output")
    if case.get("testtype") != "functional" or not isinstance(text, str):
        return None
    if not isinstance(output, str):
        return None
    try:
        args = [json.loads(line) for line in text.rstrip("\n").split("\n")]
        return args, json.loads(output)
    except (ValueError, RecursionError):
        return None


def _lcb_keep(row: Row, options: Mapping[str, Any]) -> bool:
    public = _lcb_public(row)
    if not public:
        return False
    if all(t.get("testtype") == "stdin" for t in public):
        return prints_something([str(t.get("output", "")) for t in public])
    return _lcb_method(row) is not None and all(
        _lcb_functional_case(t) is not None for t in public
    )


def _lcb_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    public = decode_lcb_tests(row.get("public_test_cases"))
    cases = public + decode_lcb_tests(row.get("private_test_cases"))
    metadata = {
        "source": "livecodebench",
        "title": str(row.get("question_title", "")),
        "platform": str(row.get("platform", "")),
        "difficulty": str(row.get("difficulty", "")),
        "contest_date": str(row.get("contest_date", "")),
    }
    problem_id = f"livecodebench/{row.get('question_id', index)}"
    method = _lcb_method(row)
    if method is not None and any(t.get("testtype") == "functional" for t in public):
        # LeetCode style: `Solution().<method>(*args)` returns the expected value.
        call = f"Solution().{method}"
        tests: list[str] = []
        skipped = 0
        for case in cases:
            parsed = _lcb_functional_case(case)
            try:
                if parsed is None:
                    raise TypeError("not a functional case")
                tests.append(call_test(call, *parsed))
            except (TypeError, RecursionError):
                skipped += 1
        return Problem(
            id=problem_id,
            prompt=_call_prompt(
                str(row["question_content"]), str(row.get("starter_code") or ""), call
            ),
            split=split,
            solution=None,
            tests=tuple(tests),
            style="function",
            entry_point="Solution",
            setup=LCB_PRELUDE,
            metadata={**metadata, "call": call, "skipped_tests": skipped},
        )
    tests_io = tuple(
        (str(t.get("input", "")), str(t.get("output", "")))
        for t in cases
        if t.get("testtype", "stdin") == "stdin"
    )
    return Problem(
        id=problem_id,
        prompt=str(row["question_content"]).strip(),
        split=split,
        solution=None,
        tests=tests_io,
        style="io",
        metadata=metadata,
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
    screens_memorisable=True,
    convert=_lcb_convert,
    key=lambda row: str(row["question_content"]),
    keep=_lcb_keep,
    data_files=lambda options: {"test": lcb_files(str(options.get("version", "v6")))},
    default_options={"version": "v6"},
    has_golden_solutions=False,
    scan_fields=("question_content", "public_test_cases", "starter_code", "metadata"),
)


CODE_SPECS = (MBPP, APPS, CODE_CONTESTS, LIVECODEBENCH)

for _spec in CODE_SPECS:
    register_task_source(_spec.name, hub_factory(_spec))
