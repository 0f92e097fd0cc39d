"""The report of one evaluation run: summary, charts, episodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_envs.episodes import EpisodeResult
from llm_envs.evaluation.summary import run_call_counts
from llm_envs.report import svg
from llm_envs.report.episodes import dataset, episodes_html
from llm_envs.report.page import (
    esc,
    fmt,
    fmt_interval,
    isolated,
    json_for_reading,
    notes_html,
    table,
    to_float,
)
from llm_envs.report.runs import EvalRun

Section = tuple[str, str, str]


def run_facts(summary: Mapping[str, Any], run_path: Any, stored: Any = None) -> str:
    """What was run: environment, agents, episodes, seed, split, command, time; and the whole
    ``stored`` summary.json (default: ``summary``) to unfold."""
    specs = summary.get("agent_specs") or {}
    players = summary.get("agents") or {}
    rows = [
        ("environment", summary.get("env_id")),
        ("run directory", str(run_path)),
        ("episodes", summary.get("episodes")),
        ("seed", summary.get("seed")),
        ("split", summary.get("split")),
        ("agents", pairs_text(players) or None),
        ("agent specs", pairs_text(specs) if isinstance(specs, Mapping) else specs),
        ("environment options", _compact(summary.get("env_kwargs"))),
        ("command", summary.get("command") or _commands(summary.get("commands"))),
        ("wall time", f"{fmt(to_float(summary.get('wall_s')), 1)} s" if summary.get("wall_s") is not None else None),
        ("episodes / s", fmt(to_float(summary.get("episodes_per_s")), 2) if summary.get("episodes_per_s") else None),
        ("resumed episodes", summary.get("episodes_resumed") or None),
    ]
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows if v not in (None, "", {}))
    whole = json_for_reading(summary if stored is None else stored)
    return (f'<table class="facts">{body}</table>'
            f"<details><summary>the whole summary.json</summary><pre>{esc(whole)}</pre></details>")


def pairs_text(mapping: Mapping[str, Any], sep: str = " = ") -> str:
    """``a = p, b = q``: each name and value :func:`isolated` (run text: one agent's name cannot
    reorder the next agent's entry)."""
    return ", ".join(f"{isolated(k)}{sep}{isolated(v)}" for k, v in mapping.items())


def confidence_percent(summary: Mapping[str, Any]) -> int:
    """The summary's confidence level in percent (95 when it does not say)."""
    level = to_float(summary.get("confidence", 0.95))
    return int(round(100 * level)) if 0 < level < 1 else 95


def _commands(history: Any) -> str | None:
    """The command lines of a run's invocations (``summary.json``'s ``commands``: one entry per
    invocation, each a mapping with its ``command``), one per line: never a raw mapping."""
    if not history:
        return None
    if isinstance(history, Mapping):
        history = [history]
    if not isinstance(history, (list, tuple)):
        return str(history)
    lines = []
    for entry in history:
        if isinstance(entry, Mapping):
            status = f" ({isolated(entry['status'])})" if entry.get("status") else ""
            lines.append(f"{isolated(entry.get('command', '?'))}{status}")
        else:
            lines.append(isolated(entry))
    return "\n".join(lines)


def _compact(value: Any) -> str | None:
    if not value:
        return None
    if isinstance(value, Mapping):
        return pairs_text(value, "=")
    if isinstance(value, (list, tuple)):
        return "; ".join(isolated(v) for v in value)
    return str(value)


def summary_tables(summary: Mapping[str, Any]) -> str:
    """The run's numbers with their intervals, then one row per agent."""
    conf = confidence_percent(summary)
    tokens = summary.get("tokens_per_episode") or {}
    rows = [
        ["success rate", fmt_interval(summary.get("success"))],
        ["turns / episode", fmt_interval(summary.get("turns"), 2)],
        ["tokens / episode (prompt + completion)",
         f"{fmt_interval(tokens.get('total'), 1)} ({fmt_interval(tokens.get('prompt'), 1)} + "
         f"{fmt_interval(tokens.get('completion'), 1)})" if tokens else "-"],
    ]
    for name, data in (summary.get("metrics") or {}).items():
        rows.append([name, fmt_interval(data)])
    failed, calls, whole_run = run_call_counts(summary)
    if calls:
        # Failed model calls are infrastructure, never a model's error: their episodes are not
        # scored (and the run is incomplete where they kept one from finishing). Summed over
        # every invocation of a resumed run where each recorded its calls.
        label = "failed model calls (infrastructure)" + ("" if whole_run else ", this invocation")
        rows.append([label, f"{failed} of {calls}"])
    run_table = table(["metric", f"value [{conf}% CI]"], rows, cls="summary")
    players = summary.get("agents") or {}
    agent_rows = []
    rewards = summary.get("rewards") or {}
    format_errors = summary.get("format_error_rate") or {}
    by_agent_tokens = tokens.get("by_agent") or {}
    for agent in rewards:
        fe = format_errors.get(agent) or {}
        agent_rows.append([
            agent,
            str(players.get(agent, "-")),
            fmt_interval(rewards.get(agent)),
            f"{fmt_interval(fe)} ({fmt(fe.get('errors', '-'))}/{fmt(fe.get('n', '-'))})" if fe else "-",
            fmt_interval(by_agent_tokens.get(agent), 1),
        ])
    agent_table = table(
        ["agent", "played by", f"reward / episode [{conf}% CI]", "format-error rate", "tokens / episode"],
        agent_rows, cls="summary agents", numeric_from=2,
    )
    return (f'<div class="tables">{run_table}<div class="side-charts">{interval_charts(summary)}</div></div>'
            f'<div class="tables">{agent_table}</div>')


def interval_charts(summary: Mapping[str, Any]) -> str:
    """Success, and each agent's reward, with their intervals (the values printed beside)."""
    conf = confidence_percent(summary)
    success = summary.get("success") or {}
    rewards = summary.get("rewards") or {}
    parts = [svg.interval_chart(
        [("success rate", to_float(success.get("value")), to_float(success.get("low")), to_float(success.get("high")))],
        title=f"success rate ({conf}% CI)", x_range=(0.0, 1.0))]
    if rewards:
        parts.append(svg.interval_chart(
            [(a, to_float(r.get("value")), to_float(r.get("low")), to_float(r.get("high"))) for a, r in rewards.items()],
            title=f"reward per episode, by agent ({conf}% CI)",
        ))
    return "".join(parts)


def charts(summary: Mapping[str, Any], episodes: Sequence[EpisodeResult]) -> str:
    """Reward distributions and success by turn."""
    parts = []
    rewards = summary.get("rewards") or {}
    if episodes:
        agents = list(dict.fromkeys(a for e in episodes for a in e.rewards))
        parts.append(svg.histograms(
            {a: [float(e.rewards[a]) for e in episodes if a in e.rewards] for a in agents},
            title="distribution of the reward per episode, by agent",
            x_label="reward per episode",
            means={a: (to_float(r.get("value")), to_float(r.get("low")), to_float(r.get("high"))) for a, r in rewards.items()},
            note="dot and line: the mean and its interval",
        ))
        parts.append(success_by_turn(episodes))
    return f'<div class="charts">{"".join(parts)}</div>'


def success_by_turn(episodes: Sequence[EpisodeResult]) -> str:
    """Episodes by length, split by outcome, with the share solved within each length."""
    lengths = sorted({int(round(e.turns)) for e in episodes})
    if not lengths:
        return ""
    categories = list(range(lengths[0], lengths[-1] + 1))
    solved = [sum(1 for e in episodes if int(round(e.turns)) == t and e.success >= 1.0) for t in categories]
    failed = [sum(1 for e in episodes if int(round(e.turns)) == t and e.success < 1.0) for t in categories]
    running, within = 0, []
    for i in range(len(categories)):
        running += solved[i]
        within.append((float(i), running / len(episodes)))
    return svg.bar_chart(
        [str(t) for t in categories],
        {"succeeded": solved, "failed": failed},
        title="success by turn: episodes by length and outcome",
        x_label="turns taken",
        y_label="episodes",
        colors={"succeeded": "#009E73", "failed": "#D55E00"},
        overlay=svg.Series("share solved within t turns", within, color="#000000", dash="4 2"),
    )


def sections(run: EvalRun, key: str = "run") -> tuple[list[Section], dict[str, Any]]:
    """The page sections of one evaluation run and the data its episode list needs."""
    summary = run.summary
    data = {key: dataset(run.episodes, label=f"{len(run.episodes)} episodes", agents=_agents(run))}
    out = [
        ("summary", "Summary", notes_html(run.notes) + summary_tables(summary)),
        ("charts", "Charts", charts(summary, run.episodes)),
        ("episodes", "Episodes", episodes_html(
            key, "Click an episode to read it as a conversation: every action with its agent, the "
                 "prompt on demand, the parsed answer, sandbox output, reward components and when "
                 "each credit arrived.")),
        ("run", "Settings", run_facts(summary, run.path, run.stored)),
    ]
    return out, data


def _agents(run: EvalRun) -> list[str]:
    from_summary = list(run.summary.get("rewards") or {})
    return list(dict.fromkeys(from_summary + [a for e in run.episodes for a in list(e.agents) + list(e.rewards)]))
