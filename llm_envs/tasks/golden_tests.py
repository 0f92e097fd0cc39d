"""Golden tests that check nothing, found when a dataset is loaded."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from sandboxes import parse_python


def compares_the_program_with_itself(test: str, entry_point: str | None) -> bool:
    """Whether the golden ``test`` asserts that an expression equals itself: a comparison by
    ``==``, ``is``, ``<=`` or ``>=`` whose sides are the same expression once every name of the
    program is spelled alike. It holds for every program whose calls are repeatable, so it
    checks nothing.

    HumanEval/33's ``tuple(candidate([1, 2, 3])) == tuple(sort_third([1, 2, 3]))`` is one:
    ``sort_third`` is the program's own function (the tests run in its namespace), so a program
    that returns ``[]`` passed three of the problem's seven tests. The program's names are
    ``entry_point`` and every name the test binds to one of them (``candidate = sort_third``).
    A property of the program (``f(1) == sorted(f(1))``, ``f(1) <= f(2)``) is a check, kept.
    """
    if not entry_point:
        return False
    try:
        tree = parse_python(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    names = {entry_point}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in names:
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))

    def spelled_alike(expression: ast.expr) -> str:
        # (a dump of the expression with every program name written as the entry point)
        return re.sub(
            r"Name\(id='([^']*)'",
            lambda match: "Name(id=%r" % (entry_point if match.group(1) in names else match.group(1)),
            ast.dump(expression),
        )

    reflexive = (ast.Eq, ast.Is, ast.LtE, ast.GtE)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            compare = node.test
            sides = [compare.left, *compare.comparators]
            for op, left, right in zip(compare.ops, sides, sides[1:]):
                if isinstance(op, reflexive) and spelled_alike(left) == spelled_alike(right):
                    calls = [sub for sub in ast.walk(left) if isinstance(sub, ast.Call)]
                    if any(isinstance(c.func, ast.Name) and c.func.id in names for c in calls):
                        return True
    return False


def checking_tests(tests: Sequence[str], entry_point: str | None) -> tuple[str, ...]:
    """``tests`` without those that compare the program with itself
    (:func:`compares_the_program_with_itself`): a grader pays nothing it cannot check."""
    return tuple(test for test in tests if not compares_the_program_with_itself(test, entry_point))


def checks_something(test: str) -> bool:
    """Whether a function-style golden ``test`` can fail for a program that returns a wrong
    value: it holds an ``assert`` or a ``raise``. ``f(1)`` or a commented-out assertion checks
    only that the program does not crash, so a program returning ``-1`` passed MBPP rows whose
    tests were such. A test that does not parse fails every program: it pays nothing either,
    and is kept as a check (its problem's other tests decide)."""
    try:
        tree = parse_python(test)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return True
    return any(isinstance(node, (ast.Assert, ast.Raise)) for node in ast.walk(tree))


def prints_something(outputs: Sequence[str]) -> bool:
    """Whether a stdin/stdout problem's expected ``outputs`` ask for any output: where every
    one is blank, a program that prints nothing passes every case."""
    return any(str(output).strip() for output in outputs)
