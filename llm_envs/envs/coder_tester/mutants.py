"""Wrong programs for the tester reward: mutants of the golden solution, and the guard.

The tester is paid for tests that catch wrong code (docs/envs/coder_tester.md, which lists the
operators). Mutants are made here with :mod:`ast` (pure, deterministic, nothing executed): one
simple operator at one site each (a flipped comparison, ``+``/``-``, ``*``/``//``, a constant
off by one, a negated condition, ``and``/``or``, ``min``/``max`` and similar names, a changed
string, a returned value emptied, doubled or sliced, a dropped statement), inside function
bodies for function-style problems (the entry point stays defined), anywhere for stdin/stdout
programs. :func:`select_mutants` keeps those that fail a golden test, cached per problem: in
memory for the process, and on disk across processes (content-addressed; see
:func:`disk_cache_dir`).

**The guard.** A wrong program must be caught by a test that checks a *value*, never by one that
only calls the code, checks a type or checks that it is callable. So every function-style wrong
program runs guarded (:func:`guarded_program`): each call of its entry point (or of the tested
method of its class) also runs the golden solution on a copy of the arguments, and returns the
wrong program's own result only when it has the golden result's shape (same types,
recursively); where it raises, exits or returns another shape, it returns the golden's result
(a golden exception is raised as the golden raises it). ``assert True``, ``assert callable(f)``,
``r = f(x); assert r == r`` and type checks never reject a guarded program; an assertion on the
value does.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import itertools
import json
import logging
import os
import random
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_envs.envs.coder_tester import shipped
from sandboxes import parse_python
from sandboxes.harness import compiles

#: Mutants kept per problem by default (each costs one sandbox run per tester step).
DEFAULT_MAX_MUTANTS = 8
#: Candidates tried per problem at most while looking for ``max_mutants`` that are wrong.
DEFAULT_MAX_CANDIDATES = 32

_COMPARE_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITH_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
}


_NAME_SWAPS = {
    "min": "max",
    "max": "min",
    "any": "all",
    "all": "any",
    "lower": "upper",
    "upper": "lower",
    "startswith": "endswith",
    "endswith": "startswith",
    "isupper": "islower",
    "islower": "isupper",
    "floor": "ceil",
    "ceil": "floor",
    "index": "rindex",
    "rindex": "index",
    "find": "rfind",
    "rfind": "find",
    "split": "rsplit",
}


def _swapped_name(func: ast.expr) -> str | None:
    """The name a call's function is swapped for (``min`` -> ``max``...), or ``None``."""
    if isinstance(func, ast.Name):
        return _NAME_SWAPS.get(func.id)
    if isinstance(func, ast.Attribute):
        return _NAME_SWAPS.get(func.attr)
    return None


@dataclass(frozen=True)
class _Site:
    """One mutation: the ``index``-th node of ``ast.walk`` order, and what to do to it."""

    index: int
    operator: str
    variant: int = 0


def _inside_functions(tree: ast.Module) -> set[int]:
    """Walk indices of the nodes that lie inside a function body (at any depth)."""
    inside: set[int] = set()
    nodes = list(ast.walk(tree))
    position = {id(node): i for i, node in enumerate(nodes)}
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in node.body:
                for sub in ast.walk(statement):
                    inside.add(position[id(sub)])
    return inside


def _sites(tree: ast.Module, functions_only: bool) -> list[_Site]:
    """Every mutation site of ``tree``, in a fixed order."""
    allowed = _inside_functions(tree) if functions_only else None
    sites: list[_Site] = []
    for index, node in enumerate(ast.walk(tree)):
        if (
            allowed is not None
            and index not in allowed
            and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ):
            continue
        if isinstance(node, ast.Compare):
            sites += [
                _Site(index, "compare", k) for k, op in enumerate(node.ops) if type(op) in _COMPARE_SWAPS
            ]
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITH_SWAPS:
            sites.append(_Site(index, "arith"))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            sites += [_Site(index, "constant", 0), _Site(index, "constant", 1)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            sites.append(_Site(index, "constant", 2))
        elif isinstance(node, ast.Call) and _swapped_name(node.func) is not None:
            sites.append(_Site(index, "call"))
        elif isinstance(node, ast.comprehension) and node.ifs:
            sites += [_Site(index, "negate", k) for k in range(len(node.ifs))]
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            sites.append(_Site(index, "negate"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            sites.append(_Site(index, "negate"))
        elif isinstance(node, ast.BoolOp):
            sites.append(_Site(index, "boolop"))
        elif isinstance(node, ast.Return) and node.value is not None:
            # A literal is mutated by `constant`; doubling or slicing it only makes noise.
            variants = (0,) if isinstance(node.value, ast.Constant) else (0, 1, 2)
            sites += [_Site(index, "return", k) for k in variants]
        # Dropping a statement: recorded on the block's owner, one site per statement.
        for field_name in ("body", "orelse", "finalbody"):
            block = getattr(node, field_name, None)
            if not isinstance(block, list) or len(block) < 2:
                continue
            if (
                allowed is not None
                and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and index not in allowed
            ):
                continue
            if isinstance(node, ast.Module) and functions_only:
                continue
            for position, statement in enumerate(block):
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    continue  # a docstring: dropping it changes nothing
                variant = ("body", "orelse", "finalbody").index(field_name) * 100_000 + position
                sites.append(_Site(index, "drop", variant))
    return sites


class _Mutator:
    """The mutants of one parsed solution, each made in place on its one tree and undone after
    it is unparsed (parsing the solution again for every mutant, or copying its tree, cost about
    half of making one). A mutation changes one field of one node, or one item of a node's list
    of children, so undoing it is putting that one value back."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        self._parents: dict[int, tuple[Any, str | int]] | None = None

    def text(self, site: _Site) -> str | None:
        """The mutant at ``site`` as text, or ``None`` where it does not compile; the tree is as
        it was afterwards."""
        undo: list[tuple[Any, str | int, Any]] = []
        try:
            self._mutate(site, undo)
            text = ast.unparse(self.tree)
        except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError):
            return None
        finally:
            for holder, key, value in reversed(undo):
                if isinstance(key, int):
                    holder[key] = value
                else:
                    setattr(holder, key, value)
        # Compiled as the sandbox's driver compiles a program, and kept for the run that judges
        # or grades it (each was compiled twice).
        return text if compiles(text) else None

    def _where(self, node: ast.AST) -> tuple[Any, str | int]:
        """The field (or list and index) of the parent that holds ``node``."""
        if self._parents is None:
            self._parents = {}
            for parent in self.nodes:
                for field_name, value in ast.iter_fields(parent):
                    if isinstance(value, ast.AST):
                        self._parents.setdefault(id(value), (parent, field_name))
                    elif isinstance(value, list):
                        for i, item in enumerate(value):
                            if isinstance(item, ast.AST):
                                self._parents.setdefault(id(item), (value, i))
        return self._parents[id(node)]

    def _mutate(self, site: _Site, undo: list[tuple[Any, str | int, Any]]) -> None:
        def put(holder: Any, key: str | int, value: Any) -> None:
            undo.append((holder, key, holder[key] if isinstance(key, int) else getattr(holder, key)))
            if isinstance(key, int):
                holder[key] = value
            else:
                setattr(holder, key, value)

        node: Any = self.nodes[site.index]
        if site.operator == "compare":
            put(node.ops, site.variant, _COMPARE_SWAPS[type(node.ops[site.variant])]())
        elif site.operator == "arith":
            put(node, "op", _ARITH_SWAPS[type(node.op)]())
        elif site.operator == "constant":
            if isinstance(node.value, str):
                put(node, "value", node.value + "x" if node.value else " ")
            else:
                put(node, "value", node.value + (1 if site.variant == 0 else -1))
        elif site.operator == "call":
            name = _swapped_name(node.func)
            put(node.func, "id" if isinstance(node.func, ast.Name) else "attr", name)
        elif site.operator == "negate":
            if isinstance(node, ast.comprehension):
                put(node.ifs, site.variant, ast.UnaryOp(op=ast.Not(), operand=node.ifs[site.variant]))
            elif isinstance(node, ast.UnaryOp):
                put(*self._where(node), node.operand)
            else:
                put(node, "test", ast.UnaryOp(op=ast.Not(), operand=node.test))
        elif site.operator == "boolop":
            put(node, "op", ast.Or() if isinstance(node.op, ast.And) else ast.And())
        elif site.operator == "return":
            value = node.value
            if site.variant == 0:  # the empty value of the same type
                put(node, "value", ast.Call(
                    func=ast.Call(func=ast.Name("type", ast.Load()), args=[value], keywords=[]),
                    args=[],
                    keywords=[],
                ))
            elif site.variant == 1:  # doubled: 2x, "abab", [a, b, a, b]
                put(node, "value", ast.BinOp(left=value, op=ast.Add(), right=copy.deepcopy(value)))
            else:  # without its first element
                put(node, "value", ast.Subscript(value=value, slice=ast.Slice(lower=ast.Constant(1)), ctx=ast.Load()))
        elif site.operator == "drop":
            field_name = ("body", "orelse", "finalbody")[site.variant // 100_000]
            put(getattr(node, field_name), site.variant % 100_000, ast.Pass())
        # (No ast.fix_missing_locations: unparsing never reads a location, and it walked the
        # whole tree of every candidate, ~30% of making them.)


def _seed(*parts: str) -> int:
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big")


def mutant_candidates(
    solution: str, *, functions_only: bool, key: str = "", limit: int | None = None
) -> list[str]:
    """Distinct mutants of ``solution`` that compile and differ from it, in a deterministic
    order (a shuffle seeded by ``key`` and the solution, so that the first ones are spread over
    the whole program); at most ``limit``.

    Nothing is executed: the solution is parsed and the mutants compiled with ``compile``.
    A solution that does not parse has no mutants.
    """
    return list(iter_mutant_candidates(solution, functions_only=functions_only, key=key, limit=limit))


def iter_mutant_candidates(
    solution: str, *, functions_only: bool, key: str = "", limit: int | None = None
) -> Iterator[str]:
    """:func:`mutant_candidates`, made one at a time (the choice makes them as its waves need
    them)."""
    return iter(MutantSource(solution, functions_only=functions_only, key=key, limit=limit))


def _shuffled_sites(solution: str, functions_only: bool, key: str) -> tuple[str, list[_Site], _Mutator] | None:
    """``(the solution unparsed, its mutation sites in the seeded order, the mutator of its
    tree)``, or ``None`` where the solution does not parse."""
    try:
        tree = parse_python(solution)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    original = ast.unparse(tree)
    sites = _sites(tree, functions_only)
    random.Random(_seed(key, solution)).shuffle(sites)
    return original, sites, _Mutator(tree)


class MutantSource:
    """The mutant candidates of one solution (:func:`mutant_candidates`), iterable in their
    order and made as they are read; what :func:`select_mutants` chooses from.

    Each candidate is the mutant at one *position* of the solution's seeded site order. The
    disk cache stores the chosen mutants' positions, so that a reader checks each stored
    program by making the mutant at its position alone (:meth:`at`), not every candidate before
    it.
    """

    def __init__(self, solution: str, *, functions_only: bool, key: str = "", limit: int | None = None) -> None:
        self.solution = solution
        self.functions_only = functions_only
        self.key = key
        self.limit = limit
        #: The position of each candidate made so far, by its text.
        self.positions: dict[str, int] = {}

    def __iter__(self) -> Iterator[str]:
        shuffled = _shuffled_sites(self.solution, self.functions_only, self.key)
        if shuffled is None:
            return
        original, sites, mutator = shuffled
        seen = {original}
        found = 0
        for position, site in enumerate(sites):
            if self.limit is not None and found >= self.limit:
                return
            text = mutator.text(site)
            if text is None or text in seen:
                continue
            seen.add(text)
            found += 1
            self.positions[text] = position
            yield text

    def at(self, positions: Sequence[int]) -> list[str | None]:
        """The mutant at each of ``positions`` (``None`` where the position is past the last
        site, or its mutant does not compile or is the solution itself)."""
        shuffled = _shuffled_sites(self.solution, self.functions_only, self.key)
        if shuffled is None:
            return [None] * len(positions)
        original, sites, mutator = shuffled
        made: list[str | None] = []
        for position in positions:
            text = mutator.text(sites[position]) if 0 <= position < len(sites) else None
            made.append(None if text == original else text)
        return made


# ---------------------------------------------------------------------------------------------
# the guard

_METHOD_CALL = re.compile(r"^([A-Za-z_]\w*)\(\)\.([A-Za-z_]\w*)$")

# Appended to a wrong program (function style). Everything lives inside one function that
# deletes itself, so the module's names are the program's own (plus the rebound entry point):
# a test cannot look for the guard by name. The golden runs in a namespace of its own.
_GUARD = r"""

def __llm_envs_wp_install(namespace, setup, solution, entry, method):
    import copy

    golden = {"__name__": "__golden__"}
    # Graded by value, the run's process has compiled the setup and the golden already
    # (``sandboxes.run_value_checks``): (source, code) of each, then the namespace where both
    # ran (this process's copy), or None.
    compiled = namespace.pop("__golden_code__", None)
    if compiled is not None and compiled[0] == setup and compiled[2] == solution:
        if len(compiled) > 4 and compiled[4] is not None:
            golden = compiled[4]
        else:
            exec(compiled[1], golden)
            exec(compiled[3], golden)
    else:
        exec(compile(setup, "<golden setup>", "exec"), golden)
        exec(compile(solution, "<golden>", "exec"), golden)
    sequences = (list, tuple, set, frozenset)

    def compatible(got, want, budget):
        # True when `got` has the shape of `want`: the same type and (containers) every element
        # of `got` compatible with some element of `want`. Over the budget of visits: not.
        budget[0] -= 1
        if budget[0] < 0 or type(got) is not type(want):
            return False
        if isinstance(got, float) and got != got and want == want:
            return False  # NaN where the golden has a number: `r == r` would reject it
        if isinstance(got, sequences):
            wanted = list(want)
            return all(any(compatible(g, w, budget) for w in wanted) for g in got)
        if isinstance(got, dict):
            keys, values = list(want.keys()), list(want.values())
            return all(
                any(compatible(k, w, budget) for w in keys)
                and any(compatible(v, w, budget) for w in values)
                for k, v in got.items()
            )
        return True

    def guarded(wrong, right, args, kwargs):
        try:
            right_args, right_kwargs = copy.deepcopy((args, kwargs))
        except BaseException:
            return right(*args, **kwargs)
        want = right(*right_args, **right_kwargs)
        try:
            got = wrong(*args, **kwargs)
            if compatible(got, want, [20000]):
                return got
        except BaseException:
            pass
        return want

    wrong_entry = namespace[entry]
    if method is None:
        def call(*args, **kwargs):
            return guarded(wrong_entry, golden[entry], args, kwargs)

        call.__name__ = call.__qualname__ = entry
        namespace[entry] = call
    else:
        def call_method(self, *args, **kwargs):
            return guarded(
                lambda *a, **k: getattr(wrong_entry, method)(self, *a, **k),
                lambda *a, **k: getattr(golden[entry](), method)(*a, **k),
                args,
                kwargs,
            )

        call_method.__name__ = call_method.__qualname__ = method
        namespace[entry] = type(entry, (wrong_entry,), {method: call_method})


__llm_envs_wp_install(globals(), @ARGUMENTS@)
del __llm_envs_wp_install
"""


def can_guard(entry_point: str | None, call: str | None) -> bool:
    """Whether wrong programs of a function-style problem can be guarded: its tests call the
    entry point itself, or a method of a fresh instance of it (``Solution().twoSum``)."""
    if not entry_point or not entry_point.isidentifier():
        return False
    if call is None or call == entry_point:
        return True
    match = _METHOD_CALL.match(call)
    return bool(match) and match.group(1) == entry_point


def guard_epilogue(*, golden: str, setup: str, entry_point: str, call: str | None) -> str:
    """The guard (see the module docstring) as code that runs after a wrong program's top level,
    in its namespace: the same for every wrong program of a problem, so a run of many of them
    compiles it once (``sandboxes.run_value_checks``'s ``epilogue``).

    Raises:
        ValueError: the problem's call form cannot be guarded (:func:`can_guard`).
    """
    if not can_guard(entry_point, call):
        raise ValueError(f"cannot guard a wrong program called as {call!r}")
    match = _METHOD_CALL.match(call or "")
    method = None if call is None or call == entry_point or match is None else match.group(2)
    arguments = ", ".join(repr(value) for value in (setup, golden, entry_point, method))
    return _GUARD.replace("@ARGUMENTS@", arguments)


def guarded_program(program: str, *, golden: str, setup: str, entry_point: str, call: str | None) -> str:
    """``program`` followed by the guard (:func:`guard_epilogue`).

    Raises:
        ValueError: the problem's call form cannot be guarded (:func:`can_guard`).
    """
    tail = guard_epilogue(golden=golden, setup=setup, entry_point=entry_point, call=call)
    return program.rstrip("\n") + "\n" + tail


# ---------------------------------------------------------------------------------------------
# selection, cached per problem


def checked_failure(result: Any, io_style: bool) -> bool:
    """Whether a test rejected the program by checking a value: function style, the test's own
    assertion failed (``AssertionError``; a guarded program raises nothing of its own); I/O
    style, the program ran to the end and printed another answer. A crash, a timeout, a
    program that never ran, or a failure of the harness (``TestResult.harness_failure``: a
    time-out, a value over the frame limit, a refused handle, even where the test turned it into
    an ``AssertionError``) is not counted as caught. The mark comes from either side of the run:
    the test process, or the ledger the solution's side keeps where a tester's tests cannot reach
    it (a harness event before the test's record, a call the test gave up on, a ledger cut short;
    ``sandboxes.harness._solution_marks``)."""
    if result.passed or getattr(result, "harness_failure", None):
        return False
    error = result.error or ""
    if io_style:
        return error == "wrong answer"
    return error.startswith("AssertionError")


def killed_by(report: Any, io_style: bool, among: Sequence[int] | None = None) -> bool:
    """Whether any test of ``report`` (or those at the indices ``among``) caught the program."""
    indices = range(len(report.results)) if among is None else among
    return any(checked_failure(report.results[i], io_style) for i in indices)


def caught_by_values(result: Any, golden_passing: Sequence[int], checks: int) -> bool | None:
    """Whether a wrong program graded by value (``sandboxes.ValueCheckResult`` on a tester's
    tests, all of them ``sandboxes.ValueCheck``) was caught, as :func:`killed_by` finds on a run
    of its own: an assert that failed where the golden passed that test, before any harness event
    (a time-out or a value that cannot cross ends what counts, as in a test run). ``None``: not
    established (no result, a result cut short, a builtin the program rebound, an
    ``AssertionError`` raised by the program on a test the golden passed), so the program is
    graded in a run of its own."""
    if result is None:
        return None
    if not result.ran:
        return False
    passing = set(golden_passing)
    for index, outcome in enumerate(result.outcomes):
        if index in passing:
            if outcome == "fail":
                return True
            if outcome == "raised AssertionError":
                return None
        if outcome in ("timeout", "uncrossable"):
            return False
        if outcome == "unestablished":
            return None
    return False if len(result.outcomes) == checks else None


def wrong_by_values(result: Any, checks: int) -> bool | None:
    """Whether a mutant candidate graded by value on the golden tests (all of them
    ``sandboxes.ValueCheck``) is a wrong program, as :func:`wrong_on_golden` finds on a run of
    its own: it ran, no check timed out, and an assert failed; ``None`` where that is not
    established (no result, a value that cannot cross, a rebound builtin, an ``AssertionError``
    raised by the program)."""
    if result is None:
        return None
    if not result.ran:
        return False
    if "timeout" in result.outcomes:
        return False
    if any(o in ("uncrossable", "unestablished", "raised AssertionError") for o in result.outcomes):
        return None
    if len(result.outcomes) != checks:
        return None
    return "fail" in result.outcomes


def reached_time_limit(result: Any) -> bool:
    """Whether a test result hit its time limit: it timed out, or the harness marked a time-out
    the program caught (``TestResult.harness_failure``), as a by-value check's ``"timeout"``
    outcome counts one the program caught."""
    return bool(result.timed_out or "timed out" in (getattr(result, "harness_failure", None) or ""))


def wrong_on_golden(report: Any, io_style: bool) -> bool:
    """Whether a mutant candidate's report on the golden tests makes it a wrong program: it
    ran (its top level completed), no golden test reached its time limit
    (:func:`reached_time_limit`; so a run may stop at the first that did:
    ``run_function_tests``/``run_io_cases(..., stop_at_timeout=True)``), and a golden test caught it
    (:func:`checked_failure`)."""
    return bool(
        report.compiled
        and (report.ran or io_style)
        and not any(reached_time_limit(r) for r in report.results)
        and killed_by(report, io_style)
    )


log = logging.getLogger(__name__)

_CACHE: dict[str, tuple[str, ...]] = {}
#: Where each choice in ``_CACHE`` came from: ``"shipped"``, ``"disk"`` or ``"chosen"``.
_ORIGIN: dict[str, str] = {}
_CACHE_LIMIT = 4096
_CACHE_LOCK = threading.Lock()
_IN_FLIGHT: dict[str, threading.Lock] = {}


def cache_key(
    problem: Any, golden_tests: Sequence[Any], max_mutants: int, max_candidates: int, time_s: float | None = None
) -> str:
    """What the mutants of a problem depend on, hashed (``time_s``: the time limit of one golden
    test while choosing them)."""
    parts = [
        str(problem.id),
        str(problem.style),
        str(problem.entry_point),
        str(problem.call),
        problem.setup or "",
        problem.solution or "",
        repr(tuple(golden_tests)),
        str(max_mutants),
        str(max_candidates),
        *(() if time_s is None else (repr(float(time_s)),)),
    ]
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def disk_cache_dir() -> Path | None:
    """Where chosen mutants are kept across processes: ``$LLM_ENVS_MUTANT_CACHE`` if set
    (``off`` turns the disk cache off), else ``$LLM_ENVS_CACHE_DIR/mutants`` (default
    ``~/.cache/llm_envs/mutants``)."""
    setting = os.environ.get("LLM_ENVS_MUTANT_CACHE")
    if setting is not None:
        return None if setting.strip().lower() in ("", "0", "off", "false", "no") else Path(setting)
    root = os.environ.get("LLM_ENVS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "llm_envs")
    return Path(root) / "mutants"


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """A hash of the code a selection depends on (the operators and guard here, the harness that
    judges them): a change to any of them is a new address on disk."""
    import sandboxes

    digest = hashlib.sha256()
    here = Path(__file__)
    for path in (
        here,
        *(
            Path(sandboxes.__file__).with_name(n)
            for n in ("_function_driver.py", "_crossing.py", "harness.py", "_case_state.py")
        ),
    ):
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(path.name.encode())
    return digest.hexdigest()[:16]


def _disk_path(key: str) -> Path | None:
    root = disk_cache_dir()
    if root is None or not re.fullmatch(r"[0-9A-Za-z_.-]{1,128}", key):
        return None
    return root / f"{key}.{_code_version()}.json"


def _read_disk(key: str, candidates: Callable[[], Iterable[str]]) -> tuple[str, ...] | None:
    """The mutants stored for ``key``, if the file is well formed and every program in it is one
    of this problem's candidates (a file edited by hand, or left by other code, is ignored).

    Where ``candidates()`` is a :class:`MutantSource` and the file has each program's position,
    each program is checked against the mutant made at its position alone; otherwise against
    the candidates in their order, only as far as needed (the stored ones were chosen among the
    first)."""
    path = _disk_path(key)
    if path is None:
        return None
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key:
        return None
    programs = stored.get("mutants")
    if not isinstance(programs, list) or not all(isinstance(p, str) for p in programs):
        return None
    if len(set(programs)) != len(programs):
        # A choice never holds a program twice; copies would let one catch count as several.
        log.warning("ignoring mutant cache %s: it holds a program more than once", path)
        return None
    source = candidates()
    positions = stored.get("positions")
    if (
        isinstance(source, MutantSource)
        and isinstance(positions, list)
        and len(positions) == len(programs)
        and all(type(p) is int for p in positions)
    ):
        genuine = source.at(positions) == programs
    else:
        unseen = set(programs)
        for candidate in source if unseen else ():
            unseen.discard(candidate)
            if not unseen:
                break
        genuine = not unseen
    if not genuine:
        log.warning("ignoring mutant cache %s: it holds programs that are not this problem's mutants", path)
        return None
    return tuple(programs)


def _write_disk(key: str, programs: tuple[str, ...], positions: Sequence[int] | None = None) -> None:
    """Store atomically (a reader never sees a torn file), with each program's position among
    the candidates where known; a cache that cannot be written is only a slower next process."""
    path = _disk_path(key)
    if path is None:
        return
    stored: dict[str, Any] = {"key": key, "mutants": list(programs)}
    if positions is not None:
        stored["positions"] = list(positions)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".mutants-", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(stored, out)
        os.replace(temporary, path)
    except OSError as exc:
        log.warning("could not write the mutant cache %s: %s", path, exc)


def select_mutants(
    key: str,
    candidates: Callable[[], Iterable[str]],
    judge_on_golden: Callable[..., list[Any]],
    *,
    io_style: bool,
    max_mutants: int,
    judge_stops_early: bool = False,
) -> tuple[str, ...]:
    """The first ``max_mutants`` candidates that are wrong programs, cached under ``key``.

    A candidate is kept when, judged on the golden tests (``judge_on_golden`` runs a list of
    programs and returns a report each, or the verdict itself as a ``bool``), it ran (its top
    level completed), no golden test timed out, and at least one golden test caught it
    (:func:`wrong_on_golden`): a mutant equivalent to the golden on those tests is not a wrong
    program. Candidates are judged ``2 * max_mutants``, then ``max_mutants`` at a time until
    enough are kept or none are left (the first ``max_mutants`` wrong ones are kept whatever the
    waves). With ``judge_stops_early``, the judge is called as ``judge_on_golden(programs,
    needed)`` and may leave the candidates after ``needed`` wrong ones unjudged
    (:data:`NOT_JUDGED`). Errors (a sandbox failure) propagate and nothing is cached.

    The bundled problems' choices under the default options are shipped with the package
    (:mod:`~llm_envs.envs.coder_tester.shipped`) and used first, where they still match.
    Cached in memory for the process and on disk for every process (:func:`disk_cache_dir`),
    under ``key`` (a hash of everything the choice depends on: :func:`cache_key`) and a hash of
    this module's and the harness's code; a stored choice is used only if every program in it
    is one of ``candidates()`` (no sandbox run: a :class:`MutantSource` makes the mutant at each
    stored program's position; another iterable is read in its order only as far as the stored
    programs need).
    """
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        lock = _IN_FLIGHT.setdefault(key, threading.Lock())
    with lock:  # one thread computes; others wait for its result
        with _CACHE_LOCK:
            if key in _CACHE:
                return _CACHE[key]
        try:
            source = candidates()
            origin = "shipped"
            result = shipped.lookup(key, source.at) if isinstance(source, MutantSource) else None
            if result is None:
                origin = "disk"
                result = _read_disk(key, candidates)
            if result is None:
                origin = "chosen"
                pool = candidates()
                result = _select(pool, judge_on_golden, io_style, max_mutants, judge_stops_early)
                positions = None
                if isinstance(pool, MutantSource) and all(p in pool.positions for p in result):
                    positions = [pool.positions[p] for p in result]
                _write_disk(key, result, positions)
        finally:
            with _CACHE_LOCK:
                _IN_FLIGHT.pop(key, None)
        with _CACHE_LOCK:
            _CACHE[key], _ORIGIN[key] = result, origin
            while len(_CACHE) > _CACHE_LIMIT:
                oldest = next(iter(_CACHE))
                _CACHE.pop(oldest)
                _ORIGIN.pop(oldest, None)
        return result


class _NotJudged:
    """The verdict on a candidate that a judge did not judge (:data:`NOT_JUDGED`)."""

    def __repr__(self) -> str:
        return "NOT_JUDGED"


#: What a judge that stops early (``select_mutants(..., judge_stops_early=True)``) returns for
#: a candidate it did not judge because enough candidates before it were wrong programs.
NOT_JUDGED: Any = _NotJudged()


def _select(
    pool: Iterable[str],
    judge_on_golden: Callable[..., list[Any]],
    io_style: bool,
    max_mutants: int,
    stops_early: bool = False,
) -> tuple[str, ...]:
    # The first wave is twice as wide as the others: on the benchmark's 24 HumanEval problems
    # (the default 8 of 32), 18 of the 20 with more than 8 candidates needed more than 8 to
    # find 8 wrong ones (10.8 on average), so waves of 8 almost always made a second run, each
    # with a run's own fixed cost. A judge that stops early leaves the candidates after enough
    # wrong ones unjudged; they come first in the next wave, if one is needed. Which candidates
    # are kept does not depend on the waves. The candidates are made as the waves need them
    # (~0.5 ms each).
    kept: list[str] = []
    width = max(1, max_mutants)
    candidates = iter(pool)
    pending: list[str] = []
    first = True
    while len(kept) < max_mutants:
        wave = pending + list(itertools.islice(candidates, max(0, (2 * width if first else width) - len(pending))))
        first = False
        if not wave:
            break
        needed = max_mutants - len(kept)
        verdicts = judge_on_golden(wave, needed) if stops_early else judge_on_golden(wave)
        pending = []
        for at, (program, verdict) in enumerate(zip(wave, verdicts)):
            if verdict is NOT_JUDGED:
                if at == 0:
                    raise RuntimeError("the judge of mutant candidates judged none of them")
                pending = wave[at:]  # (in order: nothing after an unjudged one counts)
                break
            if verdict if isinstance(verdict, bool) else wrong_on_golden(verdict, io_style):
                kept.append(program)
    return tuple(kept[:max_mutants])


def clear_cache() -> None:
    """Forget every problem's mutants held in memory (tests; a changed sandbox). The disk cache
    (:func:`disk_cache_dir`) stays: remove its directory, or set ``LLM_ENVS_MUTANT_CACHE=off``."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _ORIGIN.clear()


def origin(key: str) -> str | None:
    """Where the choice cached in memory under ``key`` came from: ``"shipped"`` (the package's
    table), ``"disk"`` (the disk cache) or ``"chosen"`` (judged here); ``None`` if none is."""
    with _CACHE_LOCK:
        return _ORIGIN.get(key)


def iter_cached() -> Iterator[tuple[str, tuple[str, ...]]]:
    """``(key, mutants)`` of every cached problem (benchmarks report the cache)."""
    with _CACHE_LOCK:
        items = list(_CACHE.items())
    return iter(items)
