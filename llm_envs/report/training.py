"""The report of a training run (``llm-train``): learning curves and evaluation transcripts.

The curves come from ``metrics.jsonl`` (names as :mod:`llm_trainers.trainer` and
:mod:`llm_trainers.learner` log them): ``rollout/*`` (training episodes), ``eval/*``
(periodic evaluations), ``train/<policy>/*`` (loss, KL, entropy, clip fraction, gradient norm,
learning rate), ``time/*_s`` (seconds per phase of a step), ``tokens/*`` and ``throughput/*``.
Known names go to named panels; every other numeric metric gets a chart under "all other
metrics", so nothing logged is left out. Several runs share the panels (one colour per run).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from llm_envs.episodes import load_episodes
from llm_envs.report import svg
from llm_envs.report.episodes import dataset, episodes_html
from llm_envs.report.evaluation import summary_tables
from llm_envs.report.page import esc, esc_attr, fmt, isolated, notes_html
from llm_envs.report.runs import TrainingRun, metric_value

Section = tuple[str, str, str]

# (title, y label, key patterns, y range): a key joins the first panel whose pattern matches it.
PANELS: tuple[tuple[str, str, tuple[str, ...], tuple[float, float] | None], ...] = (
    ("success: training rollouts and evaluation", "success", (r"^rollout/success$", r"^eval/success$"), (0.0, 1.0)),
    ("reward per episode, by agent", "reward", (r"^rollout/reward/.+$", r"^eval/reward/.+$"), None),
    ("reward per action (training records)", "reward", (r"^rollout/record_reward(/.+)?$",), None),
    ("KL divergence to the reference", "KL", (r"^train/.+/kl$",), None),
    ("entropy", "nats / token", (r"^train/.+/entropy$",), None),
    ("clip fraction", "share of tokens", (r"^train/.+/clip_frac$",), None),
    ("loss", "loss", (r"^train/.+/(loss|pg_loss)$",), None),
    ("gradient norm (before clipping)", "norm", (r"^train/.+/grad_norm$",), None),
    ("completion length", "tokens", (r"^(rollout|eval)/completion_len$",), None),
    ("turns per episode", "turns", (r"^(rollout|eval)/turns$",), None),
    ("format errors and infrastructure failures", "share",
     (r"^(rollout|eval)/format_errors$", r"^eval/errors$"), (0.0, 1.0)),
    ("throughput", "tokens / s", (r"^throughput/.+$",), None),
)
#: Panels shown even when their metrics are always 0 (a success of 0 is a result).
ALWAYS_SHOWN = ("success: training rollouts and evaluation", "reward per episode, by agent")
#: Metrics logged as a share of good outcomes but charted as the share of errors, so that a
#: rising line in the "format errors" panel means more errors: logged key → charted key.
ERROR_SHARES = {"rollout/format_ok": "rollout/format_errors", "eval/format_ok": "eval/format_errors"}
PHASE_PATTERN = re.compile(r"^time/(.+)_s$")
TOTAL_TIME_KEY = "time/step_s"
#: Evaluation steps whose transcripts a report embeds by default (evenly spaced, first and last kept).
DEFAULT_TRANSCRIPT_STEPS = 5


def numeric_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every metric name with at least one finite number, in order of first appearance."""
    keys: dict[str, None] = {}
    for row in rows:
        for key, value in row.items():
            if key != "step" and metric_value(value) is not None:
                keys.setdefault(key, None)
    return list(keys)


def _points(rows: Sequence[Mapping[str, Any]], key: str) -> list[tuple[float, float | None]]:
    out = []
    for position, row in enumerate(rows):
        if key in row:
            step = metric_value(row.get("step"))
            out.append((step if step is not None else float(position), metric_value(row[key])))
    return out


def _charted(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The metrics rows as charted: each share in :data:`ERROR_SHARES` as its complement."""
    out = []
    for row in rows:
        row = dict(row)
        for good, bad in ERROR_SHARES.items():
            value = metric_value(row.pop(good, None))
            if value is not None:
                row[bad] = 1.0 - value
        out.append(row)
    return out


def _always_zero(runs: Sequence[TrainingRun], keys: Sequence[str]) -> bool:
    values = [metric_value(row.get(k)) for run in runs for row in run.metrics for k in keys if k in row]
    return all(v is None or v == 0.0 for v in values)


def curves(runs: Sequence[TrainingRun]) -> str:
    """All learning-curve panels for ``runs`` (one colour per run when there are several).
    Panels whose metrics were 0 at every step are left out and named in a note (but for success
    and reward); ``format_ok`` is charted as the share of format errors."""
    import dataclasses

    runs = [dataclasses.replace(run, metrics=_charted(run.metrics)) for run in runs]
    several = len(runs) > 1
    keys_by_run = [numeric_keys(run.metrics) for run in runs]
    every_key = list(dict.fromkeys(k for keys in keys_by_run for k in keys))
    used: set[str] = set()
    figures = []
    hidden: list[str] = []
    for title, y_label, patterns, y_range in PANELS:
        keys = list(dict.fromkeys(k for p in patterns for k in every_key if k not in used and re.match(p, k)))
        if not keys:
            continue
        used.update(keys)
        if title not in ALWAYS_SHOWN and _always_zero(runs, keys):
            hidden.append(title)
            continue
        figures.append(svg.line_chart(_series(runs, keys, several), title=title, y_label=y_label, y_range=y_range))
    phases = [k for k in every_key if PHASE_PATTERN.match(k) and k != TOTAL_TIME_KEY]
    if phases:
        used.update(phases)
        used.add(TOTAL_TIME_KEY)
        for run in runs:
            series = [svg.Series(PHASE_PATTERN.match(k).group(1), _points(run.metrics, k)) for k in phases]
            title = "time per step, by phase" + (f" ({isolated(run.label)})" if several else "")
            figures.append(svg.stacked_area_chart(series, title=title, y_label="seconds"))
    rest = [k for k in every_key if k not in used]
    hidden += [k for k in rest if _always_zero(runs, [k])]
    rest = [k for k in rest if k not in hidden]
    others = "".join(svg.line_chart(_series(runs, [k], several), title=k, y_label="") for k in rest)
    other_html = (
        f'<details class="more"><summary>all other metrics ({len(rest)})</summary><div class="charts">{others}</div>'
        "</details>" if rest else ""
    )
    hidden_html = (f'<p class="note">Not drawn, 0 at every step: {esc(", ".join(isolated(h) for h in hidden))}.</p>' if hidden else "")
    if not figures and not rest:
        return hidden_html or '<p class="note">metrics.jsonl holds no numbers yet.</p>'
    return f'<div class="charts">{"".join(figures)}</div>{hidden_html}{other_html}'


def _series(runs: Sequence[TrainingRun], keys: Sequence[str], several: bool) -> list[svg.Series]:
    """One series per (run, key). One run: the colour tells the quantity and evaluations are
    dashed (``rollout/success`` and ``eval/success`` share a colour); several runs: the colour
    tells the run and the dash the metric."""
    quantities = list(dict.fromkeys(key.split("/", 1)[-1] for key in keys))
    series = []
    for r, run in enumerate(runs):
        for k, key in enumerate(keys):
            points = _points(run.metrics, key)
            if not points:
                continue
            if several:
                series.append(svg.Series(f"{isolated(run.label)} · {isolated(key)}", points, color=svg.PALETTE[r % len(svg.PALETTE)],
                                         dash=svg.DASHES[k % len(svg.DASHES)]))
            else:
                colour = svg.PALETTE[quantities.index(key.split("/", 1)[-1]) % len(svg.PALETTE)]
                series.append(svg.Series(key, points, color=colour, dash="5 3" if key.startswith("eval/") else ""))
    return series


def choose_steps(available: Sequence[int], wanted: Sequence[int] | None = None,
                 count: int = DEFAULT_TRANSCRIPT_STEPS) -> list[int]:
    """The evaluation steps to embed: ``wanted`` (those that exist), or ``count`` evenly spaced
    ones, first and last included."""
    available = sorted(available)
    if wanted is not None:
        return [s for s in available if s in set(wanted)]
    if len(available) <= count:
        return available
    picks = {available[round(i * (len(available) - 1) / (count - 1))] for i in range(count)}
    return sorted(picks)


def config_facts(run: TrainingRun) -> str:
    cfg = run.config
    def get(path: str) -> Any:
        node: Any = cfg
        for part in path.split("."):
            if not isinstance(node, Mapping):
                return None
            node = node.get(part)
        return node

    last = run.metrics[-1] if run.metrics else {}
    rows = [
        ("run directory", str(run.path)),
        ("name", get("run.name")),
        ("environment", get("env.id")),
        ("model", get("model.path")),
        ("level", get("model.level")),
        ("estimator", get("algorithm.estimator")),
        ("rollout", ", ".join(f"{k}={isolated(get('rollout.' + k))}" for k in ("engine", "tree", "k", "temperature")
                              if get("rollout." + k) is not None) or None),
        ("learning rate", get("train.lr")),
        ("steps logged", f"{fmt(last.get('step', '-'))} of {fmt(get('run.steps') or '?')}" if run.metrics else "none yet"),
        ("evaluations saved", ", ".join(str(s) for s in sorted(run.evaluations)) or "none"),
    ]
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows if v not in (None, ""))
    full = ""
    if cfg:
        import yaml

        full = (f"<details><summary>full config</summary><pre>{esc(yaml.safe_dump(cfg, sort_keys=False))}</pre>"
                "</details>")
    return f'<table class="facts">{body}</table>{full}'


def transcripts(runs: Sequence[TrainingRun], steps: Sequence[int] | None) -> tuple[str, dict[str, Any]]:
    """A step selector over the chosen evaluations: each step's numbers and its episodes."""
    from llm_envs.evaluation.summary import summarize

    data: dict[str, Any] = {}
    options, panels, names = [], [], []
    for r, run in enumerate(runs):
        for step in choose_steps(list(run.evaluations), steps):
            episodes = sorted(load_episodes(run.evaluations[step]), key=lambda e: e.index)
            key = f"train{r}-step{step}"
            data[key] = dataset(episodes, label=f"evaluation at step {step}: {len(episodes)} episodes")
            name = f"{isolated(run.label)}: step {step}" if len(runs) > 1 else f"step {step}"
            names.append(name)
            summary = summarize(episodes)
            # (an <option> holds plain text: the isolate characters themselves do the isolating)
            options.append(f'<option value="{esc_attr(key)}">{esc_attr(name)} (success {fmt(summary["success"]["value"], 2)})'
                           "</option>")
            panels.append(f'<div class="switch-panel" data-panel="{esc(key)}" hidden>{summary_tables(summary)}'
                          f"{episodes_html(key)}</div>")
    if not panels:
        return '<p class="note">No evaluation transcripts saved (run.eval_every &lt; 0?).</p>', data
    chosen = ", ".join(names)
    html = (
        f'<p class="note">Evaluation transcripts embedded for {esc(chosen)}; choose others with '
        "<code>llm-envs report RUN --steps 0,100,200</code>.</p>"
        f'<div class="switch"><label>evaluation <select class="switch-select">{"".join(options)}</select></label>'
        f'{"".join(panels)}</div>'
    )
    return html, data


def sections(runs: Sequence[TrainingRun], steps: Sequence[int] | None = None) -> tuple[list[Section], dict[str, Any]]:
    facts = "".join(
        (f'<details open><summary>{esc(run.label)}</summary>' if len(runs) > 1 else "") + config_facts(run)
        + ("</details>" if len(runs) > 1 else "")
        for run in runs
    )
    transcripts_html, data = transcripts(runs, steps)
    notes = notes_html([(f"{isolated(run.label)}: " if len(runs) > 1 else "") + n for run in runs for n in run.notes])
    return [
        ("curves", "Learning curves", notes + curves(runs)),
        ("evaluations", "Evaluation transcripts", transcripts_html),
        ("run", "Settings", facts),
    ], data
