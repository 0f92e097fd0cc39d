"""Reading run directories for a report: which kind of run, and its data, read tolerantly.

=============  ===========================================================================
evaluation     ``episodes.jsonl`` (and ``summary.json``) from ``llm-envs eval``
training       ``metrics.jsonl`` (with ``config.yaml`` and ``eval/step_*.jsonl``) from ``llm-train``
arena          ``summary.json`` with ``"kind": "arena"`` and ``games.jsonl`` from ``llm-envs arena``
=============  ===========================================================================

Episodes are read through the project's own loaders (:func:`llm_envs.episodes.load_episodes`),
so whatever they accept or refuse, the report does too. Everything else is read with defaults
for missing keys: a report of an older or newer run shows what it can and says what is absent.
A field of ``summary.json`` (or of an arena game, or a training config's section) whose value
has a shape the report cannot read (a hand edit: ``"rewards": {"a": null}``, ``"episodes":
"many"``) is read as absent, and the page names it in a note (:func:`conform`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_envs.episodes import EpisodeResult, load_episodes
from llm_envs.evaluation.shapes import ARENA_GAME, ARENA_SUMMARY, EVAL_SUMMARY, TRAINING_CONFIG, conform
from llm_envs.report.page import fmt, isolated

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.yaml"
GAMES_FILE = "games.jsonl"
TRAINING_EVAL_GLOB = "eval/step_*.jsonl"


class ReportError(ValueError):
    """A path that is not a run the report can read, runs that cannot be shown together, or an
    output path the page cannot be written to."""


@dataclass
class EvalRun:
    """An evaluation run: its summary (recomputed when ``summary.json`` is missing; fields of a
    shape the report cannot read left out, see :func:`conform`) and episodes; ``stored`` is
    ``summary.json`` as the file holds it (None without one)."""

    path: Path
    summary: dict[str, Any]
    episodes: list[EpisodeResult]
    label: str = ""
    notes: list[str] = field(default_factory=list)
    kind: str = "evaluation"
    stored: Any = None


@dataclass
class TrainingRun:
    """A training run: the config, one metrics row per logged step, and its evaluations."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]]
    evaluations: dict[int, Path]
    label: str = ""
    notes: list[str] = field(default_factory=list)
    kind: str = "training"


@dataclass
class ArenaRun:
    """An arena run: ratings, head-to-head results and the games."""

    path: Path
    summary: dict[str, Any]
    games: list[dict[str, Any]]
    label: str = ""
    notes: list[str] = field(default_factory=list)
    kind: str = "arena"


Run = EvalRun | TrainingRun | ArenaRun




def ignored_note(file: str, ignored: Sequence[str]) -> list[str]:
    """The note naming the fields of ``file`` that :func:`conform` left out (none: no note)."""
    if not ignored:
        return []
    shown = ", ".join(isolated(item) for item in ignored[:12]) + (f" and {len(ignored) - 12} more" if len(ignored) > 12 else "")
    return [f"{file}: {len(ignored)} field{'s' if len(ignored) != 1 else ''} of a shape this report cannot read "
            f"{'were' if len(ignored) != 1 else 'was'} left out (as if absent): {shown}"]


# ---------------------------------------------------------------------------- detection
def detect_kind(path: str | Path) -> str:
    """``"evaluation"``, ``"training"`` or ``"arena"``; :class:`ReportError` for anything else."""
    path = _run_dir(path)
    summary = _read_json(path / SUMMARY_FILE)
    if isinstance(summary, dict) and summary.get("kind") == "arena":
        return "arena"
    if (path / METRICS_FILE).exists():
        return "training"
    if (path / EPISODES_FILE).exists():
        return "evaluation"
    if list(path.glob(TRAINING_EVAL_GLOB)) and (path / CONFIG_FILE).exists():
        return "training"
    nested = sorted(p.parent for p in path.rglob(EPISODES_FILE))
    if nested:
        shown = ", ".join(str(p) for p in nested[:4]) + (", ..." if len(nested) > 4 else "")
        raise ReportError(
            f"{path} is not one run but holds {len(nested)} evaluation runs ({shown}): "
            "pass one of them, or several to compare them"
        )
    raise ReportError(
        f"{path} holds no {EPISODES_FILE}, {METRICS_FILE} or arena {SUMMARY_FILE}: is it an "
        "`llm-envs eval`, `llm-envs arena` or `llm-train` output directory?"
    )


def _run_dir(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise ReportError(f"{path} does not exist")
    if path.is_file():  # a run's own file: the run is its directory
        if path.name in (EPISODES_FILE, SUMMARY_FILE, METRICS_FILE, GAMES_FILE):
            return path.parent
        raise ReportError(f"{path} is a file; pass the run directory that holds it")
    return path


def load_run(path: str | Path) -> Run:
    """Read the run at ``path`` (see the module docstring for what each kind holds)."""
    kind = detect_kind(path)
    directory = _run_dir(path)
    if kind == "arena":
        return _load_arena(directory)
    if kind == "training":
        return _load_training(directory)
    return _load_evaluation(directory)


def label_runs(runs: Sequence[Run]) -> None:
    """Give each run the shortest trailing part of its path that tells it from the others."""
    parts = [run.path.resolve().parts for run in runs]
    depth = 1
    while depth < max(len(p) for p in parts):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            break
        depth += 1
    for run, p in zip(runs, parts):
        run.label = "/".join(p[-depth:]) or str(run.path)


# ---------------------------------------------------------------------------- evaluation
def _load_evaluation(path: Path) -> EvalRun:
    from llm_envs.evaluation.summary import summarize

    episodes = sorted(load_episodes(path / EPISODES_FILE), key=lambda e: e.index)
    notes: list[str] = []
    stored = _read_json(path / SUMMARY_FILE)
    if not isinstance(stored, dict):
        summary = summarize(episodes)
        notes.append(f"no readable {SUMMARY_FILE} (an interrupted run?): the summary is computed from the episodes")
    else:
        ignored: list[str] = []
        commands = stored.get("commands")
        if isinstance(commands, (dict, str)):  # one invocation, not in a list
            commands = [commands]
        if isinstance(commands, list):  # an invocation written as its command line alone
            commands = [{"command": c} if isinstance(c, str) else c for c in commands]
        summary = conform({**stored, "commands": commands} if "commands" in stored else stored,
                          EVAL_SUMMARY, "summary", ignored)
        notes += ignored_note(SUMMARY_FILE, [item.removeprefix("summary.") for item in ignored])
        if summary.get("episodes", len(episodes)) not in (None, len(episodes)):
            notes.append(
                f"{SUMMARY_FILE} counts {summary['episodes']} episodes but {EPISODES_FILE} holds "
                f"{len(episodes)}: the numbers below are from {SUMMARY_FILE}, the episode list from the file"
            )
        from llm_envs.evaluation.summary import context_length_note, mixed_settings_note

        notes[:0] = incomplete_notes(summary) + [
            note for note in (mixed_settings_note(_isolating(summary)), context_length_note(_isolating(summary))) if note]
    return EvalRun(path, summary, episodes, notes=notes, stored=stored if isinstance(stored, dict) else None)


def _isolating(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with the run text that :func:`mixed_settings_note` and
    :func:`context_length_note` put in their sentences (each changed setting, each agent's name)
    :func:`isolated`."""
    commands = [
        {**c, "settings_changed": [isolated(change) for change in c.get("settings_changed") or []]}
        if isinstance(c, dict) else c
        for c in summary.get("commands") or []
    ]
    calls = summary.get("agent_calls")
    calls = [{**c, "agent": isolated(c.get("agent"))} if isinstance(c, dict) else c
             for c in (calls if isinstance(calls, list) else [])]
    return {**summary, "commands": commands, "agent_calls": calls}


def incomplete_notes(summary: dict[str, Any]) -> list[str]:
    """What a page must say first about a run that did not play every episode it was asked for
    (``"status": "incomplete"``: infrastructure failures stopped some): how many, why, and that
    the numbers cover only the episodes that finished."""
    requested = summary.get("episodes_requested")
    finished = summary.get("episodes")
    if summary.get("status") != "incomplete" and not (
        isinstance(requested, int) and isinstance(finished, int) and finished < requested
    ):
        return []
    incomplete = summary.get("incomplete") or {}
    reasons = incomplete.get("reasons") or {}
    # Reasons are run text (an agent's or a server's error message): each isolated, so that a
    # bidi control in one cannot reorder the sentence around it.
    why = ("; ".join(f"{isolated(reason)} ({fmt(count)})" for reason, count in reasons.items())
           if isinstance(reasons, dict) else isolated(reasons))
    missing = incomplete.get("episodes")
    if missing is None:
        missing = (requested - finished) if isinstance(requested, int) and isinstance(finished, int) else "some"
    return [
        f"INCOMPLETE RUN: {fmt(missing)} of the {fmt(requested) if requested is not None else '?'} episodes asked "
        f"for did not finish{f' ({why})' if why else ''}. Every number on this page covers only the {fmt(finished)} "
        "that did; run the same eval command with --resume to play the rest."
    ]


# ---------------------------------------------------------------------------- training
_STEP_FILE = re.compile(r"step_(\d+)\.jsonl$")


def _load_training(path: Path) -> TrainingRun:
    notes: list[str] = []
    metrics = read_jsonl(path / METRICS_FILE, notes)
    config: dict[str, Any] = {}
    config_path = path / CONFIG_FILE
    if config_path.exists():
        try:
            import yaml

            loaded = yaml.safe_load(config_path.read_text(encoding="utf-8"))
            ignored: list[str] = []
            config = conform(loaded if isinstance(loaded, dict) else {}, TRAINING_CONFIG, "config", ignored)
            notes += ignored_note(CONFIG_FILE, [item.removeprefix("config.") for item in ignored])
        except Exception as exc:  # noqa: BLE001 - a damaged config must not hide the curves
            notes.append(f"{CONFIG_FILE} could not be read: {isolated(exc)}")
    evaluations = {}
    for file in sorted(path.glob(TRAINING_EVAL_GLOB)):
        match = _STEP_FILE.search(file.name)
        if match:
            evaluations[int(match.group(1))] = file
    return TrainingRun(path, config, metrics, evaluations, notes=notes)


def read_jsonl(path: Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file; lines that do not parse are skipped and counted in
    ``notes`` (a torn last line is what a crash during a write leaves)."""
    if not path.exists():
        return []
    rows, bad = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    if bad and notes is not None:
        notes.append(f"{path.name}: {bad} line{'s' if bad != 1 else ''} could not be read and {'were' if bad != 1 else 'was'} skipped")
    return rows


def metric_value(value: Any) -> float | None:
    """A metrics.jsonl value as a finite float, or None (the logger writes non-finite as null)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


# ---------------------------------------------------------------------------- arena
def _load_arena(path: Path) -> ArenaRun:
    notes: list[str] = []
    ignored: list[str] = []
    summary = conform(_read_json(path / SUMMARY_FILE), ARENA_SUMMARY, "summary", ignored)
    version = summary.get("format_version")
    if version not in (None, 1):
        notes.append(f"arena format_version {isolated(version)}: this report knows version 1; some parts may be missing")
    notes += ignored_note(SUMMARY_FILE, [item.removeprefix("summary.") for item in ignored])
    ignored = []
    games = [conform(game, ARENA_GAME, f"game {i + 1}", ignored)
             for i, game in enumerate(read_jsonl(path / GAMES_FILE, notes))]
    notes += ignored_note(GAMES_FILE, ignored)
    games.sort(key=lambda g: (g.get("game_index") is None, g.get("game_index") or 0))
    return ArenaRun(path, summary, games, notes=notes)


def game_episode(game: dict[str, Any]) -> EpisodeResult | None:
    """The episode of an arena game as :func:`load_run` read it, or None when the line holds
    none, or one without a field an episode needs."""
    data = game.get("episode")
    if not data or not isinstance(data, dict):
        return None
    try:
        return EpisodeResult.from_dict(data)
    except TypeError:  # a field an episode needs is missing (or was left out as unreadable)
        return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
