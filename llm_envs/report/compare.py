"""Several evaluation runs side by side: the numbers in columns, and episodes paired by seed.

Two runs that played the same environment from the same seeds faced the same problems, so
their episodes pair up. The pairs where the runs differ come first (a different outcome, then
the largest reward difference): that is where one model does what the other does not. The
paired difference of each run against the first (mean over shared seeds, with its interval) is
sharper than comparing the two runs' own intervals; it is computed by
:func:`llm_envs.evaluation.stats.paired_comparison`, as ``llm-envs eval --compare`` computes it
(the same pairs in the same order: the same paired bootstrap interval). Runs of different
environments are refused as ``eval --compare`` refuses them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from llm_envs.episodes import EpisodeResult
from llm_envs.evaluation.stats import paired_comparison
from llm_envs.report import svg
from llm_envs.report.episodes import dataset
from llm_envs.report.evaluation import pairs_text, run_facts
from llm_envs.report.page import esc, fmt_interval, isolated, notes_html, table, to_float
from llm_envs.report.runs import EvalRun, ReportError

Section = tuple[str, str, str]


def pair_episodes(runs: Sequence[EvalRun]) -> tuple[list[dict[str, Any]], int]:
    """Pairs of episodes played from the same (environment, seed) in every run, differing
    first; and how many episodes had no partner."""
    positions: list[dict[tuple[str, int], int]] = []
    for run in runs:
        seen: dict[tuple[str, int], int] = {}
        for pos, episode in enumerate(run.episodes):
            # A repeated seed pairs once: its last episode, the one `eval --compare` pairs.
            seen[(episode.env_id, episode.seed)] = pos
        positions.append(seen)
    shared = set(positions[0]).intersection(*positions[1:]) if positions else set()
    pairs = []
    for env_id, seed in shared:
        cells = [p[(env_id, seed)] for p in positions]
        episodes = [run.episodes[pos] for run, pos in zip(runs, cells)]
        outcome_differs = len({e.success for e in episodes}) > 1
        agents = sorted({a for e in episodes for a in e.rewards})
        spread = max(
            (max(e.rewards.get(a, 0.0) for e in episodes) - min(e.rewards.get(a, 0.0) for e in episodes)
             for a in agents),
            default=0.0,
        )
        differs = "outcome" if outcome_differs else "reward" if spread > 1e-9 else ""
        pairs.append({"env": env_id, "seed": seed, "cells": cells, "differs": differs, "spread": spread})
    rank = {"outcome": 0, "reward": 1, "": 2}
    pairs.sort(key=lambda p: (rank[p["differs"]], -p["spread"], p["seed"]))
    unpaired = sum(len(run.episodes) for run in runs) - len(pairs) * len(runs)
    return pairs, unpaired


def _played_on(run: EvalRun) -> tuple[str, str]:
    """``(split, options)`` a run was played on, from its summary, else its ``run.json``."""
    from llm_envs.evaluation.compare import _run_settings

    settings = _run_settings(run.path) if "split" not in run.summary else {}
    split = run.summary.get("split", settings.get("split"))
    options = run.summary.get("env_kwargs", settings.get("env_kwargs")) or {}
    return str(split), json.dumps(options, sort_keys=True, default=repr)


def _paired_rows(runs: Sequence[EvalRun], pairs: Sequence[dict[str, Any]]) -> list[list[str]]:
    rows = []
    agents = list(dict.fromkeys(a for run in runs for a in (run.summary.get("rewards") or {})))
    # In seed order, as `eval --compare` pairs them: its bootstrap resamples pairs by position,
    # so the same pairs in another order would give another interval.
    pairs = sorted(pairs, key=lambda p: p["seed"])
    for k in range(1, len(runs)):
        def values(run_index: int, pick: Any) -> list[float]:
            return [pick(runs[run_index].episodes[p["cells"][run_index]]) for p in pairs]

        def success(e: EpisodeResult) -> float:
            return e.success

        base, other = values(0, success), values(k, success)
        diffs = [b - a for a, b in zip(base, other)]
        better = sum(1 for d in diffs if d > 0)
        worse = sum(1 for d in diffs if d < 0)
        rows.append([f"{isolated(runs[k].label)} − {isolated(runs[0].label)}", "success",
                     _interval_text(base, other), f"{better} better, {worse} worse, {len(diffs) - better - worse} equal"])
        for agent in agents:
            def reward(e: EpisodeResult, agent: str = agent) -> float:
                return float(e.rewards.get(agent, math.nan))

            both = [(a, b) for a, b in zip(values(0, reward), values(k, reward)) if math.isfinite(a) and math.isfinite(b)]
            if both:
                reward_diffs = [b - a for a, b in both]
                better = sum(1 for d in reward_diffs if d > 1e-12)
                worse = sum(1 for d in reward_diffs if d < -1e-12)
                rows.append(["", f"reward of {isolated(agent)}", _interval_text([a for a, _ in both], [b for _, b in both]),
                             f"{better} higher, {worse} lower, {len(reward_diffs) - better - worse} equal"])
    return rows


def _interval_text(a: Sequence[float], b: Sequence[float]) -> str:
    """The mean difference B - A of paired values with its 95% interval, from the function
    ``llm-envs eval --compare`` uses (a paired bootstrap)."""
    if not a:
        return "-"
    return fmt_interval(paired_comparison("", a, b).difference.to_dict())


def check_same_environment(runs: Sequence[EvalRun]) -> None:
    """Refuse runs of different environments, as ``llm-envs eval --compare`` does (in its
    words): a seed of one environment is not a problem of another, so nothing pairs."""
    envs = list(dict.fromkeys(str(run.summary["env_id"]) for run in runs if run.summary.get("env_id")))
    if len(envs) > 1:
        raise ReportError(f"the runs are of different environments ({' and '.join(envs)}); nothing to compare")


def sections(runs: Sequence[EvalRun]) -> tuple[list[Section], dict[str, Any], dict[str, Any]]:
    """Page sections, datasets (one per run) and the pairs the script lists; :class:`ReportError`
    for runs of different environments."""
    check_same_environment(runs)
    keys = [f"run{i}" for i in range(len(runs))]
    data = {
        key: dataset(run.episodes, label=run.label, agents=list(run.summary.get("rewards") or {}) or None)
        for key, run in zip(keys, runs)
    }
    played_on = [_played_on(run) for run in runs]
    if len(set(played_on)) > 1:
        # Seeds of different splits (or options) are different problems: nothing pairs.
        pairs, unpaired = [], sum(len(run.episodes) for run in runs)
    else:
        pairs, unpaired = pair_episodes(runs)

    header = ["", *[run.label for run in runs]]
    agents = list(dict.fromkeys(a for run in runs for a in (run.summary.get("rewards") or {})))
    rows = [
        ["environment", *[str(run.summary.get("env_id")) for run in runs]],
        ["episodes", *[str(run.summary.get("episodes", len(run.episodes))) for run in runs]],
        ["agents", *[pairs_text(run.summary.get("agents") or {}, "=") for run in runs]],
        ["success rate", *[fmt_interval(run.summary.get("success")) for run in runs]],
        ["turns / episode", *[fmt_interval(run.summary.get("turns"), 2) for run in runs]],
        ["tokens / episode", *[fmt_interval((run.summary.get("tokens_per_episode") or {}).get("total"), 1)
                               for run in runs]],
    ]
    for agent in agents:
        rows.append([f"reward of {isolated(agent)}", *[fmt_interval((run.summary.get("rewards") or {}).get(agent))
                                                       for run in runs]])
        rows.append([f"format errors of {isolated(agent)}",
                     *[fmt_interval((run.summary.get("format_error_rate") or {}).get(agent)) for run in runs]])
    side_by_side = table(header, rows, cls="summary compare", numeric_from=1)
    paired = _paired_rows(runs, pairs) if pairs else []
    paired_html = (
        f"<h3>Paired differences on the {len(pairs)} shared seeds (mean, 95% paired bootstrap interval, "
        "as <code>llm-envs eval --compare</code>)</h3>"
        + table(["runs", "quantity", "mean difference", "per seed"], paired, cls="summary", numeric_from=2)
        if paired else '<p class="note">The runs were played on different data splits or environment options ('
        + esc("; ".join(f"{isolated(run.label)}: split {isolated(split)}, options {isolated(options)}"
                        for run, (split, options) in zip(runs, played_on)))
        + '): the same seed is not the same problem, so the runs are not paired.</p>'
        if len(set(played_on)) > 1
        else '<p class="note">No seed was played by every run: the runs cannot be paired.</p>'
    )
    chart = svg.interval_chart(
        [(run.label, to_float((run.summary.get("success") or {}).get("value")),
          to_float((run.summary.get("success") or {}).get("low")), to_float((run.summary.get("success") or {}).get("high")))
         for run in runs],
        title="success rate by run (95% CI)", x_range=(0.0, 1.0),
    )
    facts = "".join(
        f'<details><summary>{esc(run.label)}</summary>{run_facts(run.summary, run.path, run.stored)}</details>'
        for run in runs
    )
    differing = sum(1 for p in pairs if p["differs"])
    note = (
        f"{len(pairs)} seeds played by every run; the runs differ on {differing} of them (listed first: "
        "a different outcome, then the largest reward difference)."
        + (f" {unpaired} episodes have no partner and are not listed." if unpaired else "")
        + " Click a pair to read its episodes side by side."
    )
    sections_ = [
        ("summary", "Side by side", notes_html([f"{isolated(run.label)}: {n}" for run in runs for n in run.notes])
         + f'<div class="tables">{side_by_side}</div>{paired_html}'
                                    f'<div class="charts">{chart}</div>'),
        ("pairs", "Paired episodes", f'<p class="note">{esc(note)}</p><div class="pairs" data-pairs="main"></div>'),
        ("runs", "Settings", facts),
    ]
    compare = {"main": {"datasets": keys, "labels": [run.label for run in runs], "pairs": pairs}}
    return sections_, data, compare


def compare_subtitle(runs: Sequence[EvalRun]) -> str:
    """``N evaluation runs of ENV: A vs B``, run text isolated."""
    envs = sorted({isolated(run.summary.get("env_id")) for run in runs})
    return f"{len(runs)} evaluation runs of {', '.join(envs)}: " + " vs ".join(isolated(run.label) for run in runs)
