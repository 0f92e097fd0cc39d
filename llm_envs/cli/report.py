"""``llm-envs report``: one self-contained HTML page for an evaluation, arena or training run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import CLIError


def _steps(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--steps takes step numbers separated by commas, got {text!r}") from None


def cmd_report(args: argparse.Namespace) -> int:
    from llm_envs.report import ReportError, write_report

    try:
        path = write_report(args.runs, args.out, steps=args.steps)
    except ReportError as exc:
        raise CLIError(str(exc)) from None
    print(f"wrote {path}")
    if args.screenshot:
        from llm_envs.report.browser import BrowserUnavailable, screenshot

        try:
            screenshot(path, args.screenshot)
        except BrowserUnavailable as exc:
            raise CLIError(str(exc)) from None
        print(f"wrote {args.screenshot}")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write one self-contained report.html for an eval, arena or training run (several eval runs: compared)",
        description="Write one HTML page (no server, no network: open it from disk) for an evaluation run, "
        "an arena run or a training run. Several evaluation runs are compared side by side, their "
        "episodes paired by seed; several training runs share the learning-curve charts.",
    )
    p.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="run directory (repeat to compare)")
    p.add_argument("-o", "--out", type=Path, help="output file, not a directory (default: RUN_DIR/report.html; "
                   "for several runs, compare.html next to the first)")
    p.add_argument("--steps", type=_steps, metavar="N,N,...", help="training runs: the evaluation steps whose "
                   "transcripts to embed (default: up to five, evenly spaced, first and last included)")
    p.add_argument("--screenshot", type=Path, metavar="PNG", help="also save a PNG of the page, taken in headless "
                   "Chromium (needs the Debian 'chromium' package and pip 'playwright')")
    p.set_defaults(func=cmd_report)
