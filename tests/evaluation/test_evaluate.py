"""The evaluation API: summary numbers from real runs, failed calls, and a missing matplotlib."""

from __future__ import annotations

import io
import json
import sys

import pytest

from llm_envs.agents import ActRequest, Agent, AgentOutput, ReferenceAgent
from llm_envs.cli import main
from llm_envs.episodes import IncompleteRunError, load_episodes
from llm_envs.evaluation import evaluate, format_summary, summarize
from llm_envs.runner import run_episodes
from tests.runner.toy_envs import SumsEnv


class FlakyModel(Agent):
    """Answers right with token usage, except every third call fails like an overloaded server
    (while ``broken``): an error output, as the hf and vllm agents return for engine errors."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0
        self.broken = True

    def act_batch(self, requests: list[ActRequest]) -> list[AgentOutput]:
        outputs = []
        for request in requests:
            self.calls += 1
            if self.broken and self.calls % 3 == 0:
                outputs.append(AgentOutput(text="", error="HTTP 503: overloaded"))
            else:
                answer = request.env.reference_action(request.agent)
                outputs.append(AgentOutput(text=answer, prompt_tokens=10, completion_tokens=2))
        return outputs


def test_failed_calls_leave_episodes_incomplete_and_are_never_format_errors(tmp_path):
    """A failed call is an infrastructure failure: its episode is not written, not scored, and
    its empty 'action' never reaches the environment (no format error); resuming with the
    server back completes the run with every episode exactly once."""
    flaky = FlakyModel()
    with pytest.raises(IncompleteRunError) as info:
        _evaluate_sums(tmp_path, {"alice": flaky, "bob": ReferenceAgent()})
    error = info.value
    summary = error.summary
    finished = load_episodes(tmp_path / "episodes.jsonl")
    assert summary["status"] == "incomplete" and summary["episodes"] == len(finished) < 9
    assert summary["episodes_requested"] == 9
    assert summary["incomplete"]["episodes"] == 9 - len(finished) == len(error.failures)
    assert sorted(summary["incomplete"]["indices"] + [e.index for e in finished]) == list(range(9))
    assert all("HTTP 503: overloaded" in reason for reason in summary["incomplete"]["reasons"])
    assert summary["format_error_rate"]["alice"]["errors"] == 0  # reference answers, never a failure
    assert summary["success"]["value"] == 1.0
    assert summary["infrastructure"]["failed_calls"] == len(error.failures) > 0
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "incomplete"
    assert "INCOMPLETE: " in format_summary(summary)
    # The page people share says so first, with the failed calls (it showed the numbers alone).
    from llm_envs.report import build_report

    page = build_report([tmp_path])
    banner = f"INCOMPLETE RUN: {9 - len(finished)} of the 9 episodes asked for did not finish"
    assert banner in page and page.index(banner) < page.index("success rate")
    assert f"{summary['infrastructure']['failed_calls']} of {summary['infrastructure']['calls']}" in page

    flaky.broken = False  # the server is back
    healthy = _evaluate_sums(tmp_path, {"alice": flaky, "bob": ReferenceAgent()}, resume=True)
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["index"] for line in lines) == list(range(9))
    assert healthy["status"] == "complete" and healthy["incomplete"] is None
    assert healthy["infrastructure"]["failed_calls"] == 0
    assert healthy["episodes_resumed"] == len(finished)
    assert [c["status"] for c in healthy["commands"]] == ["incomplete", "complete"]
    assert "INCOMPLETE RUN" not in build_report([tmp_path])


def _evaluate_sums(out_dir, agents, **kwargs):
    from tests.runner.toy_envs import register_sums_env

    registration = register_sums_env()
    env_id = next(registration)
    try:
        return evaluate(
            env_id,
            agents,
            episodes=9,
            concurrency=3,
            out_dir=out_dir,
            progress=False,
            plot=False,
            max_consecutive_failures=None,
            **kwargs,
        )
    finally:
        registration.close()


def test_summary_counts_format_errors_and_tokens_of_what_the_model_wrote():
    class Sloppy(FlakyModel):
        def act_batch(self, requests):
            outputs = []
            for request in requests:
                self.calls += 1
                text = "no idea" if self.calls % 3 == 0 else request.env.reference_action(request.agent)
                outputs.append(AgentOutput(text=text, prompt_tokens=10, completion_tokens=2))
            return outputs

    results = run_episodes(SumsEnv, {"alice": Sloppy(), "bob": ReferenceAgent()}, 9, concurrency=3)
    summary = summarize(results)
    alice_records = [r for e in results for r in e.records if r["agent"] == "alice"]
    bad = sum(1 for r in alice_records if not r["format_ok"])
    assert bad == len(alice_records) // 3 and bad > 0
    assert summary["format_error_rate"]["alice"]["errors"] == bad
    assert summary["format_error_rate"]["alice"]["method"] == "wilson-clustered"
    assert summary["format_error_rate"]["alice"]["n"] == len(alice_records)
    assert summary["format_error_rate"]["bob"]["value"] == 0.0
    assert summary["call_error_rate"]["alice"]["errors"] == 0
    assert summary["tokens_per_episode"]["total"]["value"] == pytest.approx(12 * len(alice_records) / 9)
    assert summary["tokens_per_episode"]["by_agent"]["bob"]["value"] == 0.0
    assert summary["success"]["value"] == pytest.approx(sum(r.success for r in results) / 9)
    assert (
        summary["success"]["method"] == "wilson"
        and summary["metrics"]["accuracy"]["method"] == "wilson-bounded"
    )
    for data in [summary["success"], summary["metrics"]["accuracy"], summary["turns"]]:
        assert data["low"] >= 0.0
    table = format_summary(summary)
    assert f"{bad}/{len(alice_records)}" in table and "flaky" in table


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


def test_closed_input_stops_an_eval_with_a_human_at_once(capsys, tmp_path, monkeypatch, sums_env_id):
    """End of input is the person leaving, not an infrastructure failure to retry on the next
    episode: the run stops (finished episodes kept)."""
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    status = main(
        [
            "eval",
            sums_env_id,
            "--agent",
            "bob=human",
            "--agent",
            "reference",
            "--episodes",
            "3",
            "--out",
            str(tmp_path),
            "--no-plot",
        ]
    )
    assert status == 1 and "the input ended" in capsys.readouterr().err
    assert load_episodes(tmp_path / "episodes.jsonl") == []


class SurrogateModel(Agent):
    """Answers right, with a lone surrogate in its text (what a model API sends as the invalid
    escape "\\ud800"): text UTF-8 cannot encode as it is."""

    name = "surrogates"

    def act_batch(self, requests: list[ActRequest]) -> list[AgentOutput]:
        return [AgentOutput(text="\ud800 " + r.env.reference_action(r.agent) + " \udfff") for r in requests]


def test_text_utf8_cannot_encode_is_kept_in_every_file_of_a_run(tmp_path, sums_env_id, capsys):
    from llm_envs.agents.cache import cache_key
    from llm_envs.report import write_report

    summary = evaluate(sums_env_id, SurrogateModel(), episodes=3, out_dir=tmp_path, progress=False, plot=False)
    assert summary["episodes"] == 3
    episodes = load_episodes(tmp_path / "episodes.jsonl")
    texts = [record["action"] for episode in episodes for record in episode.records]
    assert texts and all(text.startswith("\ud800 ") and text.endswith(" \udfff") for text in texts)
    for name in ("episodes.jsonl", "summary.json", "run.json"):
        (tmp_path / name).read_bytes().decode("utf-8")  # strict UTF-8 throughout
    write_report([tmp_path], tmp_path / "report.html").read_bytes().decode("utf-8")
    capsys.readouterr()
    assert main(["show", str(tmp_path), "--limit", "1"]) == 0
    assert "\\ud800 " in capsys.readouterr().out  # printed as its escape
    # A request holding such text has a cache key of its own, as any other request.
    keys = {cache_key("http://x", {"messages": [{"content": t}]}, 0, 0, "a") for t in ("\ud800", "\udfff", "?")}
    assert len(keys) == 3


def test_a_seat_that_never_acted_has_no_format_error_rate():
    """TicTacToe with a model that writes no move: player_0's invalid move ends each game, and
    player_1, which never moved, gets a passive record carrying its win. That record is no
    action: player_1's format-error rate is n/a over 0 actions (it read 0 of 5), player_0's
    5 of 5."""

    class NoMove(Agent):
        name = "no-move"

        def act_batch(self, requests):
            return [AgentOutput(text="blah blah") for _ in requests]

    results = run_episodes("llm/TicTacToe-v0", NoMove(), 5)
    assert all(r["info"].get("passive") for e in results for r in e.records if r["agent"] == "player_1")
    summary = summarize(results)
    assert (summary["format_error_rate"]["player_0"]["errors"], summary["format_error_rate"]["player_0"]["n"]) == (5, 5)
    player_1 = summary["format_error_rate"]["player_1"]
    assert player_1["n"] == 0 and player_1["errors"] == 0
    assert player_1["value"] != player_1["value"]  # NaN: no share of no actions
