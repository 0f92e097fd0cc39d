"""The ``llm-envs`` command line: one module per subcommand.

=========================================  ==================================================
``llm-envs list``                          every registered environment: id, agents, task
``llm-envs play ENV --as AGENT``           play one agent yourself; reference agents play the
                                           others; the transcript is printed as it goes
``llm-envs eval ENV --agent SPEC ...``     evaluate agents: table, ``summary.json``,
                                           ``episodes.jsonl``, ``plot.png``
``llm-envs eval --compare RUN_A RUN_B``    two evaluation runs side by side, with paired
                                           tests on the seeds they share
``llm-envs show RUN [--failed] ...``       saved episodes of an eval or demo run, as readable
                                           transcripts (every action with its reward)
``llm-envs report RUN [RUN ...]``          one self-contained ``report.html`` of an eval, arena
                                           or training run; several eval runs compared
``llm-envs demo``                          every environment with its reference agents and
                                           with the random agent, in one table
``llm-envs arena ENV --agent [NAME=]SPEC``  a round-robin or Swiss tournament among agents on a
                                           multi-player game: ratings with intervals, a
                                           table, a plot, every game on disk
``llm-envs audit ENV [--backend B]``       the exploit catalogue and the reward contract
                                           against the environment: held/paid per exploit
                                           and strategy; exit 1 if any is paid, 3 if nothing
                                           was graded (docs/audit.md)
``llm-envs prepare ENV``                   the per-problem work an environment would pay on a
                                           problem's first episode, done for a split before
                                           training (CoderTester: each problem's mutants)
``llm-envs serve ENV``                     the environment as an OpenEnv-compatible server
                                           (one instance per WebSocket session)
=========================================  ==================================================

Exit status: 0 success; 2 a user error (a mistyped id, spec, option or path, a server that
refuses the first requests); 3 an evaluation left incomplete by infrastructure failures
(``--resume`` completes it); 130 interrupted.

A subcommand lives in its own module with a ``cmd_<name>(args) -> int`` function and an
``add_parsers(sub)`` that registers it; add the module to ``_COMMAND_MODULES`` below.
Agent specs are documented in :mod:`llm_envs.agents.spec` and ``docs/evaluation.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from llm_envs.agents.spec import AgentSpecError
from llm_envs.core.writing import escape_unencodable_output, for_terminal

from . import arena, audit, demo, envs, evaluate, prepare, report, serve, show
from ._common import EXIT_INCOMPLETE, EXIT_USAGE, CLIError, import_modules

__all__ = ["CLIError", "EXIT_INCOMPLETE", "EXIT_USAGE", "build_parser", "main"]

# In the order `llm-envs --help` lists them.
_COMMAND_MODULES = (envs, evaluate, show, report, demo, arena, audit, prepare, serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llm-envs",
        description="Text-based multi-agent environments for LLM agents: list, play, evaluate.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMAND_MODULES:
        module.add_parsers(sub)
    for command in _ENV_COMMANDS:  # every command that names or lists environments
        sub.choices[command].add_argument(
            "--import", dest="import_", action="append", metavar="MODULE",
            help="import this module first (one that registers environments, e.g. a third party's; repeatable)")
    return parser


#: The commands that take or list environments, so also a third party's (``--import MODULE``).
_ENV_COMMANDS = ("list", "play", "eval", "demo", "arena", "audit", "prepare", "serve")


def _refuse_unknown_arguments(parser: argparse.ArgumentParser, command: str, unknown: Sequence[str]) -> None:
    """Exit 2 with the subcommand's own usage (not the top level's) and, for a mistyped flag, the
    flags it may have meant."""
    import difflib

    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    command_parser = subparsers.choices[command]
    flags = [flag for action in command_parser._actions for flag in action.option_strings]  # noqa: SLF001
    hints = []
    for argument in unknown:
        if argument.startswith("--"):
            close = difflib.get_close_matches(argument.split("=", 1)[0], flags, n=2, cutoff=0.6)
            if close:
                hints.append(f"{argument.split('=', 1)[0]}: did you mean {' or '.join(close)}?")
    command_parser.error(f"unrecognized arguments: {' '.join(unknown)}" + ("; " + "; ".join(hints) if hints else ""))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    escape_unencodable_output()
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _refuse_unknown_arguments(parser, args.command, unknown)
    from llm_envs.episodes import RunnerError
    from llm_envs.tasks.base import DatasetUnavailableError
    from sandboxes import SandboxUnavailable

    try:
        import_modules(getattr(args, "import_", None))
        return int(args.func(args) or 0)
    except (CLIError, AgentSpecError, RunnerError, ValueError, FileNotFoundError) as exc:
        print(f"error: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except (DatasetUnavailableError, SandboxUnavailable) as exc:  # data or a backend this machine lacks
        print(f"error: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (``llm-envs show RUN | head``): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except EOFError:
        print("error: the input ended; finished episodes are saved (use --resume to continue an eval)", file=sys.stderr)
        return 1
    except OSError as exc:  # a path that cannot be read or written: one line, no traceback
        print(f"error: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(
            "\ninterrupted; finished episodes are saved (use --resume to continue an eval)", file=sys.stderr
        )
        return 130
