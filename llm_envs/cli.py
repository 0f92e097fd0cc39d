"""The ``llm-envs`` command line.

=========================================  ==================================================
``llm-envs list``                          every registered environment: id, agents, task
``llm-envs play ENV --as AGENT``           play one agent yourself; reference agents play the
                                           others; the transcript is printed as it goes
``llm-envs eval ENV --agent SPEC ...``     evaluate agents: table, ``summary.json``,
                                           ``episodes.jsonl``, ``plot.png``
``llm-envs eval --compare RUN_A RUN_B``    two evaluation runs side by side
``llm-envs show RUN [--failed] ...``       saved episodes of an eval or demo run, as readable
                                           transcripts (every action with its reward)
``llm-envs demo``                          every environment with its reference agents and
                                           with the random agent, in one table
=========================================  ==================================================

Agent specs are documented in :mod:`llm_envs.agents.spec` and ``docs/evaluation.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_envs.agents.spec import AgentSpecError, parse_option_value

EXIT_USAGE = 2


class CLIError(Exception):
    """A user error: printed as ``error: ...`` with exit status 2."""


# ---------------------------------------------------------------------------- helpers
def _env_kwargs(pairs: Sequence[str] | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--env-arg takes key=value, got {pair!r}")
        kwargs[key.strip()] = parse_option_value(value)
    return kwargs


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    from llm_envs.evaluation.summary import _table as table

    return table(rows, header)


def _slug(text: str, limit: int = 60) -> str:
    slug = re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_") or "run"
    if len(slug) > limit:
        slug = slug[: limit - 9] + "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return slug


# ---------------------------------------------------------------------------- list
def cmd_list(args: argparse.Namespace) -> int:
    import llm_envs

    entries = llm_envs.list_envs()
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": e.id,
                        "agents": list(e.agents),
                        "task": e.task,
                        "description": e.description,
                        "paper": e.paper,
                    }
                    for e in entries
                ],
                indent=2,
            )
        )
        return 0
    rows = [[e.id, ", ".join(e.agents), e.task, e.description] for e in entries]
    print(_table(rows, ["id", "agents", "task", "description"]))
    return 0


# ---------------------------------------------------------------------------- play
def cmd_play(args: argparse.Namespace) -> int:
    import llm_envs
    from llm_envs.agents.base import ActRequest
    from llm_envs.agents.human import HumanAgent
    from llm_envs.agents.spec import build_agent

    try:
        env = llm_envs.make(args.env_id, **_env_kwargs(args.env_arg))
    except (KeyError, TypeError, ValueError, ImportError) as exc:
        raise CLIError(f"cannot create {args.env_id}: {exc}") from exc
    you = args.as_agent or env.possible_agents[0]
    if you not in env.possible_agents:
        raise CLIError(f"--as {you!r}: {args.env_id} has agents {', '.join(env.possible_agents)}")
    human = HumanAgent(end_marker=args.end_marker)
    others = build_agent(args.others)
    env.reset(seed=args.seed)
    print(
        f"{args.env_id}, seed {args.seed}: you play {you}; {others.name} plays "
        f"{', '.join(a for a in env.possible_agents if a != you) or 'nobody else'}."
    )
    print(env.transcript())  # the task (no actions yet)
    shown = 0
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last(observe=False)
        if terminated or truncated:
            env.step(None)
            continue
        player = human if agent == you else others
        try:
            output = player.act_batch([ActRequest(env.observe(agent), agent, env)])[0]
        except EOFError:
            print("\ninput closed: the game stops here.")
            return 1
        if output.error:
            print(f"[{agent}: agent error: {output.error}]")
        env.step(output.text)
        for record in env.records[shown:]:
            flag = "" if record.format_ok else "  [format error]"
            print(f"--- turn {record.turn} | {record.agent} ({record.role}){flag}")
            print(record.action if record.action.strip() else "<empty action>")
        shown = len(env.records)
    print("\n=== episode over ===")
    rewards = env.agent_rewards()
    print(
        _table(
            [[a, f"{r:+.3f}", "you" if a == you else others.name] for a, r in rewards.items()],
            ["agent", "reward", "played by"],
        )
    )
    print("metrics: " + ", ".join(f"{k}={v:g}" for k, v in env.episode_metrics().items()))
    return 0


# ---------------------------------------------------------------------------- eval
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
        env_kwargs = resolve_split(env_entry.id, args.split, _env_kwargs(args.env_arg))
        probe = llm_envs.make(env_entry.id, **env_kwargs)  # fail early on bad --env-arg
    except (TypeError, ValueError, ImportError) as exc:
        raise CLIError(f"cannot create {env_entry.id}: {exc}") from exc
    possible_agents = list(probe.possible_agents)
    probe.close()
    agents, specs = _build_eval_agents(args, possible_agents)
    from llm_envs.agents.human import HumanAgent

    if any(isinstance(agent, HumanAgent) for agent in agents.values()):
        # A person answers one prompt at a time, and a progress bar would cut through them.
        if args.concurrency != 1:
            print("a human plays: one episode at a time (--concurrency 1)", file=sys.stderr)
        args.concurrency, args.no_progress = 1, True
    out = args.out or Path("runs") / "eval" / env_entry.id.split("/")[-1] / _slug(
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
            env_kwargs=env_kwargs,
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


# ---------------------------------------------------------------------------- demo
def cmd_demo(args: argparse.Namespace) -> int:
    from llm_envs.evaluation.evaluate import DEMO_HEADER, run_demo

    started = time.perf_counter()
    print(
        f"demo: every environment, {args.episodes} episodes each with its reference agents and "
        f"with the random agent (seed {args.seed})"
    )
    rows = run_demo(
        episodes=args.episodes,
        concurrency=args.concurrency,
        seed=args.seed,
        out_dir=args.out,
        env_ids=args.env or None,
    )
    print()
    print(_table([r.cells() for r in rows], DEMO_HEADER))
    played = sum(1 for r in rows if r.success is not None)
    print(f"\n{played} runs in {time.perf_counter() - started:.1f}s; results under {args.out}/")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from llm_envs.evaluation.transcripts import (
        TranscriptError,
        episode_transcript,
        load_episodes,
        select_episodes,
    )

    try:
        episodes = load_episodes(args.run)
    except TranscriptError as exc:
        raise CLIError(str(exc)) from None
    outcome = "failed" if args.failed else "succeeded" if args.succeeded else None
    chosen = select_episodes(episodes, indices=args.episode, outcome=outcome, agent=args.agent)
    if not chosen:
        raise CLIError(f"no episode under {args.run} matches (of {len(episodes)} saved)")
    shown = chosen if args.limit <= 0 else chosen[: args.limit]
    print("\n\n".join(episode_transcript(e, prompts=args.prompts) for e in shown))
    if len(shown) < len(chosen):
        print(f"\n({len(chosen) - len(shown)} more matching episodes; use --limit 0 to show all)")
    return 0


# ---------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llm-envs",
        description="Text-based multi-agent environments for LLM agents: list, play, evaluate.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list the registered environments")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("play", help="play one agent yourself against reference agents")
    p.add_argument("env_id", help="environment id, e.g. llm/PlanPath-v0")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--as", dest="as_agent", metavar="AGENT", help="the agent you play (default: the first)")
    p.add_argument(
        "--others",
        default="reference",
        metavar="SPEC",
        help="who plays the other agents (default: reference)",
    )
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment option (repeatable)")
    p.add_argument("--end-marker", default="EOF", help="a line that ends a multi-line action (default: EOF)")
    p.set_defaults(func=cmd_play)

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
    p.set_defaults(func=cmd_eval)

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

    p = sub.add_parser("demo", help="every environment with reference and random agents, one table")
    p.add_argument("--episodes", type=int, default=20, help="episodes per environment and agent (default 20)")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/demo", help="results directory (default: runs/demo)")
    p.add_argument("--env", action="append", help="only these environments (repeatable)")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from llm_envs.runner import RunnerError

    try:
        return int(args.func(args) or 0)
    except (CLIError, AgentSpecError, RunnerError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (``llm-envs show RUN | head``): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(
            "\ninterrupted; finished episodes are saved (use --resume to continue an eval)", file=sys.stderr
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
