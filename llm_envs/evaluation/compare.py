"""Compare two evaluation runs: side by side, and paired on the seeds they share.

Episode ``i`` of a run is played from seed ``SEED + i``, so two runs of the same environment and
split played on the same seeds face the same problems, episode for episode. The paired
comparison uses exactly those common seeds (:func:`llm_envs.evaluation.stats.paired_comparison`):
McNemar's exact test for 0/1 outcomes, the sign-flip permutation test for other values, and a
paired bootstrap interval of the difference B - A. Paired tests are far more sensitive than
comparing two intervals: the problems' own difficulty cancels out.

Runs that are not comparable are refused with a :class:`CompareError` saying why: different
environments or splits, no seed in common, or a directory that holds several runs (a ``demo``
directory).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_envs.episodes import EpisodeResult, load_episodes
from llm_envs.evaluation.evaluate import EPISODES_FILE, RUN_FILE, SUMMARY_FILE
from llm_envs.evaluation.shapes import EVAL_SUMMARY, conform
from llm_envs.evaluation.stats import PairedResult, paired_comparison
from llm_envs.evaluation.summary import (
    _table,
    compare_summaries,
    load_summary,
    mixed_settings_note,
    summarize,
)


class CompareError(ValueError):
    """The two runs cannot be compared (the message says why)."""


def resolve_run_dir(path: str | os.PathLike[str]) -> Path:
    """The evaluation run directory ``path`` names (the directory, its ``summary.json`` or its
    ``episodes.jsonl``)."""
    path = Path(path)
    if path.is_file() and path.name in (SUMMARY_FILE, EPISODES_FILE):
        path = path.parent
    if not path.exists():
        raise CompareError(f"{path} does not exist")
    if not path.is_dir():
        raise CompareError(f"{path} is not an evaluation run directory")
    if (path / EPISODES_FILE).exists():
        return path
    below = sorted(p.parent for p in path.rglob(EPISODES_FILE))
    if len(below) > 1:
        raise CompareError(
            f"{path} holds {len(below)} runs (e.g. {below[0]} and {below[1]}); compare two single "
            f"runs: llm-envs eval --compare {below[0]} {below[1]}"
        )
    if len(below) == 1:
        return below[0]
    raise CompareError(f"{path} holds no evaluation run (no {EPISODES_FILE}; is it an `llm-envs eval` directory?)")


@dataclass
class RunData:
    path: Path
    summary: dict[str, Any]
    episodes: list[EpisodeResult]
    notes: list[str] = field(default_factory=list)


def load_run(path: str | os.PathLike[str]) -> RunData:
    """A run's summary and episodes (bad lines of ``episodes.jsonl`` are skipped and noted)."""
    run_dir = resolve_run_dir(path)
    problems: list[Any] = []
    episodes = load_episodes(run_dir / EPISODES_FILE, problems=problems)
    notes = [f"{run_dir}: skipped {p}" for p in problems]
    try:
        ignored: list[str] = []
        summary = conform(load_summary(run_dir), EVAL_SUMMARY, "summary", ignored)
        if ignored:  # a hand edit: those fields read as absent
            notes.append(f"{run_dir}: {SUMMARY_FILE}: left out {len(ignored)} field(s) of a shape the comparison "
                         f"cannot read: {', '.join(item.removeprefix('summary.') for item in ignored[:12])}")
    except FileNotFoundError:
        summary = summarize(episodes)
        notes.append(f"{run_dir}: no {SUMMARY_FILE} (the run never ended); summarised from its episodes")
        # What the episodes do not say, from the run's settings: which split and options they
        # were played on (without it two unfinished runs on different splits were paired).
        settings = _run_settings(run_dir)
        for key in ("env_id", "split", "env_kwargs"):
            if key in settings and summary.get(key) is None:
                summary[key] = settings[key]
    if "rows" in summary and "env_id" not in summary:
        raise CompareError(f"{run_dir} is a demo table, not one run; name one of the runs below it")
    return RunData(run_dir, summary, episodes, notes)


def _run_settings(run_dir: Path) -> dict[str, Any]:
    """The settings ``run.json`` records (empty where it is missing or unreadable)."""
    try:
        stored = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    settings = stored.get("settings") if isinstance(stored, dict) else None
    return settings if isinstance(settings, dict) else {}


@dataclass
class Comparison:
    """What :func:`compare_runs` found: the side-by-side table, the paired results and notes."""

    a: RunData
    b: RunData
    labels: tuple[str, str]
    common_seeds: list[int]
    paired: list[PairedResult]
    notes: list[str]

    def format(self) -> str:
        side = compare_summaries(self.a.summary, self.b.summary, labels=self.labels)
        rows = [
            [
                r.name,
                str(r.n),
                f"{r.mean_a:.3f}",
                f"{r.mean_b:.3f}",
                r.difference.format(3).replace(" [", "  ["),
                _p(r.p_value),
                r.test + (f" ({r.detail})" if r.detail else ""),
            ]
            for r in self.paired
        ]
        paired = _table(rows, ["paired on common seeds", "pairs", "A", "B", "B - A [95% CI]", "p", "test"])
        notes = "".join(f"\nnote: {note}" for note in self.notes)
        return (
            f"{side}\n\n{paired}\n\np: two-sided, for each line on its own (many lines, many chances: "
            f"read a small p on one line of many with care).{notes}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": str(self.a.path),
            "b": str(self.b.path),
            "common_seeds": len(self.common_seeds),
            "paired": [r.to_dict() for r in self.paired],
            "notes": list(self.notes),
        }


def _p(p: float) -> str:
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def compare_runs(
    path_a: str | os.PathLike[str],
    path_b: str | os.PathLike[str],
    *,
    labels: tuple[str, str] | None = None,
    confidence: float = 0.95,
) -> Comparison:
    """Compare run B with run A (see the module docstring)."""
    a, b = load_run(path_a), load_run(path_b)
    labels = labels or (str(path_a), str(path_b))
    env_a, env_b = a.summary.get("env_id"), b.summary.get("env_id")
    if env_a and env_b and env_a != env_b:
        raise CompareError(f"the runs are of different environments ({env_a} and {env_b}); nothing to compare")
    if a.summary.get("split") != b.summary.get("split"):
        raise CompareError(
            f"the runs are on different data splits ({a.summary.get('split')} and {b.summary.get('split')})"
        )
    by_seed_a = {e.seed: e for e in a.episodes}
    by_seed_b = {e.seed: e for e in b.episodes}
    common = sorted(set(by_seed_a) & set(by_seed_b))
    if not common:
        raise CompareError(
            f"the runs share no seed (A: {_seed_range(by_seed_a)}, B: {_seed_range(by_seed_b)}); "
            "a comparison needs episodes played on the same seeds: rerun one with the other's --seed"
        )
    notes = a.notes + b.notes
    if len(common) < max(len(by_seed_a), len(by_seed_b)):
        notes.append(f"paired on the {len(common)} seeds both runs played (A has {len(by_seed_a)}, B {len(by_seed_b)})")
    if a.summary.get("env_kwargs", {}) != b.summary.get("env_kwargs", {}):
        notes.append(
            f"environment options differ (A {a.summary.get('env_kwargs')}, B {b.summary.get('env_kwargs')}): "
            "the same seed may not mean the same problem"
        )
    for label, run in zip(labels, (a, b), strict=True):
        if run.summary.get("status") == "incomplete":
            notes.append(f"{label} is incomplete: only its finished episodes are compared")
        mixed = mixed_settings_note(run.summary)
        if mixed:
            notes.append(f"{label}: {mixed}")
    ea = [by_seed_a[s] for s in common]
    eb = [by_seed_b[s] for s in common]
    paired = [paired_comparison("success", [e.success for e in ea], [e.success for e in eb], confidence)]
    agents = [x for x in ea[0].rewards if x in eb[0].rewards]
    for agent_id in agents:
        paired.append(
            paired_comparison(
                f"{agent_id}: reward",
                [e.rewards.get(agent_id, 0.0) for e in ea],
                [e.rewards.get(agent_id, 0.0) for e in eb],
                confidence,
            )
        )
    paired.append(paired_comparison("turns", [e.turns for e in ea], [e.turns for e in eb], confidence))
    names = [m for m in ea[0].metrics if m not in ("success", "turns")]
    for name in names:
        pairs = [
            (x.metrics[name], y.metrics[name])
            for x, y in zip(ea, eb, strict=True)
            if name in x.metrics and name in y.metrics and _finite(x.metrics[name]) and _finite(y.metrics[name])
        ]
        if pairs:
            paired.append(paired_comparison(name, [p[0] for p in pairs], [p[1] for p in pairs], confidence))
    return Comparison(a, b, labels, common, paired, notes)


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _seed_range(by_seed: dict[int, Any]) -> str:
    if not by_seed:
        return "no episodes"
    return f"seeds {min(by_seed)}..{max(by_seed)}"
