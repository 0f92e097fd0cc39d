"""``llm/Forum-v0``: the CoMAS discussion forum (solution → evaluation → scoring).

A pool of ``l`` agents discusses one problem for ``m`` rounds. Each round one agent, drawn
uniformly from the pool, writes a solution; then ``n`` evaluations follow, each by a uniformly
drawn agent told to find every error, and each evaluation is followed by a scoring of the
(solution, evaluation) pair by an agent drawn uniformly among those who wrote neither (the
paper draws from the whole pool: ``scorers="any"``). Rewards come only from the scorer's
parsed score (:mod:`llm_envs.envs.forum.rules`): there is no external verifier; ground-truth
correctness, when the task has an answer, is logged for metrics and never used as reward.

The spec (agents, actions, observations, rewards, episode end, metrics, options) and the version history
are in docs/envs/forum.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_envs.core.env import TextEnv
from llm_envs.core.records import ActionRecord
from llm_envs.envs._common import PROBLEM_OPTIONS, choose_problem, resolve_task_source
from llm_envs.envs.forum import rules
from llm_envs.tasks import Problem, TaskSource
from llm_envs.verifiers.math import check_answer, extract_boxed


@dataclass
class ForumConfig:
    """Settings of :class:`ForumEnv`; defaults follow CoMAS (arXiv 2510.08529).

    Attributes:
        num_agents: Size ``l`` of the agent pool (agent ids ``agent_0`` … ``agent_{l-1}``).
        num_rounds: Rounds ``m``; ``None`` means ``2·l`` for the paper's schedule and ``2``
            for the released code's (whose rounds hold ``l`` solutions each).
        num_evaluations: Evaluations ``n`` per solution (each followed by its scoring).
        history_rounds: ``κ``: how many most recent rounds a solver (and, in the paper's
            schedule, an evaluator) sees.
        schedule: ``"paper"`` or ``"released"`` (see the module docstring).
        num_references: Released schedule: discussions of the previous round shown to a solver.
        evaluation: ``False`` gives the *without evaluation* ablation.
        scoring: ``False`` gives the *without scoring* ablation (approving every solution pays
            every agent 1, the reward hacking the paper reports: needs
            ``allow_reward_holes=True``).
        evaluator_sees_history: Whether evaluators see the discussion; ``None`` means the
            schedule's own choice (paper: yes; released code: no).
        task: Name of the task source (:func:`llm_envs.tasks.load_task_source`).
        split: Split of the task source.
        task_kwargs: Extra keyword arguments for the task source.
        max_shown_chars: Longest stretch of one agent's text echoed into another's prompt.
        score_parsing: ``"strict"`` (the last ``<score>`` the scorer wrote itself must hold
            1, 2 or 3; anything else is the −1 format failure, the paper's penalty) or
            ``"released"`` (the released code: the first ``<score>N</score>`` clamped to 1..3,
            else the last digit 1-3 in the text, else 2). ``"released"`` lets a score quoted
            from the solution or the evaluation decide the reward, so it needs
            ``allow_reward_holes=True``.
        scorers: ``"others"`` (each scorer drawn among the agents who wrote neither the
            solution nor the evaluation it scores) or ``"any"`` (the paper's and released
            code's draw over the whole pool: an agent may score its own solution or critique
            and pay itself, so it needs ``allow_reward_holes=True``).
        allow_reward_holes: Accept an option that lets a strategy other than solving earn
            more (docs/papers.md, "Options that open a reward hole").
    """

    num_agents: int = 4
    num_rounds: int | None = None
    num_evaluations: int = 1
    history_rounds: int = 2
    schedule: str = "paper"
    num_references: int = 2
    evaluation: bool = True
    scoring: bool = True
    evaluator_sees_history: bool | None = None
    task: str = "arithmetic"
    split: str = "train"
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    max_shown_chars: int = 16_000
    score_parsing: str = "strict"
    scorers: str = "others"
    allow_reward_holes: bool = False


#: Tags of the scorer and the evaluator: rewritten in any agent text another agent is shown.
PAYING_TAGS = ("score", "judgment")
SCORE_PARSINGS = ("strict", "released")


@dataclass
class _Solution:
    agent: str
    text: str
    answer: str | None
    correct: bool | None
    record: ActionRecord
    shown: tuple[tuple[int, int], ...] = ()


@dataclass
class _Evaluation:
    agent: str
    text: str
    record: ActionRecord
    judgment: bool | None = None


class ForumEnv(TextEnv):
    """CoMAS forum discussion among a pool of agents; see the module docstring."""

    metadata = {**TextEnv.metadata, "name": "forum_v0"}
    config_class = ForumConfig
    reset_options = PROBLEM_OPTIONS

    def __init__(
        self,
        config: ForumConfig | None = None,
        *,
        render_mode: str | None = None,
        sandbox: Any = None,
        task_source: TaskSource | None = None,
        **overrides: Any,
    ) -> None:
        """Args:
        config: A :class:`ForumConfig`; keyword ``overrides`` replace its fields.
        render_mode: ``"ansi"``, ``"human"`` or ``None``.
        sandbox: Unused (ground truth of code tasks is not computed); accepted for a uniform
            constructor and shared with clones.
        task_source: A ready task source; replaces ``config.task``.
        """
        self.config: ForumConfig = self._build_config(config, overrides)
        cfg = self.config
        if cfg.num_agents < 1 or cfg.num_evaluations < 1 or cfg.history_rounds < 0:
            raise ValueError("num_agents and num_evaluations must be >= 1, history_rounds >= 0")
        if cfg.max_shown_chars < 1:  # (a negative one was accepted and cut text from the end)
            raise ValueError(f"max_shown_chars must be >= 1, got {cfg.max_shown_chars}")
        if cfg.schedule not in ("paper", "released"):
            raise ValueError(f"schedule must be 'paper' or 'released', got {cfg.schedule!r}")
        if not cfg.evaluation and not cfg.scoring:
            raise ValueError("at least one of evaluation and scoring must be enabled")
        if cfg.score_parsing not in SCORE_PARSINGS:
            raise ValueError(
                f"score_parsing must be one of {SCORE_PARSINGS}, got {cfg.score_parsing!r}"
            )
        if not cfg.scoring and not cfg.allow_reward_holes:
            raise ValueError(
                "scoring=False (the 'w/o scoring' ablation) opens a reward hole: with consistency "
                "as the evaluators' reward, approving every solution, right or wrong, pays the "
                "solver and every evaluator 1 (the reward hacking the paper reports); set "
                "allow_reward_holes=True to accept this"
            )
        if cfg.score_parsing == "released" and not cfg.allow_reward_holes:
            raise ValueError(
                "score_parsing='released' opens a reward hole: the released code reads the "
                "first <score> in the scorer's reply, so a solution (or an evaluation) that "
                "carries its own <score>3</score> (or <score>1</score>) and is quoted by the "
                "scorer decides its own reward; set allow_reward_holes=True to accept this"
            )
        if cfg.scorers == "any" and cfg.scoring and not cfg.allow_reward_holes:
            raise ValueError(
                "scorers='any' (the paper's uniform draw of the scorer) opens a reward hole: "
                "an agent drawn to score its own solution or its own evaluation decides its own "
                "reward (a <score>3</score> for its solution, <score>1</score> for its critique), "
                "whatever the solution is worth; set allow_reward_holes=True to accept this"
            )
        rules.check_scorers(cfg.scorers, cfg.num_agents, cfg.evaluation, cfg.scoring)
        if cfg.num_rounds is None:
            self.num_rounds = 2 * cfg.num_agents if cfg.schedule == "paper" else 2
        else:
            self.num_rounds = int(cfg.num_rounds)
        if self.num_rounds < 1:
            raise ValueError("num_rounds must be >= 1")
        self.evaluator_sees_history = (
            cfg.evaluator_sees_history
            if cfg.evaluator_sees_history is not None
            else cfg.schedule == "paper"
        )
        self.sandbox = sandbox
        self.task_source = resolve_task_source(cfg, task_source)
        super().__init__([f"agent_{k}" for k in range(cfg.num_agents)], render_mode=render_mode)
        self.problem: Problem | None = None
        self.schedule: list[rules.Step] = []
        self.step_index = 0
        self.solutions: dict[tuple[int, int], _Solution] = {}
        self.evaluations: dict[tuple[int, int, int], _Evaluation] = {}
        self.scores: dict[tuple[int, int, int], int | None] = {}

    # ------------------------------------------------------------------ episode
    def _start_episode(self, options: dict[str, Any]) -> str:
        cfg = self.config
        self.problem = choose_problem(self.task_source, options, self.np_random)
        if cfg.schedule == "paper":
            self.schedule = rules.paper_schedule(
                self.np_random,
                cfg.num_agents,
                self.num_rounds,
                cfg.num_evaluations,
                evaluation=cfg.evaluation,
                scoring=cfg.scoring,
                scorers=cfg.scorers,
            )
        else:
            self.schedule = rules.released_schedule(
                self.np_random,
                cfg.num_agents,
                self.num_rounds,
                cfg.num_evaluations,
                cfg.num_references,
                evaluation=cfg.evaluation,
                scoring=cfg.scoring,
                scorers=cfg.scorers,
            )
        self.step_index = 0
        self.solutions = {}
        self.evaluations = {}
        self.scores = {}
        return self._agent_of(self.schedule[0])

    @property
    def current_step(self) -> rules.Step | None:
        """The step being played now (``None`` once the episode is over)."""
        if self._episode_over or not self.schedule or self.step_index >= len(self.schedule):
            return None
        return self.schedule[self.step_index]

    def _apply_action(self, agent: str, action: str) -> str | None:
        step = self.schedule[self.step_index]
        if step.kind == "solve":
            self._play_solution(agent, action, step)
        elif step.kind == "evaluate":
            self._play_evaluation(agent, action, step)
        else:
            self._play_scoring(agent, action, step)
        self.step_index += 1
        self.turn += 1
        if self.step_index == len(self.schedule):
            self._end_episode()
            return None
        return self._agent_of(self.schedule[self.step_index])

    def _play_solution(self, agent: str, action: str, step: rules.Step) -> None:
        answer, correct = self._grade(action)
        record = self._add_record(
            agent,
            action,
            parsed={"answer": answer},
            format_ok=answer is not None or self._answer_format() == "code",
            info={"round": step.round, "slot": step.slot, "correct": correct},
        )
        self.solutions[(step.round, step.slot)] = _Solution(
            agent, action, answer, correct, record, tuple(self._history_slots(step))
        )

    def _play_evaluation(self, agent: str, action: str, step: rules.Step) -> None:
        judgment = None if self.config.scoring else rules.parse_judgment(action)
        record = self._add_record(
            agent,
            action,
            parsed={"judgment": judgment} if not self.config.scoring else {},
            format_ok=self.config.scoring or judgment is not None,
            info={"round": step.round, "slot": step.slot, "evaluation": step.evaluation},
        )
        key = (step.round, step.slot, step.evaluation)
        self.evaluations[key] = _Evaluation(agent, action, record, judgment)
        if self.config.scoring:
            return
        # Without scoring, the vote on a solution is complete after its n-th evaluation.
        judged = [
            self.evaluations.get((step.round, step.slot, j))
            for j in range(self.config.num_evaluations)
        ]
        if any(e is None for e in judged):
            return
        solver, evaluators = rules.vote_rewards([e.judgment for e in judged])  # type: ignore[union-attr]
        self._credit(self.solutions[(step.round, step.slot)].record, "vote", solver)
        for evaluation, reward in zip(judged, evaluators, strict=True):
            self._credit(evaluation.record, "consistency", reward)  # type: ignore[union-attr]

    def _play_scoring(self, agent: str, action: str, step: rules.Step) -> None:
        score: int | None
        if self.config.score_parsing == "released":
            score = rules.parse_score_released(action)
        else:
            score = rules.parse_score(action)
        record = self._add_record(
            agent,
            action,
            parsed={"score": score},
            format_ok=score is not None,
            info={"round": step.round, "slot": step.slot, "evaluation": step.evaluation},
        )
        key = (step.round, step.slot, step.evaluation)
        self.scores[key] = score
        self._credit(record, "format", rules.scorer_reward(score))
        # The solution earns the mean over its n scorings, so its reward stays in [0, 1]; each
        # evaluator earns its scoring's (3 − τ̂)/2 with the same share, so that every scoring
        # pays the team 1/n whatever it scores (with the evaluator's full (3 − τ̂)/2, scoring
        # every solution 1 paid the team n per solution: twice the reference's return at n = 2).
        solution = self.solutions[(step.round, step.slot)]
        share = 1.0 / self.config.num_evaluations
        self._credit(solution.record, "score", share * rules.solver_reward(score))
        if self.config.evaluation:
            self._credit(self.evaluations[key].record, "score", share * rules.evaluator_reward(score))

    # ------------------------------------------------------------------ helpers
    def _agent_of(self, step: rules.Step) -> str:
        return self.possible_agents[step.agent]

    def _answer_format(self) -> str:
        return "answer" if self.problem is None or self.problem.style == "answer" else "code"

    def _grade(self, solution: str) -> tuple[str | None, bool | None]:
        """The final answer of a solution and its ground-truth correctness (metrics only)."""
        if self._answer_format() == "code":
            return None, None  # judging code needs the golden tests in a sandbox: not logged
        answer = extract_boxed(solution)
        if self.problem is None or self.problem.answer is None:
            return answer, None
        return answer, answer is not None and check_answer(answer, self.problem.answer)

    def _discussion(self, slots: list[tuple[int, int]]) -> str:
        """Render the (solution, evaluations) of the given (round, slot) discussions."""
        shown = []
        for round_index, slot in slots:
            solution = self.solutions.get((round_index, slot))
            if solution is None:
                continue
            texts = [
                self.evaluations[(round_index, slot, j)].text
                for j in range(self.config.num_evaluations)
                if (round_index, slot, j) in self.evaluations
            ]
            shown.append((_shown(solution.text), [_shown(text) for text in texts]))
        return rules.format_discussions(shown, self.config.max_shown_chars)

    def _history_slots(self, step: rules.Step) -> list[tuple[int, int]]:
        """Discussions a solver (or, in the paper's schedule, an evaluator) sees at ``step``."""
        if step.kind != "solve":
            # An evaluator sees what the solver of the solution under evaluation saw.
            return list(self.solutions[(step.round, step.slot)].shown)
        if self.config.schedule == "released":
            return [(step.round - 1, k) for k in step.references]
        first = max(0, step.round - self.config.history_rounds)
        return [(r, 0) for r in range(first, step.round)]

    # ------------------------------------------------------------------ observations
    def _step_info(self, agent: str) -> dict[str, Any]:
        info = super()._step_info(agent)
        # Ground truth for metrics only (never reward): the latest solution's correctness, once
        # the episode is over. During play ``last()`` hands every agent its ``infos``, and a
        # trainer that shows them to its policy would have shown scorers the answer key.
        if self._episode_over:
            latest = max(self.solutions.values(), key=lambda s: s.record.index, default=None)
            info["last_solution_correct"] = None if latest is None else latest.correct
        return info

    def _role(self, agent: str) -> str:
        step = self.current_step
        if step is None or agent != self.agent_selection:
            return "idle"
        return {"solve": "solver", "evaluate": "evaluator", "score": "scorer"}[step.kind]

    def _instruction(self, agent: str) -> str:
        role = self._role(agent)
        return {
            "solver": rules.SOLVER_INSTRUCTION,
            "evaluator": rules.EVALUATOR_INSTRUCTION,
            "scorer": rules.SCORER_INSTRUCTION,
        }.get(role, rules.IDLE_INSTRUCTION)

    def _prompt(self, agent: str) -> str:
        step = self.current_step
        if step is None:
            return "The discussion is over."
        if agent != self.agent_selection:
            role = {"solve": "solution", "evaluate": "evaluation", "score": "scoring"}[step.kind]
            return (
                f"Waiting: {self.agent_selection} is writing the {role} of round {step.round + 1}."
            )
        assert self.problem is not None
        problem = self.problem.prompt
        limit = self.config.max_shown_chars
        if step.kind == "solve":
            return rules.solver_prompt(
                problem, self._discussion(self._history_slots(step)), self._answer_format()
            )
        solution = rules.clip_text(_shown(self.solutions[(step.round, step.slot)].text), limit)
        if step.kind == "evaluate":
            discussion = (
                self._discussion(self._history_slots(step))
                if self.evaluator_sees_history
                else None
            )
            return rules.evaluator_prompt(
                problem, discussion, solution, verdict=not self.config.scoring
            )
        evaluation = None
        if self.config.evaluation:
            evaluation = rules.clip_text(
                _shown(self.evaluations[(step.round, step.slot, step.evaluation)].text), limit
            )
        return rules.scorer_prompt(problem, solution, evaluation)

    # ------------------------------------------------------------------ scripted play
    def reference_action(self, agent: str) -> str:
        """Honest play in every role: a correct solution, a critique that finds the flaw of a
        wrong solution (and none in a right one), and an honest score (3 right, 1 wrong)."""
        return self.scripted_action(agent)

    def scripted_action(
        self,
        agent: str,
        *,
        solver: str = "correct",
        critic: str = "honest",
        scorer: str = "honest",
    ) -> str:
        """A scripted action for the acting ``agent``; reads hidden state (the true answer).

        Args:
            solver: ``"correct"`` (the true answer in ``\\boxed{}``), ``"wrong"`` (a wrong
                boxed answer) or ``"unboxed"`` (no final answer).
            critic: ``"honest"`` (finds the flaw of a wrong solution, reports none in a right
                one), ``"misses"`` (reports no error, whatever the solution) or ``"harsh"``
                (claims a fatal error, whatever the solution).
            scorer: ``"honest"`` (3 for a correct solution, 1 for a wrong one), ``"lenient"``
                (always 2), ``"garbage"`` (no ``<score>`` tag: the −1 path) or ``"invalid"``
                (``<score>4</score>``: out of range, also a parse failure).
        """
        step = self.current_step
        if step is None or agent != self.agent_selection:
            return ""
        assert self.problem is not None
        truth = self.problem.answer
        if step.kind == "solve":
            return _scripted_solution(solver, truth, self.problem.solution)
        solution = self.solutions[(step.round, step.slot)]
        if step.kind == "evaluate":
            return _scripted_critique(
                critic, solution.answer, solution.correct, truth, not self.config.scoring
            )
        return _scripted_score(scorer, solution.correct)

    def random_action(self, agent: str, rng: Any) -> str:
        """A well-formed but uninformed action: a random boxed number, a random verdict, a
        random score."""
        step = self.current_step
        if step is None:
            return ""
        if step.kind == "solve":
            return f"I guess the answer. \\boxed{{{int(rng.integers(-100, 100))}}}"
        if step.kind == "evaluate":
            verdict = "correct" if rng.random() < 0.5 else "incorrect"
            return (
                f"I skimmed it. <judgment>{verdict}</judgment>"
                if not self.config.scoring
                else "Looks fine."
            )
        return f"Random. <score>{int(rng.integers(1, 4))}</score>"

    # ------------------------------------------------------------------ metrics
    def _episode_metrics(self) -> dict[str, float]:
        graded = [s for s in self.solutions.values() if s.correct is not None]
        last_round = max((r for r, _ in self.solutions), default=0)
        final = [s.correct for (r, _), s in sorted(self.solutions.items()) if r == last_round]
        known = bool(final) and all(c is not None for c in final)
        parsed_scores = [s for s in self.scores.values() if s is not None]
        metrics = {
            "success": (sum(bool(c) for c in final) / len(final)) if known else 0.0,
            "ground_truth_known": float(known),
            "accuracy": (sum(bool(s.correct) for s in graded) / len(graded)) if graded else 0.0,
            "first_round_accuracy": _round_accuracy(self.solutions, 0),
            "solutions": float(len(self.solutions)),
            "score_parse_failures": float(sum(s is None for s in self.scores.values())),
            "mean_score": (sum(parsed_scores) / len(parsed_scores)) if parsed_scores else 0.0,
        }
        judgments = [e.judgment for e in self.evaluations.values()]
        if not self.config.scoring:
            metrics["judgment_parse_failures"] = float(sum(j is None for j in judgments))
        return metrics

    def _describe_episode(self) -> str:
        if self.problem is None:
            return ""
        cfg = self.config
        lines = [
            f"schedule={cfg.schedule} agents={cfg.num_agents} rounds={self.num_rounds} "
            f"evaluations={cfg.num_evaluations} history={cfg.history_rounds} "
            f"evaluation={cfg.evaluation} scoring={cfg.scoring}",
            f"Problem ({self.problem.id}): {self.problem.prompt}",
        ]
        if self.problem.answer is not None:
            lines.append(f"(ground truth, metrics only: {self.problem.answer})")
        return "\n".join(lines)

    def _shared_resources(self) -> list[Any]:
        return [r for r in (self.task_source, self.sandbox) if r is not None]

    # ------------------------------------------------------------------ reward contract
    def reference_is_ceiling(self, agent: str | None = None) -> bool:
        """Agents grade each other (a scorer's score pays the solver what it costs the
        evaluator): only the team's return is bounded by the reference agents'."""
        return agent is None

    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """A solution earns the mean of its scorings' ``(τ̂ − 1)/2`` (or the vote's approval
        share), an evaluation ``(3 − τ̂)/(2n)`` (or its consistency, −1 without a judgment), a
        scoring 0 or the −1 format penalty: every action's reward lies in [−1, 1].
        docs/envs/forum.md states the same bounds."""
        return (-1.0, 1.0)


def _shown(text: str) -> str:
    """An agent's text as another agent sees it (:func:`rules.shown_to_reader`): its score and
    verdict tags rewritten and its fences and quote marks broken up, so no agent can write a tag
    that a scorer or an evaluator quoting it would be paid by, nor make their own look quoted."""
    return rules.shown_to_reader(text, PAYING_TAGS)


def _round_accuracy(solutions: dict[tuple[int, int], _Solution], round_index: int) -> float:
    graded = [
        s.correct for (r, _), s in solutions.items() if r == round_index and s.correct is not None
    ]
    return (sum(graded) / len(graded)) if graded else 0.0


def _scripted_solution(behaviour: str, truth: str | None, worked: str | None) -> str:
    if behaviour not in ("correct", "wrong", "unboxed"):
        raise ValueError(f"unknown solver behaviour {behaviour!r}")
    if truth is None:
        return "I cannot determine the final answer of this problem."
    steps = (
        f"Working: {worked.strip()}\n" if worked else "I work through the problem step by step.\n"
    )
    if behaviour == "correct":
        return f"{steps}The final answer is \\boxed{{{truth}}}."
    if behaviour == "wrong":
        wrong = rules.wrong_answer(truth)
        return f"I work through the problem step by step.\nThe final answer is \\boxed{{{wrong}}}."
    return "I work through the problem step by step but do not commit to a final answer."


def _scripted_critique(
    behaviour: str, answer: str | None, correct: bool | None, truth: str | None, verdict: bool
) -> str:
    if behaviour not in ("honest", "misses", "harsh"):
        raise ValueError(f"unknown critic behaviour {behaviour!r}")
    finds_flaw = {"honest": correct is False, "misses": False, "harsh": True}[behaviour]
    if finds_flaw:
        if correct is False and answer is None:
            text = "Fatal error: the solution never states a final answer in \\boxed{}."
        elif correct is False:
            text = (
                f"Fatal error: the final answer {answer} is wrong; "
                f"the correct final answer is {truth}."
            )
        else:
            text = "Fatal error: I believe the final answer is wrong."
    else:
        text = "I checked every step carefully and found no error."
    if verdict:
        text += f" <judgment>{'incorrect' if finds_flaw else 'correct'}</judgment>"
    return text


def _scripted_score(behaviour: str, correct: bool | None) -> str:
    if behaviour == "honest":
        score = 2 if correct is None else (3 if correct else 1)
        return f"The evaluation is {'not ' if score == 3 else ''}effective. <score>{score}</score>"
    if behaviour == "lenient":
        return "Only minor issues. <score>2</score>"
    if behaviour == "garbage":
        return "Score: three out of three, I suppose."
    if behaviour == "invalid":
        return "Outstanding! <score>4</score>"
    raise ValueError(f"unknown scorer behaviour {behaviour!r}")
