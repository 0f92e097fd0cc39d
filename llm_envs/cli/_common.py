"""What every ``llm-envs`` subcommand shares: the user-error exception and small helpers."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import math
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from llm_envs.agents.spec import parse_option_value

#: Exit status of a user error (a mistyped id, spec or path; a misconfigured server).
EXIT_USAGE = 2
#: Exit status of a run that infrastructure failures left incomplete (``--resume`` completes it).
EXIT_INCOMPLETE = 3


class CLIError(Exception):
    """A user error: printed as ``error: ...`` with exit status 2."""


def _int_at_least(minimum: int) -> Any:
    """An argparse ``type``: an integer >= ``minimum``, refused by the parser (before anything
    is printed or made)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


#: ``--seed``: an integer >= 0 (numpy's and Python's generators refuse a negative seed, which
#: would otherwise fail after the run's directory is made).
seed_value = _int_at_least(0)
#: A count that must be at least 1 (``arena --rounds``).
positive_int = _int_at_least(1)


def command_line(program: str = "llm-envs") -> str:
    """This process's command line as a run records it, with the credentials in any URL on it
    (``openai:http://user:KEY@host/v1@m``, ``?api_key=``) written as ``***``."""
    from llm_envs.agents.openai_http import redact_text

    return redact_text(" ".join([program, *sys.argv[1:]]))


def refuse_unexposed_reference(url: str, reference_exposed: bool, specs: Iterable[Any]) -> None:
    """A user error where a ``reference`` agent would play on the server at ``url`` and the
    server does not expose reference actions: every episode would otherwise fail as an
    infrastructure failure (exit 3) and a resume fail alike."""
    if not reference_exposed and any(getattr(spec, "kind", None) == "reference" for spec in specs):
        raise CLIError(f"the server at {url} does not expose reference actions: start it with "
                       "`llm-envs serve ... --expose-reference`, or evaluate another agent")


def env_kwargs(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``--env-arg key=value`` pairs as keyword arguments (values parsed as YAML scalars)."""
    kwargs: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--env-arg takes key=value, got {pair!r}")
        kwargs[key.strip()] = parse_option_value(value)
    return kwargs


def import_modules(modules: Sequence[str] | None) -> None:
    """Import each ``--import MODULE``: a third party's package that registers environments."""
    for module in modules or ():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise CLIError(f"--import {module}: {exc}") from exc


def resolve_env(env_id: str) -> Any:
    """The registry entry of ``env_id``, or a one-line :class:`CLIError` naming the closest
    registered ids (never PettingZoo's list of every environment it knows)."""
    from llm_envs.registry import UnknownEnvironmentError, entry

    try:
        return entry(env_id)
    except UnknownEnvironmentError as exc:
        raise CLIError(str(exc)) from None


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    from llm_envs.evaluation.summary import _table

    return _table(rows, header)


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe form of ``text``, shortened with a hash suffix past ``limit``."""
    result = re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_") or "run"
    if len(result) > limit:
        result = result[: limit - 9] + "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return result


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The sampling and transport defaults for model agents that ``eval`` and ``arena`` share
    (read back with :func:`model_defaults`)."""
    from llm_envs.agents.openai_http import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT_S

    group = parser.add_argument_group("model agents (openai, hf, vllm): defaults for options a spec does not set")
    group.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature (default 0: greedy decoding, as evaluation harnesses use, for "
        "every model agent: openai agents send temperature 0); a spec's own temperature wins; "
        "run.json records the value each agent used",
    )
    group.add_argument(
        "--top-p",
        type=float,
        help="nucleus sampling mass (default: 1.0, off, for hf and vllm agents; the server's for openai agents)",
    )
    group.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help=f"most completion tokens per model call (default {DEFAULT_MAX_TOKENS}, so that a "
        "server's own default, often the whole context, never decides how long a run takes; "
        "0 = the server's default, for openai agents only: hf and vllm agents refuse 0)",
    )
    group.add_argument("--stop", action="append", help="stop string (repeatable)")
    group.add_argument(
        "--sampling-seed",
        type=int,
        help="the sampling seed (hf and vllm agents: their generator's seed, default 0; openai: sent to the server)",
    )
    group.add_argument(
        "--threads",
        type=int,
        help="hf agents: torch intra-op threads (default: OMP_NUM_THREADS if set, else the CPUs this "
        "process may use, i.e. its CPU affinity capped by the cgroup CPU quota; on a machine shared "
        "with other busy processes 1 is usually fastest)",
    )
    group.add_argument("--max-concurrency", type=int, help="HTTP agents: most requests in flight per agent (default 8)")
    group.add_argument(
        "--timeout",
        type=float,
        help=f"HTTP agents: seconds per request before it is cancelled (default {DEFAULT_TIMEOUT_S:g}); "
        "a timed-out request is not re-sent and its episode is left for --resume",
    )
    group.add_argument(
        "--retry-timeouts",
        action="store_true",
        help="HTTP agents: re-send a timed-out request (only for servers that stop working on a "
        "request when the client goes away, as vLLM and SGLang do)",
    )
    group.add_argument(
        "--cache",
        type=Path,
        metavar="PATH",
        help="HTTP agents: keep every answer in this SQLite file and never send an answered "
        "request again (key: server, model, messages, sampling fields, episode seed, decision)",
    )


def model_defaults(args: argparse.Namespace) -> dict[str, Any]:
    """The options of :func:`add_model_options` as agent-spec defaults (``None``: not set)."""
    if args.max_tokens is not None and args.max_tokens < 0:
        raise CLIError(f"--max-tokens must be >= 1 (or 0 for an openai server's own default), got {args.max_tokens}")
    if getattr(args, "threads", None) is not None and args.threads < 1:
        raise CLIError(f"--threads must be >= 1, got {args.threads}")
    # (a temperature of -1 or NaN, a top_p of 2 were accepted and sent to every model)
    if args.temperature is not None and not 0 <= args.temperature < math.inf:
        raise CLIError(f"--temperature must be a finite number >= 0, got {args.temperature}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise CLIError(f"--top-p must be in (0, 1], got {args.top_p}")
    for flag, value in (("--max-concurrency", args.max_concurrency), ("--timeout", args.timeout)):
        if value is not None and not 0 < value < math.inf:
            raise CLIError(f"{flag} must be a finite number > 0, got {value}")
    return {
        "temperature": args.temperature,
        "top_p": args.top_p,
        # 0 stays 0: openai agents then send no limit; hf and vllm agents refuse it (resolve_specs).
        "max_tokens": args.max_tokens,
        "threads": getattr(args, "threads", None),
        "stop": args.stop,
        "seed": args.sampling_seed,
        "max_concurrency": args.max_concurrency,
        "timeout_s": args.timeout,
        "retry_timeouts": True if args.retry_timeouts else None,
        "cache": str(args.cache) if args.cache else None,
    }
