"""Batch grading: the programs of many environment steps graded together on the sandbox pool.

Every program run of a step (Coder–Tester, Reasoner–Tool, the puzzles) goes through
:meth:`~llm_envs.envs._common.SandboxUser._grade` as :class:`Grading` values (what to run, and
how). One at a time, a step grades its programs itself, on the thread that steps it.

:func:`ahead` (what the trainer's rollout uses) plays each pending ``(env, action)`` step on a
clone up to its first ``_grade`` call, which records the gradings and stops the clone, and
submits them at once to one thread pool (:data:`IN_FLIGHT_PER_WORKER` threads per sandbox
worker), so the sandbox pool schedules every program of every step over its workers. Each
environment holds futures of its results; the real steps are then played while later programs
are still graded, each waiting only for its own results (matched by the whole
:class:`Grading`). A grading a step did not plan runs as it would one at a time. The rewards are
those of one-at-a-time grading: same graders, programs, tests and limits. A sandbox failure met
ahead is raised by the step, as its own would have been. Results no step used are dropped when
the batch ends. :func:`grade_ahead` is the blocking form. Figures: docs/benchmarks.md ("Batch
grading for rollouts").
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from llm_envs.core.errors import InfrastructureError

__all__ = ["Batch", "Grading", "ahead", "drop_unused", "grade_ahead", "run_grading"]

#: Gradings in flight per sandbox worker: more than one, so that a worker finds the next
#: program queued while the host prepares (harness files, compile check) and reads results.
IN_FLIGHT_PER_WORKER = 4


@dataclasses.dataclass(frozen=True)
class Grading:
    """One program to grade (hashable: a planned result is found by the whole value).

    Attributes:
        kind: ``"function"`` (function-style tests, :func:`~llm_envs.verifiers.code.judge_function`),
            ``"io"`` (stdin/stdout cases, :func:`~llm_envs.verifiers.code.judge_io`), ``"run"``
            (one plain run, :func:`~llm_envs.verifiers.code.run_program`) or
            ``"function_slots"`` (``programs`` on function-style tests in one run,
            ``sandboxes.harness.run_function_tests_slots``) or ``"function_values"`` (``programs``
            on ``tests``, ``sandboxes.ValueCheck`` values, in one run,
            ``sandboxes.run_value_checks``) or ``"io_programs"`` (``programs`` on stdin/stdout
            ``tests`` in one run, ``sandboxes.run_io_programs``).
        program: The program's source.
        tests: Test snippets (``"function"``) or ``(stdin, expected)`` pairs (``"io"``).
        setup: Code run before the solution (``"function"``).
        entry_point: The function under test (``"function"``).
        time_s: Time limit of one test or case (``"function"``, ``"io"``).
        stdin: Standard input (``"run"``).
        limits: A ``sandboxes.Limits`` (``"run"``; ``None``: the sandbox's default).
        programs: ``"function_slots"``, ``"function_values"``, ``"io_programs"``: the programs
            graded on ``tests`` in one run (the result is a tuple of ``SlotResult``,
            ``ValueCheckResult`` or ``TestReport``, one per program).
        golden: ``"function_slots"``, ``"function_values"``, ``"io_programs"``: the index in
            ``programs`` of the golden solution (early stop), or ``None``.
        epilogue: ``"function_values"``: trusted code run after each program's top level but
            the golden's (the guard of a wrong program), or ``""``.
        reference: ``"function_values"`` without ``golden``: a trusted program the epilogue
            finds compiled as it finds the golden (the golden solution), or ``""``.
        enough: ``"function_values"``, ``"io_programs"`` without ``golden``: no program starts
            once ``enough`` programs that have ended are wrong programs (``skipped``), or
            ``None``.
        stop_at_timeout: ``"function"``, ``"io"``, ``"io_programs"``: no test or case runs after
            one that times out (the choice of a problem's mutants; ``sandboxes.run_function_tests``,
            ``sandboxes.run_io_cases``).
    """

    kind: str
    program: str
    tests: tuple[Any, ...] = ()
    setup: str = ""
    entry_point: str | None = None
    time_s: float = 5.0
    stdin: str = ""
    limits: Any = None
    programs: tuple[str, ...] = ()
    golden: int | None = None
    epilogue: str = ""
    reference: str = ""
    enough: int | None = None
    stop_at_timeout: bool = False

    @classmethod
    def tests_of(
        cls, problem: Any, program: str, tests: Sequence[Any], *, time_s: float, stop_at_timeout: bool = False
    ) -> Grading:
        """``program`` on ``tests`` in ``problem``'s style, as :func:`~llm_envs.verifiers.code.judge` runs it
        (``stop_at_timeout``: no test or case after one that times out)."""
        if problem.style == "io":
            return cls("io", program, tuple(tuple(t) for t in tests), time_s=time_s, stop_at_timeout=stop_at_timeout)
        if problem.style == "function":
            return cls(
                "function",
                program,
                tuple(tests),
                setup=problem.setup,
                entry_point=problem.entry_point,
                time_s=time_s,
                stop_at_timeout=stop_at_timeout,
            )
        raise ValueError(
            f"problem {problem.id} has style {problem.style!r}; code judging needs 'function' or 'io'"
        )

    @classmethod
    def slots_of(
        cls, problem: Any, programs: Sequence[str], tests: Sequence[Any], *, golden: int | None, time_s: float
    ) -> Grading:
        """Every one of ``programs`` on ``tests`` in one run (function style only)."""
        if problem.style != "function":
            raise ValueError(
                f"problem {problem.id} has style {problem.style!r}; one run of many programs needs 'function'"
            )
        return cls(
            "function_slots",
            "",
            tuple(tests),
            setup=problem.setup,
            entry_point=problem.entry_point,
            time_s=time_s,
            programs=tuple(programs),
            golden=golden,
        )

    @classmethod
    def values_of(
        cls,
        problem: Any,
        programs: Sequence[str],
        checks: Sequence[Any],
        *,
        time_s: float,
        golden: int | None = None,
        epilogue: str = "",
        reference: str = "",
        enough: int | None = None,
    ) -> Grading:
        """Every one of ``programs`` on ``checks`` (``sandboxes.ValueCheck`` values) in one run
        (function style only; trusted programs only); with ``golden``, the others stop at their
        first failed assert on a check the golden passed; ``epilogue`` runs after each
        program's top level but the golden's, and finds the golden (or, without one, the
        ``reference``) compiled; with ``enough``, no program starts once that many that have
        ended are wrong programs (``sandboxes.run_value_checks``)."""
        if problem.style != "function" or not problem.entry_point:
            raise ValueError(
                f"problem {problem.id} has style {problem.style!r}; value checks need 'function' and an entry point"
            )
        return cls(
            "function_values",
            "",
            tuple(checks),
            setup=problem.setup,
            entry_point=problem.entry_point,
            time_s=time_s,
            programs=tuple(programs),
            golden=golden,
            epilogue=epilogue,
            reference=reference,
            enough=enough,
        )

    @classmethod
    def io_programs_of(
        cls,
        problem: Any,
        programs: Sequence[str],
        cases: Sequence[Any],
        *,
        time_s: float,
        golden: int | None = None,
        enough: int | None = None,
        stop_at_timeout: bool = False,
    ) -> Grading:
        """Every one of ``programs`` on the stdin/stdout ``cases`` in one run (trusted programs
        only; ``sandboxes.run_io_programs``): with ``golden``, the others stop at their first
        wrong answer on a case the golden passed; with ``enough``, no program starts once that
        many that have ended are wrong programs; with ``stop_at_timeout``, a program runs no
        case after one that timed out."""
        if problem.style != "io":
            raise ValueError(f"problem {problem.id} has style {problem.style!r}; this run needs 'io'")
        return cls(
            "io_programs",
            "",
            tuple(tuple(case) for case in cases),
            time_s=time_s,
            programs=tuple(programs),
            golden=golden,
            enough=enough,
            stop_at_timeout=stop_at_timeout,
        )

    def value_checks_arguments(self) -> dict[str, Any]:
        """``sandboxes.run_value_checks``'s keyword arguments for this ``"function_values"``
        grading (beside the sandbox, the programs and the checks)."""
        return {
            "setup": self.setup,
            "entry_point": str(self.entry_point),
            "time_s": self.time_s,
            "golden": self.golden,
            "epilogue": self.epilogue,
            "reference": self.reference,
            "enough": self.enough,
        }

    @classmethod
    def run(cls, program: str, *, stdin: str = "", limits: Any = None) -> Grading:
        """One plain run of ``program`` (its ``RunResult``)."""
        return cls("run", program, stdin=stdin, limits=limits)


def run_grading(sandbox: Any, grading: Grading) -> Any:
    """Grade ``grading`` in ``sandbox``: a ``TestReport`` (``"function"``, ``"io"``), a
    ``RunResult`` (``"run"``), a tuple of ``SlotResult`` (``"function_slots"``: a run that
    failed as a whole gives reports of ``None``, which the caller grades again one by one) or a
    tuple of ``ValueCheckResult`` or ``None`` (``"function_values"``) or of ``TestReport`` or
    ``None`` (``"io_programs"``): ``None`` where the run did not establish that program's
    outcome.

    Raises:
        SandboxFailure: the sandbox failed on every attempt (never a program's outcome).
    """
    from llm_envs.verifiers import code as code_verifier

    if grading.kind == "function":
        return code_verifier.judge_function(
            sandbox,
            grading.program,
            grading.tests,
            setup=grading.setup,
            entry_point=grading.entry_point,
            time_s=grading.time_s,
            stop_at_timeout=grading.stop_at_timeout,
        )
    if grading.kind == "io":
        return code_verifier.judge_io(
            sandbox, grading.program, grading.tests, time_s=grading.time_s, stop_at_timeout=grading.stop_at_timeout
        )
    if grading.kind == "function_slots":
        from sandboxes.harness import run_function_tests_slots

        return tuple(
            run_function_tests_slots(
                sandbox,
                grading.programs,
                list(grading.tests),
                setup=grading.setup,
                entry_point=grading.entry_point,
                time_s=grading.time_s,
                golden=grading.golden,
            )
        )
    if grading.kind == "function_values":
        from sandboxes import run_value_checks

        return tuple(run_value_checks(sandbox, grading.programs, list(grading.tests), **grading.value_checks_arguments()))
    if grading.kind == "io_programs":
        from sandboxes import run_io_programs

        return tuple(
            run_io_programs(
                sandbox,
                grading.programs,
                list(grading.tests),
                time_s=grading.time_s,
                golden=grading.golden,
                enough=grading.enough,
                stop_at_timeout=grading.stop_at_timeout,
            )
        )
    if grading.kind == "run":
        return code_verifier.run_program(sandbox, grading.program, stdin=grading.stdin, limits=grading.limits)
    raise ValueError(f"unknown grading kind {grading.kind!r}")


class _Planned(BaseException):
    """Stops a planning clone at its first ``_grade`` call (a ``BaseException`` so that no
    ``except Exception`` on the way catches it)."""


def plan(env: Any, action: str) -> list[Grading]:
    """The gradings ``env.step(action)`` asks for first (its first ``_grade`` call), found by
    playing the step on a clone up to that call. ``[]`` for an environment that grades nothing
    (or not in this step), and for a step that fails before it grades (the real step fails the
    same way), and for an environment that does not set ``grades_ahead`` (its programs may
    run outside ``_grade``)."""
    if not getattr(env, "grades_ahead", False):
        return []
    probe = env.clone()
    probe._grading_plan = []
    try:
        probe.step(action)
    except _Planned:
        return list(probe._grading_plan)
    except Exception:  # InfrastructureError included: the real step meets it again
        return []
    return []


class Batch:
    """The gradings of many pending steps, in flight on one thread pool (see :func:`ahead`).

    Each step's gradings are submitted as soon as its plan is known, in the order of the pairs,
    and each environment receives its results as futures: its step waits only for its own, so
    the steps are played while later programs are still being graded.
    """

    def __init__(self, pairs: Sequence[tuple[Any, str]], *, width: int | None = None) -> None:
        self.envs = [env for env, _ in pairs]
        #: Gradings submitted.
        self.planned = 0
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: list[concurrent.futures.Future[Any]] = []
        for env, action in pairs:
            gradings = plan(env, action)
            if not gradings:
                continue
            if self._pool is None:
                if width is None:
                    sandboxes = {
                        id(e.sandbox): e.sandbox for e in self.envs if getattr(e, "grades_ahead", False)
                    }
                    width = IN_FLIGHT_PER_WORKER * sum(
                        max(1, int(getattr(sb, "max_concurrency", 2))) for sb in sandboxes.values()
                    )
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=max(1, width), thread_name_prefix="grade-ahead"
                )
            if env._graded_ahead is None:
                env._graded_ahead = _Results()
            for grading in gradings:
                future = self._pool.submit(_grade_or_failure, env.sandbox, grading)
                self._futures.append(future)
                env._graded_ahead.setdefault(grading, []).append(future)
                self.planned += 1

    def wait(self) -> None:
        """Block until every submitted grading is done."""
        concurrent.futures.wait(self._futures)

    def close(self) -> None:
        """Cancel what has not started, wait for what has, and forget every result the steps
        did not use (so that no later step uses a run graded for another)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        drop_unused(self.envs)


class _Results(dict):
    """An environment's results graded ahead (grading -> futures). Not copied with the
    environment: a clone made meanwhile grades its own programs (and a future cannot be copied)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> None:
        return None


def _grade_or_failure(sandbox: Any, grading: Grading) -> Any:
    try:
        return run_grading(sandbox, grading)
    except InfrastructureError as exc:
        return exc  # handed to the step, which raises it as it would have raised its own


@contextlib.contextmanager
def ahead(pairs: Sequence[tuple[Any, str]], *, width: int | None = None) -> Iterator[Batch]:
    """Plan every ``(env, action)`` step and grade its programs on one pool while the ``with``
    block plays the steps (``env.step(action)``, each once); on leaving, results no step used are
    dropped. Environments that do not grade ahead are left alone.

    Args:
        pairs: ``(environment, action)`` of each step about to be played (each environment once).
        width: Gradings in flight at once (default: :data:`IN_FLIGHT_PER_WORKER` times the sum
            of the sandboxes' ``max_concurrency``; the pool queues what its workers cannot take).
    """
    batch = Batch(pairs, width=width)
    try:
        yield batch
    finally:
        batch.close()


def grade_ahead(pairs: Sequence[tuple[Any, str]], *, width: int | None = None) -> int:
    """Grade, and wait for, the programs that ``env.step(action)`` will grade, for every pair;
    the results stay with the environments for their next step (forget them with
    :func:`drop_unused`). Returns the number of gradings run. :func:`ahead` is the form that
    plays the steps while the programs are graded."""
    batch = Batch(pairs, width=width)
    batch.wait()
    if batch._pool is not None:
        batch._pool.shutdown(wait=True)
    return batch.planned


def drop_unused(envs: Sequence[Any]) -> None:
    """Forget results graded ahead that the steps did not use (so no later step reuses them)."""
    for env in envs:
        if getattr(env, "_graded_ahead", None):
            env._graded_ahead = None
