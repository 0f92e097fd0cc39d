"""Shared machinery of the Stronger-MAS puzzle environments: Sudoku, Sokoban and Plan-Path.

The three games differ only in their rules; the way agents play them is the same (Stronger-MAS,
"games and planning" MAS):

1. The **tool** agent writes a Python program. The environment extracts it (the last
   ```` ```python ```` block), checks that it compiles in the host (``compile`` never executes),
   and runs it in the sandbox with the current puzzle on standard input. The program prints its
   plan on the last line as ``#### <plan>``. The plan is *simulated* on the current state (the
   real state does not change) and the outcome is the tool agent's local reward.
2. The **plan** agent sees the puzzle, the program, its output and the parsed plan, and answers
   ``#### <plan>``. That plan is applied to the real state.
3. A turn is one tool action and one plan action. The episode ends when the puzzle is solved
   (termination) or after ``max_turns`` turns (truncation).

Single-agent variant (``agents="single"``): one agent ``solver`` does both in one action: an
optional program and an optional final line ``#### <plan>``. The final line wins when both are
given; otherwise the program's printed plan is applied. The program's output is shown in the
next turn's prompt either way.

Rewards (Stronger-MAS, arXiv 2510.11062: ``r = alpha * r_team + r_local``, ``alpha = 1``):

=================  ===========================================================================
``reward_mode``    meaning
=================  ===========================================================================
``"dense"``        ``r_local`` of the tool = the game's shaped reward of its plan simulated on a
                   copy of the state; of the plan agent (and of the single solver) = the shaped
                   reward of the real transition. ``r_team`` (both agents) = the shaped reward of
                   the real transition. A missing or malformed plan earns the game's format
                   penalty in place of the shaped reward (and the state does not change).
``"outcome"``      ``r_local`` = 1 if the agent's own plan leaves the puzzle solved (simulated
                   for the tool, real for the plan agent), else 0; ``r_team`` = 1 if the real
                   puzzle is solved after this turn, else 0. No shaping, no format penalty.
=================  ===========================================================================

The team reward of a turn is known only once the plan agent has acted, so the tool agent's
record receives it then (delayed credit); its PettingZoo reward is emitted at that moment.

A program the *sandbox* failed to run (its worker died or hung, on a retry too) is not the
program's failure and earns nothing: ``step`` raises :class:`~llm_envs.core.SandboxFailure`
before the state changes, and the runner records the episode as incomplete (docs/sandboxes.md).

Enumerable moves (the interop hook, :mod:`llm_envs.interop.hooks`): ``legal_actions(agent)``
lists, for the agent to act, one complete action per small move of the game
(``rules.legal_plans``: one step for Plan-Path and Sokoban, one cell for Sudoku), as the answer
line ``#### <plan>``, or for the tool agent as a one-line program printing it;
``max_legal_actions`` bounds their number for the configuration. The fixed move catalog
(``action_catalog()``, ``action_mask(agent)``, ``catalog_action(agent, index)``) gives each of
those moves a fixed index (a direction; a cell and a digit), and ``state_space()`` /
``state_tensor(agent)`` give the puzzle as one-hot planes (per game in its ``env.py``).

This module holds the pure helpers (program and answer extraction, split-aware generation, the
:class:`PuzzleRules` protocol that each game's ``rules.py`` implements) and :class:`PuzzleEnv`,
the AEC layer the three environments share.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np
from gymnasium import spaces

from llm_envs.core.env import EnvStateError, TextEnv
from llm_envs.core.splits import check_split, split_generator, split_of, split_order
from llm_envs.envs._common import (  # noqa: F401  (AGENT_MODES, REWARD_MODES re-exported)
    AGENT_MODES,
    REWARD_MODES,
    SandboxUser,
    check_team_options,
    end_turn,
)
from llm_envs.verifiers.code import run_program

State = TypeVar("State")
Plan = TypeVar("Plan")

#: Marker that starts the line holding a final answer (plan agent) or a printed plan (program).
ANSWER_MARKER = "####"
#: Also accepted at the start of a program's output line, for compatibility with the prompts of
#: the released PettingLLMs code.
LEGACY_OUTPUT_MARKER = "**Actions List**:"


class PlanFormatError(ValueError):
    """A plan text that does not follow the game's answer format (the message says why)."""


# ---------------------------------------------------------------------------------- outcomes
@dataclass(frozen=True)
class PlanOutcome(Generic[State]):
    """What applying a plan to a state gives (the input state is never modified).

    Attributes:
        state: The state after the plan.
        reward: The game's dense shaped reward for this plan (the sum of ``components``).
        components: Named parts of ``reward`` (e.g. ``{"moves": -0.05, "progress": 3.0}``).
        solved: Whether ``state`` is solved.
        summary: One line for prompts and transcripts ("7 moves, 1 blocked; goal reached").
    """

    state: State
    reward: float
    components: Mapping[str, float]
    solved: bool
    summary: str


class PuzzleRules(Protocol[State, Plan]):
    """What each game's ``rules.py`` provides to :class:`PuzzleEnv` (pure, no PettingZoo).

    States are immutable values; ``apply_plan`` returns a new one, which is how the tool's plan
    is simulated "on a copy" at no cost.
    """

    #: Human name of the game ("Sudoku").
    game_name: str
    #: Dense reward of a missing or malformed plan.
    format_penalty: float

    def generate(self, rng: np.random.Generator, split: str, index: int | None = None) -> State:
        """A new solvable puzzle whose :meth:`split_key` belongs to ``split``, drawn from
        ``split_generator(rng, split)``. ``index`` (the episode's seed, when it has one) picks
        the puzzle where the game enumerates its puzzles (:func:`pick_enumerated`): distinct
        indices below the number of puzzles of the split give distinct puzzles."""
        ...

    def split_key(self, state: State) -> str:
        """The canonical form of the puzzle: equal for every variant that is the same puzzle up
        to the game's symmetries, so that all of them belong to one split."""
        ...

    def load(self, text: str) -> State:
        """Parse a puzzle from its text format (raises ``ValueError`` if malformed/unsolvable)."""
        ...

    def puzzle_text(self, state: State) -> str:
        """The state in the documented text format (the program's standard input)."""
        ...

    def status_text(self, state: State) -> str:
        """Anything about the state that :meth:`puzzle_text` does not show ("" if nothing)."""
        ...

    def parse_plan(self, state: State, text: str) -> Plan:
        """Parse one answer line; raises :class:`PlanFormatError`. Never ``eval``."""
        ...

    def format_plan(self, plan: Plan) -> str:
        """The plan in the answer format (parseable by :meth:`parse_plan`)."""
        ...

    def apply_plan(self, state: State, plan: Plan) -> PlanOutcome[State]:
        """Apply ``plan`` to ``state`` (pure) and score it with the dense shaped reward."""
        ...

    def is_solved(self, state: State) -> bool: ...

    def solve(self, state: State) -> Plan | None:
        """A plan that solves ``state``, or ``None`` if none exists (or none was found)."""
        ...

    def random_plan(self, state: State, rng: np.random.Generator) -> Plan:
        """A random, well-formed plan."""
        ...

    #: Upper bound on ``len(legal_plans(state))`` for every state of these rules.
    max_legal_plans: int

    def legal_plans(self, state: State) -> list[Plan]:
        """The one-move plans of the enumerable-moves hook, in a stable order (for Plan-Path
        and Sokoban one step, for Sudoku one cell filled); empty only for a solved state."""
        ...

    def rules_text(self) -> str:
        """The rules, the input format and the answer format, for the agents' prompts."""
        ...

    def answer_example(self) -> str:
        """A short description of the answer line, e.g. ``#### U R R D``."""
        ...

    def reference_program(self) -> str:
        """Source of a real search program that reads the puzzle and prints a solving plan."""
        ...


# ---------------------------------------------------------------------------------- extraction
_FENCE = "```"
_CODE_LANGS = ("python3", "python", "py")


def extract_program(text: str) -> str | None:
    """The program in a reply: the last ```` ```python ```` block, else the last ```` ``` ````
    block, else an unterminated ```` ```python ```` block running to the end; ``None`` if none.

    Linear in the length of ``text`` (a plain split on fences; no backtracking regex).
    """
    if _FENCE not in text:
        return None
    parts = text.split(_FENCE)
    # parts[1], parts[3], ... are inside fences; a trailing odd part is an unterminated block.
    closed = [parts[i] for i in range(1, len(parts) - 1, 2)]
    unterminated = parts[-1] if len(parts) % 2 == 0 else None

    def split_lang(block: str) -> tuple[str, str]:
        first, newline, rest = block.partition("\n")
        if not newline:
            return "", block
        return first.strip().lower(), rest

    python_blocks = [body for lang, body in map(split_lang, closed) if lang in _CODE_LANGS]
    if python_blocks:
        return python_blocks[-1]
    if unterminated is not None:
        lang, body = split_lang(unterminated)
        if lang in _CODE_LANGS:
            return body
    if closed:
        lang, body = split_lang(closed[-1])
        # A block with an unknown language tag (e.g. ```text) still counts; an untagged one
        # keeps its first line.
        return body if lang else closed[-1].lstrip("\n")
    return None


def outside_code_blocks(text: str) -> str:
    """``text`` without its fenced code blocks (an unterminated block runs to the end)."""
    if _FENCE not in text:
        return text
    # Parts at even positions of the split lie outside fences; a trailing odd one is unterminated.
    return "\n".join(text.split(_FENCE)[0::2])


def extract_answer(text: str, *, search_code_blocks: bool = True) -> str | None:
    """The final answer of a reply: the rest of the last line that starts with ``####``.

    Lines inside code blocks are looked at only if no line outside them qualifies (and
    ``search_code_blocks`` is true), so that a program's ``#### helpers`` comment never counts
    as the answer of a reply that has one outside its code.
    """
    if ANSWER_MARKER not in text:
        return None
    candidates = [outside_code_blocks(text)] + ([text] if search_code_blocks else [])
    for candidate in candidates:
        for line in reversed(candidate.splitlines()):
            stripped = line.strip()
            if stripped.startswith(ANSWER_MARKER):
                return stripped[len(ANSWER_MARKER) :].strip()
    return None


def extract_program_output_plan(stdout: str) -> str | None:
    """The plan text a program printed: the rest of its last line starting with ``####`` (or
    ``**Actions List**:``), else its last non-empty line; ``None`` if it printed nothing."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    for line in reversed(lines):
        for marker in (ANSWER_MARKER, LEGACY_OUTPUT_MARKER):
            if line.startswith(marker):
                return line[len(marker) :].strip()
    return lines[-1] if lines else None


def compile_error(source: str) -> str | None:
    """``None`` if ``source`` compiles as Python, else a one-line reason. Never executes it."""
    try:
        compile(source, "<program>", "exec", dont_inherit=True)
    except SyntaxError as error:  # includes IndentationError and TabError
        return f"SyntaxError: {error.msg} (line {error.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError) as error:
        return f"{type(error).__name__}: {error}"[:200]
    except Exception as error:  # noqa: BLE001 - any compiler failure is the program's fault
        return f"{type(error).__name__}: {error}"[:200]
    return None


def generate_in_split(
    rng: np.random.Generator,
    make_candidate: Callable[[np.random.Generator], State | None],
    canonical_text: Callable[[State], str],
    split: str,
    *,
    accept: Callable[[State], bool] | None = None,
    max_tries: int = 10_000,
) -> State:
    """Draw candidates until one is valid (not ``None``), its canonical text is in ``split``
    and ``accept`` (an expensive check such as a solver run, made last) approves it.

    Because the split is a function of the puzzle's canonical form (:func:`split_of`), the same
    puzzle — up to the game's symmetries — can never be served to two splits, whatever the
    seeds. Candidates come from ``split_generator(rng, split)``: each split draws its own.
    """
    check_split(split)
    rng = split_generator(rng, split)
    for _ in range(max_tries):
        candidate = make_candidate(rng)
        if candidate is None or split_of(canonical_text(candidate)) != split:
            continue
        if accept is None or accept(candidate):
            return candidate
    raise RuntimeError(
        f"no valid puzzle for split {split!r} in {max_tries} tries; the generator settings "
        "are too restrictive"
    )


def pick_enumerated(
    classes: Sequence[State], split: str, index: int | None, rng: np.random.Generator
) -> State:
    """One of ``classes`` (every puzzle of ``split``, in a fixed order) for an episode.

    With an ``index`` (the episode's seed) the choice is ``classes[split_order(split, n)[index
    mod n]]``: seeds 0 … n−1 (or any n consecutive seeds) play every puzzle of the split once,
    and seed ``k + n`` repeats seed ``k``'s puzzle; without one, a uniform draw from ``rng``.
    """
    if not classes:
        raise ValueError(f"the {split!r} split holds no puzzle of this configuration")
    n = len(classes)
    position = int(rng.integers(n)) if index is None else int(index) % n
    return classes[int(split_order(split, n)[position])]


# Tracebacks name the sandbox's temporary file; prompts show a stable name instead, so that the
# same program gives the same observation in every run.
_TRACEBACK_PATH = re.compile(r'File "[^"\n]*main\.py"')


def truncate_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters cut] ...\n{text[-tail:]}"


# ---------------------------------------------------------------------------------- config
@dataclass
class PuzzleConfig:
    """Options shared by the three puzzle environments (defaults follow Stronger-MAS).

    Attributes:
        agents: ``"multi"``: agents ``tool`` and ``plan`` (the paper's MAS); ``"single"``: one
            agent ``solver`` that writes the program and/or the final answer.
        max_turns: Turn limit T (one tool + one plan action per turn). Paper: T = 4.
        reward_mode: ``"dense"`` (shaped, default) or ``"outcome"`` (1/0 only).
        alpha: Weight of the team reward in ``alpha * r_team + r_local``. Paper: 1.
        split: ``"train"``, ``"validation"`` or ``"test"``: only puzzles whose content hashes
            to this split are generated.
        program_time_s: Wall-clock limit of one program run in the sandbox.
        program_memory_mb: Memory limit of one program run.
        max_program_chars: Longer programs are rejected without running.
        max_answer_chars: Longer answer lines are rejected without parsing.
        shown_chars: Programs and outputs shown in prompts are cut to this many characters.
    """

    agents: str = "multi"
    max_turns: int = 4
    reward_mode: str = "dense"
    alpha: float = 1.0
    split: str = "train"
    program_time_s: float = 10.0
    program_memory_mb: int = 512
    max_program_chars: int = 50_000
    max_answer_chars: int = 20_000
    shown_chars: int = 3_000

    def validate(self) -> None:
        check_team_options(self)
        if self.program_time_s <= 0 or self.program_memory_mb < 1:
            raise ValueError("program_time_s and program_memory_mb must be positive")
        check_split(self.split)


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
class PuzzleEnv(SandboxUser, TextEnv):
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

    config_class: ClassVar[type | None] = PuzzleConfig

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
        self.state: Any = None
        self.history: list[TurnLog] = []
        self._pending_tool_record = None
        self._stats = _Stats()

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
        result = run_program(self.sandbox, program, stdin=self.rules.puzzle_text(self.state) + "\n", limits=limits)
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
            return self.rules.parse_plan(self.state, answer), None
        except PlanFormatError as error:
            return None, str(error)

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

    def _local_reward(self, outcome: PlanOutcome | None) -> float:
        if self.config.reward_mode == "outcome":
            return float(outcome is not None and outcome.solved)
        return outcome.reward if outcome is not None else float(self.rules.format_penalty)

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
        self.state = state
        self.history = []
        self._pending_tool_record = None
        self._stats = _Stats()
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
        outcome = self.rules.apply_plan(self.state, plan) if plan is not None else None
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
        self._credit(record, "local", self._local_reward(outcome))
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
        team = self._play_real_plan(plan, answer, error, log)
        self._credit(record, "local", team)  # the plan agent's own plan is the real transition
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
        team = self._play_real_plan(plan, answer, error, log)
        self._credit(record, "local", team)
        self._credit(record, "team", self.config.alpha * team)
        return self._finish_turn(log)

    def _play_real_plan(self, plan: Any, answer: str | None, error: str | None, log: TurnLog) -> float:
        """Apply ``plan`` to the real state; return the transition's reward (team = local)."""
        self._stats.answers += 1
        log.answer = answer
        log.answer_error = error
        if plan is None:
            log.result_summary = f"no valid plan ({error}); the puzzle did not change"
            return self._local_reward(None)
        self._stats.answers_ok += 1
        outcome = self.rules.apply_plan(self.state, plan)
        self.state = outcome.state
        log.result_summary = outcome.summary
        return self._local_reward(outcome)

    def _finish_turn(self, log: TurnLog) -> str | None:
        log.solved = self.rules.is_solved(self.state)
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
        if self.state is None:
            return ""
        config = self.config
        parts = [
            f"{self.rules.game_name} | turn {min(self.turn, config.max_turns - 1) + 1} of "
            f"{config.max_turns}",
            self.rules.rules_text(),
            "Current puzzle (exactly the text a program receives on standard input):",
            "```\n" + self.rules.puzzle_text(self.state) + "\n```",
        ]
        status = self.rules.status_text(self.state)
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
            "```python\n" + truncate_middle(run.program, self.config.shown_chars) + "\n```",
        ]
        if run.status in ("too_long", "syntax_error"):
            lines.append(f"It was not run: {run.detail}.")
            return "\n".join(lines)
        status = "it ran successfully" if run.ran_ok else f"it failed: {run.status}, {run.detail}"
        lines.append(f"Its output ({status}):")
        lines.append("```\n" + truncate_middle(run.stdout, self.config.shown_chars // 2) + "\n```")
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
                lines.append(f"- program output:\n```\n{shown}\n```")
            if run.status != "ok" and run.stderr.strip():
                tail = truncate_middle(run.stderr.strip(), 600)
                lines.append(f"- program error output:\n```\n{tail}\n```")
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
        host solver's plan. Solver (single): the search program alone (its output is applied)."""
        program = "```python\n" + self.rules.reference_program() + "\n```"
        if agent in ("tool", "solver"):
            return program
        log = self.history[-1] if self.history else None
        if log is not None and log.program_plan is not None:
            plan, _ = self._parse_answer_text(log.program_plan)
            if plan is not None and self.rules.apply_plan(self.state, plan).solved:
                return f"The program's plan solves the puzzle.\n{ANSWER_MARKER} {log.program_plan}"
        plan = self.rules.solve(self.state)
        if plan is None:  # unreachable for generated puzzles: they are solvable and never stuck
            return f"{ANSWER_MARKER} "
        return f"{ANSWER_MARKER} {self.rules.format_plan(plan)}"

    # ------------------------------------------------------------------ enumerable moves
    @property
    def max_legal_actions(self) -> int:
        """Upper bound on ``len(legal_actions(agent))``; fixed by the config (4 for Plan-Path and
        Sokoban, ``size**3`` for Sudoku)."""
        return int(self.rules.max_legal_plans)

    def legal_actions(self, agent: str) -> list[str]:
        """The enumerable-moves hook (:mod:`llm_envs.interop.hooks`): the complete action texts
        ``agent`` may play now, one per small move of the game (``rules.legal_plans``).

        The plan agent and the single solver answer ``#### <plan>``; the tool agent's move is a
        one-line program printing that answer line (it runs in the sandbox like any program).
        Empty before the first reset, after the episode and for an agent that is not to act now.
        A one-move plan per turn needs more turns than the paper's T = 4: raise ``max_turns``.
        """
        if self.state is None or self.episode_over or agent != self.agent_selection:
            return []
        return [self._move_text(agent, plan) for plan in self.rules.legal_plans(self.state)]

    def _move_text(self, agent: str, plan: Any) -> str:
        """The complete action that plays ``plan``: ``#### <plan>``, or for the tool agent a
        one-line program printing that line."""
        answer = f"{ANSWER_MARKER} {self.rules.format_plan(plan)}"
        return f"```python\nprint({answer!r})\n```" if agent == "tool" else answer

    # ------------------------------------------------------------------ fixed move catalog
    # The interop hook (llm_envs.interop.hooks): every small move of the game at a fixed index,
    # with a mask of the moves legal now. The legal entries are exactly rules.legal_plans, so
    # the catalog and legal_actions never disagree. Subclasses say how moves and indices map:
    # _catalog_names, _catalog_plan and _catalog_index.
    def action_catalog(self) -> list[str]:
        """Every small move of the game in a fixed order (index ``i`` always means the same
        move; the list depends on the configuration only). Plan-Path and Sokoban:
        ``#### U``, ``#### D``, ``#### L``, ``#### R``; Sudoku: ``r<row>c<col>=<digit>`` for
        every cell and digit, then ``restart``."""
        return list(self._catalog())

    def action_mask(self, agent: str) -> np.ndarray:
        """``int8`` over :meth:`action_catalog`: 1 for the moves of :meth:`legal_actions` now;
        all 0 before reset, after the episode and for an agent that is not to act now."""
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        mask = np.zeros(len(self._catalog()), dtype=np.int8)
        if self.state is None or self.episode_over or agent != self.agent_selection:
            return mask
        for plan in self.rules.legal_plans(self.state):
            mask[self._catalog_index(self.state, plan)] = 1
        return mask

    def catalog_action(self, agent: str, index: int) -> str:
        """The complete action text that plays catalog move ``index`` for ``agent`` now (the
        same text :meth:`legal_actions` lists for that move when it is legal)."""
        if not 0 <= index < len(self._catalog()):
            raise IndexError(f"catalog index {index} outside [0, {len(self._catalog())})")
        if self.state is None:
            raise EnvStateError("call reset() before using the environment")
        return self._move_text(agent, self._catalog_plan(self.state, index))

    def _catalog(self) -> tuple[str, ...]:
        names = self.__dict__.get("_catalog_cache")
        if names is None:
            names = self._catalog_cache = tuple(self._catalog_names())
        return names

    def _catalog_names(self) -> list[str]:
        raise NotImplementedError

    def _catalog_plan(self, state: Any, index: int) -> Any:
        """The plan that catalog move ``index`` stands for in ``state``."""
        raise NotImplementedError

    def _catalog_index(self, state: Any, plan: Any) -> int:
        """The catalog index of ``plan``, one of ``rules.legal_plans(state)``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ state tensor
    # The interop hook: the puzzle as one-hot planes (channel first), what every agent sees in
    # its prompt (the tool's program and output of the current turn are not in it).
    def state_space(self) -> spaces.Box:
        """``Box(0, 1, shape, float32)`` of :meth:`state_tensor`; the shape depends on the
        configuration only (per game: :meth:`_state_shape`)."""
        box = self.__dict__.get("_state_space_cache")
        if box is None:
            box = self._state_space_cache = spaces.Box(0.0, 1.0, self._state_shape(), np.float32)
        return box

    def state_tensor(self, agent: str) -> np.ndarray:
        """The current puzzle as ``float32`` one-hot planes (zeros before the first reset)."""
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        if self.state is None:
            return np.zeros(self._state_shape(), dtype=np.float32)
        return self._state_planes(self.state)

    def state_text(self, agent: str) -> str:
        """The part of the prompt that holds the state: the turn, the puzzle text and the
        game's status line (Sudoku: the board of the last accepted answer)."""
        if self.state is None:
            return ""
        turn = min(self.turn, self.config.max_turns - 1) + 1
        parts = [f"{self.rules.game_name} | turn {turn} of {self.config.max_turns}", self.rules.puzzle_text(self.state)]
        status = self.rules.status_text(self.state)
        if status:
            parts.append(status)
        return "\n".join(parts)

    def _state_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def _state_planes(self, state: Any) -> np.ndarray:
        raise NotImplementedError

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """A random well-formed action: a random plan (as a printing program for the tool)."""
        plan_text = self.rules.format_plan(self.rules.random_plan(self.state, rng))
        if agent == "tool":
            return f"```python\nprint({(ANSWER_MARKER + ' ' + plan_text)!r})\n```"
        return f"{ANSWER_MARKER} {plan_text}"

    # ------------------------------------------------------------------ metrics and text
    def _episode_metrics(self) -> dict[str, float]:
        stats = self._stats
        solved = bool(self.state is not None and self.rules.is_solved(self.state))
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
            f"reward_mode={c.reward_mode} alpha={c.alpha:g} max_turns={c.max_turns}\n"
            + self.rules.puzzle_text(self.initial_state)
        )


class SingleStepCatalog:
    """The move catalog of the grid games whose small move is one step (Plan-Path, Sokoban):
    ``#### U``, ``#### D``, ``#### L``, ``#### R`` at indices 0-3 (mixed into a PuzzleEnv)."""

    STEPS: ClassVar[tuple[str, ...]] = ("U", "D", "L", "R")

    def _catalog_names(self) -> list[str]:
        return [f"{ANSWER_MARKER} {step}" for step in self.STEPS]

    def _catalog_plan(self, state: Any, index: int) -> tuple[str, ...]:
        return (self.STEPS[index],)

    def _catalog_index(self, state: Any, plan: tuple[str, ...]) -> int:
        if len(plan) != 1 or plan[0] not in self.STEPS:
            raise ValueError(f"not a single-step plan: {plan!r}")
        return self.STEPS.index(plan[0])


__all__ = [
    "ANSWER_MARKER",
    "PlanFormatError",
    "PlanOutcome",
    "ProgramRun",
    "PuzzleConfig",
    "PuzzleEnv",
    "PuzzleRules",
    "SingleStepCatalog",
    "TurnLog",
    "compile_error",
    "extract_answer",
    "extract_program",
    "extract_program_output_plan",
    "generate_in_split",
    "pick_enumerated",
    "outside_code_blocks",
    "truncate_middle",
]
