"""Reading a step's by-value grading (``catch_runs="by_value"``, the default): the golden
solution and every wrong program on the tester's tests in one run where each test is an assert
on values (``sandboxes.run_value_checks``; the grading is built by
``CoderTesterEnv._grading_by_value``). The counts are those of one run per program: what the
run did not establish is graded in a run of its own."""

from __future__ import annotations

from typing import Any

from llm_envs.envs.coder_tester import mutants
from llm_envs.envs.grading import Grading

#: Outcomes that end a program's checks where a run of its own would go on with a fresh process.
_ENDING = ("timeout", "uncrossable", "unestablished")


def golden_report(env: Any, result: Any, tests: tuple[Any, ...]) -> Any:
    """The golden solution's report on the tester's ``tests`` from its by-value outcomes (a
    pass is a pass of a run of its own: the same asserts on the same values), or, where they do
    not establish every test (a time-out or a value that cannot cross ends them), from a run of
    its own."""
    from sandboxes import TestReport, TestResult

    if result is None or not result.ran or len(result.outcomes) != len(tests) or any(o in _ENDING for o in result.outcomes):
        problem = env.problem
        assert problem is not None
        return env._judge_all([(problem.solution, tests)])[0]
    return TestReport(
        results=[
            TestResult(index=i, name=f"test {i}", passed=outcome == "pass", error=None if outcome == "pass" else f"graded by value: {outcome}")
            for i, outcome in enumerate(result.outcomes)
        ],
        compiled=True,
        ran=True,
    )


def count_caught(env: Any, golden: Any, grading: Grading, results: Any, tests: tuple[Any, ...]) -> tuple[int, int]:
    """``(caught, wrong programs)`` of a by-value grading (:func:`mutants.caught_by_values`), the
    same counts as ``CoderTesterEnv._count_caught`` on runs of their own; a program whose
    outcome the grading did not establish is graded in a run of its own. ``golden``: the golden
    solution's report (:func:`golden_report`)."""
    golden_passing = [i for i, r in enumerate(golden.results) if r.passed]
    caught, again = 0, []
    # (the first program of the grading is the golden solution)
    for program, result in zip(grading.programs[1:], results[1:]):
        verdict = mutants.caught_by_values(result, golden_passing, len(grading.tests))
        if verdict is None:
            again.append(env._as_wrong_program(program))
        else:
            caught += verdict
    if again:
        reports = env._judge_all([(program, tests) for program in again])
        caught += sum(mutants.killed_by(r, False, among=golden_passing) for r in reports)
    return caught, len(grading.programs) - 1
