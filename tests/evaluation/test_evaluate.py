"""The evaluation API: summary numbers from real runs, failed calls, and a missing matplotlib."""

from __future__ import annotations

import io
import json
import sys

import pytest

from llm_envs.agents import ActRequest, Agent, AgentOutput, ReferenceAgent
from llm_envs.cli import main
from llm_envs.evaluation import evaluate, format_summary, summarize
from llm_envs.runner import run_episodes
from tests.runner.toy_envs import SumsEnv


class FlakyModel(Agent):
    """Answers right with token usage, except every third call fails like a dead server."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def act_batch(self, requests: list[ActRequest]) -> list[AgentOutput]:
        outputs = []
        for request in requests:
            self.calls += 1
            if self.calls % 3 == 0:
                outputs.append(AgentOutput(text="", error="HTTP 503: overloaded"))
            else:
                answer = request.env.reference_action(request.agent)
                outputs.append(AgentOutput(text=answer, prompt_tokens=10, completion_tokens=2))
        return outputs


def test_summary_counts_call_errors_format_errors_and_tokens():
    results = run_episodes(SumsEnv, {"alice": FlakyModel(), "bob": ReferenceAgent()}, 9, concurrency=3)
    summary = summarize(results)
    alice_steps = [s for r in results for s in r.steps if s["agent"] == "alice"]
    failed = sum(1 for s in alice_steps if s["error"])
    assert failed == len(alice_steps) // 3 and failed > 0
    assert summary["call_error_rate"]["alice"]["errors"] == failed
    assert summary["call_error_rate"]["alice"]["value"] == pytest.approx(failed / len(alice_steps))
    # A failed call is an empty action: a format error for that step.
    assert summary["format_error_rate"]["alice"]["errors"] == failed
    assert summary["format_error_rate"]["bob"]["value"] == 0.0
    ok = len(alice_steps) - failed
    assert summary["tokens_per_episode"]["total"]["value"] == pytest.approx(12 * ok / 9)
    assert summary["tokens_per_episode"]["by_agent"]["bob"]["value"] == 0.0
    assert summary["success"]["value"] == pytest.approx(sum(r.success for r in results) / 9)
    table = format_summary(summary)
    assert f"{failed}/{len(alice_steps)}" in table and "flaky" in table


def test_missing_matplotlib_skips_the_plot_with_an_install_hint(tmp_path, monkeypatch, sums_env_id):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an uninstalled package looks like
    notes: list[str] = []
    summary = evaluate(
        sums_env_id, ReferenceAgent(), episodes=3, out_dir=tmp_path, progress=False, log=notes.append
    )
    assert summary["success"]["value"] == 1.0
    assert not (tmp_path / "plot.png").exists()
    assert any("pip install 'llm-envs[plot]'" in note for note in notes)
    assert json.loads((tmp_path / "summary.json").read_text())["episodes"] == 3


def test_eval_with_a_human_plays_one_episode_at_a_time(capsys, tmp_path, monkeypatch, sums_env_id):
    answers = []
    for seed in (0, 1):
        env = SumsEnv(rounds=1)
        env.reset(seed=seed)
        env.step(env.reference_action("alice"))
        answers.append(env.reference_action("bob"))
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{a}\n\n" for a in answers)))
    status = main(
        [
            "eval",
            sums_env_id,
            "--agent",
            "bob=human",
            "--agent",
            "reference",
            "--episodes",
            "2",
            "--env-arg",
            "rounds=1",
            "--out",
            str(tmp_path),
            "--no-plot",
        ]
    )
    captured = capsys.readouterr()
    assert status == 0 and "one episode at a time" in captured.err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["concurrency"] == 1 and summary["success"]["value"] == 1.0
