"""The pure helpers of the puzzle games (Sudoku, Sokoban, Plan-Path): no PettingZoo.

:class:`PuzzleRules` is the protocol each game's ``rules.py`` implements (immutable states, plans
applied and scored by :class:`PlanOutcome`); the rest are the helpers those rules and the AEC
layer (:mod:`llm_envs.envs.puzzle_base`) share: reading a program or an answer line out of a
reply, checking that a program compiles (never running it), and generating a puzzle inside its
split. docs/envs/puzzles.md describes how the three games are played.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np

from llm_envs.core.splits import check_split, split_generator, split_of, split_order

State = TypeVar("State")
Plan = TypeVar("Plan")

#: Marker that starts the line holding a final answer (plan agent) or a printed plan (program).
ANSWER_MARKER = "####"
#: Also accepted at the start of a program's output line, for compatibility with the prompts of
#: the released PettingLLMs code.
LEGACY_OUTPUT_MARKER = "**Actions List**:"
#: The released code's second output pattern (``Actions: [...]``), read the same way.
LEGACY_SHORT_OUTPUT_MARKER = "Actions:"


#: ``reward_shaping`` values: ``"potential"`` (every dense term is the change of a potential of
#: the state, and the tool's copy-scored plan pays only improvements of the best value the
#: episode reached) and ``"paper"`` (the per-turn rewards of the released code, which a stall
#: or a shuttle plan can farm; refused unless ``allow_reward_holes=True``).
REWARD_SHAPINGS = ("potential", "paper")
#: ``answer_format`` values: ``"lenient"`` (a plan in any documented form) and ``"list"`` (the
#: released code's: only a bracketed list after ``####``, a nested one for Sudoku).
ANSWER_FORMATS = ("lenient", "list")


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

    def potential(self, state: State) -> float:
        """The potential of ``"potential"`` shaping (largest on a solved state): a plan's dense
        reward is its move costs plus ``potential(after) - potential(before)`` (Plan-Path adds
        the optimal-path bonus), so a cycle of states pays only its costs."""
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
#: A block on one line that starts with a Python tag and a space: ```` ```python print(1)``` ````.
_ONE_LINE_PYTHON = re.compile(r"[ \t]*(python3?|py)[ \t]+(\S.*)", re.IGNORECASE | re.DOTALL)


def extract_program(text: str) -> str | None:
    """The program in a reply: the last closed ```` ```python ```` block, else an unterminated
    ```` ```python ```` block running to the end, else the last closed ```` ``` ```` block (any
    other tag, or none); ``None`` if none.

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
            # "```python print(1)```" on one line: read as the released code does.
            one_line = _ONE_LINE_PYTHON.match(block)
            return (one_line.group(1).lower(), one_line.group(2)) if one_line else ("", block)
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
    the released code's ``**Actions List**:`` / ``Actions:``), else its last non-empty line;
    ``None`` if it printed nothing."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    for line in reversed(lines):
        for marker in (ANSWER_MARKER, LEGACY_OUTPUT_MARKER, LEGACY_SHORT_OUTPUT_MARKER):
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


def truncate_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters cut] ...\n{text[-tail:]}"


__all__ = [
    "ANSWER_FORMATS",
    "ANSWER_MARKER",
    "LEGACY_OUTPUT_MARKER",
    "PlanFormatError",
    "PlanOutcome",
    "REWARD_SHAPINGS",
    "PuzzleRules",
    "compile_error",
    "extract_answer",
    "extract_program",
    "extract_program_output_plan",
    "generate_in_split",
    "outside_code_blocks",
    "pick_enumerated",
    "truncate_middle",
]
