"""Training reports in headless Chromium: learning curves from metrics.jsonl and evaluation
transcripts at chosen steps; several runs overlaid; a real `llm-train` run (slow)."""

from __future__ import annotations

import json

import pytest

from llm_envs.episodes import load_episodes
from llm_envs.report import write_report
from llm_envs.report.training import ERROR_SHARES
from tests.report.fixtures import training_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    return training_run(tmp_path_factory.mktemp("training") / "signalling")


def _chart(view, title: str):
    return view.page.locator("figure.chart").filter(has=view.page.locator(f".chart-title:text-is('{title}')"))


def test_training_report_shows_curves_and_transcripts_at_chosen_steps(run, open_report):
    view = open_report(write_report([run]))
    page = view.page
    assert page.title() == "Training: signalling_at_grpo_l1"
    success = _chart(view, "success: training rollouts and evaluation")
    assert success.locator("path.series").evaluate_all("p => p.map(x => x.dataset.series)") == [
        "rollout/success", "eval/success"]
    for title, series in [("KL divergence to the reference", 1), ("entropy", 1), ("clip fraction", 1),
                          ("reward per episode, by agent", 4), ("completion length", 2),
                          ("time per step, by phase", 6)]:
        assert _chart(view, title).locator(".series").count() == series, title
    # every logged number is charted somewhere (a format_ok share as its error share), but for
    # those that were 0 at every step: the page names them instead of drawing flat lines
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = {ERROR_SHARES.get(k, k) for row in rows for k in row if k != "step"}
    always_zero = {ERROR_SHARES.get(k, k) for k in {k for row in rows for k in row}
                   if all(row.get(k, 0) == 0 for row in rows)} - {"rollout/success", "eval/success"}
    charted = set(page.locator("#curves .series").evaluate_all("p => p.map(x => x.dataset.series)"))
    phases = {k for k in logged if k.startswith("time/") and k != "time/step_s"}
    assert logged - phases - {"time/step_s"} - always_zero <= charted
    assert {k[len("time/"):-len("_s")] for k in phases} <= charted

    options = page.locator(".switch-select option").evaluate_all("o => o.map(x => x.value)")
    assert options == ["train0-step0", "train0-step3", "train0-step6"]
    visible = page.locator(".switch-panel:not([hidden]) .episode-list tbody tr")
    assert visible.count() == 6
    page.select_option(".switch-select", "train0-step6")
    last = load_episodes(run / "eval" / "step_00000006.jsonl")
    assert visible.count() == len(last)
    page.select_option(".switch-panel:not([hidden]) .f-outcome", "succeeded")
    assert visible.count() == sum(1 for e in last if e.success >= 1)
    visible.nth(0).click()
    page.wait_for_selector(".switch-panel:not([hidden]) article.episode")
    assert page.locator(".switch-panel:not([hidden]) article.episode li.action").count() == 2
    view.screenshot("training")
    view.assert_clean()


def test_steps_option_and_a_link_into_a_step(run, open_report, tmp_path):
    html = write_report([run], tmp_path / "r.html", steps=[3])
    view = open_report(html, "#ep/train0-step3/2")
    assert view.page.locator(".switch-select option").count() == 1
    view.page.wait_for_selector("article.episode[data-episode='2']")
    view.assert_clean()


def test_several_training_runs_share_the_charts(tmp_path, open_report):
    a = training_run(tmp_path / "a", steps=4, eval_every=2, eval_episodes=2)
    b = training_run(tmp_path / "b", steps=4, eval_every=2, eval_episodes=2, phase=1.5)
    view = open_report(write_report([a, b], tmp_path / "both.html"))
    kl = _chart(view, "KL divergence to the reference")
    assert kl.locator("path.series").evaluate_all("p => p.map(x => x.dataset.series)") == [
        "a · train/shared/kl", "b · train/shared/kl"]
    assert view.page.locator(".switch-select option").count() == 6  # 3 evaluations per run
    view.assert_clean()


@pytest.mark.slow
def test_llm_train_writes_a_report_of_the_real_run(tmp_path, open_report):
    pytest.importorskip("torch")
    from llm_trainers.cli import main as train_main

    out = tmp_path / "run"
    assert train_main(["signalling_at_grpo_l1", f"run.output_dir={out}", "run.steps=2", "run.eval_every=1",
                       "run.eval_episodes=4", "run.progress=false", "env.num_envs=4", "rollout.k=2",
                       "run.tensorboard=false", "run.save_every=-1", "run.export_final=false"]) == 0
    view = open_report(out / "report.html")
    page = view.page
    charted = set(page.locator("#curves .series").evaluate_all("p => p.map(x => x.dataset.series)"))
    assert {"rollout/success", "eval/success", "update"} <= charted
    # KL and clipping can be 0 at every step of so short a run: then the page names their panels
    not_drawn = " ".join(page.locator("#curves p.note").all_inner_texts())
    assert "train/shared/kl" in charted or "KL divergence to the reference" in not_drawn
    assert "train/shared/clip_frac" in charted or "clip fraction" in not_drawn
    assert page.locator(".switch-select option").count() == 3  # evaluations at steps 0, 1, 2
    assert page.locator(".switch-panel:not([hidden]) .episode-list tbody tr").count() == 4
    view.assert_clean()
