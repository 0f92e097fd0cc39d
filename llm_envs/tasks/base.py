"""Task sources: the problem sets that environments draw episodes from.

A task source yields :class:`Problem` objects for one split. Sources are selected by name in an
environment's config (``task="humaneval"``, ``task="gsm8k"``, ``task="arithmetic"``) through
:func:`load_task_source`; new sources register with :func:`register_task_source`.

A missing dataset is a :class:`DatasetUnavailableError` whose message says how to get it; no
source ever falls back silently to other data.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal


class UnknownTaskSourceError(KeyError, ValueError):
    """No task source is registered under the name asked for (a ``KeyError``, as a lookup, and a
    ``ValueError``, as a bad option value: the command lines report it in one line)."""

    def __str__(self) -> str:  # the message as written, not a KeyError's repr of it
        return str(self.args[0]) if self.args else ""


class DatasetUnavailableError(RuntimeError):
    """A task source's data cannot be found or read; the message says how to get it."""


@dataclass(frozen=True)
class Problem:
    """One problem of a task source.

    Attributes:
        id: Stable identifier, unique within the source (e.g. ``"HumanEval/0"``).
        prompt: The problem statement shown to agents.
        split: ``"train"``, ``"validation"`` or ``"test"``.
        answer: The ground-truth final answer (math, QA), if any.
        solution: A golden solution (code or worked solution), if any.
        tests: Golden tests. For ``style="function"``: independent assertion snippets; for
            ``style="io"``: ``(stdin, expected_stdout)`` pairs.
        style: ``"function"`` (tests call a function), ``"io"`` (stdin/stdout programs) or
            ``"answer"`` (a final answer to check).
        entry_point: The name the solution must define (function style): the function the
            tests call, or the class whose method they call (``"Solution"`` for LeetCode-style
            problems; see :attr:`call`).
        setup: Code the tests need before they run (imports, helpers), function style.
        metadata: Anything else (difficulty, source, ...), small and JSON-serialisable.
            ``metadata["call"]``, where present, is how the tests call the code (see
            :attr:`call`).
    """

    id: str
    prompt: str
    split: str
    answer: str | None = None
    solution: str | None = None
    tests: tuple[Any, ...] = ()
    style: Literal["function", "io", "answer"] = "answer"
    entry_point: str | None = None
    setup: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def call(self) -> str | None:
        """How the tests call the code under test: ``metadata["call"]`` where the loader set it
        (``"Solution().twoSum"`` for a LeetCode-style class), else :attr:`entry_point`."""
        return self.metadata.get("call") or self.entry_point


class TaskSource(abc.ABC):
    """A finite or procedural set of problems for one split."""

    #: Registry name of the source.
    name: str = "task"
    #: The split this instance serves.
    split: str = "train"
    #: Whether problems carry a golden solution (``Problem.solution``); LiveCodeBench does not.
    #: Environments whose rewards need one (the Coder–Tester tester reward) check it.
    has_golden_solutions: bool = True

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of problems (procedural sources return a large nominal size)."""

    @abc.abstractmethod
    def get(self, index: int) -> Problem:
        """Problem number ``index`` (0 <= index < len(self))."""

    def sample(self, rng: Any) -> Problem:
        """A problem drawn uniformly with ``rng`` (a ``numpy.random.Generator``)."""
        return self.get(int(rng.integers(0, len(self))))

    def __iter__(self) -> Iterator[Problem]:
        for i in range(len(self)):
            yield self.get(i)


_SOURCES: dict[str, Callable[..., TaskSource]] = {}


def register_task_source(name: str, factory: Callable[..., TaskSource]) -> None:
    """Make ``factory(split=..., **kwargs)`` available as ``load_task_source(name, ...)``."""
    _SOURCES[name] = factory


def task_source_factory(name: str) -> Callable[..., TaskSource] | None:
    """The factory registered as ``name`` (``None`` when there is none)."""
    return _SOURCES.get(name)


def task_source_names() -> list[str]:
    return sorted(_SOURCES)


def load_task_source(name: str, split: str = "train", **kwargs: Any) -> TaskSource:
    """Create the task source registered as ``name`` for ``split``."""
    if name not in _SOURCES:
        raise UnknownTaskSourceError(f"unknown task source {name!r}; known: {', '.join(task_source_names())}")
    return _SOURCES[name](split=split, **kwargs)
