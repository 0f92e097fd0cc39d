"""HumanEval from the installed package: all 164 problems, split policies, golden tests."""

from __future__ import annotations

import pytest

import sandboxes
from llm_envs.core.splits import split_of
from llm_envs.tasks import load_task_source
from llm_envs.tasks.humaneval import load_humaneval_problems
from llm_envs.verifiers.code import judge_many


@pytest.fixture(scope="module")
def benchmark():
    return list(load_task_source("humaneval", split="test", split_policy="benchmark"))


def test_all_164_problems_with_split_assertions(benchmark):
    assert len(benchmark) == 164
    assert len({p.id for p in benchmark}) == 164
    for problem in benchmark:
        assert problem.style == "function" and problem.split == "test"
        assert problem.entry_point and f"def {problem.entry_point}" in problem.prompt
        assert problem.solution.startswith(problem.prompt)
        assert problem.tests and all(
            "candidate" in t or problem.entry_point in t for t in problem.tests
        )
    # The check bodies are split into single assertions: far more tests than problems.
    assert sum(len(p.tests) for p in benchmark) > 3 * 164


def test_hash_splits_partition_humaneval_without_overlap():
    by_split = {
        s: load_task_source("humaneval", split=s, keep_memorisable=True)
        for s in ("train", "validation", "test")
    }
    ids = {s: {p.id for p in source} for s, source in by_split.items()}
    assert sum(len(v) for v in ids.values()) == 164
    # by default train leaves out the memorisable problems (tests/tasks/test_memorisable.py)
    default_train = load_task_source("humaneval", split="train")
    assert {p.id for p in default_train} | set(default_train.memorisable_excluded) == ids["train"]
    assert (
        not ids["train"] & ids["test"]
        and not ids["train"] & ids["validation"]
        and not ids["validation"] & ids["test"]
    )
    for split, source in by_split.items():
        assert all(
            p.split == split and split_of(" ".join(p.prompt.split())) == split
            for p in source
        )


def test_benchmark_policy_is_test_only_and_unknown_options_fail():
    with pytest.raises(ValueError):
        load_task_source("humaneval", split="train", split_policy="benchmark")
    with pytest.raises(ValueError):
        load_task_source("humaneval", split="test", split_policy="official")
    with pytest.raises(TypeError):
        load_task_source("humaneval", split="test", path="/nowhere")
    assert (
        len(
            load_task_source(
                "humaneval", split="test", split_policy="benchmark", limit=5
            )
        )
        == 5
    )


def test_every_canonical_solution_passes_its_golden_tests_in_the_sandbox(benchmark):
    sandbox = sandboxes.shared_sandbox("auto")
    reports = judge_many(sandbox, [(p, p.solution) for p in benchmark])
    failures = {
        p.id: [r.error for r in rep.results if not r.passed]
        for p, rep in zip(benchmark, reports)
        if rep.pass_rate < 1.0
    }
    assert not failures


def test_a_solution_returning_none_fails_every_problem(benchmark):
    sandbox = sandboxes.shared_sandbox("auto")
    wrong = [
        (p, f"def {p.entry_point}(*args, **kwargs):\n    return None\n")
        for p in benchmark
    ]
    reports = judge_many(sandbox, wrong)
    assert all(rep.compiled and rep.ran for rep in reports)
    assert all(rep.pass_rate < 1.0 for rep in reports), [
        p.id for p, rep in zip(benchmark, reports) if rep.pass_rate >= 1.0
    ]


def test_problems_are_loaded_once():
    assert load_humaneval_problems() is load_humaneval_problems()


def test_no_golden_test_compares_the_program_with_itself():
    from llm_envs.tasks.golden_tests import compares_the_program_with_itself as itself

    problems = load_humaneval_problems()
    assert not [p.id for p in problems for t in p.tests if itself(t, p.entry_point)]
    # HumanEval/33's check compared sort_third with candidate three times: those are gone, and
    # a program that returns its argument, or nothing, passes no test left.
    sort_third = problems[33]
    assert len(sort_third.tests) == 4
    sandbox = sandboxes.shared_sandbox("auto")
    wrong = [(sort_third, "def sort_third(l):\n    return list(l)\n"), (sort_third, "def sort_third(l):\n    return []\n")]
    assert [rep.pass_rate for rep in judge_many(sandbox, wrong)] == [0.0, 0.0]
    assert itself("candidate = f\nassert tuple(candidate(1)) == tuple(f(1))", "f")
    assert itself("g = f\nassert g(2) == f(2) <= 3", "f") and itself("assert f(1) is f(1)", "f")
    # checks, kept: a value, a property of the program, another argument, an ordering
    assert not itself("candidate = f\nassert candidate(1) == 2", "f")
    assert not itself("assert f(1) == sorted(f(1))", "f") and not itself("assert f(1) <= f(2)", "f")
    assert not itself("assert f(1) < f(1)", "f") and not itself("assert len([1]) == len([1])", "f")
    assert not itself("assert f(1) == f(1)", None)
