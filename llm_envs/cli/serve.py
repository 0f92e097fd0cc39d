"""``llm-envs serve ENV_ID``: a registered environment as an OpenEnv-compatible server.

Needs the ``serve`` extra (``pip install 'llm-envs[serve]'``: openenv-core, uvicorn). OpenEnv's
clients and :func:`llm_envs.remote` talk to it; see docs/interop.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import CLIError, env_kwargs, resolve_env


def cmd_serve(args: argparse.Namespace) -> int:
    env_entry = resolve_env(args.env_id)
    try:
        import openenv.core  # noqa: F401
    except ImportError as exc:
        raise CLIError(f"llm-envs serve needs openenv-core: pip install 'llm-envs[serve]' ({exc})") from exc
    from llm_envs.serve.app import serve

    if args.max_sessions < 1:
        raise CLIError(f"--max-sessions must be >= 1, got {args.max_sessions}")
    if not 0 <= args.port <= 65535:
        raise CLIError(f"--port must be from 0 to 65535, got {args.port}")
    idle = args.idle_timeout if args.idle_timeout > 0 else None
    try:
        serve(
            env_entry.id,
            env_kwargs(args.env_arg),
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            max_sessions=args.max_sessions,
            idle_timeout_s=idle,
            max_message_bytes=args.max_message_bytes,
            expose_reference=args.expose_reference,
            client_options=not args.fixed_options,
        )
    except (TypeError, ImportError) as exc:
        raise CLIError(f"cannot serve {env_entry.id}: {exc}") from exc
    except KeyboardInterrupt:  # uvicorn shut down gracefully, then re-raised the signal
        pass
    print("server stopped", file=sys.stderr)
    return 0


def add_parsers(sub: Any) -> None:
    from llm_envs.serve.protocol import DEFAULT_MAX_MESSAGE_BYTES

    p = sub.add_parser(
        "serve",
        help="serve an environment over OpenEnv's HTTP/WebSocket protocol",
        description="Serve a registered environment as an OpenEnv-compatible server: one "
        "environment instance per WebSocket session (/ws), /health, /schema, /info. "
        "OpenEnv's clients and llm_envs.remote(URL) play it.",
    )
    p.add_argument("env_id", help="environment id, e.g. llm/Sudoku-v0 (see `llm-envs list`)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--max-sessions", type=int, default=64, help="WebSocket sessions open at once (default 64)")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="close a session after this long without a message (default 600; 0 = never)",
    )
    p.add_argument(
        "--max-message-bytes",
        type=int,
        default=DEFAULT_MAX_MESSAGE_BYTES,
        help=f"larger incoming messages get an error frame (default {DEFAULT_MAX_MESSAGE_BYTES})",
    )
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment option for every session (repeatable)")
    p.add_argument(
        "--expose-reference",
        action="store_true",
        help="put the reference agent's action in `state` (it can reveal answers: only for "
        "harnesses such as llm_envs.remote with reference agents, never for agents under test)",
    )
    p.add_argument(
        "--fixed-options",
        action="store_true",
        help="refuse every option a client sends with reset (by default clients may set any option "
        "but those naming files, the game, the sandbox or its limits, and render_mode: the list is "
        "in docs/interop.md)",
    )
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"),
                   help="uvicorn's log level (default warning; info logs every connection)")
    p.set_defaults(func=cmd_serve)
