"""The trainer never trains on a sandbox failure: a rollout drops the episode (all its records,
its metrics) and counts it; the evaluation leaves it out and counts it in ``eval/errors``."""

from __future__ import annotations

from collections import Counter

import pytest

import llm_envs
import sandboxes
from llm_envs.core import InfrastructureError
from llm_envs.verifiers.code import SANDBOX_ATTEMPTS
from llm_trainers.rollout import collect, spawn_envs
from llm_trainers.scripted import ScriptedEngine
from tests.envs.sandbox_faults import FailingSandbox, register_program_sums_env

PLAN_POLICIES = {"tool": "tool", "plan": "plan"}


@pytest.fixture(scope="module")
def real_sandbox():
    return sandboxes.shared_sandbox("auto")


@pytest.fixture
def program_env():
    yield from register_program_sums_env()


def _planpath_reply(program: str):
    # The tool writes a real search program every turn; the plan agent answers nothing valid,
    # so the puzzle never changes and the episode runs to its turn limit.
    def reply(policy, observation, candidate):
        return f"```python\n{program}\n```" if policy == "tool" else "#### "

    return reply


def _rows(records):
    return [(r.slot, r.index, r.agent, r.candidate, r.reward, r.final_reward, r.text) for r in records]


def test_flat_rollout_drops_every_record_of_an_episode_whose_later_step_failed(real_sandbox):
    faulty = FailingSandbox(real_sandbox)
    seeds = [11, 12, 13]
    twin = llm_envs.make("llm/PlanPath-v0", sandbox=real_sandbox)
    twin.reset(seed=12)
    puzzle = twin.rules.puzzle_text(twin.puzzle_state) + "\n"
    seen: Counter[str] = Counter()

    def second_turn_of_slot_1(source, stdin):
        if stdin != puzzle:
            return False
        seen[stdin] += 1
        return seen[stdin] > 1  # turn 0 runs; from turn 1 on (retry included) the sandbox fails

    faulty.fail_when = second_turn_of_slot_1
    reply = _planpath_reply(twin.rules.reference_program())
    got = collect(spawn_envs(llm_envs.make("llm/PlanPath-v0", sandbox=faulty), 3), seeds, ScriptedEngine(reply),
                  PLAN_POLICIES)
    clean = collect(spawn_envs(llm_envs.make("llm/PlanPath-v0", sandbox=real_sandbox), 3), seeds,
                    ScriptedEngine(reply), PLAN_POLICIES)
    assert faulty.failed_runs == SANDBOX_ATTEMPTS
    (failure,) = got.infra_failures
    assert failure["slot"] == 1 and failure["agent"] == "tool" and failure["kind"] == "sandbox"
    assert 1 in {r.slot for r in clean.records} and {r.slot for r in got.records} == {0, 2}
    assert _rows(got.records) == _rows(r for r in clean.records if r.slot != 1)
    assert got.episodes == [clean.episodes[0], clean.episodes[2]]


def test_a_fixed_opponents_failed_move_drops_only_its_episode(real_sandbox):
    # The plan agent is trained; the tool seat is the reference agent, whose program runs in the
    # sandbox (the shipped plan_path_plan_agent config). Slot 1's first program fails, retry too.
    from llm_envs.agents.spec import build_agent

    faulty = FailingSandbox(real_sandbox)
    seeds = [21, 22, 23]
    twin = llm_envs.make("llm/PlanPath-v0", sandbox=real_sandbox)
    twin.reset(seed=22)
    puzzle = twin.rules.puzzle_text(twin.puzzle_state) + "\n"
    faulty.fail_when = lambda source, stdin: stdin == puzzle
    engine = ScriptedEngine(lambda policy, observation, candidate: "#### U")
    got = collect(spawn_envs(llm_envs.make("llm/PlanPath-v0", sandbox=faulty), 3), seeds, engine, {"plan": "plan"},
                  opponents={"tool": build_agent("reference")})
    clean = collect(spawn_envs(llm_envs.make("llm/PlanPath-v0", sandbox=real_sandbox), 3), seeds, engine,
                    {"plan": "plan"}, opponents={"tool": build_agent("reference")})
    assert faulty.failed_runs == SANDBOX_ATTEMPTS
    (failure,) = got.infra_failures
    assert failure["slot"] == 1 and failure["agent"] == "tool" and failure["kind"] == "sandbox"
    assert {r.slot for r in got.records} == {0, 2}
    assert _rows(got.records) == _rows(r for r in clean.records if r.slot != 1)
    assert got.episodes == [clean.episodes[0], clean.episodes[2]]


def test_tree_rollout_drops_a_group_with_a_failed_candidate_and_stops_when_all_fail(real_sandbox, program_env):
    faulty = FailingSandbox(real_sandbox)
    seeds = [1, 2, 3, 4]
    twin = llm_envs.make(program_env, sandbox=real_sandbox)
    twin.reset(seed=3)
    doomed = twin.reference_action("coder")

    def reply(policy, observation, candidate):  # candidate 0 right, candidate 1 wrong
        a, b = observation["prompt"].removeprefix("What is ").removesuffix("?").split(" + ")
        return f"{a} + {b}" if candidate == 0 else "0"

    faulty.fail_when = lambda source, stdin: stdin == doomed
    envs = spawn_envs(llm_envs.make(program_env, sandbox=faulty), len(seeds))
    got = collect(envs, seeds, ScriptedEngine(reply), {"coder": "coder"}, k=2, tree=True)
    assert [f["slot"] for f in got.infra_failures] == [2]
    assert sorted({r.slot for r in got.records}) == [0, 1, 3] and len(got.records) == 6
    assert [r.reward for r in got.records] == [1.0, 0.0] * 3 and len(got.episodes) == 3

    faulty.fail_when, faulty.down = None, True
    with pytest.raises(InfrastructureError, match="every episode of the rollout"):
        collect(got.envs, seeds, ScriptedEngine(reply), {"coder": "coder"}, k=2, tree=True)


def test_trainer_counts_dropped_training_episodes_and_incomplete_evaluations(tmp_path, monkeypatch, program_env):
    from llm_trainers.config import load_config
    from llm_trainers.trainer import Trainer

    faulty = FailingSandbox(sandboxes.shared_sandbox("auto"))
    monkeypatch.setattr(sandboxes, "shared_sandbox", lambda *args, **kwargs: faulty)
    trainer = Trainer(load_config(None, [
        "model.path=tiny:llm/Signalling-v0",
        "model.device=cpu",
        "model.level=L1",
        "rollout.max_new_tokens=3",
        f"env.id={program_env}",
        "env.num_envs=4",
        "run.steps=1",
        "run.eval_episodes=4",
        "run.progress=false",
        "run.tensorboard=false",
        "run.export_final=false",
        f"run.output_dir={tmp_path}",
    ]))
    try:
        clean = trainer.evaluate()
        assert clean["eval/errors"] == 0.0 and clean["eval/incomplete_episodes"] == 0.0

        faulty.fail_next = SANDBOX_ATTEMPTS  # one training episode's program fails, retry included
        metrics = trainer.train_step()
        assert metrics["rollout/infra_failed_episodes"] == 1.0

        faulty.fail_next = SANDBOX_ATTEMPTS
        partial = trainer.evaluate()
        assert partial["eval/incomplete_episodes"] == 1.0 and partial["eval/errors"] == 0.25
        lines = (tmp_path / "eval" / "step_00000001.jsonl").read_text().splitlines()
        assert len(lines) == 3  # the lost episode is not written as finished

        faulty.down = True
        down = trainer.evaluate()
        assert down["eval/errors"] == 1.0 and "eval/success" not in down
        with pytest.raises(InfrastructureError, match="every episode of the rollout"):
            trainer.train_step()
    finally:
        trainer.close()
