"""Rollouts that produce per-action training records, with AT-GRPO's tree-structured sampling.

Two modes, both token-in/token-out (the tokens trained on are exactly the tokens sampled):

**Tree sampling** (AT-GRPO, ``k > 1, tree=True``). At every decision point — environment
instance ``e``, acting agent ``i``, turn ``t`` — the policy samples ``k`` candidates from the
*same* prompt tokens. Each candidate is played on its own ``env.clone()`` and scored by the
reward its record holds right after it is played (``α·r_team + r_local`` in the AT-GRPO
environments). The ``k`` records form one group keyed by (instance, decision, agent, turn), and
the episode continues from the best candidate's clone (first maximum on ties). So every member
of a group shares the identical prompt, the next agent acts on the state the chosen action
produced, and later agents in a turn get their own ``k``-way comparison (the two bugs the
reference implementation has; docs/papers.md).

Credit that arrives after a candidate was scored (e.g. the team reward of a speaker, known only
when the listener answers) reaches only the chosen candidate's record; it is not part of the
group comparison, which must score all ``k`` members the same way. It is reported as
``final_reward`` on the chosen record.

**Flat sampling** (REINFORCE++ family, ``tree=False``): every decision samples once and is
played on the environment itself; a record's reward is read when the episode is over, so
delayed credit is included. Records are grouped by the environment's own key
``(episode_id, agent, turn)``: episodes started from the same seed (``samples_per_problem``
repeats) share it, which is what REINFORCE++-baseline's group mean needs.

**Infrastructure failures are dropped, never trained on.** When ``env.step`` raises an
:class:`~llm_envs.core.errors.InfrastructureError` (a :class:`~llm_envs.core.SandboxFailure`: the
sandbox failed under an agent's program, after its retry; a trained agent's move or a fixed
opponent's), the step has no reward, so the whole
episode of that instance is dropped from the rollout: none of its records is trained on (with
flat sampling its earlier rewards would miss the credit still to come; with tree sampling the
group would miss a member), its metrics are left out, and it is counted in
:attr:`RolloutResult.infra_failures` (the trainer logs ``rollout/infra_failed_episodes``). A
rollout in which *every* episode failed raises instead: the infrastructure is down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from llm_envs.agents.base import ActRequest, Agent, output_failure
from llm_envs.core.env import TextEnv
from llm_envs.core.errors import InfrastructureError

__all__ = [
    "EnvGroup",
    "LocalEnvGroup",
    "Move",
    "Played",
    "RolloutEngine",
    "RolloutResult",
    "ScoredRecord",
    "SlotView",
    "TrainRecord",
    "collect",
    "spawn_envs",
]


class RolloutEngine(Protocol):
    """What a rollout needs from an engine (:class:`~llm_trainers.agents.hf.HFEngine`,
    :class:`~llm_trainers.agents.vllm.VLLMEngine`)."""

    def encode(self, policy: str, observation: Mapping[str, str]) -> list[int]: ...

    def generate_multi(self, requests: Sequence[tuple[str, Sequence[int]]], n: int = 1) -> list[list[Any]]: ...


@dataclass
class TrainRecord:
    """One sampled action, ready for training.

    Attributes:
        policy: Policy that sampled it (and will be trained on it).
        agent: Environment agent id.
        role: The agent's role at that step.
        turn: The environment's turn counter.
        group: Group key (see the module docstring).
        prompt_ids: Prompt tokens the policy conditioned on.
        completion_ids: Sampled tokens.
        logprobs: Sampling-time log-probabilities of ``completion_ids``.
        reward: Training reward (tree: the score at sampling time; flat: the final reward).
        final_reward: The record's reward at the end of the episode (None for tree candidates
            that were not chosen: they have no future).
        slot: Index of the environment instance in the rollout.
        episode_id: The environment's episode id.
        index: Position of the action in its episode.
        candidate: Candidate number within the group (0 for flat sampling).
        chosen: Whether the episode continued from this candidate.
        text: The action text played.
        format_ok: The environment's format verdict.
        reward_components: Named reward parts at scoring time.
        policy_version: Version of the weights that sampled it (asynchronous training: the
            number of updates its policy had received; None in the synchronous loop, where
            it is always the current one).
    """

    policy: str
    agent: str
    role: str
    turn: int
    group: Hashable
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    reward: float
    final_reward: float | None
    slot: int
    episode_id: str
    index: int
    candidate: int = 0
    chosen: bool = True
    text: str = ""
    format_ok: bool = True
    reward_components: dict[str, float] = field(default_factory=dict)
    policy_version: int | None = None


@dataclass
class RolloutResult:
    """Records, finished episodes' metrics and timings of one rollout.

    Attributes:
        records: Training records, in sampling order.
        episodes: One dict per episode: ``success``, ``turns``, the env's metrics,
            ``reward/<agent>`` (sum of the agent's final record rewards), ``truncated``.
        envs: The environment instances at the end (tree sampling replaces an instance by the
            chosen clone, so these are the ones to keep), or the :class:`EnvGroup` that holds
            them when they live elsewhere.
        generate_s: Time spent sampling.
        env_s: Time spent cloning, stepping and scoring environments.
        generated_tokens: Completion tokens sampled.
        infra_failures: One entry per episode dropped because an infrastructure failure kept a
            step from being judged (``slot``, ``agent``, ``kind``, ``message``); its records
            and metrics are not in ``records`` / ``episodes``.
    """

    records: list[TrainRecord]
    episodes: list[dict[str, float]]
    envs: Any
    generate_s: float = 0.0
    env_s: float = 0.0
    generated_tokens: int = 0
    infra_failures: list[dict[str, Any]] = field(default_factory=list)


def collect(
    envs: Sequence[TextEnv] | EnvGroup,
    seeds: Sequence[int | None],
    engine: RolloutEngine,
    policy_of: Mapping[str, str] | Callable[[str], str],
    *,
    k: int = 1,
    tree: bool = False,
    max_decisions: int = 256,
    reset_options: Mapping[str, Any] | None = None,
    env_workers: int = 1,
    opponents: Mapping[str, Agent] | None = None,
    batch_grading: bool = True,
) -> RolloutResult:
    """Play one episode in each environment and return its training records.

    Args:
        envs: Environment instances (reset here with ``seeds``), or an :class:`EnvGroup` that
            holds them elsewhere (e.g. in Ray actors: :mod:`llm_trainers.distributed`). The
            records do not depend on where the instances live.
        seeds: One reset seed per instance.
        engine: Sampler (prompts and completions are token ids).
        policy_of: Agent id → policy name.
        k: Candidates per decision (tree sampling) — ``k = 1`` with ``tree=False`` for flat.
        tree: AT-GRPO tree-structured sampling (requires ``k ≥ 1``; ``k = 1`` degenerates to
            flat sampling with immediate rewards).
        max_decisions: Safety cap on actions per episode; a longer episode is cut (and
            reported as ``truncated``).
        reset_options: ``options`` passed to every ``reset``.
        env_workers: Threads that step environments (and tree candidates) concurrently — worth
            it when a step runs code in a sandbox. Results do not depend on it: every instance
            and clone steps with its own state and RNG. (An :class:`EnvGroup` brings its own.)
        opponents: Agent id → a fixed :class:`~llm_envs.agents.Agent` (a random or reference
            agent, a frozen model) that plays that seat. Its moves are played on the environment
            itself (never on tree candidates' clones) and leave no training record.
        batch_grading: Grade the programs of each wave's steps together on the sandbox pool
            (:class:`LocalEnvGroup`); ``False`` grades each step's programs as it is played.
            Rewards do not depend on it. (An :class:`EnvGroup` brings its own.)

    Returns:
        A :class:`RolloutResult`.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not tree and k != 1:
        raise ValueError("flat sampling draws one action per decision: use k=1 or tree=True")
    lookup = policy_of if callable(policy_of) else (lambda a, m=dict(policy_of): m[a])
    group = envs if isinstance(envs, EnvGroup) else LocalEnvGroup(list(envs), env_workers=env_workers,
                                                                       batch_grading=batch_grading)
    t_env = time.perf_counter()
    views = group.reset(list(seeds), dict(reset_options or {}))
    env_s = time.perf_counter() - t_env
    generate_s = 0.0
    generated = 0
    records: list[TrainRecord] = []
    # (slot, record index) -> the training record of the action the episode kept; its final
    # reward (delayed credit included) is read when the episodes are over
    pending_rewards: dict[tuple[int, int], TrainRecord] = {}
    decisions = [0] * len(views)
    cut = [False] * len(views)
    failed: dict[int, dict[str, Any]] = {}  # slot -> the infrastructure failure that dropped it
    active = [i for i, v in enumerate(views) if not v.over]
    opponents = dict(opponents or {})
    if opponents and not isinstance(group, LocalEnvGroup):
        raise ValueError(f"fixed opponents need the environments in this process, not a {type(group).__name__}")

    while active:
        if opponents:
            t0 = time.perf_counter()
            for slot, view in group.play_opponents(active, opponents, decisions, cut, max_decisions, failed).items():
                views[slot] = view
            env_s += time.perf_counter() - t0
            active = [i for i in active if not views[i].over and not cut[i] and i not in failed]
            if not active:
                break
        requests, meta = [], []
        for i in active:
            agent, obs = views[i].agent, views[i].observation
            policy = lookup(agent)
            prompt = engine.encode(policy, obs)
            requests.append((policy, prompt))
            meta.append((i, agent, policy, prompt))
        t0 = time.perf_counter()
        outputs = engine.generate_multi(requests, n=k)
        generate_s += time.perf_counter() - t0

        t0 = time.perf_counter()
        # Play every sampled action of this wave (on clones in tree mode) where the envs live.
        moves = [Move(i, agent, [g.text for g in gens], tree) for (i, agent, _, _), gens in zip(meta, outputs)]
        played = group.play(moves)
        for (i, agent, policy, prompt), gens, result in zip(meta, outputs, played):
            generated += sum(len(g.token_ids) for g in gens)
            if result.failure is not None:  # no reward exists for this step: drop the episode
                failed[i] = {"slot": i, "agent": agent, **result.failure}
                views[i] = result.view
                continue
            if tree:
                group_key = ("tree", i, result.index, agent, result.scored[0].turn)
                for c, (g, rec) in enumerate(zip(gens, result.scored)):
                    records.append(_train_record(policy, agent, rec, group_key, prompt, g, i, result.index, c,
                                                 chosen=c == result.best))
                    if c == result.best:
                        pending_rewards[(i, result.index)] = records[-1]
            else:
                rec = result.scored[0]
                records.append(_train_record(policy, agent, rec, rec.group_key, prompt, gens[0], i, result.index, 0,
                                             chosen=True, with_components=False))
                pending_rewards[(i, result.index)] = records[-1]
            views[i] = result.view
            decisions[i] += 1
            if decisions[i] >= max_decisions and not views[i].over:
                cut[i] = True
        env_s += time.perf_counter() - t0
        active = [i for i in active if not views[i].over and not cut[i] and i not in failed]

    if failed and len(failed) == len(views):
        first = next(iter(failed.values()))
        raise InfrastructureError(
            f"every episode of the rollout ({len(views)}) was stopped by an infrastructure failure, "
            f"e.g. {first['kind']}: {first['message']}; nothing to train on"
        )
    # final rewards (delayed credit included) from the environments' own records
    records = [r for r in records if r.slot not in failed]
    pending_rewards = {key: rec for key, rec in pending_rewards.items() if key[0] not in failed}
    t0 = time.perf_counter()
    finals, episodes = group.finish(sorted(pending_rewards))
    env_s += time.perf_counter() - t0
    for key, kept in pending_rewards.items():
        reward, components = finals[key]
        kept.final_reward = reward
        if not tree:
            kept.reward = reward
            kept.reward_components = dict(components)
    for i, m in enumerate(episodes):
        m["truncated"] = float(cut[i])
    episodes = [m for i, m in enumerate(episodes) if i not in failed]
    return RolloutResult(records, episodes, group.instances(), generate_s=generate_s, env_s=env_s,
                         generated_tokens=generated, infra_failures=[failed[i] for i in sorted(failed)])


def _train_record(policy: str, agent: str, rec: ScoredRecord, group: Hashable, prompt: Sequence[int], g: Any,
                  slot: int, index: int, candidate: int, *, chosen: bool, with_components: bool = True) -> TrainRecord:
    return TrainRecord(
        policy=policy, agent=agent, role=rec.role, turn=rec.turn, group=group, prompt_ids=list(prompt),
        completion_ids=list(g.token_ids), logprobs=list(g.logprobs), reward=rec.reward, final_reward=None, slot=slot,
        episode_id=rec.episode_id, index=index, candidate=candidate, chosen=chosen, text=g.text,
        format_ok=rec.format_ok, reward_components=dict(rec.reward_components) if with_components else {},
    )


# ---------------------------------------------------------------------------- the environment side
@dataclass
class SlotView:
    """What a rollout sees of one environment instance between decisions.

    Attributes:
        over: The episode is over.
        agent: The agent to act next (None when over).
        observation: Its observation (None when over).
    """

    over: bool
    agent: str | None = None
    observation: dict[str, Any] | None = None


@dataclass
class Move:
    """The sampled actions for one instance's pending decision.

    Attributes:
        slot: Instance index.
        agent: The acting agent (checked against the instance's own ``agent_selection``).
        texts: One action text per candidate.
        tree: Play each candidate on its own clone and continue from the best; else play
            ``texts[0]`` on the instance itself.
    """

    slot: int
    agent: str
    texts: list[str]
    tree: bool


@dataclass
class ScoredRecord:
    """The parts of an environment record a training record needs (read right after the step)."""

    role: str
    turn: int
    reward: float
    episode_id: str
    format_ok: bool
    reward_components: dict[str, float]
    group_key: Hashable


@dataclass
class Played:
    """The outcome of one :class:`Move`.

    Attributes:
        index: Position of the action's record in the episode.
        scored: One :class:`ScoredRecord` per candidate (one in flat mode).
        best: The candidate the episode continues from (first maximum on ties).
        view: The instance after the move.
        failure: Set when a step (of any candidate) raised an
            :class:`~llm_envs.core.errors.InfrastructureError`: ``{"kind", "message"}``. The
            move has no reward (``scored`` is empty), and the instance's episode is dropped.
    """

    index: int
    scored: list[ScoredRecord]
    best: int
    view: SlotView
    failure: dict[str, str] | None = None


class EnvGroup:
    """The environment side of a rollout: instances at slots ``0..n-1``, reset, stepped, cloned
    and scored wherever they live. :func:`collect` drives one; the sampling stays with it.

    :class:`LocalEnvGroup` holds the instances in this process; the Ray layout
    (:class:`llm_trainers.distributed.env_workers.RayEnvGroup`) spreads them over actors, each
    holding a slice. Both return the same values for the same instances and moves.
    """

    def reset(self, seeds: Sequence[int | None], options: Mapping[str, Any]) -> list[SlotView]:
        """Reset instance ``i`` with ``seeds[i]`` (one seed per instance)."""
        raise NotImplementedError

    def play(self, moves: Sequence[Move]) -> list[Played]:
        """Play each move (moves name distinct slots); results in the order of ``moves``."""
        raise NotImplementedError

    def finish(self, kept: Sequence[tuple[int, int]]) -> tuple[dict[tuple[int, int], tuple[float, dict[str, float]]],
                                                              list[dict[str, float]]]:
        """Final ``(reward, reward components)`` of the records ``(slot, index)`` the episodes
        kept, and one metrics dict per instance (``episode_metrics`` plus ``reward/<agent>``)."""
        raise NotImplementedError

    def instances(self) -> Any:
        """What the caller keeps for the next rollout (the instances, or this group)."""
        return self


class LocalEnvGroup(EnvGroup):
    """Environment instances in this process.

    Args:
        envs: The instances (tree sampling replaces an instance by its chosen clone).
        env_workers: Threads that step instances and candidates concurrently.
        batch_grading: Grade the programs of a wave's steps together before playing them
            (:func:`llm_envs.envs.grading.grade_ahead`: one batch on the sandbox's pool of
            workers instead of each step's programs in turn); the rewards are the same.
        slots: Global slot number of each instance (default ``0..n-1``); a worker holding a
            slice of a larger rollout is addressed by the global numbers.
    """

    def __init__(self, envs: list[TextEnv], env_workers: int = 1, slots: Sequence[int] | None = None,
                 batch_grading: bool = True) -> None:
        self.envs = envs
        self.env_workers = env_workers
        self.batch_grading = batch_grading
        self.slots = list(slots) if slots is not None else list(range(len(envs)))
        if len(self.slots) != len(envs):
            raise ValueError(f"{len(envs)} instances for {len(self.slots)} slots")
        self._local = {slot: n for n, slot in enumerate(self.slots)}

    def _env(self, slot: int) -> TextEnv:
        return self.envs[self._local[slot]]

    def _view(self, slot: int) -> SlotView:
        env = self._env(slot)
        if env.episode_over:
            return SlotView(True)
        agent = env.agent_selection
        return SlotView(False, agent, env.observe(agent))

    def reset(self, seeds: Sequence[int | None], options: Mapping[str, Any]) -> list[SlotView]:
        if len(seeds) != len(self.envs):
            raise ValueError(f"{len(seeds)} seeds for {len(self.envs)} instances")
        for env, seed in zip(self.envs, seeds):
            env.reset(seed=seed, options=dict(options))
        return [self._view(slot) for slot in self.slots]

    def play(self, moves: Sequence[Move]) -> list[Played]:
        jobs: list[tuple[TextEnv, str]] = []
        before = []
        for move in moves:
            env = self._env(move.slot)
            if env.agent_selection != move.agent:
                raise RuntimeError(f"slot {move.slot}: {move.agent!r} moved but {env.agent_selection!r} is to act")
            before.append(len(env.records))
            if move.tree:
                jobs += [(env.clone(), text) for text in move.texts]
            else:
                jobs.append((env, move.texts[0]))
        # An instance that adds to a shared pool at its episode's end (the Proposer–Solver–
        # Judge's questions) commits below, in slot order, not inside its step: from worker
        # threads the pool took them in the order the steps finished, so the next step's draws
        # depended on thread timing.
        deferred = {id(env) for env, _ in jobs if getattr(env, "commits_to_pool", False)}
        for env, _ in jobs:
            if id(env) in deferred:
                env.commits_to_pool = False
        try:
            if self.batch_grading:
                from llm_envs.envs import grading

                with grading.ahead(jobs):  # the steps are played while their programs are graded
                    failures = _step_all(jobs, self.env_workers)
            else:
                failures = _step_all(jobs, self.env_workers)
        finally:
            for env, _ in jobs:
                if id(env) in deferred:
                    env.commits_to_pool = True
        out: list[Played] = []
        cursor = 0
        for move, index in zip(moves, before):
            env = self._env(move.slot)
            width = len(move.texts) if move.tree else 1
            stepped = [job[0] for job in jobs[cursor : cursor + width]]
            failure = next((f for f in failures[cursor : cursor + width] if f is not None), None)
            cursor += width
            if failure is not None:  # this step cannot be judged: the episode is dropped
                out.append(Played(index, [], 0, SlotView(True), {"kind": failure.kind, "message": str(failure)}))
                continue
            for e in stepped:
                if len(e.records) <= index:
                    raise RuntimeError(f"{type(env).__name__}.step added no record for agent {move.agent!r}")
            scored = [_scored(e.records[index]) for e in stepped]
            best = int(np.argmax([s.reward for s in scored])) if move.tree else 0
            if move.tree:
                self.envs[self._local[move.slot]] = _promote(stepped[best], env)
            elif id(env) in deferred and env.episode_over:
                env.commit_pool_additions()
            out.append(Played(index, scored, best, self._view(move.slot)))
        return out

    def finish(self, kept: Sequence[tuple[int, int]]) -> tuple[dict[tuple[int, int], tuple[float, dict[str, float]]],
                                                              list[dict[str, float]]]:
        finals = {}
        for slot, index in kept:
            rec = self._env(slot).records[index]
            finals[(slot, index)] = (float(rec.reward), dict(rec.reward_components))
        episodes = []
        for env in self.envs:
            m = {k: float(v) for k, v in env.episode_metrics().items()}
            for agent, total in env.agent_rewards().items():
                m[f"reward/{agent}"] = float(total)
            episodes.append(m)
        return finals, episodes

    def play_opponents(self, slots: Sequence[int], opponents: Mapping[str, Agent], decisions: list[int],
                       cut: list[bool], max_decisions: int,
                       failed: dict[int, dict[str, Any]] | None = None) -> dict[int, SlotView]:
        """Let fixed opponents move until every instance in ``slots`` waits for a trained agent (or
        is over or cut); one batched ``act_batch`` per opponent object and wave. Counts each move
        in ``decisions[slot]`` and sets ``cut[slot]`` at ``max_decisions``. Returns the new view of
        every slot where an opponent moved. An opponent that produces no action (an
        :class:`~llm_envs.agents.base.AgentError`) stops the rollout: its seat is never played
        as an empty move. An :class:`InfrastructureError` while an opponent's move is judged (its
        program's sandbox failed) drops that instance's episode, as for a trained agent's move:
        the failure is entered in ``failed[slot]`` and the slot moves no further."""
        failed = {} if failed is None else failed
        moved: set[int] = set()
        while True:
            waiting: dict[int, list[int]] = {}
            agents_by_id: dict[int, Agent] = {}
            for slot in slots:
                env = self._env(slot)
                if env.episode_over or cut[slot] or slot in failed:
                    continue
                agent = opponents.get(env.agent_selection)
                if agent is not None:
                    waiting.setdefault(id(agent), []).append(slot)
                    agents_by_id[id(agent)] = agent
            if not waiting:
                return {slot: self._view(slot) for slot in moved}
            for key, group_slots in waiting.items():
                envs = [self._env(slot) for slot in group_slots]
                requests = [ActRequest(env.observe(env.agent_selection), env.agent_selection, env) for env in envs]
                outputs = agents_by_id[key].act_batch(requests)
                for slot, env, output in zip(group_slots, envs, outputs):
                    failure = output_failure(output)
                    if failure is not None:
                        raise failure
                    agent = env.agent_selection
                    try:
                        env.step(output.text)
                    except InfrastructureError as exc:  # no reward for this step: drop the episode
                        failed[slot] = {"slot": slot, "agent": agent, "kind": exc.kind, "message": str(exc)}
                        moved.add(slot)
                        continue
                    moved.add(slot)
                    decisions[slot] += 1
                    if decisions[slot] >= max_decisions and not env.episode_over:
                        cut[slot] = True

    def instances(self) -> list[TextEnv]:
        return self.envs


def _scored(rec: Any) -> ScoredRecord:
    return ScoredRecord(rec.role, rec.turn, float(rec.reward), rec.episode_id, rec.format_ok,
                        dict(rec.reward_components), rec.group_key)


def _step_all(jobs: Sequence[tuple[TextEnv, str]], workers: int) -> list[InfrastructureError | None]:
    """``env.step(text)`` for every job (in a thread pool when ``workers > 1``); per job, the
    :class:`InfrastructureError` its step raised, or ``None``. Any other exception is a bug
    and propagates."""

    def step(job: tuple[TextEnv, str]) -> InfrastructureError | None:
        try:
            job[0].step(job[1])
        except InfrastructureError as exc:
            return exc
        return None

    if workers <= 1 or len(jobs) <= 1:
        return [step(job) for job in jobs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(step, jobs))


def spawn_envs(first: TextEnv, n: int) -> list[TextEnv]:
    """``n`` instances: ``first`` and ``n − 1`` clones of it, which share its heavy resources
    (sandbox, task source, question pool) as the runner's instances do. A clone that would not
    commit to a shared pool by default (a tree branch) is made a full instance."""
    envs = [first]
    for _ in range(n - 1):
        envs.append(_promote(first.clone(), first))
    return envs


def _promote(branch: TextEnv, original: TextEnv) -> TextEnv:
    """Give a tree branch that continues the episode the standing of the instance it replaces.

    Environments with cross-episode shared state mark branches as non-committing (the
    Proposer–Solver–Judge pool: ``commits_to_pool``); the chosen branch *is* the episode now.
    """
    if hasattr(original, "commits_to_pool") and hasattr(branch, "commits_to_pool"):
        branch.commits_to_pool = original.commits_to_pool
        # The step that ended the episode ran on the branch, which did not commit then: the
        # chosen one commits now, as the episode would have (tree sampling grew no pool).
        if branch.commits_to_pool and branch.episode_over:
            branch.commit_pool_additions()
    return branch
