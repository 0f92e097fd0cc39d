"""Rules of the signalling game, free of PettingZoo: config, target sampling, parsing, rewards.

Each round a *speaker* sees a target symbol and sends a message; a *listener* reads the message
and answers with a symbol. The team wins the round when the listener's answer is the target.
Rewards mix ``r = α·r_team + r_local``: the team reward goes to the listener at once and to the
speaker's record of the round as delayed credit; the speaker's local reward pays a message whose
first symbol is the target; the listener's (off by default: it teaches a biased speaker's symbol
everywhere) pays following the message. docs/envs/signalling.md has the formulas.

The game is deliberately easy: a random-weight model with a small vocabulary names the right
symbol by chance often enough to learn from, so the whole RL loop can be tested on a CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

DEFAULT_SYMBOLS: tuple[str, ...] = ("red", "green", "blue", "yellow")
#: Longest message shown to the listener (characters); the rest is cut.
MAX_MESSAGE_CHARS = 200

_WORD = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class SignallingConfig:
    """Options of :class:`~llm_envs.envs.signalling.env.SignallingEnv`.

    Attributes:
        symbols: The symbol vocabulary (lower-case words).
        rounds: Rounds per episode (one speaker and one listener action each).
        alpha: Weight α of the team reward in ``α·r_team + r_local``.
        speaker_local_weight: ``w_s``, weight of the speaker's local reward.
        listener_local_weight: ``w_l``, weight of the listener's local reward.
        format_penalty: Reward added to an action that names no symbol (≤ 0).
    """

    symbols: tuple[str, ...] = DEFAULT_SYMBOLS
    rounds: int = 1
    alpha: float = 1.0
    speaker_local_weight: float = 1.0
    listener_local_weight: float = 0.0
    format_penalty: float = 0.0

    def __post_init__(self) -> None:
        if len(self.symbols) < 2 or len(set(self.symbols)) != len(self.symbols):
            raise ValueError(f"symbols must be at least two distinct words: {self.symbols!r}")
        for s in self.symbols:
            if not _WORD.fullmatch(s) or s != s.lower():
                raise ValueError(f"symbols must be single lower-case words: {s!r}")
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {self.rounds}")
        if self.format_penalty > 0:
            raise ValueError("format_penalty is a penalty: it must be <= 0")
        for name in ("alpha", "speaker_local_weight", "listener_local_weight"):
            if not getattr(self, name) >= 0:  # (also NaN)
                raise ValueError(f"{name} must be >= 0 (a negative weight pays a wrong answer), got {getattr(self, name)}")


def sample_targets(rng: np.random.Generator, symbols: tuple[str, ...], rounds: int) -> list[str]:
    """Draw one target per round, uniformly and independently."""
    return [symbols[int(i)] for i in rng.integers(0, len(symbols), size=rounds)]


def parse_symbol(text: str, symbols: tuple[str, ...]) -> str | None:
    """The first word of ``text`` that is a symbol (case-insensitive), or None."""
    known = set(symbols)
    for word in _WORD.findall(text or ""):
        w = word.lower()
        if w in known:
            return w
    return None


def speaker_local_reward(message_symbol: str | None, target: str) -> float:
    """``1`` if the message names the target, else ``0``."""
    return 1.0 if message_symbol == target else 0.0


def listener_local_reward(answer_symbol: str | None, message_symbol: str | None) -> float:
    """``1`` if the answer is the symbol the message names (both parsed), else ``0``."""
    return 1.0 if answer_symbol is not None and answer_symbol == message_symbol else 0.0


def team_reward(answer_symbol: str | None, target: str) -> float:
    """``1`` if the listener's answer is the target, else ``0``."""
    return 1.0 if answer_symbol == target else 0.0


def clip_message(text: str) -> str:
    """The message as the listener sees it: at most :data:`MAX_MESSAGE_CHARS` characters."""
    return text[:MAX_MESSAGE_CHARS]
