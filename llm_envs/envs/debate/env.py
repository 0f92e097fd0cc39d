"""``llm/Debate-v0``: MAPoRL's collaborative debate with influence-aware verification rewards.

A agents answer a question over T turns. In turn 0 each answers alone; in turn t >= 1 each
sees the other agents' earlier answers (optionally with their verifier scores) and may revise.
Within a turn agents act in order ``agent_0 … agent_{A-1}``, but every prompt of turn t shows
only answers of turns < t, so a turn is simultaneous in effect. Each answer earns its verifier
score at once and, as delayed credit, a share of the later answers it influenced
(:mod:`llm_envs.envs.debate.rules`).

The spec (agents, actions, observations, rewards, episode end, metrics) and the version history
are in docs/envs/debate.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_envs.core.bounds import summed
from llm_envs.core.env import TextEnv
from llm_envs.core.records import ActionRecord
from llm_envs.envs._common import PROBLEM_OPTIONS, choose_problem, resolve_task_source
from llm_envs.envs.debate import rules
from llm_envs.envs.debate.verifiers import GroundTruthVerifier, Verifier, labels_of
from llm_envs.envs.forum.rules import clip_text, shown_to_reader, wrong_answer
from llm_envs.tasks import Problem, TaskSource

log = logging.getLogger(__name__)


@dataclass
class DebateConfig:
    """Settings of :class:`DebateEnv`; defaults follow MAPoRL (arXiv 2502.18439).

    Attributes:
        num_agents: A (agent ids ``agent_0`` … ``agent_{A-1}``).
        num_turns: T.
        gamma: Discount γ of the influence-aware reward (0.3 in the released configs).
        alpha0, alpha1: Incentives for an agent's own revision (Table 1).
        beta0, beta1: Incentives for the agent's influence on the others (Table 2), applied
            to the answer at every turn t < T−1 (the paper's t = 1 … T−1, 1-based).
        first_turn_incentive: Whether turn-0 answers earn Table 2's influence incentive (the
            paper: yes; ``False`` reproduces the released code, whose incentives start at the
            second turn). Table 1 never applies to turn 0 (it needs a previous answer).
        show_verifier_scores: Show verifier scores next to earlier answers in prompts (MAPoRL's
            trained verifier's). Refused without a ``verifier`` unless ``allow_reward_holes``:
            the ground truth's scores are the answer key.
        history: ``"all"`` (every earlier turn, the paper's formulation) or ``"last"``.
        task: Name of the task source; its problems need ground-truth answers unless a custom
            verifier is given and all incentives are 0.
        split: Split of the task source.
        task_kwargs: Extra keyword arguments for the task source.
        max_shown_chars: Longest stretch of one answer echoed into a prompt.
        allow_reward_holes: Accept incentive weights under which a wrong answer earns more
            than a right one (:func:`rules.incentive_hole`: refused unless this is set), and
            ground-truth scores in the prompts (``show_verifier_scores`` without a verifier).
    """

    num_agents: int = 2
    num_turns: int = 3
    gamma: float = 0.3
    alpha0: float = 0.0
    alpha1: float = 0.0
    beta0: float = 0.0
    beta1: float = 0.0
    first_turn_incentive: bool = True
    show_verifier_scores: bool = False
    history: str = "all"
    task: str = "arithmetic"
    split: str = "train"
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    max_shown_chars: int = 8_000
    allow_reward_holes: bool = False


@dataclass
class _Answer:
    record: ActionRecord
    text: str
    answer: str | None
    score: float
    correct: bool | None


class DebateEnv(TextEnv):
    """MAPoRL collaborative debate; see the module docstring."""

    # Every prompt of turn t shows only answers of turns < t and the episode ends after the last
    # agent of a turn, so the AEC cycles are simultaneous moves (PettingZoo's parallel flag).
    metadata = {**TextEnv.metadata, "name": "debate_v0", "is_parallelizable": True}
    config_class = DebateConfig
    reset_options = PROBLEM_OPTIONS

    def __init__(
        self,
        config: DebateConfig | None = None,
        *,
        render_mode: str | None = None,
        sandbox: Any = None,
        task_source: TaskSource | None = None,
        verifier: Verifier | None = None,
        **overrides: Any,
    ) -> None:
        """Args:
        config: A :class:`DebateConfig`; keyword ``overrides`` replace its fields.
        render_mode: ``"ansi"``, ``"human"`` or ``None``.
        sandbox: Unused; accepted for a uniform constructor and shared with clones.
        task_source: A ready task source; replaces ``config.task``.
        verifier: ``verifier(problem, response) -> float`` in [0, 1] (clipped), e.g. a trained
            verifier model or :class:`~llm_envs.envs.debate.verifiers.AgentVerifier`.
            Default: ground-truth correctness.
        """
        self.config: DebateConfig = self._build_config(config, overrides)
        cfg = self.config
        if cfg.num_agents < 1 or cfg.num_turns < 1:
            raise ValueError("num_agents and num_turns must be >= 1")
        if cfg.max_shown_chars < 1:  # (a negative one was accepted and cut text from the end)
            raise ValueError(f"max_shown_chars must be >= 1, got {cfg.max_shown_chars}")
        if not 0.0 <= cfg.gamma <= 1.0:
            raise ValueError("gamma must be in [0, 1]")
        if cfg.history not in ("all", "last"):
            raise ValueError(f"history must be 'all' or 'last', got {cfg.history!r}")
        hole = rules.incentive_hole(
            cfg.num_agents, cfg.num_turns, cfg.gamma, cfg.alpha0, cfg.alpha1, cfg.beta0, cfg.beta1,
            first_turn_incentive=cfg.first_turn_incentive,
        )
        if hole is not None and not cfg.allow_reward_holes:
            raise ValueError(
                f"these incentive weights open a reward hole: {hole}; lower them or set "
                "allow_reward_holes=True to accept this"
            )
        if cfg.show_verifier_scores and verifier is None and not cfg.allow_reward_holes:
            # Without a verifier of its own the scores are ground-truth correctness: 1.000 or
            # 0.000 next to every earlier answer is the answer key (a policy that never read the
            # questions reached success 1.0 on a 3-label task by copying the answer marked 1.000).
            raise ValueError(
                "show_verifier_scores shows the verifier's scores, and without a verifier (e.g. "
                "AgentVerifier, a trained verifier model) they are the ground truth's: each earlier "
                "answer's correctness, the answer key. Pass verifier=..., or set "
                "allow_reward_holes=True to accept this"
            )
        self.sandbox = sandbox
        self.task_source = resolve_task_source(cfg, task_source)
        self.ground_truth = GroundTruthVerifier()
        self.verifier: Verifier | None = verifier
        super().__init__([f"agent_{k}" for k in range(cfg.num_agents)], render_mode=render_mode)
        self.problem: Problem | None = None
        self.answers: list[list[_Answer]] = []

    @property
    def uses_incentives(self) -> bool:
        cfg = self.config
        return any(v != 0.0 for v in (cfg.alpha0, cfg.alpha1, cfg.beta0, cfg.beta1))

    # ------------------------------------------------------------------ episode
    def _start_episode(self, options: dict[str, Any]) -> str:
        self.problem = choose_problem(self.task_source, options, self.np_random)
        if self.problem.answer is None and (self.verifier is None or self.uses_incentives):
            raise ValueError(
                f"problem {self.problem.id!r} has no ground-truth answer: the default verifier "
                "and the incentives need one (pass verifier= and keep alpha/beta at 0)"
            )
        self.answers = [[] for _ in range(self.config.num_turns)]
        return self.possible_agents[0]

    def _apply_action(self, agent: str, action: str) -> str | None:
        assert self.problem is not None
        cfg = self.config
        turn, index = self.turn, self.possible_agents.index(agent)
        answer = self.ground_truth.answer(self.problem, action)
        correct = (
            None if self.problem.answer is None else self.ground_truth.correct(self.problem, action)
        )
        if self.verifier is None:
            score = float(bool(correct))
        else:
            score = _verifier_score(self.verifier(self.problem, action))
        record = self._add_record(
            agent,
            action,
            parsed={"answer": answer},
            format_ok=answer is not None,
            info={"correct": correct, "verifier": score},
        )
        self.answers[turn].append(_Answer(record, action, answer, score, correct))

        # Own verifier score, normalised by the discount sum of this turn.
        self._credit(
            record, "verifier", score / rules.discount_normaliser(turn, cfg.num_turns, cfg.gamma)
        )
        # Delayed credit: this answer is part of the future term of every earlier answer.
        for earlier in range(turn):
            weight = rules.influence_weight(earlier, turn, cfg.num_agents, cfg.num_turns, cfg.gamma)
            for previous in self.answers[earlier]:
                self._credit(previous.record, "influence", weight * score)
        if turn >= 1 and self.problem.answer is not None:
            before = bool(self.answers[turn - 1][index].correct)
            others = self._others_correct(turn - 1, index)
            self._credit(
                record,
                "revision_incentive",
                rules.revision_incentive(before, bool(correct), others, cfg.alpha0, cfg.alpha1),
            )

        if index < cfg.num_agents - 1:
            return self.possible_agents[index + 1]
        # Turn complete: the influence incentive of the previous turn's answers is now known
        # (the paper's Table 2 covers every turn but the last; the released code skipped turn 0).
        first_incentive_turn = 0 if cfg.first_turn_incentive else 1
        if turn >= 1 and turn - 1 >= first_incentive_turn and self.problem.answer is not None:
            for j, previous in enumerate(self.answers[turn - 1]):
                self._credit(
                    previous.record,
                    "influence_incentive",
                    rules.influence_incentive(
                        bool(previous.correct),
                        self._others_correct(turn - 1, j),
                        self._others_correct(turn, j),
                        cfg.beta0,
                        cfg.beta1,
                    ),
                )
        self.turn += 1
        if self.turn == cfg.num_turns:
            self._end_episode()
            return None
        return self.possible_agents[0]

    def _others_correct(self, turn: int, index: int) -> list[bool]:
        return [bool(a.correct) for j, a in enumerate(self.answers[turn]) if j != index]

    # ------------------------------------------------------------------ observations
    def _role(self, agent: str) -> str:
        return "debater"

    def _instruction(self, agent: str) -> str:
        return rules.INSTRUCTION.format(agent=agent, count=self.config.num_agents)

    def _prompt(self, agent: str) -> str:
        assert self.problem is not None
        if self._episode_over:
            return "The debate is over."
        labels = labels_of(self.problem)
        if self.turn == 0:
            return rules.first_turn_prompt(self.problem.prompt, labels)
        index = self.possible_agents.index(agent)
        first = 0 if self.config.history == "all" else self.turn - 1
        show = self.config.show_verifier_scores
        limit = self.config.max_shown_chars
        own = []
        others = []
        for turn in range(first, self.turn):
            for j, entry in enumerate(self.answers[turn]):
                score = entry.score if show else None
                # Its fence marks broken up: an answer cannot close the fence it is shown in and
                # write lines in the prompt's own format (a verifier's score, another turn).
                shown = clip_text(shown_to_reader(entry.text, ()), limit)
                if j == index:
                    own.append((turn, shown, score))
                else:
                    others.append((self.possible_agents[j], turn, shown, score))
        return rules.later_turn_prompt(self.problem.prompt, own, others, labels)

    # ------------------------------------------------------------------ scripted play
    def reference_action(self, agent: str) -> str:
        """A correct final answer, every turn."""
        return self.scripted_action(agent, "R")

    def scripted_action(self, agent: str, plan: str = "R") -> str:
        """A scripted answer following ``plan``: one letter per turn (the last letter repeats):
        ``R`` the true answer, ``W`` a wrong one, ``N`` no final answer."""
        assert self.problem is not None
        if self._episode_over or not plan:
            return ""
        letter = plan[min(self.turn, len(plan) - 1)].upper()
        truth = self.problem.answer
        if truth is None or letter == "N":
            return "I am not sure what the answer is."
        labels = labels_of(self.problem)
        if letter == "R":
            final = truth
        elif letter == "W":
            if labels:
                final = next(
                    (label for label in labels if label.casefold() != truth.casefold()), truth
                )
            else:
                final = wrong_answer(truth)
        else:
            raise ValueError(f"unknown plan letter {letter!r} (use R, W or N)")
        return f"Reasoning about the question step by step.\nAnswer: \\boxed{{{final}}}"

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """A well-formed guess: a random integer (or a random label) in ``\\boxed{}``."""
        assert self.problem is not None
        labels = labels_of(self.problem)
        if labels:
            return f"\\boxed{{{labels[int(rng.integers(len(labels)))]}}}"
        return f"Answer: \\boxed{{{int(rng.integers(-1000, 1000))}}}"

    # ------------------------------------------------------------------ metrics
    def majority_accuracy(self, turn: int) -> float:
        """Majority-vote accuracy of ``turn`` with the tie rule (0 without ground truth)."""
        assert self.problem is not None
        entries = self.answers[turn]
        if self.problem.answer is None or not entries:
            return 0.0
        problem = self.problem
        return rules.majority_vote_accuracy(
            [e.answer for e in entries],
            [bool(e.correct) for e in entries],
            lambda a, b: self.ground_truth.answer_is(problem, a, b),
        )

    def _episode_metrics(self) -> dict[str, float]:
        if self.problem is None:
            return {}
        metrics: dict[str, float] = {}
        completed = [t for t in range(self.config.num_turns) if self.answers[t]]
        for turn in completed:
            entries = self.answers[turn]
            metrics[f"majority_accuracy_turn_{turn}"] = self.majority_accuracy(turn)
            metrics[f"accuracy_turn_{turn}"] = sum(bool(e.correct) for e in entries) / len(entries)
            metrics[f"verifier_mean_turn_{turn}"] = sum(e.score for e in entries) / len(entries)
        final = completed[-1] if completed else 0
        metrics["success"] = metrics.get(f"majority_accuracy_turn_{final}", 0.0)
        metrics["ground_truth_known"] = float(self.problem.answer is not None)
        return metrics

    def _describe_episode(self) -> str:
        if self.problem is None:
            return ""
        cfg = self.config
        lines = [
            f"agents={cfg.num_agents} turns={cfg.num_turns} gamma={cfg.gamma} "
            f"alpha=({cfg.alpha0}, {cfg.alpha1}) beta=({cfg.beta0}, {cfg.beta1})",
            f"Question ({self.problem.id}): {self.problem.prompt}",
        ]
        if self.problem.answer is not None:
            lines.append(f"(ground truth: {self.problem.answer})")
        return "\n".join(lines)

    def _shared_resources(self) -> list[Any]:
        return [r for r in (self.task_source, self.verifier, self.sandbox) if r is not None]

    # ------------------------------------------------------------------ reward contract
    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """The influence-aware reward (a discounted mean of verifier scores in [0, 1]) plus at
        most one revision incentive (Table 1, ``±alpha``) and one influence incentive (Table 2,
        ``±beta``). docs/envs/debate.md states the same bounds."""
        cfg = self.config
        alpha = max(abs(cfg.alpha0), abs(cfg.alpha1))
        beta = max(abs(cfg.beta0), abs(cfg.beta1))
        return summed((0.0, 1.0), (-alpha, alpha), (-beta, beta))


def _verifier_score(value: Any) -> float:
    """A custom verifier's score, clipped to [0, 1]. A number it could not give (NaN, or
    infinity) scores 0: what the verifier cannot check is not paid, and a NaN would spread
    through the influence-aware rewards of every earlier answer. Anything but a real number
    (``None``, a string) is a bug of the verifier: a ``TypeError`` that says so."""
    if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)):  # (bool is an int)
        raise TypeError(f"a debate verifier must return a number in [0, 1], got {type(value).__name__}: {value!r}")
    value = float(value)
    if not math.isfinite(value):
        log.warning("the debate verifier returned %r: scored 0", value)
        return 0.0
    return min(1.0, max(0.0, value))
