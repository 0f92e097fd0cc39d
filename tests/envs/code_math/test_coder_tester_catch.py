"""The default tester reward of ``llm/CoderTester-v0``: paid for tests that catch wrong code.

Wrong programs are mutants of the golden solution (``llm_envs.envs.coder_tester.mutants``), never
the coder's attempts; every number here comes from real sandbox runs.
"""

from __future__ import annotations

import ast
import json

import pytest

from llm_envs.envs.coder_tester import mutants, rules
from llm_envs.envs.coder_tester.env import CoderTesterEnv
from llm_envs.tasks import Problem
from llm_envs.tasks.humaneval import load_humaneval_problems
from llm_envs.verifiers import code as code_verifier
from tests.envs.helpers import ListSource

from .test_coder_tester import ADD, GOLDEN, SUM_IO, code, make_env, written_tests

# HumanEval problems of different shapes: floats and a threshold (0), Optional[str] (12), list
# filtering (29), a float result checked with abs() (2), a string (27), a dict (111).
HUMANEVAL_SAMPLE = (0, 2, 12, 27, 29, 111)


def play_turn(env: CoderTesterEnv, coder: str, tester: str, index: int | None = None):
    """One turn: ``coder`` then ``tester``; the tester's record."""
    options = None if index is None else {"problem_index": index}
    env.reset(seed=0, options=options)
    env.step(coder)
    env.step(tester)
    return env.records[1]


def humaneval_env(sandbox, **overrides) -> CoderTesterEnv:
    return CoderTesterEnv(
        split="test",
        task_kwargs={"split_policy": "benchmark"},
        sandbox=sandbox,
        max_turns=1,
        **overrides,
    )


def first_equality(problem: Problem) -> tuple[str, str]:
    """``(call, expected)`` source of the first ``assert candidate(...) == value`` of the golden
    tests, with ``candidate`` spelled as the entry point."""
    for snippet in problem.tests:
        for node in ast.walk(ast.parse(snippet)):
            if (
                isinstance(node, ast.Assert)
                and isinstance(node.test, ast.Compare)
                and isinstance(node.test.ops[0], ast.Eq)
                and isinstance(node.test.left, ast.Call)
            ):
                call = ast.unparse(node.test.left).replace("candidate", problem.entry_point, 1)
                return call, ast.unparse(node.test.comparators[0])
    raise AssertionError(f"{problem.id} has no equality test")


def vacuous_tests(problem: Problem) -> dict[str, str]:
    """Tests that check nothing about the answer, written against the problem's own inputs."""
    call, expected = first_equality(problem)
    entry = problem.entry_point
    return {
        "assert True": "assert True",
        "callable": f"assert callable({entry})",
        "r == r": f"r = {call}\nassert r == r",
        "type only": f"assert isinstance({call}, type({expected}))",
        "runs": f"{call}\nassert True",
        "not None": f"assert {call} is not None or {call} is None",
    }


def plain_wrong_test(problem: Problem) -> str:
    """A test the golden solution fails."""
    call, expected = first_equality(problem)
    return f"assert {call} != {expected}"


# ---------------------------------------------------------------------------------------------
# the formula


def test_the_catch_reward_formula():
    assert rules.catch_rate(3, 4) == 0.75
    assert rules.catch_rate(0, 0) == 0.0  # nothing to catch: not paid
    assert rules.catch_rate(9, 4) == 1.0
    assert rules.tester_catch_reward(True, 1.0, 4, 4) == pytest.approx(1.0)
    assert rules.tester_catch_reward(True, 1.0, 0, 4) == pytest.approx(0.2)
    assert rules.tester_catch_reward(True, 0.5, 3, 4) == pytest.approx(0.2 + 0.8 * 0.5 * 0.75)
    assert rules.tester_catch_reward(True, 0.0, 4, 4) == pytest.approx(0.2)
    assert rules.tester_catch_reward(False, 0.0, 0, 0) == 0.0


# ---------------------------------------------------------------------------------------------
# vacuous, good and wrong tests


@pytest.mark.parametrize("kind", list(vacuous_tests(ADD)))
def test_vacuous_tests_earn_what_a_plain_wrong_test_earns_on_a_toy_problem(sandbox, kind):
    env = make_env(sandbox=sandbox, max_turns=1)
    wrong = play_turn(env, GOLDEN, written_tests(plain_wrong_test(ADD)))
    assert wrong.reward_components["local"] == pytest.approx(0.2)  # valid only
    vacuous = play_turn(env, GOLDEN, written_tests(vacuous_tests(ADD)[kind]))
    assert vacuous.info["golden_solution_pass_rate"] == 1.0  # the golden passes it...
    assert vacuous.info["wrong_programs"] >= 3 and vacuous.info["wrong_programs_caught"] == 0
    assert vacuous.reward_components["local"] == pytest.approx(wrong.reward_components["local"])
    # ... while the paper's reward pays it in full: the hole this reward closes
    paper = play_turn(
        make_env(sandbox=sandbox, max_turns=1, tester_reward="paper"),
        GOLDEN,
        written_tests(vacuous_tests(ADD)[kind]),
    )
    assert paper.reward_components["local"] == pytest.approx(1.0)


@pytest.mark.parametrize("index", HUMANEVAL_SAMPLE)
def test_vacuous_tests_earn_what_a_plain_wrong_test_earns_on_humaneval(sandbox, index):
    env = humaneval_env(sandbox)
    env.reset(seed=0, options={"problem_index": index})
    problem = env.problem
    coder = env.reference_action("coder")
    wrong = play_turn(env, coder, written_tests(plain_wrong_test(problem)), index)
    assert wrong.info["golden_solution_pass_rate"] == 0.0
    for kind, test in vacuous_tests(problem).items():
        record = play_turn(env, coder, written_tests(test), index)
        assert record.info["golden_solution_pass_rate"] == 1.0, (problem.id, kind)
        assert record.reward_components["local"] == pytest.approx(
            wrong.reward_components["local"]
        ), (problem.id, kind, record.info)
    everything_vacuous = written_tests(*vacuous_tests(problem).values())
    record = play_turn(env, coder, everything_vacuous, index)
    assert record.reward_components["local"] == pytest.approx(wrong.reward_components["local"])


def test_tests_whose_verdict_comes_from_random_earn_what_a_test_that_catches_nothing_earns(sandbox):
    # Passing at random, such tests passed the golden in its run and failed wrong programs in
    # theirs: paid ~0.8 of the golden tests' 1.0 while never calling the program.
    env = humaneval_env(sandbox)
    env.reset(seed=0, options={"problem_index": 0})
    coder = env.reference_action("coder")
    drawn = written_tests(*[f"import random\nassert random.random() < 0.85  # {i}" for i in range(16)])
    for _ in range(3):
        record = play_turn(env, coder, drawn, 0)
        assert record.info["wrong_programs"] >= 3 and record.info["wrong_programs_caught"] == 0
        assert record.reward_components["local"] == pytest.approx(0.2)


def test_no_catch_is_paid_where_the_golden_run_again_is_caught(sandbox):
    # The control: the golden's guarded run made again as the wrong programs' runs are made. A
    # golden-passing test that fails it decides nothing about a program (its verdict came from
    # the clock, os.urandom, hash seeds...), so no catch is paid, however many it made.
    env = humaneval_env(sandbox)
    env.reset(seed=0, options={"problem_index": 2})
    problem = env.problem
    tests = tuple(problem.tests)
    golden = env._as_wrong_program(problem.solution)
    wrong = [(env._as_wrong_program(m), tests, 0) for m in env._mutants()]
    golden_report, *reports = env._judge_all([(golden, tests)] + [(p, t) for p, t, _ in wrong])
    assert env._count_caught(golden_report, wrong, reports) == (len(wrong), len(wrong))
    assert env._count_caught(golden_report, wrong, reports, golden_report) == (len(wrong), len(wrong))
    caught_control = reports[0]  # (a report that fails a golden-passing test by an assertion)
    assert env._count_caught(golden_report, wrong, reports, caught_control) == (None, len(wrong))
    # In an episode: a test that reads the clock pays no catch where the control catches it.
    clock = written_tests("import time\nassert (time.time_ns() // 1000) % 100 < 67")
    for _ in range(4):
        record = play_turn(env, env.reference_action("coder"), clock, 2)
        if not record.info["tests_reproducible"]:
            assert record.info["wrong_programs_caught"] == 0
            assert record.reward_components["local"] == pytest.approx(0.2)


@pytest.mark.parametrize("index", range(0, 164, 8))
def test_humanevals_own_tests_earn_the_full_tester_reward(sandbox, index):
    env = humaneval_env(sandbox)
    env.reset(seed=0, options={"problem_index": index})
    record = play_turn(
        env, env.reference_action("coder"), env.reference_action("tester"), index
    )
    assert record.info["wrong_programs"] >= 2, env.problem.id
    assert record.info["wrong_programs_caught"] == record.info["wrong_programs"], env.problem.id
    assert record.reward_components["local"] == pytest.approx(1.0), env.problem.id


def test_one_good_test_beside_a_wrong_one_earns_half_the_test_part(sandbox):
    env = make_env(sandbox=sandbox, max_turns=1)
    record = play_turn(
        env, GOLDEN, written_tests("assert add(2, 3) == 5", "assert add(2, 3) == 6")
    )
    assert record.info["wrong_programs_caught"] == record.info["wrong_programs"]
    assert record.reward_components["local"] == pytest.approx(0.2 + 0.8 * 0.5)


def test_a_test_the_golden_fails_catches_nothing_even_if_it_rejects_every_mutant(sandbox):
    # add(2, 3) == 6 rejects a - b, 0 and 10, but it rejects the golden solution too
    env = make_env(sandbox=sandbox, max_turns=1)
    record = play_turn(env, GOLDEN, written_tests("assert add(2, 3) == 6"))
    assert record.info["wrong_programs_caught"] == 0
    assert record.reward_components["local"] == pytest.approx(0.2)


def test_stdin_stdout_tests_are_paid_for_catching_wrong_answers(sandbox):
    env = make_env(SUM_IO, sandbox=sandbox, max_turns=1)
    golden = code(SUM_IO.solution)
    good = play_turn(env, golden, code_verifier.io_tests_block([("2 7\n", "9\n")]))
    assert good.info["wrong_programs"] >= 2
    assert good.reward_components["local"] == pytest.approx(1.0)
    # 0 0 -> 0: a - b and a program printing nothing... print "0" and "" — the mutant a - b
    # prints 0 too, so this input catches fewer wrong programs
    weak = play_turn(env, golden, code_verifier.io_tests_block([("0 0\n", "0\n")]))
    assert weak.info["wrong_programs_caught"] < weak.info["wrong_programs"]
    assert 0.2 < weak.reward_components["local"] < 1.0


@pytest.mark.parametrize("catch_runs", ["by_value", "per_program"])
def test_a_golden_case_the_golden_fails_chooses_no_mutant(sandbox, tmp_path, monkeypatch, catch_runs):
    # A dataset's golden may fail some of its own cases (several valid answers, another float
    # format). Judged there, a no-op mutant (it changes a value never printed) failed that case
    # as the golden does and was kept as a "wrong program" no test can catch: the reference
    # tester fell from 2.0 to 1.33 on such a problem. Candidates are judged on the cases the
    # golden passes.
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    golden = "a, b = map(int, input().split())\nunused = 0\nunused = unused + 1\nprint(a + b)\n"
    noisy = Problem(id="toy/sum-noisy", prompt=SUM_IO.prompt, split="train", solution=golden, style="io",
                    tests=(("1 2\n", "3\n"), ("5 5\n", "10\n"), ("2 2\n", "4.0\n")))
    env = make_env(noisy, sandbox=sandbox, max_turns=1, catch_runs=catch_runs)
    env.reset(seed=0)
    chosen = env._mutants()
    assert chosen and all("unused" not in "".join(line for line in m.splitlines() if "print" in line) for m in chosen)
    record = play_turn(env, code(golden), code_verifier.io_tests_block([("1 2\n", "3\n"), ("7 -2\n", "5\n"), ("3 3\n", "6\n")]))
    assert record.info["wrong_programs_caught"] == record.info["wrong_programs"]  # every one is catchable


# ---------------------------------------------------------------------------------------------
# the coder's attempts


def test_the_coders_failing_attempts_are_not_wrong_programs(sandbox):
    # Wrong programs are the harness's mutants only (issue 30): an attempt an agent wrote could
    # be wrong on purpose where the tester's tests look (tests/graders/test_tester_catch.py).
    off_by_one = code("def add(a, b):\n    return a + b + (1 if a > 1 else 0)\n")  # fails add(2, 2)
    env = make_env(sandbox=sandbox, max_turns=2, max_mutants=0)
    env.reset(seed=0)
    env.step(off_by_one)
    env.step(written_tests("assert add(0, 0) == 1"))
    env.step(off_by_one)
    env.step(written_tests("assert add(7, 1) == 8"))
    first, second = env.records[1], env.records[3]
    for record in (first, second):
        assert (record.info["wrong_programs"], record.info["wrong_programs_caught"]) == (0, 0)
    # No catch on either record: the tester's local level stays 0.2 (0.2·valid, and 0.8·pass
    # rate·catch rate = 0 with no wrong program). Under turn_rewards="change" the first record is paid that level
    # and the second its change, 0; the levels are their running sums.
    assert first.reward_components["local"] == pytest.approx(0.2)
    assert first.reward_components["local"] + second.reward_components["local"] == pytest.approx(0.2)
    assert second.info["reward_level"] - first.info["reward_level"] == pytest.approx(
        second.reward_components.get("team", 0.0)
    )


def test_outcome_mode_runs_no_wrong_programs(sandbox):
    env = make_env(sandbox=sandbox, max_turns=1, reward_mode="outcome")
    record = play_turn(env, GOLDEN, written_tests("assert True"))
    assert "wrong_programs" not in record.info


# ---------------------------------------------------------------------------------------------
# mutants


def test_mutants_are_deterministic_distinct_and_compile():
    problem = load_humaneval_problems()[0]
    first = mutants.mutant_candidates(problem.solution, functions_only=True, key=problem.id)
    again = mutants.mutant_candidates(problem.solution, functions_only=True, key=problem.id)
    assert first == again and len(first) == len(set(first)) >= 8
    golden = ast.unparse(ast.parse(problem.solution))
    for mutant in first:
        assert mutant != golden
        compile(mutant, "<mutant>", "exec")
        # function style: the top level is untouched, so the entry point is always defined
        assert "def has_close_elements(" in mutant
    assert mutants.mutant_candidates("def f(:", functions_only=True) == []


def test_mutant_selection_keeps_only_wrong_programs_and_is_cached_per_problem(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))  # a fresh disk cache
    mutants.clear_cache()
    calls = []

    def judge(programs):
        calls.append(len(programs))
        env = make_env(sandbox=sandbox)
        env.reset(seed=0)
        return env._judge_all([(env._as_wrong_program(p), ADD.tests) for p in programs])

    def candidates():
        return [
            "def add(a, b):\n    return b + a\n",  # equivalent: not a wrong program
            "def add(a, b):\n    return a - b\n",
            "def add(a, b):\n    return None\n",  # guarded: behaves like the golden
            "def add(a, b):\n    while True:\n        pass\n",  # hangs: dropped
            "def add(a, b):\n    return a * b\n",
        ]

    kept = mutants.select_mutants("toy-key", candidates, judge, io_style=False, max_mutants=2)
    assert kept == ("def add(a, b):\n    return a - b\n", "def add(a, b):\n    return a * b\n")
    assert calls == [4, 1]  # a first wave of 2 * max_mutants, then max_mutants
    assert mutants.select_mutants("toy-key", candidates, judge, io_style=False, max_mutants=2) == kept
    assert calls == [4, 1]  # cached: nothing judged again


# A golden solution one of whose mutants is wrong only after a second's sleep (the constant
# 0 -> 1: it sleeps 1 s, then answers n + 2).
SLEEPER = Problem(
    id="toy/sleeper",
    prompt="Return n + 1.",
    split="train",
    solution="import time\n\n\ndef inc(n):\n    d = 0\n    time.sleep(d)\n    return n + 1 + d\n",
    tests=("assert inc(1) == 2", "assert inc(5) == 6"),
    style="function",
    entry_point="inc",
)


@pytest.mark.parametrize("catch_runs", ["by_value", "per_program", "one_run"])
def test_a_candidate_slower_than_the_choices_time_limit_is_not_chosen(sandbox, monkeypatch, catch_runs):
    """While a problem's mutants are chosen, a golden test's limit is ``mutant_test_time_s``
    (at most ``test_time_s``): a candidate that runs a golden test longer is not chosen, as one
    that times out never is, in every ``catch_runs`` mode, and the limit is part of the choice's
    address in the cache."""
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    sleeps = "    d = 1\n"

    def chosen(limit):
        mutants.clear_cache()
        env = make_env(
            SLEEPER, sandbox=sandbox, max_turns=1, catch_runs=catch_runs, allow_reward_holes=True,
            mutant_test_time_s=limit,
        )
        env.reset(seed=0)
        return env._mutants()

    patient, hasty = chosen(5.0), chosen(0.3)
    assert any(sleeps in m for m in patient), patient
    assert not any(sleeps in m for m in hasty) and hasty
    assert [m for m in patient if sleeps not in m] == list(hasty)[: len(patient) - 1]
    mutants.clear_cache()
    # The limit is capped at test_time_s, and is part of the cache key.
    capped = make_env(SLEEPER, sandbox=sandbox, test_time_s=0.3, mutant_test_time_s=5.0)
    assert capped._choice_time_s() == 0.3
    keys = {mutants.cache_key(SLEEPER, SLEEPER.tests, 8, 32, t) for t in (0.3, 5.0)}
    assert len(keys) == 2
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="mutant_test_time_s"):
            make_env(SLEEPER, sandbox=sandbox, mutant_test_time_s=bad)


# SLEEPER on stdin/stdout: a mutant (the constant 0 -> 1) sleeps a second, then answers n + 2.
SLEEPER_IO = Problem(
    id="toy/sleeper-io",
    prompt="Read n and print n + 1.",
    split="train",
    solution="import time\nd = 0\ntime.sleep(d)\nn = int(input())\nprint(n + 1 + d)\n",
    tests=tuple((f"{n}\n", f"{n + 1}\n") for n in range(6)),
    style="io",
)


def test_a_stdin_candidate_slower_than_the_choices_time_limit_is_not_chosen_and_stops(sandbox, monkeypatch):
    """Stdin/stdout candidates are chosen under ``mutant_test_time_s`` too: the sleeping mutant
    is chosen at 5 s, not at 0.3 s, and its run of the golden cases stops after the first wave
    in which a case timed out (``run_io_cases(..., stop_at_timeout=True)``)."""
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    sleeps = "d = 1\n"

    def env_at(limit):
        mutants.clear_cache()
        env = make_env(SLEEPER_IO, sandbox=sandbox, max_turns=1, mutant_test_time_s=limit)
        env.reset(seed=0)
        return env

    patient, hasty = env_at(5.0), env_at(0.3)
    chosen_patient, chosen_hasty = patient._mutants(), hasty._mutants()
    assert any(sleeps in m for m in chosen_patient), chosen_patient
    assert not any(sleeps in m for m in chosen_hasty)
    sleeper = next(m for m in chosen_patient if sleeps in m)
    (report,) = hasty._judge_candidates([sleeper])
    width = max(1, sandbox.max_concurrency)
    assert len(report.runs) == min(width, len(SLEEPER_IO.tests)) < len(SLEEPER_IO.tests)
    assert all(r.error.startswith("not run: case") for r in report.results[len(report.runs) :])
    assert not mutants.wrong_on_golden(report, io_style=True)
    mutants.clear_cache()


def test_the_mutant_choice_benchmark_counts_what_timed_out(sandbox, monkeypatch):
    """benchmarks/mutant_choice.py: a choice with nothing cached, its candidates that timed out
    counted (the sleeping one, at a limit under its sleep), the mutants those the env keeps."""
    from tests.scripts import load_script

    bench = load_script("benchmarks/mutant_choice.py")
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    env = make_env(SLEEPER, sandbox=sandbox, max_turns=1, mutant_test_time_s=0.3)
    got = bench.choose(env, 0)
    assert got["timed_out"] >= 1 and got["wall_s"] > 0
    mutants.clear_cache()
    env.reset(seed=0)
    assert got["mutants"] == list(env._mutants()) and not any("    d = 1\n" in m for m in got["mutants"])
    mutants.clear_cache()


def test_the_value_checks_cost_benchmark_grades_what_the_env_grades(sandbox, monkeypatch, tmp_path):
    """benchmarks/value_checks_cost.py: the two by-value runs it times are those a tester step
    and the choice of mutants make, and the verdicts it compares are the env's: the wrong
    programs the reference tester's tests catch, and the chosen mutants among the candidates."""
    from sandboxes import harness
    from tests.scripts import load_script

    bench = load_script("benchmarks/value_checks_cost.py")
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    env = humaneval_env(sandbox)
    found = bench.gradings(env, 0)
    assert set(found) == {"tester's tests", "choice"}
    caught = bench.grade(harness, sandbox, found["tester's tests"])
    record = play_turn(env, env.reference_action("coder"), env.reference_action("tester"), 0)
    assert len(caught) == record.info["wrong_programs"] and None not in caught
    assert sum(caught) == record.info["wrong_programs_caught"]
    wrong = bench.grade(harness, sandbox, found["choice"])
    chosen = set(env._mutants())
    judged = dict(zip(found["choice"].programs, wrong))
    assert chosen & set(judged) and all(judged[m] is True for m in chosen & set(judged))
    assert all(verdict is True or program not in chosen for program, verdict in judged.items())
    mutants.clear_cache()


def test_a_judge_that_stops_early_is_asked_again_for_what_it_left(monkeypatch):
    """``judge_stops_early``: the judge gets how many wrong programs are still needed and may
    leave the candidates after them unjudged; those come first in the next wave, nothing after
    an unjudged one counts, and a judge that judges none of a wave is an error (not a choice)."""
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    pool = [f"p{i}" for i in range(10)]
    wrong = {"p1", "p2", "p4", "p5", "p7", "p8"}
    calls = []

    def judge(programs, needed):
        calls.append((list(programs), needed))
        verdicts, found = [], 0
        for program in programs:
            if found >= needed:
                verdicts.append(mutants.NOT_JUDGED)
            else:
                verdicts.append(program in wrong)
                found += program in wrong
        if programs[0] == "p5":  # an unjudged one before judged ones: those do not count
            verdicts = [True, mutants.NOT_JUDGED, True, True]
        return verdicts

    mutants.clear_cache()
    kept = mutants.select_mutants("early", lambda: iter(pool), judge, io_style=False, max_mutants=3, judge_stops_early=True)
    assert kept == ("p1", "p2", "p4")
    assert calls == [(pool[:6], 3)]
    mutants.clear_cache()
    calls.clear()
    kept = mutants.select_mutants("early-5", lambda: iter(pool), judge, io_style=False, max_mutants=5, judge_stops_early=True)
    # wave 1 (10 wide) stops after p1 p2 p4 p5 p7: all five found in the first wave
    assert kept == ("p1", "p2", "p4", "p5", "p7") and calls == [(pool, 5)]
    mutants.clear_cache()
    calls.clear()

    def four_at_a_time(programs, needed):
        calls.append((list(programs), needed))
        if programs[0] == "p4":  # an unjudged one before judged ones: those do not count
            return [True, mutants.NOT_JUDGED, True, True]
        return [p in wrong if at < 4 else mutants.NOT_JUDGED for at, p in enumerate(programs)]

    kept = mutants.select_mutants("early-4", lambda: iter(pool), four_at_a_time, io_style=False, max_mutants=4, judge_stops_early=True)
    assert kept == ("p1", "p2", "p4", "p5")
    assert calls == [(pool[:8], 4), (pool[4:8], 2), (pool[5:9], 1)]
    mutants.clear_cache()
    with pytest.raises(RuntimeError, match="judged none"):
        mutants.select_mutants("early-none", lambda: iter(pool), lambda programs, needed: [mutants.NOT_JUDGED] * len(programs),
                               io_style=False, max_mutants=2, judge_stops_early=True)


def test_the_guard_leaves_no_name_of_its_own_in_the_module():
    guarded = mutants.guarded_program(
        "def add(a, b):\n    return a - b\n",
        golden=ADD.solution,
        setup="",
        entry_point="add",
        call="add",
    )
    namespace: dict = {}
    exec(guarded, namespace)  # our own generated code, run on the host only in this test
    assert sorted(k for k in namespace if k != "__builtins__") == ["add"]
    assert namespace["add"](5, 3) == 2 and namespace["add"].__name__ == "add"
    assert not mutants.can_guard("Solution", "helper(Solution)")
    with pytest.raises(ValueError):
        mutants.guarded_program("x = 1", golden="", setup="", entry_point="f", call="g.h")


def test_the_guard_runs_the_golden_code_it_is_given_only_for_its_own_sources():
    """Graded by value, the run hands the guard the setup and golden it compiled
    (``__golden_code__``: source and code of each); the guard runs that code only where both
    sources are its own, else it compiles its own."""
    golden = "def add(a, b):\n    return a + b\n"
    epilogue = mutants.guard_epilogue(golden=golden, setup="", entry_point="add", call="add")
    raising = "def add(a, b):\n    raise ValueError\n"  # the guard returns the golden's value

    def guarded_add(golden_code):
        namespace: dict = {}
        exec(raising, namespace)  # our own generated code, run on the host only in this test
        if golden_code is not None:
            namespace["__golden_code__"] = golden_code
        exec(epilogue, namespace)
        assert "__golden_code__" not in namespace
        return namespace["add"](2, 3)

    times_ten = compile("def add(a, b):\n    return 10 * (a + b)\n", "golden.py", "exec")
    assert guarded_add(None) == 5
    assert guarded_add(("", compile("", "s", "exec"), golden, times_ten)) == 50  # its sources: the code given
    assert guarded_add(("", compile("", "s", "exec"), "def add(a, b): return 0", times_ten)) == 5
    assert guarded_add(("x = 1", compile("", "s", "exec"), golden, times_ten)) == 5


def test_a_class_based_problem_gets_guarded_wrong_programs(sandbox):
    problem = Problem(
        id="toy/two-sum",
        prompt="class Solution:\n    def twoSum(self, a, b): ...",
        split="train",
        solution="class Solution:\n    def twoSum(self, a, b):\n        return a + b\n",
        tests=("assert Solution().twoSum(1, 2) == 3", "assert Solution().twoSum(5, 5) == 10"),
        style="function",
        entry_point="Solution",
        metadata={"call": "Solution().twoSum"},
    )
    env = CoderTesterEnv(task_source=ListSource([problem]), sandbox=sandbox, max_turns=1)
    golden = code(problem.solution)
    good = play_turn(env, golden, written_tests("assert Solution().twoSum(4, 3) == 7"))
    assert good.info["wrong_programs"] >= 2
    assert good.reward_components["local"] == pytest.approx(1.0)
    vacuous = play_turn(env, golden, written_tests("assert isinstance(Solution().twoSum(4, 3), int)"))
    assert vacuous.reward_components["local"] == pytest.approx(0.2)


def test_the_disk_cache_reads_the_candidates_only_as_far_as_its_programs_need(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    pool = [f"def add(a, b):\n    return a + b + {k}\n" for k in range(1, 7)]
    read = []

    def candidates():
        for program in pool:
            read.append(program)
            yield program

    class Judged(Exception):
        pass

    def judge(programs):
        raise Judged  # stands for the sandbox runs of a selection

    mutants._write_disk("stored-key", (pool[1], pool[0]))
    assert mutants.select_mutants("stored-key", candidates, judge, io_style=False, max_mutants=2) == (pool[1], pool[0])
    assert read == pool[:2]
    # a stored program that is not a candidate: every candidate read, then chosen again
    mutants.clear_cache()
    read.clear()
    mutants._write_disk("stored-key", (pool[0], "def add(a, b):\n    return 0\n"))
    with pytest.raises(Judged):
        mutants.select_mutants("stored-key", candidates, judge, io_style=False, max_mutants=2)
    # checked, then the first wave (2 * max_mutants) made for the selection: no more than it needs
    assert len(read) == len(pool) + 2 * 2
    mutants.clear_cache()


def test_each_candidate_is_the_mutant_made_at_its_position_alone():
    for problem in load_humaneval_problems()[:40:4]:
        source = mutants.MutantSource(problem.solution, functions_only=True, key=str(problem.id), limit=12)
        made = list(source)
        assert made == mutants.mutant_candidates(problem.solution, functions_only=True, key=str(problem.id), limit=12)
        assert source.at([source.positions[text] for text in made]) == made
    # past the last site, or the solution itself: no mutant
    assert source.at([-1, 10**6]) == [None, None]


# A solution with a site of every operator (compare, arith, constant, call, negate in its three
# forms, boolop, return, drop).
_EVERY_OPERATOR = """
def f(xs, k):
    total = 0
    for x in xs:
        if x > k and not x % 2 == 0:
            total += x * 2
        while total > 100 or total < -100:
            total //= 2
    picked = [x for x in xs if x != k]
    label = "big" if total >= 10 else "small"
    return max(picked + [total]), label, min(xs)
"""


@pytest.mark.parametrize("solution", [_EVERY_OPERATOR, *(p.solution for p in load_humaneval_problems()[:60:6])])
def test_mutants_made_one_after_another_on_one_tree_are_those_made_from_a_fresh_parse(solution):
    # The mutants are made in place on one tree and undone: a mutation left behind would show in
    # every mutant made after it.
    source = mutants.MutantSource(solution, functions_only=True, key="k")
    made = list(source)
    positions = [source.positions[text] for text in made]
    alone = [mutants.MutantSource(solution, functions_only=True, key="k").at([p])[0] for p in positions]
    backwards = mutants.MutantSource(solution, functions_only=True, key="k").at(positions[::-1])[::-1]
    assert made == alone == backwards
    if solution is _EVERY_OPERATOR:
        operators = {site.operator for site in mutants._shuffled_sites(solution, True, "k")[1]}
        assert operators == {"compare", "arith", "constant", "call", "negate", "boolop", "return", "drop"}
        assert len(made) > 30


def test_a_mutant_checked_to_compile_is_not_compiled_again_for_its_run():
    from sandboxes import harness

    problem = load_humaneval_problems()[3]
    harness._compiled_once.cache_clear()
    made = mutants.mutant_candidates(problem.solution, functions_only=True, key=str(problem.id), limit=8)
    misses = harness._compiled_once.cache_info().misses
    harness._value_checks_code(problem.setup or "", "", made)
    assert harness._compiled_once.cache_info().misses == misses + 1  # the setup only


def test_the_disk_cache_checks_a_mutant_source_by_the_stored_positions(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    problem = load_humaneval_problems()[5]
    made = []

    def candidates():
        source = mutants.MutantSource(problem.solution, functions_only=True, key=str(problem.id), limit=12)
        made.append(source)
        return source

    class Judged(Exception):
        pass

    def judge_every_other(programs):
        return [i % 2 == 0 for i in range(len(programs))]

    def judge(programs):
        raise Judged  # stands for the sandbox runs of a selection

    chosen = mutants.select_mutants("positions", candidates, judge_every_other, io_style=False, max_mutants=3)
    assert len(chosen) == 3
    (path,) = tmp_path.glob("positions.*.json")
    stored = json.loads(path.read_text())
    assert stored["mutants"] == list(chosen) and len(stored["positions"]) == 3
    # a new process: read back by position, no candidate made in order, nothing judged
    mutants.clear_cache()
    assert mutants.select_mutants("positions", candidates, judge, io_style=False, max_mutants=3) == chosen
    assert made[-1].positions == {}
    # a file whose positions or programs were changed is not used: chosen again
    for tampered in (
        {**stored, "positions": stored["positions"][::-1]},
        {**stored, "mutants": [problem.solution, *stored["mutants"][1:]]},
        {**stored, "positions": [stored["positions"][0] + 10**6, *stored["positions"][1:]]},
        # one mutant three times, each at its own (true) position: one catch would count thrice
        {**stored, "mutants": [stored["mutants"][0]] * 3, "positions": [stored["positions"][0]] * 3},
    ):
        path.write_text(json.dumps(tampered))
        mutants.clear_cache()
        with pytest.raises(Judged):
            mutants.select_mutants("positions", candidates, judge, io_style=False, max_mutants=3)
    mutants.clear_cache()
