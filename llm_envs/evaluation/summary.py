"""From episode results to the numbers of an evaluation: summary dict and tables.

:func:`summarize` turns a run's :class:`~llm_envs.episodes.EpisodeResult` list into a
JSON-serialisable summary (every interval says how it was made in ``method``; see
:mod:`llm_envs.evaluation.stats`):

=========================  ===================================================================
``success``                mean success: Wilson (0/1 values) or bounded Wilson (fractions)
``turns``                  turns per episode (the environment's turn counter), t, >= 0
``rewards[agent]``         total reward per episode of each agent, t
``format_error_rate[a]``   share of the agent's actions (passive records left out) that broke
                           the output format: Wilson over the effective number of actions,
                           each episode a cluster (``effective_n``)
``call_error_rate[a]``     share of the agent's played decisions whose call failed: always 0
                           since format 2 (a failed call is never played); kept for readers
``tokens_per_episode``     prompt / completion / total tokens per episode (t, >= 0), and per
                           agent
``metrics[name]``          every other number of ``env.episode_metrics()``: Wilson, bounded
                           Wilson or t, by its values
=========================  ===================================================================

Comparing two runs is :mod:`llm_envs.evaluation.compare`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_envs.core.writing import for_terminal
from llm_envs.episodes import EpisodeResult
from llm_envs.evaluation.stats import (
    Interval,
    clustered_rate_interval,
    mean_interval,
    metric_interval,
    reward_interval,
)

#: Version of ``summary.json`` (see docs/evaluation.md for what each version holds).
SUMMARY_FORMAT_VERSION = 2
SUMMARY_VERSION = SUMMARY_FORMAT_VERSION  # the old name


def summarize(
    episodes: Sequence[EpisodeResult],
    *,
    confidence: float = 0.95,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary of a run (see the module docstring); ``extra`` is merged in (config, timing)."""
    n = len(episodes)
    agent_ids: list[str] = []
    for episode in episodes:
        for agent_id in list(episode.agents) + list(episode.rewards):
            if agent_id not in agent_ids:
                agent_ids.append(agent_id)
    summary: dict[str, Any] = {
        "format_version": SUMMARY_FORMAT_VERSION,
        "version": SUMMARY_FORMAT_VERSION,
        "env_id": episodes[0].env_id if episodes else None,
        "episodes": n,
        "agents": dict(episodes[0].agents) if episodes else {},
        "confidence": confidence,
    }
    success = [min(1.0, max(0.0, e.success)) for e in episodes]
    summary["success"] = metric_interval(success, confidence).to_dict()
    summary["turns"] = mean_interval([e.turns for e in episodes], confidence, lower=0.0).to_dict()

    rewards, format_errors, call_errors, tokens_by_agent = {}, {}, {}, {}
    for agent_id in agent_ids:
        rewards[agent_id] = reward_interval(
            [float(e.rewards.get(agent_id, 0.0)) for e in episodes], confidence
        ).to_dict()
        # Per episode (bad, all): an episode's actions are one cluster (clustered_rate_interval).
        format_counts = [
            (sum(1 for r in actions if not r.get("format_ok", True)), len(actions))
            for actions in (e.actions(agent_id) for e in episodes)
        ]
        call_counts = [
            (sum(1 for s in steps if s.get("error")), len(steps))
            for steps in ([s for s in e.steps if s.get("agent") == agent_id] for e in episodes)
        ]
        for table, counts in ((format_errors, format_counts), (call_errors, call_counts)):
            interval, effective = clustered_rate_interval(counts, confidence)
            table[agent_id] = {**interval.to_dict(), "errors": sum(b for b, _ in counts), "effective_n": effective}
        tokens_by_agent[agent_id] = mean_interval(
            [float(sum(e.tokens(agent_id))) for e in episodes], confidence, lower=0.0
        ).to_dict()
    summary["rewards"] = rewards
    summary["format_error_rate"] = format_errors
    summary["call_error_rate"] = call_errors
    prompt = [float(e.tokens()[0]) for e in episodes]
    completion = [float(e.tokens()[1]) for e in episodes]
    summary["tokens_per_episode"] = {
        "prompt": mean_interval(prompt, confidence, lower=0.0).to_dict(),
        "completion": mean_interval(completion, confidence, lower=0.0).to_dict(),
        "total": mean_interval(
            [p + c for p, c in zip(prompt, completion, strict=True)], confidence, lower=0.0
        ).to_dict(),
        "by_agent": tokens_by_agent,
    }
    metric_names: list[str] = []
    for episode in episodes:
        for name in episode.metrics:
            if name not in ("success", "turns") and name not in metric_names:
                metric_names.append(name)
    summary["metrics"] = {
        name: metric_interval(
            [float(e.metrics[name]) for e in episodes if name in e.metrics and _finite(e.metrics[name])],
            confidence,
        ).to_dict()
        for name in metric_names
    }
    summary["duration_s"] = math.fsum(e.duration_s for e in episodes)
    if extra:
        summary.update(extra)
    return summary


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _interval(data: Mapping[str, Any] | None) -> Interval:
    """An interval from its stored form; one without a value, its bounds and its count (a
    hand-edited summary) reads as no interval."""
    if not data or not all(isinstance(data.get(k), (int, float)) for k in ("value", "low", "high", "n")):
        return Interval(math.nan, math.nan, math.nan, 0)
    return Interval(
        float(data["value"]), float(data["low"]), float(data["high"]), int(data["n"]), str(data.get("method", ""))
    )


# ---------------------------------------------------------------------------- tables
def _table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> str:
    """Rows laid out in columns. Each cell is escaped for a terminal as one line first (agent
    names and other text from a run): a line break in a cell would print a row of its own, and
    an escape sequence measured as one character would push its row out of line."""
    all_rows = [[for_terminal(str(cell), one_line=True) for cell in row]
                for row in ([list(header)] if header else []) + [list(r) for r in rows]]
    if not all_rows:
        return ""
    widths = [max(len(row[i]) for row in all_rows) for i in range(len(all_rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in all_rows
    ]
    if header:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def incomplete_note(summary: Mapping[str, Any]) -> str:
    """One line saying that (and why) a run is incomplete, or ``""``."""
    incomplete = summary.get("incomplete") or {}
    if summary.get("status", "complete") == "complete" or not incomplete:
        return ""
    total = summary.get("episodes_requested", "?")
    reasons = incomplete.get("reasons") or {}
    top = next(iter(reasons), "")
    return (
        f"INCOMPLETE: {incomplete.get('episodes', '?')} of {total} episodes missing "
        f"(infrastructure failures, not model results{'; e.g. ' + top if top else ''}); "
        "the numbers cover the finished episodes only. Resume the run to complete it."
    )


def mixed_settings_note(summary: Mapping[str, Any]) -> str:
    """One line saying that a run was continued under other settings (``--force-resume``), and
    which changed, or ``""``: its numbers mix episodes played under both."""
    if not summary.get("mixed_settings"):
        return ""
    changes = [
        change
        for command in summary.get("commands") or []
        if isinstance(command, Mapping) and command.get("mixed")
        for change in command.get("settings_changed") or []
    ]
    return (
        "MIXED SETTINGS: this run was resumed with changed settings (--force-resume)"
        + (f": {'; '.join(map(str, changes))}" if changes else "")
        + "; its episodes were not all played under the same settings."
    )


def run_call_counts(summary: Mapping[str, Any]) -> tuple[int, int, bool]:
    """``(failed, calls, whole_run)``: the failed model calls and all calls of every
    invocation of the run (``whole_run`` True), summed from ``commands``; where an invocation
    did not record its calls (runs before 2026-12-02), this invocation's
    (``summary["infrastructure"]``, ``whole_run`` False)."""
    commands = [c for c in summary.get("commands") or [] if isinstance(c, Mapping)]
    counted = [c for c in commands if "calls" in c and "failed_calls" in c]
    if commands and len(counted) == len(commands):
        return (sum(int(c["failed_calls"]) for c in counted), sum(int(c["calls"]) for c in counted), True)
    infrastructure = summary.get("infrastructure") or {}
    return int(infrastructure.get("failed_calls") or 0), int(infrastructure.get("calls") or 0), False


def context_length_note(summary: Mapping[str, Any]) -> str:
    """One line naming the agents some of whose answers were a server's refusal of a prompt too
    long for the model's context (played as empty answers, so they count against the model:
    docs/evaluation.md), or ``""``."""
    entries = summary.get("agent_calls")
    parts = []
    for entry in entries if isinstance(entries, list) else ():
        count = entry.get("context_length_answers") if isinstance(entry, Mapping) else None
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            calls = entry.get("calls")
            of = f" of {calls}" if isinstance(calls, int) and not isinstance(calls, bool) else ""
            parts.append(f"{entry.get('agent')}: {count}{of} calls")
    if not parts:
        return ""
    return ("note: answered with a context-length refusal (prompt + max tokens past the model's context; "
            "played as empty answers): " + ", ".join(parts))


def format_summary(summary: Mapping[str, Any]) -> str:
    """The end-of-run table: run-level numbers, then one row per agent."""
    conf = int(round(100 * float(summary.get("confidence", 0.95))))
    agents = summary.get("agents", {})
    title = (
        f"{summary.get('env_id')}: {summary.get('episodes')} episodes"
        + (f", seed {summary['seed']}" if "seed" in summary else "")
        + (f", split {summary['split']}" if summary.get("split") else "")
    )
    for note in (incomplete_note(summary), mixed_settings_note(summary), context_length_note(summary)):
        if note:
            title += "\n" + note
    tokens = summary.get("tokens_per_episode", {})
    rows = [
        ["success rate", _interval(summary.get("success")).format()],
        ["turns / episode", _interval(summary.get("turns")).format(2)],
        ["tokens / episode", _tokens_cell(tokens)],
    ]
    for name, data in summary.get("metrics", {}).items():
        rows.append([name, _interval(data).format()])
    if summary.get("episodes_per_s"):
        rows.append(["episodes / s", f"{summary['episodes_per_s']:.2f}"])
    failed, calls, whole_run = run_call_counts(summary)
    if failed:
        label = "failed calls (never played)" if whole_run else "failed calls (never played; this invocation)"
        rows.append([label, f"{failed} of {calls}"])
    run_table = _table(rows, ["metric", f"value [{conf}% CI]"])
    agent_rows = []
    for agent_id in summary.get("rewards", {}):
        fmt = summary.get("format_error_rate", {}).get(agent_id, {})
        tok = summary.get("tokens_per_episode", {}).get("by_agent", {}).get(agent_id)
        agent_rows.append(
            [
                agent_id,
                str(agents.get(agent_id, "?")),
                _interval(summary["rewards"][agent_id]).format(),
                _interval(fmt).format(),
                f"{fmt.get('errors', 0)}/{fmt.get('n', 0)}",
                f"{_interval(tok).value:.0f}" if tok and tok.get("n") else "0",
            ]
        )
    agent_table = _table(
        agent_rows,
        [
            "agent",
            "played by",
            f"reward / episode [{conf}% CI]",
            "format-error rate",
            "format errors",
            "tokens / ep",
        ],
    )
    return f"{title}\n\n{run_table}\n\n{agent_table}"


def _tokens_cell(tokens: Mapping[str, Any]) -> str:
    total = _interval(tokens.get("total"))
    if total.n == 0 or math.isnan(total.value):
        return "n/a"
    prompt = _interval(tokens.get("prompt")).value
    completion = _interval(tokens.get("completion")).value
    return f"{total.value:.1f} (prompt {prompt:.1f}, completion {completion:.1f})"


def load_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run's summary from its directory or its ``summary.json``."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    if not path.exists():
        raise FileNotFoundError(f"no summary at {path} (is it an `llm-envs eval` output directory?)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a readable summary: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a summary (a JSON {type(data).__name__})")
    return data


def compare_summaries(a: Mapping[str, Any], b: Mapping[str, Any], labels: Iterable[str] = ("A", "B")) -> str:
    """Two runs side by side, with the difference B - A of each value (no test: see
    :func:`llm_envs.evaluation.compare.compare_runs` for the paired comparison)."""
    label_a, label_b = list(labels)
    rows: list[list[str]] = []

    def add(
        name: str, left: Mapping[str, Any] | None, right: Mapping[str, Any] | None, digits: int = 3
    ) -> None:
        ia, ib = _interval(left), _interval(right)
        delta = ib.value - ia.value if ia.n and ib.n else math.nan
        rows.append(
            [name, ia.format(digits), ib.format(digits), "" if math.isnan(delta) else f"{delta:+.{digits}f}"]
        )

    rows.append(["environment", str(a.get("env_id")), str(b.get("env_id")), ""])
    rows.append(["episodes", str(a.get("episodes")), str(b.get("episodes")), ""])
    add("success rate", a.get("success"), b.get("success"))
    add("turns / episode", a.get("turns"), b.get("turns"), 2)
    add(
        "tokens / episode",
        a.get("tokens_per_episode", {}).get("total"),
        b.get("tokens_per_episode", {}).get("total"),
        1,
    )
    agent_ids = list(a.get("rewards", {})) + [
        x for x in b.get("rewards", {}) if x not in a.get("rewards", {})
    ]
    for agent_id in agent_ids:
        rows.append(
            [
                f"{agent_id}: played by",
                str(a.get("agents", {}).get(agent_id, "-")),
                str(b.get("agents", {}).get(agent_id, "-")),
                "",
            ]
        )
        add(f"{agent_id}: reward", a.get("rewards", {}).get(agent_id), b.get("rewards", {}).get(agent_id))
        add(
            f"{agent_id}: format-error rate",
            a.get("format_error_rate", {}).get(agent_id),
            b.get("format_error_rate", {}).get(agent_id),
        )
    metric_names = list(a.get("metrics", {})) + [
        m for m in b.get("metrics", {}) if m not in a.get("metrics", {})
    ]
    for name in metric_names:
        add(name, a.get("metrics", {}).get(name), b.get("metrics", {}).get(name))
    return _table(rows, ["", label_a, label_b, "B - A"])
