"""Two tiny text environments that exercise the interop hooks without any sandbox or dataset.

* :class:`CorridorEnv`: turn-based. A ``scout`` names a direction, then a ``walker`` moves one
  cell left or right along a corridor towards a hidden goal. Both implement the
  enumerable-moves hook (``legal_actions`` / ``max_legal_actions``) with *different* numbers of
  moves, so the numeric view must pad them to one ``Discrete`` space.
* :class:`LockEnv`: one agent tries digits on a lock. It implements only the fixed move catalog
  (``action_catalog``/``action_mask``, no ``catalog_action`` and no ``legal_actions``) and the
  state tensor, so the wrappers must derive everything else from those.
* :class:`GuessEnv`: simultaneous. ``agent_0`` and ``agent_1`` guess a hidden digit each turn and
  see only the *previous* turn's guesses (``metadata["is_parallelizable"] = True``).
  ``leak=True`` shows the same turn's earlier guess instead: a deliberately broken variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from llm_envs.core.env import TextEnv


@dataclass
class CorridorConfig:
    length: int = 7
    max_turns: int = 12


class CorridorEnv(TextEnv):
    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "corridor_v0"}
    config_class = CorridorConfig
    max_legal_actions = 3

    def __init__(self, config: CorridorConfig | None = None, *, render_mode: str | None = None, **overrides: Any):
        self.config = self._build_config(config, overrides)
        super().__init__(("scout", "walker"), render_mode=render_mode)

    def _start_episode(self, options: dict[str, Any]) -> str:
        n = self.config.length
        self.goal = int(self.np_random.integers(0, n))
        self.position = int((self.goal + 1 + self.np_random.integers(0, n - 1)) % n)
        self.hint = ""
        self._scout_record = None
        return "scout"

    def legal_actions(self, agent: str) -> list[str]:
        if agent == "scout":
            return ["hint: left", "hint: right", "hint: stay"]
        moves = []
        if self.position > 0:
            moves.append("move left")
        if self.position < self.config.length - 1:
            moves.append("move right")
        return moves

    def _apply_action(self, agent: str, action: str) -> str | None:
        if agent == "scout":
            record = self._add_record(agent, action, format_ok=action.startswith("hint:"))
            self.hint = action[:40]
            self._scout_record = record
            return "walker"
        text = action.strip().lower()
        step = {"move left": -1, "move right": 1}.get(text)
        legal = step is not None and 0 <= self.position + step < self.config.length
        record = self._add_record(agent, action, format_ok=legal)
        if legal:
            before = abs(self.position - self.goal)
            self.position += step
            progress = before - abs(self.position - self.goal)
            self._credit(record, "progress", 0.1 * progress)
            self._credit(self._scout_record, "team", 0.1 * progress)
        else:
            self._credit(record, "format", -0.1)
        self.turn += 1
        if self.position == self.goal:
            self._credit(record, "goal", 1.0)
            self._end_episode()
            return None
        if self.turn >= self.config.max_turns:
            self._end_episode(truncated=True)
            return None
        return "scout"

    def _instruction(self, agent: str) -> str:
        if agent == "scout":
            return "You are the scout. You see the goal. Reply 'hint: left', 'hint: right' or 'hint: stay'."
        return "You are the walker. Reply 'move left' or 'move right'."

    def _prompt(self, agent: str) -> str:
        cells = ["."] * self.config.length
        cells[self.position] = "W"
        if agent == "scout":
            cells[self.goal] = "G" if self.goal != self.position else "*"
            return f"turn {self.turn}: {''.join(cells)}"
        return f"turn {self.turn}: {''.join(cells)} | scout says: {self.hint or '(nothing yet)'}"

    def reference_action(self, agent: str) -> str:
        direction = "left" if self.goal < self.position else "right"
        return f"hint: {direction}" if agent == "scout" else f"move {direction}"

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        options = self.legal_actions(agent)
        return options[int(rng.integers(0, len(options)))]

    def _episode_metrics(self) -> dict[str, float]:
        return {"success": float(self.position == self.goal)}


@dataclass
class LockConfig:
    digits: int = 6
    max_turns: int = 4
    #: Report a mask of the wrong length (a broken hook the wrapper must catch).
    broken_mask: bool = False


class LockEnv(TextEnv):
    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "lock_v0"}
    config_class = LockConfig

    def __init__(self, config: LockConfig | None = None, *, render_mode: str | None = None, **overrides: Any):
        self.config = self._build_config(config, overrides)
        super().__init__(("picker",), render_mode=render_mode)
        self.tried: list[int] = []

    def _start_episode(self, options: dict[str, Any]) -> str:
        self.code = int(self.np_random.integers(0, self.config.digits))
        self.tried = []
        return "picker"

    def action_catalog(self) -> list[str]:
        return [f"try {d}" for d in range(self.config.digits)]

    def action_mask(self, agent: str) -> np.ndarray:
        size = self.config.digits + (1 if self.config.broken_mask else 0)
        mask = np.zeros(size, dtype=np.int8)
        if self._has_reset and not self.episode_over:
            mask[: self.config.digits] = 1
            mask[self.tried] = 0  # a digit already tried is not tried again
        return mask

    def state_space(self):
        from gymnasium import spaces

        return spaces.Box(0.0, 1.0, (self.config.digits,), np.float32)

    def state_tensor(self, agent: str) -> np.ndarray:
        vector = np.zeros(self.config.digits, dtype=np.float32)
        vector[self.tried] = 1.0
        return vector

    def _apply_action(self, agent: str, action: str) -> str | None:
        text = action.strip()
        digit = int(text[4:]) if text.startswith("try ") and text[4:].isdigit() else None
        record = self._add_record(agent, action, format_ok=digit is not None)
        if digit is not None:
            self.tried.append(digit)
        self.turn += 1
        if digit == self.code:
            self._credit(record, "open", 1.0)
            self._end_episode()
            return None
        if self.turn >= self.config.max_turns:
            self._end_episode(truncated=True)
            return None
        return "picker"

    def _instruction(self, agent: str) -> str:
        return f"Open the lock: reply 'try <digit>' with a digit below {self.config.digits}."

    def _prompt(self, agent: str) -> str:
        return f"tried so far: {self.tried}"

    def reference_action(self, agent: str) -> str:
        return f"try {self.code}"

    def _episode_metrics(self) -> dict[str, float]:
        return {"success": float(self.code in self.tried)}


@dataclass
class GuessConfig:
    turns: int = 3
    leak: bool = False
    end_mid_cycle: bool = False  # end the episode after agent_0's last guess (breaks promise 3)


class GuessEnv(TextEnv):
    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "guess_v0", "is_parallelizable": True}
    config_class = GuessConfig

    def __init__(self, config: GuessConfig | None = None, *, render_mode: str | None = None, **overrides: Any):
        self.config = self._build_config(config, overrides)
        super().__init__(("agent_0", "agent_1"), render_mode=render_mode)

    def _start_episode(self, options: dict[str, Any]) -> str:
        self.secret = int(self.np_random.integers(0, 10))
        self.previous: dict[str, str] = {}
        self.current: dict[str, str] = {}
        self._records: dict[str, Any] = {}
        return "agent_0"

    def _apply_action(self, agent: str, action: str) -> str | None:
        guess = action.strip()
        record = self._add_record(agent, action, format_ok=guess.isdigit())
        self._records[agent] = record
        self.current[agent] = guess[:10]
        if agent == "agent_0":
            if self.config.end_mid_cycle and self.turn == self.config.turns - 1:
                self._credit(record, "local", float(guess == str(self.secret)))
                self._end_episode()
                return None
            return "agent_1"
        # End of the cycle: both guesses are scored together.
        hits = {a: self.current[a] == str(self.secret) for a in self.possible_agents}
        for a in self.possible_agents:
            self._credit(self._records[a], "local", float(hits[a]))
            self._credit(self._records[a], "team", 0.5 * float(all(hits.values())))
        self.previous, self.current = self.current, {}
        self.turn += 1
        if all(hits.values()) or self.turn >= self.config.turns:
            self._end_episode(truncated=not all(hits.values()))
            return None
        return "agent_0"

    def _instruction(self, agent: str) -> str:
        return f"You are {agent}. Guess the secret digit; reply with one digit."

    def _prompt(self, agent: str) -> str:
        shown = dict(self.previous)
        if self.config.leak:
            shown.update(self.current)
        others = ", ".join(f"{a}: {g}" for a, g in sorted(shown.items()) if a != agent) or "none yet"
        hint = "" if not self.previous else f" (hint: the secret is {'even' if self.secret % 2 == 0 else 'odd'})"
        return f"turn {self.turn}; other guesses: {others}{hint}"

    def reference_action(self, agent: str) -> str:
        return str(self.secret)

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        return str(int(rng.integers(0, 10)))

    def _episode_metrics(self) -> dict[str, float]:
        hits = [self.previous.get(a) == str(self.secret) for a in self.possible_agents]
        return {"success": float(all(hits))}


class SumsTaskSource:
    """A few "a + b" problems with answers, for environments that need a task source (Debate)
    while the packaged sources are not available. Duck-types :class:`llm_envs.tasks.TaskSource`."""

    name = "toy_sums"
    split = "train"

    def __init__(self, size: int = 20):
        from llm_envs.tasks.base import Problem

        self._problems = [
            Problem(id=f"sum/{i}", prompt=f"What is {i} + {2 * i + 1}?", split="train", answer=str(3 * i + 1))
            for i in range(size)
        ]

    def __len__(self) -> int:
        return len(self._problems)

    def get(self, index: int):
        return self._problems[index]

    def sample(self, rng: np.random.Generator):
        return self.get(int(rng.integers(0, len(self))))
