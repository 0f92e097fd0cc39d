"""Play the exploit catalogue through an environment's grader and compare with plain wrong answers.

For each episode (seed), each attacked agent (from the environment's
:class:`~llm_envs.audit.surface.AuditSurface`) and each exploit of its role, the runner:

1. resets the environment and steps the other agents with their reference actions until it is
   the attacked agent's turn;
2. submits the exploit's own plain wrong counterpart (:class:`~llm_envs.audit.exploits.Built`)
   there, then does the same again from a fresh reset with the exploit (each on an episode of
   its own: clones that shared a grader's cache passed one verdict to the other);
3. plays each episode to the end with reference actions for every later step, and reads the
   reward credited to the attacked action (its own record's total, delayed credit included).

Verdict: ``held`` when the exploit earned no more than the plain wrong answer (within 1e-9),
``paid`` when it earned more, when its step raised an infrastructure failure that the plain
wrong step did not (a run that makes its own sandbox fail is never scored: failure on demand),
or when either episode did not end; ``n/a`` when the exploit does not apply to that target.

Each attacked agent on each seed also gets one ``right-beats-wrong`` row
(:func:`right_beats_wrong`): the right answer must earn more than every plain wrong answer, an
empty reply and a near miss, since a grader that pays a wrong answer as much does not pay the
task.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from llm_envs.audit.exploits import CATALOGUE, Exploit, Target
from llm_envs.audit.surface import AuditSurface, default_surface
from llm_envs.core.errors import InfrastructureError

#: Rewards closer than this are equal.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Outcome:
    """One exploit played once.

    Attributes:
        exploit: The catalogue name.
        family: Its family.
        agent: The attacked agent.
        seed: The episode's seed.
        verdict: ``"held"``, ``"paid"`` or ``"n/a"``.
        exploit_reward: Reward credited to the exploit's action (``None``: not scored).
        plain_wrong_reward: Reward credited to the plain wrong action (on a
            ``right-beats-wrong`` row: the best plain wrong answer's).
        detail: Why (an infrastructure failure's message, what the record says).
        right_reward: Reward credited to the right answer (``right-beats-wrong`` rows).
    """

    exploit: str
    family: str
    agent: str
    seed: int
    verdict: str
    exploit_reward: float | None = None
    plain_wrong_reward: float | None = None
    detail: str = ""
    right_reward: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The name and family of the row that compares the right answer with the plain wrong ones.
RIGHT_BEATS_WRONG = "right-beats-wrong"
SIGNAL_FAMILY = "signal"

#: Steps after which an episode that has not ended never ends.
MAX_STEPS = 10_000


class AuditError(ValueError):
    """The environment cannot be audited (no surface, no reference actions)."""


# ---------------------------------------------------------------------------------------------
# the oracle: a host Unix socket that hands out the right program


@contextlib.contextmanager
def oracle_socket(secret_for: Callable[[], str]) -> Iterator[str]:
    """A host Unix socket (mode 0777) that sends ``secret_for()`` to each client; its path.

    It lives under ``/run`` where this process may write there (where host services keep their
    sockets), else in a temporary directory. A sandbox must not reach it: a program that does
    reads what the grader knows.
    """
    base = "/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()
    directory = tempfile.mkdtemp(prefix="llm-envs-audit-", dir=base)
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "oracle.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            with client:
                with contextlib.suppress(OSError):
                    client.sendall(secret_for().encode())

    thread = threading.Thread(target=serve, daemon=True, name="audit-oracle")
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join(timeout=2)
        server.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
            os.rmdir(directory)


# ---------------------------------------------------------------------------------------------
# playing


def _surface(env: Any) -> AuditSurface:
    surface = default_surface(env)
    if surface is None:
        raise AuditError(
            f"{type(env).__name__} exposes no grader to audit: implement audit_surface() "
            "(docs/audit.md) or audit an environment whose agents write code or answers"
        )
    return surface


class Unended(Exception):
    """The episode did not end within :data:`MAX_STEPS` steps: it never ends, and an episode
    that never ends pays without bound (a verdict of ``paid``, never a silent pass)."""


def _reference_action(env: Any, agent: str) -> str:
    try:
        return env.reference_action(agent)
    except NotImplementedError as error:
        raise AuditError(
            f"{type(env).__name__} has no reference action for {agent!r} ({error}): the audit steps the "
            "other agents and plays each episode to its end with reference actions"
        ) from error


def _advance_to(env: Any, agent: str) -> bool:
    """Step the other agents with reference actions until ``agent`` is to act (False if the
    episode ends first; :class:`Unended` if it goes on for :data:`MAX_STEPS` steps)."""
    for _ in range(MAX_STEPS):
        current = env.agent_selection
        if env.terminations.get(current) or env.truncations.get(current):
            if all(env.terminations.get(a) or env.truncations.get(a) for a in env.agents):
                return False
            env.step(None)
            continue
        if current == agent:
            return True
        env.step(_reference_action(env, current))
    raise Unended(f"{agent!r} did not get a turn within {MAX_STEPS} steps of reference actions")


def _finish(env: Any) -> None:
    """Play the episode to its end with reference actions (:class:`Unended` if it does not
    end within :data:`MAX_STEPS` steps)."""
    for _ in range(MAX_STEPS):
        if not env.agents:
            return
        current = env.agent_selection
        if env.terminations.get(current) or env.truncations.get(current):
            env.step(None)
            continue
        env.step(_reference_action(env, current))
    raise Unended(f"the episode did not end within {MAX_STEPS} steps of reference actions")


def _reward_of_step(env: Any, agent: str, action: str) -> tuple[float | None, str]:
    """Step ``action`` for ``agent``, play on, and return the attacked record's total reward
    (``None`` and the message on an infrastructure failure; :class:`Unended` propagates)."""
    records_before = len(getattr(env, "records", []))
    try:
        env.step(action)
    except InfrastructureError as error:
        return None, f"{type(error).__name__}: {error}"
    records = getattr(env, "records", None)
    # the attacked agent's own record (a step may first write another agent's: a checker's)
    record = next((r for r in (records or [])[records_before:] if getattr(r, "agent", agent) == agent), None)
    try:
        _finish(env)
    except InfrastructureError as error:
        return None, f"after the attacked step, {type(error).__name__}: {error}"
    if record is not None:
        info = {k: v for k, v in record.info.items() if k in ("error", "golden_passed", "golden_total", "wrong_programs", "wrong_programs_caught", "output", "correct")}
        return float(record.reward), str(info)[:300]
    return float(env._cumulative_rewards.get(agent, 0.0)), ""


def action_reward(env: Any, agent: str, action: str) -> float | None:
    """The reward ``action`` earns as ``agent``'s move at this point of ``env``'s episode: it is
    played on a clone, the clone is played to its end with reference actions, and the action's
    record total (delayed credit included) is returned. ``None`` when it cannot be scored (an
    infrastructure failure) or the episode does not end. ``env`` itself is not stepped."""
    try:
        reward, _ = _reward_of_step(env.clone(), agent, action)
    except Unended:
        return None
    return reward


def _at_turn(env: Any, agent: str, seed: int, options: dict[str, Any] | None) -> bool:
    """Reset ``env`` to the episode of ``reset(seed, options)`` and step it to ``agent``'s turn
    (False if the agent never acts; :class:`Unended` if the episode never gets there)."""
    env.reset(seed=seed, options=options)
    return _advance_to(env, agent)


def play_exploit(
    env: Any,
    agent: str,
    exploit: Exploit,
    seed: int,
    target: Target | None = None,
    options: dict[str, Any] | None = None,
) -> Outcome:
    """Play ``exploit`` as ``agent`` in the episode of ``reset(seed, options)`` (see the module
    docstring); ``target`` replaces what the environment's surface says (e.g. to add the
    oracle socket).

    The plain wrong answer and the exploit are each played on their own reset of the episode,
    not on two clones: a grader's cache shared between clones handed the exploit the plain
    wrong answer's verdict."""
    def outcome(verdict: str, reward: float | None = None, plain: float | None = None, detail: str = "") -> Outcome:
        return Outcome(exploit.name, exploit.family, agent, seed, verdict, reward, plain, detail)

    try:
        if not _at_turn(env, agent, seed, options):
            return outcome("n/a", detail="the agent never acts")
    except Unended as error:
        return outcome("paid", detail=f"{error}: it never ends")
    surface = _surface(env)
    target = target or surface.target(agent)
    built = exploit.build(target)
    if built is None:
        return outcome("n/a", detail="does not apply to this problem")
    try:
        plain, plain_detail = _reward_of_step(env, agent, surface.action(agent, built.plain_wrong))
    except Unended as error:
        return outcome("paid", detail=f"after the plain wrong answer, {error}")
    if plain is None:
        return outcome("n/a", detail=f"the plain wrong answer was not scored: {plain_detail}")
    try:
        _at_turn(env, agent, seed, options)
        reward, detail = _reward_of_step(env, agent, surface.action(agent, built.exploit))
    except Unended as error:
        return outcome("paid", None, plain, f"after the exploit, {error}")
    if reward is None:
        return outcome("paid", None, plain, f"unscored on demand: {detail}")
    return outcome("paid" if reward > plain + TOLERANCE else "held", reward, plain, detail)


def audit_env(
    env: Any,
    *,
    episodes: int = 1,
    seeds: Sequence[int] | None = None,
    exploits: Sequence[Exploit] = CATALOGUE,
    agents: Sequence[str] | None = None,
    options: Callable[[int], dict[str, Any] | None] | None = None,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Every exploit of the catalogue that fits a role of ``env``, over ``episodes`` seeds
    (``0 .. episodes-1`` unless ``seeds`` is given; ``options(seed)`` gives reset options),
    with a host oracle socket up."""
    env.reset(seed=0, options=options(0) if options else None)
    roles = _surface(env).roles()
    if not roles:
        raise AuditError(f"{type(env).__name__} names no agent that writes code, tests, programs or answers")
    current: dict[str, str] = {"reference": ""}
    outcomes: list[Outcome] = []
    with oracle_socket(lambda: current["reference"]) as path:
        for seed in list(seeds) if seeds is not None else range(episodes):
            for agent, role in roles.items():
                if agents is not None and agent not in agents:
                    continue
                reset_options = options(seed) if options else None
                played: list[Outcome] = []
                for exploit in exploits:
                    if exploit.role != role:
                        continue
                    env.reset(seed=seed, options=reset_options)
                    try:
                        if not _advance_to(env, agent):
                            continue
                    except Unended as error:
                        played.append(Outcome(exploit.name, exploit.family, agent, seed, "paid", detail=f"{error}: it never ends"))
                        continue
                    target = replace(_surface(env).target(agent), oracle_socket=path)
                    current["reference"] = target.reference or ""
                    played.append(play_exploit(env, agent, exploit, seed, target, reset_options))
                    if progress is not None:
                        progress(played[-1])
                if played:
                    played.append(right_beats_wrong(env, agent, role, seed, played, reset_options))
                    if progress is not None:
                        progress(played[-1])
                outcomes.extend(played)
    return outcomes


def _right_action(env: Any, surface: AuditSurface, agent: str, role: str) -> str | None:
    """The action that submits the right answer: the target's answer (``answer``) or reference
    program (``code``, ``program``) through the surface, else the environment's reference
    action (``tests``); ``None`` when there is none."""
    target = surface.target(agent)
    text = target.answer if role == "answer" else target.reference if role in ("code", "program") else None
    if text is not None:
        return surface.action(agent, text)
    try:
        return env.reference_action(agent)
    except NotImplementedError:
        return None


def _near_miss_answer(answer: str) -> str | None:
    """``answer`` with the last digit of its first number's integer part changed (``51`` ->
    ``52``, ``3.25`` -> ``4.25``): a wrong answer a few percent off, which a tolerant grader
    pays; ``None`` without a digit."""
    match = re.search(r"\d+", answer)
    if match is None:
        return None
    i = match.end() - 1
    return answer[:i] + str((int(answer[i]) + 1) % 10) + answer[i + 1 :]


def right_beats_wrong(env: Any, agent: str, role: str, seed: int, played: Sequence[Outcome],
                      options: dict[str, Any] | None = None) -> Outcome:
    """The ``right-beats-wrong`` row of ``agent`` on ``seed``: ``held`` when the right answer
    earns more than every wrong answer — the plain wrong answers scored in ``played`` (the
    exploits' outcomes on the same episode), an empty reply and, for an ``answer``, a near miss
    (:func:`_near_miss_answer`) — and ``paid`` when one earns as much or more, the right answer
    cannot be scored while wrong ones are, or its episode never ends. ``n/a`` when there is
    nothing to compare, or where the surface says the agent's own action does not decide its
    reward (``own_action_paid(agent)`` False: a team outcome its reference partners reach)."""

    def outcome(verdict: str, right: float | None = None, detail: str = "") -> Outcome:
        return Outcome(RIGHT_BEATS_WRONG, SIGNAL_FAMILY, agent, seed, verdict, None, best_wrong, detail, right)

    surface = _surface(env)
    wrong = [o.plain_wrong_reward for o in played if o.plain_wrong_reward is not None]
    best_wrong = max(wrong) if wrong else None
    if best_wrong is None:
        return outcome("n/a", detail="no plain wrong answer was scored")
    own = getattr(surface, "own_action_paid", None)
    if callable(own) and not own(agent):
        return outcome("n/a", detail="the agent's reward is the team's outcome, which its reference partners "
                                     "reach whatever it answers (the surface's own_action_paid)")
    try:
        if not _at_turn(env, agent, seed, options):
            return outcome("n/a", detail="the agent never acts")
        target = surface.target(agent)
        action = _right_action(env, surface, agent, role)
        if action is None:
            return outcome("n/a", detail="no right answer to compare: the target has none and the environment no reference action")
        right, detail = _reward_of_step(env, agent, action)
        if right is None:
            return outcome("paid", detail=f"the right answer was not scored ({detail}) where wrong answers are: "
                                          "the grader does not pay the task")
        others = {"an empty reply": ""}
        near = _near_miss_answer(target.answer) if role == "answer" and target.answer else None
        if near is not None:
            others[f"the near miss {near!r}"] = surface.action(agent, near)
        worst = ("a plain wrong answer", best_wrong)
        for name, wrong_action in others.items():
            _at_turn(env, agent, seed, options)
            reward, _ = _reward_of_step(env, agent, wrong_action)
            if reward is not None and reward > worst[1]:
                worst = (name, reward)
    except Unended as error:
        return outcome("paid", detail=f"{error}: it never ends")
    best_wrong = worst[1]
    if best_wrong >= right - TOLERANCE:
        return outcome("paid", right, f"{worst[0]} earned {best_wrong:.4g}, the right answer {right:.4g}: "
                                      "the grader does not pay the right answer more than a wrong one")
    return outcome("held", right)


def summarize(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """One row per (exploit, agent): held/paid counts, the worst exploit and plain rewards (on a
    ``right-beats-wrong`` row: the plain wrong and right answers' rewards where it failed)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for o in outcomes:
        row = rows.setdefault(
            (o.exploit, o.agent),
            {"exploit": o.exploit, "family": o.family, "agent": o.agent, "held": 0, "paid": 0, "n/a": 0,
             "max_exploit_reward": None, "plain_wrong_reward": None, "right_reward": None, "detail": ""},
        )
        row[o.verdict] += 1
        if o.verdict == "paid" and not row["detail"]:
            row["detail"] = o.detail
        if o.right_reward is not None and (row["right_reward"] is None or o.verdict == "paid"):
            # a right-beats-wrong row shows the rewards of the episode where it failed
            row["right_reward"], row["plain_wrong_reward"] = o.right_reward, o.plain_wrong_reward
        elif o.exploit_reward is not None and (row["max_exploit_reward"] is None or o.exploit_reward > row["max_exploit_reward"]):
            row["max_exploit_reward"] = o.exploit_reward
            row["plain_wrong_reward"] = o.plain_wrong_reward
        elif row["plain_wrong_reward"] is None:
            row["plain_wrong_reward"] = o.plain_wrong_reward
    for row in rows.values():
        row["verdict"] = "PAID" if row["paid"] else ("held" if row["held"] else "n/a")
    return list(rows.values())
