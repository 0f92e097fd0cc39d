"""``llm-envs audit ENV``: play the exploit catalogue against an environment's grader.

Each exploit of ``llm_envs.audit.exploits`` that fits a role of the environment (code, tests,
programs, answers; the environment's ``audit_surface()`` hook says which agent plays which) is
played on clones of the same episode beside its own plain wrong counterpart. The table says,
per exploit, whether it was ``held`` (earned no more than the plain wrong answer in every
episode) or ``PAID``. Exit status 1 when any exploit is paid, 0 when all are held, 2 on a usage
error. See docs/audit.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ._common import CLIError, env_kwargs, resolve_env, table

#: Exit status when an exploit is paid.
EXIT_PAID = 1


def _make_env(env_id: str, backend: str | None, extra: dict[str, Any]) -> Any:
    import llm_envs

    if backend is not None:
        try:
            return llm_envs.make(env_id, sandbox=backend, **extra)
        except TypeError:
            # an environment without a sandbox= option: the backend through the override that
            # sandboxes.make_sandbox("auto") reads
            os.environ["SANDBOX_BACKEND"] = backend
    return llm_envs.make(env_id, **extra)


def cmd_audit(args: argparse.Namespace) -> int:
    from llm_envs.audit import CATALOGUE, AuditError, audit_env, by_name, summarize

    env_id = resolve_env(args.env_id).id
    if args.episodes < 1:
        raise CLIError("--episodes must be >= 1")
    try:
        exploits = [by_name(name) for name in args.exploit] if args.exploit else list(CATALOGUE)
    except KeyError as exc:
        raise CLIError(str(exc.args[0])) from exc
    try:
        env = _make_env(env_id, args.backend, env_kwargs(args.env_arg))
    except (KeyError, TypeError, ValueError, ImportError) as exc:
        raise CLIError(f"cannot create {env_id}: {exc}") from exc

    def progress(outcome: Any) -> None:
        if not args.json and args.verbose:
            print(
                f"  {outcome.verdict:<4} {outcome.exploit} ({outcome.agent}, seed {outcome.seed}): "
                f"{outcome.exploit_reward} vs plain wrong {outcome.plain_wrong_reward}",
                file=sys.stderr,
            )

    try:
        outcomes = audit_env(
            env, episodes=args.episodes, exploits=exploits, agents=args.agent or None, progress=progress
        )
    except AuditError as exc:
        raise CLIError(str(exc)) from exc
    finally:
        env.close()
    rows = summarize(outcomes)
    paid = [row for row in rows if row["verdict"] == "PAID"]
    backend = args.backend or os.environ.get("SANDBOX_BACKEND") or "auto"
    if args.json:
        print(
            json.dumps(
                {
                    "env": env_id,
                    "backend": backend,
                    "episodes": args.episodes,
                    "paid": len(paid),
                    "rows": rows,
                    "outcomes": [o.as_dict() for o in outcomes],
                },
                indent=2,
            )
        )
    else:

        def number(value: Any) -> str:
            return "-" if value is None else f"{value:.3f}"

        print(
            table(
                [
                    [
                        r["exploit"],
                        r["family"],
                        r["agent"],
                        r["verdict"],
                        f"{r['held']}/{r['paid']}/{r['n/a']}",
                        number(r["max_exploit_reward"]),
                        number(r["plain_wrong_reward"]),
                    ]
                    for r in rows
                ],
                ["exploit", "family", "agent", "verdict", "held/paid/n.a.", "exploit reward", "plain wrong"],
            )
        )
        held = sum(1 for r in rows if r["verdict"] == "held")
        print(f"\n{env_id} (backend {backend}, {args.episodes} episode(s)): {held} held, {len(paid)} paid")
        for row in paid:
            print(f"  PAID {row['exploit']} ({row['agent']}): {row['detail'][:200]}")
    return EXIT_PAID if paid else 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="play the exploit catalogue against an environment's grader; exit 1 if any is paid",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("env_id", help="environment id, e.g. llm/CoderTester-v0")
    p.add_argument("--backend", help="sandbox backend: bwrap, process, docker (default: the environment's)")
    p.add_argument("--episodes", type=int, default=1, help="episodes (seeds 0..N-1) per exploit (default 1)")
    p.add_argument("--exploit", action="append", metavar="NAME", help="only this exploit (repeatable)")
    p.add_argument("--agent", action="append", metavar="AGENT", help="only attack this agent (repeatable)")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment option (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON (rows and every outcome)")
    p.add_argument("-v", "--verbose", action="store_true", help="print each outcome as it comes (stderr)")
    p.set_defaults(func=cmd_audit)
