"""``llm-envs`` as a user meets it: paired comparisons, settings a resume must keep, honest
progress, and one-line errors for every mistyped input."""

from __future__ import annotations

import argparse
import json

import pytest

from llm_envs.cli import build_parser, main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _eval(capsys, env_id, out, *extra):
    return _run(capsys, "eval", env_id, "--out", str(out), "--no-progress", "--no-plot", *extra)


# ---------------------------------------------------------------------------- compare
def test_compare_pairs_episodes_by_seed_with_exact_tests(capsys, tmp_path, sums_env_id):
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    assert _eval(capsys, sums_env_id, run_a, "--episodes", "12", "--agent", "reference")[0] == 0
    assert _eval(capsys, sums_env_id, run_b, "--episodes", "14", "--agent", "random")[0] == 0
    status, out, _ = _run(capsys, "eval", "--compare", str(run_a), str(run_b))
    assert status == 0
    success = next(line for line in out.splitlines() if line.startswith("success ") and "McNemar" in line)
    # Reference solves all 12 common seeds; the random agent (almost) none: McNemar's exact
    # p-value is 2 * 0.5^k for k discordant pairs, all one way.
    summary_b = [json.loads(line) for line in (run_b / "episodes.jsonl").read_text().splitlines()]
    k = sum(1 for e in summary_b if e["index"] < 12 and e["metrics"]["success"] == 0.0)
    assert f"{k} pairs only A, 0 only B" in success and f"{2 * 0.5**k:.4f}"[:5] in success
    assert any(
        line.startswith("alice: reward") and "sign-flip permutation" in line for line in out.splitlines()
    )
    assert "paired on the 12 seeds both runs played (A has 12, B 14)" in out


def test_compare_reads_a_hand_edited_summary_as_the_report_does(capsys, tmp_path):
    # (`"agents": null`, `"success": {"value": "x"}`, `"commands": 3` ... raised AttributeError,
    # TypeError or KeyError out of `eval --compare`: a traceback)
    import copy

    run_a, run_b = tmp_path / "a", tmp_path / "b"
    for run in (run_a, run_b):
        assert _eval(capsys, "llm/Signalling-v0", run, "--episodes", "3", "--agent", "random", "--no-report")[0] == 0
    original = json.loads((run_b / "summary.json").read_text())

    def paths(data, prefix=()):
        for key, value in data.items() if isinstance(data, dict) else ():
            yield (*prefix, key)
            yield from paths(value, (*prefix, key))

    odd = (None, [1], "x", 3, {"k": 1})
    for index, path in enumerate(paths(original)):
        for value in (odd[index % 5], odd[(index + 2) % 5]):
            edited = copy.deepcopy(original)
            holder = edited
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = value
            (run_b / "summary.json").write_text(json.dumps(edited))
            status, out, err = _run(capsys, "eval", "--compare", str(run_a), str(run_b))
            # a page of numbers, or (an edited env_id or split) a one-line refusal
            assert status == 0 or (status == 2 and err.startswith("error: ") and err.count("\n") == 1), (path, value, err)
    assert index > 20


def test_compare_refuses_runs_that_are_not_comparable(capsys, tmp_path, sums_env_id):
    run_a, shifted, other_env = tmp_path / "a", tmp_path / "shifted", tmp_path / "signalling"
    _eval(capsys, sums_env_id, run_a, "--episodes", "3")
    _eval(capsys, sums_env_id, shifted, "--episodes", "3", "--seed", "100")
    _eval(capsys, "llm/Signalling-v0", other_env, "--episodes", "2")
    status, _, err = _run(capsys, "eval", "--compare", str(run_a), str(shifted))
    assert status == 2 and "share no seed" in err and "seeds 100..102" in err
    status, _, err = _run(capsys, "eval", "--compare", str(run_a), str(other_env))
    assert status == 2 and "different environments" in err

    demo = tmp_path / "demo"
    assert _run(capsys, "demo", "--env", sums_env_id, "--episodes", "2", "--out", str(demo))[0] == 0
    status, out, err = _run(capsys, "eval", "--compare", str(demo), str(run_a))
    assert status == 2 and "holds 2 runs" in err and out == ""
    assert len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------- settings
def test_resume_refuses_changed_settings_unless_forced(capsys, tmp_path, sums_env_id, chat_server):
    out = tmp_path / "run"
    model = f"openai:{chat_server.base_url}@m"
    base = ["--agent", model, "--temperature", "0", "--max-tokens", "8"]
    assert _eval(capsys, sums_env_id, out, "--episodes", "4", *base)[0] == 0
    first = json.loads((out / "run.json").read_text())
    assert first["settings"]["agents"]["alice"]["sampling"] == {"temperature": 0.0, "max_tokens": 8}

    status, _, err = _eval(
        capsys,
        sums_env_id,
        out,
        "--episodes",
        "6",
        "--resume",
        "--agent",
        model,
        "--temperature",
        "0",
        "--max-tokens",
        "64",
    )
    assert status == 2 and "max_tokens: 8 -> 64" in err and "--force-resume" in err
    status, _, err = _eval(
        capsys,
        sums_env_id,
        out,
        "--episodes",
        "6",
        "--resume",
        "--agent",
        model,
        "--temperature",
        "1",
        "--max-tokens",
        "8",
    )
    assert status == 2 and "temperature: 0.0 -> 1.0" in err
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 4  # nothing was played
    status, _, err = _eval(capsys, sums_env_id, out, "--episodes", "6", "--resume", "--seed", "1", *base)
    assert status == 2 and "seed: 0 -> 1" in err

    # Transport options (concurrency, timeouts) do not change results: accepted.
    extra = ["--max-concurrency", "3", "--timeout", "10", "--concurrency", "2"]
    assert _eval(capsys, sums_env_id, out, "--episodes", "6", "--resume", *base, *extra)[0] == 0

    status, _, err = _eval(
        capsys,
        sums_env_id,
        out,
        "--episodes",
        "8",
        "--resume",
        "--force-resume",
        "--agent",
        model,
        "--temperature",
        "0",
        "--max-tokens",
        "64",
    )
    assert status == 0 and "changed settings" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mixed_settings"] is True and summary["episodes"] == 8
    # Said wherever the numbers are read, not only in a warning at the resume: the table, the
    # report and a comparison.
    from llm_envs.evaluation.summary import format_summary
    from llm_envs.report.runs import load_run as load_report_run

    assert "MIXED SETTINGS" in format_summary(summary) and "max_tokens: 8 -> 64" in format_summary(summary)
    assert any("MIXED SETTINGS" in note for note in load_report_run(out).notes)
    assert _eval(capsys, sums_env_id, tmp_path / "other", "--episodes", "8", "--agent", "reference")[0] == 0
    status, compared, _ = _run(capsys, "eval", "--compare", str(out), str(tmp_path / "other"))
    assert status == 0 and "MIXED SETTINGS" in compared
    commands = summary["commands"]
    assert len(commands) == 3 and [c["resume"] for c in commands] == [False, True, True]
    assert commands[-1]["settings_changed"] == [
        "agents.alice.sampling.max_tokens: 8 -> 64",
        "agents.bob.sampling.max_tokens: 8 -> 64",
    ]
    assert all(c["command"].startswith("llm-envs eval") or c["command"] for c in commands)
    assert [c["episodes_played"] for c in commands] == [4, 2, 2]

    status, _, err = _eval(capsys, sums_env_id, tmp_path / "x", "--force-resume")
    assert status == 2 and "--force-resume goes with --resume" in err


def test_default_max_tokens_is_sent_and_said_in_the_help(capsys, tmp_path, sums_env_id, chat_server):
    assert (
        _eval(
            capsys,
            sums_env_id,
            tmp_path / "r",
            "--episodes",
            "1",
            "--agent",
            f"openai:{chat_server.base_url}@m",
        )[0]
        == 0
    )
    assert {body["max_tokens"] for body in chat_server.requests} == {1024}
    help_text = build_parser()._subparsers._group_actions[0].choices["eval"].format_help()
    assert "default 1024" in " ".join(help_text.split())


# ---------------------------------------------------------------------------- progress
def test_progress_shows_episodes_requests_in_flight_tokens_and_errors(
    capsys, tmp_path, sums_env_id, chat_server
):
    status = main(
        [
            "eval",
            sums_env_id,
            "--agent",
            f"openai:{chat_server.base_url}@m",
            "--episodes",
            "6",
            "--out",
            str(tmp_path / "r"),
            "--no-plot",
        ]
    )
    err = capsys.readouterr().err
    assert status == 0
    final = err.replace("\r", "\n").strip().splitlines()
    bar = [line for line in final if "6/6" in line][-1]
    assert "in flight 0" in bar and "tok/s" in bar and "failed calls 0" in bar and "success 1.000" in bar


# ---------------------------------------------------------------------------- user errors
@pytest.mark.parametrize(
    "argv,words",
    [
        (["play", "llm/PlanPth-v0"], "did you mean llm/PlanPath-v0"),
        (["play", "Sudoku-v9"], "unknown environment 'Sudoku-v9'"),
        (["eval", "llm/PlanPth-v0"], "did you mean llm/PlanPath-v0"),
        (["demo", "--env", "llm/Sokobn-v0"], "did you mean llm/Sokoban-v0"),
        (["eval", "llm/Signalling-v0", "--agent", "openai:localhost:8000@m"], "is not a URL"),
        (["eval", "llm/Signalling-v0", "--agent", "gpt4"], "unknown agent kind"),
        (["eval", "llm/Signalling-v0", "--agents-file", "/no/such/agents.yaml"], "cannot read agents file"),
        (["eval", "llm/Signalling-v0", "--episodes", "0"], "--episodes must be >= 1"),
        (["eval", "--compare", "/no/such/run", "/no/such/other"], "does not exist"),
        (["show", "/no/such/run"], "does not exist"),
        (["play", "llm/Signalling-v0", "--others", "py:no_such_module:Agent"], "cannot import"),
        (["eval", "llm/Signalling-v0", "--agent", "hf:/no/such/model"], "no model at /no/such/model"),
        (["eval", "llm/Signalling-v0", "--agents-file", "/"], "cannot read agents file"),
    ],
)
def test_mistyped_input_gets_one_clean_line(capsys, argv, words):
    status, _, err = _run(capsys, *argv)
    assert status == 2
    assert err.startswith("error: ") and words in err
    assert "Traceback" not in err and "atari" not in err and len(err.strip().splitlines()) == 1


def test_out_that_is_a_file_is_a_clean_error(capsys, tmp_path, sums_env_id):
    target = tmp_path / "file"
    target.write_text("x")
    status, _, err = _run(capsys, "eval", sums_env_id, "--out", str(target), "--no-progress")
    assert status == 2 and "is a file" in err


def test_every_option_of_every_command_has_help():
    parser = build_parser()
    missing = []
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


# ---------------------------------------------------------------------------- odd agents
@pytest.mark.parametrize("agent", ["NanTokens", "WordTokens", "ErrorWithListMeta", "ErrorWithWordAttempts"])
def test_an_output_the_dispatcher_cannot_read_is_a_failed_call_not_a_hang(capsys, tmp_path, agent):
    # (a NaN token count raised inside the dispatcher's callback: the episode's future was never
    # resolved and the run waited for ever)
    status, _, err = _eval(capsys, "llm/Signalling-v0", tmp_path / "run", "--episodes", "4", "--concurrency", "2",
                           "--agent", f"py:tests.evaluation.odd_agents:{agent}", "--no-report")
    assert status == 3, err
    assert "4 of 4 episodes are incomplete" in err
    assert "bad_output" in err or "agent_error: engine died" in err


@pytest.mark.parametrize("agent", ["Exits", "ExitsAsync"])
def test_an_agent_calling_sys_exit_stops_the_run_with_an_error(capsys, tmp_path, agent):
    # (it ended the run with status 0, no summary and nothing written)
    status, _, err = _eval(capsys, "llm/Signalling-v0", tmp_path / "run", "--episodes", "4",
                           "--agent", f"py:tests.evaluation.odd_agents:{agent}", "--no-report")
    assert status == 2 and "called sys.exit(0)" in err


def test_numpy_token_counts_are_counts(capsys, tmp_path):
    status, _, err = _eval(capsys, "llm/Signalling-v0", tmp_path / "run", "--episodes", "2",
                           "--agent", "py:tests.evaluation.odd_agents:NumpyTokens", "--no-report")
    assert status == 0, err


def test_a_refused_resume_leaves_the_runs_settings_as_they_were(capsys, tmp_path):
    out = tmp_path / "run"
    assert _eval(capsys, "llm/TicTacToe-v0", out, "--agent", "random", "--episodes", "4", "--no-report")[0] == 0
    before = (out / "run.json").read_text()
    status, _, err = _eval(capsys, "llm/TicTacToe-v0", out, "--agent", "reference", "--episodes", "6",
                           "--resume", "--force-resume", "--no-report")
    assert status == 2 and "played by other agents" in err
    assert (out / "run.json").read_text() == before
    # (run.json held the refused agents' settings, so resuming the run as it was played was
    # refused in turn)
    status, _, err = _eval(capsys, "llm/TicTacToe-v0", out, "--agent", "random", "--episodes", "6", "--resume",
                           "--no-report")
    assert status == 0, err
    assert json.loads((out / "summary.json").read_text())["mixed_settings"] is False


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--temperature", "-1", "--temperature must be a finite number >= 0"),
    ("--temperature", "nan", "--temperature must be a finite number >= 0"),
    ("--top-p", "2", "--top-p must be in (0, 1]"),
    ("--timeout", "0", "--timeout must be a finite number > 0"),
])
def test_sampling_flags_out_of_range_are_refused(capsys, tmp_path, flag, value, says):
    # (accepted, and sent to every model agent of the run)
    status, _, err = _eval(capsys, "llm/Signalling-v0", tmp_path / "run", "--episodes", "1", "--agent", "random",
                           flag, value, "--no-report")
    assert status == 2 and says in err


# ---------------------------------------------------------------------------- hostile text
def _acted_on(text: str) -> list[str]:
    return [c for c in "\x1b\x07\r\u202e" if c in text]


def test_a_name_with_a_line_break_cannot_forge_a_row_and_nothing_reaches_the_terminal_raw(capsys, tmp_path):
    # (the eval table was escaped after it was laid out: a newline in a name printed a made-up
    # row, and escapes pushed the row out of its columns; --compare and a suite's progress line
    # printed names as they were)
    agent = "py:tests.evaluation.odd_agents:HostileName"
    for run in ("a", "b"):
        status, out, err = _eval(capsys, "llm/Signalling-v0", tmp_path / run, "--episodes", "2", "--agent",
                                 f"speaker={agent}", "--no-report")
        assert status == 0, err
        assert not _acted_on(out + err), repr(out + err)
        assert not any(line.startswith("listener  forged-row") for line in out.splitlines()), out
        table = [line for line in out.splitlines() if line.startswith(("speaker", "listener"))]
        assert len(table) == 2 and all("\\n" in line or "reference" in line for line in table), table
    status, out, err = _run(capsys, "eval", "--compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert status == 0, err
    assert not _acted_on(out + err) and "\\x1b[2J" in out, repr(out)
    status, out, err = _run(capsys, "eval", "--envs", "llm/Signalling-v0,llm/Signalling-v0", "--out",
                            str(tmp_path / "suite"), "--episodes", "1", "--no-progress", "--no-plot", "--no-report",
                            "--agent", f"speaker={agent}")
    assert not _acted_on(out + err), repr(out + err)


def test_an_agents_error_message_is_escaped_in_every_error_line(capsys, tmp_path):
    status, out, err = _eval(capsys, "llm/Signalling-v0", tmp_path / "run", "--episodes", "2", "--no-report",
                             "--agent", "py:tests.evaluation.odd_agents:HostileError")
    assert status in (2, 3), err
    assert "error:" in err and "\\x1b[2J" in err
    assert not _acted_on(out + err), repr(out + err)


@pytest.mark.parametrize("flag", ["--rounds", "--games", "--concurrency"])
def test_an_arena_count_below_one_is_refused_before_anything_is_said_or_made(capsys, tmp_path, flag):
    # (--rounds 0 printed "writing to ..." before the tournament refused it)
    with pytest.raises(SystemExit) as raised:
        main(["arena", "llm/KuhnPoker-v0", "--agent", "random", "--agent", "reference", flag, "0",
              "--out", str(tmp_path / "arena")])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "expected an integer >= 1, got 0" in err and "writing to" not in err
    assert not (tmp_path / "arena").exists()


def test_credentials_in_a_url_on_the_command_line_are_written_nowhere(capsys, tmp_path, sums_env_id, chat_server,
                                                                      monkeypatch):
    # (the agent's name was redacted, but the command line each run records was written as typed:
    # run.json, summary.json and report.html held the password)
    secret = "Pa55w0rdInUrl"
    model = f"openai:{chat_server.base_url.replace('://', f'://user:{secret}@')}@m"
    argv = ["eval", sums_env_id, "--out", str(tmp_path / "run"), "--no-progress", "--no-plot", "--episodes", "2",
            "--agent", model, "--max-tokens", "8"]
    monkeypatch.setattr("sys.argv", ["llm-envs", *argv])
    status, out, err = _run(capsys, *argv)
    assert status == 0, err
    assert secret not in out + err
    written = {p.name: p.read_text(errors="replace") for p in (tmp_path / "run").iterdir() if p.is_file()}
    assert {"run.json", "summary.json", "episodes.jsonl", "report.html"} <= set(written)
    assert [name for name, text in written.items() if secret in text] == []
    assert "user:***@" in written["run.json"] or "***@" in written["run.json"]
