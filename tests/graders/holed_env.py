"""A third party's environment with one reward hole chosen by ``hole``, for the audit tests.

One solver answers a sum in ``\\boxed{}`` (a ``checker`` agent exists for ``checker_first``);
each hole is one the audit once passed with exit 0:

* ``tolerant``: an answer within 5% of the truth is paid in full (an off-by-one pays);
* ``empty_pays``: a reply without a box is paid like the right answer;
* ``right_fails``: every answer earns 1.0, but the grader fails (``SandboxFailure``) on the
  right answer as the audit spells it, so only wrong answers are ever scored;
* ``memo``: the truth anywhere in the box pays, and each verdict is kept per turn in a cache
  that clones share (so a clone sees its sibling's verdict);
* ``checker_first``: the same lenient grader, but each step first writes the checker's strict
  record, then the solver's.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_envs.core import TextEnv
from llm_envs.core.errors import SandboxFailure
from llm_envs.verifiers.math import extract_boxed
from tests.graders.lenient_env import LenientEnv


@dataclass
class HoledConfig:
    hole: str = "tolerant"


class _Verdicts:
    def __init__(self) -> None:
        self.by_turn: dict[tuple[str, int], float] = {}


class HoledEnv(LenientEnv):
    """The lenient environment's sum, surface and prompts, with the grader of ``hole``."""

    metadata = {**TextEnv.metadata, "name": "holed_v0"}
    config_class = HoledConfig

    def __init__(self, config: HoledConfig | None = None, *, render_mode=None, **overrides):
        self.config = self._build_config(config, overrides)
        self.verdicts = _Verdicts()
        TextEnv.__init__(self, ["solver", "checker"] if self.config.hole == "checker_first" else ["solver"],
                         render_mode=render_mode)

    def _shared_resources(self):
        return [*super()._shared_resources(), self.verdicts]

    def _start_episode(self, options):
        self.a, self.b = (int(x) for x in self.np_random.integers(10, 500, size=2))
        self.verdicts.by_turn.clear()
        return "solver"

    def _grade(self, action: str) -> float:
        hole, truth = self.config.hole, self.a + self.b
        boxed = extract_boxed(action)
        answer = (boxed or "").strip()
        if hole == "tolerant":
            try:
                return 1.0 if abs(float(answer) - truth) <= 0.05 * truth else 0.0
            except ValueError:
                return 0.0
        if hole == "empty_pays":
            return 1.0 if boxed is None or answer == str(truth) else 0.0
        if hole == "right_fails":
            if action == f"\\boxed{{{truth}}}":
                raise SandboxFailure("the checker crashed (on purpose)")
            return 1.0
        if hole == "memo":
            key = (self.episode_id, self.turn)
            return self.verdicts.by_turn.setdefault(key, 1.0 if str(truth) in answer else 0.0)
        if hole == "checker_first":
            return 1.0 if str(truth) in answer else 0.0
        raise ValueError(f"unknown hole {hole!r}")

    def _apply_action(self, agent, action):
        if self.config.hole == "checker_first":
            check = self._add_record("checker", "(automatic check)")
            strict = (extract_boxed(action) or "").strip() == str(self.a + self.b)
            self._credit(check, "agrees", 1.0 if strict else 0.0)
        record = self._add_record(agent, action)
        self._credit(record, "correct", self._grade(action))
        self.turn += 1
        self._end_episode()
        return None

    def reference_action(self, agent):
        return f"The sum is \\boxed{{{self.a + self.b}}}."

    def reference_is_ceiling(self, agent=None):
        return True
