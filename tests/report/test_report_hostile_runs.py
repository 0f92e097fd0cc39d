"""The report of runs whose text or files are hostile or hand-edited: bidi controls in run text
(checked in headless Chromium), lone surrogates, ``-o`` naming a directory, failed writes,
summary.json fields of any shape; and the comparison page agreeing with ``eval --compare``."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

import llm_envs.report as report_module
from llm_envs.cli import main as llm_envs_main
from llm_envs.evaluation.compare import CompareError, compare_runs
from llm_envs.report import ReportError, build_report, write_report
from llm_envs.report.page import esc, fmt_interval
from tests.report.fixtures import SIGNALLING, arena_run, eval_run, rewrite_episodes, training_run

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: reverses what follows it, up to the end of its paragraph
RLE = "\u202b"  # RIGHT-TO-LEFT EMBEDDING


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hostile-runs")
    return {
        "random": eval_run(base / "random", "random", episodes=4, env_id=SIGNALLING),
        "reference": eval_run(base / "reference", "reference", episodes=4, env_id=SIGNALLING),
    }


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    (to / "report.html").unlink(missing_ok=True)
    return to


def _leftovers(*directories: Path) -> list[str]:
    return [p.name for d in directories if d.is_dir() for p in d.iterdir() if p.name.endswith(".tmp")]


# ---------------------------------------------------------------------------- bidi isolation
def test_isolated_text_cannot_end_its_isolate_early_and_becomes_a_bdi_element():
    from llm_envs.report.page import isolated

    assert isolated("speaker") == "speaker"  # ASCII cannot reorder anything: left as it is
    assert isolated(f"evil{RLO}") == f"\u2068evil{RLO}\u2069"
    # a PDI of its own would end the isolate early (and leave the override running): dropped;
    # an isolate it opens is closed
    assert isolated(f"a\u2069{RLO}b\u2067c") == f"\u2068a{RLO}b\u2067c\u2069\u2069"
    assert esc(f"x = {isolated('<évil>' + RLO)}, y") == f"x = <bdi>&lt;évil&gt;{RLO}</bdi>, y"
    assert esc("\u2067rtl\u2069 \u2066ltr") == '<bdi dir="rtl">rtl</bdi> <bdi dir="ltr">ltr</bdi>'


def _hostile_eval(run: Path, to: Path, name: str = f"evil{RLO}") -> Path:
    """A copy of ``run`` whose players are named ``name``, whose failed model calls and
    episode ids end in an override, and which says it is incomplete for a reason that does."""
    to = _copy(run, to)

    def edit(line: dict[str, Any]) -> dict[str, Any]:
        line["agents"] = {agent: name for agent in line["agents"]}
        line["episode_id"] = f"ep{line['index']}{RLE}"
        line["metrics"]["note"] = f"odd{RLO}"
        if line["index"] == 1:
            line["steps"][0]["error"] = f"server said: quota{RLO}"
        return line

    rewrite_episodes(to, edit)
    summary = json.loads((to / "summary.json").read_text())
    summary["agents"] = {agent: name for agent in summary["agents"]}
    summary["agent_specs"] = {agent: f"py:x{RLO}" for agent in summary["agents"]}
    summary["status"] = "incomplete"
    summary["episodes_requested"] = summary["episodes"] + 2
    summary["incomplete"] = {"episodes": 2, "reasons": {f"agent_error: server said: quota{RLO}": 2}}
    summary["commands"][0]["status"] = f"incomplete{RLO}"
    summary["mixed_settings"] = True
    summary["commands"][0]["mixed"] = True
    summary["commands"][0]["settings_changed"] = [f"agents{RLO}", "seed"]
    (to / "summary.json").write_text(json.dumps(summary))
    return to


# Where a bidi embedding or override (U+202A-202E) opened in one piece of text is still open
# when the page's own letters follow it in the same bidi paragraph: the place it reverses them.
# Isolation ends it: an enclosing <bdi> (or `unicode-bidi: isolate`), or isolate characters
# (FSI ... PDI) around it in plain text. Paragraphs end at blocks, line breaks, and SVG text.
LEAKS_JS = r"""() => {
  const OPEN = "\u202a\u202b\u202d\u202e", PDF = "\u202c", ISO = "\u2066\u2067\u2068", PDI = "\u2069";
  // scan text from a state (a stack of "E" embeddings and "I" isolates); report a letter or
  // digit met while an embedding is open outside every isolate
  function scan(text, stack, hit) {
    for (const ch of text) {
      if (ch === "\n") stack.length = 0;
      else if (OPEN.includes(ch)) stack.push("E");
      else if (ch === PDF) { if (stack[stack.length - 1] === "E") stack.pop(); }
      else if (ISO.includes(ch)) stack.push("I");
      else if (ch === PDI) { const i = stack.lastIndexOf("I"); if (i >= 0) stack.length = i; }
      else if (/[A-Za-z0-9]/.test(ch) && stack.length && stack[0] === "E") { hit(); return stack; }
    }
    return stack;
  }
  // an element whose content is a paragraph (or an isolate) of its own: not an inline box
  const isolating = (el) => el.tagName === "BDI" || el instanceof SVGElement ||
    ["isolate", "isolate-override", "plaintext"].includes(getComputedStyle(el).unicodeBidi) ||
    getComputedStyle(el).display !== "inline";
  const out = [];
  const nodes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) if (!n.parentElement.closest("script, style")) nodes.push(n);
  nodes.forEach((node, i) => {
    if (!/[\u202a\u202b\u202d\u202e]/.test(node.textContent)) return;
    const where = node.parentElement.tagName + ": " + JSON.stringify(node.parentElement.textContent.slice(0, 160));
    let leaked = false;
    let stack = scan(node.textContent, [], () => { leaked = true; });
    // the paragraph goes on past this node up to the nearest isolating or block ancestor
    let box = node.parentElement;
    while (!isolating(box)) box = box.parentElement;
    for (let j = i + 1; !leaked && stack.length && stack[0] === "E" && j < nodes.length && box.contains(nodes[j]); j++) {
      let el = nodes[j].parentElement, inside = false;  // text in a nested isolate or block is not in this paragraph
      for (; el !== box; el = el.parentElement) if (isolating(el)) inside = true;
      if (!inside) stack = scan(nodes[j].textContent, stack, () => { leaked = true; });
    }
    if (leaked) out.push(where);
  });
  scan(document.title, [], () => out.push("TITLE: " + JSON.stringify(document.title)));
  return out;
}"""

# Where the first occurrence of each word inside the element matched by `selector` is drawn:
# [top, left] of its box (a line below comes later; on one line, left to right).
WORD_PLACE_JS = r"""([selector, words]) => {
  const root = document.querySelector(selector);
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const lefts = {};
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (const word of words) {
      const at = n.textContent.indexOf(word);
      if (at < 0 || word in lefts) continue;
      const range = document.createRange();
      range.setStart(n, at);
      range.setEnd(n, at + word.length);
      const box = range.getBoundingClientRect();
      lefts[word] = [Math.round(box.top), box.left];
    }
  }
  return lefts;
}"""


def _no_leaks(view) -> None:
    view.page.wait_for_timeout(50)
    assert view.page.evaluate(LEAKS_JS) == []


def test_run_text_cannot_reorder_the_report_s_own_sentences(runs, open_report, tmp_path):
    # A bidi override in anything a run holds (a player's name, a server's error, an episode
    # id, a run directory) reversed the page's own words after it: the INCOMPLETE banner read
    # "...did taht 2 eht ylno srevoc egap siht no rebmun yrevE".
    run = _hostile_eval(runs["random"], tmp_path / f"run{RLO}")
    view = open_report(write_report([run]))
    page = view.page
    page.click(".episode-list tbody tr[data-index='1']")
    page.wait_for_selector("article.episode[data-episode='1']")
    page.select_option(".f-agent", "speaker")
    _no_leaks(view)
    # and as drawn: the banner's words and the episode's players keep their order on the screen
    banner = page.evaluate(WORD_PLACE_JS, ["#summary p.warning", ["INCOMPLETE", "Every", "number", "resume"]])
    assert banner["INCOMPLETE"] < banner["Every"] < banner["number"] < banner["resume"], banner
    facts = page.evaluate(WORD_PLACE_JS, ["article.episode dl.episode-facts dd", ["speaker", "listener"]])
    assert facts["speaker"] < facts["listener"], facts
    subtitle = page.evaluate(WORD_PLACE_JS, ["header .subtitle", ["speaker", "listener", "episodes"]])
    assert subtitle["speaker"] < subtitle["listener"] < subtitle["episodes"], subtitle
    assert "model call failed: server said: quota" in page.inner_text("article.episode")
    view.screenshot("hostile-bidi-eval")
    view.assert_clean()

    # two runs compared: run labels (directory names) and players in the page's sentences
    other = _hostile_eval(runs["reference"], tmp_path / f"ref{RLO}", name=f"good{RLE}")
    view = open_report(write_report([other, run], tmp_path / "compare.html"))
    view.page.click(".pair-list tbody tr >> nth=0")
    view.page.wait_for_selector(".side-by-side article.episode")
    _no_leaks(view)
    view.assert_clean()


def test_arena_and_training_names_cannot_reorder_the_report_s_sentences(open_report, tmp_path):
    arena = arena_run(tmp_path / "arena", games_per_order=1)
    for name in ("summary.json", "games.jsonl"):  # an agent named with an override
        path = arena / name
        path.write_text(path.read_text().replace('"gamma"', '"gam\\u202e"'))
    view = open_report(write_report([arena]))
    view.page.click(".episode-list tbody tr >> nth=-1")
    view.page.wait_for_selector("article.episode")
    view.page.select_option(".f-agent", f"gam{RLO}")
    _no_leaks(view)
    view.assert_clean()

    first = training_run(tmp_path / f"t1{RLO}", steps=2, eval_every=1, eval_episodes=2)
    second = training_run(tmp_path / "t2", steps=2, eval_every=1, eval_episodes=2, phase=1.0)
    for run in (first, second):  # a metric named with an override, 0 at every step
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        (run / "metrics.jsonl").write_text("".join(json.dumps({**r, f"zero{RLO}": 0.0}) + "\n" for r in rows)
                                           + "{torn\n")
    view = open_report(write_report([first, second]))
    _no_leaks(view)
    view.assert_clean()


# ---------------------------------------------------------------------------- lone surrogates
def test_a_lone_surrogate_in_run_text_still_gives_a_report(runs, tmp_path, capsys):
    # A directory name with a byte that is not UTF-8 reaches Python as a lone surrogate (and
    # so does a server's broken error text): the page could not be encoded, no report.html was
    # written and report.html.tmp was left in the run.
    run = tmp_path / "caf\udce9"
    assert llm_envs_main(["eval", SIGNALLING, "--agent", "random", "--episodes", "2", "--out", str(run),
                          "--no-progress", "--no-plot"]) == 0
    assert "no report.html written" not in capsys.readouterr().err
    html = (run / "report.html").read_bytes().decode("utf-8")  # written by eval itself, as UTF-8
    assert "caf\ufffd" in html

    edited = _copy(runs["random"], tmp_path / "edited")
    summary = json.loads((edited / "summary.json").read_text())
    summary.update(status="incomplete", episodes_requested=6,
                   incomplete={"episodes": 2, "reasons": {"agent_error: bad \udcff": 2}})
    summary["agents"]["speaker"] = "model \ud800"
    (edited / "summary.json").write_text(json.dumps(summary))  # (json.dumps escapes them: \udcff)
    assert llm_envs_main(["report", str(edited)]) == 0
    html = (edited / "report.html").read_bytes().decode("utf-8")
    assert "bad \ufffd" in html and "model \ufffd" in html
    assert _leftovers(edited, run) == []


# ---------------------------------------------------------------------------- writing the file
def test_out_naming_a_directory_is_refused_and_leaves_nothing(runs, tmp_path, capsys):
    pages = tmp_path / "pages"
    pages.mkdir()
    assert llm_envs_main(["report", str(runs["random"]), "-o", str(pages)]) == 2
    err = capsys.readouterr().err
    assert f"{pages} is a directory" in err and str(pages / "report.html") in err
    assert "Traceback" not in err and "Errno" not in err
    assert _leftovers(tmp_path, pages) == [] and list(pages.iterdir()) == []


@pytest.mark.parametrize("failure", [OSError(5, "Input/output error"), KeyboardInterrupt()])
def test_a_failed_write_removes_its_temporary_file(runs, tmp_path, monkeypatch, failure):
    def fail(*args: Any, **kwargs: Any) -> None:
        raise failure

    monkeypatch.setattr(report_module.os, "replace", fail)
    out = tmp_path / "r.html"
    with pytest.raises(ReportError if isinstance(failure, OSError) else KeyboardInterrupt) as caught:
        write_report([runs["random"]], out)
    if isinstance(failure, OSError):
        assert f"cannot write the report to {out}: Input/output error" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- hand-edited files
ODD_VALUES = (None, [3, "x"], f"n/a{RLO}", 3, {"k": [1]}, True, -1.5)


def _odd_values(index: int) -> tuple:
    """Null and two more of :data:`ODD_VALUES` for the ``index``-th field, in turn: every value
    meets many fields, at three reports a field instead of seven (the suite's time budget)."""
    rest = ODD_VALUES[1:]
    return (None, rest[(2 * index) % len(rest)], rest[(2 * index + 1) % len(rest)])


def _paths(data: Any, prefix: tuple = (), depth: int = 3) -> list[tuple]:
    """Every key path into ``data`` (dicts, and the first item of lists) up to ``depth``."""
    out = []
    if depth == 0:
        return out
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((*prefix, key))
            out += _paths(value, (*prefix, key), depth - 1)
    elif isinstance(data, list) and data:
        out.append((*prefix, 0))
        out += _paths(data[0], (*prefix, 0), depth - 1)
    return out


def _replaced(data: Any, path: tuple, value: Any) -> Any:
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def _fuzz(run: Path, file: str, out: Path, depth: int = 3, skip: tuple = ()) -> int:
    """Report ``run`` with each field of ``file`` (JSON, or each line of JSON lines) but ``skip``
    replaced by each of its :func:`_odd_values`; every one must give a page. Returns how many were
    tried."""
    path = run / file
    original = path.read_text()
    lines = original.splitlines() if file.endswith(".jsonl") else [original]
    tried = 0
    try:
        for position in sorted({0, len(lines) - 1}):  # (the arena's last game has no episode)
            data = json.loads(lines[position])
            for index, field in enumerate(f for f in _paths(data, depth=depth) if f not in skip):
                for value in _odd_values(index):
                    edited = json.dumps(_replaced(data, field, value))
                    path.write_text("\n".join(lines[:position] + [edited] + lines[position + 1:]) + "\n")
                    out.unlink(missing_ok=True)
                    status = llm_envs_main(["report", str(run), "-o", str(out)])
                    assert status == 0 and out.exists(), (file, field, value)
                    tried += 1
    finally:
        path.write_text(original)
    return tried


def test_hand_edited_summary_fields_of_any_shape_give_a_page(runs, tmp_path, capsys):
    # "rewards": {"speaker": null}, "agents": [...], "metrics": "n/a", "episodes": [4],
    # "commands": 3 crashed `llm-envs report` with a traceback; "episodes": "many" gave
    # "error: invalid literal for int()". docs/report.md promises tolerant reading: every field
    # of every shape reads as absent where the report cannot read it, and the page names it.
    run = _copy(runs["random"], tmp_path / "eval")
    assert _fuzz(run, "summary.json", tmp_path / "r.html") > 170
    assert "Traceback" not in capsys.readouterr().err

    summary = json.loads((run / "summary.json").read_text())
    summary.update(episodes="many", rewards={**summary["rewards"], "speaker": [1]})
    (run / "summary.json").write_text(json.dumps(summary))
    html = build_report([run])
    assert "summary.json: 2 fields of a shape this report cannot read were left out (as if absent): " in html
    assert "rewards.speaker (a list)" in html and "episodes (&#x27;many&#x27;)" in html
    assert esc('"episodes": "many"') in html  # the whole summary.json is shown as the file holds it


def test_hand_edited_arena_and_training_files_give_a_page(tmp_path):
    arena = arena_run(tmp_path / "arena", games_per_order=1)
    # ("kind": "arena" is what makes the directory an arena run: without it, it is none)
    assert _fuzz(arena, "summary.json", tmp_path / "a.html", depth=3, skip=(("kind",),)) > 40
    assert _fuzz(arena, "games.jsonl", tmp_path / "a.html", depth=2) > 15

    training = training_run(tmp_path / "training", steps=1, eval_every=1, eval_episodes=1)
    config = yaml.safe_load((training / "config.yaml").read_text())
    for index, field in enumerate(_paths(config, depth=2)):
        for value in _odd_values(index):
            (training / "config.yaml").write_text(yaml.safe_dump(_replaced(config, field, value)))
            assert llm_envs_main(["report", str(training), "-o", str(tmp_path / "t.html")]) == 0, (field, value)


# ---------------------------------------------------------------------------- runs compared
def test_the_comparison_page_shows_the_interval_of_eval_compare(tmp_path):
    # The page's paired difference was a Student t interval: -0.750 [-1.037, -0.463] for a
    # difference of success rates (which cannot be below -1), where `eval --compare` printed
    # its paired bootstrap interval, -0.750 [-1.000, -0.500].
    a = eval_run(tmp_path / "a", "reference", episodes=12, env_id=SIGNALLING)
    b = eval_run(tmp_path / "b", "random", episodes=12, env_id=SIGNALLING)
    comparison = compare_runs(a, b)
    html = build_report([a, b])
    for result in comparison.paired:
        if result.name == "turns" or result.name in comparison.a.episodes[0].metrics:
            continue  # (the page's table: success and each agent's reward)
        quantity = "success" if result.name == "success" else f"reward of {result.name.removesuffix(': reward')}"
        cell = f"<td>{quantity}</td><td class=\"num\">{fmt_interval(result.difference.to_dict())}</td>"
        assert cell in html, (result.name, result.difference)
    assert "paired bootstrap interval" in html and "t interval" not in html


def test_runs_of_different_environments_are_refused_as_eval_compare_refuses(runs, tmp_path, capsys):
    # The page put a Signalling run and a Kuhn poker run side by side and said "No seed was
    # played by every run" (both played seeds 0 and 1).
    kuhn = eval_run(tmp_path / "kuhn", "random", episodes=2, env_id="llm/KuhnPoker-v0")
    with pytest.raises(CompareError) as refused:
        compare_runs(runs["random"], kuhn)
    with pytest.raises(ReportError) as caught:
        build_report([runs["random"], kuhn])
    assert str(caught.value) == str(refused.value)
    assert llm_envs_main(["report", str(runs["random"]), str(kuhn), "-o", str(tmp_path / "c.html")]) == 2
    assert "the runs are of different environments (llm/Signalling-v0 and llm/KuhnPoker-v0)" in capsys.readouterr().err
    assert not (tmp_path / "c.html").exists() and _leftovers(tmp_path) == []
