"""``llm-envs audit ENV``: play the exploit catalogue and the reward contract against an environment.

Two parts, both on by default (``--only`` picks one):

* **exploits**: each exploit of ``llm_envs.audit.exploits`` that fits a role of the environment
  (code, tests, programs, answers; the environment's ``audit_surface()`` hook says which agent
  plays which) is played on the same episode (each on a reset of its own) beside its own plain
  wrong counterpart: ``held`` (earned no more than the plain wrong answer in every episode) or
  ``PAID``. An environment without a surface skips this part and says so.
* **contract**: the bounded adversary of ``llm_envs.audit.adversary`` (stall, near misses,
  repeat, hedge, injected score text, collusion, the Sokoban shuttle) plays every agent in turn
  and all agents together; ``PAID`` where a return beats the reference agents' on the same seed
  (or an injection beats its plain twin, or an episode never ends), ``BOUNDS`` where an
  action's reward leaves the bounds the environment declares (``reward_bounds``).

Each attacked agent also gets a ``right-beats-wrong`` row: the right answer must earn more than
every plain wrong answer, an empty reply and a near miss (a grader that pays any answer is paid).

Exit status: 1 when anything is paid or out of bounds; 3 when a part that ran graded nothing
(every row n/a: a sandbox that fails every run, an environment whose reference agents cannot
play, a contract with no ceiling and no declared bounds); 0 when everything is held; 2 on a
usage error. See docs/audit.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ._common import EXIT_INCOMPLETE, CLIError, env_kwargs, resolve_env, table

#: Exit status when an exploit or a strategy is paid, or a reward is out of bounds.
EXIT_PAID = 1
#: Exit status when nothing was graded (every row n/a): a CI gate must not pass on it.
EXIT_UNGRADED = EXIT_INCOMPLETE


class _Progress:
    """One status line on stderr while the audit plays (rewritten in place on a terminal;
    with ``-v`` every outcome on its own line)."""

    def __init__(self, enabled: bool, verbose: bool) -> None:
        self.enabled, self.verbose = enabled, verbose
        self.tty = sys.stderr.isatty()
        self.played = self.flagged = 0

    def __call__(self, part: str, line: str, flagged: bool) -> None:
        self.played += 1
        self.flagged += flagged
        if not self.enabled:
            return
        if self.verbose:
            print(f"  {line}", file=sys.stderr)
        elif self.tty:
            print(f"\raudit: {self.played} played ({part}), {self.flagged} paid or out of bounds", end="",
                  file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.enabled and self.tty and not self.verbose and self.played:
            print(file=sys.stderr)


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


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def cmd_audit(args: argparse.Namespace) -> int:
    from llm_envs.audit import CATALOGUE, AuditError, audit_env, by_name, summarize
    from llm_envs.audit.adversary import QUICK, check_contract, strategies_for, summarize_contract

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
    run_exploits = args.only in (None, "exploits") and not (args.strategy and not args.exploit)
    run_contract = args.only in (None, "contract") and not (args.exploit and not args.strategy)
    progress = _Progress(not args.json, args.verbose)
    outcomes: list[Any] = []
    contract: list[Any] = []
    skipped = ""
    try:
        env.reset(seed=0)
        names = args.strategy or (list(QUICK) if args.quick else None)
        try:
            strategies = strategies_for(env, names) if run_contract else []
        except KeyError as exc:
            raise CLIError(str(exc.args[0])) from exc
        if run_exploits:
            try:
                outcomes = audit_env(
                    env, episodes=args.episodes, exploits=exploits, agents=args.agent or None,
                    progress=lambda o: progress(
                        "exploits", f"{o.verdict:<4} {o.exploit} ({o.agent}, seed {o.seed}): "
                        f"{o.exploit_reward} vs plain wrong {o.plain_wrong_reward}", o.verdict == "paid"),
                )
            except AuditError as exc:
                if args.only == "exploits" or args.exploit:
                    raise CLIError(str(exc)) from exc
                skipped = str(exc)
        if run_contract:
            contract = check_contract(
                env, env_id=env_id, seeds=range(args.episodes), strategies=strategies,
                progress=lambda o: progress(
                    "contract", f"{o.verdict:<4} {o.strategy} ({o.agent}, seed {o.seed})"
                    + (f": {o.detail.splitlines()[0]}" if o.detail else ""), o.verdict in ("paid", "out of bounds")),
            )
            if args.agent:
                contract = [o for o in contract if o.agent in args.agent or o.agent == "all"]
    finally:
        progress.done()
        env.close()
    rows = summarize(outcomes)
    contract_rows = summarize_contract(contract)
    paid = [row for row in rows if row["verdict"] == "PAID"]
    breached = [row for row in contract_rows if row["verdict"] in ("PAID", "BOUNDS")]
    # Each part that ran must grade something: held exploits do not make up for a contract
    # that judged nothing (no reference agents), nor the other way round. A catalogue skipped
    # for want of a surface says so and leaves the contract to grade.
    # The contract judges returns against a ceiling or declared bounds; with neither, only the
    # injection twins are compared and the returns are unchecked.
    bounds_declared = bool(getattr(env, "reward_bounds_declared", lambda: False)())
    returns_judged = bounds_declared or any(
        env.reference_is_ceiling(agent) for agent in [*env.possible_agents, None]) if run_contract else True
    exploits_graded = not run_exploits or bool(skipped) or any(r["verdict"] != "n/a" for r in rows)
    contract_graded = not run_contract or (returns_judged and any(r["verdict"] != "n/a" for r in contract_rows))
    graded = exploits_graded and contract_graded
    backend = args.backend or os.environ.get("SANDBOX_BACKEND") or "auto"
    if args.json:
        print(
            json.dumps(
                {
                    "env": env_id,
                    "backend": backend,
                    "episodes": args.episodes,
                    "graded": graded,
                    "exploits_graded": exploits_graded,
                    "contract_graded": contract_graded,
                    "paid": len(paid),
                    "rows": rows,
                    "outcomes": [o.as_dict() for o in outcomes],
                    "exploits_skipped": skipped,
                    "contract": {
                        "breached": len(breached),
                        "bounds_declared": bounds_declared,
                        "rows": contract_rows,
                        "outcomes": [o.as_dict() for o in contract],
                    },
                },
                indent=2,
            )
        )
    else:
        if rows:
            print(
                table(
                    [
                        [r["exploit"], r["family"], r["agent"], r["verdict"], f"{r['held']}/{r['paid']}/{r['n/a']}",
                         _number(r["max_exploit_reward"]), _number(r["plain_wrong_reward"]), _number(r["right_reward"])]
                        for r in rows
                    ],
                    ["exploit", "family", "agent", "verdict", "held/paid/n.a.", "exploit reward", "plain wrong",
                     "right answer"],
                )
            )
        if skipped:
            print(f"exploit catalogue skipped: {skipped}")
        if contract_rows:
            if rows:
                print()
            print(
                table(
                    [
                        [r["strategy"], r["family"], r["agent"], r["verdict"],
                         f"{r['held']}/{r['paid']}/{r['out of bounds']}/{r['n/a']}", _number(r["max_excess"])]
                        for r in contract_rows
                    ],
                    ["strategy", "family", "agent", "verdict", "held/paid/bounds/n.a.", "return - reference"],
                )
            )
        held = sum(1 for r in rows if r["verdict"] == "held")
        contract_held = sum(1 for r in contract_rows if r["verdict"] == "held")
        print(
            f"\n{env_id} (backend {backend}, {args.episodes} episode(s)): exploits {held} held, {len(paid)} paid; "
            f"reward contract {contract_held} held, {len(breached)} paid or out of bounds"
            + ("" if bounds_declared or not run_contract else " (the environment declares no reward bounds)")
        )
        for row in paid:
            print(f"  PAID {row['exploit']} ({row['agent']}): {row['detail'][:200]}")
        for row in breached:
            print(f"  {row['verdict']} {row['strategy']} ({row['agent']}): {row['detail'].splitlines()[0][:300]}")
        if not returns_judged:
            print("  the reward contract checked no return: the reference is no agent's ceiling and the environment "
                  "declares no reward bounds (reward_bounds, reference_is_ceiling: docs/audit.md)")
        for part, part_graded in (("exploit catalogue", exploits_graded), ("reward contract", contract_graded or not returns_judged)):
            if not part_graded:
                print(f"  the {part} graded nothing: every row is n/a (a sandbox that fails every run? reference "
                      "agents that cannot play?)")
    if paid or breached:
        return EXIT_PAID
    return 0 if graded else EXIT_UNGRADED


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="play the exploit catalogue and the reward contract against an environment; exit 1 if any "
        "is paid, 3 if nothing was graded",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("env_id", help="environment id, e.g. llm/CoderTester-v0")
    p.add_argument("--backend", help="sandbox backend: bwrap, process, docker (default: the environment's)")
    p.add_argument("--episodes", type=int, default=1, help="episodes (seeds 0..N-1) per exploit and strategy (default 1)")
    p.add_argument("--exploit", action="append", metavar="NAME", help="only this exploit (repeatable)")
    p.add_argument("--strategy", action="append", metavar="NAME",
                   help="only this reward-contract strategy (repeatable; docs/audit.md lists them)")
    p.add_argument("--quick", action="store_true", help="the reward contract's quick selection of strategies")
    p.add_argument("--only", choices=("exploits", "contract"), help="run one part only")
    p.add_argument("--agent", action="append", metavar="AGENT", help="only attack this agent (repeatable)")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment option (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON (rows and every outcome)")
    p.add_argument("-v", "--verbose", action="store_true", help="print each outcome as it comes (stderr)")
    p.set_defaults(func=cmd_audit)
