"""How the audit reaches an environment's grader: the ``audit_surface`` hook.

An environment tells the audit which of its agents write code, tests, programs or answers, what
an exploit needs to know about the problem in front of that agent, and how a program or answer
becomes an action. An environment (a third party's included) implements

.. code-block:: python

    def audit_surface(self) -> llm_envs.audit.AuditSurface: ...

returning an object with three methods (:class:`AuditSurface`):

* ``roles() -> dict[str, str]``: agent -> role (``"code"``, ``"tests"``, ``"program"``,
  ``"answer"``; see :mod:`llm_envs.audit.exploits`); agents left out are not attacked;
* ``target(agent) -> Target``: called after ``reset`` once it is ``agent``'s turn: what the
  exploits may use (entry point, an example call, the reference program, the limits);
* ``action(agent, text) -> str``: the action that submits ``text`` (a program, tests or an
  answer) as that agent's reply;
* optionally ``own_action_paid(agent) -> bool``: False where the agent's reward is a team
  outcome its reference partners reach whatever it answers (the tool under ReasonerTool's
  ``reward_mode="outcome"``): its ``right-beats-wrong`` row is then n/a, not a hole.

Our environments get a default surface from :func:`default_surface` (by class); the audit uses
the hook first. The audit reaches an agent's turn by stepping the others with
``env.reference_action(agent)``, so an audited environment needs one (ours all have it).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from llm_envs.audit.exploits import Target


@runtime_checkable
class AuditSurface(Protocol):
    """What an environment exposes to the audit (see the module docstring)."""

    def roles(self) -> dict[str, str]: ...

    def target(self, agent: str) -> Target: ...

    def action(self, agent: str, text: str) -> str: ...


def _fenced(text: str, label: str) -> str:
    return f"{label}\n```python\n{text.rstrip()}\n```"


def _first_equality(problem: Any) -> tuple[str | None, str | None]:
    """``(call, expected)`` of the first ``assert candidate(...) == value`` golden test."""
    import ast

    from sandboxes import parse_python

    call = problem.call or problem.entry_point
    for snippet in problem.tests if problem.style == "function" else ():
        try:
            tree = parse_python(snippet)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assert)
                and isinstance(node.test, ast.Compare)
                and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.Eq)
                and isinstance(node.test.left, ast.Call)
            ):
                source = ast.unparse(node.test.left)
                for alias in ("candidate", problem.entry_point):
                    if alias and source.startswith(alias + "("):
                        return call + source[len(alias) :], ast.unparse(node.test.comparators[0])
    return None, None


class CoderTesterSurface:
    """``llm/CoderTester-v0``: the coder writes ``code``, the tester ``tests`` (function-style
    problems; stdin/stdout problems are attacked by the ``program`` exploits through the coder)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def roles(self) -> dict[str, str]:
        problem = self.env.problem
        if problem is not None and problem.style == "io":
            return {"coder": "program"}
        return {agent: {"coder": "code", "tester": "tests"}[agent] for agent in self.env.possible_agents}

    def target(self, agent: str) -> Target:
        problem = self.env.problem
        call, expected = _first_equality(problem)
        return Target(
            role=self.roles()[agent],
            entry_point=problem.entry_point,
            call=problem.call,
            example_call=call,
            example_expected=expected,
            reference=problem.solution,
            memory_mb=512,
            time_s=float(self.env.config.test_time_s),
        )

    def action(self, agent: str, text: str) -> str:
        return _fenced(text, "**Tests:**" if agent == "tester" else "**Code:**")

    def own_action_paid(self, agent: str) -> bool:
        # under the team outcome, the tester is paid for the coder's code alone
        return not (agent == "tester" and self.env.config.reward_mode == "outcome")


class ReasonerToolSurface:
    """``llm/ReasonerTool-v0``: the tool writes a ``program``, the reasoner an ``answer``."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def roles(self) -> dict[str, str]:
        return {agent: {"tool": "program", "reasoner": "answer"}[agent] for agent in self.env.possible_agents}

    def target(self, agent: str) -> Target:
        from llm_envs.verifiers.code import extract_code

        cfg = self.env.config
        return Target(
            role=self.roles()[agent],
            reference=extract_code(self.env.reference_action("tool")),
            answer=str(self.env.problem.answer),
            memory_mb=int(cfg.program_memory_mb),
            time_s=float(cfg.program_time_s),
        )

    def action(self, agent: str, text: str) -> str:
        if agent == "tool":
            return _fenced(text, "")
        return f"Step by step, the result follows.\n\\boxed{{{text}}}"

    def own_action_paid(self, agent: str) -> bool:
        # under the team outcome, the tool is paid for the reasoner's answer alone
        return not (agent == "tool" and self.env.config.reward_mode == "outcome")


class PuzzleSurface:
    """Sudoku, Sokoban, Plan-Path: the tool agent (or the single solver) writes a ``program``
    that reads the puzzle on stdin and prints its plan."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def roles(self) -> dict[str, str]:
        return {agent: "program" for agent in self.env.possible_agents if agent in ("tool", "solver")}

    def target(self, agent: str) -> Target:
        cfg = self.env.config
        return Target(
            role="program",
            reference=self.env.rules.reference_program(),
            memory_mb=int(cfg.program_memory_mb),
            time_s=float(cfg.program_time_s),
        )

    def action(self, agent: str, text: str) -> str:
        return _fenced(text, "")


class DebateSurface:
    """``llm/Debate-v0``: every agent's boxed ``answer`` is checked against the truth."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def roles(self) -> dict[str, str]:
        return {agent: "answer" for agent in self.env.possible_agents}

    def target(self, agent: str) -> Target:
        return Target(role="answer", answer=str(self.env.problem.answer))

    def action(self, agent: str, text: str) -> str:
        return f"I reasoned it through.\n\\boxed{{{text}}}"


def default_surface(env: Any) -> AuditSurface | None:
    """The environment's own ``audit_surface()``, else ours for its class, else ``None``."""
    hook = getattr(env, "audit_surface", None)
    if callable(hook):
        surface = hook()
        if not isinstance(surface, AuditSurface):
            raise TypeError(f"{type(env).__name__}.audit_surface() must return an AuditSurface")
        return surface
    from llm_envs.envs.coder_tester.env import CoderTesterEnv
    from llm_envs.envs.puzzle_base import PuzzleEnv
    from llm_envs.envs.reasoner_tool.env import ReasonerToolEnv

    if isinstance(env, CoderTesterEnv):
        return CoderTesterSurface(env)
    if isinstance(env, ReasonerToolEnv):
        return ReasonerToolSurface(env)
    if isinstance(env, PuzzleEnv):
        return PuzzleSurface(env)
    try:
        from llm_envs.envs.debate.env import DebateEnv
    except ImportError:  # pragma: no cover
        DebateEnv = None  # type: ignore[assignment]
    if DebateEnv is not None and isinstance(env, DebateEnv):
        return DebateSurface(env)
    return None
