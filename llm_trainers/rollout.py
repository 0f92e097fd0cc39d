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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from llm_envs.agents.base import ActRequest, Agent
from llm_envs.core.env import TextEnv

__all__ = ["RolloutEngine", "RolloutResult", "TrainRecord", "collect", "spawn_envs"]


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


@dataclass
class RolloutResult:
    """Records, finished episodes' metrics and timings of one rollout.

    Attributes:
        records: Training records, in sampling order.
        episodes: One dict per episode: ``success``, ``turns``, the env's metrics,
            ``reward/<agent>`` (sum of the agent's final record rewards), ``truncated``.
        envs: The environment instances at the end (tree sampling replaces an instance by the
            chosen clone, so these are the ones to keep).
        generate_s: Time spent sampling.
        env_s: Time spent cloning, stepping and scoring environments.
        generated_tokens: Completion tokens sampled.
    """

    records: list[TrainRecord]
    episodes: list[dict[str, float]]
    envs: list[TextEnv]
    generate_s: float = 0.0
    env_s: float = 0.0
    generated_tokens: int = 0


def collect(
    envs: Sequence[TextEnv],
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
) -> RolloutResult:
    """Play one episode in each environment and return its training records.

    Args:
        envs: Environment instances (reset here with ``seeds``).
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
            and clone steps with its own state and RNG.
        opponents: Agent id → a fixed :class:`~llm_envs.agents.Agent` (a random or reference
            agent, a frozen model) that plays that seat. Its moves are played on the environment
            itself (never on tree candidates' clones) and leave no training record.

    Returns:
        A :class:`RolloutResult`.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not tree and k != 1:
        raise ValueError("flat sampling draws one action per decision: use k=1 or tree=True")
    lookup = policy_of if callable(policy_of) else (lambda a, m=dict(policy_of): m[a])
    envs = list(envs)
    t_env = time.perf_counter()
    for env, seed in zip(envs, seeds):
        env.reset(seed=seed, options=dict(reset_options or {}))
    env_s = time.perf_counter() - t_env
    generate_s = 0.0
    generated = 0
    records: list[TrainRecord] = []
    # flat mode: (slot, record index) -> position in ``records``; rewards are filled in at the end
    pending_rewards: dict[tuple[int, int], int] = {}
    decisions = [0] * len(envs)
    cut = [False] * len(envs)
    active = [i for i, e in enumerate(envs) if not e.episode_over]
    opponents = dict(opponents or {})

    while active:
        if opponents:
            env_s += _play_opponents(envs, active, opponents, decisions, cut, max_decisions)
            active = [i for i in active if not envs[i].episode_over and not cut[i]]
            if not active:
                break
        requests, meta = [], []
        for i in active:
            env = envs[i]
            agent = env.agent_selection
            policy = lookup(agent)
            obs = env.observe(agent)
            prompt = engine.encode(policy, obs)
            requests.append((policy, prompt))
            meta.append((i, agent, policy, prompt))
        t0 = time.perf_counter()
        outputs = engine.generate_multi(requests, n=k)
        generate_s += time.perf_counter() - t0

        t0 = time.perf_counter()
        # Play every sampled action of this wave (on clones in tree mode), possibly in threads.
        jobs: list[tuple[TextEnv, str]] = []
        before = [len(envs[i].records) for (i, _, _, _) in meta]
        for (i, _, _, _), gens in zip(meta, outputs):
            if tree:
                jobs += [(envs[i].clone(), g.text) for g in gens]
            else:
                jobs.append((envs[i], gens[0].text))
        _step_all(jobs, env_workers)
        cursor = 0
        for (i, agent, policy, prompt), gens, index in zip(meta, outputs, before):
            env = envs[i]
            generated += sum(len(g.token_ids) for g in gens)
            if tree:
                clones = [job[0] for job in jobs[cursor : cursor + len(gens)]]
                cursor += len(gens)
                for clone in clones:
                    if len(clone.records) <= index:
                        raise RuntimeError(f"{type(env).__name__}.step added no record for agent {agent!r}")
                scored = [clone.records[index] for clone in clones]
                scores = [r.reward for r in scored]
                best = int(np.argmax(scores))
                group = ("tree", i, index, agent, scored[0].turn)
                for c, (g, rec) in enumerate(zip(gens, scored)):
                    records.append(
                        TrainRecord(
                            policy=policy, agent=agent, role=rec.role, turn=rec.turn, group=group,
                            prompt_ids=list(prompt), completion_ids=list(g.token_ids), logprobs=list(g.logprobs),
                            reward=float(rec.reward), final_reward=None, slot=i, episode_id=rec.episode_id,
                            index=index, candidate=c, chosen=c == best, text=g.text, format_ok=rec.format_ok,
                            reward_components=dict(rec.reward_components),
                        )
                    )
                    if c == best:
                        pending_rewards[(i, index)] = len(records) - 1
                envs[i] = _promote(clones[best], env)
            else:
                g = gens[0]
                cursor += 1
                if len(env.records) <= index:
                    raise RuntimeError(f"{type(env).__name__}.step added no record for agent {agent!r}")
                rec = env.records[index]
                records.append(
                    TrainRecord(
                        policy=policy, agent=agent, role=rec.role, turn=rec.turn, group=rec.group_key,
                        prompt_ids=list(prompt), completion_ids=list(g.token_ids), logprobs=list(g.logprobs),
                        reward=float(rec.reward), final_reward=None, slot=i, episode_id=rec.episode_id,
                        index=index, text=g.text, format_ok=rec.format_ok,
                    )
                )
                pending_rewards[(i, index)] = len(records) - 1
            decisions[i] += 1
            if decisions[i] >= max_decisions and not envs[i].episode_over:
                cut[i] = True
        env_s += time.perf_counter() - t0
        active = [i for i in active if not envs[i].episode_over and not cut[i]]

    # final rewards (delayed credit included) from the environments' own records
    for (i, index), pos in pending_rewards.items():
        rec = envs[i].records[index]
        records[pos].final_reward = float(rec.reward)
        if not tree:
            records[pos].reward = float(rec.reward)
            records[pos].reward_components = dict(rec.reward_components)

    episodes = []
    for i, env in enumerate(envs):
        m = dict(env.episode_metrics())
        m["truncated"] = float(cut[i])
        for agent, total in env.agent_rewards().items():
            m[f"reward/{agent}"] = float(total)
        episodes.append(m)
    return RolloutResult(records, episodes, envs, generate_s=generate_s, env_s=env_s, generated_tokens=generated)


def _play_opponents(
    envs: Sequence[TextEnv],
    active: Sequence[int],
    opponents: Mapping[str, Agent],
    decisions: list[int],
    cut: list[bool],
    max_decisions: int,
) -> float:
    """Let fixed opponents move until every active environment waits for a trained agent (or is
    over); one batched ``act_batch`` per opponent object and wave. Returns the time taken."""
    t0 = time.perf_counter()
    while True:
        waiting: dict[int, list[int]] = {}
        agents_by_id: dict[int, Agent] = {}
        for i in active:
            env = envs[i]
            if env.episode_over or cut[i]:
                continue
            agent = opponents.get(env.agent_selection)
            if agent is not None:
                waiting.setdefault(id(agent), []).append(i)
                agents_by_id[id(agent)] = agent
        if not waiting:
            return time.perf_counter() - t0
        for key, slots in waiting.items():
            requests = [ActRequest(envs[i].observe(envs[i].agent_selection), envs[i].agent_selection, envs[i])
                        for i in slots]
            outputs = agents_by_id[key].act_batch(requests)
            for i, output in zip(slots, outputs):
                envs[i].step(output.text if isinstance(output.text, str) else "")
                decisions[i] += 1
                if decisions[i] >= max_decisions and not envs[i].episode_over:
                    cut[i] = True


def _step_all(jobs: Sequence[tuple[TextEnv, str]], workers: int) -> None:
    """``env.step(text)`` for every job; in a thread pool when ``workers > 1``."""
    if workers <= 1 or len(jobs) <= 1:
        for env, text in jobs:
            env.step(text)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda job: job[0].step(job[1]), jobs))


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
    return branch
