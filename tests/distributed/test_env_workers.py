"""Environment workers as Ray actors: a distributed rollout's records equal the local ones."""

from __future__ import annotations

import pytest

from llm_trainers.distributed.env_workers import EnvWorkerLost, RayEnvGroup, split_slots
from llm_trainers.rollout import collect
from llm_trainers.scripted import ScriptedEngine
from tests.distributed.conftest import (
    ENV,
    KWARGS,
    agent_as_policy,
    local_rollout,
    rollout_data,
    signalling_reply,
)


def test_split_slots_is_contiguous_and_balanced():
    assert split_slots(7, 3) == [[0, 1, 2], [3, 4], [5, 6]]
    with pytest.raises(ValueError):
        split_slots(2, 3)


@pytest.mark.parametrize("tree", [True, False])
def test_records_of_a_distributed_rollout_equal_the_local_ones(local_ray, tree):
    seeds = [11, 12, 12, 13, 14, 15, 16]
    kw = {"k": 3 if tree else 1, "tree": tree}
    expected = local_rollout(seeds, **kw)
    group = RayEnvGroup(ENV, KWARGS, len(seeds), workers=2, cpus_per_worker=0.5)
    try:
        got = collect(group, seeds, ScriptedEngine(signalling_reply), agent_as_policy, **kw)
        again = collect(group, seeds, ScriptedEngine(signalling_reply), agent_as_policy, **kw)  # warm workers reused
    finally:
        group.close()
    assert rollout_data(got) == rollout_data(expected) == rollout_data(again)
    assert len(expected.records) == len(seeds) * 3 * 2 * (3 if tree else 1)
    # the group comparison really happened: some groups saw different rewards
    if tree:
        assert any(not r.chosen for r in got.records)


def test_a_worker_killed_mid_rollout_is_reported_and_replaced(local_ray):
    seeds = list(range(6))
    group = RayEnvGroup(ENV, KWARGS, len(seeds), workers=2, cpus_per_worker=0.5)

    def kill_second_worker(call):
        if call == 2:  # mid-episode: after two waves
            local_ray.kill(group.actors[1], no_restart=True)

    try:
        with pytest.raises(EnvWorkerLost, match="environment worker 1"):
            collect(group, seeds, ScriptedEngine(signalling_reply, on_generate=kill_second_worker), agent_as_policy,
                    k=2, tree=True)
        assert group.recover() == [1]
        got = collect(group, seeds, ScriptedEngine(signalling_reply), agent_as_policy, k=2, tree=True)
    finally:
        group.close()
    assert rollout_data(got) == rollout_data(local_rollout(seeds, k=2, tree=True))


def test_an_environment_with_cross_episode_state_stays_in_one_worker(local_ray):
    with pytest.raises(ValueError, match="env_workers: 1"):
        RayEnvGroup("llm/ProposerSolverJudge-v0", {}, 4, workers=2, cpus_per_worker=0.5)
