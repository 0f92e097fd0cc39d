"""Arena reports in headless Chromium, from a run directory in the arena's format (version 1)."""

from __future__ import annotations

import json

import pytest

from llm_envs.report import write_report
from tests.report.fixtures import ARENA_AGENTS, arena_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    return arena_run(tmp_path_factory.mktemp("arena") / "signalling-arena")


def test_arena_report_ratings_matrix_and_games(run, open_report):
    summary = json.loads((run / "summary.json").read_text())
    games = [json.loads(line) for line in (run / "games.jsonl").read_text().splitlines()]
    view = open_report(write_report([run]))
    page = view.page
    assert page.title() == "Arena: llm/Signalling-v0"

    # ratings, best first, each with its interval
    best_first = sorted(summary["ratings"], key=lambda r: -r["rating"])
    rows = page.locator("table.ratings tbody tr")
    assert rows.count() == len(ARENA_AGENTS)
    for i, rating in enumerate(best_first):
        cells = rows.nth(i).locator("td").all_inner_texts()
        assert cells[1] == rating["agent"]
        assert cells[2] == f"{rating['rating']:.1f} [{rating['ci_low']:.1f}, {rating['ci_high']:.1f}]"
    assert view.count("#ratings figure.chart circle.dot") == len(ARENA_AGENTS)

    # head to head: every ordered pair, from the row agent's side; the diagonal is empty
    assert view.count("table.matrix td.self") == len(ARENA_AGENTS)
    for a, row in summary["head_to_head"].items():
        for b, cell in row.items():
            shown = page.locator(f"table.matrix td[data-a='{a}'][data-b='{b}']").inner_text()
            assert shown.split() == [f"{cell['score']:.2f}", f"{cell['wins']}-{cell['draws']}-{cell['losses']}"]

    # games: all listed; the outcome filters count what games.jsonl says
    listed = page.locator(".episode-list tbody tr")
    assert listed.count() == len(games)
    page.select_option(".f-outcome", "draw")
    assert listed.count() == sum(1 for g in games if g["winner"] is None)
    page.select_option(".f-outcome", "won:alpha")
    assert listed.count() == sum(1 for g in games if g["winner"] == "alpha")
    page.select_option(".f-outcome", "")
    page.select_option(".f-agent", "gamma")
    assert listed.count() == sum(1 for g in games if "gamma" in g["seats"])
    with_gamma = next(g for g in games if "gamma" in g["seats"] and "episode" in g)
    page.click(f".episode-list tbody tr[data-index='{with_gamma['game_index']}']")
    page.wait_for_selector(f"article.episode[data-episode='{with_gamma['game_index']}']")
    others = [r for r in with_gamma["episode"]["records"] if r["agent"] != with_gamma["seats"]["gamma"]]
    assert page.locator("article.episode li.action.dimmed").count() == len(others)  # gamma's moves stand out
    page.select_option(".f-agent", "")

    # a game opens with its seats and winner, every move by its seat and the agent in it
    game = games[0]
    page.click(f".episode-list tbody tr[data-index='{game['game_index']}']")
    page.wait_for_selector("article.episode")
    text = page.inner_text("article.episode")
    assert page.locator("article.episode h3").inner_text().startswith(f"Game #{game['game_index']} · seed {game['seed']}")
    a, b = list(game["seats"])
    assert f"{a} as speaker, {b} as listener" in text
    assert f"winner: {game['winner'] or 'draw'}" in text
    assert page.locator("article.episode li.action").count() == len(game["episode"]["records"])
    assert f"played by {a}" in page.locator("article.episode li.action").nth(0).inner_text()
    view.screenshot("arena")

    # the last game line has no episode: it is still listed and opens with a note
    page.click(f".episode-list tbody tr[data-index='{games[-1]['game_index']}']")
    page.wait_for_selector(f"article.episode[data-episode='{games[-1]['game_index']}']")
    assert "No actions were saved" in page.inner_text("article.episode")
    view.assert_clean()
