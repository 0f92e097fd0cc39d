"""Pieces that several environments share: task sources, the lazily created sandbox, and the
team options, reward mixing and turn ends of the Stronger-MAS environments (Coder–Tester,
Reasoner–Tool and the puzzles).

Pure Python without PettingZoo, so that the ``rules.py`` modules may import the constants.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import numbers
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from llm_envs.core.bounds import scaled, summed, unit_weights
from llm_envs.tasks import Problem, TaskSource, load_task_source

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llm_envs.core.env import TextEnv
    from llm_envs.core.records import ActionRecord

#: ``agents=``: the paper's two-agent team, or one agent doing both parts.
AGENT_MODES = ("multi", "single")
#: ``reward_mode=``: shaped rewards, or the team outcome only.
REWARD_MODES = ("dense", "outcome")
#: ``turn_rewards=`` (Coder–Tester, Reasoner–Tool): each action is paid the *change* of its
#: agent's reward level since that agent's previous action (a potential difference, the
#: default), or its absolute level every turn (the paper's, which pays an unsolved turn again).
TURN_REWARDS = ("change", "paper")


# ---------------------------------------------------------------------------------- tasks
def resolve_task_source(config: Any, task_source: TaskSource | None) -> TaskSource:
    """``task_source`` when one was given, else ``config.task`` loaded for ``config.split``
    with ``config.task_kwargs`` (plus ``path=config.task_path`` for configs that have a
    ``task_path`` field and set it)."""
    if task_source is not None:
        return task_source
    kwargs = dict(config.task_kwargs)
    task_path = getattr(config, "task_path", None)
    if task_path is not None:
        kwargs["path"] = task_path
    return load_task_source(config.task, split=config.split, **kwargs)


def on_clones(env: TextEnv, work: Any, items: list[Any], threads: int, progress: Any = None) -> list[Any]:
    """``work(clone, item)`` for each of ``items``, ``threads`` at once, each call on one of up to
    ``threads`` clones of ``env`` (clones share its sandbox and task source; start the sandbox
    first so that they share it); the results in the order of ``items``. ``progress(done,
    total)`` is called after each item. An exception of any call propagates."""
    import threading

    clones = [env.clone() for _ in range(max(1, min(threads, len(items))))]
    lock = threading.Lock()
    done = [0]

    def run(item: Any) -> Any:
        with lock:
            clone = clones.pop()
        try:
            return work(clone, item)
        finally:
            with lock:
                clones.append(clone)
                done[0] += 1
                if progress is not None:
                    progress(done[0], len(items))

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(clones), thread_name_prefix="on-clones") as pool:
        return list(pool.map(run, items))


def choose_problem(
    task_source: TaskSource, options: dict[str, Any], rng: np.random.Generator
) -> Problem:
    """The episode's problem from ``reset`` options: ``options["problem"]`` (a Problem),
    ``options["problem_index"]`` (an index into the task source, e.g. to evaluate a whole
    benchmark in order), else a draw from ``rng`` (the environment's ``np_random``)."""
    if options.get("problem") is not None:
        problem = options["problem"]
        if not isinstance(problem, Problem):
            raise TypeError(
                f"options['problem'] must be a Problem, got {type(problem).__name__}"
            )
        return problem
    index = options.get("problem_index")
    if index is not None:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"options['problem_index'] must be an integer, got {index!r}")
        if not 0 <= int(index) < len(task_source):
            raise ValueError(
                f"options['problem_index'] {int(index)} is out of range: the task source has "
                f"{len(task_source)} problems (0 to {len(task_source) - 1})"
            )
        return task_source.get(int(index))
    return task_source.sample(rng)


#: The ``reset`` options :func:`choose_problem` reads.
PROBLEM_OPTIONS = ("problem", "problem_index")


# ---------------------------------------------------------------------------------- sandbox
class SandboxUser:
    """Mixin for an environment whose agents' programs run in a sandbox.

    The constructor's ``sandbox=`` is a sandbox object (used as is), a spec string for
    ``sandboxes.shared_sandbox``, or ``None`` (``"auto"``); a spec is resolved on first use, so
    an environment that never runs a program never starts a sandbox.
    """

    _sandbox: Any = None
    _sandbox_spec: str | None = None

    def _keep_sandbox(self, sandbox: Any) -> None:
        """Store the constructor's ``sandbox=`` argument (see the class docstring)."""
        self._sandbox_spec = sandbox if isinstance(sandbox, str) else None
        self._sandbox = None if isinstance(sandbox, str) else sandbox

    @property
    def sandbox(self) -> Any:
        """The sandbox programs run in (created on first use when none was given)."""
        if self._sandbox is None:
            import sandboxes  # imported lazily: an env that never runs a program needs none

            self._sandbox = sandboxes.shared_sandbox(self._sandbox_spec or "auto")
        return self._sandbox

    def _sandbox_if_started(self) -> list[Any]:
        """``[sandbox]`` once there is one, else ``[]``: for ``_shared_resources``, so that
        clones share it."""
        return [] if self._sandbox is None else [self._sandbox]

    #: Whether every program run of a step goes through :meth:`_grade`, so that
    #: :func:`~llm_envs.envs.grading.grade_ahead` may plan the step on a clone (set by the
    #: environments that do; a subclass that runs programs otherwise must leave it False, or a
    #: planning clone would run them).
    grades_ahead: bool = False

    # Results graded ahead for the coming step (llm_envs.envs.grading.grade_ahead), and the
    # gradings a planning clone records; both per instance, set only when in use.
    _graded_ahead: dict[Any, list[Any]] | None = None
    _grading_plan: list[Any] | None = None

    def _grade(self, gradings: list[Any]) -> list[Any]:
        """Grade each :class:`~llm_envs.envs.grading.Grading` (a ``TestReport`` or a
        ``RunResult`` each, in order), concurrently; every program run of a step goes through
        here. A result graded ahead for this step (:func:`~llm_envs.envs.grading.grade_ahead`)
        is used instead of a run; on a planning clone the gradings are recorded and the step
        stops here.

        Raises:
            SandboxFailure: the sandbox failed (see ``llm_envs.verifiers.code.run_program``).
        """
        from llm_envs.envs import grading as batch

        if self._grading_plan is not None:
            self._grading_plan.extend(gradings)
            raise batch._Planned()
        results: list[Any] = [None] * len(gradings)
        missing: list[int] = []
        ahead = self._graded_ahead
        for i, g in enumerate(gradings):
            try:
                waiting = ahead.get(g) if ahead else None
            except TypeError:  # a grading with unhashable tests: never graded ahead
                waiting = None
            if waiting:
                found = waiting.pop(0)
                results[i] = found.result() if isinstance(found, concurrent.futures.Future) else found
            else:
                missing.append(i)
        if missing:
            from llm_envs.verifiers.code import run_concurrently

            sandbox = self.sandbox
            done = run_concurrently(
                [lambda g=gradings[i]: batch.run_grading(sandbox, g) for i in missing],
                max_workers=len(missing),
            )
            for i, result in zip(missing, done):
                results[i] = result
        for result in results:
            if isinstance(result, BaseException):  # a sandbox failure met while grading ahead
                raise result
        return results


class TimedSandboxUser(SandboxUser):
    """A :class:`SandboxUser` that also adds up the wall time each episode waits for the
    sandbox (reset it with ``self._sandbox_seconds = 0.0`` when an episode starts)."""

    _sandbox_seconds: float = 0.0

    @property
    def sandbox_seconds(self) -> float:
        """Wall-clock seconds this episode spent waiting for the sandbox (for benchmarks; kept
        out of the metrics and the transcript, which must not depend on timing)."""
        return self._sandbox_seconds

    @contextlib.contextmanager
    def _waiting_for_sandbox(self) -> Iterator[None]:
        """Add the wall time of the ``with`` block to :attr:`sandbox_seconds` (once, however
        many sandbox runs it waits for concurrently)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self._sandbox_seconds += time.perf_counter() - started


# ---------------------------------------------------------------------------------- team play
def check_team_options(config: Any) -> None:
    """Validate the options every Stronger-MAS config has: ``agents``, ``reward_mode`` and
    ``max_turns`` (a ``ValueError`` naming the field)."""
    if config.agents not in AGENT_MODES:
        raise ValueError(f"agents must be one of {AGENT_MODES}, got {config.agents!r}")
    if config.reward_mode not in REWARD_MODES:
        raise ValueError(
            f"reward_mode must be one of {REWARD_MODES}, got {config.reward_mode!r}"
        )
    if config.max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {config.max_turns}")
    if config.alpha < 0:
        raise ValueError(
            f"alpha must be >= 0 (a negative team weight pays failing), got {config.alpha}"
        )


def wrong_sign_holes(
    weights: Any, *, gains: tuple[str, ...] = (), costs: tuple[str, ...] = ()
) -> list[str]:
    """Why ``weights`` (a dataclass of reward weights) pay a play other than solving: a field
    named in ``gains`` (paid for progress, a correct answer, a solved task) that is negative,
    or one named in ``costs`` (charged for a move, a submission, a malformed reply, a penalty
    given as a positive amount is listed in ``gains``) that is positive. A negative gain pays
    failing; a positive cost pays every extra move or malformed reply, so a long plan or a
    stall farms it. ``[]`` when every sign is right."""
    holes = []
    for name in gains:
        value = getattr(weights, name)
        if value < 0:
            holes.append(
                f"{type(weights).__name__}.{name}={value:g} is negative: it pays failing "
                "(must be >= 0)"
            )
    for name in costs:
        value = getattr(weights, name)
        if value > 0:
            holes.append(
                f"{type(weights).__name__}.{name}={value:g} is positive: it pays every move, "
                "submission or malformed reply, so a long plan or a stall farms it (must be <= 0)"
            )
    return holes


def check_reward_holes(config: Any, holes: list[str]) -> None:
    """Refuse ``holes`` (reasons a configuration lets a play other than solving earn more)
    unless ``config.allow_reward_holes``; the ``ValueError`` names every hole."""
    if holes and not config.allow_reward_holes:
        raise ValueError(
            "these options open a reward hole (a play other than solving earns more): "
            + "; ".join(holes)
            + ". Set allow_reward_holes=True to use them anyway (docs/papers.md, \"Options "
            "that open a reward hole\")"
        )


def check_turn_rewards(config: Any) -> None:
    """Validate ``turn_rewards`` (a ``ValueError`` naming the field); ``"paper"`` in a
    multi-turn team episode is refused unless ``allow_reward_holes=True``."""
    if config.turn_rewards not in TURN_REWARDS:
        raise ValueError(
            f"turn_rewards must be one of {TURN_REWARDS}, got {config.turn_rewards!r}"
        )
    if (
        config.turn_rewards == "paper"
        and config.agents == "multi"
        and config.max_turns > 1
        and not config.allow_reward_holes
    ):
        raise ValueError(
            "turn_rewards='paper' pays every turn its absolute reward, and the episode ends only "
            "when the agents agree: a team that stays in disagreement on purpose is paid the "
            "same achievement again each turn (Reasoner-Tool: the reasoner earns 8.0 over 4 "
            "turns against 2.0 for agreeing at once; Coder-Tester: the team 14.9 against 4.0 "
            "when the tester adds one wrong test), so stalling earns more than solving; set "
            "allow_reward_holes=True to use it anyway (see docs/papers.md)"
        )


def reward_level(config: Any, team: float, local: float) -> tuple[float, float]:
    """``(alpha·team, local)``: an action's reward level in Stronger-MAS's
    ``r = alpha·r_team + r_local``; with ``reward_mode="outcome"`` the local term is 0."""
    return config.alpha * team, (local if config.reward_mode == "dense" else 0.0)


def level_reward_bounds(config: Any, weights: Any) -> tuple[float, float]:
    """Bounds of one action's reward in an environment paid ``alpha·r_team + r_local`` with a
    team term in [0, 1] and a local term that is a weighted checklist of ``weights`` (a
    dataclass; dropped in outcome mode): the level's hull, then :func:`turn_reward_bounds`."""
    local = unit_weights(dataclasses.astuple(weights)) if config.reward_mode == "dense" else (0.0, 0.0)
    return turn_reward_bounds(config, summed(scaled((0.0, 1.0), config.alpha), local))


def turn_reward_bounds(config: Any, level: tuple[float, float]) -> tuple[float, float]:
    """Bounds of one action's reward when an action's level lies in ``level``: the level
    itself with ``turn_rewards="paper"``; with ``"change"`` the change of the level since the
    agent's previous action (the level itself on its first action, from 0), so the hull of
    ``level`` and ``[low − high, high − low]`` (a turn that loses what an earlier one reached
    pays it back)."""
    if config.turn_rewards == "paper":
        return level
    low, high = level
    return (min(low, low - high), max(high, high - low))


def credit_team_and_local(
    env: TextEnv, record: ActionRecord, team: float, local: float
) -> None:
    """Credit Stronger-MAS's ``r = alpha·r_team + r_local`` to ``record`` as its ``"team"``
    and ``"local"`` components; with ``reward_mode="outcome"`` the shaped local term is dropped
    (the caller passes the outcome's ``team`` value).

    With ``turn_rewards="change"`` (the default) each component is paid as the change of its
    level since the same agent's previous action in the episode (``env._reward_levels``, which
    the environment empties at reset): a potential difference (Ng et al., 1999), so an agent's
    return is the level of its last action however many turns it took, and a solved task is
    paid once. Within a turn's group of candidates (one state) the previous level is the same
    for all, so they rank exactly as by their levels. ``record.info["reward_level"]`` keeps the
    absolute ``alpha·team + local``. With ``turn_rewards="paper"`` each action is paid its
    level (the paper's per-turn reward).
    """
    config = env.config  # type: ignore[attr-defined]
    team_level, local_level = reward_level(config, team, local)
    record.info["reward_level"] = team_level + local_level
    if config.turn_rewards == "change":
        levels: dict[str, tuple[float, float]] = env._reward_levels  # type: ignore[attr-defined]
        previous_team, previous_local = levels.get(record.agent, (0.0, 0.0))
        levels[record.agent] = (team_level, local_level)
        team_level -= previous_team
        local_level -= previous_local
    env._credit(record, "team", team_level)
    if config.reward_mode == "dense":
        env._credit(record, "local", local_level)


def end_turn(env: TextEnv, done: bool, next_agent: str) -> str | None:
    """Count the turn just completed; end the episode when ``done`` (terminated) or when
    ``max_turns`` turns are played (truncated); else return ``next_agent`` to act."""
    env.turn += 1
    if done or env.turn >= env.config.max_turns:  # type: ignore[attr-defined]
        env._end_episode(truncated=not done)
        return None
    return next_agent
