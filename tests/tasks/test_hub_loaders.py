"""Every hub loader on local files in the hub schema (JSONL and parquet), split policies, and
the error for a missing dataset. Nothing here touches the network."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sandboxes
from llm_envs.tasks import DatasetUnavailableError, load_task_source
from llm_envs.tasks.code_datasets import decode_lcb_tests, lcb_files
from llm_envs.tasks.math_datasets import gsm8k_final_answer
from llm_envs.verifiers.code import judge
from llm_envs.verifiers.math import check_answer


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def ids(source) -> set[str]:
    return {p.id for p in source}


# ---------------------------------------------------------------------------------------------
# math


def gsm8k_rows(start: int, count: int) -> list[dict]:
    rows = []
    for i in range(start, start + count):
        rows.append(
            {
                "question": f"Tom has {i} apples and buys {i + 1000} more. How many apples now?",
                "answer": f"He has {i} + {i + 1000} = <<{i}+{i + 1000}={2 * i + 1000}>>{2 * i + 1000}.\n#### {2 * i + 1000:,}",
            }
        )
    return rows


def test_gsm8k_official_splits_from_a_directory(tmp_path):
    write_jsonl(tmp_path / "gsm8k" / "train.jsonl", gsm8k_rows(0, 30))
    write_parquet(
        tmp_path / "gsm8k" / "test-00000-of-00001.parquet", gsm8k_rows(100, 10)
    )
    train = load_task_source("gsm8k", split="train", path=tmp_path / "gsm8k")
    test = load_task_source("gsm8k", split="test", path=str(tmp_path / "gsm8k"))
    assert (len(train), len(test)) == (30, 10)
    assert not ids(train) & ids(test)
    problem = test.get(3)
    assert problem.answer == str(
        2 * 103 + 1000
    )  # "1,206" in the file: separators removed
    assert problem.prompt.startswith("Tom has 103 apples")
    assert (
        "####" not in problem.solution
        and problem.style == "answer"
        and problem.split == "test"
    )
    with pytest.raises(ValueError, match="split_policy='hash'"):
        load_task_source("gsm8k", split="validation", path=tmp_path / "gsm8k")


def test_gsm8k_rows_without_a_final_answer_are_skipped(tmp_path):
    # ("#### " was served as a problem nobody could be paid for solving; "####" alone raised)
    rows = gsm8k_rows(0, 3) + [{"question": "q1", "answer": "work\n#### "}, {"question": "q2", "answer": "work ####"}]
    write_jsonl(tmp_path / "gsm8k" / "test.jsonl", rows)
    source = load_task_source("gsm8k", split="test", path=tmp_path / "gsm8k")
    assert len(source) == 3 and all(source.get(i).answer for i in range(3))


def test_rows_whose_fields_are_missing_or_of_another_type_are_left_out_and_counted(tmp_path, caplog):
    # A GSM8K row without a question failed mid-episode (KeyError) or at load under the hash
    # policy; a MATH-500 answer given as a list became the answer key "['2', '3']", which no
    # answer matches; an MBPP test_list given as one string was one test per character.
    gsm = gsm8k_rows(0, 2) + [{"answer": "work\n#### 3"}, {"question": None, "answer": "#### 3"}, {"question": "q", "answer": 42}]
    write_jsonl(tmp_path / "gsm8k" / "test.jsonl", gsm)
    with caplog.at_level("WARNING", logger="llm_envs.tasks.hub"):
        source = load_task_source("gsm8k", split="test", path=tmp_path / "gsm8k")
    assert len(source) == 2 and source.rows_left_out == 3
    assert "3 row(s) of" in caplog.text and "left out" in caplog.text
    math = [{"problem": "1+1?", "answer": "2", "unique_id": "a"}, {"problem": "roots?", "answer": ["2", "3"], "unique_id": "b"},
            {"problem": "p", "answer": {"value": 3}, "unique_id": "c"}, {"problem": "q", "answer": True, "unique_id": "d"},
            {"problem": "r", "answer": 1.5, "unique_id": "e"}]
    write_jsonl(tmp_path / "math500" / "test.jsonl", math)
    source = load_task_source("math500", split="test", path=tmp_path / "math500", split_policy="benchmark")
    assert sorted(p.answer for p in source) == ["1.5", "2"] and source.rows_left_out == 3
    mbpp = [{"task_id": 1, "text": "Add.", "code": "def f(a):\n    return a + 1", "test_list": ["assert f(1) == 2"]},
            {"task_id": 2, "text": "Add.", "code": "def g(a):\n    return a + 1", "test_list": "assert g(1) == 2"}]
    write_jsonl(tmp_path / "mbpp" / "test.jsonl", mbpp)
    source = load_task_source("mbpp", split="test", path=tmp_path / "mbpp", keep_memorisable=True)
    assert [p.id for p in source] == ["mbpp/1"] and source.get(0).tests == ("assert f(1) == 2",)


def test_gsm8k_hash_policy_pools_and_partitions_all_rows(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", gsm8k_rows(0, 120))
    write_jsonl(tmp_path / "test.jsonl", gsm8k_rows(500, 40))
    parts = {
        s: ids(load_task_source("gsm8k", split=s, path=tmp_path, split_policy="hash"))
        for s in ("train", "validation", "test")
    }
    assert sum(len(v) for v in parts.values()) == 160
    assert (
        not parts["train"] & parts["test"]
        and not parts["train"] & parts["validation"]
        and not parts["validation"] & parts["test"]
    )


def test_gsm8k_missing_split_file_and_unnamed_file_are_clear_errors(tmp_path):
    write_jsonl(tmp_path / "only" / "train.jsonl", gsm8k_rows(0, 5))
    with pytest.raises(DatasetUnavailableError, match="no 'test' split"):
        load_task_source("gsm8k", split="test", path=tmp_path / "only")
    dump = write_jsonl(tmp_path / "gsm8k_dump.jsonl", gsm8k_rows(0, 5))
    with pytest.raises(DatasetUnavailableError, match="name each file after a split"):
        load_task_source("gsm8k", split="train", path=dump)
    # A file named after its split is fine on its own.
    single = write_jsonl(tmp_path / "single" / "test.jsonl", gsm8k_rows(0, 5))
    assert len(load_task_source("gsm8k", split="test", path=single)) == 5


def test_gsm8k_final_answer():
    assert gsm8k_final_answer("so 3 + 4 = 7\n#### 7") == "7"
    assert gsm8k_final_answer("...\n#### 1,234,567") == "1234567"
    with pytest.raises(ValueError):
        gsm8k_final_answer("no marker")


def test_math_answers_that_are_only_delimiters_are_left_out(tmp_path):
    # "$$" stripped to "": a problem nobody can be paid for was served
    rows = [{"problem": f"Q{i}", "answer": answer, "solution": "", "subject": "x", "level": 1, "unique_id": f"u{i}"}
            for i, answer in enumerate(["$$", "$ $", "\\boxed{}", "{}", "\\text{}", ".", "5", "$x^2$"])]
    source = load_task_source("math500", split="test", path=write_jsonl(tmp_path / "t.jsonl", rows),
                              split_policy="benchmark")
    assert sorted(p.answer for p in source) == ["5", "x^2"] and source.rows_left_out == 6


def test_math500_single_split_hash_and_benchmark(tmp_path):
    rows = [
        {
            "problem": f"Compute ${i}\\cdot 2$.",
            "solution": f"${i}\\cdot 2 = \\boxed{{{2 * i}}}$",
            "answer": f"${2 * i}$" if i % 2 else str(2 * i),
            "subject": "Prealgebra",
            "level": 1 + i % 5,
            "unique_id": f"test/prealgebra/{i}.json",
        }
        for i in range(80)
    ]
    path = write_jsonl(tmp_path / "anything.jsonl", rows)
    everything = load_task_source(
        "math500", split="test", path=path, split_policy="benchmark"
    )
    assert len(everything) == 80
    problem = everything.get(7)
    assert (problem.id, problem.answer, problem.metadata["level"]) == (
        "math500/test/prealgebra/7.json",
        "14",
        3,
    )
    train = load_task_source("math500", split="train", path=path)
    test = load_task_source("math500", split="test", path=path)
    assert len(train) + len(test) <= 80 and len(train) > len(test) > 0
    assert not ids(train) & ids(test)
    with pytest.raises(ValueError, match="single split"):
        load_task_source("math500", split="test", path=path, split_policy="official")
    with pytest.raises(ValueError, match="benchmark"):
        load_task_source("math500", split="train", path=path, split_policy="benchmark")


def test_aime_2024_parquet_and_2025_jsonl(tmp_path):
    aime24 = [
        {
            "id": 60 + i,
            "problem": f"AIME 2024 problem {i}",
            "solution": "...",
            "answer": str(100 + i),
            "url": "u",
            "year": "2024",
        }
        for i in range(30)
    ]
    source = load_task_source(
        "aime2024",
        split="test",
        split_policy="benchmark",
        path=write_parquet(tmp_path / "train.parquet", aime24),
    )
    assert len(source) == 30
    assert (source.get(0).id, source.get(0).answer, source.get(0).prompt) == (
        "aime2024/60",
        "100",
        "AIME 2024 problem 0",
    )
    aime25 = [
        {"problem": f"AIME 2025 problem {i}", "answer": str(i), "id": f"I-{i}"}
        for i in range(30)
    ]
    source = load_task_source(
        "aime2025",
        split="test",
        split_policy="benchmark",
        path=write_jsonl(tmp_path / "aime25.jsonl", aime25),
    )
    assert [p.answer for p in source][:3] == ["0", "1", "2"] and source.get(
        2
    ).id == "aime2025/I-2"


def test_olympiadbench_answers_context_and_units(tmp_path):
    base = {
        "solution": ["step one", "step two"],
        "is_multiple_answer": False,
        "answer_type": "Numerical",
        "subfield": "Algebra",
        "language": "English",
        "context": None,
        "unit": None,
    }
    rows = [
        {**base, "id": 1, "question": "Find $x$.", "final_answer": ["$\\frac{1}{2}$"]},
        {
            **base,
            "id": 2,
            "question": "Find all roots.",
            "final_answer": ["$1$", "$2$"],
            "is_multiple_answer": True,
        },
        {
            **base,
            "id": 3,
            "question": "How far?",
            "final_answer": ["$5$"],
            "context": "A car moves.",
            "unit": "m",
        },
        {**base, "id": 4, "question": "No answer", "final_answer": []},
    ]
    source = load_task_source(
        "olympiadbench",
        split="test",
        split_policy="benchmark",
        path=write_jsonl(tmp_path / "train.jsonl", rows),
    )
    assert len(source) == 3  # the row without a final answer is skipped
    first, second, third = (source.get(i) for i in range(3))
    assert first.answer == "\\frac{1}{2}" and check_answer("0.5", first.answer)
    assert second.answer == "1, 2" and second.metadata["multiple_answers"]
    assert third.prompt.startswith("A car moves.") and "in m" in third.prompt
    assert first.solution == "step one\n\nstep two"


# ---------------------------------------------------------------------------------------------
# code


def mbpp_row(task_id: int) -> dict:
    return {
        "task_id": task_id,
        "text": f"Write a function to add {task_id} to a number.",
        "code": f"def add_{task_id}(x):\n    return x + {task_id}\n",
        "test_list": [f"assert add_{task_id}({k}) == {k + task_id}" for k in range(3)],
        "test_setup_code": "import math",
        "challenge_test_list": [],
    }


def test_mbpp_full_official_splits_and_golden_code_passes(tmp_path):
    for split, start in (
        ("train", 600),
        ("validation", 510),
        ("test", 11),
        ("prompt", 1),
    ):
        write_jsonl(
            tmp_path / f"{split}.jsonl", [mbpp_row(start + i) for i in range(4)]
        )
    sources = {
        s: load_task_source("mbpp", split=s, path=tmp_path)
        for s in ("train", "validation", "test")
    }
    assert {s: len(v) for s, v in sources.items()} == {
        "train": 4,
        "validation": 4,
        "test": 4,
    }
    problem = sources["test"].get(0)
    assert (
        problem.id == "mbpp/11"
        and problem.entry_point == "add_11"
        and problem.style == "function"
    )
    assert problem.setup == "import math" and len(problem.tests) == 3
    assert (
        "assert add_11(0) == 11" in problem.prompt
    )  # the first test is shown as an example
    sandbox = sandboxes.shared_sandbox("auto")
    assert judge(sandbox, problem, problem.solution).pass_rate == 1.0
    assert judge(sandbox, problem, "def add_11(x):\n    return x\n").pass_rate == 0.0


def test_mbpp_sanitized_schema(tmp_path):
    row = {
        "source_file": "x",
        "task_id": 2,
        "prompt": "Write a function to find shared elements.",
        "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
        "test_imports": [],
        "test_list": [
            "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))"
        ],
    }
    source = load_task_source(
        "mbpp",
        split="test",
        path=write_parquet(tmp_path / "test.parquet", [row]),
        config="sanitized",
    )
    problem = source.get(0)
    assert problem.entry_point == "similar_elements" and problem.prompt.startswith(
        "Write a function to find"
    )
    assert (
        judge(sandboxes.shared_sandbox("auto"), problem, problem.solution).pass_rate
        == 1.0
    )


def apps_row(problem_id: int, **overrides) -> dict:
    row = {
        "id": problem_id,
        "question": f"Read two integers and print their sum plus {problem_id}.",
        "solutions": json.dumps(
            [f"a, b = map(int, input().split())\nprint(a + b + {problem_id})\n"]
        ),
        "input_output": json.dumps(
            {
                "inputs": ["1 2\n", ["3 4"]],
                "outputs": [f"{3 + problem_id}\n", [f"{7 + problem_id}"]],
            }
        ),
        "difficulty": "introductory",
        "url": "https://example.com",
        "starter_code": "",
    }
    row.update(overrides)
    return row


def test_apps_problems_and_golden_program_passes(tmp_path):
    rows = [
        apps_row(1),
        apps_row(2),
        apps_row(
            3,
            input_output=json.dumps(
                {"fn_name": "f", "inputs": [[1]], "outputs": [[2]]}
            ),
            solutions=json.dumps(["def f(x):\n    return x + 1\n"]),
        ),  # call-based: a function-style problem (more in test_call_based.py)
        apps_row(4, solutions=""),  # no golden program
        apps_row(5, input_output=""),  # no tests
    ]
    write_jsonl(tmp_path / "test.jsonl", rows)
    write_jsonl(tmp_path / "train.jsonl", [apps_row(100 + i) for i in range(3)])
    test = load_task_source("apps", split="test", path=tmp_path)
    assert sorted(p.id for p in test) == ["apps/1", "apps/2", "apps/3"]
    assert [p.style for p in test] == ["io", "io", "function"]
    assert (
        len(
            load_task_source(
                "apps", split="test", path=tmp_path, require_solution=False
            )
        )
        == 4
    )
    assert len(load_task_source("apps", split="train", path=tmp_path)) == 3
    problem = test.get(1)
    assert problem.style == "io" and problem.tests == (
        ("1 2\n", "5\n"),
        ("3 4\n", "9\n"),
    )
    report = judge(sandboxes.shared_sandbox("auto"), problem, problem.solution)
    assert report.pass_rate == 1.0
    assert judge(sandboxes.shared_sandbox("auto"), problem, "print(0)").pass_rate == 0.0


def cc_row(name: str, python3: bool = True) -> dict:
    languages = [2, 3] if python3 else [2]
    solutions = ["int main(){}", "n = int(input())\nprint(n * 2)\n"][: len(languages)]
    return {
        "name": name,
        "description": f"{name}: read n and print 2n.",
        "public_tests": {"input": ["3\n"], "output": ["6\n"]},
        "private_tests": {"input": ["10\n", "0\n"], "output": ["20\n", "0\n"]},
        "generated_tests": {"input": ["7\n"], "output": ["14\n"]},
        "source": 2,
        "difficulty": 7,
        "solutions": {"language": languages, "solution": solutions},
        "incorrect_solutions": {"language": [], "solution": []},
        "cf_rating": 800,
        "time_limit": {"seconds": 2, "nanos": 500000000},
        "memory_limit_bytes": 256000000,
    }


def test_code_contests_parquet_splits_tests_and_python3_solution(tmp_path):
    write_parquet(
        tmp_path / "train.parquet", [cc_row("t1"), cc_row("t2", python3=False)]
    )
    write_parquet(tmp_path / "valid.parquet", [cc_row("v1")])
    write_parquet(tmp_path / "test.parquet", [cc_row("x1"), cc_row("x2")])
    assert [
        p.id for p in load_task_source("code_contests", split="train", path=tmp_path)
    ] == ["code_contests/t1"]
    assert (
        len(
            load_task_source(
                "code_contests", split="train", path=tmp_path, require_solution=False
            )
        )
        == 2
    )
    assert [
        p.id
        for p in load_task_source("code_contests", split="validation", path=tmp_path)
    ] == ["code_contests/v1"]
    test = load_task_source("code_contests", split="test", path=tmp_path)
    problem = test.get(0)
    assert problem.tests == (("3\n", "6\n"), ("10\n", "20\n"), ("0\n", "0\n"))
    assert problem.metadata["time_limit_s"] == pytest.approx(2.5)
    assert (
        len(
            load_task_source(
                "code_contests", split="test", path=tmp_path, include_generated=True
            )
            .get(0)
            .tests
        )
        == 4
    )
    assert (
        judge(sandboxes.shared_sandbox("auto"), problem, problem.solution).pass_rate
        == 1.0
    )


def lcb_compressed(cases: list[dict]) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode(
        "ascii"
    )


def test_livecodebench_stdin_problems_with_compressed_private_tests(tmp_path):
    stdin_row = {
        "question_title": "Double",
        "question_content": "Read n, print 2n.",
        "platform": "atcoder",
        "question_id": "abc001_a",
        "contest_id": "abc001",
        "contest_date": "2024-08-01T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps(
            [{"input": "2\n", "output": "4\n", "testtype": "stdin"}]
        ),
        "private_test_cases": lcb_compressed(
            [{"input": "5\n", "output": "10\n", "testtype": "stdin"}]
        ),
        "metadata": "{}",
    }
    plain_row = {
        **stdin_row,
        "question_id": "abc002_a",
        "question_content": "Read n, print 2n (again).",
        "private_test_cases": json.dumps(
            [{"input": "1\n", "output": "2\n", "testtype": "stdin"}]
        ),
    }
    functional = {  # no starter code, so no method to call: skipped (see test_call_based.py)
        **stdin_row,
        "question_id": "lc1",
        "platform": "leetcode",
        "question_content": "class Solution...",
        "public_test_cases": json.dumps(
            [{"input": "[1]", "output": "2", "testtype": "functional"}]
        ),
    }
    silent = {  # every expected output blank: a program printing nothing would pass
        **stdin_row,
        "question_id": "abc003_a",
        "public_test_cases": json.dumps([{"input": "1\n", "output": "\n", "testtype": "stdin"}]),
        "private_test_cases": json.dumps([]),
    }
    path = write_jsonl(tmp_path / "test6.jsonl", [stdin_row, plain_row, functional, silent])
    source = load_task_source(
        "livecodebench", split="test", split_policy="benchmark", path=path
    )
    assert [p.id for p in source] == [
        "livecodebench/abc001_a",
        "livecodebench/abc002_a",
    ]
    assert source.get(0).tests == (("2\n", "4\n"), ("5\n", "10\n")) and source.get(
        1
    ).tests == (("2\n", "4\n"), ("1\n", "2\n"))
    assert source.get(0).solution is None and source.has_golden_solutions is False
    assert (
        judge(
            sandboxes.shared_sandbox("auto"), source.get(0), "print(2 * int(input()))"
        ).pass_rate
        == 1.0
    )


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_livecodebench_decoding_refuses_pickled_code():
    with pytest.raises(ValueError, match="cannot decode"):
        decode_lcb_tests(
            base64.b64encode(zlib.compress(pickle.dumps(_Exploit()))).decode("ascii")
        )
    assert decode_lcb_tests("") == [] and decode_lcb_tests("[]") == []


def test_livecodebench_versions():
    assert lcb_files("v6") == [
        "hf://datasets/livecodebench/code_generation_lite/test6.jsonl"
    ]
    assert [f.rsplit("/", 1)[-1] for f in lcb_files("release_v3")] == [
        "test.jsonl",
        "test2.jsonl",
        "test3.jsonl",
    ]
    with pytest.raises(ValueError):
        lcb_files("latest")


# ---------------------------------------------------------------------------------------------
# errors


def test_rows_whose_tests_no_program_can_fail_are_left_out_and_counted(tmp_path):
    """A problem whose every expected output is blank (a program printing nothing passes), or
    whose tests hold no assertion ("f(1)": a program returning -1 passed with reward 2.0), is
    left out, as an empty field is."""
    empty_io = json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["", " \n\t"]})
    write_jsonl(tmp_path / "apps" / "test.jsonl",
                [apps_row(1), apps_row(2, input_output=empty_io, solutions=json.dumps(["pass"]))])
    apps = load_task_source("apps", split="test", path=tmp_path / "apps")
    assert ids(apps) == {"apps/1"} and apps.rows_left_out == 1
    blank = cc_row("blank")
    blank["public_tests"] = {"input": ["1\n"], "output": ["\n"]}
    blank["private_tests"] = {"input": [], "output": []}
    write_parquet(tmp_path / "cc" / "test.parquet", [cc_row("x1"), blank])
    contests = load_task_source("code_contests", split="test", path=tmp_path / "cc")
    assert ids(contests) == {"code_contests/x1"} and contests.rows_left_out == 1
    rows = [mbpp_row(11)]
    for task_id, tests in ((12, [""]), (13, ["add_13(1)"]), (14, ["# assert add_14(1) == 15"]),
                           (15, ["assert add_15(1) == 16", "add_15(2)"])):
        rows.append({**mbpp_row(task_id), "test_list": tests})
    write_jsonl(tmp_path / "mbpp" / "test.jsonl", rows)
    mbpp = load_task_source("mbpp", split="test", path=tmp_path / "mbpp")
    assert ids(mbpp) == {"mbpp/11"} and mbpp.rows_left_out == 4
    # a test that raises is a check too
    write_jsonl(tmp_path / "mbpp2" / "test.jsonl",
                [{**mbpp_row(16), "test_list": ["if add_16(1) != 17:\n    raise AssertionError"]}])
    assert ids(load_task_source("mbpp", split="test", path=tmp_path / "mbpp2")) == {"mbpp/16"}


def test_a_missing_path_says_how_to_get_the_data(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="does not exist") as info:
        load_task_source("math500", split="test", path=tmp_path / "missing.jsonl")
    assert "HuggingFaceH4/MATH-500" in str(info.value) and "load_dataset" in str(
        info.value
    )


def test_a_dataset_not_on_disk_and_not_reachable_is_an_error_not_a_fallback():
    # conftest sets HF_HUB_OFFLINE=1, so the hub is unreachable at once.
    with pytest.raises(DatasetUnavailableError) as info:
        load_task_source("gsm8k", split="train")
    message = str(info.value)
    assert "openai/gsm8k" in message and "path=" in message and "to_json" in message
    with pytest.raises(
        DatasetUnavailableError,
        match="huggingface-cli download livecodebench/code_generation_lite test6.jsonl",
    ):
        load_task_source("livecodebench", split="test")


def test_malformed_files_are_reported_with_their_line(tmp_path):
    bad = tmp_path / "test.jsonl"
    bad.write_text('{"problem": "x", "answer": "1"}\nnot json\n', encoding="utf-8")
    with pytest.raises(DatasetUnavailableError, match="line 2"):
        load_task_source("math500", split="test", path=bad, split_policy="benchmark")


def test_unknown_options_are_rejected(tmp_path):
    path = write_jsonl(tmp_path / "test.jsonl", gsm8k_rows(0, 3))
    with pytest.raises(TypeError, match="unknown option"):
        load_task_source("gsm8k", split="test", path=path, colour="blue")
    with pytest.raises(ValueError, match="split_policy"):
        load_task_source("gsm8k", split="test", path=path, split_policy="random")


# ---------------------------------------------------------------------------------------------
# the hub road: datasets.load_dataset on local copies of hub repositories (repo=)


@pytest.fixture
def datasets_cache(tmp_path, monkeypatch):
    """``datasets`` writes its Arrow cache here, not into the user's cache."""
    datasets = pytest.importorskip("datasets", reason="the 'data' extra (datasets) is not installed")
    cache = tmp_path / "hf_datasets_cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    return cache


def gsm8k_repo(root: Path) -> Path:
    """The layout of openai/gsm8k on the hub: two configs, parquet shards, README configs."""
    write_parquet(root / "main" / "train-00000-of-00001.parquet", gsm8k_rows(0, 30))
    write_parquet(root / "main" / "test-00000-of-00001.parquet", gsm8k_rows(100, 10))
    write_parquet(root / "socratic" / "train-00000-of-00001.parquet", gsm8k_rows(500, 5))
    write_parquet(root / "socratic" / "test-00000-of-00001.parquet", gsm8k_rows(600, 5))
    (root / "README.md").write_text(
        "---\nconfigs:\n"
        "- config_name: main\n  data_files:\n"
        "  - split: train\n    path: main/train-*\n  - split: test\n    path: main/test-*\n"
        "- config_name: socratic\n  data_files:\n"
        "  - split: train\n    path: socratic/train-*\n  - split: test\n    path: socratic/test-*\n"
        "---\n# GSM8K (local copy)\n",
        encoding="utf-8",
    )
    return root


def test_gsm8k_through_datasets_load_dataset_matches_the_file_reader(tmp_path, datasets_cache):
    repo = gsm8k_repo(tmp_path / "gsm8k_repo")
    hub = load_task_source("gsm8k", split="test", repo=repo)
    write_parquet(tmp_path / "files" / "test.parquet", gsm8k_rows(100, 10))
    files = load_task_source("gsm8k", split="test", path=tmp_path / "files")
    assert [(p.id, p.prompt, p.answer, p.solution) for p in hub] == [
        (p.id, p.prompt, p.answer, p.solution) for p in files
    ]
    assert list(datasets_cache.iterdir()), "the rows came through datasets' Arrow cache"
    # The config option picks the repository's other config, as on the hub.
    socratic = load_task_source("gsm8k", split="train", repo=str(repo), config="socratic")
    assert len(socratic) == 5 and socratic.get(0).prompt.startswith("Tom has 500 apples")


def test_raw_file_datasets_read_from_a_local_repository_copy(tmp_path, datasets_cache):
    # APPS is stored as raw JSONL files on the hub (no loader): train.jsonl and test.jsonl.
    repo = tmp_path / "apps_repo"
    write_jsonl(repo / "test.jsonl", [apps_row(1), apps_row(2)])
    write_jsonl(repo / "train.jsonl", [apps_row(10), apps_row(11), apps_row(12)])
    test = load_task_source("apps", split="test", repo=repo)
    train = load_task_source("apps", split="train", repo=repo)
    assert sorted(p.id for p in test) == ["apps/1", "apps/2"]
    assert sorted(p.id for p in train) == ["apps/10", "apps/11", "apps/12"]
    assert test.get(0).tests == load_task_source("apps", split="test", path=repo).get(0).tests


def test_a_repository_copy_under_the_home_directory(tmp_path, datasets_cache, monkeypatch):
    # repo="~/..." is a local copy, as path="~/..." is (not a hub id starting with "~").
    monkeypatch.setenv("HOME", str(tmp_path))
    write_jsonl(tmp_path / "apps_repo" / "test.jsonl", [apps_row(1), apps_row(2)])
    write_jsonl(tmp_path / "apps_repo" / "train.jsonl", [apps_row(10)])
    gsm8k_repo(tmp_path / "gsm8k_repo")
    assert sorted(p.id for p in load_task_source("apps", split="test", repo="~/apps_repo")) == [
        "apps/1", "apps/2"]
    assert len(load_task_source("gsm8k", split="test", repo="~/gsm8k_repo")) == 10


def test_a_broken_repository_copy_is_a_clear_error(tmp_path, datasets_cache):
    empty = tmp_path / "not_a_copy"
    empty.mkdir()
    with pytest.raises(DatasetUnavailableError, match="from a local copy") as info:
        load_task_source("gsm8k", split="train", repo=empty)
    assert "openai/gsm8k" in str(info.value)  # how to get the real one
    with pytest.raises(ValueError, match="not both"):
        load_task_source("gsm8k", split="train", repo=empty, path=empty)
