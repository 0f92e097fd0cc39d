"""The AEC layer of the Stronger-MAS puzzle environments: Sudoku, Sokoban and Plan-Path.

The three games differ only in their rules (each game's ``rules.py``, a
:class:`~llm_envs.envs.puzzle_rules.PuzzleRules`); :class:`PuzzleEnv` plays them all the same
way. A tool agent writes a program that the sandbox runs on the puzzle and whose printed plan is
simulated on a copy; a plan agent then answers ``#### <plan>``, applied to the real puzzle
(``agents="single"``: one ``solver`` does both). Rewards are ``alpha * r_team + r_local``,
dense (the game's shaped reward, a potential difference, measured by default from the best
potential the episode reached) or outcome (1/0); the tool's copy-scored plan pays only
improvements of the best value the episode reached, so that no stall earns more than solving
at once, summed or in any one turn. A program the sandbox failed to run is never scored:
``step`` raises :class:`~llm_envs.core.SandboxFailure` before the state changes.

docs/envs/puzzles.md has the turn structure, the reward table and the single-agent variant in
full; the pure helpers are in :mod:`llm_envs.envs.puzzle_rules` and the interop hooks in
:mod:`llm_envs.interop.puzzle_hooks`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from llm_envs.core.bounds import UNBOUNDED, either, scaled, summed
from llm_envs.core.env import TextEnv
from llm_envs.core.splits import check_split
from llm_envs.core.writing import fenced
from llm_envs.envs._common import SandboxUser, check_team_options, end_turn
from llm_envs.envs.grading import Grading
from llm_envs.envs.puzzle_rules import (
    ANSWER_FORMATS,
    ANSWER_MARKER,
    REWARD_SHAPINGS,
    PlanFormatError,
    PlanOutcome,
    PuzzleRules,
    compile_error,
    extract_answer,
    extract_program,
    extract_program_output_plan,
    truncate_middle,
)
from llm_envs.interop.puzzle_hooks import PuzzleHooks

#: What the single agent's reference action writes (``PuzzleConfig.reference_solver``).
REFERENCE_SOLVERS = ("program", "plan")

# Tracebacks name the sandbox's temporary file; prompts show a stable name instead, so that the
# same program gives the same observation in every run.
_TRACEBACK_PATH = re.compile(r'File "[^"\n]*main\.py"')

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------- config
#: ``PuzzleConfig.progress_reference`` values: ``"best"`` (a real transition's potential change is
#: measured from the best potential the episode reached) and ``"previous"`` (from the state before).
PROGRESS_REFERENCES = ("best", "previous")


@dataclass
class PuzzleConfig:
    """Options shared by the three puzzle environments (defaults follow Stronger-MAS).

    Attributes:
        agents: ``"multi"``: agents ``tool`` and ``plan`` (the paper's MAS); ``"single"``: one
            agent ``solver`` that writes the program and/or the final answer.
        max_turns: Turn limit T (one tool + one plan action per turn). Paper: T = 4.
        reward_mode: ``"dense"`` (shaped, default) or ``"outcome"`` (1/0 only).
        reward_shaping: ``"potential"`` (default): every dense term is the change of a
            potential of the state, and the tool's copy-scored plan pays only improvements of
            the best value the episode reached (docs/envs/puzzles.md). ``"paper"``: the
            released code's per-turn rewards (the tool paid its plan at every turn, the game's
            paper weights); they pay stalls and shuttles, so they need ``allow_reward_holes``.
        progress_reference: What a real transition's potential change is measured from (dense,
            ``"potential"`` shaping). ``"best"`` (default): from the best potential the
            episode's real states reached, ``B``: the move costs plus ``Φ(after) − B``, so a
            turn that regains lost progress is paid only what lies above ``B`` and no turn pays
            more than solving at once pays in its one turn. ``"previous"``: from the state before
            the plan, ``Φ(after) − Φ(before)`` (the pure potential difference; its sum is bounded
            all the same, but the turn after a loss can pay more than solving at once). Outcome
            mode and ``"paper"`` shaping pay the transition as it is.
        answer_format: ``"lenient"`` (default): a plan in any documented form (``#### U R R D``,
            ``#### ["U", "R"]``, ``#### 1234 3412 ...``). ``"list"``: the released code's,
            only a bracketed list (a nested one for Sudoku); anything else is a format error.
            Either way an unknown element of a list is played as a blocked move.
        allow_reward_holes: Accept options whose rewards let a play other than solving earn
            more (``reward_shaping="paper"``, ``shaping_gamma != 1``, Sokoban's asymmetric box
            weights); refused otherwise, with the reason.
        alpha: Weight of the team reward in ``alpha * r_team + r_local``. Paper: 1.
        split: ``"train"``, ``"validation"`` or ``"test"``: only puzzles whose content hashes
            to this split are generated.
        program_time_s: Wall-clock limit of one program run in the sandbox.
        program_memory_mb: Memory limit of one program run.
        max_program_chars: Longer programs are rejected without running.
        max_answer_chars: Longer answer lines are rejected without parsing.
        shown_chars: Programs and outputs shown in prompts are cut to this many characters.
        reference_solver: What the single agent's reference action (``agents="single"``)
            writes: ``"program"`` (default) the search program alone, as the tool's;
            ``"plan"`` only the final answer line with the host solver's plan
            (``#### R R D``), a short action for demonstrations of a small model's warm start.
            The rewards do not depend on it.
    """

    agents: str = "multi"
    max_turns: int = 4
    reward_mode: str = "dense"
    reward_shaping: str = "potential"
    progress_reference: str = "best"
    answer_format: str = "lenient"
    allow_reward_holes: bool = False
    alpha: float = 1.0
    split: str = "train"
    program_time_s: float = 10.0
    program_memory_mb: int = 512
    max_program_chars: int = 50_000
    max_answer_chars: int = 20_000
    shown_chars: int = 3_000
    reference_solver: str = "program"

    #: What ``reward_shaping="paper"`` pays that solving does not (the game's own terms).
    paper_reward_hole: ClassVar[str] = ""

    def validate(self) -> None:
        check_team_options(self)
        if self.program_time_s <= 0 or self.program_memory_mb < 1:
            raise ValueError("program_time_s and program_memory_mb must be positive")
        check_split(self.split)
        if self.reward_shaping not in REWARD_SHAPINGS:
            raise ValueError(
                f"reward_shaping must be one of {REWARD_SHAPINGS}, got {self.reward_shaping!r}"
            )
        if self.progress_reference not in PROGRESS_REFERENCES:
            raise ValueError(
                f"progress_reference must be one of {PROGRESS_REFERENCES}, got "
                f"{self.progress_reference!r}"
            )
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(
                f"answer_format must be one of {ANSWER_FORMATS}, got {self.answer_format!r}"
            )
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0 (a negative team weight pays failing), got {self.alpha}")
        if self.reference_solver not in REFERENCE_SOLVERS:
            raise ValueError(
                f"reference_solver must be one of {REFERENCE_SOLVERS}, got {self.reference_solver!r}"
            )
        holes = self.reward_holes()
        if holes and not self.allow_reward_holes:
            raise ValueError(
                "these options open a reward hole (a play other than solving earns more): "
                + "; ".join(holes)
                + ". Set allow_reward_holes=True to use them anyway (docs/papers.md, \"Options "
                "that open a reward hole\")"
            )

    def reward_holes(self) -> list[str]:
        """Why this configuration lets a play other than solving earn more ([] if it does not)."""
        holes = []
        if self.reward_shaping == "paper":
            holes.append(
                "reward_shaping='paper' pays the tool agent's copy-scored plan at every turn (a "
                "solving plan re-posted every turn and never played earns it each time)"
                + (f", and {self.paper_reward_hole}" if self.paper_reward_hole else "")
            )
        rewards = getattr(self, "rewards", None)
        if rewards is not None and hasattr(rewards, "reward_holes"):
            holes.extend(rewards.reward_holes(self.reward_shaping))
        return holes


# ---------------------------------------------------------------------------------- episode log
@dataclass
class ProgramRun:
    """What became of a program an agent wrote."""

    status: str  # "no_program" | "too_long" | "syntax_error" | "ok" | "error" | "timeout"
    program: str = ""
    stdout: str = ""
    stderr: str = ""
    detail: str = ""
    duration_s: float = 0.0

    @property
    def ran_ok(self) -> bool:
        return self.status == "ok"

    def output(self, limit: int = 2000) -> str:
        """What the sandbox said, for the record (reports show it): stdout, then the failure."""
        failure = "\n".join(t for t in (self.detail, self.stderr.strip()) if t and self.status != "ok")
        return truncate_middle("\n".join(t for t in (self.stdout.rstrip(), failure) if t), limit)


@dataclass
class TurnLog:
    """One turn of the episode, as later prompts describe it."""

    turn: int
    program_run: ProgramRun | None = None
    program_plan: str | None = None  # the plan the program printed, formatted, if it parsed
    program_plan_error: str | None = None
    program_summary: str = ""  # the simulated outcome of the program's plan
    answer: str | None = None  # the final answer line as given
    answer_error: str | None = None
    result_summary: str = ""  # what happened to the real puzzle
    solved: bool = False


@dataclass
class _Stats:
    tool_turns: int = 0
    program_ok: int = 0
    program_plan_ok: int = 0
    program_plan_solved: int = 0
    answers: int = 0
    answers_ok: int = 0


# ---------------------------------------------------------------------------------- the env
class PuzzleEnv(PuzzleHooks, SandboxUser, TextEnv):
    """The AEC layer shared by the puzzle environments; subclasses supply the rules.

    Subclasses set ``metadata``, ``config_class`` and implement :meth:`_make_rules`.

    Args:
        config: A config dataclass instance (defaults to the paper's values).
        render_mode: ``"ansi"``, ``"human"`` or ``None``.
        sandbox: A sandbox object (``run(source, stdin=..., limits=...)``) or a spec string for
            ``sandboxes.shared_sandbox``; ``None`` uses ``shared_sandbox("auto")`` on first use.
        **overrides: Config fields, e.g. ``agents="single"``, ``reward_mode="outcome"``.

    ``reset(options={"puzzle": text})`` plays a given puzzle (in the game's text format)
    instead of a generated one; it must be solvable.
    """

    grades_ahead = True  # every program run goes through _grade (llm_envs.envs.grading)

    config_class: ClassVar[type | None] = PuzzleConfig
    reset_options = ("puzzle",)

    def __init__(
        self,
        config: PuzzleConfig | None = None,
        *,
        render_mode: str | None = None,
        sandbox: Any = None,
        **overrides: Any,
    ) -> None:
        self.config = self._build_config(config, overrides)
        self.config.validate()
        self.rules: PuzzleRules = self._make_rules(self.config)
        self._keep_sandbox(sandbox)
        agents = ["tool", "plan"] if self.config.agents == "multi" else ["solver"]
        super().__init__(agents, render_mode=render_mode)
        self.initial_state: Any = None
        self.puzzle_state: Any = None
        self.history: list[TurnLog] = []
        self._pending_tool_record = None
        self._stats = _Stats()
        # The sum of the real transitions' shaped rewards this episode and the best value (that,
        # or the tool's simulated plan on top of it) reached so far: see _tool_credit. The best
        # potential of a real state this episode: see _real_transition_payment.
        self._episode_return = 0.0
        self._best_value = 0.0
        self._best_potential = 0.0

    # ------------------------------------------------------------------ subclass hook
    def _make_rules(self, config: Any) -> PuzzleRules:
        raise NotImplementedError

    # ------------------------------------------------------------------ sandbox
    def _shared_resources(self) -> list[Any]:
        # The rules and the config are never mutated during play: clones share them.
        return [self.rules, self.config, *self._sandbox_if_started()]

    def _run_program(self, reply: str) -> ProgramRun:
        """Extract the program from ``reply``, check it compiles, run it on the puzzle."""
        program = extract_program(reply)
        if program is None or not program.strip():
            return ProgramRun("no_program", detail="no ```python code block found")
        if len(program) > self.config.max_program_chars:
            return ProgramRun(
                "too_long",
                program=program[: self.config.shown_chars],
                detail=f"program longer than {self.config.max_program_chars} characters",
            )
        error = compile_error(program)
        if error is not None:
            return ProgramRun("syntax_error", program=program, detail=error)
        import sandboxes

        limits = sandboxes.Limits(
            time_s=float(self.config.program_time_s), memory_mb=int(self.config.program_memory_mb)
        )
        # A sandbox failure raises SandboxFailure here (after a retry), before any state changes:
        # it is not the program's outcome, so it is never scored.
        stdin = self.rules.puzzle_text(self.puzzle_state) + "\n"
        result = self._grade([Grading.run(program, stdin=stdin, limits=limits)])[0]
        if result.timed_out:
            status, detail = "timeout", f"time limit of {self.config.program_time_s:g} s exceeded"
        elif getattr(result, "oom", False):
            status, detail = "error", "memory limit exceeded"
        elif getattr(result, "stdout_truncated", False) or getattr(result, "stderr_truncated", False):
            status, detail = "error", "output limit exceeded"
        elif result.exit_code != 0:
            last = [ln for ln in (result.stderr or "").splitlines() if ln.strip()]
            status, detail = "error", (last[-1] if last else f"exit status {result.exit_code}")[:300]
        else:
            status, detail = "ok", ""
        return ProgramRun(
            status,
            program=program,
            stdout=result.stdout or "",
            stderr=_TRACEBACK_PATH.sub('File "main.py"', result.stderr or ""),
            detail=detail,
            duration_s=float(getattr(result, "duration_s", 0.0)),
        )

    # ------------------------------------------------------------------ plans
    def _parse_answer_text(self, answer: str | None) -> tuple[Any, str | None]:
        """``(plan, None)`` or ``(None, reason)`` for an answer line's text."""
        if answer is None:
            return None, f"no line starting with {ANSWER_MARKER}"
        if len(answer) > self.config.max_answer_chars:
            return None, f"answer longer than {self.config.max_answer_chars} characters"
        try:
            return self.rules.parse_plan(self.puzzle_state, answer), None
        except PlanFormatError as error:
            return None, str(error)
        except Exception as error:  # a parser that should have refused the text: unread, unpaid
            log.warning("%s could not parse an answer (%s: %s)", type(self).__name__, type(error).__name__, error)
            return None, f"the answer could not be read ({type(error).__name__})"

    def _plan_from_program(self, run: ProgramRun, log: TurnLog) -> Any:
        """Parse the plan a program printed; fills ``log`` and returns the plan or ``None``."""
        log.program_run = run
        if not run.ran_ok:
            log.program_plan_error = f"program {run.status}: {run.detail}".strip(": ")
            return None
        plan, error = self._parse_answer_text(extract_program_output_plan(run.stdout))
        if plan is None:
            log.program_plan_error = f"could not read a plan from the output: {error}"
            return None
        log.program_plan = self.rules.format_plan(plan)
        return plan

    def _transition_reward(self, outcome: PlanOutcome) -> float:
        """What a plan's outcome is worth: its dense shaped reward, or 1/0 (solved) in outcome
        mode."""
        if self.config.reward_mode == "outcome":
            return float(outcome.solved)
        return float(outcome.reward)

    def _format_penalty(self) -> float:
        """A missing or malformed plan: the game's format penalty (dense), 0 (outcome)."""
        return float(self.rules.format_penalty) if self.config.reward_mode == "dense" else 0.0

    def _tool_credit(self, outcome: PlanOutcome) -> float:
        """The tool's local reward for a plan simulated on a copy of the current state.

        ``"potential"`` shaping: the plan's value is the episode's return so far (the real
        transitions) plus the simulated transition; the tool is paid only by how much that
        value exceeds the best the episode has reached (earlier simulated plans and the real
        play), so the tool's local rewards sum to at most the value of solving at once, and a
        plan re-posted without being played earns nothing the second time. ``"paper"``: the
        simulated transition, at every turn.
        """
        simulated = self._transition_reward(outcome)
        if self.config.reward_shaping == "paper":
            return simulated
        value = self._episode_return + simulated
        credit = max(0.0, value - self._best_value)
        self._best_value = max(self._best_value, value)
        return credit

    # ------------------------------------------------------------------ TextEnv hooks
    def _start_episode(self, options: dict[str, Any]) -> str:
        puzzle = options.get("puzzle")
        if puzzle is not None:
            state = self.rules.load(str(puzzle))
        else:
            # The episode's seed (on a seeded reset) picks the puzzle where the game enumerates
            # them, so that distinct seeds give distinct puzzles (pick_enumerated).
            index = self._last_seed if self._episode_count == 1 else None
            state = self.rules.generate(self.np_random, self.config.split, index)
        self.initial_state = state
        self.puzzle_state = state
        self.history = []
        self._pending_tool_record = None
        self._stats = _Stats()
        self._episode_return = 0.0
        self._best_value = 0.0
        self._best_potential = self.rules.potential(state) if self._pays_against_best_potential() else 0.0
        return self.possible_agents[0]

    def _apply_action(self, agent: str, action: str) -> str | None:
        if agent == "tool":
            return self._apply_tool(action)
        if agent == "plan":
            return self._apply_plan_agent(action)
        return self._apply_solver(action)

    def _apply_tool(self, action: str) -> str:
        log = TurnLog(turn=self.turn)
        run = self._run_program(action)
        plan = self._plan_from_program(run, log)
        outcome = self.rules.apply_plan(self.puzzle_state, plan) if plan is not None else None
        if outcome is not None:
            log.program_summary = outcome.summary
        self._stats.tool_turns += 1
        self._stats.program_ok += run.ran_ok
        self._stats.program_plan_ok += plan is not None
        self._stats.program_plan_solved += bool(outcome and outcome.solved)
        record = self._add_record(
            "tool",
            action,
            parsed={
                "program_status": run.status,
                "plan": log.program_plan,
                "plan_error": log.program_plan_error,
                "simulated_solved": bool(outcome and outcome.solved),
                "simulated_components": dict(outcome.components) if outcome else {},
            },
            format_ok=plan is not None,
            info={"sandbox_s": run.duration_s, "output": run.output()},
        )
        local = self._tool_credit(outcome) if outcome is not None else self._format_penalty()
        self._credit(record, "local", local)
        self.history.append(log)
        self._pending_tool_record = record
        return "plan"

    def _apply_plan_agent(self, action: str) -> str | None:
        log = self.history[-1]
        answer = extract_answer(action)
        plan, error = self._parse_answer_text(answer)
        record = self._add_record(
            "plan",
            action,
            parsed={"plan": self.rules.format_plan(plan) if plan is not None else None, "error": error},
            format_ok=plan is not None,
        )
        local, team = self._play_real_plan(plan, answer, error, log)
        self._credit(record, "local", local)  # the plan agent's own plan is the real transition
        self._credit(record, "team", self.config.alpha * team)
        self._credit(self._pending_tool_record, "team", self.config.alpha * team)
        self._pending_tool_record = None
        return self._finish_turn(log)

    def _apply_solver(self, action: str) -> str | None:
        log = TurnLog(turn=self.turn)
        # A "####" line inside the program (a comment) is not a final answer: the program's
        # printed plan is the alternative to one.
        answer = extract_answer(action, search_code_blocks=False)
        run = self._run_program(action)
        program_plan = None
        if run.status != "no_program":
            program_plan = self._plan_from_program(run, log)
            self._stats.tool_turns += 1
            self._stats.program_ok += run.ran_ok
            self._stats.program_plan_ok += program_plan is not None
        if answer is not None:
            plan, error = self._parse_answer_text(answer)
            source = "answer"
        elif program_plan is not None:
            plan, error, source = program_plan, None, "program"
            answer = None
        else:
            plan, source = None, "none"
            error = log.program_plan_error or f"no line starting with {ANSWER_MARKER} and no program"
        record = self._add_record(
            "solver",
            action,
            parsed={
                "program_status": run.status,
                "plan_source": source,
                "plan": self.rules.format_plan(plan) if plan is not None else None,
                "error": error,
            },
            format_ok=plan is not None,
            info={"sandbox_s": run.duration_s, "output": run.output()},
        )
        self.history.append(log)
        local, team = self._play_real_plan(plan, answer, error, log)
        self._credit(record, "local", local)
        self._credit(record, "team", self.config.alpha * team)
        return self._finish_turn(log)

    def _play_real_plan(
        self, plan: Any, answer: str | None, error: str | None, log: TurnLog
    ) -> tuple[float, float]:
        """Apply ``plan`` to the real state; return ``(local, team)`` before ``alpha``.

        Both are the real transition's reward; without a valid plan the local term is the
        format penalty and the team term 0 (the state did not change; the paper makes format
        a local penalty)."""
        self._stats.answers += 1
        log.answer = answer
        log.answer_error = error
        if plan is None:
            log.result_summary = f"no valid plan ({error}); the puzzle did not change"
            return self._format_penalty(), 0.0
        self._stats.answers_ok += 1
        before = self.puzzle_state
        outcome = self.rules.apply_plan(before, plan)
        self.puzzle_state = outcome.state
        log.result_summary = outcome.summary
        payment = self._real_transition_payment(self._transition_reward(outcome), before, outcome.state)
        return payment, payment

    def _real_transition_payment(self, reward: float, before: Any, after: Any) -> float:
        """What a real transition from state ``before`` to ``after`` with shaped reward
        ``reward`` pays (before ``alpha``).

        ``progress_reference="best"`` (dense, ``"potential"`` shaping): ``reward`` minus the
        shortfall of ``before``'s potential below the best potential the episode reached,
        ``B − Φ(before)``: the move costs plus ``Φ(after) − B``. A turn that regains lost
        progress is paid only what lies above B, so no turn pays more than the potential gain
        of solving at once (plus its own move costs); the payments still sum to at most the
        value of solving at once; and the candidates of one turn share ``B − Φ(before)``, so
        they are ranked exactly as by ``reward``. Below B every turn pays the shortfall again
        (a plan agent that walked away pays for it until it is back). ``"previous"``,
        ``"paper"`` shaping or outcome mode: ``reward`` itself."""
        self._episode_return += reward
        self._best_value = max(self._best_value, self._episode_return)
        if not self._pays_against_best_potential():
            return reward
        shortfall = self._best_potential - self.rules.potential(before)
        self._best_potential = max(self._best_potential, self.rules.potential(after))
        return reward - shortfall

    def potential_shortfall(self) -> float:
        """How far the current state's potential lies below the best potential the episode's
        real states reached: what the next real transition's payment is less than its shaped
        reward (0 unless ``progress_reference="best"`` applies: dense mode, ``"potential"``
        shaping)."""
        if not self._pays_against_best_potential() or self.puzzle_state is None:
            return 0.0
        return self._best_potential - self.rules.potential(self.puzzle_state)

    def _pays_against_best_potential(self) -> bool:
        c = self.config
        return (
            c.progress_reference == "best"
            and c.reward_shaping == "potential"
            and c.reward_mode == "dense"
        )

    def _finish_turn(self, log: TurnLog) -> str | None:
        log.solved = self.rules.is_solved(self.puzzle_state)
        return end_turn(self, log.solved, self.possible_agents[0])

    # ------------------------------------------------------------------ text
    def _instruction(self, agent: str) -> str:
        game = self.rules.game_name
        limits = (
            f"Programs run with Python 3 (standard library only), no network, a time limit of "
            f"{self.config.program_time_s:g} s and {self.config.program_memory_mb} MB of memory."
        )
        answer = self.rules.answer_example()
        if agent == "tool":
            return (
                f"You are the tool agent of a two-agent team that solves {game} puzzles. Write a "
                "Python program that reads the puzzle from standard input, solves it (e.g. with "
                f"a search such as BFS, A* or backtracking) and prints the answer on its LAST line "
                f"in the form:\n{answer}\n{limits} Your plan is checked on a copy of the puzzle; "
                "a teammate (the plan agent) then submits the final answer. Reply with exactly one "
                "```python code block."
            )
        if agent == "plan":
            return (
                f"You are the plan agent of a two-agent team that solves {game} puzzles. You see "
                "the puzzle, the program the tool agent wrote, its output and the plan read from "
                "it. Check it and give the final answer; it is applied to the real puzzle. End "
                f"your reply with one line in the form:\n{answer}"
            )
        return (
            f"You solve {game} puzzles. You may write a Python program in a ```python code block "
            "that reads the puzzle from standard input and prints the answer on its last line, "
            f"and/or end your reply with a final answer line in the form:\n{answer}\nThe final "
            "answer line wins when both are given; otherwise the program's printed answer is "
            f"applied. The program's output is shown to you in the next turn. {limits}"
        )

    def _prompt(self, agent: str) -> str:
        if self.puzzle_state is None:
            return ""
        config = self.config
        parts = [
            f"{self.rules.game_name} | turn {min(self.turn, config.max_turns - 1) + 1} of "
            f"{config.max_turns}",
            self.rules.rules_text(),
            "Current puzzle (exactly the text a program receives on standard input):",
            "```\n" + self.rules.puzzle_text(self.puzzle_state) + "\n```",
        ]
        status = self.rules.status_text(self.puzzle_state)
        if status:
            parts.append(status)
        # The log of the turn in progress (the tool has acted, the plan agent has not) is shown
        # to the plan agent as this turn's tool work, not as a previous turn.
        current = self.history[-1] if self.history and self.history[-1].turn == self.turn else None
        finished = [log for log in self.history if log is not current]
        if finished:
            parts.append("Previous turns:")
            parts.extend(self._describe_turn(log) for log in finished)
        if agent == "plan":
            if current is not None:
                parts.append(self._describe_tool_work(current))
            else:
                parts.append("The tool agent has not acted yet this turn.")
            parts.append(f"Give the final answer on the last line as:\n{self.rules.answer_example()}")
        elif agent == "tool":
            parts.append(
                "Write the program. Its last printed line must be:\n" + self.rules.answer_example()
            )
        elif agent == "solver":
            parts.append(
                "Reply with a ```python program, a final line "
                f"{self.rules.answer_example()!r}, or both."
            )
        return "\n\n".join(parts)

    def _describe_tool_work(self, log: TurnLog) -> str:
        run = log.program_run
        if run is None or run.status == "no_program":
            return "The tool agent gave no program this turn."
        lines = [
            "The tool agent's program:",
            fenced(truncate_middle(run.program, self.config.shown_chars), "python"),
        ]
        if run.status in ("too_long", "syntax_error"):
            lines.append(f"It was not run: {run.detail}.")
            return "\n".join(lines)
        status = "it ran successfully" if run.ran_ok else f"it failed: {run.status}, {run.detail}"
        lines.append(f"Its output ({status}):")
        lines.append(fenced(truncate_middle(run.stdout, self.config.shown_chars // 2)))
        if log.program_plan is not None:
            lines.append(f"Plan read from the output: {log.program_plan}")
        else:
            lines.append(f"No plan could be read from it: {log.program_plan_error}")
        return "\n".join(lines)

    def _describe_turn(self, log: TurnLog) -> str:
        lines = [f"Turn {log.turn + 1}:"]
        run = log.program_run
        if run is not None and run.status != "no_program":
            if log.program_plan is not None:
                lines.append(f"- program printed the plan: {truncate_middle(log.program_plan, 500)}")
                if self.config.agents == "multi":
                    lines.append(f"- that plan, checked on a copy: {log.program_summary}")
            else:
                lines.append(f"- program: {log.program_plan_error}")
            if run.stdout.strip():
                shown = truncate_middle(run.stdout.strip(), 500)
                lines.append("- program output:\n" + fenced(shown))
            if run.status != "ok" and run.stderr.strip():
                tail = truncate_middle(run.stderr.strip(), 600)
                lines.append("- program error output:\n" + fenced(tail))
        elif self.config.agents == "multi":
            lines.append("- the tool agent gave no program")
        if log.answer is not None or log.answer_error is not None:
            shown = truncate_middle(log.answer, 500) if log.answer is not None else "(none)"
            lines.append(f"- final answer: {shown}")
        lines.append(f"- result: {log.result_summary}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ agents
    def reference_action(self, agent: str) -> str:
        """Tool: a real search program. Plan: the tool's plan if it solves the puzzle, else the
        host solver's plan. Solver (single): the search program alone (its output is applied),
        or with ``reference_solver="plan"`` the host solver's plan as a final answer line."""
        if agent == "solver" and self.config.reference_solver == "plan":
            return self._host_solver_answer()
        program = "```python\n" + self.rules.reference_program() + "\n```"
        if agent in ("tool", "solver"):
            return program
        log = self.history[-1] if self.history else None
        if log is not None and log.program_plan is not None:
            plan, _ = self._parse_answer_text(log.program_plan)
            if plan is not None and self.rules.apply_plan(self.puzzle_state, plan).solved:
                return f"The program's plan solves the puzzle.\n{ANSWER_MARKER} {log.program_plan}"
        return self._host_solver_answer()

    def _host_solver_answer(self) -> str:
        """The final answer line with the host solver's plan from the current state."""
        plan = self.rules.solve(self.puzzle_state)
        if plan is None:  # unreachable for generated puzzles: they are solvable and never stuck
            return f"{ANSWER_MARKER} "
        return f"{ANSWER_MARKER} {self.rules.format_plan(plan)}"

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """A random well-formed action: a random plan (as a printing program for the tool)."""
        plan_text = self.rules.format_plan(self.rules.random_plan(self.puzzle_state, rng))
        if agent == "tool":
            return f"```python\nprint({(ANSWER_MARKER + ' ' + plan_text)!r})\n```"
        return f"{ANSWER_MARKER} {plan_text}"

    # ------------------------------------------------------------------ metrics and text
    def _episode_metrics(self) -> dict[str, float]:
        stats = self._stats
        solved = bool(self.puzzle_state is not None and self.rules.is_solved(self.puzzle_state))
        metrics = {
            "success": float(solved),
            "answer_format_ok": stats.answers_ok / stats.answers if stats.answers else 0.0,
        }
        if stats.tool_turns:
            metrics["program_ok"] = stats.program_ok / stats.tool_turns
            metrics["program_plan_ok"] = stats.program_plan_ok / stats.tool_turns
            if self.config.agents == "multi":
                metrics["program_plan_solves"] = stats.program_plan_solved / stats.tool_turns
        return metrics

    def _describe_episode(self) -> str:
        if self.initial_state is None:
            return ""
        c = self.config
        return (
            f"{self.rules.game_name} | split={c.split} agents={c.agents} "
            f"reward_mode={c.reward_mode} reward_shaping={c.reward_shaping} alpha={c.alpha:g} "
            f"max_turns={c.max_turns}\n"
            + self.rules.puzzle_text(self.initial_state)
        )

    # ------------------------------------------------------------------ reward contract
    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """Bounds of one action's reward, with ``r`` one real transition's shaped reward in
        :meth:`_plan_reward_bounds` (dense) or ``[0, 1]`` (outcome) and ``p`` the format penalty
        (dense; 0 in outcome mode):

        * plan agent and single solver: ``p`` (no valid plan: the team term is then 0), else
          ``(1 + alpha)·q`` with ``q`` the paid transition: ``r`` itself, or under
          ``progress_reference="best"`` ``r`` less the shortfall of the state's potential below
          the best reached (at most :meth:`_potential_shortfall_bound`), so at most ``r``;
        * tool: its local term, ``p`` or a credit in ``[0, V*]`` (``"potential"``: what its
          simulated plan adds to the best value reached, at most the value of solving at once,
          itself at most the largest ``r``) or the simulated ``r`` (``"paper"``), plus
          ``alpha·q`` of the plan agent's transition (0 when the plan agent gave no plan).

        Each game's page (docs/envs/sokoban.md, sudoku.md, plan_path.md) states the same."""
        alpha = self.config.alpha
        if self.config.reward_mode == "outcome":
            real: tuple[float, float] = (0.0, 1.0)
            penalty = (0.0, 0.0)
        else:
            real = self._plan_reward_bounds()
            penalty = (float(self.rules.format_penalty),) * 2
        paid = real
        if self._pays_against_best_potential():
            paid = (real[0] - self._potential_shortfall_bound(), real[1])
        if agent == "tool":
            credit = either(real, (0.0, 0.0))
            if self.config.reward_shaping != "paper" or self.config.reward_mode == "outcome":
                credit = (0.0, max(real[1], 0.0))
            return summed(either(penalty, credit), scaled(either(paid, (0.0, 0.0)), alpha))
        return either(penalty, scaled(paid, 1.0 + alpha))

    def _plan_reward_bounds(self) -> tuple[float, float]:
        """Bounds of the dense reward of one plan applied to any state of this configuration
        (each game declares its own)."""
        return UNBOUNDED

    def _potential_shortfall_bound(self) -> float:
        """The largest ``B − Φ(s)`` of an unsolved state ``s`` below the best potential ``B``
        of an unsolved state (each game with a finite bound declares it; unknown: infinite)."""
        return float("inf")


__all__ = ["ProgramRun", "PuzzleConfig", "PuzzleEnv", "TurnLog"]
