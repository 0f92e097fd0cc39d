"""The signalling game as a PettingZoo AEC text environment (``llm/Signalling-v0``)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from llm_envs.core.env import TextEnv
from llm_envs.envs.signalling import rules
from llm_envs.envs.signalling.rules import SignallingConfig

SPEAKER, LISTENER = "speaker", "listener"


class SignallingEnv(TextEnv):
    """Speaker names a target symbol, listener answers with the symbol the message names.

    ``SignallingEnv(rounds=2, symbols=("a", "b"))`` or ``SignallingEnv(config=SignallingConfig(...))``.
    See :mod:`llm_envs.envs.signalling.rules` for the rewards. ``success`` is the fraction of
    rounds the listener got right.
    """

    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "signalling_v0"}
    config_class = SignallingConfig

    def __init__(self, config: SignallingConfig | None = None, *, render_mode: str | None = None, **overrides: Any):
        if "symbols" in overrides:
            overrides["symbols"] = tuple(overrides["symbols"])
        self.config: SignallingConfig = self._build_config(config, overrides)
        super().__init__((SPEAKER, LISTENER), render_mode=render_mode)
        self._targets: list[str] = []
        self._message: str | None = None
        self._message_symbol: str | None = None
        self._speaker_record = None
        self._correct = 0

    # ------------------------------------------------------------------ hooks
    def _start_episode(self, options: dict[str, Any]) -> str:
        self._targets = rules.sample_targets(self.np_random, self.config.symbols, self.config.rounds)
        self._message = None
        self._message_symbol = None
        self._speaker_record = None
        self._correct = 0
        return SPEAKER

    def _apply_action(self, agent: str, action: str) -> str | None:
        cfg = self.config
        target = self._targets[self.turn]
        if agent == SPEAKER:
            symbol = rules.parse_symbol(action, cfg.symbols)
            record = self._add_record(agent, action, parsed={"symbol": symbol, "target": target},
                                      format_ok=symbol is not None)
            self._credit(record, "local", cfg.speaker_local_weight * rules.speaker_local_reward(symbol, target))
            if symbol is None and cfg.format_penalty:
                self._credit(record, "format", cfg.format_penalty)
            self._message = rules.clip_message(action)
            self._message_symbol = symbol
            self._speaker_record = record
            return LISTENER

        answer = rules.parse_symbol(action, cfg.symbols)
        record = self._add_record(agent, action, parsed={"answer": answer, "target": target},
                                  format_ok=answer is not None)
        team = rules.team_reward(answer, target)
        self._credit(record, "team", cfg.alpha * team)
        self._credit(record, "local",
                     cfg.listener_local_weight * rules.listener_local_reward(answer, self._message_symbol))
        if answer is None and cfg.format_penalty:
            self._credit(record, "format", cfg.format_penalty)
        self._credit(self._speaker_record, "team", cfg.alpha * team)  # delayed credit
        self._correct += int(team > 0)
        self.turn += 1
        self._message = None
        self._message_symbol = None
        self._speaker_record = None
        if self.turn >= cfg.rounds:
            self._end_episode()
            return None
        return SPEAKER

    def _instruction(self, agent: str) -> str:
        if agent == SPEAKER:
            return "You are the speaker. Name the target symbol in one word."
        return "You are the listener. Answer with the symbol the message names, in one word."

    def _prompt(self, agent: str) -> str:
        if self._episode_over:
            return "The game is over."
        head = f"Round {self.turn + 1} of {self.config.rounds}. " if self.config.rounds > 1 else ""
        if agent == SPEAKER:
            if self._message is not None:
                return f"{head}Waiting for the listener."
            return f"{head}Target: {self._targets[self.turn]}"
        if self._message is None:
            return f"{head}Waiting for the speaker."
        return f"{head}Message: {self._message}"

    def _episode_metrics(self) -> dict[str, float]:
        return {"success": self._correct / self.config.rounds, "correct_rounds": float(self._correct)}

    def _describe_episode(self) -> str:
        return "targets: " + " ".join(self._targets)

    # ------------------------------------------------------------------ scripted agents
    def reference_action(self, agent: str) -> str:
        target = self._targets[self.turn]
        if agent == SPEAKER:
            return target
        return self._message_symbol or target

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        return str(rng.choice(self.config.symbols))
