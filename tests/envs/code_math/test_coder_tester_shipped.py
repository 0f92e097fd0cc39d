"""The mutants of the bundled HumanEval problems, chosen before release and shipped with the
package (``llm_envs.envs.coder_tester.shipped``): they cover every bundled problem under the
default options, they are what this code chooses, a first step reads them instead of choosing
and pays the same reward, and a stored choice that does not match this code's mutants is not
used."""

from __future__ import annotations

import pytest

from llm_envs.envs.coder_tester import mutants, shipped
from llm_envs.envs.coder_tester.env import CoderTesterEnv
from tests.envs.code_math.test_coder_tester_prepare import _tester_step

BENCHMARK = {"split": "test", "task_kwargs": {"split_policy": "benchmark"}}
# Benchmark problems whose candidates all end far inside the time limit of a golden test: their
# choice is the same on every machine (a candidate close to the limit, such as HumanEval/55's
# doubled Fibonacci, is wrong on one machine and timed out on another).
STABLE = (11, 23, 61, 62, 65, 72, 74, 102, 139, 152)


def _source(env: CoderTesterEnv) -> mutants.MutantSource:
    problem = env.problem
    return mutants.MutantSource(problem.solution, functions_only=True, key=str(problem.id),
                                limit=env.config.max_mutant_candidates)


@pytest.fixture
def shipped_on(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_ENVS_SHIPPED_MUTANTS", "on")
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))  # an empty disk cache
    mutants.clear_cache()
    yield
    mutants.clear_cache()


def test_the_table_covers_every_bundled_problem_and_matches_this_code_s_candidates(shipped_on):
    keys = set()
    for options in shipped.CONFIGURATIONS:
        env = CoderTesterEnv(sandbox="process", **options)
        for index in range(len(env.task_source)):
            env.reset(seed=0, options={"problem_index": index})
            if env._can_use_wrong_programs():
                key = env._mutants_key()
                keys.add(key)
                found = shipped.lookup(key, _source(env).at)
                assert found is not None, f"{env.problem.id} ({options}): no shipped choice, or a stale one"
                assert len(set(found)) == len(found) <= env.config.max_mutants
    assert keys == set(shipped.table())
    assert len(keys) > 164  # (the memorisable problems' train tests are others)


def test_the_shipped_choices_are_the_choices_this_code_makes(sandbox, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    env = CoderTesterEnv(sandbox=sandbox, **BENCHMARK)
    for index in STABLE:
        env.reset(seed=0, options={"problem_index": index})
        monkeypatch.setenv("LLM_ENVS_SHIPPED_MUTANTS", "off")
        mutants.clear_cache()
        chosen = env._mutants()
        monkeypatch.setenv("LLM_ENVS_SHIPPED_MUTANTS", "on")
        assert shipped.lookup(env._mutants_key(), _source(env).at) == chosen, (
            f"{env.problem.id}: the shipped choice is not this code's; regenerate it "
            "(python -m llm_envs.envs.coder_tester.make_shipped)"
        )
    mutants.clear_cache()


@pytest.mark.parametrize("catch_runs", ["by_value", "per_program"])
def test_a_first_step_reads_the_shipped_choice_and_pays_what_a_choice_on_the_step_pays(
    sandbox, shipped_on, monkeypatch, tmp_path, catch_runs
):
    choose = mutants._select

    def no_choice(*args, **kwargs):
        raise AssertionError("a bundled problem's mutants were chosen on the step")

    monkeypatch.setattr(mutants, "_select", no_choice)
    indices = STABLE[:3]
    env = CoderTesterEnv(sandbox=sandbox, catch_runs=catch_runs, max_turns=1, **BENCHMARK)
    from_table = [_tester_step(env, i) for i in indices]
    assert not list(tmp_path.iterdir())  # read from the table; nothing written to the disk cache

    monkeypatch.setattr(mutants, "_select", choose)
    monkeypatch.setenv("LLM_ENVS_SHIPPED_MUTANTS", "off")
    mutants.clear_cache()
    on_the_step = [_tester_step(CoderTesterEnv(sandbox=sandbox, catch_runs=catch_runs, max_turns=1, **BENCHMARK), i)
                   for i in indices]
    assert from_table == on_the_step
    assert all(step["wrong_programs"] > 0 for step in from_table)


def test_prepare_counts_the_problems_read_from_the_table(sandbox, shipped_on, tmp_path, capsys):
    from llm_envs.cli import main

    env = CoderTesterEnv(sandbox=sandbox, **BENCHMARK)
    done = env.prepare(STABLE[:4], threads=2)
    assert done["shipped"] == done["with_mutants"] == 4 and done["mutants"] > 0
    assert not list(tmp_path.iterdir())
    mutants.clear_cache()
    argv = ["prepare", "llm/CoderTester-v0", "--split", "test", "--problems", "2", "--threads", "1",
            "--env-arg", "task_kwargs={split_policy: benchmark}"]
    assert main(argv) == 0
    assert "with mutants 2, mutants 15, shipped 2, " in capsys.readouterr().out and not list(tmp_path.iterdir())
    mutants.clear_cache()
    # Another option: nothing shipped for it, every problem chosen and cached on disk.
    assert main([*argv, "--env-arg", "max_mutants=2"]) == 0
    assert ", shipped 0, " in capsys.readouterr().out and len(list(tmp_path.glob("*.json"))) == 2


def test_another_option_is_chosen_on_the_step(sandbox, shipped_on, tmp_path):
    env = CoderTesterEnv(sandbox=sandbox, max_mutants=3, **BENCHMARK)
    env.reset(seed=0, options={"problem_index": STABLE[0]})
    assert env._mutants_key() not in shipped.table()
    assert len(env._mutants()) == 3
    assert len(list(tmp_path.glob("*.json"))) == 1  # chosen, and cached on disk


def test_a_shipped_choice_that_does_not_match_this_code_s_mutants_is_not_used(shipped_on, monkeypatch):
    env = CoderTesterEnv(sandbox="process", **BENCHMARK)
    env.reset(seed=0, options={"problem_index": STABLE[0]})
    key = env._mutants_key()
    entry = shipped.table()[key]
    assert shipped.lookup(key, _source(env).at) is not None
    (first_position, first_hash), (second_position, _) = entry[0], entry[1]
    tampered = {
        "another hash": [[first_position, "0" * 16], *entry[1:]],
        "another position": [[second_position, first_hash], *entry[1:]],
        "a position past the last": [[10**6, first_hash], *entry[1:]],
        "a program twice": [entry[0], entry[0], *entry[2:]],
        "not a list of pairs": [first_position, first_hash],
        "not a list": {"mutants": []},
    }
    for why, bad in tampered.items():
        monkeypatch.setattr(shipped, "table", lambda bad=bad: {key: bad})
        assert shipped.lookup(key, _source(env).at) is None, why
    monkeypatch.setattr(shipped, "table", lambda: {key: entry})
    assert shipped.lookup(key, _source(env).at) is not None
    # Turned off: no shipped choice.
    monkeypatch.setenv("LLM_ENVS_SHIPPED_MUTANTS", "off")
    assert shipped.lookup(key, _source(env).at) is None
