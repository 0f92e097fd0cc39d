"""Memorisable code problems: a lookup table of the prompt's own examples passes every golden test.

On such a problem a table of the examples (with one constant for every other input) is graded
as a correct solution (HumanEval/40: five of its nine golden tests repeat the docstring's
examples and the other four all expect ``False``, so the table with default ``False`` passes all
nine), and a policy trained on it is paid for copying the prompt. :func:`is_memorisable` finds them;
code task sources leave them out of their ``train`` split by default (``keep_memorisable=True``
keeps them; validation and test splits keep them, so benchmark numbers do not move), and
``python -m llm_envs.tasks.count_memorisable humaneval`` counts them (docs/tasks.md).

What "shown" means, per test style (no code is run; the decision reads text only):

* ``function``: the test asserts one call of the entry point (``candidate(args) == expected``,
  ``candidate(args)`` for ``True``, ``not candidate(args)`` for ``False``, ``abs(candidate(args)
  - expected) < tol``); it is shown when the prompt, with all whitespace removed and quotes
  unified, contains ``entry_point(args)`` followed, before the next call of the entry point,
  by ``expected``. A test of any other shape (a loop, several calls, a helper) is not shown.
* ``io``: the test's standard input and expected output both appear in the prompt, whitespace
  collapsed (an example block of the statement).

A problem is memorisable when it has tests, each one parses, and every test the prompt does not
show expects one and the same value (the table's default: a literal for function tests, one
output for io tests). That includes problems a constant alone passes.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from llm_envs.tasks.base import Problem

#: How far after a shown call its expected value may appear (normalised characters).
_WINDOW = 400

_SPACE = re.compile(r"\s+")


def _squeeze(text: str) -> str:
    """No whitespace, one kind of quote."""
    return _SPACE.sub("", text).replace('"', "'")


def _collapse(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _call_and_expected(test: str, names: set[str]) -> tuple[ast.Call, ast.expr | bool] | None:
    """The single call of the function under test (any of ``names``) that ``test`` asserts,
    and the value it expects; ``None`` for any other shape."""
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    asserts = [node for node in tree.body if isinstance(node, ast.Assert)]
    others = [node for node in tree.body if not isinstance(node, (ast.Assert, ast.Import, ast.ImportFrom, ast.Assign))]
    if len(asserts) != 1 or others:
        return None
    test_expr = asserts[0].test

    def is_call(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names

    calls = [node for node in ast.walk(test_expr) if is_call(node)]
    if len(calls) != 1:
        return None
    call = calls[0]
    if test_expr is call:
        return call, True
    if isinstance(test_expr, ast.UnaryOp) and isinstance(test_expr.op, ast.Not) and test_expr.operand is call:
        return call, False
    if isinstance(test_expr, ast.Compare) and len(test_expr.ops) == 1 and isinstance(test_expr.ops[0], (ast.Eq, ast.Is)):
        left, right = test_expr.left, test_expr.comparators[0]
        if left is call:
            return call, right
        if right is call:
            return call, left
    # abs(candidate(x) - expected) < tol  (or <=)
    if (
        isinstance(test_expr, ast.Compare)
        and len(test_expr.ops) == 1
        and isinstance(test_expr.ops[0], (ast.Lt, ast.LtE))
        and isinstance(test_expr.left, ast.Call)
        and isinstance(test_expr.left.func, ast.Name)
        and test_expr.left.func.id == "abs"
        and len(test_expr.left.args) == 1
        and isinstance(test_expr.left.args[0], ast.BinOp)
        and isinstance(test_expr.left.args[0].op, ast.Sub)
        and test_expr.left.args[0].left is call
    ):
        return call, test_expr.left.args[0].right
    return None


def _expected_forms(expected: ast.expr | bool) -> list[str]:
    """How an expected value may be written in a prompt (squeezed)."""
    if isinstance(expected, bool):
        return [str(expected)]
    forms = [_squeeze(ast.unparse(expected))]
    try:
        value = ast.literal_eval(expected)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return forms
    if isinstance(value, str):
        forms.append(_squeeze(value) or "''")
    if isinstance(value, float) and value == int(value):
        forms.append(str(int(value)))
    return forms


def function_test_is_shown(test: str, prompt: str, entry_point: str) -> bool:
    """Whether a function-style golden ``test`` repeats one of ``prompt``'s examples (module
    docstring)."""
    parsed = _call_and_expected(test, {"candidate", entry_point})
    if parsed is None:
        return False
    call, expected = parsed
    shown_call = _squeeze(ast.unparse(ast.Call(func=ast.Name(entry_point), args=call.args, keywords=call.keywords)))
    text = _squeeze(prompt)
    forms = _expected_forms(expected)
    start = text.find(shown_call)
    while start != -1:
        after = start + len(shown_call)
        following = text.find(entry_point + "(", after)
        window = text[after : min(after + _WINDOW, following if following != -1 else len(text))]
        if any(form and form in window for form in forms):
            return True
        start = text.find(shown_call, start + 1)
    return False


def io_test_is_shown(test: tuple[str, str] | list[str], prompt: str) -> bool:
    """Whether an ``(stdin, expected stdout)`` golden test appears in ``prompt``."""
    try:
        stdin, stdout = test
    except (TypeError, ValueError):
        return False
    text = _collapse(prompt)
    wanted = [_collapse(str(stdin)), _collapse(str(stdout))]
    return all(part and part in text for part in wanted if part) and bool(_collapse(str(stdout)))


def shown_tests(problem: Problem) -> list[bool]:
    """For each golden test of ``problem``: whether the prompt shows it."""
    if problem.style == "function":
        entry = problem.entry_point or ""
        return [function_test_is_shown(str(t), problem.prompt, entry) if entry else False for t in problem.tests]
    if problem.style == "io":
        return [io_test_is_shown(t, problem.prompt) for t in problem.tests]
    return [False for _ in problem.tests]


def _default_value(problem: Problem, test: object) -> str | None:
    """The value an unshown golden test expects, as a comparable key (``None``: unknown)."""
    if problem.style == "io":
        try:
            return "io:" + _collapse(str(test[1]))  # type: ignore[index]
        except (TypeError, IndexError):
            return None
    parsed = _call_and_expected(str(test), {"candidate", problem.entry_point or ""})
    if parsed is None:
        return None
    expected = parsed[1]
    if isinstance(expected, bool):
        return repr(expected)
    try:
        return repr(ast.literal_eval(expected))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def lookup_default(problem: Problem) -> str | None:
    """The one value every golden test the prompt does not show expects (``repr`` of a literal,
    or ``"io:<output>"``), ``""`` when the prompt shows every test; ``None`` when no single
    default exists (the problem is not memorisable)."""
    if not problem.tests or problem.style not in ("function", "io"):
        return None
    defaults = set()
    for test, shown in zip(problem.tests, shown_tests(problem), strict=True):
        if shown:
            continue
        value = _default_value(problem, test)
        if value is None:
            return None
        defaults.add(value)
    if len(defaults) > 1:
        return None
    return defaults.pop() if defaults else ""


def is_memorisable(problem: Problem) -> bool:
    """Whether a lookup table of ``problem``'s prompt examples, with one constant for every
    other input, passes all its golden tests (module docstring)."""
    return lookup_default(problem) is not None


def lookup_table_solution(problem: Problem) -> str | None:
    """The attack itself, for a function-style memorisable problem: the entry point as a table
    of the shown tests' calls and values, returning the default for anything else (``None``
    where the problem is not memorisable or not function style). Tests use it to show that the
    grader pays it."""
    default = lookup_default(problem)
    if default is None or problem.style != "function" or not problem.entry_point:
        return None
    table = []
    for test, shown in zip(problem.tests, shown_tests(problem), strict=True):
        if not shown:
            continue
        call, expected = _call_and_expected(str(test), {"candidate", problem.entry_point})  # type: ignore[misc]
        args = "(" + "".join(ast.unparse(a) + ", " for a in call.args) + ")"
        value = repr(expected) if isinstance(expected, bool) else ast.unparse(expected)
        table.append(f"    (repr({args}), {value}),")
    fallback = default or "None"
    return (
        "_TABLE = [\n" + "\n".join(table) + "\n]\n\n"
        f"def {problem.entry_point}(*args):\n"
        "    for key, value in _TABLE:\n"
        "        if key == repr(args):\n"
        "            return value\n"
        f"    return {fallback}\n"
    )


def exclude_by_default(split: str, keep_memorisable: bool | None) -> bool:
    """Whether a code source leaves memorisable problems out: on ``train`` unless
    ``keep_memorisable=True``; on other splits only with ``keep_memorisable=False``."""
    if keep_memorisable is None:
        return split == "train"
    return not keep_memorisable


def count(problems: Iterable[Problem]) -> tuple[int, list[str]]:
    """``(problems seen, ids of the memorisable ones)``."""
    seen, ids = 0, []
    for problem in problems:
        seen += 1
        if is_memorisable(problem):
            ids.append(problem.id)
    return seen, ids
