"""``llm/CoderTester-v0``: hand-computed rewards, feedback, termination, HumanEval end to end."""

from __future__ import annotations

import concurrent.futures
import json

import numpy as np
import pytest

import llm_envs
from llm_envs.envs.coder_tester import rules
from llm_envs.envs.coder_tester.env import CoderTesterEnv
from llm_envs.tasks import Problem
from tests.envs.helpers import ADD, ListSource

from .conftest import components, play, scripted

SUM_IO = Problem(
    id="toy/sum",
    prompt="Read two integers a and b on one line and print a + b.",
    split="train",
    solution="a, b = map(int, input().split())\nprint(a + b)\n",
    tests=(("1 2\n", "3\n"), ("5 5\n", "10\n")),
    style="io",
)


def code(body: str) -> str:
    return f"Here is my solution.\n**Code:**\n```python\n{body}```"


def written_tests(*lines: str) -> str:
    return "**Tests:**\n```python\n" + "\n".join(lines) + "\n```"


HALF_RIGHT = code(
    "def add(a, b):\n    return a + b if 0 <= a < 2 else -5\n"
)  # passes 2 of 4
GOLDEN = code(ADD.solution)
TESTS_HALF_RIGHT = written_tests(
    "assert add(1, 1) == 2", "assert add(2, 2) == 5"
)  # golden passes 1 of 2


def make_env(problem: Problem = ADD, sandbox=None, **overrides) -> CoderTesterEnv:
    return CoderTesterEnv(
        task_source=ListSource([problem]), sandbox=sandbox, **overrides
    )


# ---------------------------------------------------------------------------------------------
# rewards, hand-computed


def test_reward_formulas():
    assert rules.coder_local_reward(True, True, 0.5) == pytest.approx(0.1 + 0.1 + 0.4)
    assert rules.coder_local_reward(True, False, 0.75) == pytest.approx(0.1 + 0.6)
    assert rules.coder_local_reward(False, False, 0.0) == 0.0
    assert rules.tester_local_reward(True, 0.5) == pytest.approx(0.2 + 0.4)
    assert rules.tester_local_reward(False, 0.0) == 0.0
    assert rules.mixed_reward(0.5, 0.6, alpha=0.5) == pytest.approx(0.85)


def test_coder_and_tester_rewards_for_a_half_right_turn(sandbox):
    env = make_env(sandbox=sandbox, max_turns=1)
    totals = play(env, scripted({"coder": [HALF_RIGHT], "tester": [TESTS_HALF_RIGHT]}))
    # coder: team 2/4; local 0.1 builds + 0.1 runs (first 3 tests ran: wrong answers, no crash) + 0.8 * 0.5
    assert components(env, "coder") == pytest.approx({"team": 0.5, "local": 0.6})
    # tester: team = the coder's golden pass rate; local 0.2 valid + 0.8 * (golden solution passes
    # 1 of 2) * catch rate. The wrong programs: add's three mutants that fail a golden test
    # (a - b, type(a + b)() = 0, (a + b) + (a + b)), never the coder's attempt; the
    # golden-passing test add(1, 1) == 2 catches the three mutants.
    record = env.records[1]
    assert (record.info["wrong_programs"], record.info["wrong_programs_caught"]) == (3, 3)
    assert components(env, "tester") == pytest.approx(
        {"team": 0.5, "local": 0.2 + 0.8 * 0.5 * 3 / 3}
    )
    assert totals == pytest.approx({"coder": 1.1, "tester": 1.1})
    assert env.agent_rewards() == pytest.approx(totals)
    assert env.episode_metrics()["success"] == 0.0
    assert env.episode_metrics()["tester_catch_rate"] == pytest.approx(1.0)


def test_the_papers_tester_reward_is_an_option(sandbox):
    env = make_env(sandbox=sandbox, max_turns=1, tester_reward="paper")
    play(env, scripted({"coder": [HALF_RIGHT], "tester": [TESTS_HALF_RIGHT]}))
    # 0.2 valid + 0.8 * (golden solution passes 1 of 2); no wrong programs are run
    assert components(env, "tester") == pytest.approx({"team": 0.5, "local": 0.6})
    assert "wrong_programs" not in env.records[1].info
    assert "tester_catch_rate" not in env.episode_metrics()
    with pytest.raises(ValueError, match="tester_reward"):
        make_env(sandbox=sandbox, tester_reward="lenient")


def test_alpha_scales_only_the_team_term(sandbox):
    env = make_env(sandbox=sandbox, max_turns=1, alpha=0.5, tester_reward="paper")
    play(env, scripted({"coder": [HALF_RIGHT], "tester": [TESTS_HALF_RIGHT]}))
    assert components(env, "coder") == pytest.approx({"team": 0.25, "local": 0.6})
    assert sum(components(env, "tester").values()) == pytest.approx(0.85)


def test_a_crash_on_an_early_golden_test_loses_the_runs_term(sandbox):
    crashing = code(
        "def add(a, b):\n    if a < 0:\n        raise TypeError('negative')\n    return a + b\n"
    )
    env = make_env(sandbox=sandbox, max_turns=1)
    play(env, scripted({"coder": [crashing], "tester": [TESTS_HALF_RIGHT]}))
    record = env.records[0]
    assert (
        record.info["builds"],
        record.info["runs"],
        record.info["golden_pass_rate"],
    ) == (True, False, 0.75)
    assert components(env, "coder") == pytest.approx(
        {"team": 0.75, "local": 0.1 + 0.8 * 0.75}
    )


@pytest.mark.parametrize(
    "reply",
    [
        "def add(a, b) return a + b",
        "```python\ndef add(a, b) return\n```",
        "",
        "x" * 1_000_000,
    ],
)
def test_no_code_or_code_that_does_not_build_earns_nothing(sandbox, reply):
    env = make_env(sandbox=sandbox, max_turns=1)
    play(env, scripted({"coder": [reply], "tester": ["no tests, sorry"]}))
    assert components(env, "coder") == {"team": 0.0, "local": 0.0}
    assert components(env, "tester") == {"team": 0.0, "local": 0.0}
    assert not env.records[1].format_ok


def test_outcome_mode_pays_only_a_full_golden_pass(sandbox):
    env = make_env(sandbox=sandbox, max_turns=1, reward_mode="outcome")
    play(env, scripted({"coder": [HALF_RIGHT], "tester": [TESTS_HALF_RIGHT]}))
    assert env.agent_rewards() == {"coder": 0.0, "tester": 0.0}
    play(env, scripted({"coder": [GOLDEN], "tester": [TESTS_HALF_RIGHT]}))
    assert env.agent_rewards() == {"coder": 1.0, "tester": 1.0}
    assert components(env, "coder") == {"team": 1.0}


def test_the_golden_solution_judges_the_testers_tests(sandbox):
    right = written_tests("assert add(3, 4) == 7", "assert add(-2, -3) == -5")
    wrong = written_tests("assert add(3, 4) == 8", "assert add(-2, -3) == 5")
    for reply, golden_rate in ((right, 1.0), (wrong, 0.0)):
        env = make_env(sandbox=sandbox, max_turns=1, tester_reward="paper")
        play(env, scripted({"coder": [HALF_RIGHT], "tester": [reply]}))
        assert env.records[1].info["golden_solution_pass_rate"] == golden_rate
        assert components(env, "tester")["local"] == pytest.approx(
            0.2 + 0.8 * golden_rate
        )


def test_max_golden_tests_limits_the_golden_tests(sandbox):
    env = make_env(sandbox=sandbox, max_turns=1, max_golden_tests=2)
    play(env, scripted({"coder": [HALF_RIGHT], "tester": [TESTS_HALF_RIGHT]}))
    assert (
        env.records[0].info["golden_pass_rate"] == 1.0
        and env.episode_metrics()["success"] == 1.0
    )


# ---------------------------------------------------------------------------------------------
# turns, feedback, termination


def test_agreement_terminates_and_the_limit_truncates(sandbox):
    env = make_env(sandbox=sandbox)
    env.reset(seed=0)
    env.step(GOLDEN)
    env.step(written_tests("assert add(3, 4) == 7"))
    assert env.terminations == {"coder": True, "tester": True}
    assert env.truncations == {"coder": False, "tester": False}
    metrics = env.episode_metrics()
    assert (
        metrics["agreed"] == 1.0
        and metrics["success"] == 1.0
        and metrics["turns"] == 1.0
    )

    env = make_env(sandbox=sandbox, max_turns=3)
    env.reset(seed=0)
    for _ in range(3):
        assert not any(env.truncations.values())
        env.step(HALF_RIGHT)
        env.step(written_tests("assert add(3, 4) == 7"))
    assert env.truncations == {"coder": True, "tester": True} and not any(
        env.terminations.values()
    )
    assert (
        env.episode_metrics()["turns"] == 3.0 and env.episode_metrics()["agreed"] == 0.0
    )


def test_agreement_on_wrong_tests_ends_the_episode_without_success(sandbox):
    env = make_env(sandbox=sandbox)
    play(
        env,
        scripted(
            {"coder": [HALF_RIGHT], "tester": [written_tests("assert add(5, 5) == -5")]}
        ),
    )
    assert (
        env.episode_metrics()["agreed"] == 1.0
        and env.episode_metrics()["success"] == 0.0
    )
    assert components(env, "tester")["local"] == pytest.approx(
        0.2
    )  # valid, but the golden solution fails it


def test_later_turns_show_mismatches_and_the_tester_never_sees_this_turns_code(sandbox):
    coder = code("# MARKER-17\ndef add(a, b):\n    return a * b\n")
    env = make_env(sandbox=sandbox)
    env.reset(seed=0)
    assert "Write your solution" in env.observe("coder")["prompt"]
    env.step(coder)
    assert env.agent_selection == "tester"
    assert "MARKER-17" not in env.observe("tester")["prompt"]  # simultaneous turn
    env.step(written_tests("assert add(1, 2) == 3", "assert add(2, 2) == 4"))
    coder_prompt = env.observe("coder")["prompt"]
    assert (
        "MARKER-17" in coder_prompt
        and "passed 1 of the tester's 2 tests" in coder_prompt
    )
    assert (
        "assert add(1, 2) == 3" in coder_prompt and "expected 3, got 2" in coder_prompt
    )
    env.step(code(ADD.solution))
    tester_prompt = env.observe("tester")["prompt"]
    assert "MARKER-17" in tester_prompt and "expected 3, got 2" in tester_prompt
    assert "assert add(2, 2) == 4" in tester_prompt  # its previous tests


def test_io_problems_show_input_expected_and_actual(sandbox):
    env = make_env(SUM_IO, sandbox=sandbox, tester_reward="paper")
    env.reset(seed=0)
    assert "Test Input" in env.observe("tester")["instruction"]
    env.step(code("print(3)\n"))
    assert components(env, "coder") == pytest.approx(
        {"team": 0.5, "local": 0.1 + 0.1 + 0.4}
    )
    env.step(
        rules.reference_tester_reply(SUM_IO, 16)
        .replace("5 5", "2 2")
        .replace("10", "5")
    )
    assert components(env, "tester") == pytest.approx(
        {"team": 0.5, "local": 0.2 + 0.8 * 0.5}
    )
    prompt = env.observe("coder")["prompt"]
    assert (
        "Input:\n```\n2 2\n```" in prompt
        and "Expected output (from the tester):\n```\n5\n```" in prompt
    )
    assert "Actual output (from the code):\n```\n3\n```" in prompt


def test_a_hanging_program_is_cut_off(sandbox):
    env = make_env(SUM_IO, sandbox=sandbox, max_turns=1, test_time_s=0.5)
    play(
        env,
        scripted(
            {
                "coder": [code("while True:\n    pass\n")],
                "tester": [rules.reference_tester_reply(SUM_IO, 16)],
            }
        ),
    )
    assert components(env, "coder") == pytest.approx({"team": 0.0, "local": 0.1})
    assert env.episode_metrics()["success"] == 0.0


def test_single_agent_variant_is_one_coder_turn(sandbox):
    env = make_env(sandbox=sandbox, agents="single")
    assert env.possible_agents == ["coder"]
    totals = play(env, scripted({"coder": [HALF_RIGHT]}))
    assert (
        totals == pytest.approx({"coder": 1.1})
        and env.episode_metrics()["turns"] == 1.0
    )
    assert "tester" not in env.observe("coder")["instruction"]


def test_sources_without_golden_solutions_need_the_single_agent_variant(sandbox):
    no_solution = Problem(
        id="x", prompt=SUM_IO.prompt, split="test", tests=SUM_IO.tests, style="io"
    )
    source = ListSource([no_solution], has_golden_solutions=False)
    with pytest.raises(ValueError, match="golden solutions"):
        CoderTesterEnv(task_source=source, sandbox=sandbox)
    env = CoderTesterEnv(task_source=source, sandbox=sandbox, agents="single")
    play(env, scripted({"coder": [code(SUM_IO.solution)]}))
    assert env.episode_metrics()["success"] == 1.0


def test_math_tasks_and_bad_options_are_rejected():
    with pytest.raises(ValueError, match="code problems"):
        CoderTesterEnv(task="arithmetic")
    with pytest.raises(ValueError):
        CoderTesterEnv(agents="three")
    with pytest.raises(TypeError):
        CoderTesterEnv(colour="red")


def test_clone_mid_turn_is_independent(sandbox):
    env = make_env(sandbox=sandbox)
    env.reset(seed=1)
    env.step(HALF_RIGHT)
    twin = env.clone()
    twin.step(written_tests("assert add(0, 1) == 1"))
    assert (
        len(twin.records) == 2
        and len(env.records) == 1
        and env.agent_selection == "tester"
    )
    env.step("no tests")
    assert env.records[1].format_ok is False and twin.records[1].format_ok is True


def test_default_config_is_humaneval_train(sandbox):
    env = llm_envs.make("llm/CoderTester-v0")
    env.reset(seed=0)
    assert (
        env.config.task == "humaneval"
        and env.problem.id.startswith("HumanEval/")
        and env.problem.split == "train"
    )


def test_random_agents_are_well_formed_and_far_below_the_reference(sandbox):
    env = CoderTesterEnv(sandbox=sandbox)
    rng = np.random.default_rng(0)
    scores = []
    for seed in range(6):
        totals = play(env, lambda e, a: e.random_action(a, rng), seed=seed)
        scores.append(env.episode_metrics()["success"])
        assert all(r.format_ok for r in env.records)
        assert totals["coder"] < 2.0
    assert sum(scores) == 0


# ---------------------------------------------------------------------------------------------
# HumanEval end to end


def _reference_episodes(indices: range, sandbox) -> list[tuple[str, list[dict], dict]]:
    # The paper's tester reward: this test is about the team reward and agreement on every
    # problem; the default catch reward of the reference tester is checked on a sample in
    # test_coder_tester_catch.py (running the mutants of all 164 takes minutes).
    env = CoderTesterEnv(
        split="test",
        task_kwargs={"split_policy": "benchmark"},
        sandbox=sandbox,
        tester_reward="paper",
    )
    out = []
    for index in indices:
        play(
            env,
            lambda e, a: e.reference_action(a),
            seed=index,
            options={"problem_index": index},
        )
        out.append(
            (
                env.problem.id,
                [r.reward_components for r in env.records],
                env.episode_metrics(),
            )
        )
    return out


def test_reference_agents_earn_full_team_reward_on_all_164_humaneval_problems(sandbox):
    chunks = [range(k, 164, 4) for k in range(4)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        episodes = [
            e
            for chunk in pool.map(lambda c: _reference_episodes(c, sandbox), chunks)
            for e in chunk
        ]
    assert len({problem_id for problem_id, _, _ in episodes}) == 164
    for problem_id, reward_components, metrics in episodes:
        assert [c["team"] for c in reward_components] == [1.0, 1.0], problem_id
        assert [c["local"] for c in reward_components] == pytest.approx([1.0, 1.0]), (
            problem_id
        )
        assert (
            metrics["success"] == 1.0
            and metrics["agreed"] == 1.0
            and metrics["turns"] == 1.0
        ), problem_id


def test_a_coder_returning_none_scores_below_one_on_humaneval(sandbox):
    env = CoderTesterEnv(
        split="test",
        task_kwargs={"split_policy": "benchmark"},
        sandbox=sandbox,
        agents="single",
    )
    for index in range(0, 164, 8):
        env.reset(seed=0, options={"problem_index": index})
        env.step(
            code(f"def {env.problem.entry_point}(*args, **kwargs):\n    return None\n")
        )
        assert env.records[0].reward_components["team"] < 1.0, env.problem.id


def test_a_coder_returning_an_always_equal_object_earns_no_team_reward_on_humaneval(sandbox):
    # The classic reward hack of code RL: a result whose __eq__ always says True.
    env = CoderTesterEnv(
        split="test",
        task_kwargs={"split_policy": "benchmark"},
        sandbox=sandbox,
        agents="single",
    )
    hack = (
        "class Anything(int):\n"
        "    def __eq__(self, other): return True\n"
        "    def __ne__(self, other): return False\n"
        "    __hash__ = int.__hash__\n"
        "    def __bool__(self): return True\n"
        "    def __lt__(self, other): return True\n"
        "    def __sub__(self, other): return 0\n"
        "    def __abs__(self): return 0\n"
    )
    for index in range(0, 164, 8):
        env.reset(seed=0, options={"problem_index": index})
        env.step(code(hack + f"def {env.problem.entry_point}(*args, **kwargs):\n    return Anything()\n"))
        # Tests written as `abs(candidate(x) - y) < 1e-6` or plain truth tests can still be
        # fooled; no HumanEval problem is graded by those alone.
        assert env.records[0].reward_components["team"] < 1.0, env.problem.id


def test_stdin_stdout_tasks_from_a_local_apps_file(sandbox, tmp_path):
    rows = [
        {
            "id": i,
            "question": f"Read an integer n and print n + {i}.",
            "solutions": json.dumps([f"print(int(input()) + {i})\n"]),
            "input_output": json.dumps(
                {"inputs": ["1\n", "5\n"], "outputs": [f"{1 + i}\n", f"{5 + i}\n"]}
            ),
            "difficulty": "introductory",
            "url": "",
            "starter_code": "",
        }
        for i in range(3)
    ]
    (tmp_path / "test.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    env = CoderTesterEnv(
        task="apps", split="test", task_path=str(tmp_path), sandbox=sandbox
    )
    for index in range(3):
        play(env, lambda e, a: e.reference_action(a), options={"problem_index": index})
        assert env.problem.style == "io"
        assert env.episode_metrics()[
            "success"
        ] == 1.0 and env.agent_rewards() == pytest.approx({"coder": 2.0, "tester": 2.0})


def test_call_based_apps_problems_from_a_local_file(sandbox, tmp_path):
    rows = [
        {  # Codewars style: a function; outputs wrapped in a one-element list
            "id": 7,
            "question": "Return the sum of the squares of a and b.",
            "solutions": json.dumps(["def sum_sq(a, b):\n    return a * a + b * b\n"]),
            "input_output": json.dumps(
                {"fn_name": "sum_sq", "inputs": [[1, 2], [0, 3]], "outputs": [[5], [9]]}
            ),
            "difficulty": "introductory",
            "url": "",
            "starter_code": "def sum_sq(a, b):\n\t",
        },
        {  # LeetCode style: a method of `class Solution`
            "id": 8,
            "question": "Return the list reversed.",
            "solutions": json.dumps(
                [
                    (
                        "class Solution:\n    def rev(self, xs: List[int]) -> List[int]:\n"
                        "        return xs[::-1]\n"
                    )
                ]
            ),
            "input_output": json.dumps(
                {
                    "fn_name": "rev",
                    "inputs": [[[1, 2, 3]], [[]]],
                    "outputs": [[3, 2, 1], []],
                }
            ),
            "difficulty": "interview",
            "url": "",
            "starter_code": "class Solution:\n    def rev(self, xs: List[int]) -> List[int]:\n        ",
        },
    ]
    (tmp_path / "test.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    env = CoderTesterEnv(
        task="apps", split="test", task_path=str(tmp_path), sandbox=sandbox
    )
    for index, call in ((0, "sum_sq"), (1, "Solution().rev")):
        env.reset(seed=0, options={"problem_index": index})
        assert env.problem.style == "function" and env.problem.call == call
        prompt = env.observe("coder")["prompt"]
        assert "```python\n" + rows[index]["starter_code"].rstrip() + "\n```" in prompt
        # The statement is not wrapped in a second block.
        assert prompt.count("```") == 2
        assert f"`{call}" in env.observe("coder")["instruction"]
        assert f"assert {call}(...) == ..." in env.observe("tester")["instruction"]
        play(env, lambda e, a: e.reference_action(a), options={"problem_index": index})
        assert [r.reward_components["team"] for r in env.records] == [1.0, 1.0]
        assert env.episode_metrics()["success"] == 1.0
        assert env.agent_rewards() == pytest.approx({"coder": 2.0, "tester": 2.0})
    # A tester's plain asserts on the method work as for any function-style problem.
    play(
        env,
        scripted(
            {
                "coder": [code(json.loads(rows[1]["solutions"])[0])],
                "tester": [written_tests("assert Solution().rev([1, 2]) == [2, 1]")],
            }
        ),
        options={"problem_index": 1},
    )
    assert env.episode_metrics()["agreed"] == 1.0
    assert components(env, "tester") == {"team": 1.0, "local": pytest.approx(1.0)}


def test_livecodebench_functional_problems_for_the_coder_alone(sandbox, tmp_path):
    cases = [
        {"input": "[1, 2, 3]\n2", "output": "[2, 4, 6]", "testtype": "functional"},
        {"input": "[]\n5", "output": "[]", "testtype": "functional"},
    ]
    row = {
        "question_title": "Scale",
        "question_content": "Multiply every element of nums by k.",
        "platform": "leetcode",
        "question_id": "3001",
        "contest_id": "weekly-contest-1",
        "contest_date": "2024-08-03T00:00:00",
        "starter_code": "class Solution:\n    def scale(self, nums: List[int], k: int) -> List[int]:\n        ",
        "difficulty": "easy",
        "public_test_cases": json.dumps(cases[:1]),
        "private_test_cases": json.dumps(cases[1:]),
        "metadata": json.dumps({"func_name": "scale"}),
    }
    (tmp_path / "test6.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    env = CoderTesterEnv(
        task="livecodebench",
        split="test",
        task_path=str(tmp_path),
        task_kwargs={"split_policy": "benchmark"},
        agents="single",
        sandbox=sandbox,
    )
    right = "class Solution:\n    def scale(self, nums, k):\n        return [n * k for n in nums]\n"
    play(env, scripted({"coder": [code(right)]}))
    assert env.episode_metrics()["success"] == 1.0
    play(env, scripted({"coder": [code(right.replace("n * k", "n + k"))]}))
    # Only the empty list comes out right.
    assert env.records[0].reward_components["team"] == 0.5
