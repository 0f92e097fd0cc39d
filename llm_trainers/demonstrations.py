"""Demonstrations from the reference agents, for a supervised warm start (SFT) before RL.

Every environment has a scripted reference agent (``env.reference_action(agent)``) that solves
its episodes. :func:`iter_demonstrations` plays episodes with it and yields, for every decision
of the chosen agents (or roles), the chat messages the policy would see at that point — exactly
``llm_envs.core.to_chat_messages(env.observe(agent))``, the messages the rollout's engine puts
through the chat template — followed by the action as the assistant's message. That is the
conversational ``{"messages": [...]}`` format TRL's ``SFTTrainer`` reads (extra keys hold where
the example came from).

**Training seeds only.** Episode seeds come from :func:`demonstration_seeds`: they lie in the
trainer's training-seed range ``[TRAIN_SEED_BASE, 2·TRAIN_SEED_BASE)``, disjoint from every
evaluation seed (below ``TRAIN_SEED_BASE``), on a stream of their own (a four-entry
``SeedSequence``, while the RL steps use three entries), so a demonstration episode is never an
evaluation episode. Pass the environment's ``split: train`` where it has splits.

**Imperfect actions.** So that the warm start is not a copy of the solver, a share of the
decisions can carry another action instead of the reference one: ``random_fraction`` the
environment's ``random_action`` (well formed, mostly wrong), ``perturb_fraction`` a perturbed
reference action (:func:`perturb_action`: one digit or move letter changed, or a word dropped)
that the environment's grader pays less than the reference action (:func:`near_miss`: a
perturbation that is still right, e.g. a digit changed in the working but not in the
``\\boxed{}`` answer, is drawn again; an action with no perturbation that misses takes a
random action instead).
The episode goes on with the action the example holds, so later examples show the reference
agent recovering from it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llm_envs.core.writing import json_text

__all__ = [
    "DEMONSTRATION_STREAM",
    "demonstration_seeds",
    "iter_demonstrations",
    "near_miss",
    "perturb_action",
    "read_jsonl",
    "write_jsonl",
]

#: The second entry of a demonstration seed's ``SeedSequence`` (one stream per run seed).
DEMONSTRATION_STREAM = 0x5F7

#: The trainer's first training seed (``llm_trainers.trainer.TRAIN_SEED_BASE``, equal by test;
#: not imported, since the trainer imports this module's users).
TRAIN_SEED_BASE = 2**62


def demonstration_seeds(run_seed: int, start: int = 0) -> Iterator[int]:
    """Endless episode seeds for demonstrations: ``SeedSequence((run_seed, STREAM, 0, i))`` for
    ``i = start, start + 1, ...``, mapped into the training range (see the module docstring)."""
    i = start
    while True:
        state = np.random.SeedSequence([run_seed % 2**64, DEMONSTRATION_STREAM, 0, i]).generate_state(1, np.uint64)
        yield TRAIN_SEED_BASE + int(state[0]) % TRAIN_SEED_BASE
        i += 1


_DIGIT = re.compile(r"\d")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
#: Perturbations tried before :func:`near_miss` gives up on an action.
NEAR_MISS_TRIES = 8
_MOVE = re.compile(r"(?<![A-Za-z])[UDLR](?![A-Za-z])")


def perturb_action(action: str, rng: np.random.Generator) -> str | None:
    """A perturbation of ``action``: one digit replaced by another digit (one of the last
    ``\\boxed{}`` answer's digits where it has any: the answer is what a grader reads); else one
    single-letter move (``U D L R``) replaced by another; else one whitespace-separated word
    dropped. ``None`` when it has none of these (a single word)."""
    boxes = list(_BOXED.finditer(action))
    answer = boxes[-1] if boxes else None
    digits = [answer.start(1) + m.start() for m in _DIGIT.finditer(answer.group(1))] if answer else []
    digits = digits or [m.start() for m in _DIGIT.finditer(action)]
    if digits:
        i = int(rng.choice(digits))
        new = str((int(action[i]) + int(rng.integers(1, 10))) % 10)
        return action[:i] + new + action[i + 1 :]
    moves = [m.start() for m in _MOVE.finditer(action)]
    if moves:
        i = int(rng.choice(moves))
        new = str(rng.choice([m for m in "UDLR" if m != action[i]]))
        return action[:i] + new + action[i + 1 :]
    words = action.split(" ")
    if len(words) > 1:
        del words[int(rng.integers(len(words)))]
        return " ".join(words)
    return None


def near_miss(env: Any, agent: str, reference: str, rng: np.random.Generator,
              tries: int = NEAR_MISS_TRIES) -> str | None:
    """A :func:`perturb_action` of ``reference`` that ``env``'s grader pays less than
    ``reference`` at this point of the episode (each played on a clone to the episode's end:
    :func:`llm_envs.audit.runner.action_reward`), trying up to ``tries`` perturbations;
    ``None`` when none is a miss (or the reference action cannot be scored)."""
    from llm_envs.audit.runner import action_reward

    right = action_reward(env, agent, reference)
    if right is None:
        return None
    for _ in range(tries):
        near = perturb_action(reference, rng)
        if near is None:
            return None
        reward = action_reward(env, agent, near) if near != reference else None
        if reward is not None and reward < right - 1e-9:
            return near
    return None


#: A share of imperfect actions: one number for every recorded decision, or a mapping from agent
#: or role names to numbers (an agent's entry before its role's; a decision named in neither: 0).
Share = float | Mapping[str, float]


def share_for(share: Share, agent: str, role: str) -> float:
    """The share of ``share`` that applies to a decision of ``agent`` playing ``role``."""
    if isinstance(share, Mapping):
        return float(share.get(agent, share.get(role, 0.0)))
    return float(share)


def imperfect_share_problems(random_fraction: Share, perturb_fraction: Share) -> list[str]:
    """What is wrong with a pair of shares (empty when nothing): every share must be a number
    ≥ 0, and for every agent or role named, random + perturbed must add up to at most 1."""
    problems = []
    names = {k for share in (random_fraction, perturb_fraction) if isinstance(share, Mapping) for k in share}
    for share in (random_fraction, perturb_fraction):
        values = share.values() if isinstance(share, Mapping) else [share]
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"a share of imperfect actions must be a number, got {value!r}")
    if problems:
        return problems
    for name in sorted(names) or [""]:
        r, p = share_for(random_fraction, name, name), share_for(perturb_fraction, name, name)
        if r < 0 or p < 0 or r + p > 1:
            where = f" for {name!r}" if name else ""
            problems.append(f"random_fraction ({r}) and perturb_fraction ({p}){where} must be >= 0 "
                            "and add up to at most 1")
    return problems


def iter_demonstrations(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    episodes: int | None = None,
    agents: Sequence[str] | None = None,
    roles: Sequence[str] | None = None,
    run_seed: int = 0,
    start_episode: int = 0,
    random_fraction: Share = 0.0,
    perturb_fraction: Share = 0.0,
    max_decisions: int = 64,
    successful_only: bool = False,
) -> Iterator[dict[str, Any]]:
    """Yield demonstrations (one dict per decision of a chosen agent), episode after episode.

    Args:
        env_id: A registered environment id.
        env_kwargs: Its options (use the training split, e.g. ``{"split": "train"}``).
        episodes: Episodes to play (None: without end — a stream for the trainer).
        agents, roles: Record only these agents / these roles (None: all). The other agents
            still play (their reference actions), so the recorded agents see real states.
        run_seed: Picks the seed stream (:func:`demonstration_seeds`).
        start_episode: Index of the first episode of the stream (to resume a stream).
        random_fraction: Share of recorded decisions whose action is ``env.random_action``: a
            number, or a mapping from agent or role names to numbers (:data:`Share`; e.g.
            ``{"plan": 0.5}``: only the plan agent's demonstrations are imperfect).
        perturb_fraction: Share whose action is a :func:`near_miss` of the reference one (a
            perturbation the grader pays less; a number or such a mapping).
        max_decisions: Cap on actions per episode.
        successful_only: Skip the examples of episodes that did not end in success (applies
            when an imperfect action spoiled an episode; an episode is then played to its end
            before any of its examples is yielded).

    Each dict: ``messages`` (system if the role has an instruction, user, assistant), ``env_id``,
    ``seed``, ``episode`` (index in the stream), ``agent``, ``role``, ``turn``, ``source``
    (``reference``, ``random`` or ``perturbed``).
    """
    import llm_envs
    from llm_envs.core.messages import to_chat_messages

    problems = imperfect_share_problems(random_fraction, perturb_fraction)
    if problems:
        raise ValueError("; ".join(problems))
    env = llm_envs.make(env_id, **dict(env_kwargs or {}))
    unknown = sorted(set(agents or ()) - set(env.possible_agents))
    if unknown:
        raise ValueError(f"no agent(s) {unknown} in {env_id}; its agents: {list(env.possible_agents)}")
    want_agents = set(agents) if agents is not None else None
    want_roles = set(roles) if roles is not None else None
    seeds = demonstration_seeds(run_seed, start_episode)
    episode = start_episode
    while episodes is None or episode < start_episode + episodes:
        seed = next(seeds)
        rng = np.random.default_rng([run_seed % 2**64, DEMONSTRATION_STREAM, 1, episode])
        env.reset(seed=seed)
        pending: list[dict[str, Any]] = []
        decisions = 0
        for agent in env.agent_iter():
            _, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            if decisions >= max_decisions:
                break
            decisions += 1
            role = env.role_of(agent)
            recorded = (want_agents is None or agent in want_agents) and (want_roles is None or role in want_roles)
            action, source = env.reference_action(agent), "reference"
            random_share = share_for(random_fraction, agent, role)
            perturb_share = share_for(perturb_fraction, agent, role)
            if recorded and (random_share or perturb_share):
                u = float(rng.random())
                if u < random_share:
                    action, source = env.random_action(agent, rng), "random"
                elif u < random_share + perturb_share:
                    near = near_miss(env, agent, action, rng)
                    action, source = (near, "perturbed") if near is not None else (env.random_action(agent, rng), "random")
            if recorded:
                messages = to_chat_messages(env.observe(agent))
                pending.append({
                    "messages": [*messages, {"role": "assistant", "content": action}],
                    "env_id": env_id, "seed": seed, "episode": episode, "agent": agent, "role": role,
                    "turn": int(getattr(env, "turn", 0) or 0), "source": source,
                })
                if not successful_only:
                    yield from pending
                    pending = []
            env.step(action)
        if successful_only and float(env.episode_metrics().get("success", 0.0)) >= 1.0:
            yield from pending
        episode += 1


def write_jsonl(examples: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write one JSON object per line; return how many. The file appears only once every example
    is written (a temporary file beside it, then renamed): examples that fail part way (a refused
    agent name, an interrupted run) leave no file, and no older file is cut short."""
    import os

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    n = 0
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for ex in examples:
                fh.write(json_text(ex) + "\n")
                n += 1
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return n


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream a demonstrations file (a user's file too): one ``{"messages": [...], ...}`` per
    line, the last message the assistant's (the target). A line that is not such an object is
    an error naming the file and line."""
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                ex = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            problem = _example_problem(ex)
            if problem:
                raise ValueError(f"{path}:{lineno}: {problem}")
            yield ex


def _example_problem(ex: Any) -> str | None:
    if not isinstance(ex, dict) or not isinstance(ex.get("messages"), list) or not ex["messages"]:
        return 'expected an object with a non-empty "messages" list'
    for m in ex["messages"]:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            return 'every message must be {"role": str, "content": str}'
    if ex["messages"][-1]["role"] != "assistant":
        return "the last message must be the assistant's (the action to learn)"
    if len(ex["messages"]) < 2:
        return "a demonstration needs a prompt message before the assistant's"
    return None
