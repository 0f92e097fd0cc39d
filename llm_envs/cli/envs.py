"""``llm-envs list`` and ``llm-envs play``: the registered environments, and playing one yourself."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from ._common import CLIError, env_kwargs, resolve_env, seed_value, table


def env_isolation(entry: Any) -> dict[str, Any]:
    """What an environment's grader runs in, from its class alone (no sandbox starts):
    ``runs_code`` (its agents' programs run in a sandbox) and ``limits`` (its per-run limits:
    the config's ``*_time_s`` and ``*_memory_mb`` defaults, with the registry's kwargs)."""
    from llm_envs.envs._common import SandboxUser

    try:
        klass = entry.load()
    except ImportError as exc:
        return {"runs_code": None, "limits": {}, "error": f"cannot import: {exc}"}
    runs_code = isinstance(klass, type) and issubclass(klass, SandboxUser)
    limits: dict[str, Any] = {}
    config_class = getattr(klass, "config_class", None)
    if runs_code and config_class is not None:
        import dataclasses

        for item in dataclasses.fields(config_class):
            if item.name.endswith(("_time_s", "_memory_mb")) and item.default is not dataclasses.MISSING:
                limits[item.name] = entry.kwargs.get(item.name, item.default)
    return {"runs_code": runs_code, "limits": limits}


def sandbox_isolation(backend: str) -> dict[str, Any]:
    """``Sandbox.isolation()`` of the backend the code environments would use (``auto``: the
    strongest that works here; probing it takes a second or two), or why there is none."""
    import sandboxes

    try:
        sandbox = sandboxes.make_sandbox(backend)
    except sandboxes.SandboxError as exc:  # (a backend that cannot run here: said in the table)
        return {"backend": backend, "available": False, "error": str(exc).splitlines()[0]}
    except ValueError as exc:  # (no such backend: the table would have named it all the same)
        raise CLIError(f"--backend: {str(exc).splitlines()[0]}") from exc
    try:
        describe = getattr(sandbox, "isolation", None)
        if callable(describe):
            return {"available": True, **describe()}
        return {"available": True, "backend": sandbox.name, "description": sandbox.describe()}
    finally:
        sandbox.close()


def _limits_text(limits: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in limits.items())


def cmd_list(args: argparse.Namespace) -> int:
    import llm_envs

    entries = llm_envs.list_envs()
    isolations = {e.id: env_isolation(e) for e in entries}
    sandbox = sandbox_isolation(args.backend) if args.isolation else None
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
                        "isolation": {
                            **isolations[e.id],
                            **({"sandbox": sandbox} if sandbox is not None and isolations[e.id]["runs_code"] else {}),
                        },
                    }
                    for e in entries
                ],
                indent=2,
            )
        )
        return 0
    if not args.isolation:
        rows = [[e.id, ", ".join(e.agents), e.task, e.description] for e in entries]
        print(table(rows, ["id", "agents", "task", "description"]))
        code = [e.id for e in entries if isolations[e.id]["runs_code"]]
        print(
            f"\n{len(code)} environments run their agents' code in the sandbox ({', '.join(code)}); "
            "`llm-envs list --isolation` shows the backend, what it binds and the limits."
        )
        return 0
    rows = []
    for e in entries:
        info = isolations[e.id]
        if info.get("error"):
            where, limits = info["error"], ""
        elif info["runs_code"]:
            where, limits = f"sandbox ({sandbox.get('backend', args.backend) if sandbox else args.backend})", _limits_text(info["limits"])
        else:
            where, limits = "no code runs", ""
        rows.append([e.id, where, limits])
    print(table(rows, ["id", "agents' code runs in", "per-run limits"]))
    print()
    print(_sandbox_text(sandbox or {}))
    return 0


def _sandbox_text(info: dict[str, Any]) -> str:
    """The sandbox's isolation in a few lines."""
    if not info.get("available", True):
        return f"sandbox {info.get('backend')}: unavailable here ({info.get('error')})"
    lines = [f"sandbox: {info.get('description', info.get('backend'))}"]
    imports = info.get("imports") or {}
    if imports:
        packages = ", ".join(sorted(imports.get("packages", {}))) or "none"
        lines.append(f"  importable: the standard library and {packages}")
        hidden = imports.get("hidden_package_dirs") or []
        if hidden:
            lines.append(f"  hidden package directories: {', '.join(hidden)}")
    filesystem = info.get("filesystem") or {}
    if filesystem:
        lines.append(f"  read-only: {', '.join(filesystem.get('read_only', [])) or '-'}")
        writable = filesystem.get("writable") or {}
        if isinstance(writable, dict):
            lines.append("  writable: " + ", ".join(f"{k} ({v} MiB)" for k, v in writable.items()))
        if filesystem.get("hidden"):
            lines.append(f"  hidden: {', '.join(map(str, filesystem['hidden']))}")
    for key in ("network", "uids", "seccomp", "memory"):
        if info.get(key):
            value = info[key]
            lines.append(f"  {key}: {value if isinstance(value, str) else json.dumps(value)}")
    if info.get("limits"):
        lines.append(f"  default limits: {_limits_text(info['limits'])}")
    return "\n".join(lines)


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
    partners = [a for a in env.possible_agents if a != you]
    if partners:
        print(f"{env_id}, seed {args.seed}: you play {you}; {others.name} plays {', '.join(partners)}.")
    else:
        print(f"{env_id}, seed {args.seed}: you play {you}, the only agent of this environment "
              "(no partner or opponent; --others is not used).")
    print(env.transcript())  # the task (no actions yet)
    shown = 0
    held: list[Any] = []  # other agents' moves not printed yet: your next prompt may show them

    def show(records: Sequence[Any]) -> None:
        for record in records:
            flag = "" if record.format_ok else "  [format error]"
            # Records count turns from 0; prompts say "turn 1 of N": shown as prompts do.
            print(f"--- turn {record.turn + 1} | {record.agent} ({record.role}){flag}")
            print(record.action if record.action.strip() else "<empty action>")

    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last(observe=False)
        if terminated or truncated:
            env.step(None)
            continue
        player = human if agent == you else others
        observation = env.observe(agent)
        if agent == you:  # what the prompt shows in full is not printed a second time
            prompt = observation.get("prompt", "")
            show([r for r in held if not _shown_in(r.action, prompt)])
            held = []
        try:
            output = player.act_batch([ActRequest(observation, agent, env)])[0]
        except EOFError:
            print("\ninput closed: the game stops here.")
            return 1
        failure = output_failure(output)
        if failure is not None:  # no action was produced: never play it as an empty one
            print(f"\n[{agent} ({player.name}) produced no action: {failure.kind}: {failure}]")
            print("the game stops here.")
            return 1
        env.step(output.text)
        new = env.records[shown:]
        shown = len(env.records)
        show([r for r in new if r.agent == you])
        held += [r for r in new if r.agent != you]
    show(held)
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


def _shown_in(action: str, prompt: str) -> bool:
    """Whether a move's text is already in the prompt (the prompt quotes it, perhaps with other
    fences): at least 80% of its non-empty lines are lines of the prompt."""
    lines = [line.strip() for line in action.splitlines() if line.strip() and not line.strip().startswith("```")]
    if not lines:
        return False
    prompt_lines = {line.strip() for line in prompt.splitlines()}
    return sum(line in prompt_lines for line in lines) >= 0.8 * len(lines)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("list", help="list the registered environments (--isolation: where their code runs)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--isolation",
        action="store_true",
        help="show where each environment's code runs: the sandbox backend, what it binds, the limits",
    )
    p.add_argument("--backend", default="auto", help="the sandbox backend to describe with --isolation (default auto)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("play", help="play one agent yourself against reference agents")
    p.add_argument("env_id", help="environment id, e.g. llm/PlanPath-v0")
    p.add_argument("--seed", type=seed_value, default=0, help="the episode's seed (default 0)")
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
