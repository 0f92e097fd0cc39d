"""Batch grading (llm_envs.envs.grading.grade_ahead, the rollout's ``batch_grading``): the
programs of many steps graded together give the rewards one-at-a-time grading gives, the steps
themselves then run nothing, and a result is never used by a step it was not graded for."""

from __future__ import annotations

import numpy as np
import pytest

import llm_envs
import sandboxes
from llm_envs.core import SandboxFailure
from llm_envs.envs import grading
from llm_trainers.rollout import LocalEnvGroup, Move, spawn_envs
from tests.envs.sandbox_faults import FailingSandbox, register_program_sums_env


@pytest.fixture(scope="module")
def real_sandbox():
    return sandboxes.shared_sandbox("auto")


@pytest.fixture
def mutant_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_ENVS_MUTANT_CACHE", str(tmp_path))  # a fresh disk cache


def _coder_tester(sandbox, n):
    first = llm_envs.make("llm/CoderTester-v0", sandbox=sandbox, split="test",
                          task_kwargs={"split_policy": "benchmark"}, max_turns=2, max_mutants=2,
                          max_mutant_candidates=4)
    return spawn_envs(first, n)


def _reply(env, slot):
    """Golden code in even slots, a wrong constant in odd ones; the tester writes golden tests."""
    agent = env.agent_selection
    if agent == "coder" and slot % 2:
        return env.random_action(agent, np.random.default_rng(slot + 10 * env.turn))
    return env.reference_action(agent)


def _play(envs, seeds, *, batch):
    group = LocalEnvGroup(envs, batch_grading=batch)
    views = group.reset(seeds, {})
    active = [i for i, v in enumerate(views) if not v.over]
    while active:
        moves = [Move(i, envs[i].agent_selection, [_reply(envs[i], i)], False) for i in active]
        for move, played in zip(moves, group.play(moves)):
            assert played.failure is None, played.failure
            views[move.slot] = played.view
        active = [i for i in active if not views[i].over]
    return [[(r.agent, r.turn, r.reward, dict(r.reward_components), dict(r.info)) for r in e.records] for e in envs]


def test_coder_tester_rollout_batched_gives_the_one_at_a_time_rewards(real_sandbox, mutant_cache):
    seeds = [3, 4, 5, 6]
    one_at_a_time = _play(_coder_tester(real_sandbox, 4), seeds, batch=False)
    batched = _play(_coder_tester(real_sandbox, 4), seeds, batch=True)
    assert batched == one_at_a_time
    rewards = {r[2] for episode in batched for r in episode}
    assert len(rewards) > 1  # golden and wrong coders: the comparison covers different outcomes


def test_steps_graded_ahead_run_nothing_themselves(real_sandbox, mutant_cache):
    counting = FailingSandbox(real_sandbox)  # never fails here: it counts runs
    envs = _coder_tester(counting, 3)
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
    expected = []
    for slot, env in enumerate(envs):  # the same steps, one at a time, on clones
        twin = env.clone()
        twin.step(_reply(env, slot))
        expected.append(twin.records[-1].reward)
    before = counting.runs
    planned = grading.grade_ahead([(env, _reply(env, slot)) for slot, env in enumerate(envs)])
    assert planned == 3 and counting.runs - before == 3  # one function-test run per coder
    ran_ahead = counting.runs
    for slot, env in enumerate(envs):
        env.step(_reply(env, slot))
    assert counting.runs == ran_ahead  # the steps used the results graded ahead
    assert [env.records[-1].reward for env in envs] == expected


def test_a_result_graded_for_another_action_is_not_used(real_sandbox, mutant_cache):
    (env,) = _coder_tester(real_sandbox, 1)
    env.reset(seed=3)
    golden = env.reference_action("coder")
    wrong = env.random_action("coder", np.random.default_rng(0))
    twin = env.clone()
    twin.step(wrong)
    grading.grade_ahead([(env, golden)])
    assert env.clone()._graded_ahead is None  # a clone never takes the results graded ahead
    env.step(wrong)  # not the planned action: its program is graded by the step itself
    assert env.records[-1].reward == twin.records[-1].reward
    assert env.records[-1].info["golden_pass_rate"] < 1.0
    grading.drop_unused([env])
    assert env._graded_ahead is None  # the golden result is gone, never reused by a later step


def test_reasoner_tool_and_puzzle_tool_programs_graded_ahead(real_sandbox):
    for env_id in ("llm/ReasonerTool-v0", "llm/PlanPath-v0"):
        counting = FailingSandbox(real_sandbox)
        env = llm_envs.make(env_id, sandbox=counting)
        env.reset(seed=1)
        while env.agent_selection != "tool":
            env.step(env.reference_action(env.agent_selection))
        action = env.reference_action("tool")
        twin = env.clone()
        twin.step(action)
        assert grading.grade_ahead([(env, action)]) == 1
        runs = counting.runs
        env.step(action)
        assert counting.runs == runs
        assert env.records[-1].reward == twin.records[-1].reward
        timing = {"sandbox_s"}  # wall time, the one field that differs between runs
        assert {k: v for k, v in env.records[-1].info.items() if k not in timing} == {
            k: v for k, v in twin.records[-1].info.items() if k not in timing
        }


def test_a_sandbox_failure_in_the_batch_is_raised_by_the_step(real_sandbox, mutant_cache):
    failing = FailingSandbox(real_sandbox)
    (env,) = _coder_tester(failing, 1)
    env.reset(seed=3)
    failing.down = True
    grading.grade_ahead([(env, env.reference_action("coder"))])  # every attempt fails
    runs = failing.runs
    with pytest.raises(SandboxFailure):
        env.step(env.reference_action("coder"))
    assert failing.runs == runs  # the failure graded ahead, not a second round of attempts
    assert env.records == []  # the step did not happen
    grading.drop_unused([env])
    failing.down = False
    env.step(env.reference_action("coder"))
    assert env.records[-1].info["golden_pass_rate"] == 1.0


def test_an_environment_that_does_not_opt_in_is_not_planned(real_sandbox):
    for env_id in register_program_sums_env():
        counting = FailingSandbox(real_sandbox)
        env = llm_envs.make(env_id, sandbox=counting)
        env.reset(seed=0)
        assert grading.grade_ahead([(env, "1 + 2")]) == 0
        assert counting.runs == 0  # no planning clone ran its program
