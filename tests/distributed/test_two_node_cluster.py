"""A simulated two-node cluster (``ray.cluster_utils.Cluster``): work lands on both nodes and the
results equal a local run."""

from __future__ import annotations

import llm_envs
from llm_trainers.distributed.env_workers import RayEnvGroup
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


def test_workers_spread_over_both_nodes_and_match_the_local_rollout(two_node_ray):
    seeds = list(range(100, 108))
    expected = local_rollout(seeds, k=2, tree=True)
    group = RayEnvGroup(ENV, KWARGS, len(seeds), workers=2, cpus_per_worker=1.0)
    try:
        assert len(set(group.nodes)) == 2, "SPREAD must put the two workers on the two nodes"
        got = collect(group, seeds, ScriptedEngine(signalling_reply), agent_as_policy, k=2, tree=True)
    finally:
        group.close()
    assert rollout_data(got) == rollout_data(expected)




def test_evaluation_spreads_over_both_nodes_and_matches_the_local_run(two_node_ray, tmp_path):
    from llm_envs.agents.spec import resolve_agents
    from llm_envs.distributed.evaluation import RayEvaluation
    from llm_envs.episodes import load_episodes
    from llm_envs.evaluation import evaluate

    remote = evaluate(ENV, {None: "random"}, episodes=8, seed=3, concurrency=2, env_kwargs=KWARGS,
                      out_dir=tmp_path / "ray", progress=False, plot=False,
                      runner=RayEvaluation(workers=2, cpus_per_worker=1.0, chunk_size=2))
    assert len(remote["ray"]["nodes"]) == 2
    agents = resolve_agents({None: "random"}, list(llm_envs.make(ENV, **KWARGS).possible_agents))
    local = evaluate(ENV, agents, episodes=8, seed=3, concurrency=3, env_kwargs=KWARGS, out_dir=tmp_path / "local",
                     progress=False, plot=False)
    assert remote["success"] == local["success"] and remote["rewards"] == local["rewards"]
    outcomes = [{e.index: e.outcome() for e in load_episodes(tmp_path / run / "episodes.jsonl")} for run in ("ray", "local")]
    assert outcomes[0] == outcomes[1]
