"""Named suites of environments for ``llm-envs eval --suite NAME`` (or ``--envs A,B,C``), and
the one results table of a suite run.

A suite run evaluates the same agents on each environment in turn, each in its own evaluation
directory ``OUT/<Env-vN>/`` (the files of a one-environment run, resumable on their own), and
writes ``OUT/suite.json`` (one row per environment) and ``OUT/report.html`` (the table, with a
link to each environment's own report). ``--resume`` on the suite continues every environment:
finished ones play nothing again, unfinished ones play what they lack.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: The environments of the papers this suite reproduces (the seed papers: Stronger-MAS, CoMAS,
#: Multi-Agent Evolve, MAPoRL), with their default options.
SEED_ENVS = (
    "llm/PlanPath-v0", "llm/Sokoban-v0", "llm/Sudoku-v0", "llm/CoderTester-v0", "llm/ReasonerTool-v0",
    "llm/Forum-v0", "llm/ProposerSolverJudge-v0", "llm/Debate-v0",
)
#: The OpenSpiel games.
GAME_ENVS = ("llm/KuhnPoker-v0", "llm/LeducPoker-v0", "llm/TicTacToe-v0", "llm/ConnectFour-v0", "llm/Negotiation-v0")

SUITE_FILE = "suite.json"


def suites() -> dict[str, tuple[str, ...]]:
    """Suite name → environment ids: ``seed`` (the seed papers' environments), ``games`` (the
    OpenSpiel games), ``llm`` (every registered ``llm/`` environment)."""
    import llm_envs

    return {
        "seed": SEED_ENVS,
        "games": GAME_ENVS,
        "llm": tuple(i for i in llm_envs.env_ids() if i.startswith("llm/")),
    }


def suite_envs(name: str) -> tuple[str, ...]:
    """The environments of suite ``name``; ``KeyError`` names the suites there are."""
    known = suites()
    if name not in known:
        raise KeyError(f"no suite {name!r}; suites: {', '.join(f'{k} ({len(v)} environments)' for k, v in known.items())}")
    return known[name]


def suite_row(env_id: str, out: Path, summary: Mapping[str, Any] | None, status: str, note: str = "") -> dict[str, Any]:
    """One row of ``suite.json``: the environment, its directory (relative to the suite's), the
    status and the headline numbers of its summary."""
    row: dict[str, Any] = {"env_id": env_id, "dir": out.name, "status": status, "note": note}
    if summary:
        row.update({
            "episodes": summary.get("episodes"),
            "success": summary.get("success"),
            "rewards": {a: r.get("value") for a, r in (summary.get("rewards") or {}).items()},
            "format_errors": {a: r.get("value") for a, r in (summary.get("format_error_rate") or {}).items()},
        })
    return row


def _number(value: Any, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def table_rows(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The suite's table: environment, status, episodes, success [95% CI], mean reward per agent."""
    out = []
    for row in rows:
        success = row.get("success") or {}
        interval = (f"{_number(success.get('value'))} [{_number(success.get('low'))}, {_number(success.get('high'))}]"
                    if success else "-")
        rewards = " ".join(f"{a}={_number(v, 2)}" for a, v in (row.get("rewards") or {}).items()) or "-"
        out.append([row["env_id"], row["status"], str(row.get("episodes", "-")), interval, rewards, row.get("note", "")])
    return out


TABLE_HEADER = ["environment", "status", "episodes", "success [95% CI]", "mean reward per agent", "note"]


def write_suite(out: Path, data: Mapping[str, Any], *, report: bool = True) -> None:
    """``suite.json`` (atomically) and, with ``report``, ``report.html``: the table, a link to
    each environment's report (``--no-report`` writes none of them, so no page links to one)."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (SUITE_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, out / SUITE_FILE)
    if not report:
        return
    rows = data.get("rows", [])
    cells = []
    for row, texts in zip(rows, table_rows(rows)):
        link = f'<a href="{html.escape(row["dir"])}/report.html">{html.escape(texts[0])}</a>'
        cells.append("<tr>" + f"<td>{link}</td>" + "".join(f"<td>{html.escape(t)}</td>" for t in texts[1:]) + "</tr>")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in TABLE_HEADER)
    title = f"llm-envs eval: {data.get('suite') or 'environments'}"
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:2em}}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head>"
        f"<body><h1>{html.escape(title)}</h1><p>{html.escape(str(data.get('agents', '')))}; seed "
        f"{html.escape(str(data.get('seed')))}; {html.escape(str(data.get('episodes')))} episodes per environment. "
        "Each environment links to its own report.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(cells)}</tbody></table></body></html>\n"
    )
    tmp = out / "report.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out / "report.html")


def read_suite(out: str | os.PathLike[str]) -> dict[str, Any] | None:
    path = Path(out) / SUITE_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
