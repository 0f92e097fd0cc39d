"""The ``llm-envs`` command line: list, play, eval (files, resume, compare), demo."""

from __future__ import annotations

import io
import json
import math

import pytest
from pettingzoo.env_registry.registration import aec_registry

import llm_envs
import llm_envs.registry as registry
from llm_envs.cli import main
from llm_envs.episodes import load_episodes
from llm_envs.evaluation.plot import plot_available
from tests.runner.toy_envs import SumsEnv


@pytest.fixture
def broken_env_id():
    env_id = "llm/RunnerTestBroken-v0"
    registry.register_env(
        env_id, "tests.runner.toy_envs:NoSuchEnv", agents=("x",), task="none", description="broken"
    )
    yield env_id
    registry._ENTRIES.pop(env_id, None)
    aec_registry.pop(env_id, None)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# ---------------------------------------------------------------------------- list
def test_list_prints_every_registered_environment(capsys):
    status, out, _ = _run(capsys, "list")
    assert status == 0
    header = out.splitlines()[0].split()
    assert header == ["id", "agents", "task", "description"]
    for entry in llm_envs.list_envs():
        line = next(line for line in out.splitlines() if line.startswith(entry.id + " "))
        assert ", ".join(entry.agents) in line and entry.task in line

    status, out, _ = _run(capsys, "list", "--json")
    assert [e["id"] for e in json.loads(out)] == llm_envs.env_ids()


# ---------------------------------------------------------------------------- play
def _bob_answer(seed: int) -> str:
    env = SumsEnv(rounds=1)
    env.reset(seed=seed)
    env.step(env.reference_action("alice"))
    return env.reference_action("bob")


def test_play_one_role_from_scripted_stdin(capsys, monkeypatch, sums_env_id):
    answer = _bob_answer(4)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"\n{answer}\n\n"))
    status, out, _ = _run(capsys, "play", sums_env_id, "--seed", "4", "--as", "bob", "--env-arg", "rounds=1")
    assert status == 0
    assert "you play bob; reference plays alice" in out
    assert "Question 1: What is" in out  # bob's prompt was shown
    # the transcript, as it goes; turns counted from 1 as the prompts count them
    assert f"--- turn 2 | bob (bob)\n{answer}\n" in out
    assert "=== episode over ===" in out
    rewards = {
        line.split()[0]: line.split()[1] for line in out.splitlines() if line.startswith(("alice ", "bob "))
    }
    assert rewards == {"alice": "+1.500", "bob": "+1.500"}
    assert "success=1" in out


def test_play_with_a_wrong_answer_and_with_closed_input(capsys, monkeypatch, sums_env_id):
    monkeypatch.setattr("sys.stdin", io.StringIO("not a number\n"))
    status, out, _ = _run(capsys, "play", sums_env_id, "--as", "alice", "--env-arg", "rounds=1")
    assert status == 0 and "[format error]" in out and "success=0" in out

    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    status, out, _ = _run(capsys, "play", sums_env_id, "--as", "alice")
    assert status == 1 and "input closed" in out

    status, _, err = _run(capsys, "play", sums_env_id, "--as", "carol")
    assert status == 2 and "has agents alice, bob" in err


# ---------------------------------------------------------------------------- eval
def test_eval_writes_summary_episodes_and_plot(capsys, tmp_path, sums_env_id):
    out_dir = tmp_path / "run"
    status, out, _ = _run(
        capsys,
        "eval",
        sums_env_id,
        "--agent",
        "alice=random",
        "--agent",
        "reference",
        "--episodes",
        "12",
        "--seed",
        "3",
        "--concurrency",
        "5",
        "--out",
        str(out_dir),
        "--no-progress",
    )
    assert status == 0
    summary = json.loads((out_dir / "summary.json").read_text())
    episodes = load_episodes(out_dir / "episodes.jsonl")
    assert sorted(e.index for e in episodes) == list(range(12))
    assert summary["episodes"] == 12 and summary["seed"] == 3 and summary["concurrency"] == 5
    assert summary["agents"] == {"alice": "random", "bob": "reference"}
    assert summary["agent_specs"] == {"alice": "random", "*": "reference"}
    # The summary is what the transcripts say.
    assert summary["success"]["value"] == pytest.approx(sum(e.success for e in episodes) / 12)
    for agent_id in ("alice", "bob"):
        assert summary["rewards"][agent_id]["value"] == pytest.approx(
            sum(e.rewards[agent_id] for e in episodes) / 12
        )
    assert summary["turns"]["value"] == 4.0
    assert summary["metrics"]["accuracy"]["value"] == pytest.approx(
        sum(e.metrics["accuracy"] for e in episodes) / 12
    )
    low, high = summary["success"]["low"], summary["success"]["high"]
    assert 0.0 <= low <= summary["success"]["value"] <= high <= 1.0
    # The table.
    assert "success rate" in out and "turns / episode" in out and "format-error rate" in out
    assert any(line.startswith("alice") and "random" in line for line in out.splitlines())
    if plot_available():
        assert (out_dir / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_eval_refuses_to_overwrite_then_resumes_and_compares(capsys, tmp_path, sums_env_id):
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    assert (
        _run(
            capsys, "eval", sums_env_id, "--episodes", "6", "--out", str(run_a), "--no-progress", "--no-plot"
        )[0]
        == 0
    )
    status, _, err = _run(
        capsys, "eval", sums_env_id, "--episodes", "6", "--out", str(run_a), "--no-progress"
    )
    assert status == 2 and "already holds a run" in err

    status, _, _ = _run(
        capsys,
        "eval",
        sums_env_id,
        "--episodes",
        "10",
        "--out",
        str(run_a),
        "--resume",
        "--no-progress",
        "--no-plot",
    )
    assert status == 0
    summary = json.loads((run_a / "summary.json").read_text())
    assert (
        summary["episodes"] == 10 and summary["episodes_resumed"] == 6 and summary["episodes_played_now"] == 4
    )
    assert len((run_a / "episodes.jsonl").read_text().splitlines()) == 10

    _run(
        capsys,
        "eval",
        sums_env_id,
        "--agent",
        "random",
        "--episodes",
        "6",
        "--out",
        str(run_b),
        "--no-progress",
        "--no-plot",
    )
    status, out, _ = _run(capsys, "eval", "--compare", str(run_a), str(run_b))
    assert status == 0
    lines = out.splitlines()
    assert str(run_a) in lines[0] and str(run_b) in lines[0] and "B - A" in lines[0]
    success = next(line for line in lines if line.startswith("success rate"))
    assert "1.000 [" in success and "-1.000" in success
    assert any(
        line.startswith("alice: played by") and "reference" in line and "random" in line for line in lines
    )

    status, _, err = _run(capsys, "eval", "--compare", str(run_a), str(tmp_path / "missing"))
    assert status == 2 and "missing does not exist" in err


def test_compare_refuses_unfinished_runs_on_different_splits(capsys, tmp_path):
    # Without summary.json (a run that never ended) the split came from nowhere: None against
    # None, and seeds of different problems were paired.
    runs = {}
    for split in ("train", "test"):
        runs[split] = tmp_path / split
        status, _, _ = _run(capsys, "eval", "llm/PlanPath-v0", "--agent", "random", "--episodes", "2",
                            "--split", split, "--out", str(runs[split]), "--no-progress", "--no-plot", "--no-report")
        assert status == 0
        (runs[split] / "summary.json").unlink()
    status, _, err = _run(capsys, "eval", "--compare", str(runs["train"]), str(runs["test"]))
    assert status == 2 and "different data splits (train and test)" in err


def test_resume_refuses_fewer_episodes_than_the_run_holds(capsys, tmp_path):
    # (it summarised the first 2 of 6 episodes and said nothing of the other 4)
    out = tmp_path / "run"
    argv = ["eval", "llm/Signalling-v0", "--agent", "random", "--out", str(out), "--no-progress", "--no-plot",
            "--no-report"]
    assert _run(capsys, *argv, "--episodes", "6")[0] == 0
    status, _, err = _run(capsys, *argv, "--episodes", "2", "--resume")
    assert status == 2 and "resume with --episodes 6 or more" in err
    assert json.loads((out / "summary.json").read_text())["episodes"] == 6


def test_a_suite_with_no_report_writes_no_page(capsys, tmp_path):
    # (its report.html linked to environment reports that --no-report had not written)
    out = tmp_path / "suite"
    status, _, _ = _run(capsys, "eval", "--envs", "llm/Signalling-v0,llm/PlanPath-v0", "--agent", "random",
                        "--episodes", "1", "--out", str(out), "--no-progress", "--no-plot", "--no-report")
    assert status == 0 and (out / "suite.json").exists()
    assert not list(out.rglob("report.html"))


def test_an_unknown_backend_or_port_is_a_usage_error(capsys):
    # (list printed "sandbox (nope)" for every code environment and exited 0; serve raised
    # OverflowError from the socket)
    status, _, err = _run(capsys, "list", "--isolation", "--backend", "nope")
    assert status == 2 and "unknown sandbox backend 'nope'" in err
    pytest.importorskip("openenv.core", reason="the serve extra (openenv-core) is not installed")
    for port in ("99999", "-1"):
        status, _, err = _run(capsys, "serve", "llm/PlanPath-v0", "--port", port)
        assert status == 2 and "--port must be from 0 to 65535" in err


@pytest.mark.parametrize("command", [
    ["eval", "llm/Signalling-v0", "--agent", "random"],
    ["arena", "llm/TicTacToe-v0", "--agent", "a=random", "--agent", "b=random"],
    ["demo"],
    ["play", "llm/Signalling-v0"],
])
def test_a_negative_seed_is_refused_before_anything_is_played(capsys, tmp_path, monkeypatch, command):
    # (eval made its run directory, played, and failed with "expected non-negative integer",
    # naming no flag)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--seed", "-5"])
    assert exit_.value.code == 2
    assert "argument --seed: expected an integer >= 0, got -5" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_mistyped_flag_gets_the_subcommands_usage_and_a_suggestion(capsys):
    # (the top-level usage, "llm-envs [-h] COMMAND ...", and no hint)
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "llm/PlanPath-v0", "--agnet", "reference"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: llm-envs eval") and "did you mean --agent" in err


def test_resume_refuses_a_run_json_that_holds_no_object(capsys, tmp_path):
    out = tmp_path / "run"
    argv = ["eval", "llm/Signalling-v0", "--agent", "random", "--episodes", "2", "--out", str(out),
            "--no-progress", "--no-plot", "--no-report"]
    assert _run(capsys, *argv)[0] == 0
    (out / "run.json").write_text("[]")
    status, _, err = _run(capsys, *argv, "--resume")
    assert status == 2 and "holds no JSON object" in err


def test_eval_with_an_openai_compatible_server(capsys, tmp_path, sums_env_id, chat_server):
    out_dir = tmp_path / "http"
    status, out, _ = _run(
        capsys,
        "eval",
        sums_env_id,
        "--agent",
        f"openai:{chat_server.base_url}@tiny-model",
        "--episodes",
        "5",
        "--out",
        str(out_dir),
        "--temperature",
        "0",
        "--max-tokens",
        "8",
        "--no-progress",
        "--no-plot",
    )
    assert status == 0
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["success"]["value"] == 1.0
    assert summary["tokens_per_episode"]["completion"]["value"] == 4.0  # 1 token per answer
    assert summary["tokens_per_episode"]["prompt"]["value"] > 0
    assert summary["call_error_rate"]["alice"]["errors"] == 0
    assert len(chat_server.requests) == 20
    assert all(body["temperature"] == 0 and body["max_tokens"] == 8 for body in chat_server.requests)
    assert "tokens / episode" in out and "(prompt" in out


def test_eval_usage_errors(capsys, sums_env_id):
    assert "environment id" in _run(capsys, "eval")[2]
    status, _, err = _run(capsys, "eval", "llm/NoSuchEnv-v0")
    assert status == 2 and "unknown environment" in err
    status, _, err = _run(capsys, "eval", sums_env_id, "--split", "test")
    assert status == 2 and "no data splits" in err
    status, _, err = _run(capsys, "eval", sums_env_id, "--env-arg", "roundz=2")
    assert status == 2 and "roundz" in err
    status, _, err = _run(capsys, "eval", sums_env_id, "--agent", "carol=reference")
    assert status == 2 and "its agents are: alice, bob" in err


# ---------------------------------------------------------------------------- demo
def test_demo_plays_reference_and_random_and_skips_broken_envs(capsys, tmp_path, sums_env_id, broken_env_id):
    out_dir = tmp_path / "demo"
    status, out, _ = _run(
        capsys, "demo", "--env", sums_env_id, "--env", broken_env_id, "--episodes", "3", "--out", str(out_dir)
    )
    assert status == 0
    table = out[out.index("environment") :]
    reference = next(line for line in table.splitlines() if sums_env_id in line and " reference " in line)
    random_row = next(line for line in table.splitlines() if sums_env_id in line and " random " in line)
    assert "1.00 [" in reference and "alice=+3.00 bob=+3.00" in reference
    assert "[" in random_row
    broken = next(line for line in table.splitlines() if broken_env_id in line)
    assert "skipped: does not construct" in broken
    rows = json.loads((out_dir / "summary.json").read_text())["rows"]
    assert [(r["env_id"], r["agent"]) for r in rows] == [
        (sums_env_id, "reference"),
        (sums_env_id, "random"),
        (broken_env_id, "-"),
    ]
    assert not math.isnan(rows[1]["success"]["value"])
    assert len(load_episodes(out_dir / "RunnerTestSums-v0" / "random" / "episodes.jsonl")) == 3


def test_eval_decodes_greedily_by_default(capsys, tmp_path, sums_env_id, chat_server):
    """No --temperature: every model agent decodes greedily (openai agents send temperature 0;
    hf/vllm agents get temperature 0 as their default), and run.json says so."""
    from llm_envs.agents.spec import parse_assignments, resolve_specs
    from llm_envs.cli import build_parser
    from llm_envs.cli._common import model_defaults

    out_dir = tmp_path / "greedy"
    status, _, err = _run(capsys, "eval", sums_env_id, "--agent", f"openai:{chat_server.base_url}@tiny-model",
                          "--episodes", "2", "--out", str(out_dir), "--no-progress", "--no-plot", "--no-report")
    assert status == 0, err
    assert chat_server.requests and all(body["temperature"] == 0 for body in chat_server.requests)
    run = json.loads((out_dir / "run.json").read_text())
    assert run["settings"]["agents"]["alice"]["sampling"]["temperature"] == 0.0
    args = build_parser().parse_args(["eval", sums_env_id])
    [spec] = resolve_specs(parse_assignments(["hf:/models/x"]), ["alice"], model_defaults=model_defaults(args)).values()
    assert spec.option_dict["temperature"] == 0.0
    sampled = build_parser().parse_args(["eval", sums_env_id, "--temperature", "1"])
    [spec] = resolve_specs(parse_assignments(["hf:/models/x"]), ["alice"], model_defaults=model_defaults(sampled)).values()
    assert spec.option_dict["temperature"] == 1.0


def test_eval_over_several_environments_one_table_one_report_resumable_as_a_whole(capsys, tmp_path, sums_env_id):
    out = tmp_path / "suite"
    envs = f"{sums_env_id},llm/Signalling-v0"
    common = ["--episodes", "2", "--out", str(out), "--no-progress", "--no-plot", "--agent", "random:3",
              "--agent", "alice=reference"]
    status, table_text, err = _run(capsys, "eval", "--envs", envs, *common)
    assert status == 0, err
    lines = table_text.splitlines()
    assert any(sums_env_id in line and "complete" in line for line in lines)
    assert any("llm/Signalling-v0" in line and "complete" in line for line in lines)
    suite = json.loads((out / "suite.json").read_text())
    assert [r["env_id"] for r in suite["rows"]] == [sums_env_id, "llm/Signalling-v0"]
    assert all(r["status"] == "complete" and r["episodes"] == 2 for r in suite["rows"])
    assert suite["agents"] == {"*": "random:3", "alice": "reference"}
    page = (out / "report.html").read_text()
    assert 'href="RunnerTestSums-v0/report.html"' in page and 'href="Signalling-v0/report.html"' in page
    sums = load_episodes(out / "RunnerTestSums-v0" / "episodes.jsonl")
    assert all(r["action"] for e in sums for r in e.records if r["agent"] == "alice")  # alice=reference there
    assert len(load_episodes(out / "Signalling-v0" / "episodes.jsonl")) == 2

    # As a whole: one environment lost (the suite was stopped before it), one finished; --resume
    # with more episodes plays only what each lacks.
    finished = (out / "RunnerTestSums-v0" / "episodes.jsonl").read_text()
    import shutil

    shutil.rmtree(out / "Signalling-v0")
    status, _, err = _run(capsys, "eval", "--envs", envs, *common[:1], "3", *common[2:], "--resume")
    assert status == 0, err
    assert (out / "RunnerTestSums-v0" / "episodes.jsonl").read_text().startswith(finished)
    assert len(load_episodes(out / "RunnerTestSums-v0" / "episodes.jsonl")) == 3
    assert len(load_episodes(out / "Signalling-v0" / "episodes.jsonl")) == 3


def test_eval_suites_and_their_errors(capsys):
    from llm_envs.evaluation.suite import suites

    registered = set(llm_envs.env_ids())
    for name, env_ids in suites().items():
        assert env_ids and set(env_ids) <= registered, name
    status, _, err = _run(capsys, "eval", "--suite", "nope")
    assert status == 2 and "no suite 'nope'; suites: seed" in err
    status, _, err = _run(capsys, "eval", "--envs", "llm/Signalling-v0,llm/KuhnPoker-v0", "--agent", "alice=random")
    assert status == 2 and "no environment of this run has agent(s) ['alice']" in err
    status, _, err = _run(capsys, "eval", "--envs", "llm/Signalling-v0,llm/KuhnPoker-v0", "--env-arg", "rounds=2")
    assert status == 2 and "--env-arg is an option of one environment" in err


def test_play_shows_the_partners_move_once_and_counts_turns_as_the_prompt(capsys, monkeypatch):
    """Plan-Path as the plan agent: the reference tool's program is in the plan's prompt, so it is
    not printed a second time before it; the transcript's turn numbers are the prompt's."""
    monkeypatch.setattr("sys.stdin", io.StringIO("#### D\nEOF\n" * 4))
    status, out, _ = _run(capsys, "play", "llm/PlanPath-v0", "--as", "plan")
    assert status == 0
    first_prompt = out.index("Plan-Path | turn 1 of 4")
    program = "Reference tool-agent program for Plan-Path"
    assert out.count(program, 0, first_prompt) == 0 and out.count(program, first_prompt, out.index("Plan-Path | turn 2 of 4")) == 1
    assert "--- turn 1 | plan (plan)" in out and "--- turn 0 |" not in out


def test_play_alone_says_there_is_no_partner(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("#### D\nEOF\n" * 4))
    status, out, _ = _run(capsys, "play", "llm/PlanPath-v0", "--env-arg", "agents=single")
    assert status == 0
    assert "you play solver, the only agent of this environment (no partner or opponent" in out


def test_data_this_machine_lacks_and_unknown_task_sources_are_one_line_errors(capsys, tmp_path):
    # (they ended in a traceback of 8-23 frames with exit status 1)
    status = main(["eval", "llm/ReasonerTool-v0", "--env-arg", "task=gsm9k", "--episodes", "1", "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert status == 2 and "unknown task source 'gsm9k'" in err and "Traceback" not in err
    status = main(["prepare", "llm/CoderTester-v0", "--env-arg", "task=mbpp"])  # offline: not on this machine
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: mbpp") and "Traceback" not in err and "--env-arg task_path" in err
