"""The report without a browser: which runs it reads, its errors, the page it writes, the SVG
charts, the credit log it shows, and the commands that write it."""

from __future__ import annotations

import base64
import gzip
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from llm_envs.cli import main as llm_envs_main
from llm_envs.report import (
    ReportError,
    build_report,
    default_output,
    detect_kind,
    svg,
    write_report_safely,
)
from llm_envs.report.page import pack
from llm_envs.report.training import choose_steps
from tests.core.toy_env import GuessEnv
from tests.report.fixtures import SIGNALLING, arena_run, eval_run, training_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    return {
        "eval": eval_run(base / "eval", "random", episodes=4, env_id=SIGNALLING),
        "eval_ref": eval_run(base / "eval_ref", "reference", episodes=4, env_id=SIGNALLING),
        "training": training_run(base / "training", steps=2, eval_every=1, eval_episodes=2),
        "arena": arena_run(base / "arena", games_per_order=1),
    }


def _data(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert match
    return json.loads(match.group(1))


def _unpack(text: str) -> dict:
    return json.loads(gzip.decompress(base64.b64decode(text)))


# ---------------------------------------------------------------------------- reading runs
def test_each_kind_of_run_is_recognised(runs):
    assert detect_kind(runs["eval"]) == "evaluation"
    assert detect_kind(runs["eval"] / "episodes.jsonl") == "evaluation"  # a run's own file: its directory
    assert detect_kind(runs["training"]) == "training"
    assert detect_kind(runs["arena"]) == "arena"


def test_paths_that_are_not_runs_get_clear_errors(runs, tmp_path):
    with pytest.raises(ReportError, match="does not exist"):
        detect_kind(tmp_path / "missing")
    with pytest.raises(ReportError, match="no episodes.jsonl, metrics.jsonl or arena summary.json"):
        detect_kind(tmp_path)
    with pytest.raises(ReportError, match="holds 2 evaluation runs"):
        detect_kind(runs["eval"].parent)  # a parent of runs (like runs/demo) is not itself a run
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ReportError, match="is a file"):
        detect_kind(tmp_path / "notes.txt")
    with pytest.raises(ReportError, match="different kinds of run"):
        build_report([runs["eval"], runs["training"]])
    with pytest.raises(ReportError, match="one arena run"):
        build_report([runs["arena"], runs["arena"]])


def test_report_command_errors_and_output_paths(runs, tmp_path, capsys):
    assert llm_envs_main(["report", str(tmp_path / "nope")]) == 2
    assert "error:" in capsys.readouterr().err
    assert default_output([runs["eval"]]) == runs["eval"] / "report.html"
    assert default_output([runs["eval"], runs["eval_ref"]]) == runs["eval"].parent.resolve() / "compare.html"
    out = tmp_path / "deep" / "r.html"
    assert llm_envs_main(["report", str(runs["training"]), "-o", str(out), "--steps", "0,2"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    data = _data(out.read_text())
    assert sorted(data["datasets"]) == ["train0-step0", "train0-step2"]
    with pytest.raises(SystemExit):
        llm_envs_main(["report", str(runs["training"]), "--steps", "one"])
    assert llm_envs_main(["report", str(runs["eval"]), "--steps", "1"]) == 2
    assert "--steps chooses evaluation steps of training runs" in capsys.readouterr().err


def test_write_report_safely_never_raises(tmp_path):
    notes = []
    assert write_report_safely(tmp_path / "missing", log=notes.append) is None
    assert "no report.html written" in notes[0] and "llm-envs report" in notes[0]


# ---------------------------------------------------------------------------- the page
def test_eval_report_is_self_contained_and_carries_every_episode(runs):
    html = build_report([runs["eval"]])
    # nothing is loaded from anywhere: no external scripts, styles, images or fonts
    assert not re.search(r'<(script|link|img|iframe)[^>]+(src|href)=', html)
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    assert "default-src 'none'" in html
    data = _data(html)["datasets"]["run"]
    saved = [json.loads(line) for line in (runs["eval"] / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["i"] for r in data["rows"]) == sorted(e["index"] for e in saved)
    for row in data["rows"]:
        detail = _unpack(data["packed"][row["c"]])[row["k"]]
        original = next(e for e in saved if e["index"] == row["i"])
        assert detail["index"] == row["i"] and detail["seed"] == original["seed"]
        assert [r["action"] for r in detail["records"]] == [r["action"] for r in original["records"]]
        assert [r["credits"] for r in detail["records"]] == [r["credits"] for r in original["records"]]
        assert row["r"] == original["rewards"] and row["s"] == original["metrics"]["success"]


def test_a_run_without_summary_is_summarised_from_its_episodes(runs, tmp_path):
    import shutil

    run = tmp_path / "interrupted"
    shutil.copytree(runs["eval"], run)
    (run / "summary.json").unlink()
    html = build_report([run])
    assert "no readable summary.json" in html
    assert "success rate" in html


def test_numbers_that_are_not_finite_reach_the_page_as_null(runs, tmp_path):
    # One -Infinity in a step's meta made the browser's JSON.parse refuse every episode of its
    # chunk; a NaN reward refused the whole report (a traceback, exit 1).
    import shutil

    run = tmp_path / "odd"
    shutil.copytree(runs["eval"], run)
    (run / "summary.json").unlink()
    from llm_envs.episodes import EpisodeResult, encode_episode_line

    lines = (run / "episodes.jsonl").read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    first["steps"][0]["meta"]["mean_logprob"] = float("-inf")
    first["rewards"] = {agent: float("nan") for agent in first["rewards"]}
    for key in ("format_version", "checksum"):
        first.pop(key)
    lines[0] = encode_episode_line(EpisodeResult.from_dict(first))  # as written: -Infinity, NaN
    (run / "episodes.jsonl").write_text("".join(lines))
    html = build_report([run])

    def strict(text):
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the page's JSON"))

    data = strict(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S).group(1))
    dataset = data["datasets"]["run"]
    for packed in dataset["packed"]:
        strict(gzip.decompress(base64.b64decode(packed)))
    row = next(r for r in dataset["rows"] if r["i"] == first["index"])
    assert set(row["r"].values()) == {None}


def test_training_metrics_with_a_torn_line_and_unknown_names(runs, tmp_path):
    import shutil

    run = tmp_path / "training"
    shutil.copytree(runs["training"], run)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "new/metric": 1.5}\n{"step": 4, "eval/succ')
    html = build_report([run])
    assert "1 line could not be read" in html
    assert 'data-series="new/metric"' in html  # an unknown name still gets a chart
    assert "all other metrics" in html


def test_packed_json_round_trips_and_is_deterministic():
    value = {"text": "ünïcode </script> " * 50, "n": [1, 2.5, None]}
    assert _unpack(pack(value)) == value
    assert pack(value) == pack(value)


def test_choose_steps():
    assert choose_steps([0, 10, 20]) == [0, 10, 20]
    assert choose_steps(list(range(0, 101, 10))) == [0, 20, 50, 80, 100]
    assert choose_steps([0, 10, 20], [10, 30]) == [10]


def test_reports_need_no_torch_and_no_matplotlib(runs):
    paths = [str(runs[k]) for k in ("eval", "training", "arena")]
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None  # as if it were not installed\n"
        "from llm_envs.report import build_report\n"
        f"for path in {paths!r}:\n"
        "    build_report([path])\n"
        "print(sorted(m for m in ('torch', 'transformers', 'playwright') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------------------- commands
def test_eval_writes_the_report_unless_told_not_to(tmp_path, capsys):
    eval_run(tmp_path / "with", "reference", episodes=2, env_id=SIGNALLING)
    assert (tmp_path / "with" / "report.html").exists()
    assert "report.html" in capsys.readouterr().out
    assert llm_envs_main(["eval", SIGNALLING, "--episodes", "2", "--out", str(tmp_path / "without"),
                          "--no-progress", "--no-plot", "--no-report"]) == 0
    assert not (tmp_path / "without" / "report.html").exists()


# ---------------------------------------------------------------------------- SVG charts
HOSTILE_NAME = '</svg><script>alert(1)</script>&"'


@pytest.mark.parametrize("figure", [
    lambda: svg.line_chart([svg.Series(HOSTILE_NAME, [(0, 1.0), (1, float("nan")), (2, 3.0), (3, 2.0)])], title="t"),
    lambda: svg.line_chart([], title=HOSTILE_NAME),
    lambda: svg.stacked_area_chart([svg.Series("a", [(1, 1.0), (2, 2.0)]), svg.Series(HOSTILE_NAME, [(1, 0.5)])],
                                   title="t"),
    lambda: svg.bar_chart(["1", "2"], {HOSTILE_NAME: [1, 2], "b": [0, 3]}, title="t",
                          overlay=svg.Series("share", [(0, 0.2), (1, 0.9)])),
    lambda: svg.histograms({HOSTILE_NAME: [0, 1, 1, 2], "b": [float(i) / 7 for i in range(50)]}, title="t",
                           means={"b": (3.5, 3.0, 4.0)}),
    lambda: svg.interval_chart([(HOSTILE_NAME, 0.5, 0.2, 0.8), ("b", float("nan"), 0, 1)], title="t"),
])
def test_charts_are_well_formed_and_escape_names(figure):
    html = figure()
    match = re.search(r"<svg viewBox.*?</svg>", html, re.S)
    assert match
    root = ET.fromstring(match.group(0))  # well-formed XML: every name was escaped
    assert root.tag.endswith("svg")
    assert "<script>" not in html  # the name is text, never markup
    assert "nan" not in match.group(0).lower().replace("nans", "")


def test_a_gap_in_a_line_is_a_gap():
    html = svg.line_chart([svg.Series("s", [(0, 1.0), (1, None), (2, 3.0), (3, 2.0)])], title="t")
    path = re.search(r'<path class="series"[^>]* d="([^"]*)"', html).group(1)
    assert path.count("M") == 2 and path.count("L") == 1


def test_nice_ticks_cover_the_range():
    for low, high in [(0, 1), (-3.05, 3.7), (0.013, 0.039), (5, 5), (0, 1234567)]:
        ticks = svg.nice_ticks(low, high)
        assert ticks[0] <= low and ticks[-1] >= high and 2 <= len(ticks) <= 12


# ---------------------------------------------------------------------------- the credit log
def test_records_log_when_each_credit_arrived():
    env = GuessEnv()
    env.reset(seed=3)
    while env.agents:
        agent = env.agent_selection
        env.step(None if env.terminations[agent] or env.truncations[agent] else env.reference_action(agent))
    for record in env.records:
        assert sum(amount for _, amount, _ in record.credits) == pytest.approx(record.reward)
        assert all(at >= record.index for _, _, at in record.credits)  # never before the action itself
        data = record.to_dict()
        assert data["credits"] == [{"component": c, "amount": a, "at": at} for c, a, at in record.credits]
    delayed = [(r.index, at) for r in env.records for _, _, at in r.credits if at != r.index]
    assert delayed  # GuessEnv credits the guess when the checker acts
    clone = env.clone()
    assert clone.records[0].credits == env.records[0].credits and clone.records[0].credits is not env.records[0].credits


# ---------------------------------------------------------------------------- issue 34's page items
def test_the_command_row_is_the_command_lines_not_a_dict(runs, tmp_path):
    import shutil

    run = tmp_path / "eval"
    shutil.copytree(runs["eval"], run)
    summary = json.loads((run / "summary.json").read_text())
    summary.pop("command", None)
    summary["commands"] = [{"command": "llm-envs eval A --episodes 4", "started_at": "t0", "status": "incomplete"},
                           {"command": "llm-envs eval A --episodes 4 --resume", "started_at": "t1", "status": "complete"}]
    (run / "summary.json").write_text(json.dumps(summary))
    html = build_report([run])
    row = re.search(r"<tr><th>command</th><td>(.*?)</td></tr>", html, re.S).group(1)
    assert row == ("llm-envs eval A --episodes 4 (incomplete)\nllm-envs eval A --episodes 4 --resume (complete)")
    assert "{" not in row and "started_at" not in row


def test_a_histogram_of_equal_values_draws_a_narrow_bar():
    html = svg.histograms({"listener": [0.0, 0.0, 0.0, 0.0]}, title="t")
    [bar] = re.findall(r'<rect class="bar"[^>]* width="([\d.]+)"', html)
    plot_width = max(float(b) - float(a) for a, b in re.findall(r'<line class="axis" x1="([\d.]+)" x2="([\d.]+)"', html))
    assert float(bar) < 0.15 * plot_width  # was the whole width


def test_training_charts_format_errors_as_errors_and_hide_all_zero_panels(tmp_path):
    from llm_envs.report.runs import load_run
    from llm_envs.report.training import curves

    run = training_run(tmp_path / "training", steps=2, eval_every=1, eval_episodes=2)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        if "rollout/format_ok" in row:
            row["rollout/format_ok"] = 0.9  # 10% format errors
        for key in [k for k in row if k.endswith("/kl")]:
            row[key] = 0.0  # a KL never switched on
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = curves([load_run(run)])
    panel = html[html.index("format errors and infrastructure failures"):]
    panel = panel[: panel.index("</figure>")]
    assert 'data-series="rollout/format_errors"' in panel or "rollout/format_errors" in panel
    assert "format_ok" not in html
    points = re.findall(r"<title>rollout/format_errors[^<]*?(\d\.\d+)</title>", panel)
    assert points and all(abs(float(p) - 0.1) < 1e-6 for p in points)
    assert "KL divergence to the reference" not in html.split("Not drawn")[0]
    assert re.search(r"Not drawn, 0 at every step: [^<]*KL divergence to the reference", html)


def test_runs_on_different_splits_are_not_paired(tmp_path):
    # The same seed of another split is another problem: the report paired them without a word.
    runs = []
    for split in ("train", "test"):
        out = tmp_path / split
        assert llm_envs_main(["eval", "llm/PlanPath-v0", "--agent", "random", "--episodes", "3", "--split", split,
                              "--out", str(out), "--no-progress", "--no-plot", "--no-report"]) == 0
        runs.append(out)
    html = build_report(runs)
    assert "Paired differences" not in html and "different data splits" in html
    (runs[0] / "summary.json").unlink()  # (an unfinished run: its split from run.json)
    assert "different data splits" in build_report(runs)
    same = build_report([runs[1], runs[1]])
    assert "Paired differences on the 3 shared seeds" in same
