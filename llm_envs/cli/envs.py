"""``llm-envs list`` and ``llm-envs play``: the registered environments, and playing one yourself."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import CLIError, env_kwargs, resolve_env, table


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
    print(table(rows, ["id", "agents", "task", "description"]))
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    import llm_envs
    from llm_envs.agents.base import ActRequest, output_failure
    from llm_envs.agents.human import HumanAgent
    from llm_envs.agents.spec import build_agent

    env_id = resolve_env(args.env_id).id
    try:
        env = llm_envs.make(env_id, **env_kwargs(args.env_arg))
    except (KeyError, TypeError, ValueError, ImportError) as exc:
        raise CLIError(f"cannot create {env_id}: {exc}") from exc
    you = args.as_agent or env.possible_agents[0]
    if you not in env.possible_agents:
        raise CLIError(f"--as {you!r}: {env_id} has agents {', '.join(env.possible_agents)}")
    human = HumanAgent(end_marker=args.end_marker)
    others = build_agent(args.others)
    env.reset(seed=args.seed)
    print(
        f"{env_id}, seed {args.seed}: you play {you}; {others.name} plays "
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
        failure = output_failure(output)
        if failure is not None:  # no action was produced: never play it as an empty one
            print(f"\n[{agent} ({player.name}) produced no action: {failure.kind}: {failure}]")
            print("the game stops here.")
            return 1
        env.step(output.text)
        for record in env.records[shown:]:
            flag = "" if record.format_ok else "  [format error]"
            print(f"--- turn {record.turn} | {record.agent} ({record.role}){flag}")
            print(record.action if record.action.strip() else "<empty action>")
        shown = len(env.records)
    print("\n=== episode over ===")
    rewards = env.agent_rewards()
    print(
        table(
            [[a, f"{r:+.3f}", "you" if a == you else others.name] for a, r in rewards.items()],
            ["agent", "reward", "played by"],
        )
    )
    print("metrics: " + ", ".join(f"{k}={v:g}" for k, v in env.episode_metrics().items()))
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("list", help="list the registered environments")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("play", help="play one agent yourself against reference agents")
    p.add_argument("env_id", help="environment id, e.g. llm/PlanPath-v0")
    p.add_argument("--seed", type=int, default=0, help="the episode's seed (default 0)")
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
