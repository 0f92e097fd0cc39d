"""``llm-envs arena``: a tournament among agents on a multi-player game, with ratings.

.. code-block:: bash

    llm-envs arena llm/KuhnPoker-v0 --agent nash=reference --agent random \\
        --agent qwen=openai:http://127.0.0.1:8000/v1@Qwen2.5-7B-Instruct --rounds 10 --games 50

Agents are the specs of ``llm-envs eval`` (:mod:`llm_envs.agents.spec`), each optionally named
``NAME=SPEC`` (default name: the spec itself); ``--agents-file`` reads ``name: spec`` (or
``name: {spec: ..., options}``) from YAML. The run directory is described in
:mod:`llm_envs.games.arena` and ``docs/arena.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from llm_envs.core.writing import for_terminal

from ._common import (
    EXIT_INCOMPLETE,
    EXIT_USAGE,
    CLIError,
    add_model_options,
    command_line,
    env_kwargs,
    model_defaults,
    positive_int,
    refuse_unexposed_reference,
    seed_value,
    slug,
)


def _competitors(args: argparse.Namespace) -> dict[str, Any]:
    """Agent name → parsed spec, from --agents-file then --agent (in order)."""
    from llm_envs.agents.spec import AgentSpecError, load_yaml_file, parse_agent_spec, parse_assignment

    specs: dict[str, Any] = {}

    def add(name: str, spec: Any) -> None:
        if name in specs:
            raise CLIError(f"two agents are named {name!r}: name them apart with NAME=SPEC")
        specs[name] = spec

    if args.agents_file:
        try:
            data = load_yaml_file(args.agents_file)
        except (OSError, yaml.YAMLError) as exc:
            raise CLIError(f"cannot read agents file {args.agents_file!r}: {exc}") from exc
        if isinstance(data, dict) and set(data) == {"agents"}:
            data = data["agents"]
        if not isinstance(data, dict):
            raise CLIError(f"agents file {args.agents_file!r} must map agent names to specs")
        for name, value in data.items():
            if isinstance(value, str):
                add(str(name), parse_agent_spec(value))
            elif isinstance(value, dict) and isinstance(value.get("spec"), str):
                options = {k: v for k, v in value.items() if k != "spec"}
                add(str(name), parse_agent_spec(value["spec"]).with_options(options))
            else:
                raise CLIError(f"agents file entry {name!r} must be a spec string or a mapping with 'spec'")
    for text in args.agent or []:
        try:
            name, spec = parse_assignment(text)
        except AgentSpecError as exc:
            raise CLIError(str(exc)) from exc
        add(name if name is not None else str(spec), spec)
    if len(specs) < 2:
        raise CLIError("an arena needs at least two agents: --agent NAME=SPEC (repeatable) or --agents-file")
    return specs


def cmd_arena(args: argparse.Namespace) -> int:
    import llm_envs
    from llm_envs.agents.spec import resolve_agents
    from llm_envs.episodes import IncompleteRunError
    from llm_envs.games.arena import format_arena, run_arena
    from llm_envs.registry import entry

    try:
        env_entry = entry(args.env_id)
    except KeyError as exc:
        raise CLIError(str(exc.args[0])) from exc
    kwargs = env_kwargs(args.env_arg)
    try:
        llm_envs.make(env_entry.id, **kwargs).close()  # fail early on bad --env-arg
    except (TypeError, ValueError, ImportError) as exc:
        raise CLIError(f"cannot create {env_entry.id}: {exc}") from exc
    if args.env_url:  # every game on the server at --env-url: it must serve this game
        from llm_envs.core.errors import InfrastructureError
        from llm_envs.interop.remote import served_info

        try:
            info = served_info(args.env_url)
        except InfrastructureError as exc:
            raise CLIError(str(exc)) from exc
        if info["env_id"] != env_entry.id:
            raise CLIError(f"--env-url {args.env_url} serves {info['env_id']}, not {env_entry.id}")
    specs = _competitors(args)
    if args.env_url:
        refuse_unexposed_reference(args.env_url, bool(info.get("expose_reference")), specs.values())
    defaults = model_defaults(args)
    agents = {}
    for name, spec in specs.items():
        # One agent object per competitor: two names with the same spec are two players.
        agents[name] = resolve_agents({None: spec}, ["agent"], model_defaults=defaults)["agent"]
    fmt = args.format.replace("-", "_")
    out = args.out or Path("runs") / "arena" / env_entry.id.split("/")[-1] / slug(
        "+".join(specs) + f"-{fmt}-seed{args.seed}"
    )
    print(f"arena {env_entry.id}: {for_terminal(', '.join(specs), one_line=True)}; {fmt}, {args.rounds} round(s), {args.games} seed(s) "
          f"per match; writing to {out}", file=sys.stderr)
    try:
        summary = run_arena(
            env_entry.id,
            agents,
            out_dir=out,
            specs={name: str(spec) for name, spec in specs.items()},
            fmt=fmt,
            rounds=args.rounds,
            games=args.games,
            seed=args.seed,
            concurrency=args.concurrency,
            env_kwargs=kwargs,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            plot=not args.no_plot,
            model=args.rating_model,
            confidence=args.confidence,
            settings={"command": command_line()},
            log=lambda message: print(for_terminal(message), file=sys.stderr),
            env_url=args.env_url,
        )
    except IncompleteRunError as exc:
        # An infrastructure failure (a server down, a sandbox failure) is not a game result: the
        # games it cut short are not scored; finished games stay on disk for --resume.
        print(f"error: the tournament is incomplete: {for_terminal(str(exc))}\nfinished games are saved in {out}; "
              "run the same command with --resume to play the rest", file=sys.stderr)
        return EXIT_USAGE if exc.configuration_error is not None else EXIT_INCOMPLETE
    finally:
        for agent in agents.values():
            agent.close()
    print(for_terminal(format_arena(summary)))
    print(f"\nwrote {out}/summary.json, {out}/games.jsonl" + ("" if args.no_plot else f", {out}/plot.png"))
    if not args.no_report:
        from llm_envs.report import write_report_safely

        if write_report_safely(out, log=lambda message: print(for_terminal(message), file=sys.stderr)):
            print(f"wrote {out}/report.html (open it in a browser)")
    return 0


def add_parsers(sub: Any) -> None:
    from llm_envs.games.ratings import MODELS

    p = sub.add_parser("arena", help="a tournament among agents on a multi-player game, with ratings")
    p.add_argument("env_id", help="a game with two or more seats, e.g. llm/KuhnPoker-v0")
    p.add_argument("--agent", action="append", metavar="[NAME=]SPEC",
                   help="a competitor: reference, random[:SEED], openai:URL@MODEL, hf:PATH, vllm:PATH, "
                   "py:MODULE:ATTR; NAME= names it (repeatable)")
    p.add_argument("--agents-file", metavar="YAML", help="competitors as name: spec (or name: {spec: ..., options})")
    p.add_argument("--format", choices=("round-robin", "swiss"), default="round-robin",
                   help="every pairing plays (round-robin) or pairings by current score (swiss); default round-robin")
    p.add_argument("--rounds", type=positive_int, default=1,
                   help="round-robin: matches per set of agents; swiss: rounds (default 1)")
    p.add_argument("--games", type=positive_int, default=1,
                   help="seeds per match; each is played in every seat rotation (default 1)")
    p.add_argument("--seed", type=seed_value, default=0, help="round r plays seeds SEED + r*GAMES ...")
    p.add_argument("--concurrency", type=positive_int, default=8, help="games in play at once within a match")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment option (repeatable)")
    p.add_argument("--env-url", metavar="URL",
                   help="play every game on the `llm-envs serve` server at URL (it must serve ENV_ID; "
                   "reference agents need its --expose-reference)")
    p.add_argument("--rating-model", choices=MODELS, default="plackett_luce", help="OpenSkill model")
    p.add_argument("--confidence", type=float, default=0.95, help="level of the rating intervals")
    p.add_argument("--out", type=Path, help="output directory (default: runs/arena/ENV/AGENTS-FORMAT-seedN)")
    p.add_argument("--resume", action="store_true", help="continue the tournament in --out")
    p.add_argument("--overwrite", action="store_true", help="replace the tournament in --out")
    add_model_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="no plot.png")
    p.add_argument("--no-report", action="store_true", help="no report.html (see `llm-envs report`)")
    p.set_defaults(func=cmd_arena)
