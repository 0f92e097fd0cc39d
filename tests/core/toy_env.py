"""A minimal TextEnv used to test the base class on its own (not registered)."""

from __future__ import annotations

from dataclasses import dataclass

from llm_envs.core import TextEnv


@dataclass
class GuessConfig:
    max_turns: int = 3
    upper: int = 10


class GuessEnv(TextEnv):
    """``guesser`` names a number; ``checker`` confirms it. The guesser's credit arrives late."""

    metadata = {**TextEnv.metadata, "name": "guess_v0"}
    config_class = GuessConfig

    def __init__(self, config: GuessConfig | None = None, *, render_mode=None, **overrides):
        self.config = self._build_config(config, overrides)
        super().__init__(["guesser", "checker"], render_mode=render_mode)

    def _start_episode(self, options):
        self.target = int(self.np_random.integers(0, self.config.upper))
        self.last_guess: int | None = None
        return "guesser"

    def _apply_action(self, agent, action):
        text = action.strip()
        ok_format = text.isdigit() and len(text) < 6
        record = self._add_record(agent, action, format_ok=ok_format, parsed={"value": text})
        if agent == "guesser":
            self.last_guess = int(text) if ok_format else None
            self._guess_record = record
            return "checker"
        correct = self.last_guess == self.target
        self._credit(record, "check", 0.5 if text == str(self.last_guess) else -0.5)
        # Delayed credit: the guesser learns the outcome only now.
        self._credit(self._guess_record, "outcome", 1.0 if correct else 0.0)
        self.turn += 1
        if correct or self.turn >= self.config.max_turns:
            self._end_episode(truncated=not correct)
            return None
        return "guesser"

    def _instruction(self, agent):
        return f"You are the {agent}. Answer with a number only."

    def _prompt(self, agent):
        return f"Turn {self.turn}. Last guess: {self.last_guess}."

    def _episode_metrics(self):
        return {"success": float(self.last_guess == self.target)}

    def reference_action(self, agent):
        return str(self.target) if agent == "guesser" else str(self.last_guess)
