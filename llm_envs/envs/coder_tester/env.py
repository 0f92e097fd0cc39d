"""``llm/CoderTester-v0``: Stronger-MAS code generation with a coder and a unit-test writer.

Each turn the coder writes a solution and the tester writes unit tests. The environment runs,
in the sandbox, the coder's code on the golden tests (team and coder rewards), the **golden
solution** and wrong programs on the tester's tests (tester reward: are the tests right, and do
they catch wrong code?), and the coder's code on the tester's tests (agreement, and the
mismatches shown in the next turn). Within a turn the coder acts first, but the tester's
prompt shows only earlier turns, so a turn is simultaneous in effect, as in the paper. A
program the sandbox failed to run is never scored (``step`` raises ``SandboxFailure``).

The spec (agents, actions, observations, rewards, episode end, metrics) and the version history
are in docs/envs/coder_tester.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from llm_envs.core.env import TextEnv
from llm_envs.core.splits import check_split
from llm_envs.envs._common import (
    PROBLEM_OPTIONS,
    TimedSandboxUser,
    check_reward_holes,
    check_team_options,
    check_turn_rewards,
    choose_problem,
    credit_team_and_local,
    end_turn,
    level_reward_bounds,
    on_clones,
    resolve_task_source,
    wrong_sign_holes,
)
from llm_envs.envs.coder_tester import by_value_results, io_runs, mutants, rules
from llm_envs.envs.grading import Grading
from llm_envs.tasks import Problem, TaskSource
from llm_envs.verifiers import code as code_verifier


@dataclass
class CoderTesterConfig:
    """Options of :class:`CoderTesterEnv` (defaults follow Stronger-MAS).

    Attributes:
        task: Task source name (``"humaneval"``, ``"mbpp"``, ``"apps"``, ``"code_contests"``,
            ``"livecodebench"``); see docs/tasks.md.
        split: ``"train"``, ``"validation"`` or ``"test"``.
        task_path: A local JSONL/parquet file or directory in the dataset's hub schema.
        task_kwargs: Extra options of the task source (``split_policy``, ``limit``, ...).
        agents: ``"multi"`` (coder and tester) or ``"single"`` (the coder alone, one turn).
        max_turns: Turn limit T. Paper: 4.
        reward_mode: ``"dense"`` (shaped) or ``"outcome"`` (team outcome only).
        turn_rewards: ``"change"`` (default): each action is paid the change of its agent's
            reward level since that agent's previous action, so a solved task is paid once
            and stalling never pays; ``"paper"``: every action is paid its level (the paper's
            per-turn reward; refused for multi-turn teams unless ``allow_reward_holes``).
        allow_reward_holes: Allow an option that lets a strategy other than solving earn more
            (``turn_rewards="paper"``, a negative local weight); see docs/papers.md.
        reply_parsing: ``"strict"`` (default, the released code's formats): the coder's code is
            the last closed ```` ```python ```` block, and stdin/stdout tests are the blocks
            after ``**Test Input:**`` / ``**Test Output:**``; ``"lenient"``: also ```` ```py ````,
            untagged and unclosed final blocks, and any line naming an input or an output.
        alpha: Weight of the team reward in ``alpha * r_team + r_local``. Paper: 1. Must be
            >= 0 (a negative team weight pays failing code).
        coder_weights: Coder local reward weights (0.1 builds, 0.1 runs, 0.8 golden); a
            negative weight (here or in ``tester_weights``) pays failing and needs
            ``allow_reward_holes``.
        tester_weights: Tester local reward weights (0.2 valid, 0.8 golden solution pass rate
            [times the catch rate]).
        tester_reward: ``"catch"`` (default): ``0.2·valid + 0.8·golden pass rate·catch rate``,
            paid for tests that reject wrong programs (:func:`rules.tester_catch_reward`);
            ``"paper"``: ``0.2·valid + 0.8·golden pass rate`` (Stronger-MAS).
        max_mutants: Mutants of the golden solution kept per problem as wrong programs (each
            costs one sandbox run per tester step; chosen once per problem and cached, in
            memory and on disk). They are the only wrong programs: the coder's attempts never
            count (an agent could write them to be caught).
        max_mutant_candidates: Mutants tried per problem at most to find ``max_mutants`` that
            fail a golden test.
        catch_runs: How the catch reward grades the guarded golden solution and the wrong
            programs on the tester's tests (stdin/stdout problems: in one run, :mod:`.io_runs`,
            but with ``"per_program"``): ``"by_value"`` (default): where every test is one
            ``assert`` whose only link to the program is calls of the entry point on data
            (:func:`~llm_envs.verifiers.code.value_check`), the golden solution (unguarded) and
            every wrong program in one run, each in a process of its own running the asserts
            with its values rebuilt as data (``sandboxes.run_value_checks``); no test code runs
            beside a wrong program, so it pays exactly what one run each pays (and the mutants
            are chosen that way where the golden tests are of that form); other steps as
            ``"per_program"``. ``"per_program"``: one sandbox run each.
            ``"one_run"``: all of them in one run, one slot at a time in a random order, each
            slot's test process under a seccomp filter, a wrong program stopped at its first
            caught test (``sandboxes.harness.run_function_tests_slots``; the problem's mutants
            are then chosen in one run per wave of candidates too). ``"one_run"`` needs
            ``allow_reward_holes``: a slot's tests can measure how long the earlier slots took
            (the clock cannot be taken from them), so a tester can pass its programs' answers
            on to later slots by how long its tests run, and assert their majority.
        runs_check_tests: How many of the first golden tests must execute for "runs".
        max_golden_tests: Use only the first N golden tests (``None``: all). The released
            code used 4 in training.
        max_generated_tests: Tests taken from one tester reply at most.
        test_time_s: Time limit of one test (function style) or one program run (I/O style).
        mutant_test_time_s: The same limit while choosing a problem's mutants (at most
            ``test_time_s``): a candidate that reaches it on a golden test is not chosen
            (:func:`mutants.reached_time_limit`), and its run stops there. A candidate that
            hangs then costs this once per problem instead of ``test_time_s`` a golden test: 12
            of HumanEval's 164 problems have such candidates. Keep it well above the golden
            solution's slowest test (HumanEval's slowest takes ~30 ms; a problem whose
            candidates all run longer gets no wrong programs).
        shown_chars: Code and tests echoed into prompts are cut to this many characters.
        max_mismatches_shown: Failed tests listed in a prompt at most.
    """

    task: str = "humaneval"
    split: str = "train"
    task_path: str | None = None
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    agents: str = "multi"
    max_turns: int = 4
    reward_mode: str = "dense"
    turn_rewards: str = "change"
    allow_reward_holes: bool = False
    reply_parsing: str = "strict"
    alpha: float = 1.0
    coder_weights: rules.CoderWeights = field(default_factory=rules.CoderWeights)
    tester_weights: rules.TesterWeights = field(default_factory=rules.TesterWeights)
    tester_reward: str = "catch"
    max_mutants: int = mutants.DEFAULT_MAX_MUTANTS
    max_mutant_candidates: int = mutants.DEFAULT_MAX_CANDIDATES
    catch_runs: str = "by_value"
    runs_check_tests: int = 3
    max_golden_tests: int | None = None
    max_generated_tests: int = 16
    test_time_s: float = 5.0
    mutant_test_time_s: float = 1.0
    shown_chars: int = 4000
    max_mismatches_shown: int = 5

    def validate(self) -> None:
        check_team_options(self)
        check_turn_rewards(self)
        if self.catch_runs not in rules.CATCH_RUNS:
            raise ValueError(f"catch_runs must be one of {rules.CATCH_RUNS}, got {self.catch_runs!r}")
        check_reward_holes(
            self,
            wrong_sign_holes(self.coder_weights, gains=("builds", "runs", "golden"))
            + wrong_sign_holes(self.tester_weights, gains=("valid", "golden"))
            + (
                [
                    "catch_runs='one_run' (the tests of a later program's slot can time the "
                    "earlier slots of the run, so a tester can pass its programs' answers on by "
                    "how long its tests take and assert their majority: paid for catches without "
                    "knowing the answer)"
                ]
                if self.catch_runs == "one_run"
                and self.tester_reward == "catch"
                and self.reward_mode == "dense"
                else []
            ),
        )
        if self.reply_parsing not in rules.REPLY_PARSINGS:
            raise ValueError(f"reply_parsing must be one of {rules.REPLY_PARSINGS}, got {self.reply_parsing!r}")
        if self.test_time_s <= 0 or self.mutant_test_time_s <= 0:
            raise ValueError("test_time_s and mutant_test_time_s must be positive")
        if self.max_generated_tests < 1 or self.runs_check_tests < 1:
            raise ValueError("max_generated_tests and runs_check_tests must be >= 1")
        if self.tester_reward not in rules.TESTER_REWARDS:
            raise ValueError(f"tester_reward must be one of {rules.TESTER_REWARDS}, got {self.tester_reward!r}")
        if self.max_mutants < 0 or self.max_mutant_candidates < 0:
            raise ValueError("max_mutants and max_mutant_candidates must be >= 0")
        check_split(self.split)


@dataclass
class _Turn:
    """What one completed turn left for the next prompts."""

    code: str | None
    tests_text: str | None
    mismatches: list[rules.Mismatch]
    passed: int
    total: int


class CoderTesterEnv(TimedSandboxUser, TextEnv):
    """Coder–Tester code generation (Stronger-MAS); see the module docstring."""

    # Each turn is simultaneous (the tester sees only earlier turns; episodes end after a turn).
    metadata: ClassVar[dict[str, Any]] = {
        **TextEnv.metadata,
        "name": "coder_tester_v0",
        "is_parallelizable": True,
    }
    config_class = CoderTesterConfig
    reset_options = PROBLEM_OPTIONS
    grades_ahead = True  # every program run goes through _grade (llm_envs.envs.grading)

    def __init__(
        self,
        config: CoderTesterConfig | None = None,
        *,
        render_mode: str | None = None,
        sandbox: Any = None,
        task_source: TaskSource | None = None,
        **overrides: Any,
    ) -> None:
        """Args:
        config: A :class:`CoderTesterConfig`; keyword ``overrides`` replace its fields.
        render_mode: ``"ansi"``, ``"human"`` or ``None``.
        sandbox: A :class:`sandboxes.Sandbox` or a spec string for
            ``sandboxes.shared_sandbox``; ``None`` uses ``shared_sandbox("auto")`` on first use.
        task_source: A ready task source; replaces ``config.task``.
        """
        self.config: CoderTesterConfig = self._build_config(config, overrides)
        cfg = self.config
        cfg.validate()
        self.task_source = resolve_task_source(cfg, task_source)
        first = self.task_source.get(0)
        if first.style not in ("function", "io"):
            raise ValueError(
                f"task {self.task_source.name!r} has {first.style!r} problems; CoderTester needs code problems"
            )
        self.multi_agent = cfg.agents == "multi"
        if self.multi_agent and not getattr(self.task_source, "has_golden_solutions", True):
            raise ValueError(
                f"task {self.task_source.name!r} has no golden solutions, which the tester reward needs "
                "(0.8 x pass rate of the golden solution on the tests); use agents='single'"
            )
        self._keep_sandbox(sandbox)
        super().__init__(["coder", "tester"] if self.multi_agent else ["coder"], render_mode=render_mode)
        self.problem: Problem | None = None
        self.golden_tests: tuple[Any, ...] = ()
        self.history: list[_Turn] = []
        self._code: str | None = None
        self._golden_pass_rate = 0.0
        self._last_tester: dict[str, float] = {}
        self._agreed = False
        self._sandbox_seconds = 0.0
        self._reward_levels: dict[str, tuple[float, float]] = {}

    # ------------------------------------------------------------------ sandbox
    def _shared_resources(self) -> list[Any]:
        return [self.task_source, *self._sandbox_if_started()]

    def _judge_all(self, jobs: list[tuple[str, Any]]) -> list[Any]:
        """Run each ``(code, tests)`` in the problem's style, concurrently (a
        ``sandboxes.TestReport`` each; graded ahead in a batch where
        :func:`~llm_envs.envs.grading.grade_ahead` ran); the wall time (not the sum of the concurrent runs) is
        added to :attr:`sandbox_seconds`."""
        problem, time_s = self.problem, self.config.test_time_s
        assert problem is not None
        with self._waiting_for_sandbox():
            return self._grade([Grading.tests_of(problem, c, t, time_s=time_s) for c, t in jobs])

    def _judge_candidates(self, programs: list[str], tests: Sequence[Any] | None = None) -> list[Any]:
        """The reports of mutant candidates ``programs`` (guarded, as run) on ``tests`` (default:
        the golden tests), one run each, under the choice's time limit (:meth:`_choice_time_s`);
        no test or case runs after one that reaches it (the candidate is then not kept whatever
        the others give: :func:`mutants.wrong_on_golden`)."""
        problem = self.problem
        assert problem is not None
        time_s = self._choice_time_s()
        tests = self.golden_tests if tests is None else tests
        with self._waiting_for_sandbox():
            return self._grade(
                [Grading.tests_of(problem, p, tests, time_s=time_s, stop_at_timeout=True) for p in programs]
            )

    def _cases_the_golden_passes(self) -> tuple[Any, ...]:
        """The golden cases of this stdin/stdout problem its golden passes (a dataset's golden
        may fail some: a no-op mutant judged there was kept as a wrong program)."""
        assert self.problem is not None and self.problem.solution is not None
        report = self._judge_all([(self.problem.solution, self.golden_tests)])[0]
        return tuple(case for case, result in zip(self.golden_tests, report.results) if result.passed)

    # ------------------------------------------------------------------ episode
    def _start_episode(self, options: dict[str, Any]) -> str:
        self.problem = choose_problem(self.task_source, options, self.np_random)
        if self.problem.style not in ("function", "io") or not self.problem.tests:
            raise ValueError(f"problem {self.problem.id!r} is not a code problem with golden tests")
        limit = self.config.max_golden_tests
        self.golden_tests = tuple(self.problem.tests[:limit] if limit is not None else self.problem.tests)
        self.history = []
        self._code = None
        self._golden_pass_rate = 0.0
        self._last_tester = {}
        self._agreed = False
        self._sandbox_seconds = 0.0
        self._reward_levels = {}  # each agent's (team, local) level so far: turn_rewards="change"
        return "coder"

    def _apply_action(self, agent: str, action: str) -> str | None:
        if agent == "coder":
            return self._coder_step(action)
        return self._tester_step(action)

    def _coder_step(self, action: str) -> str | None:
        cfg = self.config
        code = (
            rules.strict_code(action) if cfg.reply_parsing == "strict" else code_verifier.extract_code(action)
        )
        # Judged before any state changes: a sandbox failure raises SandboxFailure and leaves
        # the episode as it was (the step can be played again).
        report = None if code is None else self._judge_all([(code, self.golden_tests)])[0]
        record = self._add_record("coder", action, parsed={"code": code}, format_ok=code is not None)
        if report is None:
            builds = runs = False
            golden_rate = 0.0
            info: dict[str, Any] = {"error": "no ```python code block found"}
        else:
            builds = report.compiled
            first = report.results[: cfg.runs_check_tests]
            io_style = self.problem is not None and self.problem.style == "io"
            runs = builds and bool(first) and all(code_verifier.ran_to_completion(r, io_style) for r in first)
            if not io_style:
                runs = runs and report.ran
            golden_rate = report.pass_rate
            info = {
                "golden_passed": report.passed,
                "golden_total": report.total,
                "error": report.error,
            }
        self._code = code
        self._golden_pass_rate = golden_rate
        record.info.update({"builds": builds, "runs": runs, "golden_pass_rate": golden_rate, **info})
        credit_team_and_local(
            self,
            record,
            self._team_reward(),
            rules.coder_local_reward(builds, runs, golden_rate, cfg.coder_weights),
        )
        if not self.multi_agent:
            self.turn += 1
            self.history.append(_Turn(code, None, [], 0, 0))
            self._end_episode()  # one-shot: the single coder's episode is its one turn
            return None
        return "tester"

    def _tester_step(self, action: str) -> str | None:
        cfg = self.config
        problem = self.problem
        assert problem is not None
        if problem.style == "io":
            parsed = code_verifier.parse_io_tests(
                rules.strict_io_tests_text(action) if cfg.reply_parsing == "strict" else action,
                max_tests=cfg.max_generated_tests,
            )
        else:
            parsed = code_verifier.parse_function_tests(
                action, problem.entry_point, max_tests=cfg.max_generated_tests
            )
        # Judged before any state changes (see _coder_step).
        reports: list[Any] = []
        by_value = None
        control_report = None
        catching = self._pays_for_catches()
        wrong_jobs: list[tuple[str, Any, int]] = []
        one_run: tuple[Any, int, int] | None = None  # (golden report, caught, wrong programs)
        if parsed.valid and catching and self._grades_in_one_run():
            one_run, code_report = self._one_run(parsed.tests)
            reports = [one_run[0]] + ([code_report] if self._code is not None else [])
        elif parsed.valid:
            jobs = []
            by_value = self._grading_by_value(parsed.tests) if catching else None
            if problem.solution is not None and by_value is None:
                # With the catch reward the golden runs guarded too (by itself) where the
                # tester's tests run against the wrong programs: the same wrapper, the same extra
                # work per call as every wrong program, so a test cannot tell the golden from a
                # wrong program by timing or by its shape, only by values. (Graded by value, the
                # golden is the first program of that grading, unguarded: nothing of the tester's
                # but asserts that see only values runs against the wrong programs.)
                golden = (
                    self._as_wrong_program(problem.solution)
                    if catching and self._can_use_wrong_programs()
                    else problem.solution
                )
                jobs.append((golden, parsed.tests))
            if self._code is not None:
                jobs.append((self._code, parsed.tests))
            if catching and by_value is None:
                wrong_jobs = self._wrong_program_jobs(parsed.tests)
            # The control: the golden's run again, alone, as every wrong program runs (see
            # _count_caught); function style only (stdin/stdout tests are data; graded by value,
            # the tests are asserts on values).
            controls = [jobs[0]] if wrong_jobs and problem.solution is not None and problem.style == "function" else []
            gradings = [
                Grading.tests_of(problem, c, t, time_s=cfg.test_time_s)
                for c, t in jobs + [(c, t) for c, t, _ in wrong_jobs] + controls
            ]
            with self._waiting_for_sandbox():
                reports = self._grade(gradings + ([by_value] if by_value is not None else []))
            value_results = reports.pop() if by_value is not None else None
            control_report = reports.pop() if controls else None
            if by_value is not None:
                reports.insert(0, by_value_results.golden_report(self, value_results[0], parsed.tests))
        record = self._add_record(
            "tester",
            action,
            parsed={
                "tests": len(parsed.tests),
                "found": parsed.found,
                "problems": list(parsed.problems),
            },
            format_ok=parsed.valid,
        )
        golden_solution_rate = 0.0
        mismatches: list[rules.Mismatch] = []
        passed = 0
        caught = wrong_programs = 0
        if parsed.valid:
            golden_report = reports.pop(0) if problem.solution is not None else None
            code_report = reports.pop(0) if self._code is not None else None
            golden_solution_rate = golden_report.pass_rate if golden_report is not None else 0.0
            if one_run is not None:
                caught, wrong_programs = one_run[1], one_run[2]
            elif by_value is not None and golden_report is not None:
                caught, wrong_programs = by_value_results.count_caught(
                    self, golden_report, by_value, value_results, parsed.tests
                )
            elif catching and golden_report is not None:
                caught, wrong_programs = self._count_caught(golden_report, wrong_jobs, reports, control_report)
                record.info["tests_reproducible"] = caught is not None
                caught = caught or 0
            if code_report is not None:
                passed = code_report.passed
                for result, shown in zip(code_report.results, parsed.shown):
                    if not result.passed:
                        io_style = problem.style == "io"
                        mismatches.append(
                            rules.Mismatch(
                                test=shown,
                                expected=result.expected if io_style else None,
                                actual=result.stdout if io_style else None,
                                error=result.error,
                            )
                        )
            else:
                mismatches = [
                    rules.Mismatch(
                        test=s,
                        expected=None,
                        actual=None,
                        error="the coder gave no code",
                    )
                    for s in parsed.shown
                ]
        self._agreed = parsed.valid and self._code is not None and passed == len(parsed.tests)
        record.info.update(
            {
                "valid": parsed.valid,
                "golden_solution_pass_rate": golden_solution_rate,
                "code_passed": passed,
                "agreed": self._agreed,
            }
        )
        self._last_tester = {
            "valid": float(parsed.valid),
            "golden_solution_pass_rate": golden_solution_rate,
        }
        if catching:
            record.info.update({"wrong_programs": wrong_programs, "wrong_programs_caught": caught})
            self._last_tester["catch_rate"] = rules.catch_rate(caught, wrong_programs)
            local = rules.tester_catch_reward(
                parsed.valid, golden_solution_rate, caught, wrong_programs, cfg.tester_weights
            )
        else:
            local = rules.tester_local_reward(parsed.valid, golden_solution_rate, cfg.tester_weights)
        credit_team_and_local(self, record, self._team_reward(), local)
        tests_text = code_verifier.extract_code(action) if problem.style == "function" else action
        self.history.append(_Turn(self._code, tests_text, mismatches, passed, len(parsed.tests)))
        return end_turn(self, self._agreed, "coder")

    # ------------------------------------------------------------------ wrong programs
    def _pays_for_catches(self) -> bool:
        """Whether this step's tester reward is the catch reward (dense mode, the default
        ``tester_reward``); outcome mode and the paper's reward need no wrong programs."""
        return self.config.tester_reward == "catch" and self.config.reward_mode == "dense"

    def _as_wrong_program(self, program: str) -> str:
        """``program`` as it runs as a wrong program: guarded (function style; see
        :mod:`~llm_envs.envs.coder_tester.mutants`), or as it is (stdin/stdout)."""
        problem = self.problem
        assert problem is not None and problem.solution is not None
        if problem.style == "io":
            return program
        return mutants.guarded_program(
            program,
            golden=problem.solution,
            setup=problem.setup,
            entry_point=str(problem.entry_point),
            call=problem.call,
        )

    def _guard(self) -> str:
        """The guard of this (function-style) problem's wrong programs as the epilogue of a
        by-value grading (what :meth:`_as_wrong_program` appends)."""
        problem = self.problem
        assert problem is not None and problem.solution is not None
        return mutants.guard_epilogue(
            golden=problem.solution, setup=problem.setup, entry_point=str(problem.entry_point), call=problem.call
        )

    def _can_use_wrong_programs(self) -> bool:
        problem = self.problem
        return (
            problem is not None
            and problem.solution is not None
            and (problem.style == "io" or mutants.can_guard(problem.entry_point, problem.call))
        )

    def _mutants(self) -> tuple[str, ...]:
        """This problem's mutants that fail a golden test (chosen once per problem, then cached
        in memory and on disk for other processes, :func:`mutants.select_mutants`; choosing runs
        up to ``max_mutant_candidates`` candidates on the golden tests in waves of
        ``2 * max_mutants``, then ``max_mutants``, one run per wave by value, stdin/stdout
        (:func:`io_runs.judge_candidates`) or with ``catch_runs="one_run"``, else one run per
        candidate; every golden test limited to :meth:`_choice_time_s`)."""
        cfg, problem = self.config, self.problem
        assert problem is not None and problem.solution is not None
        if cfg.max_mutants == 0:
            return ()
        io_style, solution = problem.style == "io", problem.solution
        in_one_run = io_style and io_runs.enabled(self)

        passing: list[tuple[Any, ...]] = []  # stdin/stdout: the cases the golden passes, once

        def judge(programs: list[str], needed: int | None = None) -> list[Any]:
            # Decided here, when candidates are judged: a step whose choice is cached makes
            # neither the golden tests' value checks nor the golden's run on its cases.
            if io_style:
                if not passing:
                    passing.append(self._cases_the_golden_passes())
                if not passing[0]:
                    return [False] * len(programs)  # no case tells a wrong program from the golden
                if in_one_run:
                    return io_runs.judge_candidates(self, programs, needed, cases=passing[0])
                return self._judge_candidates(programs, passing[0])
            if in_one_run:
                return io_runs.judge_candidates(self, programs, needed)
            if self._grades_in_one_run():
                return self._judge_on_golden_in_one_run(programs)
            if self._value_checks(self.golden_tests) is not None:
                return self._judge_on_golden_by_value(programs, needed)
            return self._judge_candidates([self._as_wrong_program(p) for p in programs])

        return mutants.select_mutants(
            self._mutants_key(),
            lambda: mutants.MutantSource(
                solution, functions_only=not io_style, key=str(problem.id), limit=cfg.max_mutant_candidates
            ),
            judge,
            io_style=io_style,
            max_mutants=cfg.max_mutants,
            # (a judge that judges every candidate of a wave is one that stops early nowhere)
            judge_stops_early=True,
        )

    def _mutants_key(self) -> str:
        """What this problem's choice of mutants is cached under (:func:`mutants.cache_key`)."""
        cfg = self.config
        return mutants.cache_key(
            self.problem, self.golden_tests, cfg.max_mutants, cfg.max_mutant_candidates, self._choice_time_s()
        )

    def prepare(
        self, problems: Iterable[int] | None = None, *, threads: int | None = None, progress: Any = None
    ) -> dict[str, Any]:
        """Choose the mutants of ``problems`` (task-source indices; ``None``: all) before
        training, so that no tester step pays the choice: a step reads them from memory or, in
        any other process, from the disk cache (:func:`mutants.disk_cache_dir`). ``threads``
        problems at once (default: the sandbox's ``max_concurrency``), each on a clone of this
        env; ``progress(done, total)`` after each. Nothing is chosen where no catch reward is
        paid (``tester_reward="paper"``, ``reward_mode="outcome"``, one agent, no mutants).
        Returns ``{"problems", "with_mutants", "mutants", "shipped", "disk_cache"}`` (looked at,
        with a mutant, chosen, of those problems how many read from the package's table:
        :mod:`.shipped`, stored where); a sandbox failure propagates, that problem not cached."""
        cfg = self.config
        indices = list(range(len(self.task_source)) if problems is None else problems)
        if not self.multi_agent or not self._pays_for_catches() or cfg.max_mutants == 0:
            return {"problems": len(indices), "with_mutants": 0, "mutants": 0}
        sandbox = self.sandbox  # started here, so that every clone shares it

        def choose(env: Any, index: int) -> tuple[int, bool]:
            env.reset(seed=0, options={"problem_index": int(index)})
            if not env._can_use_wrong_programs():
                return 0, False
            return len(env._mutants()), mutants.origin(env._mutants_key()) == "shipped"

        done = on_clones(self, choose, indices, threads or getattr(sandbox, "max_concurrency", 1), progress)
        counts = [count for count, _ in done]
        disk = str(mutants.disk_cache_dir() or "off (kept by this process only)")
        return {"problems": len(indices), "with_mutants": sum(map(bool, counts)), "mutants": sum(counts),
                "shipped": sum(from_table for _, from_table in done), "disk_cache": disk}

    def _choice_time_s(self) -> float:
        """The time limit of one golden test while choosing mutants: ``mutant_test_time_s``, at
        most ``test_time_s``."""
        return min(self.config.mutant_test_time_s, self.config.test_time_s)

    def _judge_on_golden_in_one_run(self, programs: list[str]) -> list[Any]:
        """The reports of mutant candidates ``programs`` (guarded) on the golden tests, all in
        one run (``sandboxes.harness.run_function_tests_slots``: the golden tests are the
        problem's own, so no golden slot and no early stop); a candidate whose slot the run did
        not establish (no report, or not every test reported) is judged in a run of its own."""
        problem = self.problem
        assert problem is not None
        guarded = [self._as_wrong_program(p) for p in programs]
        grading = Grading.slots_of(problem, guarded, self.golden_tests, golden=None, time_s=self._choice_time_s())
        with self._waiting_for_sandbox():
            slots = self._grade([grading])[0]
        reports = [slot.report if slot.report is not None and slot.complete else None for slot in slots]
        again = [i for i, report in enumerate(reports) if report is None]
        if again:
            for i, report in zip(again, self._judge_candidates([guarded[i] for i in again])):
                reports[i] = report
        return reports

    def _value_checks(self, tests: Sequence[Any]) -> tuple[Any, ...] | None:
        """``tests`` as ``sandboxes.ValueCheck`` values where this step grades wrong programs by
        value (``catch_runs="by_value"``, a function-style problem whose wrong programs are
        guarded and called as the entry point, every test a value check:
        :func:`code_verifier.value_checks`), else ``None``."""
        problem = self.problem
        if (
            self.config.catch_runs != "by_value"
            or problem is None
            or problem.style != "function"
            or problem.call not in (None, problem.entry_point)
            or not tests
            or not self._can_use_wrong_programs()
        ):
            return None
        return code_verifier.value_checks(tests, problem.entry_point, problem.setup)

    def _grading_by_value(self, tests: tuple[Any, ...]) -> Grading | None:
        """The grading of the golden solution (first, unguarded) and every wrong program on the
        tester's ``tests`` by value, in one run (:meth:`_value_checks`;
        ``sandboxes.run_value_checks``), or ``None`` where the tests must run as code (or there
        is no wrong program)."""
        checks = self._value_checks(tests)
        problem = self.problem
        if checks is None or problem is None or problem.solution is None:
            return None
        programs = self._mutants()
        if not programs:
            return None
        # The wrong programs unguarded, with the guard as the run's epilogue (compiled once);
        # the golden first, whose passes let each wrong program stop at its first catch.
        return Grading.values_of(
            problem,
            [problem.solution, *programs],
            checks,
            time_s=self.config.test_time_s,
            golden=0,
            epilogue=self._guard(),
        )

    def _choice_grading_by_value(self, programs: Sequence[str], needed: int | None = None) -> Grading:
        """The run that judges mutant candidates ``programs`` by value on the golden tests (all
        ``sandboxes.ValueCheck``) under the choice's time limit, starting none once ``needed``
        are wrong programs (:meth:`_judge_on_golden_by_value`)."""
        problem = self.problem
        checks = self._value_checks(self.golden_tests)
        assert problem is not None and checks is not None
        # The golden solution as the run's reference: the guard of each candidate finds it
        # compiled instead of compiling it in every candidate's process.
        return Grading.values_of(
            problem,
            programs,
            checks,
            time_s=self._choice_time_s(),
            epilogue=self._guard(),
            reference=problem.solution or "",
            enough=needed,
        )

    def _judge_on_golden_by_value(self, programs: list[str], needed: int | None = None) -> list[Any]:
        """Whether each mutant candidate in ``programs`` is a wrong program, graded by value on
        the golden tests (all ``sandboxes.ValueCheck``) in one run (a ``bool`` each,
        :func:`mutants.wrong_by_values`); one not established is judged in a run of its own (its
        report). With ``needed``, the run starts no candidate once ``needed`` of those that have
        ended are wrong programs (``mutants.NOT_JUDGED`` for those it did not start)."""
        grading = self._choice_grading_by_value(programs, needed)
        with self._waiting_for_sandbox():
            results = self._grade([grading])[0]
        checks = len(grading.tests)
        verdicts: list[Any] = [
            mutants.NOT_JUDGED if r is not None and r.skipped else mutants.wrong_by_values(r, checks)
            for r in results
        ]
        again = [i for i, verdict in enumerate(verdicts) if verdict is None]
        if again:
            for i, report in zip(again, self._judge_candidates([self._as_wrong_program(programs[i]) for i in again])):
                verdicts[i] = report
        return verdicts

    def _wrong_program_jobs(self, tests: tuple[Any, ...]) -> list[tuple[str, Any, int]]:
        """``(program, tests to run, golden tests in front)`` for every wrong program: the
        problem's mutants (:meth:`_mutants`, each already failing a golden test), run on the
        tester's tests only.

        Wrong programs come only from mutants the harness makes and guards, never from code an
        agent wrote: a coder's failing attempt could drop its own guard or fail on purpose where
        the tester's tests look, so a coder colluding with the tester would raise the tester's
        reward (issue 30).
        """
        if not self._can_use_wrong_programs():
            return []
        return [(self._as_wrong_program(m), tests, 0) for m in self._mutants()]

    def _grades_in_one_run(self) -> bool:
        """Whether this step grades the golden solution and the wrong programs in one run: a
        stdin/stdout problem (:func:`io_runs.enabled`), or ``catch_runs="one_run"`` (function
        style, guarded wrong programs)."""
        problem = self.problem
        return io_runs.enabled(self) or (
            self.config.catch_runs == "one_run"
            and problem is not None
            and problem.style == "function"
            and self._can_use_wrong_programs()
        )

    def _one_run(self, tests: tuple[Any, ...]) -> tuple[tuple[Any, int, int], Any]:
        """``((golden report, caught, wrong programs), the coder's code's report or None)``
        with the guarded golden solution and every wrong program graded in one run
        (``sandboxes.harness.run_function_tests_slots``; stdin/stdout: :func:`io_runs.one_run`;
        the coder's code in a run of its own, at the same time).

        The same counts as one run per program (:meth:`_count_caught`), failing over to those
        runs for what the one run did not establish: everything, where the golden's slot did
        not end with every test reported; a wrong program whose slot ended early (or was cut
        short) without a catch confirmed by its records and its ledger."""
        problem, time_s = self.problem, self.config.test_time_s
        assert problem is not None and problem.solution is not None
        if problem.style == "io":
            return io_runs.one_run(self, tests)
        golden = self._as_wrong_program(problem.solution)
        wrong = [self._as_wrong_program(m) for m in self._mutants()]
        gradings = [Grading.slots_of(problem, [golden, *wrong], tests, golden=0, time_s=time_s)]
        if self._code is not None:
            gradings.append(Grading.tests_of(problem, self._code, tests, time_s=time_s))
        with self._waiting_for_sandbox():
            results = self._grade(gradings)
        slots = results[0]
        code_report = results[1] if self._code is not None else None
        golden_slot = slots[0]
        if golden_slot.report is None or not golden_slot.complete:
            jobs = [(golden, tests)] + [(program, tests) for program in wrong]
            reports = self._judge_all(jobs)
            caught, count = self._count_caught(reports[0], [(p, t, 0) for p, t in jobs[1:]], reports[1:])
            return (reports[0], caught, count), code_report
        golden_passing = [i for i, r in enumerate(golden_slot.report.results) if r.passed]
        caught, again = 0, []
        for program, slot in zip(wrong, slots[1:]):
            if slot.report is not None and mutants.killed_by(slot.report, False, among=golden_passing):
                caught += 1
            elif slot.report is None or not slot.complete:
                again.append(program)
        if again:
            reports = self._judge_all([(program, tests) for program in again])
            caught += sum(mutants.killed_by(r, False, among=golden_passing) for r in reports)
        return (golden_slot.report, caught, len(wrong)), code_report

    def _count_caught(
        self,
        golden_report: Any,
        wrong_jobs: list[tuple[str, Any, int]],
        wrong_reports: list[Any],
        control_report: Any = None,
    ) -> tuple[int | None, int]:
        """``(caught, wrong programs)``: how many wrong programs at least one of the tester's
        golden-passing tests catches by its own assertion about a value
        (:func:`mutants.killed_by`; a harness failure is never a catch).

        ``caught`` is ``None`` (nothing is paid) where ``control_report``, the golden's guarded
        run made again as every wrong program's run is made, is itself caught: then the tests'
        verdicts do not follow from the program (a test that asserts on ``random``, the clock,
        ``os.urandom`` or ``hash`` passes the golden in one run and fails a wrong program in
        another), so no catch of theirs says the program was wrong."""
        io_style = self.problem is not None and self.problem.style == "io"
        golden_passing = [i for i, r in enumerate(golden_report.results) if r.passed]
        if control_report is not None and mutants.killed_by(control_report, io_style, among=golden_passing):
            return None, len(wrong_jobs)
        caught = wrong = 0
        for (_, _, golden_count), report in zip(wrong_jobs, wrong_reports):
            wrong += 1
            caught += mutants.killed_by(report, io_style, among=[golden_count + i for i in golden_passing])
        return caught, wrong

    def _team_reward(self) -> float:
        """``r_team`` of this turn's code: its golden pass rate, or in outcome mode 1 if it
        passes every golden test."""
        if self.config.reward_mode == "outcome":
            return float(self._golden_pass_rate >= 1.0)
        return self._golden_pass_rate

    # ------------------------------------------------------------------ observations
    def _role(self, agent: str) -> str:
        return agent

    def _instruction(self, agent: str) -> str:
        assert self.problem is not None
        style, entry, call = (
            self.problem.style,
            self.problem.entry_point,
            self.problem.call,
        )
        if agent == "coder":
            return rules.coder_instruction(style, entry, self.multi_agent, call)
        return rules.tester_instruction(style, call, self.config.max_generated_tests)

    def _prompt(self, agent: str) -> str:
        assert self.problem is not None
        if self._episode_over:
            return "The episode is over."
        cfg = self.config
        last = self.history[-1] if self.history else None
        feedback = None
        if last is not None:
            feedback = rules.format_mismatches(
                last.mismatches,
                passed=last.passed,
                total=last.total,
                limit=cfg.max_mismatches_shown,
            )
        if agent == "coder":
            return rules.coder_prompt(self.problem, last.code if last else None, feedback, cfg.shown_chars)
        return rules.tester_prompt(
            self.problem,
            last.tests_text if last else None,
            last.code if last else None,
            feedback,
            cfg.shown_chars,
        )

    def _describe_episode(self) -> str:
        if self.problem is None:
            return ""
        return f"problem {self.problem.id} ({self.problem.style}, {len(self.golden_tests)} golden tests)\n{rules.clip(self.problem.prompt, 1500)}"

    def _episode_metrics(self) -> dict[str, float]:
        metrics = {
            "success": float(self._golden_pass_rate >= 1.0),
            "golden_pass_rate": self._golden_pass_rate,
            "agreed": float(self._agreed),
        }
        if self.multi_agent:
            metrics["tester_valid"] = self._last_tester.get("valid", 0.0)
            metrics["tester_golden_pass_rate"] = self._last_tester.get("golden_solution_pass_rate", 0.0)
            if self._pays_for_catches():
                metrics["tester_catch_rate"] = self._last_tester.get("catch_rate", 0.0)
        return metrics

    # ------------------------------------------------------------------ scripted play
    def reference_action(self, agent: str) -> str:
        """Coder: the golden solution. Tester: the first golden tests in the tester format."""
        assert self.problem is not None
        if agent == "coder":
            return rules.reference_coder_reply(self.problem)
        return rules.reference_tester_reply(self.problem, self.config.max_generated_tests)

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """Well-formed but uninformed: code returning (or printing) a random constant; tests
        expecting random constants."""
        assert self.problem is not None
        value = int(rng.integers(-10, 100))
        entry, call = self.problem.entry_point, self.problem.call
        if agent == "coder":
            if self.problem.style == "function" and call != entry:
                # Solution().twoSum -> a class Solution with a method twoSum
                method = str(call).rpartition(".")[2]
                body = f"class {entry}:\n    def {method}(self, *args, **kwargs):\n        return {value}\n"
            elif self.problem.style == "function":
                body = f"def {entry}(*args, **kwargs):\n    return {value}\n"
            else:
                body = f"print({value})\n"
            return f"**Code:**\n```python\n{body}```"
        count = int(rng.integers(1, 4))
        if self.problem.style == "function":
            lines = [
                f"assert {call}({int(rng.integers(0, 10))}) == {int(rng.integers(-10, 100))}"
                for _ in range(count)
            ]
            return "**Tests:**\n```python\n" + "\n".join(lines) + "\n```"
        cases = [(f"{int(rng.integers(0, 100))}\n", f"{int(rng.integers(0, 100))}\n") for _ in range(count)]
        return code_verifier.io_tests_block(cases)

    # ------------------------------------------------------------------ reward contract
    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """``alpha·r_team + r_local``: the team term is the code's golden pass rate (in
        [0, 1]), the local term a weighted checklist of the agent's weights (dropped in outcome
        mode), is the action's *level*; with ``turn_rewards="change"`` (the default) an action is
        paid the change of its level, so ``[−high, high]`` for levels in ``[0, high]``
        (:func:`llm_envs.envs._common.turn_reward_bounds`). docs/envs/coder_tester.md states the same
        bounds."""
        cfg = self.config
        return level_reward_bounds(cfg, cfg.coder_weights if agent == "coder" else cfg.tester_weights)
