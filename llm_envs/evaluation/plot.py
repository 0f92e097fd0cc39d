"""A PNG of a run's main numbers (matplotlib is an optional extra: ``llm-envs[plot]``)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PLOT_MISSING = "matplotlib is not installed, so no plot was drawn (pip install 'llm-envs[plot]')"


def plot_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_summary(summary: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Draw success rate, reward per agent and format-error rate per agent, each with its
    confidence interval as error bars, and save the figure to ``path``.

    Raises:
        ImportError: with an install hint, if matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)  # no display needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(PLOT_MISSING) from exc

    agents = list(summary.get("rewards", {}))
    players = summary.get("agents", {})
    labels = [f"{a}\n({players[a]})" if a in players else a for a in agents]
    conf = int(round(100 * float(summary.get("confidence", 0.95))))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), constrained_layout=True)

    def bars(ax: Any, labels: list[str], data: list[Mapping[str, Any]], title: str, unit_range: bool) -> None:
        values = [_num(d.get("value")) for d in data]
        lower = [max(0.0, v - _num(d.get("low"), v)) for v, d in zip(values, data, strict=True)]
        upper = [max(0.0, _num(d.get("high"), v) - v) for v, d in zip(values, data, strict=True)]
        ax.bar(labels, values, yerr=[lower, upper], capsize=4, color="#4C72B0")
        ax.set_title(title)
        ax.axhline(0.0, color="black", linewidth=0.6)
        # Each value sits above the top of its error bar (not on the bar, where the bar's
        # whisker ran through it), with headroom so that it stays inside the axes.
        tops = [v + u for v, u in zip(values, upper, strict=True)]
        for i, (v, top) in enumerate(zip(values, tops, strict=True)):
            ax.annotate(f"{v:.2f}", (i, top), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
        low = min([0.0] + [v - d for v, d in zip(values, lower, strict=True)])
        high = max([0.0] + tops)
        if unit_range:
            low, high = 0.0, max(1.0, high)
        ax.set_ylim(low - 0.02 * (high - low or 1.0), high + 0.14 * (high - low or 1.0))

    bars(axes[0], ["success"], [summary.get("success", {})], f"success rate ({conf}% CI)", True)
    bars(axes[1], labels, [summary["rewards"][a] for a in agents], f"reward per episode ({conf}% CI)", False)
    bars(
        axes[2],
        labels,
        [summary.get("format_error_rate", {}).get(a, {}) for a in agents],
        f"format-error rate ({conf}% CI)",
        True,
    )
    fig.suptitle(f"{summary.get('env_id')}: {summary.get('episodes')} episodes")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _num(value: Any, default: float = 0.0) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(value) else value
