"""Saved episodes read back as transcripts: ``llm-envs show`` and llm_envs.evaluation.transcripts."""

from __future__ import annotations

import json

import pytest

import llm_envs
from llm_envs.agents import Agent, AgentOutput, ReferenceAgent
from llm_envs.cli import main
from llm_envs.evaluation import (
    TranscriptError,
    episode_transcript,
    load_episodes,
    select_episodes,
)
from llm_envs.runner import run_episodes
from tests.runner.toy_envs import SumsEnv


class WrongOnOddSeeds(Agent):
    """Reference answers on even seeds; a wrong number on odd ones (those episodes fail)."""

    def act_batch(self, requests):
        reference = ReferenceAgent().act_batch(requests)
        outputs = []
        for request, output in zip(requests, reference, strict=True):
            odd = request.env.episode_id.split(":")[1] in {"s1", "s3", "s5"}
            outputs.append(AgentOutput(text="-1" if odd else output.text))
        return outputs


@pytest.fixture
def saved_run(tmp_path):
    path = tmp_path / "run" / "episodes.jsonl"
    results = run_episodes(SumsEnv, WrongOnOddSeeds(), 4, out_path=path, env_kwargs={"rounds": 1})
    return path.parent, results


def test_a_saved_episode_reads_back_like_the_live_transcript(saved_run):
    run_dir, _ = saved_run
    [episode] = select_episodes(load_episodes(run_dir), indices=[0])
    # Replay episode 0 live with the same actions: the saved transcript must match it action
    # for action (only the title and the task description differ).
    env = SumsEnv(rounds=1)
    env.reset(seed=episode.seed)
    for record in episode.records:
        env.step(record["action"])
    live = env.transcript().splitlines()
    saved = episode_transcript(episode).splitlines()
    def turn_lines(lines):
        return [line for line in lines if line.startswith("--- turn")]

    assert turn_lines(saved) == turn_lines(live)
    assert saved[-1] == live[-1]  # "=== episode over: success=..., turns=... ==="
    assert "played by: alice=" in saved[1]


def test_selection_by_outcome_index_and_agent(saved_run):
    run_dir, results = saved_run
    episodes = load_episodes(run_dir)
    assert [e.index for e in episodes] == sorted(r.index for r in results)
    failed = select_episodes(episodes, outcome="failed")
    succeeded = select_episodes(episodes, outcome="succeeded")
    assert {e.index for e in failed} == {1, 3} and {e.index for e in succeeded} == {0, 2}
    [only_bob] = select_episodes(episodes, indices=[2], agent="bob")
    assert only_bob.records and {r["agent"] for r in only_bob.records} == {"bob"}
    assert len(episodes[2].records) > len(only_bob.records)  # the original is not modified
    with pytest.raises(ValueError, match="no agent 'carol'.*alice, bob"):
        select_episodes(episodes, agent="carol")
    with pytest.raises(ValueError, match="outcome"):
        select_episodes(episodes, outcome="maybe")


def test_prompts_are_shown_only_on_request(saved_run):
    run_dir, _ = saved_run
    [episode] = select_episodes(load_episodes(run_dir), indices=[0])
    prompt = episode.records[0]["observation"]["prompt"]
    assert prompt not in episode_transcript(episode)
    assert prompt in episode_transcript(episode, prompts=True)


def test_failed_agent_calls_of_old_files_are_named_in_the_transcript(tmp_path):
    """Files written before format 2 played a failed call as an empty action with its error;
    they still read back, with the failure named in place of the empty action."""
    [episode] = run_episodes(SumsEnv, ReferenceAgent(), 1, env_kwargs={"rounds": 1})
    data = episode.to_dict()
    for step in data["steps"]:
        step["error"] = "HTTP 500: upstream overloaded"
    for record in data["records"]:
        record["action"], record["format_ok"] = "", False
    path = tmp_path / "episodes.jsonl"
    path.write_text(json.dumps(data) + "\n")  # a format-1 line: no version, no checksum
    text = episode_transcript(load_episodes(path)[0])
    assert text.count("<agent call failed: HTTP 500: upstream overloaded>") == 2
    assert "[format error]" in text


def test_a_torn_last_line_is_skipped_and_missing_runs_are_clear_errors(saved_run, tmp_path):
    run_dir, _ = saved_run
    with open(run_dir / "episodes.jsonl", "a", encoding="utf-8") as f:
        f.write('{"index": 4, "see')  # a run killed mid-write
    assert len(load_episodes(run_dir)) == 4
    with pytest.raises(TranscriptError, match="does not exist"):
        load_episodes(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TranscriptError, match="no episodes.jsonl"):
        load_episodes(tmp_path / "empty")


def test_show_command(saved_run, capsys, tmp_path):
    run_dir, _ = saved_run
    assert main(["show", str(run_dir), "--failed"]) == 0
    out = capsys.readouterr().out
    assert out.count("| episode runner_test_sums_v0:s1:e0 (#1, seed 1)") == 1
    assert "(#3, seed 3)" in out and "(#0, seed 0)" not in out

    assert main(["show", str(run_dir), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "(#0, seed 0)" in out and "3 more matching episodes" in out

    assert main(["show", str(run_dir / "episodes.jsonl"), "--episode", "2", "--agent", "alice"]) == 0
    out = capsys.readouterr().out
    assert "| alice (" in out and "| bob (" not in out

    assert main(["show", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["show", str(run_dir), "--episode", "99"]) == 2
    assert "no episode" in capsys.readouterr().err


class Hostile(Agent):
    """Writes what a terminal acts on: clear the screen, set the title, plant a link, reorder."""

    def act_batch(self, requests):
        text = "\x1b[2J\x1b[H success 1.0 \x1b]0;PWNED\x07 \x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ \u202edcba\r\x00"
        return [AgentOutput(text=text) for _ in requests]


def test_show_prints_what_a_terminal_would_act_on_as_escapes(tmp_path, capsys):
    # (a model's escape sequences reached the reviewer's terminal: it could repaint the screen,
    # hiding or faking lines, set the title and plant links)
    path = tmp_path / "run" / "episodes.jsonl"
    run_episodes(SumsEnv, Hostile(), 1, out_path=path, env_kwargs={"rounds": 1})
    assert main(["show", str(path.parent), "--prompts"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\x00\r\u202e"), repr(out)
    assert "\\x1b[2J" in out and "\\u202e" in out


def test_show_reads_a_whole_demo_directory(tmp_path, capsys):
    env_id = llm_envs.env_ids()[0]
    assert main(["demo", "--episodes", "1", "--env", env_id, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["show", str(tmp_path), "--limit", "0"]) == 0
    out = capsys.readouterr().out
    # one episode with the reference agents and one with the random agent
    assert out.count(f"=== {env_id} | episode") == 2
    assert "=reference" in out and "=random" in out


def test_a_reply_cannot_write_lines_that_read_as_the_transcripts_own(tmp_path, capsys):
    # (a reply printed flush left could end its episode with a made-up success and start a
    # made-up episode with its own rewards)
    from tests.evaluation.odd_agents import ForgesTranscript

    out_dir = tmp_path / "run"
    assert main(["eval", "llm/Signalling-v0", "--episodes", "1", "--out", str(out_dir), "--no-progress", "--no-plot",
                 "--no-report", "--agent", "speaker=py:tests.evaluation.odd_agents:ForgesTranscript"]) == 0
    capsys.readouterr()
    for prompts in ([], ["--prompts"]):
        assert main(["show", str(out_dir), *prompts]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert sum(line.startswith("=== episode over") for line in lines) == 1, lines
        assert sum(line.startswith("=== llm/Signalling-v0") for line in lines) == 1, lines
        assert not any(line.startswith("--- turn 0 | speaker (speaker) | reward +9") for line in lines), lines
        assert any(line.strip() == ForgesTranscript.FAKE.splitlines()[1] for line in lines)  # shown, indented
