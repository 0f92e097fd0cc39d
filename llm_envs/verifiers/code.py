"""Code judging: pull programs and tests out of model text, run them in a sandbox, report.

Parsing never executes anything: code is only split on fences and parsed with ``ast``. Running
happens only in a :class:`sandboxes.Sandbox` through its harnesses
(:func:`sandboxes.run_function_tests`, :func:`sandboxes.run_io_cases`); a program that does not
even compile on the host (``compile`` never executes) is reported without a sandbox run.

Test formats written by a tester agent:

* **function style** (HumanEval, MBPP): Python in a ```` ```python ```` block. Each top-level
  statement that contains an ``assert`` is one test; other top-level statements (imports,
  helpers, variables) run before the tests that follow them. A ``def test_*():`` function is one
  test (it is called), so is each ``test_*`` method of a ``unittest.TestCase`` class, and a
  ``def check(candidate):`` function is split into its assertions like HumanEval's. Lines that
  break the parse do not sink the rest: if the block does not parse, every line that starts with
  ``assert`` and parses alone is still a test.
* **stdin/stdout style** (APPS, CodeContests, LiveCodeBench): pairs of fenced blocks, the first
  after a line naming it an input (``**Test Input:**``, ``Input 2:``, ...), the second after a
  line naming it an output (``**Test Output:**``, ``Expected output:``).

Every sandboxed run goes through :func:`run_program`, :func:`judge_function` or
:func:`judge_io`. A run on which the *sandbox* failed (``RunResult.sandbox_error``,
``TestReport.sandbox_error``: a worker that died, hung or answered garbage) is retried on a fresh
worker up to :data:`SANDBOX_ATTEMPTS` times in all, then raised as
:class:`~llm_envs.core.errors.SandboxFailure`: it is never returned as the program's failure,
so no environment can score it (see docs/sandboxes.md).

Equality assertions of generated tests (``assert f(x) == y``) are rewritten so that a failure
reads ``expected <y>, got <f(x)>``: the feedback shows the actual value, not only "failed".

Function-style tests (golden or a tester's) never run in the process of the code they judge:
:func:`sandboxes.run_function_tests` runs them in a process of their own inside the sandbox run,
where the code under test is reachable only through plain data (see docs/sandboxes.md). A
tester's tests therefore cannot read the golden solution, and a coder's code cannot reach the
verdict of any test; a harness that cannot decide a test scores it failed.
"""

from __future__ import annotations

import ast
import concurrent.futures
import functools
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from llm_envs.core.errors import SandboxFailure
from sandboxes import parse_python

_FENCE = "```"
_PYTHON_TAGS = ("python", "python3", "py", "py3")
#: Tests taken from one tester reply at most (the rest are ignored and reported).
DEFAULT_MAX_TESTS = 16
#: Longest test snippet or stdin accepted from a tester (characters).
MAX_TEST_CHARS = 20_000

#: Runs tried in all (the first and its retries) before a sandbox failure is raised. A failed
#: worker is replaced by the sandbox, so a retry runs on a fresh one; beyond that, a sandbox
#: that keeps failing is down and the step waits for it no longer.
SANDBOX_ATTEMPTS = 2

_T = TypeVar("_T")
log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# code blocks


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a reply.

    Attributes:
        lang: The language tag, lower case (may be empty).
        body: The text between the tag line and the closing fence.
        closed: False for a last fence left open (a truncated reply): the body runs to the end.
        start: Offset of the opening fence in the reply.
        end: Offset just after the closing fence (the end of the reply if unclosed).
    """

    lang: str
    body: str
    closed: bool
    start: int
    end: int


#: A block on one line that starts with a Python tag and a space: ```` ```python print(1)``` ````.
_ONE_LINE_PYTHON = re.compile(r"[ \t]*(python3?|py)[ \t]+(\S.*)", re.IGNORECASE | re.DOTALL)


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block in ``text``, in order; an unclosed last fence runs to the end.

    Linear in the length of ``text`` (a split on fences, no backtracking regex).
    """
    if not isinstance(text, str) or _FENCE not in text:
        return []
    parts = text.split(_FENCE)
    starts = []  # offset of each part in text
    position = 0
    for part in parts:
        starts.append(position)
        position += len(part) + len(_FENCE)
    blocks = []
    for i in range(1, len(parts), 2):
        raw = parts[i]
        closed = i + 1 < len(parts)
        first, newline, rest = raw.partition("\n")
        tag = first.strip().lower()
        one_line = None if newline else _ONE_LINE_PYTHON.match(raw)
        if newline and (not tag or re.fullmatch(r"[\w+#.-]{1,20}", tag)):
            lang, body = tag, rest
        elif one_line:  # "```python print(1)```": the released PettingLLMs code reads it too
            lang, body = one_line.group(1).lower(), one_line.group(2)
        else:  # "```print(1)```" or no newline: the whole thing is the body
            lang, body = "", raw
        start = starts[i] - len(_FENCE)
        end = starts[i] + len(raw) + (len(_FENCE) if closed else 0)
        blocks.append(CodeBlock(lang=lang, body=body, closed=closed, start=start, end=end))
    return blocks


def extract_code(text: str) -> str | None:
    """The program in a reply: the last Python-tagged block, else the last block of any tag.

    A Python block left unclosed at the end of the reply (a truncated generation) counts.
    Returns ``None`` when the reply has no fenced block or the block is empty.
    """
    blocks = code_blocks(text)
    python = [b for b in blocks if b.lang in _PYTHON_TAGS]
    chosen = python[-1] if python else (blocks[-1] if blocks else None)
    if chosen is None or not chosen.body.strip():
        return None
    return chosen.body


def compile_error(source: str, filename: str = "<solution>") -> str | None:
    """``None`` if ``source`` compiles on the host (nothing is executed), else the error text."""
    try:
        compile(source, filename, "exec")
    except SyntaxError as error:
        return f"SyntaxError: {error.msg} (line {error.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError, TypeError) as error:
        return f"{type(error).__name__}: {error}"
    return None


# ---------------------------------------------------------------------------------------------
# function-style tests


@dataclass(frozen=True)
class ParsedTests:
    """Tests found in a tester's reply.

    Attributes:
        tests: Function style: runnable snippets (context + test); I/O style: ``(stdin, expected)``.
        shown: A short text of each test for feedback (the assertion, or the input).
        found: How many tests the reply contained (before the ``max_tests`` cap).
        problems: Why parts of the reply were not usable (for feedback).
    """

    tests: tuple[Any, ...] = ()
    shown: tuple[str, ...] = ()
    found: int = 0
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def valid(self) -> bool:
        return bool(self.tests)


_SHOW_HELPER = (
    "def __llm_envs_show(value):\n"
    "    try:\n"
    "        text = repr(value)\n"
    "    except BaseException:\n"
    "        text = '<unprintable>'\n"
    "    return text if len(text) <= 300 else text[:297] + '...'\n"
)


def _instrument_assert(statement: ast.Assert) -> list[ast.stmt]:
    """``assert a == b`` -> statements that report ``expected b, got a`` when it fails."""
    if not (
        statement.msg is None
        and isinstance(statement.test, ast.Compare)
        and len(statement.test.ops) == 1
        and isinstance(statement.test.ops[0], ast.Eq)
    ):
        return [statement]
    left, right = statement.test.left, statement.test.comparators[0]
    code = (
        f"__llm_envs_actual = {ast.unparse(left)}\n"
        f"__llm_envs_expected = {ast.unparse(right)}\n"
        "assert __llm_envs_actual == __llm_envs_expected, "
        "'expected ' + __llm_envs_show(__llm_envs_expected) + ', got ' + __llm_envs_show(__llm_envs_actual)\n"
    )
    return parse_python(code).body


class _AssertInstrumenter(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> Any:
        return _instrument_assert(node)

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        return node  # no statements inside


def _instrument(statement: ast.stmt) -> list[ast.stmt]:
    """``statement`` with each equality assertion in it (also nested) made self-explaining,
    changed in place: callers unparse what this returns, and take what they show of the test
    from `statement` before. (A copy of the tree, and ``ast.fix_missing_locations`` on it, which
    unparsing never needs, were half of the CPU of parsing a tester's reply.)"""
    if isinstance(statement, ast.Assert):
        return _instrument_assert(statement)
    return [_AssertInstrumenter().visit(statement)]


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _contains_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _is_testcase_class(node: ast.stmt) -> bool:
    if not isinstance(node, ast.ClassDef):
        return False
    return any(
        (isinstance(base, ast.Attribute) and base.attr == "TestCase")
        or (isinstance(base, ast.Name) and base.id == "TestCase")
        for base in node.bases
    )


def _snippets_from_module(module: ast.Module, entry_point: str | None) -> tuple[list[str], list[str]]:
    """(snippets, shown) for each test of a parsed module (see the module docstring)."""
    header = [f"candidate = {entry_point}"] if entry_point else []
    context: list[str] = []
    snippets: list[str] = []
    shown: list[str] = []
    body: list[ast.stmt] = []
    for node in module.body:
        body.extend(node.body if _is_main_guard(node) else [node])
    for node in body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and _contains_assert(node):
            param = node.args.args[0].arg if node.args.args else "candidate"
            local: list[str] = []
            for statement in node.body:
                if _contains_assert(statement):
                    lines = [
                        _SHOW_HELPER,
                        *header,
                        *context,
                        f"{param} = {entry_point or param}",
                        *local,
                    ]
                    shown.append(ast.unparse(statement))  # before `_instrument` changes it
                    lines += [ast.unparse(s) for s in _instrument(statement)]
                    snippets.append("\n".join(lines))
                elif not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)):
                    local.append(ast.unparse(statement))
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            shown.append(ast.unparse(node))  # before `_instrument` changes it
            test_function = ast.unparse(_instrument(node)[0])
            snippets.append("\n".join([_SHOW_HELPER, *header, *context, test_function, f"{node.name}()"]))
        elif _is_testcase_class(node):
            methods = [m for m in node.body if isinstance(m, ast.FunctionDef) and m.name.startswith("test")]
            for method in methods:
                runner = (
                    "import unittest as __llm_envs_unittest\n"
                    f"__llm_envs_result = __llm_envs_unittest.TestResult()\n"
                    f"{node.name}({method.name!r}).run(__llm_envs_result)\n"
                    "for __llm_envs_test, __llm_envs_trace in __llm_envs_result.errors:\n"
                    "    raise RuntimeError((__llm_envs_trace.strip().splitlines() or ['error'])[-1])\n"
                    "for __llm_envs_test, __llm_envs_trace in __llm_envs_result.failures:\n"
                    "    raise AssertionError((__llm_envs_trace.strip().splitlines() or ['failed'])[-1])\n"
                )
                snippets.append("\n".join([_SHOW_HELPER, *header, *context, ast.unparse(node), runner]))
                shown.append(f"{node.name}.{method.name}: " + ast.unparse(method))
        elif isinstance(
            node, (ast.Assert, ast.For, ast.While, ast.With, ast.If, ast.Try)
        ) and _contains_assert(node):
            shown.append(ast.unparse(node))  # before `_instrument` changes it
            lines = [_SHOW_HELPER, *header, *context] + [ast.unparse(s) for s in _instrument(node)]
            snippets.append("\n".join(lines))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring or a stray string
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in {"check", "unittest"}
        ):
            continue  # "check(f)" or similar driver calls: the tests run without them
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "main"
        ):
            continue  # unittest.main()
        else:
            context.append(ast.unparse(node))
    return snippets, shown


# What ``ast.parse`` raises for text that is not a parsable program (never executed).
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


_SHOW_NAME = "__llm_envs_show"
_ACTUAL, _EXPECTED = "__llm_envs_actual", "__llm_envs_expected"
#: What a test graded by value may contain besides the calls of the entry point: expressions
#: of these node types only (no attribute, comprehension, lambda, assignment expression or
#: f-string), and of the builtins these names only.
_VALUE_NODES = (
    ast.Constant, ast.Name, ast.Load, ast.Call, ast.keyword, ast.Starred, ast.BinOp, ast.UnaryOp,
    ast.BoolOp, ast.Compare, ast.IfExp, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Subscript,
    ast.Slice, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)  # fmt: skip
_VALUE_BUILTINS = frozenset(
    "abs all any bin bool chr dict divmod enumerate float frozenset hex int isinstance len list "
    "max min oct ord pow range repr reversed round set sorted str sum tuple type zip".split()
)


@functools.lru_cache(maxsize=1)
def _show_helper_dump() -> str:
    return ast.dump(parse_python(_SHOW_HELPER).body[0])


@functools.lru_cache(maxsize=1)
def _show_helper_lines() -> tuple[str, ...]:
    """The lines of the message helper as :func:`parse_function_tests` writes it into a test."""
    return tuple(ast.unparse(parse_python(_SHOW_HELPER).body[0]).split("\n"))


def _is_show_helper(node: ast.FunctionDef, lines: list[str] | None) -> bool:
    """Whether ``node`` (parsed from a test whose lines, split at ``"\\n"`` only, are ``lines``)
    is the harness's own message helper. The same text parses to the same tree, so a node whose
    lines are the helper's as a test holds them is the helper, without the ~0.25 ms of comparing
    two dumps of the tree; any other text (``lines`` is None where the test holds a ``"\\r"``,
    which would make its lines not the parser's) is compared by its dump."""
    if lines is not None and not node.decorator_list and node.col_offset == 0 and node.end_lineno is not None:
        own = lines[node.lineno - 1 : node.end_lineno]
        if tuple(own) == _show_helper_lines() and node.end_col_offset == len(own[-1].encode("utf-8")):
            return True
    return ast.dump(node) == _show_helper_dump()


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError, AttributeError):
        return False
    return True


@functools.lru_cache(maxsize=256)
def _names_bound_by(setup: str) -> frozenset[str]:
    """Every name ``setup`` may bind at its top level or anywhere (a test's namespace holds
    them; one of them could stand for a builtin a test uses)."""
    try:
        tree = parse_python(setup)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset({"*"})
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return frozenset(names)


@functools.lru_cache(maxsize=1024)  # a rollout's clones and turns grade the same tests again
def value_check(snippet: str, entry_point: str | None, setup: str = "") -> Any:
    """The test ``snippet`` (as :func:`parse_function_tests` or ``split_check_function`` make
    them) as a :class:`sandboxes.ValueCheck` when it is one ``assert`` whose only link to the
    program is calls of ``entry_point``: ``assert f(1, [2]) == 3``, ``assert not f('a')``,
    ``assert abs(f(2.0) - 1.5) < 1e-6``, ``assert tuple(f([1])) == (1,), 'got ' + str(f([1]))``
    (its expressions are literals, operators and the builtins in ``_VALUE_BUILTINS``, none of
    which ``setup`` binds); else ``None``.

    Nothing else may run in the snippet: besides the assert, only the harness's own lines
    (``candidate = f``, the message helper), imports that bind none of the names the assert uses,
    and other names bound to literals (``METADATA = {...}``). Such a test does the same with any
    program as its own process running it with the program's values as data
    (``sandboxes.run_value_checks``).
    """
    from sandboxes import ValueCheck

    if not entry_point or not isinstance(snippet, str):
        return None
    try:
        module = parse_python(snippet)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    callers = {entry_point}  # the names bound to the entry point, in the order of the statements
    reserved = _VALUE_BUILTINS | {_SHOW_NAME, _ACTUAL, _EXPECTED}

    def restricted(node: ast.expr, names: list[ast.Name]) -> bool:
        # (and every name in it appended to `names`)
        for sub in ast.walk(node):
            if not isinstance(sub, _VALUE_NODES):
                return False
            if isinstance(sub, ast.Name):
                if sub.id not in callers and sub.id not in _VALUE_BUILTINS:
                    return False
                names.append(sub)
            elif isinstance(sub, ast.Call) and not isinstance(sub.func, ast.Name):
                return False
        return True

    def instrumented_message(message: ast.expr | None) -> bool:
        # The harness's own "expected ..., got ..." message: it calls nothing of the program's.
        if message is None:
            return True
        for sub in ast.walk(message):
            if isinstance(sub, ast.Name) and sub.id not in (_SHOW_NAME, _ACTUAL, _EXPECTED):
                return False
            if isinstance(sub, ast.Call) and not (
                isinstance(sub.func, ast.Name) and sub.func.id == _SHOW_NAME
            ):
                return False
            if not isinstance(sub, (*_VALUE_NODES, ast.expr_context)):
                return False
        return True

    lines = None if "\r" in snippet else snippet.split("\n")
    body = list(module.body)
    last = body[-1] if body else None
    if (
        len(body) >= 2
        and isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and isinstance(last.value.func, ast.Name)
        and not last.value.args
        and not last.value.keywords
        and isinstance(body[-2], ast.FunctionDef)
        and body[-2].name == last.value.func.id
        and body[-2].name not in reserved | callers
        and not body[-2].decorator_list
        and body[-2].returns is None
        and not any(
            getattr(body[-2].args, part)
            for part in ("posonlyargs", "args", "kwonlyargs", "defaults", "kw_defaults")
        )
        and body[-2].args.vararg is None
        and body[-2].args.kwarg is None
    ):
        # ``def test_0(): ...`` then ``test_0()``: the test is the function's body, run once.
        body = body[:-2] + list(body[-2].body)
    found: ast.Assert | None = None
    position = 0
    while position < len(body):
        node = body[position]
        position += 1
        if found is not None:
            return None  # nothing may follow the assert
        if isinstance(node, ast.FunctionDef) and node.name == _SHOW_NAME:
            if not _is_show_helper(node, lines):
                return None  # a test's own function of that name: it could do anything
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            if "*" in bound or bound & (callers | reserved):
                return None
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == _ACTUAL and position + 1 < len(body):
                # The instrumented equality: actual = A; expected = B; assert actual == expected, msg
                second, third = body[position], body[position + 1]
                if not (
                    isinstance(second, ast.Assign)
                    and len(second.targets) == 1
                    and isinstance(second.targets[0], ast.Name)
                    and second.targets[0].id == _EXPECTED
                    and isinstance(third, ast.Assert)
                    and isinstance(third.test, ast.Compare)
                    and len(third.test.ops) == 1
                    and isinstance(third.test.ops[0], ast.Eq)
                    and isinstance(third.test.left, ast.Name)
                    and third.test.left.id == _ACTUAL
                    and isinstance(third.test.comparators[0], ast.Name)
                    and third.test.comparators[0].id == _EXPECTED
                    and instrumented_message(third.msg)
                ):
                    return None
                found = ast.Assert(
                    test=ast.Compare(left=node.value, ops=[ast.Eq()], comparators=[second.value]), msg=None
                )
                position += 2
                continue
            if isinstance(node.value, ast.Name) and node.value.id in callers:
                callers.add(name)
                continue
            if name not in callers and name not in reserved and _is_literal(node.value):
                continue
            return None
        if isinstance(node, ast.Assert):
            found = node
            continue
        return None
    names: list[ast.Name] = []
    if found is None or not restricted(found.test, names) or (found.msg is not None and not restricted(found.msg, names)):
        return None
    used = {sub.id for sub in names}
    if (used - callers) & _names_bound_by(setup or "") or "*" in _names_bound_by(setup or ""):
        return None  # the setup's own `len` or `abs` would be the one the test uses
    # Every name of the entry point spelled ``candidate``: in place (the tree was parsed for this
    # call alone), and unparsed without locations, which only compiling a tree would read.
    for sub in names:
        if sub.id in callers:
            sub.id = "candidate"
    try:
        source = ast.unparse(found)
        compile(source, "<test>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return ValueCheck(source=source, builtins=tuple(sorted(used - callers)))


def value_checks(tests: Sequence[str], entry_point: str | None, setup: str = "") -> tuple[Any, ...] | None:
    """Every test of ``tests`` as a :class:`sandboxes.ValueCheck` (:func:`value_check`), or
    ``None`` if any one is not of that form (the tests then run as code)."""
    checks = []
    for test in tests:
        check = value_check(test, entry_point, setup)
        if check is None:
            return None
        checks.append(check)
    return tuple(checks)


def parse_function_tests(
    text: str, entry_point: str | None, *, max_tests: int = DEFAULT_MAX_TESTS
) -> ParsedTests:
    """Function-style tests from a tester's reply (all Python blocks; see the module docstring)."""
    if not isinstance(text, str):
        return ParsedTests(problems=("the reply is not text",))
    blocks = [b for b in code_blocks(text) if b.lang in _PYTHON_TAGS or not b.lang]
    if not blocks:
        return ParsedTests(problems=("no ```python code block with tests was found",))
    snippets: list[str] = []
    shown: list[str] = []
    problems: list[str] = []
    for block in blocks:
        source = block.body
        if len(source) > MAX_TEST_CHARS * max(1, max_tests):
            problems.append(f"a test block of {len(source)} characters was ignored (too long)")
            continue
        try:
            module = parse_python(source)
        except _PARSE_ERRORS as error:
            problems.append(
                f"the test block does not parse ({type(error).__name__}); only its assert lines were used"
            )
            module = ast.Module(body=[], type_ignores=[])
            for line in source.splitlines():
                if line.strip().startswith("assert"):
                    try:
                        module.body.extend(parse_python(line.strip()).body)
                    except _PARSE_ERRORS:
                        continue
        try:
            found, labels = _snippets_from_module(module, entry_point)
        except (RecursionError, MemoryError, ValueError) as error:
            problems.append(f"the test block could not be processed ({type(error).__name__})")
            continue
        snippets.extend(found)
        shown.extend(labels)
    total = len(snippets)
    if total > max_tests:
        problems.append(f"{total} tests found; only the first {max_tests} were run")
    kept = [
        (s, label) for s, label in zip(snippets, shown) if len(s) <= MAX_TEST_CHARS + len(_SHOW_HELPER) + 2000
    ][:max_tests]
    if not kept and total:
        problems.append("every test was too long")
    if not total and not problems:
        problems.append("the code block contains no assert statement")
    return ParsedTests(
        tests=tuple(s for s, _ in kept),
        shown=tuple(label for _, label in kept),
        found=total,
        problems=tuple(problems),
    )


def function_tests_block(tests: Sequence[str]) -> str:
    """Golden function-style snippets as one tester reply (what a reference tester writes).

    Each snippet becomes a ``def test_<i>():`` function, so that the helper statements of one
    snippet (imports, ``candidate = ...``) stay out of the others.
    """
    parts = []
    for index, snippet in enumerate(tests):
        body = "\n".join("    " + line if line.strip() else "" for line in snippet.splitlines())
        parts.append(f"def test_{index}():\n{body}\n")
    return "```python\n" + "\n".join(parts) + "```"


# ---------------------------------------------------------------------------------------------
# stdin/stdout tests

_LABEL_WORD = re.compile(r"\b(inputs?|stdin|outputs?|stdout|expected)\b", re.IGNORECASE)


def _label_kind(label: str) -> str | None:
    """ "input", "output" or None for the line before a block (the last label word wins)."""
    words = _LABEL_WORD.findall(label)
    if not words:
        return None
    last = words[-1].lower()
    return "input" if last.startswith("input") or last == "stdin" else "output"


def parse_io_tests(text: str, *, max_tests: int = DEFAULT_MAX_TESTS) -> ParsedTests:
    """``(stdin, expected stdout)`` pairs from a tester's reply (see the module docstring)."""
    if not isinstance(text, str):
        return ParsedTests(problems=("the reply is not text",))
    blocks = code_blocks(text)
    pairs: list[tuple[str, str]] = []
    pending_input: str | None = None
    previous_end = 0
    problems: list[str] = []
    for block in blocks:
        before = text[previous_end : block.start]
        previous_end = block.end
        label_lines = [line for line in before.strip().splitlines() if line.strip()]
        kind = _label_kind(label_lines[-1]) if label_lines else None
        if kind == "output":
            if pending_input is None:
                problems.append("an output block without an input block before it was ignored")
                continue
            pairs.append((pending_input, block.body))
            pending_input = None
        elif kind == "input":
            if pending_input is not None:
                problems.append("an input block without an output block was ignored")
            pending_input = block.body
    if pending_input is not None:
        problems.append("the last input block has no output block")
    cleaned = []
    for stdin, expected in pairs:
        if len(stdin) > MAX_TEST_CHARS or len(expected) > MAX_TEST_CHARS:
            problems.append("a test longer than the limit was ignored")
            continue
        stdin = stdin.strip("\n") + "\n"
        cleaned.append((stdin, expected.strip("\n") + "\n"))
    total = len(cleaned)
    if total > max_tests:
        problems.append(f"{total} tests found; only the first {max_tests} were run")
    if not total and not problems:
        problems.append("no **Test Input:** / **Test Output:** block pair was found")
    kept = cleaned[:max_tests]
    return ParsedTests(
        tests=tuple(kept),
        shown=tuple(i for i, _ in kept),
        found=total,
        problems=tuple(problems),
    )


def io_tests_block(cases: Sequence[tuple[str, str]]) -> str:
    """Stdin/stdout cases as one tester reply in the expected format."""
    parts = []
    for stdin, expected in cases:
        parts.append(
            f"**Test Input:**\n```\n{stdin.rstrip(chr(10))}\n```\n**Test Output:**\n```\n{expected.rstrip(chr(10))}\n```"
        )
    return "\n\n".join(parts)


# ---------------------------------------------------------------------------------------------
# running


def _not_compiled(tests: Sequence[Any], error: str, io_style: bool) -> Any:
    from sandboxes import TestReport, TestResult

    results = [
        TestResult(
            index=i,
            name=f"case {i}" if io_style else "test",
            passed=False,
            error=error,
            expected=(test[1] if io_style else None),
        )
        for i, test in enumerate(tests)
    ]
    return TestReport(results=results, compiled=False, ran=False, error=error)


def _sandbox_checked(call: Callable[[], _T], what: str, attempts: int) -> _T:
    """``call()`` (a sandbox run or a harness over runs), retried while the *sandbox* fails;
    raises :class:`SandboxFailure` when every attempt failed, so a sandbox failure is never
    returned as a result."""
    from sandboxes import SandboxError, SandboxUnavailable

    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    failure = ""
    for attempt in range(1, attempts + 1):
        try:
            result = call()
        except SandboxUnavailable as exc:  # no retry can help: the backend cannot run here
            raise SandboxFailure(f"the sandbox cannot run {what}: {exc}", kind="sandbox_unavailable") from exc
        except SandboxError as exc:  # e.g. a worker that could not start
            failure = f"{type(exc).__name__}: {exc}"
        else:
            error = getattr(result, "sandbox_error", None)
            if not error:
                return result
            failure = str(error)
        if attempt < attempts:
            log.warning(
                "the sandbox failed running %s (attempt %d of %d), retrying: %s",
                what,
                attempt,
                attempts,
                failure,
            )
    raise SandboxFailure(
        f"the sandbox failed running {what} ({attempts} attempt{'s' if attempts != 1 else ''}): {failure}",
        attempts=attempts,
    )


def run_program(
    sandbox: Any,
    source: str,
    *,
    stdin: str = "",
    limits: Any = None,
    attempts: int = SANDBOX_ATTEMPTS,
) -> Any:
    """``sandbox.run(source, stdin=stdin, limits=limits)``: the program's ``RunResult``.

    Raises:
        SandboxFailure: the sandbox failed on every one of ``attempts`` runs (the program's
            outcome is unknown; never report it as the program's).
    """
    return _sandbox_checked(lambda: sandbox.run(source, stdin=stdin, limits=limits), "a program", attempts)


def judge_function(
    sandbox: Any,
    solution: str,
    tests: Sequence[str],
    *,
    setup: str = "",
    entry_point: str | None = None,
    time_s: float = 5.0,
    memory_mb: int = 512,
    attempts: int = SANDBOX_ATTEMPTS,
    stop_at_timeout: bool = False,
) -> Any:
    """Run function-style ``tests`` against ``solution`` in ``sandbox``; a ``TestReport``
    (``stop_at_timeout``: no test after one that times out, ``sandboxes.run_function_tests``).

    Raises:
        SandboxFailure: the sandbox failed under the tests on every attempt (see
            :func:`run_program`).
    """
    from sandboxes import run_function_tests

    error = compile_error(solution)
    if error is not None:
        return _not_compiled(tests, error, io_style=False)
    return _sandbox_checked(
        lambda: run_function_tests(
            sandbox,
            solution,
            list(tests),
            setup=setup,
            entry_point=entry_point,
            time_s=time_s,
            memory_mb=memory_mb,
            stop_at_timeout=stop_at_timeout,
        ),
        "function tests",
        attempts,
    )


def judge_io(
    sandbox: Any,
    program: str,
    cases: Sequence[tuple[str, str]],
    *,
    time_s: float = 5.0,
    memory_mb: int = 512,
    attempts: int = SANDBOX_ATTEMPTS,
    stop_at_timeout: bool = False,
) -> Any:
    """Run ``program`` on each ``(stdin, expected)`` case in ``sandbox``; a ``TestReport``
    (``stop_at_timeout``: no case after one that times out, ``sandboxes.run_io_cases``).

    Raises:
        SandboxFailure: the sandbox failed under a case on every attempt (see
            :func:`run_program`).
    """
    from sandboxes import run_io_cases

    error = compile_error(program)
    if error is not None:
        return _not_compiled(cases, error, io_style=True)
    return _sandbox_checked(
        lambda: run_io_cases(
            sandbox, program, list(cases), time_s=time_s, memory_mb=memory_mb, stop_at_timeout=stop_at_timeout
        ),
        "stdin/stdout cases",
        attempts,
    )


def judge(
    sandbox: Any,
    problem: Any,
    code: str,
    tests: Sequence[Any] | None = None,
    *,
    time_s: float = 5.0,
) -> Any:
    """Run ``code`` against ``tests`` (default: the problem's golden tests) in its style.

    Raises:
        SandboxFailure: the sandbox failed (see :func:`run_program`).
    """
    tests = problem.tests if tests is None else tests
    if problem.style == "io":
        return judge_io(sandbox, code, tests, time_s=time_s)
    if problem.style == "function":
        return judge_function(
            sandbox,
            code,
            tests,
            setup=problem.setup,
            entry_point=problem.entry_point,
            time_s=time_s,
        )
    raise ValueError(
        f"problem {problem.id} has style {problem.style!r}; code judging needs 'function' or 'io'"
    )


def run_concurrently(tasks: Sequence[Callable[[], _T]], max_workers: int) -> list[_T]:
    """Run zero-argument callables on a thread pool (sandbox runs wait on pipes, not the GIL)."""
    if len(tasks) <= 1:
        return [task() for task in tasks]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
        return list(pool.map(lambda task: task(), tasks))


def judge_many(sandbox: Any, items: Sequence[tuple[Any, str]], *, time_s: float = 5.0) -> list[Any]:
    """``judge`` each ``(problem, code)`` pair against its golden tests, concurrently."""
    width = max(1, int(getattr(sandbox, "max_concurrency", 2)))
    return run_concurrently([lambda p=p, c=c: judge(sandbox, p, c, time_s=time_s) for p, c in items], width)


def ran_to_completion(result: Any, io_style: bool) -> bool:
    """Whether the code under test ran to completion on this test (a wrong answer counts as ran).

    Function style: passed, or failed by an ``AssertionError``; I/O style: passed or a wrong
    answer (exit status 0 in time).
    """
    if result.passed:
        return True
    error = result.error or ""
    if io_style:
        return error == "wrong answer"
    return error.startswith("AssertionError")
