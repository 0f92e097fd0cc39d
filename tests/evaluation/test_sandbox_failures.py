"""A sandbox failure in ``llm-envs eval`` is an infrastructure failure, like an agent's: the
episode is never written as finished, the run ends incomplete (exit 3), and ``--resume`` plays
exactly those episodes once the sandbox works."""

from __future__ import annotations

import json

import pytest

import sandboxes
from llm_envs.agents import ReferenceAgent
from llm_envs.cli import main
from llm_envs.episodes import IncompleteRunError, load_episodes
from llm_envs.runner import run_episodes
from llm_envs.verifiers.code import SANDBOX_ATTEMPTS
from tests.envs.sandbox_faults import FailingSandbox


@pytest.fixture
def faulty(monkeypatch):
    """Every environment that asks for the shared sandbox gets a real one behind a switch."""
    sandbox = FailingSandbox(sandboxes.shared_sandbox("auto"))
    monkeypatch.setattr(sandboxes, "shared_sandbox", lambda *args, **kwargs: sandbox)
    return sandbox


def _episodes(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


CODE_ENV_IDS = ["llm/PlanPath-v0", "llm/CoderTester-v0", "llm/ReasonerTool-v0"]


@pytest.mark.parametrize("env_id", CODE_ENV_IDS)
def test_eval_ends_incomplete_with_exit_3_and_resume_completes_it(env_id, faulty, tmp_path, capsys):
    clean, out = tmp_path / "clean", tmp_path / "run"
    common = ["--episodes", "3", "--concurrency", "1", "--no-progress", "--no-plot", "--no-report"]
    assert main(["eval", env_id, "--out", str(clean), *common]) == 0
    capsys.readouterr()

    faulty.fail_next = SANDBOX_ATTEMPTS  # the first program of episode 0 fails, retry included
    status = main(["eval", env_id, "--out", str(out), *common])
    err = capsys.readouterr().err
    assert status == 3, err
    assert "1 of 3 episodes are incomplete" in err and "sandbox" in err and "--resume" in err
    assert sorted(e["index"] for e in _episodes(out / "episodes.jsonl")) == [1, 2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "incomplete" and summary["episodes"] == 2
    assert summary["incomplete"]["indices"] == [0]
    (reason,) = summary["incomplete"]["reasons"]
    assert reason.startswith("sandbox: the sandbox failed")
    assert summary["incomplete"]["failures"][0]["reason"] == "sandbox"

    status = main(["eval", env_id, "--out", str(out), "--resume", *common])
    assert status == 0, capsys.readouterr().err
    resumed = sorted(_episodes(out / "episodes.jsonl"), key=lambda e: e["index"])
    assert [e["index"] for e in resumed] == [0, 1, 2]  # each exactly once
    expected = sorted(_episodes(clean / "episodes.jsonl"), key=lambda e: e["index"])
    for got, want in zip(resumed, expected):
        assert got["rewards"] == want["rewards"] and got["metrics"] == want["metrics"]
        assert [r["reward"] for r in got["records"]] == [r["reward"] for r in want["records"]]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["incomplete"] is None


def test_a_sandbox_that_stays_down_stops_the_run_from_starting_episodes(faulty, tmp_path):
    faulty.down = True
    path = tmp_path / "episodes.jsonl"
    with pytest.raises(IncompleteRunError) as caught:
        run_episodes(
            "llm/PlanPath-v0", ReferenceAgent(), 10, concurrency=1, out_path=path, max_consecutive_failures=3
        )
    error = caught.value
    assert [f.reason for f in error.failures] == ["sandbox"] * 3 + ["not_started"] * 7
    assert error.results == [] and load_episodes(path) == []
    assert "3 episodes in a row stopped by sandbox failures" in error.stop_reason
    assert all(f.agent is None and f.decisions == 0 for f in error.failures[:3])
    # Format errors count only what the model wrote: nothing was scored for the failed steps.
    faulty.down = False
    results = run_episodes("llm/PlanPath-v0", ReferenceAgent(), 10, concurrency=4, out_path=path, resume=True)
    assert [r.index for r in results] == list(range(10))
    assert all(rec["format_ok"] for r in results for rec in r.records)
