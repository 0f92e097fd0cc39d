"""A TextArena game as a PettingZoo AEC text environment (``textarena/TicTacToe-v0``, ...).

A thin layer over ``textarena`` (0.7.4): the game, its prompts, its move checking and its
rewards are TextArena's; this module sequences the players, keeps the records and makes the
episode reproducible (every call into the game runs with Python's and NumPy's global generators
set to the episode's own state, under a lock). The reference and random agents are legal-move
players: they try the moves the game offers on a copy until TextArena accepts one.

The spec (agents, observations, actions, invalid moves, rewards, seeding, turn cap, metrics) and
the version history are in docs/envs/textarena.md, their one place (tests/envs/test_env_docs.py).
"""

from __future__ import annotations

import contextlib
import copy
import io
import itertools
import random
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from llm_envs.core.env import TextEnv
from llm_envs.core.records import ActionRecord
from llm_envs.envs.textarena.catalog import GAMES

__all__ = ["TextArenaConfig", "TextArenaEnv"]

#: One lock for every call into TextArena: its games read and write process-global RNGs.
_GLOBAL_RNG_LOCK = threading.RLock()
_GAME_ID = -1


@dataclass(frozen=True)
class TextArenaConfig:
    """Options of :class:`TextArenaEnv`.

    Attributes:
        game: A TextArena environment id (``"TicTacToe-v0"``).
        num_players: Players (None: the catalog's default for the game).
        max_turns: Truncate after this many actions (None: never).
        game_kwargs: Keyword arguments of the TextArena environment's constructor.
    """

    game: str = "TicTacToe-v0"
    num_players: int | None = None
    max_turns: int | None = 200
    game_kwargs: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1 or None, got {self.max_turns}")


class _RNGState:
    """Python's and NumPy's global generator states of one episode (copied with the episode)."""

    def __init__(self) -> None:
        self.python: Any = None
        self.numpy: Any = None


@contextlib.contextmanager
def _episode_globals(rng: _RNGState) -> Iterator[None]:
    """Run TextArena code with the episode's global RNG states, its printing silenced, and the
    caller's states restored afterwards."""
    with _GLOBAL_RNG_LOCK:
        saved_python, saved_numpy = random.getstate(), np.random.get_state()
        try:
            if rng.python is not None:
                random.setstate(rng.python)
            if rng.numpy is not None:
                np.random.set_state(rng.numpy)
            with contextlib.redirect_stdout(io.StringIO()):
                yield
        finally:
            rng.python, rng.numpy = random.getstate(), np.random.get_state()
            random.setstate(saved_python)
            np.random.set_state(saved_numpy)


def _make_game(game: str, kwargs: dict[str, Any]) -> Any:
    try:
        import textarena
    except ImportError as exc:
        raise ImportError("TextArena games need textarena: pip install 'llm-envs[games]'") from exc
    from textarena.envs.registration import ENV_REGISTRY

    raw = f"{game}-raw"
    if raw not in ENV_REGISTRY and game not in ENV_REGISTRY:
        raise ValueError(f"TextArena has no environment {game!r}")
    # The "-raw" id is the game without TextArena's observation wrappers: we format ourselves.
    # Some constructors draw from Python's global generator (Taboo picks a category): the
    # caller's state is restored, as after every other call into a game (what they drew never
    # reaches an episode, whose reset draws from the episode's own states).
    with _GLOBAL_RNG_LOCK:
        saved_python, saved_numpy = random.getstate(), np.random.get_state()
        try:
            return textarena.make(raw if raw in ENV_REGISTRY else game, **kwargs)
        finally:
            random.setstate(saved_python)
            np.random.set_state(saved_numpy)


class TextArenaEnv(TextEnv):
    """A TextArena game as a text environment; see the module docstring.

    ``TextArenaEnv(game="KuhnPoker-v0")`` or ``llm_envs.make("textarena/KuhnPoker-v0")``.
    """

    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "textarena_v0"}
    config_class = TextArenaConfig
    reset_options = ()

    def __init__(self, config: TextArenaConfig | None = None, *, render_mode: str | None = None, **overrides: Any):
        self.config: TextArenaConfig = self._build_config(config, overrides)
        entry = GAMES.get(self.config.game)
        players = self.config.num_players or (entry.players if entry is not None else 2)
        self._num_players = int(players)
        self._game = _make_game(self.config.game, dict(self.config.game_kwargs or {}))  # fail early
        self.metadata = {**type(self).metadata, "name": f"textarena_{self.config.game.replace('-', '_').lower()}"}
        super().__init__([f"player_{i}" for i in range(self._num_players)], render_mode=render_mode)
        self._rng = _RNGState()
        self._last_record: dict[int, ActionRecord] = {}
        self._invalid = 0
        self._lost_by_invalid = False
        self._eliminated: set[int] = set()  # players the game flagged for invalid moves
        self._failure: str | None = None
        self._final: dict[int, float] = {}

    # ------------------------------------------------------------------ game access
    @property
    def game(self) -> Any:
        """The TextArena environment (read it; only this class steps it)."""
        return self._game

    def _state(self) -> Any:
        return self._game.state

    def _current_player(self) -> int:
        return int(self._state().current_player_id)

    # ------------------------------------------------------------------ episode
    def _start_episode(self, options: dict[str, Any]) -> str:
        self._game = _make_game(self.config.game, dict(self.config.game_kwargs or {}))
        self._rng = _RNGState()
        seed = int(self.np_random.integers(0, 2**31 - 1))
        self._rng.numpy = np.random.RandomState(seed).get_state()
        with _episode_globals(self._rng):
            self._game.reset(num_players=self._num_players, seed=seed)
        _guard_eliminations(self._game.state, self._num_players)
        self._last_record = {}
        self._invalid = 0
        self._lost_by_invalid = False
        self._eliminated = set()
        self._failure = None
        self._final = {}
        return self.possible_agents[self._current_player()]

    def _apply_action(self, agent: str, action: str) -> str | None:
        player = self.player_index(agent)
        record = self._add_record(agent, action)
        self._last_record[player] = record
        if len(action) > MAX_ACTION_CHARS:
            record.info["cut_characters"] = len(action) - MAX_ACTION_CHARS
            action = action[-MAX_ACTION_CHARS:]
        invalid, lost, failure, done = self._play(self._game, self._rng, player, action)
        record.parsed["invalid"] = invalid
        record.format_ok = not invalid
        if invalid:
            self._invalid += 1
            reason = self._latest_admin_message(player)
            if reason:
                record.info["reason"] = reason
        self._lost_by_invalid |= lost
        self.turn += 1
        if failure is not None:
            # The game raised on this player's text (an integer of 5,000 digits makes several
            # games' int() raise): it loses, as by invalid moves. Ending it truncated at 0 for
            # everyone was a losing player's way out of its -1.
            self._failure = failure
            record.info["error"] = failure
            return self._finish(forfeited=player)
        if lost:
            self._eliminated.add(player)
        if done:
            return self._finish()
        if self._current_player() in self._eliminated:
            # TextArena flags a player that ran out of invalid moves and leaves the rest to the
            # game: several (MarketEntryGame, PublicGoodsGame, Taboo in 0.7.4) then ask that
            # player again forever, so replying nonsense ran the episode to max_turns, truncated
            # at 0 for everyone: a losing player's way out of its -1. It loses here instead.
            return self._finish(forfeited=self._current_player())
        if self.config.max_turns is not None and self.turn >= self.config.max_turns:
            return self._finish(truncated=True)
        return self.possible_agents[self._current_player()]

    @staticmethod
    def _play(game: Any, rng: _RNGState, player: int, action: str) -> tuple[bool, bool, str | None, bool]:
        """Step ``game`` with ``action``: (invalid, lost by it, failure message, done)."""
        state = game.state
        errors_before = int(getattr(state, "error_count", 0) or 0)
        info = state.game_info.get(player, {}) if isinstance(getattr(state, "game_info", None), dict) else {}
        flagged_before = bool(info.get("invalid_move"))
        try:
            with _episode_globals(rng):
                done, _ = game.step(action=action)
        except Exception as exc:  # noqa: BLE001 - a TextArena bug must not crash the caller
            return True, False, f"TextArena raised {type(exc).__name__}: {exc}", True
        errors_after = int(getattr(state, "error_count", 0) or 0)
        info = state.game_info.get(player, {}) if isinstance(getattr(state, "game_info", None), dict) else {}
        lost = bool(info.get("invalid_move")) and not flagged_before
        invalid = lost or errors_after > errors_before
        return invalid, lost, None, bool(done)

    def _latest_admin_message(self, player: int) -> str:
        for sender, message, kind in reversed(self._state().observations.get(player, [])):
            if sender == _GAME_ID and getattr(kind, "name", "") == "GAME_ADMIN":
                return str(message)[:500]
        return ""

    def _forfeit_rewards(self, offender: int) -> dict[int, float]:
        """The rewards of a game that ``offender`` lost by invalid moves and the game itself did
        not end: -1 for the offender and its team (a game's ``_get_team_members``, as Taboo's);
        +1 for the other side where there is exactly one (two players, or two teams), as a
        two-player TextArena game's own forfeit pays; 0 for everyone else, so that no seat gains
        by another's forfeit in a game of more sides."""
        players = range(self._num_players)
        members = getattr(self._game, "_get_team_members", None)

        def team(p: int) -> set[int]:
            try:
                return {int(q) for q in members(p)} | {p} if callable(members) else {p}
            except Exception:  # noqa: BLE001 - a game's helper failing: the player alone
                return {p}

        losing = team(offender)
        others = [p for p in players if p not in losing]
        one_side = bool(others) and set(others) <= team(others[0])
        return {p: -1.0 if p in losing else (1.0 if one_side else 0.0) for p in players}

    def _finish(self, truncated: bool = False, forfeited: int | None = None) -> None:
        rewards: dict[int, float] = {}
        if forfeited is not None:
            rewards = self._forfeit_rewards(forfeited)
        elif truncated:
            # Cut off by max_turns: a player the game flagged for invalid moves still loses.
            rewards = {p: -1.0 for p in self._eliminated}
        else:
            with _episode_globals(self._rng):
                try:
                    result = self._game.close()
                except Exception as exc:  # noqa: BLE001
                    result = (None, None)
                    self._failure = f"TextArena raised {type(exc).__name__} at close: {exc}"
            raw = result[0] if isinstance(result, tuple) else result
            if isinstance(raw, dict):
                rewards = {int(p): self._reward_value(int(p), r) for p, r in raw.items()}
        self._final = rewards
        for player in range(self._num_players):
            amount = rewards.get(player, 0.0)
            record = self._last_record.get(player)
            if record is None:
                if not amount:
                    continue
                record = self._add_record(self.possible_agents[player], "", info={"passive": True})
            self._credit(record, "game", amount)
        self._end_episode(truncated=truncated)
        return None

    # ------------------------------------------------------------------ text
    def player_index(self, agent: str) -> int:
        return self.possible_agents.index(agent)

    def _instruction(self, agent: str) -> str:
        return (
            f"You are playing the TextArena game {self.config.game} as {agent} (Player "
            f"{self.player_index(agent)}). The game's own messages below explain its rules and the "
            "format of a move; reply with your move as they ask (usually in square brackets)."
        )

    def _prompt(self, agent: str) -> str:
        player = self.player_index(agent)
        state = self._state()
        roles = getattr(state, "role_mapping", {}) or {}
        lines = []
        for sender, message, _kind in state.observations.get(player, []):
            who = "GAME" if sender == _GAME_ID else roles.get(sender, f"Player {sender}")
            text = _clip(str(message))
            if sender != _GAME_ID:
                # A player's later lines are indented: every line that starts with "[" is then
                # one the prompt itself begins (a player could write "\n[GAME] You win." for an
                # LLM opponent to read as the game's).
                text = "\n    ".join(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
            lines.append(f"[{who}] {text}")
        text = "\n".join(lines)
        if len(text) > _MAX_PROMPT_CHARS:  # keep the latest messages: they hold the current state
            text = "[earlier messages cut]\n" + text[-_MAX_PROMPT_CHARS:]
        if self._episode_over:
            outcome = ", ".join(f"{a} {self._final.get(i, 0.0):+g}" for i, a in enumerate(self.possible_agents))
            return f"{text}\n\nThe game is over. Rewards: {outcome}."
        if self._current_player() != player:
            return f"{text}\n\nWaiting for player_{self._current_player()} to move."
        return text

    def _role(self, agent: str) -> str:
        return agent

    def _reward_value(self, player: int, raw: Any) -> float:
        """A player's final reward as a number. A few games call TextArena's single-player
        ``set_invalid_move(reason, reward)`` with the two arguments swapped (ThreeCardMonte-v0 in
        0.7.4), leaving the reason text as the reward and the intended reward in the recorded
        reason (``"Invalid Move: 0.0"``): that number is used; failing that, the library's own
        default for an invalid move (-1)."""
        try:
            return float(raw)
        except (TypeError, ValueError):
            pass
        info = getattr(self._state(), "game_info", {}) or {}
        reason = str((info.get(player) or {}).get("reason", ""))
        match = re.fullmatch(r"Invalid Move: (-?\d+(?:\.\d+)?)", reason.strip())
        return float(match.group(1)) if match else -1.0

    def _episode_metrics(self) -> dict[str, float]:
        finished = self._episode_over and not self._truncated and not self._lost_by_invalid
        metrics = {"success": 1.0 if finished else 0.0, "invalid_moves": float(self._invalid)}
        for i, agent in enumerate(self.possible_agents):
            metrics[f"return/{agent}"] = float(self._final.get(i, 0.0))
        return metrics

    def _describe_episode(self) -> str:
        text = f"TextArena game: {self.config.game} ({self._num_players} players)"
        if self._failure:
            text += f"\nstopped: {self._failure}"
        return text

    def clone(self) -> TextArenaEnv:
        """An independent copy: TextArena's game (deep-copied), the episode's RNG states and
        the spaces (their sampling generators are per copy)."""
        twin = type(self).__new__(type(self))
        memo: dict[int, Any] = {id(self): twin, id(self.config): self.config}
        with _GLOBAL_RNG_LOCK:
            for key, value in self.__dict__.items():
                twin.__dict__[key] = copy.deepcopy(value, memo)
        return twin

    # ------------------------------------------------------------------ scripted agents
    def _candidates(self, player: int) -> list[str]:
        """Moves worth trying, most promising first: bracketed moves of the game's latest
        messages, then of the whole history, then templates filled with small numbers, then plain
        words. Only the game's own messages: the other players' text could otherwise name the
        move the reference and random agents play (a bid of 40 sixes, an ``[Accept]``), so a
        policy earned more against them by writing it than by playing."""
        seen = dict.fromkeys(self._game_tokens(player))
        concrete = list(seen)  # a template-looking token may be a real move ([X 4] in Wild Tic-Tac-Toe)
        filled = [f for t in seen if _is_template(t) for f in _fill_template(t)]
        generic = [f"[{i}]" for i in range(10)] + ["[A]", "[up]", "[accept]", "I agree."]
        ordered: dict[str, None] = {}
        for text in concrete + filled + generic:
            ordered.setdefault(text, None)
        return list(ordered)

    def _game_tokens(self, player: int) -> list[str]:
        """The bracketed tokens of the game's own messages to ``player``, latest first."""
        messages = [m for sender, m, _ in self._state().observations.get(player, []) if sender == _GAME_ID]
        seen: dict[str, None] = {}
        for message in reversed(messages):
            for token in _BRACKETS.findall(str(message)):
                seen.setdefault(token, None)
        return list(seen)

    def _first_valid(self, player: int, candidates: list[str]) -> str:
        """The first candidate TextArena accepts; failing every one, the first accepted
        :meth:`_numeric_variants` move (tried only then: games the candidates play are
        unchanged); failing that too, the first candidate."""
        for text in itertools.chain(candidates[:200], self._numeric_variants(player)):
            game, rng = copy.deepcopy((self._game, self._rng))
            invalid, _, failure, _ = self._play(game, rng, player, text)
            if not invalid and failure is None:
                return text
        return candidates[0] if candidates else ""

    def _numeric_variants(self, player: int) -> Iterator[str]:
        """The game's all-number example moves with other small numbers, smallest largest
        number first (all of a 4×4 board before a fifth row), at most
        ``_MAX_FALLBACK_TRIALS``: MemoryGame offers only ``[0 1 1 0]``, and once that pair was
        matched no candidate was a valid move (the reference lost by invalid moves on seeds 6
        and 22)."""
        # The longest such token is the move; shorter ones are the game's echoes of its parts
        # (MemoryGame's "cards at positions [0 1] and [1 0]").
        shape = max((len(w) for w in (t[1:-1].split() for t in self._game_tokens(player))
                     if 1 < len(w) <= 4 and all(x.isdigit() for x in w)), default=0)
        if not shape:
            return
        combos = sorted(itertools.product(range(_MAX_FALLBACK_NUMBER + 1), repeat=shape),
                        key=lambda combo: (max(combo), combo))
        for combo in combos[:_MAX_FALLBACK_TRIALS]:
            yield "[" + " ".join(map(str, combo)) + "]"

    def reference_action(self, agent: str) -> str:
        player = self.player_index(agent)
        if self._episode_over or self._current_player() != player:
            return ""
        return self._first_valid(player, self._candidates(player))

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        player = self.player_index(agent)
        if self._episode_over or self._current_player() != player:
            return ""
        candidates = self._candidates(player)
        order = rng.permutation(len(candidates))
        return self._first_valid(player, [candidates[int(i)] for i in order])

    # ------------------------------------------------------------------ reward contract
    def reference_is_ceiling(self, agent: str | None = None) -> bool:
        """A game: the reference agents are opponents, not a ceiling (only the per-turn
        bounds are checked)."""
        return False

    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """TextArena's final rewards (win 1, draw 0, loss or invalid move −1 in the registered
        games), credited once to each player's last record. docs/envs/textarena.md states the
        same bounds."""
        return (-1.0, 1.0)


class AllPlayersEliminated(RuntimeError):
    """Every player of a free-for-all game is eliminated (TextArena would loop forever)."""


class _EliminationOrder(list):
    """TextArena's ``elimination_order`` list, except that asking whether a player is in it
    once every player is raises :class:`AllPlayersEliminated`: ``FFAMultiPlayerState.step``
    (0.7.4) looks for the next player not eliminated with ``while player in
    elimination_order``, which never ends when invalid moves have eliminated everyone
    (MarketEntryGame, PublicGoodsGame, ...). The step then fails like any TextArena error (the
    episode is truncated, the failure recorded) instead of hanging the caller."""

    def __init__(self, items: Any, num_players: int) -> None:
        super().__init__(items)
        self.num_players = num_players

    def __contains__(self, player: object) -> bool:
        if len(set(self)) >= self.num_players:
            raise AllPlayersEliminated(f"all {self.num_players} players are eliminated")
        return super().__contains__(player)


def _guard_eliminations(state: Any, num_players: int) -> None:
    order = getattr(state, "elimination_order", None)
    if isinstance(order, list) and not isinstance(order, _EliminationOrder):
        state.elimination_order = _EliminationOrder(order, num_players)


#: Longest action passed to the game (the reply's tail is kept; see the spec table).
MAX_ACTION_CHARS = 8192
#: Longest message shown (TextArena echoes every action, however long, to the other players).
_MAX_MESSAGE_CHARS = 20_000
_MAX_PROMPT_CHARS = 500_000


def _clip(message: str) -> str:
    if len(message) <= _MAX_MESSAGE_CHARS:
        return message
    return message[:_MAX_MESSAGE_CHARS] + f" [... {len(message) - _MAX_MESSAGE_CHARS} more characters cut]"


#: Fallback moves tried at most per turn (each trial plays a copy of the game), and their
#: largest number.
_MAX_FALLBACK_TRIALS = 400
_MAX_FALLBACK_NUMBER = 5
_BRACKETS = re.compile(r"\[[^\[\]\n]{1,40}\]")
_PLACEHOLDER = re.compile(r"^(?:[A-Z]|[a-z]{3,}|<[^>]+>)$")


def _is_template(token: str) -> bool:
    """``[play X]``, ``[row column letter]``, ``[<number>]``: a bracket with placeholders."""
    words = token[1:-1].replace(",", " ").split()
    return any(_PLACEHOLDER.match(w) and w.lower() not in _KEYWORDS for w in words) and len(words) > 1 or (
        len(words) == 1 and words[0].startswith("<")
    )


#: Words that are moves, not placeholders (``[draw]`` stays as written).
_KEYWORDS = {"draw", "take", "discard", "knock", "play", "bet", "raise", "call", "check", "fold", "attack",
             "split", "accept", "reject", "deny", "propose", "offer", "swap", "peek", "col", "move", "bid",
             "heads", "tails", "rock", "paper", "scissors", "cooperate", "defect", "up", "down", "left", "right"}


def _fill_template(token: str) -> list[str]:
    """Instances of a template with small integers in place of its placeholders."""
    words = token[1:-1].split()
    slots = [i for i, w in enumerate(words) if _PLACEHOLDER.match(w) and w.lower() not in _KEYWORDS]
    if not slots or len(slots) > 3:
        return []
    values = range(0, 6) if len(slots) > 1 else range(0, 12)
    out = []
    for combo in _product(values, len(slots)):
        filled = list(words)
        for slot, value in zip(slots, combo):
            filled[slot] = str(value)
        out.append("[" + " ".join(filled) + "]")
    return out


def _product(values: range, n: int) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.product(values, repeat=n))
