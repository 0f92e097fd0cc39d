"""``llm-envs eval --ray``: episodes played by Ray workers give the files and numbers of a local run."""

from __future__ import annotations

import json

import pytest

from llm_envs.agents.spec import AgentSpec, parse_agent_spec, resolve_agents
from llm_envs.cli import main
from llm_envs.episodes import IncompleteRunError, RunnerError, load_episodes
from llm_envs.evaluation import evaluate

DETERMINISTIC = ("success", "turns", "rewards", "format_error_rate", "call_error_rate", "metrics", "episodes", "agents",
                 "env_id")


def _outcomes(path):
    return {e.index: e.outcome() for e in load_episodes(path / "episodes.jsonl")}


def _summary(path):
    return json.loads((path / "summary.json").read_text())


def _on_ray(env_id, agents, out, episodes, **options):
    from llm_envs.distributed.evaluation import RayEvaluation

    env_kwargs = options.pop("env_kwargs", {})
    concurrency = options.pop("concurrency", 2)
    return evaluate(env_id, agents, episodes=episodes, concurrency=concurrency, env_kwargs=env_kwargs, out_dir=out,
                    progress=False, plot=False, runner=RayEvaluation(cpus_per_worker=0.5, **options))


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
    # the shared flow: the same settings fingerprint as the local run, summary v2, a report
    assert ray_summary["status"] == "complete" and ray_summary["fingerprint"] == local_summary["fingerprint"]
    assert ray_summary["agent_calls"][0]["requests"] == local_summary["agent_calls"][0]["requests"]
    assert "<html" in (tmp_path / "ray" / "report.html").read_text().lower()
    # an interrupted run (the first 4 episodes on disk) resumes and plays only the missing ones
    lines = (tmp_path / "ray" / "episodes.jsonl").read_text().splitlines()
    kept = sorted(lines, key=lambda line: json.loads(line)["index"])[:4]
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "episodes.jsonl").write_text("\n".join(kept) + "\n")
    assert main([*common, "--out", str(tmp_path / "cut"), "--ray", "--ray-workers", "2",
                 "--ray-cpus-per-worker", "0.5", "--resume"]) == 0
    assert _outcomes(tmp_path / "cut") == _outcomes(tmp_path / "local")
    assert _summary(tmp_path / "cut")["episodes_resumed"] == 4

    # so a local run can be extended on Ray (same settings), and a changed setting is refused there too
    assert main([*common, "--out", str(tmp_path / "local"), "--ray", "--ray-workers", "1",
                 "--ray-cpus-per-worker", "0.5", "--resume", "--episodes", "12"]) == 0
    assert _summary(tmp_path / "local")["episodes_played_now"] == 1
    before = (tmp_path / "local" / "episodes.jsonl").read_bytes()
    changed = [*common, "--out", str(tmp_path / "local"), "--ray", "--ray-workers", "1", "--ray-cpus-per-worker",
               "0.5", "--resume", "--episodes", "13", "--env-arg", "rounds=3"]
    assert main(changed) == 2
    assert (tmp_path / "local" / "episodes.jsonl").read_bytes() == before


def test_sandboxed_environment_runs_in_the_workers(local_ray, tmp_path):
    """CoderTester with its reference agents: the code runs in each worker's own sandbox."""
    local = _local("llm/CoderTester-v0", "reference", tmp_path / "local", 4, task="humaneval")
    remote = _on_ray("llm/CoderTester-v0", {None: "reference"}, tmp_path / "ray", 4, env_kwargs={"task": "humaneval"},
                     workers=2, chunk_size=2)
    assert remote["success"] == local["success"] and remote["success"]["value"] == 1.0
    assert _outcomes(tmp_path / "ray") == _outcomes(tmp_path / "local")


def test_a_worker_lost_mid_episode_costs_only_its_chunk_which_is_played_again(local_ray, tmp_path):
    from llm_envs.distributed.evaluation import RayEvaluation

    crash = AgentSpec("py", "tests.distributed.crash_agent:CrashOnceAgent",
                      options=(("crash_seed", 6), ("marker", str(tmp_path / "crashed"))))
    summary = _on_ray("llm/Signalling-v0", {None: crash}, tmp_path / "ray", 9, workers=2, chunk_size=2)
    assert (tmp_path / "crashed").exists(), "the agent did crash its worker"
    local = _local("llm/Signalling-v0", "reference", tmp_path / "local", 9)
    assert summary["success"] == local["success"] and summary["episodes"] == 9
    assert sorted(_outcomes(tmp_path / "ray")) == list(range(9))
    assert [o["records"] for _, o in sorted(_outcomes(tmp_path / "ray").items())] == \
        [o["records"] for _, o in sorted(_outcomes(tmp_path / "local").items())]

    # without a retry the lost chunk is an incomplete run: the rest is played and kept, --resume completes it
    (tmp_path / "crashed").unlink()
    with pytest.raises(IncompleteRunError, match="--resume") as caught:
        _on_ray("llm/Signalling-v0", {None: crash}, tmp_path / "stop", 9, workers=1, chunk_size=2, max_chunk_retries=0)
    assert caught.value.missing == [6, 7] and caught.value.summary["status"] == "incomplete"
    assert {f.reason for f in caught.value.failures} == {"worker_lost"}
    assert sorted(e.index for e in load_episodes(tmp_path / "stop" / "episodes.jsonl")) == [0, 1, 2, 3, 4, 5, 8]
    resumed = evaluate("llm/Signalling-v0", {None: crash}, episodes=9, concurrency=2, out_dir=tmp_path / "stop",
                       resume=True, progress=False, plot=False,
                       runner=RayEvaluation(workers=1, cpus_per_worker=0.5, chunk_size=2))
    assert resumed["status"] == "complete" and resumed["episodes_played_now"] == 2


def test_an_agent_failure_on_a_worker_is_an_incomplete_run_that_resume_completes(local_ray, tmp_path):
    """An AgentError inside a worker: the same outcome as locally (exit 3, summary incomplete,
    the finished episodes kept, not the failed one), and --resume plays only the missing one."""
    healed = tmp_path / "healed"
    agents_file = tmp_path / "agents.yaml"
    agents_file.write_text(f"default:\n  spec: py:tests.distributed.crash_agent:FlakyAgent\n  fail_seed: 5\n"
                           f"  healed: {healed}\n")
    command = ["eval", "llm/Signalling-v0", "--agents-file", str(agents_file), "--episodes", "8", "--no-plot",
               "--no-progress", "--concurrency", "2", "--out", str(tmp_path / "ray"), "--ray", "--ray-workers", "2",
               "--ray-cpus-per-worker", "0.5", "--ray-chunk-size", "2"]
    assert main(command) == 3
    summary = _summary(tmp_path / "ray")
    assert summary["status"] == "incomplete" and summary["incomplete"]["indices"] == [5]
    assert summary["incomplete"]["failures"][0]["reason"] == "connection"
    assert summary["infrastructure"]["failed_calls"] >= 1 and summary["episodes"] == 7
    assert sorted(_outcomes(tmp_path / "ray")) == [0, 1, 2, 3, 4, 6, 7]
    assert (tmp_path / "ray" / "report.html").exists()

    healed.touch()  # the server is back
    assert main([*command, "--resume"]) == 0
    summary = _summary(tmp_path / "ray")
    assert summary["status"] == "complete" and summary["episodes_played_now"] == 1
    _local("llm/Signalling-v0", "reference", tmp_path / "local", 8)
    assert _outcomes(tmp_path / "ray") == _outcomes(tmp_path / "local")
    assert [c["status"] for c in json.loads((tmp_path / "ray" / "run.json").read_text())["commands"]] == \
        ["incomplete", "complete"]


def test_an_environment_with_shared_cross_episode_state_is_refused(local_ray, tmp_path):
    with pytest.raises(RunnerError, match="without --ray"):
        _on_ray("llm/ProposerSolverJudge-v0", {None: parse_agent_spec("reference")}, tmp_path / "psj", 2, workers=1)
    assert not (tmp_path / "psj").exists(), "refused before anything is written"
