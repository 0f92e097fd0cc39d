"""``llm-envs show``: saved episodes of a run, as readable transcripts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._common import CLIError


def cmd_show(args: argparse.Namespace) -> int:
    from llm_envs.core.writing import for_terminal
    from llm_envs.evaluation.transcripts import (
        TranscriptError,
        episode_transcript,
        load_episodes,
        select_episodes,
    )

    problems: list[str] = []
    try:
        episodes = load_episodes(args.run, problems=problems)
    except TranscriptError as exc:
        raise CLIError(str(exc)) from None
    for problem in problems:  # a garbled or duplicated line: shown, never silently used
        print(f"warning: skipped {for_terminal(problem)}", file=sys.stderr)
    outcome = "failed" if args.failed else "succeeded" if args.succeeded else None
    chosen = select_episodes(episodes, indices=args.episode, outcome=outcome, agent=args.agent)
    if not chosen:
        raise CLIError(f"no episode under {args.run} matches (of {len(episodes)} saved)")
    shown = chosen if args.limit <= 0 else chosen[: args.limit]
    # (what models wrote, escape sequences included: printed as escapes, never acted on)
    print(for_terminal("\n\n".join(episode_transcript(e, prompts=args.prompts) for e in shown)))
    if len(shown) < len(chosen):
        print(f"\n({len(chosen) - len(shown)} more matching episodes; use --limit 0 to show all)")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("show", help="print saved episodes of an eval or demo run as transcripts")
    p.add_argument("run", type=Path, help="a run directory (searched for episodes.jsonl) or the file")
    p.add_argument("--episode", type=int, action="append", metavar="I", help="only episode I (repeatable)")
    outcome = p.add_mutually_exclusive_group()
    outcome.add_argument("--failed", action="store_true", help="only episodes that did not succeed")
    outcome.add_argument("--succeeded", action="store_true", help="only episodes that succeeded")
    p.add_argument("--agent", help="only this agent's actions")
    p.add_argument("--prompts", action="store_true", help="show the prompt each agent saw before its action")
    p.add_argument("--limit", type=int, default=5, help="most episodes printed (default 5; 0 = all)")
    p.set_defaults(func=cmd_show)
