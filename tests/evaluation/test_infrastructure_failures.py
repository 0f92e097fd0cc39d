"""Infrastructure failures are not model results: ``llm-envs eval`` against a loopback
OpenAI-compatible server that fails in each way a real one does.

For every failure (the server dies and refuses connections, drops replies mid-body, takes too
long, answers 500, answers 429 with Retry-After), a run must end with a non-zero exit and a
clear message, write no incomplete episode as finished, and ``--resume`` with the server healthy
again must complete the run with every episode exactly once and no failed call. A wrong model
name (HTTP 400 on the first calls) must stop the run at once with the server's message.
"""

from __future__ import annotations

import json

import pytest

from llm_envs.cli import EXIT_INCOMPLETE, EXIT_USAGE, main
from llm_envs.episodes import load_episodes
from tests.agents.chat_server import ChatServer

EPISODES = 8
STEPS = 4  # SumsEnv: 2 rounds x 2 agents
HEALTHY_REQUESTS = 18  # then the failure starts: some episodes finish, some cannot


def _agents_file(tmp_path, base_url, model="test-model"):
    path = tmp_path / f"agents-{model}.yaml"
    path.write_text(
        "default:\n"
        f"  spec: openai:{base_url}@{model}\n"
        "  max_retries: 1\n"
        "  backoff_initial_s: 0.01\n"
        "  timeout_s: 1.0\n"
        "  max_concurrency: 4\n"
    )
    return path


def _eval(capsys, env_id, out, agents_file, *extra):
    status = main(
        [
            "eval",
            env_id,
            "--agents-file",
            str(agents_file),
            "--episodes",
            str(EPISODES),
            "--concurrency",
            "4",
            "--max-consecutive-failures",
            "3",
            "--temperature",
            "0",
            "--out",
            str(out),
            "--no-progress",
            "--no-plot",
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _finished_episodes_are_whole(out):
    """Every episode on disk was played to its end by real answers (the server answers like a
    perfect model, so any failure played as an empty action would show as a failed episode)."""
    episodes = load_episodes(out / "episodes.jsonl")  # strict: a duplicate would raise
    for episode in episodes:
        assert episode.success == 1.0 and len(episode.steps) == STEPS
        assert all(step["error"] is None and step["completion_tokens"] == 1 for step in episode.steps)
    return episodes


@pytest.mark.parametrize(
    "failure,words",
    [
        # A connection made while the dying server closes its socket may hang until the timeout.
        ("down", ("connection error", "timed out after 1s")),
        ("reset", ("connection error",)),
        ("sleep:3", ("timed out after 1s",)),
        ("500", ("HTTP 500: server says 500",)),
        ("429:0.05", ("HTTP 429: rate limited",)),
    ],
)
def test_a_failing_server_leaves_the_run_incomplete_and_resume_completes_it(
    capsys, tmp_path, sums_env_id, failure, words
):
    out = tmp_path / "run"
    with ChatServer(model="test-model") as server:
        server.plan = lambda number, body: "ok" if number < HEALTHY_REQUESTS else failure
        agents_file = _agents_file(tmp_path, server.base_url)
        status, _, err = _eval(capsys, sums_env_id, out, agents_file)
        port = server.port
    assert status == EXIT_INCOMPLETE
    assert "episodes are incomplete" in err and any(w in err for w in words) and "--resume" in err
    finished = _finished_episodes_are_whole(out)
    assert 1 <= len(finished) < EPISODES
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "incomplete" and summary["episodes"] == len(finished)
    assert summary["incomplete"]["episodes"] == EPISODES - len(finished)
    assert summary["format_error_rate"]["alice"]["errors"] == 0  # failures never count as format errors

    with ChatServer(model="test-model", port=port) as server:  # the server is back, same address
        status, table, err = _eval(capsys, sums_env_id, out, agents_file, "--resume")
        requests = len(server.requests)
    assert status == 0, err
    episodes = _finished_episodes_are_whole(out)
    assert sorted(e.index for e in episodes) == list(range(EPISODES))
    assert len((out / "episodes.jsonl").read_text().splitlines()) == EPISODES
    assert requests == STEPS * (EPISODES - len(finished))  # only the missing episodes were played
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["success"]["value"] == 1.0
    assert summary["infrastructure"]["failed_calls"] == 0  # this invocation's
    assert [c["status"] for c in summary["commands"]] == ["incomplete", "complete"]
    assert "INCOMPLETE" not in table
    # The run's failed calls, summed over both invocations (the table showed none, the report
    # "0 of" this invocation's calls).
    failed = summary["commands"][0]["failed_calls"]
    calls = sum(c["calls"] for c in summary["commands"])
    assert failed > 0 and f"failed calls (never played)  {failed} of {calls}" in table
    from llm_envs.report.evaluation import summary_tables

    assert f"failed model calls (infrastructure)</td><td class=\"num\">{failed} of {calls}" in summary_tables(summary)


def test_a_wrong_model_name_stops_the_run_at_once_with_the_servers_message(capsys, tmp_path, sums_env_id):
    out = tmp_path / "run"
    with ChatServer(model="test-model") as server:
        wrong = _agents_file(tmp_path, server.base_url, model="tset-model")
        status, _, err = _eval(capsys, sums_env_id, out, wrong)
        sent = len(server.requests)
        assert status == EXIT_USAGE
        assert "The model `tset-model` does not exist" in err and "model name" in err
        assert sent <= 4  # the requests already in flight, nothing after the first answer
        assert load_episodes(out / "episodes.jsonl") == []
        assert json.loads((out / "summary.json").read_text())["incomplete"]["configuration_error"]

        # Fixed: nothing was played under the wrong name, so resuming with the right one is fine.
        right = _agents_file(tmp_path, server.base_url)
        status, _, err = _eval(capsys, sums_env_id, out, right, "--resume")
    assert status == 0, err
    assert sorted(e.index for e in _finished_episodes_are_whole(out)) == list(range(EPISODES))


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_url_without_a_model_is_a_user_error_and_nothing_is_sent(capsys, tmp_path, sums_env_id, monkeypatch):
    """``openai:URL`` (``@MODEL`` left out) once became a model named after the URL, sent to
    the hosted API, and reported as an infrastructure failure (exit 3)."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "run"
    with ChatServer(model="test-model") as server:
        status = main(["eval", sums_env_id, "--agent", f"openai:{server.base_url}", "--episodes", "2",
                       "--out", str(out), "--no-progress", "--no-plot", "--no-report"])
        err = capsys.readouterr().err
        assert server.requests == []
    assert status == EXIT_USAGE
    assert "is a server address, not a model name" in err and "openai:URL@MODEL" in err
    assert not out.exists()


def test_no_server_at_the_url_is_a_user_error_not_an_outage(capsys, tmp_path, sums_env_id):
    """Nothing listens at the URL (a mistyped port or host) and no call ever succeeded: the
    run stops with exit 2 and says to check the URL, instead of asking for --resume."""
    out = tmp_path / "run"
    agents_file = _agents_file(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1")
    status, _, err = _eval(capsys, sums_env_id, out, agents_file)
    assert status == EXIT_USAGE, err
    assert "configuration error" in err and "the URL" in err and "ConnectError" in err
    assert json.loads((out / "summary.json").read_text())["incomplete"]["configuration_error"]
