"""The report of an arena run: ratings with intervals, the head-to-head matrix, the games.

Reads the arena's run directory (format version 1): ``summary.json`` with ``"kind": "arena"``,
``ratings`` (one entry per agent: ``mu``, ``sigma``, ``rating``, ``ci_low``, ``ci_high``, games,
wins, draws, losses, score) and ``head_to_head`` (``a → b → wins/draws/losses/games/score``, from
a's side); ``games.jsonl`` with one game per line (``game_index``, ``seed``, ``seats`` agent →
seat, ``winner`` or null for a draw, ``returns`` agent → return, ``episode`` as in
``episodes.jsonl``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from llm_envs.episodes import EpisodeResult
from llm_envs.report import svg
from llm_envs.report.episodes import dataset, episodes_html
from llm_envs.report.page import esc, esc_attr, fmt, isolated, notes_html, table, to_float
from llm_envs.report.runs import ArenaRun, game_episode

Section = tuple[str, str, str]


def ranked(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rating entries, best first (by rating, then mu)."""
    ratings = [r for r in summary.get("ratings") or [] if isinstance(r, Mapping) and "agent" in r]
    return sorted(ratings, key=lambda r: (-_sortable(r.get("rating")), -_sortable(r.get("mu")), str(r["agent"])))


def _sortable(value: Any) -> float:
    value = to_float(value)
    return value if math.isfinite(value) else -math.inf


def rating_table(summary: Mapping[str, Any]) -> str:
    rows = []
    for rank, r in enumerate(ranked(summary), start=1):
        rating, low, high = to_float(r.get("rating")), to_float(r.get("ci_low")), to_float(r.get("ci_high"))
        interval = f"{fmt(rating, 1)} [{fmt(low, 1)}, {fmt(high, 1)}]"
        rows.append([str(rank), str(r["agent"]), interval, fmt(to_float(r.get("mu")), 2), fmt(to_float(r.get("sigma")), 2),
                     fmt(r.get("games")), f"{fmt(r.get('wins'))} / {fmt(r.get('draws'))} / {fmt(r.get('losses'))}",
                     fmt(to_float(r.get("score")), 3)])
    return table(["#", "agent", "rating [interval]", "mu", "sigma", "games", "wins / draws / losses", "score"],
                 rows, cls="summary ratings", numeric_from=2)


def _score_colour(score: float) -> str:
    """0 → red, 0.5 → pale grey, 1 → green (background of a head-to-head cell)."""
    if not math.isfinite(score):
        return "transparent"
    score = min(1.0, max(0.0, score))
    neutral, low, high = (242, 242, 242), (230, 124, 115), (87, 187, 138)
    end, t = (high, (score - 0.5) * 2) if score >= 0.5 else (low, (0.5 - score) * 2)
    r, g, b = (round(n + (e - n) * t) for n, e in zip(neutral, end))
    return f"rgb({r},{g},{b})"


def head_to_head(summary: Mapping[str, Any]) -> str:
    """The matrix: row agent's score against the column agent (1 = won every game)."""
    h2h = summary.get("head_to_head") or {}
    order = [str(r["agent"]) for r in ranked(summary)]
    order += [a for a in h2h if a not in order]
    if not order:
        return '<p class="note">No head-to-head results in summary.json.</p>'
    head = "".join(f'<th class="col">{esc(b)}</th>' for b in order)
    body = []
    for a in order:
        cells = [f'<th class="row">{esc(a)}</th>']
        for b in order:
            if a == b:
                cells.append('<td class="self">—</td>')
                continue
            result = (h2h.get(a) or {}).get(b)
            if not isinstance(result, Mapping) or not result.get("games"):
                cells.append('<td class="none">·</td>')
                continue
            score = to_float(result.get("score"))
            wins, draws, losses = (fmt(result.get(k, 0)) for k in ("wins", "draws", "losses"))
            title = (f"{isolated(a)} vs {isolated(b)}: {wins} wins, {draws} draws, "
                     f"{losses} losses in {fmt(result.get('games'))} games")
            cells.append(
                f'<td class="h2h" style="background:{_score_colour(score)}" title="{esc_attr(title)}" '
                f'data-a="{esc_attr(a)}" data-b="{esc_attr(b)}"><b>{esc(fmt(score, 2))}</b><br><small>'
                f"{esc(wins)}-{esc(draws)}-{esc(losses)}</small></td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<p class="note">Score of the row agent against the column agent (win 1, draw ½), with wins-draws-losses; '
        "green: the row agent is stronger.</p>"
        f'<table class="matrix"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def _facts(run: ArenaRun) -> str:
    summary = run.summary
    agents = summary.get("agents") or {}
    settings = summary.get("settings") or {}
    rows = [("run directory", str(run.path)), ("environment", summary.get("env_id")),
            ("games", len(run.games)), ("format version", summary.get("format_version"))]
    rows += [(f"agent {isolated(name)}", spec) for name, spec in agents.items()]
    if isinstance(settings, Mapping):
        rows += [(str(k), v if isinstance(v, (str, int, float)) else repr(v)) for k, v in settings.items()]
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows if v not in (None, ""))
    return f'<table class="facts">{body}</table>'


def games_dataset(run: ArenaRun) -> dict[str, Any]:
    agents = list(run.summary.get("agents") or {}) or list(
        dict.fromkeys(a for g in run.games for a in (g.get("seats") or {})))
    episodes: list[EpisodeResult] = []
    rows, extras = [], []
    for position, game in enumerate(run.games):
        seats = {str(k): str(v) for k, v in (game.get("seats") or {}).items()}
        returns = {str(k): float(to_float(v)) for k, v in (game.get("returns") or {}).items()}
        winner = game.get("winner")
        game_index = game.get("game_index")
        if not isinstance(game_index, int):  # missing (or left out as unreadable): its place in the file
            game_index = position
        episode = game_episode(game) or EpisodeResult(
            index=game_index, seed=int(game.get("seed", 0) or 0),
            env_id=str(run.summary.get("env_id")), episode_id="", agents={v: k for k, v in seats.items()},
            rewards={}, metrics={}, records=[], steps=[],
        )
        episode = dataclasses.replace(episode, index=game_index)  # a game is known by its game index
        episodes.append(episode)
        tags = ["draw"] if winner is None else ["decisive", f"won:{winner}"]
        format_errors: dict[str, int] = {}
        for record in episode.records:
            if not record.get("format_ok", True):
                name = episode.agents.get(str(record.get("agent")), str(record.get("agent")))
                format_errors[name] = format_errors.get(name, 0) + 1
        if format_errors:
            tags.append("format-error")
        rows.append({
            "i": game_index,
            "seed": game.get("seed"),
            "id": episode.episode_id,
            "env": episode.env_id,
            "s": None,
            "t": episode.turns,
            "r": returns,
            "fe": format_errors,
            "ce": {},
            "tok": sum(episode.tokens()),
            "n": len(episode.records),
            "dur": round(float(episode.duration_s), 3),
            "ag": list(seats),
            "tags": tags,
            # (composed text: its run text isolated; the page's script draws isolates as <bdi>)
            "x": [", ".join(f"{isolated(a)}: {isolated(s)}" for a, s in seats.items()),
                  "draw" if winner is None else str(winner)],
        })
        extras.append({"seats": seats, "winner": winner, "returns": returns})
    filters = [("decisive", "decisive"), ("draw", "draws"), ("format-error", "with a format error")]
    filters += [(f"won:{a}", f"won by {isolated(a)}") for a in agents]
    return dataset(episodes, label=f"{len(run.games)} games", agents=agents, filters=filters, rows=rows,
                   columns=["seats", "winner"], reward_label="return", noun="games", extras=extras)


def sections(run: ArenaRun) -> tuple[list[Section], dict[str, Any]]:
    ratings = ranked(run.summary)
    chart = svg.interval_chart(
        [(str(r["agent"]), to_float(r.get("rating")), to_float(r.get("ci_low")), to_float(r.get("ci_high"))) for r in ratings],
        title="rating with its interval", x_label="rating",
    ) if ratings else ""
    data = {"games": games_dataset(run)}
    return [
        ("ratings", "Ratings", notes_html(run.notes) + f'<div class="tables">{rating_table(run.summary)}</div><div class="charts">{chart}</div>'),
        ("head-to-head", "Head to head", head_to_head(run.summary)),
        ("games", "Games", episodes_html("games", "Click a game to read it: every move with its agent and seat.")),
        ("run", "Settings", _facts(run)),
    ], data


def subtitle(run: ArenaRun, agents: Sequence[str] | None = None) -> str:
    names = agents or [str(r["agent"]) for r in ranked(run.summary)]
    return f"{isolated(run.summary.get('env_id'))}: {len(names)} agents, {len(run.games)} games"
