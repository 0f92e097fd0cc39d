"""The tester of ``llm/CoderTester-v0`` is paid only for tests that catch wrong programs by their
own assertion about a value (issue 30, item 4), on every backend.

* A test that only makes the harness fail on a wrong program (a reply over the 16 MiB frame,
  inside ``except BaseException: assert False``) catches nothing: before, it was paid as a catch.
* Wrong programs are the harness's mutants only: a coder's failing attempt, written to be caught
  by the tester's test (collusion), does not raise the tester's reward.
"""

from __future__ import annotations

import json

import pytest

from llm_envs.envs.coder_tester import mutants, rules
from llm_envs.envs.coder_tester.env import CoderTesterEnv
from llm_envs.tasks import Problem
from tests.envs.helpers import ListSource

# One statement returning its argument: the mutants are the returned value emptied, doubled and
# without its first element (mutants.py), each failing a golden test.
ECHO = Problem(
    id="toy/echo",
    prompt='def echo(s):\n    """Return s."""\n',
    split="train",
    solution="def echo(s):\n    return s\n",
    tests=("assert echo('a') == 'a'", "assert echo('ab') == 'ab'"),
    style="function",
    entry_point="echo",
)
ADD = Problem(
    id="toy/add-catch",
    prompt='def add(a, b):\n    """Return a + b."""\n',
    split="train",
    solution="def add(a, b):\n    return a + b\n",
    tests=("assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"),
    style="function",
    entry_point="add",
)
# A plain test that is right and catches nothing: what a tester earns without catching.
NOTHING_CAUGHT = rules.tester_catch_reward(True, 1.0, 0, 3)


def code(body: str) -> str:
    return f"**Code:**\n```python\n{body}```"


def written_tests(*snippets: str) -> str:
    return "**Tests:**\n```python\n" + "\n".join(snippets) + "\n```"


def play_tester(sandbox, problem: Problem, coder_code: str, tests: str, **overrides):
    env = CoderTesterEnv(task_source=ListSource([problem]), sandbox=sandbox, max_turns=1, **overrides)
    env.reset(seed=0)
    env.step(code(coder_code))
    env.step(tests)
    return env.records[1]


def test_a_frame_limit_turned_into_an_assertion_catches_nothing(backend):
    # The doubled mutant's reply (18 MB of JSON) is over the 16 MiB frame; the golden's is not.
    frame_trick = written_tests(
        "try:\n    echo('x' * 9_000_000)\nexcept BaseException:\n    assert False"
    )
    record = play_tester(backend, ECHO, ECHO.solution, frame_trick, test_time_s=20.0)
    assert record.info["golden_solution_pass_rate"] == 1.0
    assert record.info["wrong_programs"] == 3
    assert record.info["wrong_programs_caught"] == 0  # was 1 (reward 0.47 against 0.2)
    assert record.reward_components["local"] == pytest.approx(NOTHING_CAUGHT)
    # A test that checks the value catches every mutant.
    checks = play_tester(backend, ECHO, ECHO.solution, written_tests("assert echo('xy') == 'xy'"))
    assert (checks.info["wrong_programs"], checks.info["wrong_programs_caught"]) == (3, 3)
    assert checks.reward_components["local"] == pytest.approx(1.0)


def test_a_colluding_coders_attempt_does_not_raise_the_testers_reward(backend):
    # The coder's attempt fails a golden test and is wrong where the tester's test looks: before, it
    # counted as a
    # wrong program the test caught (0.2 -> 0.33 with no mutant caught).
    test = written_tests("assert add(7, 1) == 8")
    honest = play_tester(backend, ADD, ADD.solution, test)
    colluding = play_tester(
        backend, ADD, "def add(a, b):\n    return 0 if (a, b) in ((7, 1), (2, 2)) else a + b\n", test
    )
    assert colluding.info["wrong_programs"] == honest.info["wrong_programs"] > 0
    assert colluding.info["wrong_programs_caught"] == honest.info["wrong_programs_caught"]
    assert colluding.reward_components["local"] == pytest.approx(honest.reward_components["local"])
    # and with no mutants at all, a coder's attempt gives the tester nothing to catch
    alone = play_tester(
        backend, ADD, "def add(a, b):\n    return 0 if (a, b) in ((7, 1), (2, 2)) else a + b\n", test, max_mutants=0
    )
    assert (alone.info["wrong_programs"], alone.info["wrong_programs_caught"]) == (0, 0)
    assert alone.reward_components["local"] == pytest.approx(rules.tester_catch_reward(True, 1.0, 0, 0))


def test_chosen_mutants_are_kept_on_disk_for_other_processes_and_checked_when_read(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    runs = []

    def judge(programs):
        runs.append(len(programs))
        env = CoderTesterEnv(task_source=ListSource([ADD]), sandbox=backend)
        env.reset(seed=0)
        return env._judge_all([(env._as_wrong_program(p), ADD.tests) for p in programs])

    def candidates():
        return mutants.mutant_candidates(ADD.solution, functions_only=True, key=ADD.id)

    chosen = mutants.select_mutants("add-key", candidates, judge, io_style=False, max_mutants=3)
    assert len(chosen) == 3 and runs
    (stored,) = tmp_path.glob("add-key.*.json")
    # another process: nothing in memory, the disk answers without a sandbox run
    mutants.clear_cache()
    runs.clear()
    assert mutants.select_mutants("add-key", candidates, judge, io_style=False, max_mutants=3) == chosen
    assert runs == []
    # a stored program that is not one of the problem's mutants is never used
    stored.write_text(json.dumps({"key": "add-key", "mutants": ["def add(a, b):\n    return a + b\n"]}))
    mutants.clear_cache()
    assert mutants.select_mutants("add-key", candidates, judge, io_style=False, max_mutants=3) == chosen
    assert runs  # chosen again
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    assert mutants.disk_cache_dir() is None


# One mutant divides by 1 instead of 2 (the constant ``k = 2`` off by one): it returns 1 where the
# golden returns 2 on the golden tests (caught), and loops on any n > 1 (never in a golden test).
HALVINGS = Problem(
    id="toy/halvings",
    prompt='def halvings(n):\n    """Return 2 plus how many times n halves before it is at most 1."""\n',
    split="train",
    solution=(
        "def halvings(n):\n    k = 2\n    count = 0\n    while n > 1:\n        n = n // k\n"
        "        count += 1\n    return count + k\n"
    ),
    tests=("assert halvings(1) == 2", "assert halvings(0) == 2", "assert halvings(-5) == 2"),
    style="function",
    entry_point="halvings",
)


@pytest.mark.parametrize(
    ("name", "problem"),
    [("tests-clear-poison", ECHO), ("tests-forge-emit", ECHO), ("tests-thread-timeout", HALVINGS)],
)
def test_a_test_that_hides_a_harness_failure_in_its_own_process_catches_nothing(backend, name, problem):
    # Issue 30: each of these tests makes the harness fail on one wrong program only (a reply over
    # the frame limit; a call that never returns) and then hides it in the test process, where the
    # tester's code runs (clearing the driver's marks, writing its own record with the driver's
    # secret, abandoning the call in a thread). Before the solution's side kept its own record,
    # each was paid as a catch (ECHO: 1 of 3 wrong programs, reward 0.47; HALVINGS: the looping
    # mutant).
    from llm_envs.audit import by_name
    from llm_envs.audit.exploits import Target

    target = Target(
        role="tests", entry_point=problem.entry_point, example_call=problem.tests[0][7:].split(" == ")[0],
        example_expected=problem.tests[0].split(" == ")[1],
    )
    built = by_name(name).build(target)
    record = play_tester(backend, problem, problem.solution, written_tests(built.exploit), test_time_s=20.0)
    assert record.info["golden_solution_pass_rate"] == 1.0
    assert record.info["wrong_programs"] >= 3
    assert record.info["wrong_programs_caught"] == 0, record.info
    assert record.reward_components["local"] == pytest.approx(
        rules.tester_catch_reward(True, 1.0, 0, record.info["wrong_programs"])
    )
