"""Evaluation reports in headless Chromium: real `llm-envs eval` runs, their lists, filters and
conversations; two runs compared; hostile and damaged run data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llm_envs.cli import main as llm_envs_main
from llm_envs.report import write_report
from tests.report.fixtures import EVAL_EPISODES, episodes_of, eval_run, rewrite_episodes


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("eval-runs")
    return {"random": eval_run(base / "random", "random"), "reference": eval_run(base / "reference", "reference")}


def _select(view, selector: str, value: str) -> None:
    view.page.select_option(selector, value)


def test_eval_writes_a_report_whose_list_filters_and_conversations_work(runs, open_report):
    run = runs["random"]
    episodes = episodes_of(run)
    assert (run / "report.html").exists()  # written by `llm-envs eval` itself
    view = open_report(run / "report.html")
    from playwright.sync_api import expect  # the open_report fixture skips where playwright is missing

    page = view.page
    assert "llm/PlanPath-v0" in page.title()
    assert view.count(".episode-list tbody tr") == EVAL_EPISODES
    assert view.texts(".episodes .count") == [f"{EVAL_EPISODES} of {EVAL_EPISODES} episodes"]
    # the summary and charts are there before any script: intervals, one row per agent
    summary = json.loads((run / "summary.json").read_text())
    assert f"{summary['success']['value']:.3f}" in page.inner_text("#summary")
    assert view.count("#summary table.agents tbody tr") == 2
    assert view.count("#summary figure.chart") == 2 and view.count("#charts figure.chart") == 2

    # outcome filter
    failed = [e for e in episodes if e.success < 1]
    _select(view, ".f-outcome", "failed")
    assert view.count(".episode-list tbody tr") == len(failed)
    assert all("failed" in t for t in view.texts(".episode-list tbody td.outcome"))
    _select(view, ".f-outcome", "succeeded")
    assert view.count(".episode-list tbody tr") == len(episodes) - len(failed)
    _select(view, ".f-outcome", "")

    # agent + reward range: the range applies to that agent's reward
    cut = sorted(e.rewards["tool"] for e in episodes)[len(episodes) // 2]
    _select(view, ".f-agent", "tool")
    page.fill(".f-min", str(cut))
    assert view.count(".episode-list tbody tr") == sum(1 for e in episodes if e.rewards["tool"] >= cut)
    page.fill(".f-min", "")
    _select(view, ".f-agent", "")

    # text search unpacks every episode: a program only one episode wrote
    target = episodes[3]
    program = target.records[0]["action"].strip().splitlines()[1]  # the print(...) line
    expected = {e.index for e in episodes if any(program in str(r["action"]) or program in r["observation"]["prompt"]
                                                  for r in e.records)}
    page.fill(".f-text", program)
    # expect() polls through the selector engine: wait_for_function evaluates its predicate with
    # eval(), which the report's Content-Security-Policy (no 'unsafe-eval') refuses.
    expect(page.locator(".episodes")).to_have_attribute("data-matching", str(len(expected)))
    shown = {int(i) for i in page.locator(".episode-list tbody tr").evaluate_all("rows => rows.map(r => r.dataset.index)")}
    assert shown == expected and target.index in shown
    page.fill(".f-text", "")
    expect(page.locator(".episodes")).to_have_attribute("data-matching", str(EVAL_EPISODES))

    # open an episode: one card per action, in order, with its agent, prompt on demand,
    # sandbox output and the team credit that reached the tool agent later
    page.click(f".episode-list tbody tr[data-index='{target.index}']")
    page.wait_for_selector("article.episode")
    cards = page.locator("article.episode li.action")
    assert cards.count() == len(target.records)
    assert cards.evaluate_all("cards => cards.map(c => c.dataset.agent)") == [r["agent"] for r in target.records]
    first = cards.nth(0)
    assert first.locator(".prompt").is_hidden()
    first.locator("button.link").click()
    assert target.records[0]["observation"]["prompt"].splitlines()[0] in first.locator(".prompt").inner_text()
    assert first.locator("pre.sandbox").inner_text().strip() == target.records[0]["info"]["output"].strip()
    delayed = first.locator("table.credit tr.delayed")
    assert delayed.count() == 1 and "later: with action #1 (turn 0, plan)" in delayed.inner_text()
    assert page.evaluate("location.hash") == f"#ep/run/{target.index}"
    view.screenshot("evaluation")
    view.assert_clean()


def test_a_link_to_an_episode_opens_it(runs, open_report):
    view = open_report(runs["random"] / "report.html", "#ep/run/5")
    view.page.wait_for_selector("article.episode[data-episode='5']")
    assert view.count("tr.selected[data-index='5']") == 1
    view.assert_clean()


def test_two_runs_compared_pair_the_same_seeds_differences_first(runs, open_report, tmp_path):
    out = tmp_path / "compare.html"
    assert llm_envs_main(["report", str(runs["reference"]), str(runs["random"]), "-o", str(out)]) == 0
    reference, random_ = episodes_of(runs["reference"]), episodes_of(runs["random"])
    differing = {a.seed for a, b in zip(reference, random_) if a.success != b.success or a.rewards != b.rewards}
    outcome = {a.seed for a, b in zip(reference, random_) if a.success != b.success}
    assert outcome  # the reference agents solve every puzzle, random ones rarely
    view = open_report(out)
    page = view.page
    assert view.count(".pair-list tbody tr") == EVAL_EPISODES
    seeds = [int(s) for s in page.locator(".pair-list tbody tr").evaluate_all("rows => rows.map(r => r.dataset.seed)")]
    assert set(seeds[: len(outcome)]) == outcome  # different outcomes come first
    _select(view, ".f-pairs", "differ")
    assert view.count(".pair-list tbody tr") == len(differing)
    page.click(".pair-list tbody tr >> nth=0")
    page.wait_for_selector(".side-by-side article.episode")
    assert view.count(".side-by-side article.episode") == 2
    titles = view.texts(".side-by-side article.episode h3")
    assert titles[0].startswith("reference") and titles[1].startswith("random")
    assert "Paired differences" in page.inner_text("#summary")
    view.screenshot("compare")
    view.assert_clean()


HOSTILE = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script><!--'


def test_hostile_and_damaged_run_data_is_shown_as_text(runs, open_report, tmp_path):
    run = tmp_path / "edited"
    shutil.copytree(runs["random"], run)

    def edit(line):
        if line["index"] == 0:
            line["records"][1]["action"] = HOSTILE
            line["records"][0]["observation"]["prompt"] = HOSTILE
            line["records"][0]["parsed"]["plan"] = HOSTILE
        if line["index"] == 1:  # a failed model call and a format error
            line["steps"][0]["error"] = "HTTP 500: upstream <b>died</b>"
            line["records"][1]["format_ok"] = False
        if line["index"] == 2:  # a record from before credits were logged
            for record in line["records"]:
                record.pop("credits", None)
        return line

    rewrite_episodes(run, edit)
    summary = json.loads((run / "summary.json").read_text())
    summary["agents"]["tool"] = HOSTILE
    (run / "summary.json").write_text(json.dumps(summary))
    html = write_report([run]).read_text()
    assert html.count("</script>") == 2  # the data block and the script: the data cannot close either

    view = open_report(run / "report.html")
    page = view.page
    assert HOSTILE in page.inner_text("#run")  # the agent name, as text
    page.click(".episode-list tbody tr[data-index='0']")
    page.wait_for_selector("article.episode")
    assert page.locator("article.episode li.action").nth(1).locator("pre.action-text").inner_text() == HOSTILE
    page.locator("article.episode li.action").nth(0).locator("button.link").click()
    assert HOSTILE in page.locator("article.episode .prompt").nth(0).inner_text()
    assert page.evaluate("window.__pwned") is None
    assert view.count("img") == 0

    _select(view, ".f-outcome", "call-error")
    assert view.count(".episode-list tbody tr") == 1
    page.click(".episode-list tbody tr[data-index='1']")
    page.wait_for_selector("article.episode[data-episode='1']")
    assert "model call failed: HTTP 500: upstream <b>died</b>" in page.inner_text("article.episode")
    _select(view, ".f-outcome", "format-error")
    assert view.count(".episode-list tbody tr") == 1
    _select(view, ".f-agent", "tool")  # the format error was the plan agent's
    assert view.count(".episode-list tbody tr") == 0
    _select(view, ".f-agent", "")
    _select(view, ".f-outcome", "")

    page.click(".episode-list tbody tr[data-index='2']")
    page.wait_for_selector("article.episode[data-episode='2']")
    assert "when it arrived was not recorded" in page.inner_text("article.episode")
    view.assert_clean()
