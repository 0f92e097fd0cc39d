"""``llm/ProposerSolverJudge-v0``: Multi-Agent Evolve's proposer, solver and judge.

One episode is one proposed question. The proposer writes a ``<question>``; the judge rates it,
and a question rated ``>= quality_threshold`` joins the question pool
(:class:`~llm_envs.envs.proposer_solver_judge.pool.QuestionPool`, shared across episodes and
clones, committed when an episode ends by an environment whose ``commits_to_pool`` is true).
The solver answers a pool question ``N_sample`` times from one prompt and the judge rates each
answer. All rewards come from the agents' own interaction; ground truth is used only for metrics.

The spec (agents, actions, observations, rewards, episode end, metrics, the pool) and the version history
are in docs/envs/proposer_solver_judge.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llm_envs.core.bounds import unit_weights
from llm_envs.core.env import TextEnv
from llm_envs.core.records import ActionRecord
from llm_envs.envs._common import check_reward_holes, resolve_task_source, wrong_sign_holes
from llm_envs.envs.proposer_solver_judge import rules
from llm_envs.envs.proposer_solver_judge.pool import (
    DEFAULT_MIN_QUALITY,
    PoolEntry,
    QuestionPool,
    question_key,
)
from llm_envs.tasks import Problem, TaskSource
from llm_envs.verifiers.math import check_answer


@dataclass
class ProposerSolverJudgeConfig:
    """Settings of :class:`ProposerSolverJudgeEnv`; defaults follow MAE (arXiv 2510.23595).

    Attributes:
        reference_probability: p: chance that the proposer is shown a pool question and asked
            for a harder variant (0 = no reference, 0.5 = half reference (the paper's best),
            1 = always).
        num_solver_samples: N_sample answers per question (difficulty estimate).
        quality_threshold: Quality a question needs to join the pool. ``None`` (default): the
            pool's ``min_quality`` (0.7, the paper's, for the pool the environment builds).
            A value is used to build the pool, and must equal the ``min_quality`` of a pool
            passed to the constructor: the pool is the single source of the threshold.
        solver_questions: Which question the solver answers. ``"pool"`` (the paper: the solver
            samples from the filtered pool D): the proposed question when it is admitted,
            else a question drawn from the pool (none if the pool is empty: the episode ends).
            ``"proposed"``: every proposed question, admitted or not (the solver also trains
            on rejected questions; every proposer gets a difficulty term).
        drop_difficulty_below_threshold: Released-code variant: no difficulty term for a
            question below the threshold (``"pool"`` mode never has one for such a question).
        quality_weight, difficulty_weight, format_weight: λ of the proposer's reward.
        solver_judge_weight, solver_format_weight: Weights of the solver's reward.
        unparsed_score_value: V used when a judge completion has no numeric ``<score>``, with
            ``unscored_ratings="neutral"``.
        unscored_ratings: What a rating without a readable score pays. ``"unpaid"`` (default,
            a grader fails closed): nothing the judge did not score is paid: a question's
            quality is 0 (not admitted), a solver answer's judge term is 0, and for the
            proposer's difficulty the answer counts as solved (V = 1). ``"neutral"`` (the
            released code): V = ``unparsed_score_value`` for all three, so an answer whose text
            keeps the judge from scoring (empty, or an instruction to it) earns the solver
            0.75 against 0.5 for a plain wrong one; needs ``allow_reward_holes=True``.
        task: Task source that seeds the pool and supplies the reference proposer's questions.
        split: Split of the task source.
        task_kwargs: Extra keyword arguments for the task source.
        pool_seed_size: How many task-source problems seed a new pool.
        pool_path: JSONL file of the pool: loaded if it exists, else created from the seed;
            accepted questions are appended to it. ``None`` keeps the pool in memory.
        max_shown_chars: Longest stretch of one agent's text echoed into another's prompt.
        case_sensitive_tags: ``True`` (the released code): only ``<question>``, ``<answer>``
            and ``<score>`` spelled in lower case are tags (the judge's score is read in any
            case, as the released code does, but counts for its format only in lower case).
            ``False``: any case (``<QUESTION>``) is a tag.
        judge_sees: What the judge is shown of a solver's reply: ``"answer"`` (the content of
            its last ``<answer>`` pair, the whole reply when it has none: the released code)
            or ``"reply"`` (the whole reply, reasoning included).
        judge_score_parsing: ``"strict"``: the judge's score is the last ``<score>`` pair it
            wrote itself (outside quoted text) holding a plain number. ``"released"``: the
            released code's reading (the first pair; ``8/10`` as 0.8, the first integer of
            "9 out of 10", ``-3`` as 3; without a number in a pair, the last number anywhere
            in the reply). ``"released"`` lets text the judge quotes from the proposer or the
            solver decide the score, so it needs ``allow_reward_holes=True``.
        pay_pooled_questions: ``False`` (default): a proposed question that is already in the
            pool (the reference shown, a seed question, an earlier admitted one; compared by
            :func:`~llm_envs.envs.proposer_solver_judge.pool.question_key`) is no new task: its quality counts as 0, it is not
            admitted and earns no difficulty term, so copying the reference earns what a
            rejected question earns. ``True``: the judge's rating of it is paid as for a new
            question (the paper and the released code: a copy of the shown reference earned as
            much as an original question, for no work); needs ``allow_reward_holes=True``.
        allow_reward_holes: Accept an option that lets a strategy other than solving earn
            more (docs/papers.md, "Options that open a reward hole").
    """

    reference_probability: float = 0.5
    num_solver_samples: int = 5
    quality_threshold: float | None = None
    solver_questions: str = "pool"
    drop_difficulty_below_threshold: bool = False
    quality_weight: float = 1 / 3
    difficulty_weight: float = 1 / 3
    format_weight: float = 1 / 3
    solver_judge_weight: float = 0.5
    solver_format_weight: float = 0.5
    unparsed_score_value: float = 0.5
    unscored_ratings: str = "unpaid"
    task: str = "arithmetic"
    split: str = "train"
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    pool_seed_size: int = 256
    pool_path: str | None = None
    max_shown_chars: int = 16_000
    case_sensitive_tags: bool = True
    judge_sees: str = "answer"
    judge_score_parsing: str = "strict"
    pay_pooled_questions: bool = False
    allow_reward_holes: bool = False


@dataclass
class _Answer:
    record: ActionRecord
    text: str
    content: str | None
    format: float
    correct: bool | None
    judge_value: float | None = None


PHASES = ("propose", "judge_question", "solve", "judge_answer", "done")
SOLVER_QUESTIONS = ("pool", "proposed")
JUDGE_SCORE_PARSINGS = ("strict", "released")
JUDGE_SEES = ("answer", "reply")
UNSCORED_RATINGS = ("unpaid", "neutral")


class ProposerSolverJudgeEnv(TextEnv):
    """Multi-Agent Evolve's proposer–solver–judge episode; see the module docstring."""

    metadata = {**TextEnv.metadata, "name": "proposer_solver_judge_v0"}
    config_class = ProposerSolverJudgeConfig
    reset_options = ()  # the proposer writes the question

    def __init__(
        self,
        config: ProposerSolverJudgeConfig | None = None,
        *,
        render_mode: str | None = None,
        sandbox: Any = None,
        task_source: TaskSource | None = None,
        pool: QuestionPool | None = None,
        **overrides: Any,
    ) -> None:
        """Args:
        config: A :class:`ProposerSolverJudgeConfig`; keyword ``overrides`` replace fields.
        render_mode: ``"ansi"``, ``"human"`` or ``None``.
        sandbox: Unused; accepted for a uniform constructor and shared with clones.
        task_source: A ready task source; replaces ``config.task``.
        pool: A question pool to share (e.g. between concurrent environments); replaces the
            pool built from ``config.pool_path`` / the task source.
        """
        self.config: ProposerSolverJudgeConfig = self._build_config(config, overrides)
        cfg = self.config
        if not 0.0 <= cfg.reference_probability <= 1.0:
            raise ValueError("reference_probability must be in [0, 1]")
        if cfg.num_solver_samples < 1:
            raise ValueError("num_solver_samples must be >= 1")
        if cfg.solver_questions not in SOLVER_QUESTIONS:
            raise ValueError(
                f"solver_questions must be one of {SOLVER_QUESTIONS}, got {cfg.solver_questions!r}"
            )
        if cfg.judge_sees not in JUDGE_SEES:
            raise ValueError(f"judge_sees must be one of {JUDGE_SEES}, got {cfg.judge_sees!r}")
        if cfg.judge_score_parsing not in JUDGE_SCORE_PARSINGS:
            raise ValueError(
                f"judge_score_parsing must be one of {JUDGE_SCORE_PARSINGS}, "
                f"got {cfg.judge_score_parsing!r}"
            )
        if cfg.judge_score_parsing == "released" and not cfg.allow_reward_holes:
            raise ValueError(
                "judge_score_parsing='released' opens a reward hole: the released code reads "
                "the first <score> in the judge's reply (and, without one, the last number in "
                "it), so a solver answer or a proposed question carrying <score>10</score> that "
                "the judge quotes before its own score is paid as a perfect one; set "
                "allow_reward_holes=True to accept this"
            )
        if cfg.unscored_ratings not in UNSCORED_RATINGS:
            raise ValueError(
                f"unscored_ratings must be one of {UNSCORED_RATINGS}, got {cfg.unscored_ratings!r}"
            )
        if cfg.unscored_ratings == "neutral" and not cfg.allow_reward_holes:
            raise ValueError(
                "unscored_ratings='neutral' opens a reward hole: a rating without a score pays "
                f"V = {cfg.unparsed_score_value:g}, so a solver answer that keeps the judge from "
                "scoring (an empty answer, or text telling it not to score) earns more than a "
                "plain wrong answer the judge scores 1; set allow_reward_holes=True to accept this"
            )
        if cfg.pay_pooled_questions and not cfg.allow_reward_holes:
            raise ValueError(
                "pay_pooled_questions=True opens a reward hole: a proposer that copies the "
                "reference question it is shown (already in the pool) is paid the judge's "
                "rating of a question that was admitted before, as much as for an original one, "
                "for no work; set allow_reward_holes=True to accept this"
            )
        if cfg.pool_seed_size < 0:
            raise ValueError(f"pool_seed_size must be >= 0, got {cfg.pool_seed_size}")
        if cfg.max_shown_chars < 1:
            raise ValueError(f"max_shown_chars must be >= 1, got {cfg.max_shown_chars}")
        weights = ("quality_weight", "difficulty_weight", "format_weight", "solver_judge_weight", "solver_format_weight")
        check_reward_holes(cfg, wrong_sign_holes(cfg, gains=weights))
        self.sandbox = sandbox
        self.task_source = resolve_task_source(cfg, task_source)
        if pool is None:
            threshold = (
                DEFAULT_MIN_QUALITY if cfg.quality_threshold is None else cfg.quality_threshold
            )
            seed = QuestionPool.from_task_source(
                self.task_source, cfg.pool_seed_size, min_quality=threshold
            )
            pool = (
                QuestionPool.open(cfg.pool_path, seed.entries(), min_quality=threshold)
                if cfg.pool_path
                else seed
            )
        elif cfg.quality_threshold is not None and cfg.quality_threshold != pool.min_quality:
            raise ValueError(
                f"quality_threshold={cfg.quality_threshold} disagrees with the given pool's "
                f"min_quality={pool.min_quality}; the pool's threshold decides admission: leave "
                "quality_threshold unset or make them equal"
            )
        self.pool = pool
        #: Whether this instance commits its staged questions to the pool at episode end.
        self.commits_to_pool = True
        self.weights = rules.ProposerWeights(
            cfg.quality_weight, cfg.difficulty_weight, cfg.format_weight
        )
        super().__init__(["proposer", "solver", "judge"], render_mode=render_mode)
        self._clear_episode()

    @property
    def quality_threshold(self) -> float:
        """The admission threshold: the pool's ``min_quality`` (its single source)."""
        return self.pool.min_quality

    def restore(self, snapshot: TextEnv) -> None:
        """:meth:`TextEnv.restore`, keeping whether this instance commits to the shared pool (a
        snapshot is a clone, which does not)."""
        commits = self.commits_to_pool
        super().restore(snapshot)
        self.commits_to_pool = commits

    def _clear_episode(self) -> None:
        self.phase = "propose"
        self.fresh_problem: Problem | None = None
        self.reference: PoolEntry | None = None
        self.question: str | None = None
        self.question_truth: str | None = None
        #: The question the solver answers (the proposed one, or a pool question).
        self.solver_question: str | None = None
        self.solver_truth: str | None = None
        #: Whether the solver answers the proposed question (admitted, or
        #: ``solver_questions="proposed"``), not a pool question: only then does the proposal
        #: earn a difficulty term. Decided by admission, not by text (a rejected copy of a pool
        #: question can be drawn from the pool as itself).
        self.solver_answers_proposal = False
        self.question_format = 0.0
        self.quality: float | None = None
        self.proposer_record: ActionRecord | None = None
        self.answers: list[_Answer] = []
        self.judged = 0
        self.staged: list[PoolEntry] = []
        self.committed = 0

    # ------------------------------------------------------------------ cloning and the pool
    def clone(self, *, commits_to_pool: bool = False) -> ProposerSolverJudgeEnv:
        """An independent copy of the episode sharing the pool; by default it never commits
        its staged questions (a tree-sampling branch must not grow the shared pool)."""
        twin = super().clone()
        assert isinstance(twin, ProposerSolverJudgeEnv)
        twin.commits_to_pool = commits_to_pool
        return twin

    def freeze_cross_episode_state(self) -> None:
        """Commit no more questions to the pool (its clones never do): every later episode sees
        the pool as it is now. Called by the evaluation runner: which instance played which
        earlier episode, and when, must not change what an episode's proposer and solver see."""
        self.commits_to_pool = False

    def state_dict(self) -> dict[str, Any]:
        """Cross-episode state a training checkpoint must keep: the question pool."""
        return {"pool": self.pool.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the pool is shared, so every instance sees it)."""
        self.pool.load_state_dict(state["pool"])

    def commit_pool_additions(self) -> int:
        """Add this episode's staged questions to the pool (each once); return how many
        joined. Called automatically at episode end when :attr:`commits_to_pool` is true."""
        added = 0
        for entry in self.staged:
            added += self.pool.add(
                entry.question, entry.quality or 0.0, answer=entry.answer, source=entry.source
            )
        self.staged = []
        self.committed += added
        return added

    # ------------------------------------------------------------------ episode
    def _start_episode(self, options: dict[str, Any]) -> str:
        self._clear_episode()
        self.fresh_problem = self.task_source.sample(self.np_random)
        # The draw happens for every p so the episode's random stream does not depend on p.
        show_reference = self.np_random.random() < self.config.reference_probability
        if show_reference and len(self.pool) > 0:
            self.reference = self.pool.sample(self.np_random)
        return "proposer"

    def _apply_action(self, agent: str, action: str) -> str | None:
        handler = {
            "propose": self._play_proposal,
            "judge_question": self._play_question_rating,
            "solve": self._play_answer,
            "judge_answer": self._play_answer_rating,
        }[self.phase]
        next_agent = handler(agent, action)
        if next_agent is None:
            self.phase = "done"
            if self.commits_to_pool:
                self.commit_pool_additions()
            self._end_episode()
        return next_agent

    def _play_proposal(self, agent: str, action: str) -> str | None:
        question, pairs = rules.last_tag(action, "question", self.config.case_sensitive_tags)
        fmt = rules.format_reward(pairs)
        record = self._add_record(
            agent,
            action,
            parsed={"question": question, "tag_pairs": pairs},
            format_ok=pairs == 1 and question is not None,
            info={"reference": None if self.reference is None else self.reference.question},
        )
        self.proposer_record = record
        if question is None:
            # Nothing to judge or solve: the released code gives such a proposal reward 0.
            self._credit(record, "format", 0.0)
            return None
        self.question = question
        self.question_format = fmt
        self.question_truth = self._truth_of(question)
        record.info["ground_truth_known"] = self.question_truth is not None
        self._credit(record, "format", self.weights.format * fmt)
        self.turn += 1
        self.phase = "judge_question"
        return "judge"

    def _play_question_rating(self, agent: str, action: str) -> str | None:
        judged = self._parse_judge(action)
        record = self._add_record(
            agent,
            action,
            parsed={"score": judged.raw, "value": judged.value, "target": "question"},
            format_ok=judged.format == 1.0,
        )
        self._credit(record, "format", rules.judge_reward(judged.format))
        assert self.proposer_record is not None and self.question is not None
        # A question already in the pool is no new task: not paid for quality, not admitted.
        pooled = self.question in self.pool and not self.config.pay_pooled_questions
        record.parsed["already_pooled"] = self.question in self.pool
        self.quality = 0.0 if pooled or self._unpaid(judged) else judged.value
        self._credit(self.proposer_record, "quality", self.weights.quality * self.quality)
        admitted = self.quality >= self.quality_threshold
        if admitted:
            self.staged.append(
                PoolEntry(self.question, self.question_truth, judged.value, "proposed")
            )
        if admitted or self.config.solver_questions == "proposed":
            self.solver_question, self.solver_truth = self.question, self.question_truth
            self.solver_answers_proposal = True
        else:
            # MAE's solver samples from the filtered pool: a rejected question is not answered
            # (so it has no difficulty estimate), a pool question is answered instead.
            self._credit(self.proposer_record, "difficulty", 0.0)
            if len(self.pool) == 0:
                return None
            entry = self.pool.sample(self.np_random)
            self.solver_question, self.solver_truth = entry.question, entry.answer
        self.turn += 1
        self.phase = "solve"
        return "solver"

    def _play_answer(self, agent: str, action: str) -> str | None:
        content, pairs = rules.last_tag(action, "answer", self.config.case_sensitive_tags)
        fmt = rules.format_reward(pairs)
        correct = None
        if self.solver_truth is not None:
            correct = content is not None and check_answer(content, self.solver_truth)
        record = self._add_record(
            agent,
            action,
            parsed={"answer": content, "tag_pairs": pairs},
            format_ok=pairs == 1,
            info={"sample": len(self.answers), "correct": correct},
        )
        self._credit(record, "format", self.config.solver_format_weight * fmt)
        self.answers.append(_Answer(record, action, content, fmt, correct))
        if len(self.answers) < self.config.num_solver_samples:
            return "solver"  # same turn: every sample answers the same prompt
        self.turn += 1
        self.phase = "judge_answer"
        return "judge"

    def _play_answer_rating(self, agent: str, action: str) -> str | None:
        answer = self.answers[self.judged]
        judged = self._parse_judge(action)
        record = self._add_record(
            agent,
            action,
            parsed={"score": judged.raw, "value": judged.value, "target": f"answer_{self.judged}"},
            format_ok=judged.format == 1.0,
        )
        self._credit(record, "format", rules.judge_reward(judged.format))
        # An unscored answer (unscored_ratings="unpaid") pays the solver nothing and shows the
        # proposer no difficulty: its judge_value stays None (left out of the metrics).
        answer.judge_value = None if self._unpaid(judged) else judged.value
        self._credit(answer.record, "judge", self.config.solver_judge_weight * (answer.judge_value or 0.0))
        self.judged += 1
        self.turn += 1
        if self.judged < len(self.answers):
            return "judge"
        assert self.proposer_record is not None and self.quality is not None
        if not self.solver_answers_proposal:
            return None  # the solver answered a pool question: no difficulty for the proposal
        parts = rules.proposer_reward(
            self.quality,
            [1.0 if a.judge_value is None else a.judge_value for a in self.answers],
            self.question_format,
            weights=self.weights,
            threshold=self.quality_threshold,
            drop_difficulty_below_threshold=self.config.drop_difficulty_below_threshold,
        )
        self._credit(self.proposer_record, "difficulty", parts["difficulty"])
        return None

    def _unpaid(self, judged: rules.JudgeOutput) -> bool:
        """A rating without a readable score, which pays nothing (``unscored_ratings="unpaid"``)."""
        return judged.raw is None and self.config.unscored_ratings == "unpaid"

    def _parse_judge(self, action: str) -> rules.JudgeOutput:
        cfg = self.config
        parse = rules.parse_judge_released if cfg.judge_score_parsing == "released" else rules.parse_judge
        return parse(
            action, cfg.unparsed_score_value, case_sensitive_format=cfg.case_sensitive_tags
        )

    def _truth_of(self, question: str) -> str | None:
        """The ground truth of a question when it is a known one (metrics only)."""
        key = question_key(question)
        if self.fresh_problem is not None and question_key(self.fresh_problem.prompt) == key:
            return self.fresh_problem.answer
        if self.reference is not None and self.reference.key == key:
            return self.reference.answer
        entry = self.pool.lookup(question)
        return None if entry is None else entry.answer

    # ------------------------------------------------------------------ observations
    def _step_info(self, agent: str) -> dict[str, Any]:
        info = super()._step_info(agent)
        # Pool bookkeeping (not a metric: a non-committing clone and its original differ here).
        info["pool_staged"] = len(self.staged)
        info["pool_committed"] = self.committed
        return info

    def _role(self, agent: str) -> str:
        return agent

    def _instruction(self, agent: str) -> str:
        if agent != self.agent_selection or self.phase == "done":
            return rules.IDLE_INSTRUCTION
        return {
            "proposer": rules.PROPOSER_INSTRUCTION,
            "solver": rules.SOLVER_INSTRUCTION,
            "judge": rules.JUDGE_INSTRUCTION,
        }[agent]

    def _prompt(self, agent: str) -> str:
        if self.phase == "done":
            return "The episode is over."
        if agent != self.agent_selection:
            return (
                f"Waiting: the {self.agent_selection} is acting ({self.phase.replace('_', ' ')})."
            )
        limit = self.config.max_shown_chars
        if self.phase == "propose":
            reference = (
                None if self.reference is None else rules.clip_text(self.reference.question, limit)
            )
            return rules.proposer_prompt(reference)
        if self.phase == "judge_question":
            return rules.judge_question_prompt(rules.clip_text(self.question or "", limit))
        question = rules.clip_text(self.solver_question or "", limit)
        if self.phase == "solve":
            return rules.solver_prompt(question)
        answer = self.answers[self.judged]
        # The released code shows the judge the content of the answer tags (the whole reply
        # when there is none); judge_sees="reply" shows the reasoning too.
        shown = answer.text if self.config.judge_sees == "reply" or answer.content is None else answer.content
        response = rules.clip_text(shown, limit)
        return rules.judge_answer_prompt(question, response)

    # ------------------------------------------------------------------ scripted play
    def reference_action(self, agent: str) -> str:
        """The reference play: propose a fresh task-source question, answer it correctly,
        judge honestly (10 for a known question and a correct answer, 1 for a wrong one)."""
        return self.scripted_action(agent)

    def scripted_action(
        self,
        agent: str,
        *,
        proposer: str = "fresh",
        solver: str = "correct",
        judge: str = "honest",
    ) -> str:
        """A scripted action for the acting ``agent``; reads hidden state (true answers).

        Args:
            proposer: ``"fresh"`` (a new task-source question with a known answer),
                ``"reuse"`` (copies the reference question, or the first pool question when
                none is shown), ``"multi_tag"`` (a draft question pair, then the final one: the last
                counts, format 0.5) or
                ``"no_tag"`` (no question: the episode ends).
            solver: ``"correct"``, ``"wrong"``, ``"multi_tag"`` (a correct answer in two pairs:
                format 0.5) or ``"no_tag"`` (a correct answer without tags: format 0).
            judge: ``"honest"`` (questions: 10 if the answer is known, 1 if empty, else 5;
                answers: 10 correct, 1 wrong, 5 unknown), ``"generous"`` (always 10),
                ``"harsh"`` (always 1), ``"multi_tag"`` (scores 9 then 7: the last counts, V = 6/9, format 0.5)
                or ``"garbage"`` (no score: V = 0.5, format 0).
        """
        if agent != self.agent_selection or self.phase == "done":
            return ""
        if self.phase == "propose":
            return self._scripted_proposal(proposer)
        if self.phase == "solve":
            return self._scripted_answer(solver)
        return self._scripted_judgement(judge)

    def _scripted_proposal(self, behaviour: str) -> str:
        assert self.fresh_problem is not None
        if behaviour == "fresh":
            return f"Here is a new task.\n<question>{self.fresh_problem.prompt}</question>"
        if behaviour == "reuse":
            entries = self.pool.entries()
            if self.reference is not None:
                question = self.reference.question
            else:
                question = entries[0].question if entries else self.fresh_problem.prompt
            return f"<question>{question}</question>"
        if behaviour == "multi_tag":
            # A draft, then the final question: the last pair counts.
            return f"Draft: <question>Why?</question>\nFinal: <question>{self.fresh_problem.prompt}</question>"
        if behaviour == "no_tag":
            return f"My question: {self.fresh_problem.prompt}"
        raise ValueError(f"unknown proposer behaviour {behaviour!r}")

    def _scripted_answer(self, behaviour: str) -> str:
        truth = self.solver_truth
        if truth is None:
            return "<answer>I do not know.</answer>"
        if behaviour == "correct":
            return f"Step by step.\n<answer>\\boxed{{{truth}}}</answer>"
        if behaviour == "wrong":
            return f"Step by step.\n<answer>\\boxed{{{rules.wrong_answer(truth)}}}</answer>"
        if behaviour == "multi_tag":
            return f"<answer>\\boxed{{{truth}}}</answer> again: <answer>\\boxed{{{truth}}}</answer>"
        if behaviour == "no_tag":
            return f"Step by step. \\boxed{{{truth}}}"
        raise ValueError(f"unknown solver behaviour {behaviour!r}")

    def _scripted_judgement(self, behaviour: str) -> str:
        if behaviour == "honest":
            if self.phase == "judge_question":
                if not (self.question or "").strip():
                    score = 1
                else:
                    score = 10 if self.question_truth is not None else 5
            else:
                correct = self.answers[self.judged].correct
                score = 5 if correct is None else (10 if correct else 1)
            return f"Analysis done. <score>{score}</score>"
        if behaviour == "generous":
            return "Perfect. <score>10</score>"
        if behaviour == "harsh":
            return "Terrible. <score>1</score>"
        if behaviour == "multi_tag":
            return "First <score>9</score>, on reflection <score>7</score>"
        if behaviour == "garbage":
            return "I cannot decide on a score."
        raise ValueError(f"unknown judge behaviour {behaviour!r}")

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """Well-formed but uninformed: a random arithmetic question, a random number as the
        answer, a random score."""
        if self.phase == "propose":
            a, b, c = (int(x) for x in rng.integers(2, 1000, size=3))
            return f"<question>Compute {a} * {b} - {c}.</question>"
        if self.phase == "solve":
            return f"<answer>\\boxed{{{int(rng.integers(-1000, 1000))}}}</answer>"
        return f"<score>{int(rng.integers(1, 11))}</score>"

    # ------------------------------------------------------------------ metrics
    def _episode_metrics(self) -> dict[str, float]:
        known = self.solver_truth is not None and bool(self.answers)
        correct = [bool(a.correct) for a in self.answers]
        values = [a.judge_value for a in self.answers if a.judge_value is not None]
        quality = self.quality if self.quality is not None else 0.0
        return {
            "success": (sum(correct) / len(correct)) if known else 0.0,
            "ground_truth_known": float(known),
            "question_valid": float(self.question is not None),
            "question_quality": quality,
            "question_accepted": float(
                self.quality is not None and quality >= self.quality_threshold
            ),
            "solver_answered_proposed": float(
                bool(self.answers) and self.solver_answers_proposal
            ),
            "solver_judge_mean": (sum(values) / len(values)) if values else 0.0,
            "difficulty": (1.0 - sum(values) / len(values)) if values else 0.0,
            "reference_shown": float(self.reference is not None),
        }

    def _describe_episode(self) -> str:
        cfg = self.config
        lines = [
            f"p(reference)={cfg.reference_probability} samples={cfg.num_solver_samples} "
            f"threshold={self.quality_threshold} solver_questions={cfg.solver_questions} "
            f"drop_difficulty={cfg.drop_difficulty_below_threshold}"
        ]
        if self.reference is not None:
            lines.append(f"Reference question: {rules.clip_text(self.reference.question, 2000)}")
        return "\n".join(lines)

    def _shared_resources(self) -> list[Any]:
        return [r for r in (self.task_source, self.pool, self.sandbox) if r is not None]

    # ------------------------------------------------------------------ reward contract
    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """The proposer: ``λ_q·quality + λ_d·difficulty + λ_f·format``; the solver:
        ``w_j·judge value + w_f·format``; the judge: its format value. Every term is in [0, 1].
        docs/envs/proposer_solver_judge.md states the same bounds."""
        cfg = self.config
        if agent == "proposer":
            return unit_weights([cfg.quality_weight, cfg.difficulty_weight, cfg.format_weight])
        if agent == "solver":
            return unit_weights([cfg.solver_judge_weight, cfg.solver_format_weight])
        return (0.0, 1.0)

    def reference_is_ceiling(self, agent: str | None = None) -> bool:
        """The proposer is paid for questions the solver fails (difficulty): the reference
        agents bound the solver's and the judge's returns, not the proposer's nor the team's."""
        return agent in ("solver", "judge")
