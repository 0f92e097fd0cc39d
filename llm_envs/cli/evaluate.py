"""``llm-envs eval``: evaluate agents on an environment, or compare two evaluation runs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._common import CLIError, env_kwargs, slug


def _build_eval_agents(
    args: argparse.Namespace, possible_agents: Sequence[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    from llm_envs.agents.spec import load_agents_config, parse_assignments, resolve_agents

    assignments = load_agents_config(args.agents_file) if args.agents_file else {}
    for key, spec in parse_assignments(args.agent or []).items():
        assignments[key] = spec  # the command line wins over the file
    if not assignments:
        print("no --agent given: the reference agents play every role", file=sys.stderr)
    model_defaults = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "stop": args.stop,
        "seed": args.sampling_seed,
        "max_concurrency": args.max_concurrency,
        "timeout_s": args.timeout,
    }
    agents = resolve_agents(assignments, possible_agents, default="reference", model_defaults=model_defaults)
    specs = {("*" if k is None else k): str(v) for k, v in assignments.items()} or {"*": "reference"}
    return agents, specs


def cmd_eval(args: argparse.Namespace) -> int:
    from llm_envs.evaluation import compare_summaries, evaluate, format_summary, load_summary

    if args.compare:
        run_a, run_b = args.compare
        try:
            a, b = load_summary(run_a), load_summary(run_b)
        except (FileNotFoundError, json.JSONDecodeError) as exc:
            raise CLIError(str(exc)) from exc
        print(compare_summaries(a, b, labels=(str(run_a), str(run_b))))
        return 0
    if not args.env_id:
        raise CLIError("eval needs an environment id (see `llm-envs list`), or --compare RUN_A RUN_B")

    import llm_envs
    from llm_envs.registry import entry

    try:
        env_entry = entry(args.env_id)
    except KeyError as exc:
        raise CLIError(str(exc.args[0])) from exc
    from llm_envs.evaluation import resolve_split

    try:
        kwargs = resolve_split(env_entry.id, args.split, env_kwargs(args.env_arg))
        probe = llm_envs.make(env_entry.id, **kwargs)  # fail early on bad --env-arg
    except (TypeError, ValueError, ImportError) as exc:
        raise CLIError(f"cannot create {env_entry.id}: {exc}") from exc
    possible_agents = list(probe.possible_agents)
    probe.close()
    if args.ray is not None:  # the episodes are played on Ray workers (llm_envs/distributed)
        from llm_envs.distributed.evaluation import cmd_eval_ray

        return cmd_eval_ray(args, env_entry.id, kwargs)
    agents, specs = _build_eval_agents(args, possible_agents)
    from llm_envs.agents.human import HumanAgent

    if any(isinstance(agent, HumanAgent) for agent in agents.values()):
        # A person answers one prompt at a time, and a progress bar would cut through them.
        if args.concurrency != 1:
            print("a human plays: one episode at a time (--concurrency 1)", file=sys.stderr)
        args.concurrency, args.no_progress = 1, True
    out = args.out or Path("runs") / "eval" / env_entry.id.split("/")[-1] / slug(
        "+".join(f"{k}={v}" if k != "*" else v for k, v in sorted(specs.items())) + f"-seed{args.seed}"
    )
    print(
        f"evaluating {env_entry.id}: "
        + ", ".join(f"{a}={agent.name}" for a, agent in agents.items())
        + f"; {args.episodes} episodes, concurrency {args.concurrency}; writing to {out}",
        file=sys.stderr,
    )
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
            overwrite=args.overwrite,
            progress=not args.no_progress,
            plot=not args.no_plot,
            max_batch_size=args.max_batch_size,
            settings={"agent_specs": specs, "command": "llm-envs " + " ".join(sys.argv[1:])},
            log=lambda message: print(message, file=sys.stderr),
        )
    finally:
        for agent in {id(a): a for a in agents.values()}.values():
            agent.close()
    print(format_summary(summary))
    print(f"\nwrote {out}/summary.json, {out}/episodes.jsonl" + ("" if args.no_plot else f", {out}/plot.png"))
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("eval", help="evaluate agents on an environment")
    p.add_argument("env_id", nargs="?", help="environment id, e.g. llm/PlanPath-v0")
    p.add_argument(
        "--agent",
        action="append",
        metavar="[AGENT=]SPEC",
        help="who plays: reference, random, human, openai:URL@MODEL, hf:PATH, vllm:PATH, "
        "py:MODULE:ATTR; prefix AGENT= for one agent (repeatable)",
    )
    p.add_argument("--agents-file", metavar="YAML", help="agent specs with options (see docs/evaluation.md)")
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument(
        "--split",
        choices=("train", "validation", "test"),
        help="data split (default: test, where the env has splits)",
    )
    p.add_argument("--seed", type=int, default=0, help="episode i is played from seed SEED+i")
    p.add_argument("--concurrency", type=int, default=8, help="environment instances in play at once")
    p.add_argument("--max-batch-size", type=int, help="most requests per agent call (default: no limit)")
    p.add_argument("--out", type=Path, help="output directory (default: runs/eval/ENV/AGENTS-seedN)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--overwrite", action="store_true", help="replace the run in --out")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment option (repeatable)")
    sampling = p.add_argument_group(
        "model agents (openai, hf, vllm): defaults for options a spec does not set"
    )
    sampling.add_argument("--temperature", type=float)
    sampling.add_argument("--top-p", type=float)
    sampling.add_argument("--max-tokens", type=int)
    sampling.add_argument("--stop", action="append", help="stop string (repeatable)")
    sampling.add_argument("--sampling-seed", type=int, help="the sampling seed sent to the model")
    sampling.add_argument("--max-concurrency", type=int, help="HTTP agents: requests in flight")
    sampling.add_argument("--timeout", type=float, help="HTTP agents: seconds per request")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plot", action="store_true", help="no plot.png")
    p.add_argument(
        "--compare", nargs=2, metavar=("RUN_A", "RUN_B"), help="print two runs side by side and exit"
    )
    from llm_envs.distributed.evaluation import add_ray_arguments

    add_ray_arguments(p)
    p.set_defaults(func=cmd_eval)
