"""The pure helpers shared by the puzzle environments: extraction, compile check, splits."""

from __future__ import annotations

import numpy as np
import pytest

from llm_envs.core.splits import split_of
from llm_envs.envs.puzzle_base import PuzzleConfig
from llm_envs.envs.puzzle_rules import (
    compile_error,
    extract_answer,
    extract_program,
    extract_program_output_plan,
    generate_in_split,
    outside_code_blocks,
    truncate_middle,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no code here", None),
        ("```python\nprint(1)\n```", "print(1)\n"),
        ("```py\nx = 1\n```", "x = 1\n"),
        ("```Python3\nx = 1\n```", "x = 1\n"),
        # The last python block wins, even when a plain block follows it.
        ("```python\na\n```\n```python\nb\n```\n```\nplain\n```", "b\n"),
        # No python block: the last closed block of any kind.
        ("```\nplain one\n```\n```text\nplain two\n```", "plain two\n"),
        # An unterminated python block runs to the end.
        ("Here:\n```python\nprint(2)\n", "print(2)\n"),
        ("``````", ""),
    ],
)
def test_extract_program(text, expected):
    assert extract_program(text) == expected


def test_answer_lines_inside_code_count_only_as_a_fallback():
    reply = "```python\n#### helpers\nprint('#### U')\n```\n#### R"
    assert extract_answer(reply) == "R"
    code_only = "```python\n#### helpers\nprint(1)\n```"
    assert extract_answer(code_only) == "helpers"
    assert extract_answer(code_only, search_code_blocks=False) is None
    assert outside_code_blocks("a```x```b```y") == "a\nb"


def test_extract_program_handles_many_fences():
    # 100k fences: a backtracking regex would take minutes; the split-based scan is linear.
    assert extract_program("```\n" * 100_000) == ""
    assert extract_program("```python\nx\n" * 50_000) == "x\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("#### U D", "U D"),
        ("think...\n  ####   [[1,2],[2,1]]  \n", "[[1,2],[2,1]]"),
        ("#### first\nmore\n#### second", "second"),
        ("the #### marker mid-line does not count", None),
        ("####", ""),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ("", None),
        ("\n\n", None),
        ("searching...\n#### U R\ndone\n", "U R"),
        ("**Actions List**: [\"U\", \"R\"]\n", '["U", "R"]'),
        ("debug\nU R D\n", "U R D"),
    ],
)
def test_extract_program_output_plan(stdout, expected):
    assert extract_program_output_plan(stdout) == expected


@pytest.mark.parametrize(
    "source",
    [
        "def f(:\n",
        "x = '\x00'\n" + "\x00",
        "(" * 5000,
        "if True:\nprint(1)\n",
        "return 5\n",
    ],
)
def test_compile_error_reports_without_raising(source):
    error = compile_error(source)
    assert isinstance(error, str) and error


def test_compile_error_accepts_valid_programs_without_running_them():
    assert compile_error("import os\nos.system('exit 1')\nwhile True:\n    pass\n") is None


def test_generate_in_split_only_returns_members_of_the_split():
    def candidate(rng):
        value = int(rng.integers(0, 10**9))
        return None if value % 3 == 0 else str(value)

    rng = np.random.default_rng(0)
    for split in ("train", "validation", "test"):
        for _ in range(20):
            item = generate_in_split(rng, candidate, str, split)
            assert split_of(item) == split


def test_generate_in_split_gives_up_with_a_clear_error():
    with pytest.raises(RuntimeError, match="too restrictive"):
        generate_in_split(np.random.default_rng(0), lambda rng: None, str, "train", max_tries=5)


def test_truncate_middle_keeps_head_and_tail():
    text = "a" * 100 + "b" * 100
    cut = truncate_middle(text, 60)
    assert cut.startswith("a" * 40) and cut.endswith("b" * 20) and "140 characters cut" in cut
    assert truncate_middle("short", 60) == "short"


@pytest.mark.parametrize(
    "bad",
    [
        {"agents": "three"},
        {"reward_mode": "sparse"},
        {"max_turns": 0},
        {"split": "dev"},
        {"program_time_s": 0},
    ],
)
def test_config_validation(bad):
    with pytest.raises(ValueError):
        PuzzleConfig(**bad).validate()
