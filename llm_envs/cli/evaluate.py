"""``llm-envs eval``: evaluate agents on an environment, or compare two evaluation runs.

Exit status: 0 when every episode finished; 2 on a user error, including a server that refuses
the very first requests (HTTP 4xx: a wrong model name, URL or key); 3 when infrastructure
failures left episodes unplayed (the message says how many and why; ``--resume`` plays them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_envs.core.writing import for_terminal

from ._common import (
    EXIT_INCOMPLETE,
    EXIT_USAGE,
    CLIError,
    add_model_options,
    command_line,
    env_kwargs,
    model_defaults,
    refuse_unexposed_reference,
    resolve_env,
    seed_value,
    slug,
    table,
)


def _eval_specs(args: argparse.Namespace, possible_agents: Sequence[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Agent id → spec (model defaults merged in) of every role, and the specs as given (for
    the summary and the default output directory)."""
    from llm_envs.agents.spec import load_agents_config, parse_assignments, resolve_specs

    assignments = load_agents_config(args.agents_file) if args.agents_file else {}
    for key, spec in parse_assignments(args.agent or []).items():
        assignments[key] = spec  # the command line wins over the file
    if not assignments:
        print("no --agent given: the reference agents play every role", file=sys.stderr)
    resolved = resolve_specs(assignments, possible_agents, default="reference", model_defaults=model_defaults(args))
    given = {("*" if k is None else k): str(v) for k, v in assignments.items()} or {"*": "reference"}
    return resolved, given


def _compare(args: argparse.Namespace) -> int:
    from llm_envs.evaluation.compare import CompareError, compare_runs

    run_a, run_b = args.compare
    try:
        comparison = compare_runs(run_a, run_b)
    except CompareError as exc:
        raise CLIError(str(exc)) from exc
    print(for_terminal(comparison.format()))
    return 0


def _requested_envs(args: argparse.Namespace) -> list[str]:
    """The environments named by ENV_ID (commas allowed), --envs and --suite, in order, once each."""
    from llm_envs.evaluation.suite import suite_envs

    names: list[str] = []
    for text in (args.env_id, args.envs):
        names += [n.strip() for n in (text or "").split(",") if n.strip()]
    if args.suite:
        try:
            names += list(suite_envs(args.suite))
        except KeyError as exc:
            raise CLIError(exc.args[0]) from None
    return list(dict.fromkeys(names))


def cmd_eval(args: argparse.Namespace) -> int:
    if args.compare:
        return _compare(args)
    env_ids = _requested_envs(args)
    if len(env_ids) > 1 or args.suite:
        return _eval_suite(args, env_ids)
    args.env_id = env_ids[0] if env_ids else None
    if not args.env_id and not args.env_url:
        raise CLIError("eval needs an environment id (see `llm-envs list`), --env-url URL, or --compare RUN_A RUN_B")
    for flag in ("episodes", "concurrency"):
        if getattr(args, flag) < 1:
            raise CLIError(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.force_resume and not args.resume:
        raise CLIError("--force-resume goes with --resume")

    import llm_envs
    from llm_envs.distributed.cluster import RayMissingError
    from llm_envs.episodes import IncompleteRunError
    from llm_envs.evaluation import evaluate, format_summary, resolve_split

    if args.env_url:  # every episode on the server at --env-url (docs/interop.md)
        env_entry, kwargs, probe = _served_env(args)
    else:
        env_entry = resolve_env(args.env_id)
        try:
            kwargs = resolve_split(env_entry.id, args.split, env_kwargs(args.env_arg))
            probe = llm_envs.make(env_entry.id, **kwargs)  # fail early on bad --env-arg
        except (TypeError, ValueError, ImportError) as exc:
            raise CLIError(f"cannot create {env_entry.id}: {exc}") from exc
    possible_agents = list(probe.possible_agents)
    reference_available = getattr(probe, "reference_exposed", True)
    probe.close()
    log = lambda message: print(for_terminal(message), file=sys.stderr)  # noqa: E731
    resolved, specs = _eval_specs(args, possible_agents)
    if args.env_url:
        refuse_unexposed_reference(args.env_url, reference_available, resolved.values())
    runner = None
    if args.env_url:
        if args.ray is not None:
            raise CLIError("--env-url and --ray: the environments are on the server already; drop one")
        from llm_envs.interop.remote import remote_runner

        runner = remote_runner(args.env_url)
    if args.ray is not None:  # the episodes are played on Ray workers, the agents built there
        from llm_envs.distributed.evaluation import ray_evaluation_from_args

        if any(spec.kind == "human" for spec in resolved.values()):
            raise CLIError("a human agent plays at this terminal: evaluate without --ray")
        runner = ray_evaluation_from_args(args, log)
        agents: dict[str, Any] = dict(resolved)
        who = ", ".join(f"{a}={spec}" for a, spec in resolved.items())
        where = f"on Ray (concurrency {args.concurrency} per worker)"
    if args.ray is None:
        from llm_envs.agents.human import HumanAgent
        from llm_envs.agents.spec import resolve_agents

        agents = resolve_agents(resolved, possible_agents)
        if any(isinstance(agent, HumanAgent) for agent in agents.values()):
            # A person answers one prompt at a time, and a progress bar would cut through them.
            if args.concurrency != 1:
                print("a human plays: one episode at a time (--concurrency 1)", file=sys.stderr)
            args.concurrency, args.no_progress = 1, True
        who = ", ".join(f"{a}={agent.name}" for a, agent in agents.items())
        where = f"concurrency {args.concurrency}"
    out = args.out or Path("runs") / "eval" / env_entry.id.split("/")[-1] / slug(
        "+".join(f"{k}={v}" if k != "*" else v for k, v in sorted(specs.items())) + f"-seed{args.seed}"
    )
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} is a file, not a directory")
    print(for_terminal(f"evaluating {env_entry.id}: {who}; {args.episodes} episodes, {where}; writing to {out}"),
          file=sys.stderr)
    files = f"{out}/summary.json, {out}/episodes.jsonl" + ("" if args.no_plot else f", {out}/plot.png")
    try:
        summary = evaluate(
            env_entry.id,
            agents,
            episodes=args.episodes,
            seed=args.seed,
            concurrency=args.concurrency,
            env_kwargs=kwargs,
            out_dir=out,
            resume=args.resume,
            force_resume=args.force_resume,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            plot=not args.no_plot,
            max_batch_size=args.max_batch_size,
            max_consecutive_failures=args.max_consecutive_failures or None,
            settings={"agent_specs": specs, "command": command_line()},
            runner=runner,
            log=log,
        )
    except IncompleteRunError as exc:
        summary = getattr(exc, "summary", None)
        if summary is not None and summary.get("episodes"):
            print(for_terminal(format_summary(summary)))
            print(f"\nwrote {files} (status: incomplete)")
            if not args.no_report:
                from llm_envs.report import write_report_safely

                write_report_safely(out, log=log)
        print(f"error: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_USAGE if exc.configuration_error is not None else EXIT_INCOMPLETE
    except RayMissingError as exc:
        raise CLIError(str(exc)) from exc
    finally:
        if args.ray is None:
            for agent in {id(a): a for a in agents.values()}.values():
                agent.close()
    print(for_terminal(format_summary(summary)))
    print(f"\nwrote {files}")
    if not args.no_report:
        from llm_envs.report import write_report_safely

        if write_report_safely(out, log=log):
            print(f"wrote {out}/report.html (open it in a browser)")
    return 0


def _eval_suite(args: argparse.Namespace, env_ids: Sequence[str]) -> int:
    """Several environments (``--envs A,B,C``, ``--suite NAME``) with the same agents: one
    evaluation directory each under ``--out``, one table, ``suite.json`` and ``report.html``
    (:mod:`llm_envs.evaluation.suite`). Exit status: 0 when every environment is complete, 3
    when infrastructure failures left episodes unplayed (``--resume`` plays them), 2 on a user
    or configuration error (the suite stops there)."""
    for flag in ("episodes", "concurrency"):
        if getattr(args, flag) < 1:
            raise CLIError(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.force_resume and not args.resume:
        raise CLIError("--force-resume goes with --resume")
    if args.env_url or args.ray is not None:
        raise CLIError("--env-url and --ray evaluate one environment; run the environments one by one")
    if args.env_arg:
        raise CLIError("--env-arg is an option of one environment; with several, run that one on its own")
    import llm_envs
    from llm_envs.agents.human import HumanAgent
    from llm_envs.agents.spec import load_agents_config, parse_assignments, resolve_agents, resolve_specs
    from llm_envs.episodes import IncompleteRunError
    from llm_envs.evaluation import evaluate, resolve_split
    from llm_envs.evaluation.suite import TABLE_HEADER, suite_row, table_rows, write_suite

    entries = [resolve_env(env_id) for env_id in env_ids]
    assignments = load_agents_config(args.agents_file) if args.agents_file else {}
    for key, spec in parse_assignments(args.agent or []).items():
        assignments[key] = spec
    possible: dict[str, list[str]] = {}
    kwargs: dict[str, dict[str, Any]] = {}
    for entry in entries:
        try:
            kwargs[entry.id] = resolve_split(entry.id, args.split, {})
            probe = llm_envs.make(entry.id, **kwargs[entry.id])
        except (TypeError, ValueError, ImportError) as exc:
            raise CLIError(f"cannot create {entry.id}: {exc}") from exc
        possible[entry.id] = list(probe.possible_agents)
        probe.close()
    every_agent = set().union(*possible.values())
    unknown = sorted(k for k in assignments if k is not None and k not in every_agent)
    if unknown:
        raise CLIError(f"no environment of this run has agent(s) {unknown}")
    given = {("*" if k is None else k): str(v) for k, v in assignments.items()} or {"*": "reference"}
    if not assignments:
        print("no --agent given: the reference agents play every role", file=sys.stderr)
    label = f"suite-{args.suite}" if args.suite else "envs-" + "+".join(e.id.split("/")[-1] for e in entries)
    out = args.out or Path("runs") / "eval" / slug(label) / slug(
        "+".join(f"{k}={v}" if k != "*" else v for k, v in sorted(given.items())) + f"-seed{args.seed}")
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} is a file, not a directory")
    log = lambda message: print(for_terminal(message), file=sys.stderr)  # noqa: E731
    print(f"evaluating {len(entries)} environments ({', '.join(e.id for e in entries)}); {args.episodes} episodes "
          f"each; writing to {out}", file=sys.stderr)
    cache: dict[Any, Any] = {}  # agents with the same spec are built once for the whole suite
    rows: list[dict[str, Any]] = []
    status_code = 0
    record = {"suite": args.suite, "envs": [e.id for e in entries], "agents": given, "seed": args.seed,
              "episodes": args.episodes, "command": command_line(), "rows": rows}
    try:
        for entry in entries:
            own = {k: v for k, v in assignments.items() if k is None or k in possible[entry.id]}
            resolved = resolve_specs(own, possible[entry.id], default="reference", model_defaults=model_defaults(args))
            agents = resolve_agents(resolved, possible[entry.id], cache=cache)
            concurrency, progress = args.concurrency, not args.no_progress
            if any(isinstance(agent, HumanAgent) for agent in agents.values()):
                concurrency, progress = 1, False
            env_out = out / entry.id.split("/")[-1]
            print(f"[{len(rows) + 1}/{len(entries)}] {entry.id}: "
                  + ", ".join(f"{a}={for_terminal(str(agent.name), one_line=True)}" for a, agent in agents.items()),
                  file=sys.stderr)
            note, status = "", "complete"
            try:
                summary = evaluate(
                    entry.id, agents, episodes=args.episodes, seed=args.seed, concurrency=concurrency,
                    env_kwargs=kwargs[entry.id], out_dir=env_out, resume=args.resume, force_resume=args.force_resume,
                    overwrite=args.overwrite, progress=progress, plot=not args.no_plot,
                    max_batch_size=args.max_batch_size, max_consecutive_failures=args.max_consecutive_failures or None,
                    settings={"agent_specs": given, "command": record["command"]}, log=log,
                )
            except IncompleteRunError as exc:
                summary, status, note = getattr(exc, "summary", None), "incomplete", str(exc).split(". ")[0]
                print(f"error: {entry.id}: {for_terminal(str(exc))}", file=sys.stderr)
                status_code = EXIT_USAGE if exc.configuration_error is not None else max(status_code, EXIT_INCOMPLETE)
            if not args.no_report:
                from llm_envs.report import write_report_safely

                write_report_safely(env_out, log=log)
            rows.append(suite_row(entry.id, env_out, summary, status, note))
            write_suite(out, record, report=not args.no_report)  # after every environment: a stopped suite shows what it has
            if status_code == EXIT_USAGE:
                break
    finally:
        for agent in {id(a): a for a in cache.values()}.values():
            agent.close()
    print(table(table_rows(rows), TABLE_HEADER))
    print(f"\nwrote {out}/suite.json" + ("" if args.no_report else f", {out}/report.html")
          + " and one directory per environment")
    if status_code == EXIT_INCOMPLETE:
        print("error: some environments are incomplete; `--resume` with the same command plays what they lack",
              file=sys.stderr)
    return status_code


def _served_env(args: argparse.Namespace) -> tuple[Any, dict[str, Any], Any]:
    """The environment served at ``--env-url``: its registry entry, its options, a probe session."""
    from llm_envs.core.errors import InfrastructureError
    from llm_envs.evaluation import resolve_split
    from llm_envs.interop.remote import RemoteEnv, RemoteEnvError, served_env_id

    try:
        served = served_env_id(args.env_url)
    except InfrastructureError as exc:
        raise CLIError(str(exc)) from exc
    if args.env_id and resolve_env(args.env_id).id != served:
        raise CLIError(f"--env-url {args.env_url} serves {served}, not {args.env_id}")
    try:
        entry = resolve_env(served)  # the summary and the splits need the registry entry here too
    except CLIError as exc:
        raise CLIError(f"{args.env_url} serves {served}, which this machine does not register: {exc}") from exc
    try:
        kwargs = resolve_split(entry.id, args.split, env_kwargs(args.env_arg))
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    probe = RemoteEnv(args.env_url, **kwargs)
    try:
        probe.reset(seed=args.seed)  # fail early on bad --env-arg
    except (RemoteEnvError, InfrastructureError) as exc:
        raise CLIError(f"cannot play {served} at {args.env_url}: {exc}") from exc
    return entry, kwargs, probe


def add_parsers(sub: Any) -> None:
    from llm_envs.runner import DEFAULT_MAX_CONSECUTIVE_FAILURES

    p = sub.add_parser(
        "eval",
        help="evaluate agents on an environment",
        description="Evaluate agents on an environment (exit status 0: complete; 2: user or "
        "configuration error; 3: infrastructure failures left episodes unplayed, --resume plays them).",
    )
    p.add_argument("env_id", nargs="?",
                   help="environment id, e.g. llm/PlanPath-v0 (see `llm-envs list`); several: A,B,C")
    p.add_argument("--envs", metavar="A,B,C", help="several environments: one run each, one table and one report")
    p.add_argument("--suite", metavar="NAME",
                   help="a named suite of environments: seed (the seed papers' environments), games "
                   "(the OpenSpiel games), llm (every llm/ environment)")
    p.add_argument(
        "--agent",
        action="append",
        metavar="[AGENT=]SPEC",
        help="who plays: reference, random, human, openai:URL@MODEL, hf:PATH (a model directory, hub id, "
        ".gguf file, or smollm2), vllm:PATH, "
        "py:MODULE:ATTR; prefix AGENT= for one agent (repeatable)",
    )
    p.add_argument("--agents-file", metavar="YAML", help="agent specs with options (see docs/evaluation.md)")
    p.add_argument("--episodes", type=int, default=50, help="episodes to play (default 50)")
    p.add_argument(
        "--split",
        choices=("train", "validation", "test"),
        help="data split (default: test, where the env has splits)",
    )
    p.add_argument("--seed", type=seed_value, default=0, help="episode i is played from seed SEED+i (default 0)")
    p.add_argument(
        "--concurrency", type=int, default=8, help="environment instances in play at once (default 8)"
    )
    p.add_argument(
        "--max-batch-size", type=int, help="batching agents: most requests per call (default: no limit)"
    )
    p.add_argument("--out", type=Path, help="output directory (default: runs/eval/ENV/AGENTS-seedN)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out: play only the episodes it lacks (refused if the settings changed)",
    )
    p.add_argument(
        "--force-resume",
        action="store_true",
        help="with --resume: continue even though the settings changed (recorded as mixed settings)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the run in --out")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment option (repeatable)")
    p.add_argument(
        "--env-url",
        metavar="URL",
        help="play every episode on the `llm-envs serve` server at URL (ENV_ID optional: the server's); "
        "reference agents need the server's --expose-reference",
    )
    p.add_argument(
        "--max-consecutive-failures",
        type=int,
        default=DEFAULT_MAX_CONSECUTIVE_FAILURES,
        metavar="N",
        help=f"start no new episode after N failed calls in a row of one agent "
        f"(default {DEFAULT_MAX_CONSECUTIVE_FAILURES}; 0 = never stop)",
    )
    add_model_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="no plot.png")
    p.add_argument("--no-report", action="store_true", help="no report.html (see `llm-envs report`)")
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="compare two runs: side by side, and with paired tests on the seeds they share",
    )
    from llm_envs.distributed.evaluation import add_ray_arguments

    add_ray_arguments(p)
    p.set_defaults(func=cmd_eval)
