"""``llm/ReasonerTool-v0``: Stronger-MAS math with a reasoning agent and a Python tool agent.

Each turn the reasoner reasons step by step and boxes an answer; the tool agent writes a
program whose printed answer is taken from the sandbox run. Answers are checked against the
ground truth with :func:`llm_envs.verifiers.math.check_answer` (a fast exact path, then
math-verify under our own deadline). Within a turn the reasoner acts first, but the tool
agent's prompt shows only earlier turns, so a turn is simultaneous in effect, as in the paper.
A program the sandbox failed to run is never scored (``step`` raises ``SandboxFailure``).

The spec (agents, actions, observations, rewards, episode end, metrics) and the version history
are in docs/envs/reasoner_tool.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

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
    resolve_task_source,
    wrong_sign_holes,
)
from llm_envs.envs.grading import Grading
from llm_envs.envs.reasoner_tool import rules
from llm_envs.tasks import Problem, TaskSource
from llm_envs.verifiers.code import compile_error, extract_code
from llm_envs.verifiers.math import check_answer


@dataclass
class ReasonerToolConfig:
    """Options of :class:`ReasonerToolEnv` (defaults follow Stronger-MAS).

    Attributes:
        task: Task source name (``"arithmetic"``, ``"gsm8k"``, ``"math500"``, ``"aime2024"``,
            ``"aime2025"``, ``"olympiadbench"``); see docs/tasks.md.
        split: ``"train"``, ``"validation"`` or ``"test"``.
        task_path: A local JSONL/parquet file or directory in the dataset's hub schema.
        task_kwargs: Extra options of the task source (``split_policy``, ``level``, ...).
        agents: ``"multi"`` (reasoner and tool) or ``"single"`` (the reasoner alone, one turn).
        max_turns: Turn limit T. Paper: 4.
        reward_mode: ``"dense"`` (shaped) or ``"outcome"`` (team outcome only).
        turn_rewards: ``"change"`` (default): each action is paid the change of its agent's
            reward level since that agent's previous action, so a solved task is paid once
            and stalling never pays; ``"paper"``: every action is paid its level (the paper's
            per-turn reward; refused for multi-turn teams unless ``allow_reward_holes``).
        allow_reward_holes: Allow an option that lets a strategy other than solving earn more
            (``turn_rewards="paper"``, a negative local weight); see docs/papers.md.
        alpha: Weight of the team reward in ``alpha * r_team + r_local``. Paper: 1. Must be
            >= 0 (a negative team weight pays a wrong answer).
        reasoner_weights: Reasoner local weights (0.2 format, 0.8 correct); a negative weight
            pays failing and needs ``allow_reward_holes``.
        tool_weights: Tool local weights (0.1 builds, 0.1 runs, 0.8 correct); likewise.
        program_time_s: Wall-clock limit of one tool program run. The released code: 20 s.
        program_memory_mb: Memory limit of one tool program run.
        answer_timeout_s: Deadline of one math-verify comparison (an overrun is "incorrect").
        shown_head_chars: Characters of each earlier reply shown from its start (paper: 500).
        shown_tail_chars: ... and from its end (paper: 500).
    """

    task: str = "arithmetic"
    split: str = "train"
    task_path: str | None = None
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    agents: str = "multi"
    max_turns: int = 4
    reward_mode: str = "dense"
    turn_rewards: str = "change"
    allow_reward_holes: bool = False
    alpha: float = 1.0
    reasoner_weights: rules.ReasonerWeights = field(
        default_factory=rules.ReasonerWeights
    )
    tool_weights: rules.ToolWeights = field(default_factory=rules.ToolWeights)
    program_time_s: float = 10.0
    program_memory_mb: int = 512
    answer_timeout_s: float = 5.0
    shown_head_chars: int = 500
    shown_tail_chars: int = 500

    def validate(self) -> None:
        check_team_options(self)
        check_turn_rewards(self)
        check_reward_holes(
            self,
            wrong_sign_holes(self.reasoner_weights, gains=("format", "correct"))
            + wrong_sign_holes(self.tool_weights, gains=("builds", "runs", "correct")),
        )
        if (
            self.program_time_s <= 0
            or self.program_memory_mb < 1
            or self.answer_timeout_s <= 0
        ):
            raise ValueError(
                "program_time_s, program_memory_mb and answer_timeout_s must be positive"
            )
        check_split(self.split)


class ReasonerToolEnv(TimedSandboxUser, TextEnv):
    """Reasoner–Tool math (Stronger-MAS); see the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {
        **TextEnv.metadata,
        "name": "reasoner_tool_v0",
        # Within a turn the tool agent sees only earlier turns and the episode ends after the
        # turn's last agent, so each turn is a simultaneous move (PettingZoo's parallel flag).
        "is_parallelizable": True,
    }
    config_class = ReasonerToolConfig
    reset_options = PROBLEM_OPTIONS
    grades_ahead = True  # every program run goes through _grade (llm_envs.envs.grading)

    def __init__(
        self,
        config: ReasonerToolConfig | None = None,
        *,
        render_mode: str | None = None,
        sandbox: Any = None,
        task_source: TaskSource | None = None,
        **overrides: Any,
    ) -> None:
        """Args:
        config: A :class:`ReasonerToolConfig`; keyword ``overrides`` replace its fields.
        render_mode: ``"ansi"``, ``"human"`` or ``None``.
        sandbox: A :class:`sandboxes.Sandbox` or a spec string for
            ``sandboxes.shared_sandbox``; ``None`` uses ``shared_sandbox("auto")`` on first use.
        task_source: A ready task source; replaces ``config.task``.
        """
        self.config: ReasonerToolConfig = self._build_config(config, overrides)
        cfg = self.config
        cfg.validate()
        self.task_source = resolve_task_source(cfg, task_source)
        self.multi_agent = cfg.agents == "multi"
        self._keep_sandbox(sandbox)
        super().__init__(
            ["reasoner", "tool"] if self.multi_agent else ["reasoner"],
            render_mode=render_mode,
        )
        self.problem: Problem | None = None
        self.reasoner_history: list[rules.ReasonerEntry] = []
        self.tool_history: list[rules.ToolEntry] = []
        self._reasoner_correct = False
        self._agreed = False
        self._tool_correct = False
        self._sandbox_seconds = 0.0
        self._reward_levels: dict[str, tuple[float, float]] = {}

    def _shared_resources(self) -> list[Any]:
        return [self.task_source, *self._sandbox_if_started()]

    # ------------------------------------------------------------------ episode
    def _start_episode(self, options: dict[str, Any]) -> str:
        self.problem = choose_problem(self.task_source, options, self.np_random)
        if self.problem.answer is None:
            raise ValueError(f"problem {self.problem.id!r} has no ground-truth answer")
        self.reasoner_history = []
        self.tool_history = []
        self._reasoner_correct = False
        self._agreed = False
        self._tool_correct = False
        self._sandbox_seconds = 0.0
        self._reward_levels = {}  # each agent's (team, local) level so far: turn_rewards="change"
        return "reasoner"

    def _correct(self, answer: str | None) -> bool:
        assert self.problem is not None and self.problem.answer is not None
        return answer is not None and check_answer(
            answer, self.problem.answer, timeout_s=self.config.answer_timeout_s
        )

    def _apply_action(self, agent: str, action: str) -> str | None:
        if agent == "reasoner":
            return self._reasoner_step(action)
        return self._tool_step(action)

    def _reasoner_step(self, action: str) -> str | None:
        cfg = self.config
        answer = rules.reasoner_answer(action)
        record = self._add_record(
            "reasoner", action, parsed={"answer": answer}, format_ok=answer is not None
        )
        correct = self._correct(answer)
        self._reasoner_correct = correct
        record.info["correct"] = correct
        credit_team_and_local(
            self,
            record,
            float(correct),
            rules.reasoner_local_reward(answer is not None, correct, cfg.reasoner_weights),
        )
        self.reasoner_history.append(rules.ReasonerEntry(action, answer))
        if not self.multi_agent:
            self.turn += 1
            self._end_episode()  # one-shot: the single reasoner's episode is its one turn
            return None
        return "tool"

    def _tool_step(self, action: str) -> str | None:
        cfg = self.config
        # The last ```python block, else the last fenced block, else (as the released code does)
        # the whole reply as the program: what is not Python then fails to compile.
        fenced = extract_code(action)
        code = fenced if fenced is not None else (action.strip() or None)
        builds = code is not None and compile_error(code, "<tool>") is None
        runs = False
        output = ""
        if builds:
            import sandboxes

            # A sandbox failure raises SandboxFailure here, before any state changes: it is
            # not the program's outcome, so it is never scored.
            with self._waiting_for_sandbox():
                result = self._grade(
                    [
                        Grading.run(
                            code,
                            limits=sandboxes.Limits(
                                time_s=cfg.program_time_s, memory_mb=cfg.program_memory_mb
                            ),
                        )
                    ]
                )[0]
            runs = result.ok
            output = result.stdout
            if not result.ok:
                reason = (
                    "timed out"
                    if result.timed_out
                    else "out of memory"
                    if result.oom
                    else f"exit status {result.exit_code}"
                )
                tail = rules.stable_traceback(
                    "\n".join(result.stderr.strip().splitlines()[-6:])
                )
                output = f"{output}\n[the program failed: {reason}]\n{tail}".strip()
        elif code is not None:
            output = f"[the code does not compile: {compile_error(code, '<tool>')}]"
        answer = rules.tool_answer(output) if runs else None
        correct = self._correct(answer)
        self._tool_correct = correct
        record = self._add_record(
            "tool",
            action,
            parsed={"code": code, "answer": answer},
            format_ok=fenced is not None,
            info={
                "builds": builds,
                "runs": runs,
                "correct": correct,
                "output": output[-2000:],
            },
        )
        credit_team_and_local(
            self,
            record,
            float(self._reasoner_correct),
            rules.tool_local_reward(builds, runs, correct, cfg.tool_weights),
        )
        self.tool_history.append(rules.ToolEntry(code, output, answer))
        reasoner = self.reasoner_history[-1].answer
        self._agreed = (
            answer is not None
            and reasoner is not None
            and check_answer(answer, reasoner, timeout_s=cfg.answer_timeout_s)
        )
        record.info["agreed"] = self._agreed
        return end_turn(self, self._agreed, "reasoner")

    # ------------------------------------------------------------------ observations
    def _instruction(self, agent: str) -> str:
        if agent == "tool":
            return rules.TOOL_INSTRUCTION
        return (
            rules.REASONER_INSTRUCTION_MULTI
            if self.multi_agent
            else rules.REASONER_INSTRUCTION_SINGLE
        )

    def _prompt(self, agent: str) -> str:
        assert self.problem is not None
        if self._episode_over:
            return "The episode is over."
        # Only completed turns are shown: the tool never sees this turn's reasoning.
        done = self.turn
        history = rules.history_section(
            self.reasoner_history[:done],
            self.tool_history[:done],
            self.config.shown_head_chars,
            self.config.shown_tail_chars,
        )
        if agent == "reasoner":
            return rules.reasoner_prompt(self.problem, history)
        return rules.tool_prompt(self.problem, history)

    def _describe_episode(self) -> str:
        if self.problem is None:
            return ""
        return f"problem {self.problem.id} (answer {self.problem.answer})\n{self.problem.prompt}"

    def _episode_metrics(self) -> dict[str, float]:
        metrics = {"success": float(self._reasoner_correct)}
        if self.multi_agent:
            metrics["tool_correct"] = float(self._tool_correct)
            metrics["agreed"] = float(self._agreed)
        return metrics

    # ------------------------------------------------------------------ scripted play
    def reference_action(self, agent: str) -> str:
        """Reasoner: the worked solution with the true answer boxed. Tool: a program printing
        the true answer (the source's own program when it has one)."""
        assert self.problem is not None
        if agent == "reasoner":
            return rules.reference_reasoner_reply(self.problem)
        return rules.reference_tool_reply(self.problem)

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        """Well-formed but uninformed: a random boxed integer; a program printing one."""
        value = int(rng.integers(-100, 1000))
        if agent == "reasoner":
            return f"Let me think step by step. I estimate the result. The answer is \\boxed{{{value}}}."
        return f"```python\nprint({value})\n```"

    # ------------------------------------------------------------------ reward contract
    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """``alpha·r_team + r_local``: the team term is 1 or 0 (the answers agree on the
        truth), the local term a weighted checklist of the agent's weights (dropped in outcome
        mode), is the action's *level*; with ``turn_rewards="change"`` (the default) an action is
        paid the change of its level, so ``[−high, high]`` for levels in ``[0, high]``
        (:func:`llm_envs.envs._common.turn_reward_bounds`). docs/envs/reasoner_tool.md states the same
        bounds."""
        cfg = self.config
        return level_reward_bounds(cfg, cfg.reasoner_weights if agent == "reasoner" else cfg.tool_weights)
