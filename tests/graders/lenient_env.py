"""A third party's environment for the audit tests: one agent answers a sum in ``\\boxed{}``.

Its grader has a hole on purpose: it pays an answer when the truth appears anywhere in it, so
``\\boxed{7, -987654321}`` is paid like ``\\boxed{7}``. It is not ours: the audit reaches it only
through its ``audit_surface()`` hook. With ``strict=True`` the grader compares the whole answer.
With ``broken=True`` its grader fails on every step as a sandbox that fails every run would
(nothing can be graded). With ``stall_pays=True`` each wrong answer earns 0.6 and the episode
goes on (up to three turns): delay pays more than answering right at once (1.0).

The other options make holes the audit must not pass: ``wrong_reward`` is what a wrong answer
earns (1.0: any answer is paid; 2.0: wrong pays more than right), ``never_ends`` keeps the
episode going after every answer, ``no_reference`` removes the reference agent, and
``no_ceiling`` says the reference return is no agent's ceiling (the environment declares no
reward bounds either, so nothing judges a return).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_envs.audit import Target
from llm_envs.core import TextEnv
from llm_envs.core.errors import SandboxFailure
from llm_envs.verifiers.math import extract_boxed


@dataclass
class LenientConfig:
    strict: bool = False
    broken: bool = False
    stall_pays: bool = False
    wrong_reward: float = 0.0
    never_ends: bool = False
    no_reference: bool = False
    no_ceiling: bool = False


class LenientSurface:
    def __init__(self, env: LenientEnv) -> None:
        self.env = env

    def roles(self) -> dict[str, str]:
        return {"solver": "answer"}

    def target(self, agent: str) -> Target:
        return Target(role="answer", answer=str(self.env.a + self.env.b))

    def action(self, agent: str, text: str) -> str:
        return f"\\boxed{{{text}}}"


class LenientEnv(TextEnv):
    metadata = {**TextEnv.metadata, "name": "lenient_v0"}
    config_class = LenientConfig

    def __init__(self, config: LenientConfig | None = None, *, render_mode=None, **overrides):
        self.config = self._build_config(config, overrides)
        super().__init__(["solver"], render_mode=render_mode)

    def _start_episode(self, options):
        self.a, self.b = (int(x) for x in self.np_random.integers(1, 50, size=2))
        return "solver"

    def _apply_action(self, agent, action):
        if self.config.broken:
            raise SandboxFailure("the grader's sandbox failed (on purpose)")
        answer = extract_boxed(action) or ""
        truth = str(self.a + self.b)
        paid = answer.strip() == truth if self.config.strict else truth in answer
        record = self._add_record(agent, action, format_ok=bool(answer), parsed={"answer": answer})
        self.turn += 1
        if self.config.stall_pays and not paid:
            self._credit(record, "progress", 0.6)
            if self.turn < 3:
                return "solver"
        self._credit(record, "correct", 1.0 if paid else self.config.wrong_reward)
        if self.config.never_ends:
            return "solver"
        self._end_episode()
        return None

    def _instruction(self, agent):
        return "Add the two numbers; answer in \\boxed{}."

    def _prompt(self, agent):
        return f"{self.a} + {self.b} = ?"

    def reference_action(self, agent):
        if self.config.no_reference:
            raise NotImplementedError("this environment ships no reference agent")
        return f"\\boxed{{{self.a + self.b}}}"

    def reference_is_ceiling(self, agent=None):
        return not self.config.no_ceiling

    def audit_surface(self) -> LenientSurface:
        return LenientSurface(self)
