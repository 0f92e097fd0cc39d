"""The catch reward on stdin/stdout problems (APPS, CodeContests) in one sandbox run per step.

Graded one sandbox run per case, the golden solution and a problem's wrong programs (its
mutants) on a tester's cases cost ~3.5× the CPU of the paper's reward per step, and choosing the
mutants ~8× on a problem's first step (docs/benchmarks.md, "stdin/stdout problems"). Here they
run in one run: ``sandboxes.run_io_programs`` runs the cases one after another in a process
forked inside the run (what a case could leave to the next put back between them), compares the
output there, stops a wrong program at its first wrong answer on a case the golden passed, and
runs no wrong program on a case the golden did not pass. Only trusted programs run that way (the golden solution
and mutants the harness made of it); the tester's cases are data, and the coder's code keeps
its runs of its own. What the run does not establish (a case's process ended by a signal the
run did not send, a run that failed) is graded as before, one run per program, so the counts
are those of one run each.

A golden solution that can turn its input into code (``eval(input())``, ``exec``, ...) is
graded one run per program: there a tester's case could run code beside the other programs.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from typing import Any

from llm_envs.envs.coder_tester import mutants
from llm_envs.envs.grading import Grading

#: Builtins that can run text as code or reach what a program does not own: a golden solution
#: that names one is graded one run per program.
_CODE_BUILTINS = frozenset({
    "eval", "exec", "compile", "__import__", "breakpoint", "globals", "locals", "vars", "getattr", "setattr",
    "delattr", "__builtins__",
})
#: Attributes that can do the same (``os.system``, ``os.kill``, ``f.__globals__``, ...).
_CODE_ATTRIBUTES = frozenset({
    "system", "popen", "fork", "forkpty", "kill", "killpg", "execv", "execve", "execl", "execlp", "execvp",
    "execvpe", "spawnl", "spawnv", "spawnve", "posix_spawn", "__import__", "__builtins__", "__dict__",
    "__globals__", "__subclasses__", "__code__", "__class__",
})
#: Modules that can do the same.
_CODE_MODULES = frozenset({
    "pickle", "marshal", "ctypes", "subprocess", "importlib", "runpy", "code", "codeop", "pty", "multiprocessing",
    "socket", "signal", "shutil", "shelve", "dill", "cffi", "inspect", "gc",
})


@functools.lru_cache(maxsize=4096)
def keeps_input_as_data(solution: str) -> bool:
    """Whether ``solution`` names none of the builtins, attributes or modules that could run its
    input as code (:data:`_CODE_BUILTINS`, :data:`_CODE_ATTRIBUTES`, :data:`_CODE_MODULES`);
    ``False`` where it does not parse."""
    try:
        tree = ast.parse(solution)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _CODE_BUILTINS:
            return False
        if isinstance(node, ast.Attribute) and node.attr in _CODE_ATTRIBUTES:
            return False
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in _CODE_MODULES for a in node.names):
            return False
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _CODE_MODULES:
            return False
    return True


def enabled(env: Any) -> bool:
    """Whether ``env``'s step grades this stdin/stdout problem's golden solution and wrong
    programs in one run: the catch reward with ``catch_runs`` other than ``"per_program"``, and
    a golden solution that keeps its input as data (:func:`keeps_input_as_data`)."""
    problem = env.problem
    return (
        problem is not None
        and problem.style == "io"
        and problem.solution is not None
        and env.config.catch_runs != "per_program"
        and keeps_input_as_data(problem.solution)
    )


def one_run(env: Any, tests: tuple[Any, ...]) -> tuple[tuple[Any, int, int], Any]:
    """``((golden report, caught, wrong programs), the coder's code's report or None)``: the
    golden solution and every wrong program on the tester's cases ``tests`` in one run (the
    coder's code in runs of its own, at the same time), counted as one run each counts them
    (``env._count_caught``); what the run did not establish is graded one run per program (all
    of it, where the golden's report is not established)."""
    problem, time_s = env.problem, env.config.test_time_s
    programs = [problem.solution, *env._mutants()]
    gradings = [Grading.io_programs_of(problem, programs, tests, time_s=time_s, golden=0)]
    if env._code is not None:
        gradings.append(Grading.tests_of(problem, env._code, tests, time_s=time_s))
    with env._waiting_for_sandbox():
        results = env._grade(gradings)
    reports = list(results[0])
    code_report = results[1] if env._code is not None else None
    again = range(len(programs)) if reports[0] is None else [i for i, r in enumerate(reports) if r is None]
    if again:
        for i, report in zip(again, env._judge_all([(programs[i], tests) for i in again])):
            reports[i] = report
    caught, count = env._count_caught(reports[0], [(p, tests, 0) for p in programs[1:]], reports[1:])
    return (reports[0], caught, count), code_report


def judge_candidates(env: Any, programs: Sequence[str], needed: int | None = None,
                     cases: Sequence[Any] | None = None) -> list[Any]:
    """The reports of mutant candidates ``programs`` on ``cases`` (default: the golden cases) in
    one run, under the choice's time limit, none after a case that reached it; with ``needed``,
    no candidate starts once ``needed`` of those that have ended are wrong programs
    (``mutants.NOT_JUDGED`` for those it did not start). A candidate the run did not establish
    is judged in runs of its own (``env._judge_candidates``)."""
    cases = env.golden_tests if cases is None else cases
    grading = Grading.io_programs_of(
        env.problem, programs, cases, time_s=env._choice_time_s(), enough=needed, stop_at_timeout=True
    )
    with env._waiting_for_sandbox():
        reports = env._grade([grading])[0]
    verdicts: list[Any] = [mutants.NOT_JUDGED if r is not None and r.skipped else r for r in reports]
    again = [i for i, verdict in enumerate(verdicts) if verdict is None]
    if again:
        for i, report in zip(again, env._judge_candidates([programs[i] for i in again], cases)):
            verdicts[i] = report
    return verdicts
