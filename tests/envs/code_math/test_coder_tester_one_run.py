"""``catch_runs="one_run"``: the catch reward with the golden solution and every wrong program
graded in one sandbox run (``sandboxes.harness.run_function_tests_slots``).

It must pay exactly what one run per program pays, on reference and adversarial testers alike,
and give nothing to tests that try to pass notes between the programs of the run. Real
sandboxes, real HumanEval problems.
"""

from __future__ import annotations

import numpy as np
import pytest

from llm_envs.verifiers.code import function_tests_block
from sandboxes import harness

from .test_coder_tester import GOLDEN, code, make_env, written_tests
from .test_coder_tester_catch import first_equality, humaneval_env, plain_wrong_test, play_turn


def one_run_env(sandbox, **overrides):
    return humaneval_env(sandbox, catch_runs="one_run", allow_reward_holes=True, **overrides)


def outcome(record):
    info = record.info
    return (
        info["golden_solution_pass_rate"],
        info["wrong_programs_caught"],
        info["wrong_programs"],
        round(record.reward_components["local"], 9),
    )


def replies_of(env, index):
    """Reference and adversarial tester replies for HumanEval problem ``index``."""
    env.reset(seed=0, options={"problem_index": index})
    problem = env.problem
    call, expected = first_equality(problem)
    golden_tests = env.reference_action("tester")
    return {
        "reference": golden_tests,
        "vacuous": written_tests("assert True", f"r = {call}\nassert r == r"),
        # the golden fails the first test: no early stop there; the second catches
        "wrong then right": written_tests(plain_wrong_test(problem), f"assert {call} == {expected}"),
        "a check, a harness failure, a check": written_tests(
            f"assert {call} == {expected}", f"{problem.entry_point}(object())", f"assert {call} == {expected}"
        ),
        # one golden test: catches some of the wrong programs only
        "the last golden test": "**Tests:**\n" + function_tests_block([problem.tests[-1]]),
        "random": env.random_action("tester", np.random.default_rng(index)),
    }


@pytest.mark.parametrize("index", [0, 12, 29, 111])
def test_one_run_pays_exactly_what_one_run_per_program_pays(sandbox, index):
    per_program, one_run = humaneval_env(sandbox, catch_runs="per_program"), one_run_env(sandbox)
    for name, reply in replies_of(per_program, index).items():
        coder = per_program.reference_action("coder")
        expected = outcome(play_turn(per_program, coder, reply, index))
        got = outcome(play_turn(one_run, coder, reply, index))
        assert got == expected, (index, name)


def test_one_run_is_refused_without_allow_reward_holes(sandbox):
    with pytest.raises(ValueError, match="catch_runs='one_run'.*allow_reward_holes"):
        humaneval_env(sandbox, catch_runs="one_run")
    with pytest.raises(ValueError, match="catch_runs must be one of"):
        humaneval_env(sandbox, catch_runs="sometimes", allow_reward_holes=True)
    # the paper's reward grades no wrong program: nothing to refuse
    humaneval_env(sandbox, catch_runs="one_run", tester_reward="paper")


VOTE = (
    "import glob, os\n"
    "r = add(2, 3)\n"
    "for folder in ('/tmp', '/dev/shm', os.environ.get('HOME', '/tmp')):\n"
    "    {write}\n"
    "votes = [open(p).read() for p in glob.glob('/tmp/vote-*') + glob.glob('/dev/shm/vote-*')]\n"
    "assert not votes or repr(r) == max(set(votes), key=votes.count)\n"
)


@pytest.mark.parametrize(
    "write",
    [
        "open(os.path.join(folder, 'vote-%d' % os.getpid()), 'w').write(repr(r))",
        "try:\n        open(os.path.join(folder, 'vote-%d' % os.getpid()), 'w').write(repr(r))\n"
        "    except OSError:\n        pass",
    ],
    ids=["raising", "quiet"],
)
def test_a_voting_tester_catches_nothing(sandbox, write):
    env = make_env(sandbox=sandbox, max_turns=1, catch_runs="one_run", allow_reward_holes=True)
    record = play_turn(env, GOLDEN, written_tests(VOTE.format(write=write)))
    assert record.info["wrong_programs"] >= 3
    assert record.info["wrong_programs_caught"] == 0
    assert record.reward_components["local"] == pytest.approx(0.2)


@pytest.mark.parametrize(
    "reach",
    [
        "open('/tmp/note', 'w').write('1')",
        "import socket\nsocket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
        "import os\nos.fork()",
        "import os, signal\nos.kill(os.getppid(), signal.SIGCONT)",
        "import os\nos.setpriority(os.PRIO_PROCESS, 0, 10)",
    ],
    ids=["file", "socket", "fork", "signal", "renice"],
)
def test_a_test_reaching_outside_its_process_fails_every_slot_and_catches_nothing(sandbox, reach):
    env = make_env(sandbox=sandbox, max_turns=1, catch_runs="one_run", allow_reward_holes=True)
    record = play_turn(env, GOLDEN, written_tests(f"{reach}\nassert add(2, 3) == 5"))
    assert record.info["golden_solution_pass_rate"] == 0.0
    assert record.info["wrong_programs_caught"] == 0
    assert record.reward_components["local"] == pytest.approx(0.2)


def test_a_run_that_establishes_nothing_falls_back_to_one_run_per_program(sandbox, monkeypatch):
    per_program = make_env(sandbox=sandbox, max_turns=1)
    tests = written_tests("assert add(2, 3) == 5", "assert add(2, 2) == 5")
    expected = outcome(play_turn(per_program, GOLDEN, tests))
    monkeypatch.setattr(harness, "_test_process_filter", lambda: "")  # no test process filtered
    one_run = make_env(sandbox=sandbox, max_turns=1, catch_runs="one_run", allow_reward_holes=True)
    assert outcome(play_turn(one_run, GOLDEN, tests)) == expected
    assert expected[1] == expected[2] > 0


def test_stdin_stdout_problems_keep_one_run_per_program(sandbox):
    from llm_envs.verifiers import code as code_verifier

    from .test_coder_tester import SUM_IO

    env = make_env(SUM_IO, sandbox=sandbox, max_turns=1, catch_runs="one_run", allow_reward_holes=True)
    record = play_turn(env, code(SUM_IO.solution), code_verifier.io_tests_block([("2 7\n", "9\n")]))
    assert record.info["wrong_programs"] >= 2
    assert record.reward_components["local"] == pytest.approx(1.0)


@pytest.mark.parametrize("index", [0, 29])
def test_mutants_chosen_in_one_run_per_wave_are_those_one_run_per_program_chooses(sandbox, monkeypatch, index):
    from llm_envs.envs.coder_tester import mutants

    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")  # choose them here, in every mode
    chosen = {}
    modes = (
        ("per program", humaneval_env(sandbox, catch_runs="per_program")),
        ("one run", one_run_env(sandbox)),
        ("by value", humaneval_env(sandbox, catch_runs="by_value")),
    )
    for name, env in modes:
        mutants.clear_cache()
        env.reset(seed=0, options={"problem_index": index})
        made = []
        grade = env._grade
        monkeypatch.setattr(env, "_grade", lambda gradings, grade=grade, made=made: made.extend(gradings) or grade(gradings))
        chosen[name] = (env._mutants(), [g.kind for g in made])
        if name == "by value":  # the guard of each candidate finds the golden compiled by the run
            assert {g.reference for g in made} == {env.problem.solution}
    mutants.clear_cache()
    assert chosen["one run"][0] == chosen["per program"][0] == chosen["by value"][0] != ()
    # one run per wave of candidates (2 * max_mutants, then max_mutants), against one run per candidate
    assert set(chosen["one run"][1]) == {"function_slots"}
    assert set(chosen["by value"][1]) == {"function_values"}  # the golden tests are all asserts on values
    assert set(chosen["per program"][1]) == {"function"}
    assert len(chosen["one run"][1]) * 4 <= len(chosen["per program"][1])
    assert len(chosen["by value"][1]) == len(chosen["one run"][1])
