"""The signalling game as a PettingZoo AEC text environment (``llm/Signalling-v0``).

Each round a speaker sees a target symbol and sends a message; a listener reads it and answers
with a symbol (rules and rewards: :mod:`llm_envs.envs.signalling.rules`). It also implements
the fixed move catalog and the state tensor (interop hooks).

The spec (agents, actions, observations, rewards, episode end, metrics) and the version history
are in docs/envs/signalling.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from llm_envs.core.bounds import scaled, summed
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
    reset_options = ()

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
            # Read from the message as the listener sees it (clipped), so that the symbol the
            # speaker is paid for, and the state shows, is the one the listener can read.
            symbol = rules.parse_symbol(rules.clip_message(action), cfg.symbols)
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

    # ------------------------------------------------------------------ interop hooks
    def action_catalog(self) -> list[str]:
        """The symbols, in config order: index ``i`` always plays ``symbols[i]``."""
        return list(self.config.symbols)

    def action_mask(self, agent: str) -> np.ndarray:
        """Every symbol for the agent to act now; none for the other (or after the episode)."""
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        acting = self._has_reset and not self._episode_over and agent == self.agent_selection
        return np.full(len(self.config.symbols), int(acting), dtype=np.int8)

    def state_space(self) -> spaces.Box:
        """``Box(0, 1, (2 * n + 4,), float32)`` for ``n`` symbols (layout: :meth:`state_tensor`)."""
        box = self.__dict__.get("_state_space_cache")
        if box is None:
            size = 2 * len(self.config.symbols) + 4
            box = self._state_space_cache = spaces.Box(0.0, 1.0, (size,), np.float32)
        return box

    def state_tensor(self, agent: str) -> np.ndarray:
        """``[is_speaker, is_listener, target one-hot (n), message symbol one-hot (n),
        message names no symbol, turn / rounds]``: the target only while the speaker's prompt
        shows it, the message only while the listener's does."""
        if agent not in self.possible_agents:
            raise KeyError(f"unknown agent {agent!r}; possible agents: {self.possible_agents}")
        symbols = self.config.symbols
        n = len(symbols)
        vector = np.zeros(2 * n + 4, dtype=np.float32)
        vector[0 if agent == SPEAKER else 1] = 1.0
        if not self._has_reset or self._episode_over:
            return vector
        vector[-1] = self.turn / self.config.rounds
        if agent == SPEAKER and self._message is None:
            vector[2 + symbols.index(self._targets[self.turn])] = 1.0
        elif agent == LISTENER and self._message is not None:
            if self._message_symbol is None:
                vector[2 + 2 * n] = 1.0
            else:
                vector[2 + n + symbols.index(self._message_symbol)] = 1.0
        return vector

    def state_text(self, agent: str) -> str:
        """The role and the prompt (both are short)."""
        return f"{agent}: {self._prompt(agent)}" if self._has_reset else agent

    # ------------------------------------------------------------------ reward contract
    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """``alpha·r_team + w·r_local`` (both 0 or 1) plus the format penalty of an action that
        names no symbol. docs/envs/signalling.md states the same bounds."""
        cfg = self.config
        weight = cfg.speaker_local_weight if agent == "speaker" else cfg.listener_local_weight
        return summed(scaled((0.0, 1.0), cfg.alpha), scaled((0.0, 1.0), weight), (cfg.format_penalty, 0.0))
