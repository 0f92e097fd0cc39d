"""Choosing every problem's mutants before training (``CoderTesterEnv.prepare``, ``llm-envs
prepare``, the trainer's ``env.prepare``): each problem's choice lands in the disk cache, and a
tester step in a new process then reads it instead of choosing, with the same mutants and the
same reward."""

from __future__ import annotations

import pytest

from llm_envs.cli import main
from llm_envs.envs.coder_tester import mutants
from llm_envs.envs.coder_tester.env import CoderTesterEnv

OPTIONS = dict(split="test", task_kwargs={"split_policy": "benchmark", "limit": 3}, max_turns=1,
               max_mutants=3, max_mutant_candidates=8)


def _tester_step(env: CoderTesterEnv, index: int) -> dict:
    env.reset(seed=0, options={"problem_index": index})
    env.step(env.reference_action("coder"))
    env.step(env.reference_action("tester"))
    info = env.records[1].info
    return {key: info[key] for key in ("golden_solution_pass_rate", "wrong_programs", "wrong_programs_caught")}


@pytest.mark.parametrize("catch_runs", ["by_value", "per_program"])
def test_prepared_mutants_are_read_by_a_new_process_and_pay_what_a_choice_on_the_step_pays(
    sandbox, tmp_path, monkeypatch, catch_runs
):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    env = CoderTesterEnv(sandbox=sandbox, catch_runs=catch_runs, **OPTIONS)
    seen = []
    done = env.prepare(threads=2, progress=lambda finished, total: seen.append((finished, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    chosen = dict(mutants.iter_cached())
    assert done == {"problems": 3, "with_mutants": 3, "mutants": sum(len(m) for m in chosen.values()),
                    "shipped": 0, "disk_cache": str(tmp_path)}
    assert len(chosen) == 3 and all(chosen.values())
    assert len(list(tmp_path.glob("*.json"))) == 3

    # A new process (nothing in memory): every step reads its problem's choice from the disk and
    # chooses nothing.
    mutants.clear_cache()
    choose = mutants._select

    def no_choice(*args, **kwargs):
        raise AssertionError("a prepared problem's mutants were chosen again on the step")

    monkeypatch.setattr(mutants, "_select", no_choice)
    fresh = CoderTesterEnv(sandbox=sandbox, catch_runs=catch_runs, **OPTIONS)
    prepared = [_tester_step(fresh, i) for i in range(3)]
    assert dict(mutants.iter_cached()) == chosen

    # The same steps with the choice made on the step (nothing cached anywhere) pay the same.
    monkeypatch.setattr(mutants, "_select", choose)
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", "off")
    mutants.clear_cache()
    on_the_step = [_tester_step(CoderTesterEnv(sandbox=sandbox, catch_runs=catch_runs, **OPTIONS), i) for i in range(3)]
    assert prepared == on_the_step
    assert all(step["wrong_programs"] > 0 for step in prepared)
    mutants.clear_cache()


@pytest.mark.parametrize("overrides", [{"tester_reward": "paper"}, {"reward_mode": "outcome"}, {"max_mutants": 0},
                                       {"agents": "single"}])
def test_prepare_chooses_nothing_where_no_catch_reward_is_paid(sandbox, tmp_path, monkeypatch, overrides):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    env = CoderTesterEnv(sandbox=sandbox, **{**OPTIONS, **overrides})
    assert env.prepare() == {"problems": 3, "with_mutants": 0, "mutants": 0}
    assert not list(tmp_path.iterdir()) and not list(mutants.iter_cached())


def test_prepare_on_the_command_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    assert main(["prepare", "llm/CoderTester-v0", "--split", "test", "--problems", "2", "--threads", "1",
                 "--env-arg", "task_kwargs={split_policy: benchmark}", "--env-arg", "max_mutants=2"]) == 0
    out = capsys.readouterr().out
    assert f"llm/CoderTester-v0 (test split): problems 2, with mutants 2, mutants 4, shipped 0, disk cache {tmp_path}" in out
    assert len(list(tmp_path.glob("*.json"))) == 2
    mutants.clear_cache()
    assert main(["prepare", "llm/Debate-v0"]) == 0
    assert "nothing to prepare" in capsys.readouterr().out
    assert main(["prepare", "llm/CoderTester-v0", "--threads", "0"]) == 2
    assert "--threads must be >= 1" in capsys.readouterr().err
    assert main(["prepare", "llm/CoderTestr-v0"]) == 2
    assert "did you mean llm/CoderTester-v0" in capsys.readouterr().err


def test_a_sandbox_failure_stops_prepare_and_a_second_call_finishes(sandbox, tmp_path, monkeypatch, capsys):
    import sandboxes
    from llm_envs.core import SandboxFailure
    from tests.envs.sandbox_faults import FailingSandbox

    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))
    mutants.clear_cache()
    failing = FailingSandbox(sandbox)
    failing.down = True
    env = CoderTesterEnv(sandbox=failing, **OPTIONS)
    with pytest.raises(SandboxFailure):
        env.prepare(threads=1)
    assert not list(tmp_path.glob("*.json")) and not list(mutants.iter_cached())  # nothing chosen is kept
    # On the command line: exit status 3 and a line that says what to do
    monkeypatch.setattr(sandboxes, "shared_sandbox", lambda spec="auto": failing)
    argv = ["prepare", "llm/CoderTester-v0", "--split", "test", "--problems", "2", "--threads", "1",
            "--env-arg", "task_kwargs={split_policy: benchmark}", "--env-arg", "max_mutants=2"]
    assert main(argv) == 3
    assert "run the command again to finish" in capsys.readouterr().err
    failing.down = False
    assert main(argv) == 0
    assert len(list(tmp_path.glob("*.json"))) == 2
    mutants.clear_cache()
