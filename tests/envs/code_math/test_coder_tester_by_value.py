"""``catch_runs="by_value"`` (the default): wrong programs graded on a tester's tests by value.

Where every test is one ``assert`` whose only link to the program is calls of the entry point
(``llm_envs.verifiers.code.value_check``), every wrong program runs in one sandbox run, each in a
process of its own that runs the asserts with its values rebuilt as data
(``sandboxes.run_value_checks``). It must pay exactly what one run per program pays, on reference
and adversarial testers, and fall back to those runs for any test of another form. Real
sandboxes, real HumanEval problems.
"""

from __future__ import annotations

import pytest

from llm_envs.envs.coder_tester import mutants
from llm_envs.verifiers import code as code_verifier
from llm_envs.verifiers.code import function_tests_block, value_check

from .test_coder_tester import ADD, GOLDEN, make_env, written_tests
from .test_coder_tester_catch import first_equality, humaneval_env, play_turn
from .test_coder_tester_one_run import outcome, replies_of


def graded_kinds(env, monkeypatch):
    kinds: list[str] = []
    grade = env._grade
    monkeypatch.setattr(env, "_grade", lambda gradings: kinds.extend(g.kind for g in gradings) or grade(gradings))
    return kinds


def value_replies(env, index):
    """Tester replies whose every test is graded by value (and two that are not)."""
    env.reset(seed=0, options={"problem_index": index})
    problem = env.problem
    call, expected = first_equality(problem)
    f = problem.entry_point
    return {
        **replies_of(env, index),
        "equality, reversed": written_tests(f"assert {expected} == {call}"),
        "a message that calls again": written_tests(f"assert {call} != {expected}, str({call})", f"assert {call} == {expected}"),
        "wrapped in builtins": written_tests(f"assert len(str({call})) == len(str({expected}))", f"assert not {call} != {expected}"),
        "an expression that raises": written_tests(f"assert len({call}) == 1 // 0", f"assert {call} == {expected}"),
        "arithmetic literals": written_tests(f"assert {call} == {expected} + 0 * 7"),
        "no call": written_tests("assert True", "assert 1 == 2"),
        "a call on a bad value": written_tests(f"assert {f}(object()) == 1", f"assert {call} == {expected}"),
        # not of the form: these run as code
        "a name": written_tests(f"expected = {expected}", f"assert {call} == expected"),
        "an attribute": written_tests(f"import math\nassert math.isfinite(1) and {call} == {expected}"),
    }


#: Replies with a test that is not a value check (a statement, a name, an attribute, ``object``).
AS_CODE = ("a name", "an attribute", "vacuous", "a check, a harness failure, a check", "a call on a bad value")


@pytest.mark.parametrize("index", [0, 12, 29, 77, 111, 148])
def test_by_value_pays_exactly_what_one_run_per_program_pays(sandbox, monkeypatch, index):
    per_program, by_value = humaneval_env(sandbox, catch_runs="per_program"), humaneval_env(sandbox)
    assert by_value.config.catch_runs == "by_value"  # the default
    kinds = graded_kinds(by_value, monkeypatch)
    for name, reply in value_replies(per_program, index).items():
        coder = per_program.reference_action("coder")
        expected = outcome(play_turn(per_program, coder, reply, index))
        del kinds[:]
        got = outcome(play_turn(by_value, coder, reply, index))
        assert got == expected, (index, name)
        if name != "random":
            assert ("function_values" in kinds) == (name not in AS_CODE), (name, kinds)


def test_a_catch_needs_a_test_the_golden_passes(sandbox):
    env = make_env(sandbox=sandbox, max_turns=1)
    record = play_turn(env, GOLDEN, written_tests("assert add(2, 3) == 6", "assert add(1, 1) == 2"))
    per_program = play_turn(make_env(sandbox=sandbox, max_turns=1, catch_runs="per_program"), GOLDEN,
                            written_tests("assert add(2, 3) == 6", "assert add(1, 1) == 2"))
    assert outcome(record) == outcome(per_program)
    assert record.info["golden_solution_pass_rate"] == 0.5
    assert 0 < record.info["wrong_programs_caught"] <= record.info["wrong_programs"]


def test_a_program_that_cannot_be_graded_by_value_is_graded_in_a_run_of_its_own(sandbox, monkeypatch):
    from sandboxes import harness

    tests = written_tests("assert add(2, 3) == 5", "assert add(2, 2) == 4")
    expected = outcome(play_turn(make_env(sandbox=sandbox, max_turns=1, catch_runs="per_program"), GOLDEN, tests))
    # a run that establishes nothing (as a sandbox failure would leave it)
    monkeypatch.setattr(harness, "_CALLS_FILE", "not-the-calls-file.json")
    env = make_env(sandbox=sandbox, max_turns=1)
    kinds = graded_kinds(env, monkeypatch)
    assert outcome(play_turn(env, GOLDEN, tests)) == expected
    assert expected[1] == expected[2] > 0
    assert kinds.count("function") >= 2 + expected[2]  # golden, code, then every wrong program


@pytest.mark.parametrize(
    "test",
    [
        "assert add.__globals__ is not None",  # an attribute
        "assert [x for x in add(1, 2)]",  # a comprehension
        "assert (lambda: add(1, 2))()",
        "assert open('/tmp/x')",  # not a builtin it may name
        "assert __import__('os')",
        "import builtins as len\nassert len(add(1, 2)) == 1",  # an import binding a builtin it uses
        "from os import *\nassert add(1, 2) == 3",
        "len = lambda x: 1\nassert len(add(1, 2)) == 1",
        "def __llm_envs_show(v):\n    return add(9, 9)\nassert add(1, 2) == 3",
        "assert add(1, 2) == 3\nassert add(2, 2) == 4",  # two asserts: two tests' worth
        "assert add(1, 2) == 3\nprint(1)",
        "x = add\ny = 3\nassert x(1, y) == 4",
        "assert f'{add(1, 2)}' == '3'",
        "assert (y := add(1, 2)) == 3",
    ],
)
def test_value_check_refuses_anything_that_reaches_beyond_the_calls(test):
    assert value_check(test, "add") is None
    parsed = code_verifier.parse_function_tests(written_tests(test), "add")
    # (The parser makes each assert a test of its own, and a statement after the last assert
    # belongs to no test: in those two cases its tests are fine.)
    if len(parsed.tests) == 1 and not test.endswith("print(1)"):
        assert value_check(parsed.tests[0], "add") is None, test


def test_value_check_refuses_builtins_the_setup_binds():
    snippet = code_verifier.parse_function_tests(written_tests("assert len(add(1, 2)) == 1"), "add").tests[0]
    assert value_check(snippet, "add") is not None
    assert value_check(snippet, "add", setup="def len(x):\n    return 1\n") is None
    assert value_check(snippet, "add", setup="from typing import List\n") is not None


def test_value_check_takes_the_message_helper_only_as_the_harness_writes_it():
    # The helper is recognized by its lines where they are the harness's own, else by its tree:
    # the same tree in other text is still the helper; any other function of its name is not.
    snippet = code_verifier.parse_function_tests(written_tests("assert add(1, 2) == 3"), "add").tests[0]
    last = "    return text if len(text) <= 300 else text[:297] + '...'"
    assert "def __llm_envs_show(value):" in snippet and last in snippet
    assert value_check(snippet, "add") is not None
    assert value_check(snippet.replace("\n", "\r\n"), "add") is not None
    assert value_check(snippet.replace("(value):\n", "(value):  # the same tree\n", 1), "add") is not None
    for changed in (
        snippet.replace("text[:297]", "text[:298]"),
        snippet.replace(last, last + "; add(9, 9)"),
        snippet.replace(last, last + "\n    add(9, 9)"),
        snippet.replace("def __llm_envs_show", "@print\ndef __llm_envs_show"),
        snippet.replace("\n", "\r\n").replace("text[:297]", "text[:298]"),
    ):
        assert changed != snippet
        assert value_check(changed, "add") is None, changed


@pytest.mark.parametrize(
    "test, source",
    [
        ("assert add(1, 2) == 3", "assert candidate(1, 2) == 3"),
        ("assert 3 == add(1, 2)", "assert 3 == candidate(1, 2)"),
        ("assert not add(1, -1)", "assert not candidate(1, -1)"),
        ("assert add(1, 2) is not None, 'no value'", "assert candidate(1, 2) is not None, 'no value'"),
        ("assert abs(add(0.5, 1) - 1.5) < 1e-6", "assert abs(candidate(0.5, 1) - 1.5) < 1e-06"),
        ("candidate = add\nassert candidate(*[1, 2], **{}) == 3", "assert candidate(*[1, 2], **{}) == 3"),
    ],
)
def test_value_check_keeps_the_assert_with_the_entry_point_as_candidate(test, source):
    snippet = code_verifier.parse_function_tests(written_tests(test), "add").tests[0]
    check = value_check(snippet, "add")
    assert check is not None and check.source == source


def test_the_golden_tests_of_most_humaneval_problems_are_value_checks(sandbox):
    env = humaneval_env(sandbox)
    count = 0
    for index in range(164):
        env.reset(seed=0, options={"problem_index": index})
        problem = env.problem
        count += code_verifier.value_checks(problem.tests, problem.entry_point, problem.setup) is not None
    assert count >= 140  # the rest loop, use helpers or names (32, 38, 53, ...): they run as code


def test_mutants_chosen_by_value_need_no_test_process(sandbox, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    mutants.clear_cache()
    env = make_env(ADD, sandbox=sandbox, max_turns=1)
    env.reset(seed=0)
    kinds = graded_kinds(env, monkeypatch)
    chosen = env._mutants()
    mutants.clear_cache()
    assert chosen and set(kinds) == {"function_values"}


def test_the_reference_tester_block_is_graded_by_value(sandbox):
    env = humaneval_env(sandbox)
    env.reset(seed=0, options={"problem_index": 0})
    reply = "**Tests:**\n" + function_tests_block(env.problem.tests)
    parsed = code_verifier.parse_function_tests(reply, env.problem.entry_point)
    assert code_verifier.value_checks(parsed.tests, env.problem.entry_point, env.problem.setup) is not None


def test_wrong_programs_graded_by_value_run_the_guard_once_and_stop_at_their_first_catch(sandbox, monkeypatch):
    env = humaneval_env(sandbox)
    graded = []
    grade = env._grade

    def grade_and_keep(gradings):
        results = grade(gradings)
        graded.append((gradings, list(results)))  # (a copy: the step pops from its list)
        return results

    monkeypatch.setattr(env, "_grade", grade_and_keep)
    env.reset(seed=0, options={"problem_index": 0})
    play_turn(env, env.reference_action("coder"), env.reference_action("tester"), 0)
    # (the last: choosing the mutants graded candidates by value too)
    grading, results = [
        (g, r) for gradings, reports in graded for g, r in zip(gradings, reports) if g.kind == "function_values"
    ][-1]
    # the golden first and unguarded; the wrong programs as chosen, the guard their epilogue
    assert grading.golden == 0 and grading.programs[0] == env.problem.solution
    assert grading.programs[1:] == env._mutants() and grading.epilogue == env._guard()
    assert not any("__llm_envs_wp_install" in p for p in grading.programs)
    stopped = [r for r in results[1:] if r is not None and r.stopped]
    assert stopped and all(r.outcomes[-1] == "fail" and len(r.outcomes) < len(grading.tests) for r in stopped)
    record = env.records[-1]
    assert record.info["wrong_programs_caught"] == record.info["wrong_programs"] == len(grading.programs) - 1
