"""``llm-envs eval --ray``: episodes played by Ray workers give the files and numbers of a local run."""

from __future__ import annotations

import json

import pytest

from llm_envs.agents.spec import AgentSpec, parse_agent_spec, resolve_agents
from llm_envs.cli import main
from llm_envs.evaluation import evaluate
from llm_envs.runner import RunnerError, load_episodes

DETERMINISTIC = ("success", "turns", "rewards", "format_error_rate", "call_error_rate", "metrics", "episodes", "agents",
                 "env_id")


def _outcomes(path):
    return {e.index: e.outcome() for e in load_episodes(path / "episodes.jsonl")}


def _summary(path):
    return json.loads((path / "summary.json").read_text())


def _local(env_id, spec, out, episodes, seed=0, **env_kwargs):
    agents = resolve_agents({None: spec}, list(__import__("llm_envs").make(env_id, **env_kwargs).possible_agents))
    return evaluate(env_id, agents, episodes=episodes, seed=seed, concurrency=3, env_kwargs=env_kwargs, out_dir=out,
                    progress=False, plot=False)


def test_cli_ray_run_equals_the_local_run_and_resumes(local_ray, tmp_path):
    common = ["eval", "llm/Signalling-v0", "--agent", "random", "--episodes", "11", "--seed", "5", "--no-plot",
              "--no-progress", "--concurrency", "2"]
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--out", str(tmp_path / "ray"), "--ray", "--ray-workers", "2",
                 "--ray-cpus-per-worker", "0.5", "--ray-chunk-size", "3"]) == 0
    assert _outcomes(tmp_path / "ray") == _outcomes(tmp_path / "local")
    ray_summary, local_summary = _summary(tmp_path / "ray"), _summary(tmp_path / "local")
    for key in DETERMINISTIC:
        assert ray_summary[key] == local_summary[key], key
    assert ray_summary["ray"]["workers"] == 2

    # an interrupted run (the first 4 episodes on disk) resumes and plays only the missing ones
    lines = (tmp_path / "ray" / "episodes.jsonl").read_text().splitlines()
    kept = sorted(lines, key=lambda line: json.loads(line)["index"])[:4]
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "episodes.jsonl").write_text("\n".join(kept) + "\n")
    assert main([*common, "--out", str(tmp_path / "cut"), "--ray", "--ray-workers", "2",
                 "--ray-cpus-per-worker", "0.5", "--resume"]) == 0
    assert _outcomes(tmp_path / "cut") == _outcomes(tmp_path / "local")
    assert _summary(tmp_path / "cut")["episodes_resumed"] == 4


def test_sandboxed_environment_runs_in_the_workers(local_ray, tmp_path):
    """CoderTester with its reference agents: the code runs in each worker's own sandbox."""
    from llm_envs.distributed.evaluation import evaluate_on_ray

    local = _local("llm/CoderTester-v0", "reference", tmp_path / "local", 4, task="humaneval")
    remote = evaluate_on_ray("llm/CoderTester-v0", {None: "reference"}, episodes=4, concurrency=2,
                             env_kwargs={"task": "humaneval"}, out_dir=tmp_path / "ray", progress=False, plot=False,
                             workers=2, cpus_per_worker=0.5, chunk_size=2)
    assert remote["success"] == local["success"] and remote["success"]["value"] == 1.0
    assert _outcomes(tmp_path / "ray") == _outcomes(tmp_path / "local")


def test_a_worker_lost_mid_episode_costs_only_its_chunk_which_is_played_again(local_ray, tmp_path):
    from llm_envs.distributed.evaluation import evaluate_on_ray

    crash = AgentSpec("py", "tests.distributed.crash_agent:CrashOnceAgent",
                      options=(("crash_seed", 6), ("marker", str(tmp_path / "crashed"))))
    summary = evaluate_on_ray("llm/Signalling-v0", {None: crash}, episodes=9, out_dir=tmp_path / "ray",
                              progress=False, plot=False, workers=2, cpus_per_worker=0.5, chunk_size=2, concurrency=2)
    assert (tmp_path / "crashed").exists(), "the agent did crash its worker"
    local = _local("llm/Signalling-v0", "reference", tmp_path / "local", 9)
    assert summary["success"] == local["success"] and summary["episodes"] == 9
    assert sorted(_outcomes(tmp_path / "ray")) == list(range(9))
    assert [o["records"] for _, o in sorted(_outcomes(tmp_path / "ray").items())] == \
        [o["records"] for _, o in sorted(_outcomes(tmp_path / "local").items())]

    # without a retry the run stops, keeps what finished, and says how to go on
    (tmp_path / "crashed").unlink()
    with pytest.raises(RunnerError, match="--resume plays the rest"):
        evaluate_on_ray("llm/Signalling-v0", {None: crash}, episodes=9, out_dir=tmp_path / "stop", progress=False,
                        plot=False, workers=1, cpus_per_worker=0.5, chunk_size=2, concurrency=2, max_chunk_retries=0)
    finished = load_episodes(tmp_path / "stop" / "episodes.jsonl")
    assert 6 not in {e.index for e in finished} and {0, 1, 2, 3, 4, 5} <= {e.index for e in finished}


def test_an_environment_with_shared_cross_episode_state_is_refused(local_ray, tmp_path):
    from llm_envs.distributed.evaluation import evaluate_on_ray

    with pytest.raises(RunnerError, match="without --ray"):
        evaluate_on_ray("llm/ProposerSolverJudge-v0", {None: parse_agent_spec("reference")}, episodes=2,
                        out_dir=tmp_path / "psj", progress=False, plot=False, workers=1, cpus_per_worker=0.5)
