"""Any OpenSpiel game as a PettingZoo AEC text environment (``llm/TicTacToe-v0``, ...,
``llm_envs.openspiel("game_string")``).

A thin layer over ``pyspiel``: every rule, chance distribution and payoff comes from OpenSpiel;
this module only sequences the players, routes text and keeps the records. OpenSpiel's returns
are credited, as they change, to each player's latest record (delayed credit); a reply that
names no legal move follows the ``invalid_move`` policy (forfeit or a random move); a
simultaneous node is one cycle of every player. The numeric hooks of :mod:`llm_envs.interop`
(legal actions, the action catalog, the state tensor) are implemented.

The spec (agents, observations, actions, invalid moves, rewards, chance, simultaneous games,
metrics) and the version history are in docs/envs/openspiel.md, their one place
(tests/envs/test_env_docs.py).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from llm_envs.core.env import TextEnv
from llm_envs.core.records import ActionRecord
from llm_envs.envs.openspiel import text as text_rules
from llm_envs.envs.openspiel.presets import GamePreset, preset_for
from llm_envs.envs.openspiel.solvers import REFERENCE_KINDS, ReferencePlayer, make_reference_player

__all__ = ["OpenSpielConfig", "OpenSpielEnv", "load_game"]

#: Names OpenSpiel games use for the seed of their internal generator (sampled chance).
_SEED_PARAMS = ("rng_seed", "seed")


@dataclass(frozen=True)
class OpenSpielConfig:
    """Options of :class:`OpenSpielEnv`.

    Attributes:
        game: An OpenSpiel game string: a short name (``"kuhn_poker"``) or a name with
            parameters (``"kuhn_poker(players=3)"``).
        params: Game parameters (only with a bare short name in ``game``).
        invalid_move: ``"forfeit"``, ``"random"`` or ``"auto"`` (``"forfeit"`` for two players or a
            team sharing one utility, else ``"random"``; ``"forfeit"`` is refused there: see the
            module docstring).
        forfeit_return: The offender's return on a forfeit (None: the game's minimum utility).
        format_penalty: Reward (≤ 0) added to the record of an invalid move.
        reference: The reference agent: ``"auto"`` (the curated game's solver; otherwise
            ``mcts`` for perfect-information sequential games and ``random`` for the rest) or one
            of ``cfr``, ``minimax``, ``mcts``, ``random``.
        reference_options: Keywords of the reference player (``simulations`` for MCTS,
            ``iterations`` for CFR).
        max_moves: Truncate the episode after this many decisions (None: the game's own end).
        view: ``"auto"`` (the curated rendering when the game has one, else the generic view),
            ``"information_state"``, ``"observation"`` (OpenSpiel's own strings).
    """

    game: str = "tic_tac_toe"
    params: dict[str, Any] = field(default_factory=dict)
    invalid_move: str = "auto"
    forfeit_return: float | None = None
    format_penalty: float = 0.0
    reference: str = "auto"
    reference_options: dict[str, Any] = field(default_factory=dict)
    max_moves: int | None = None
    view: str = "auto"

    def __post_init__(self) -> None:
        if self.invalid_move not in text_rules.INVALID_MOVE_POLICIES:
            raise ValueError(f"invalid_move must be one of {text_rules.INVALID_MOVE_POLICIES}, got {self.invalid_move!r}")
        if self.format_penalty > 0:
            raise ValueError("format_penalty is a penalty: it must be <= 0")
        if self.reference != "auto" and self.reference not in REFERENCE_KINDS:
            raise ValueError(f"reference must be 'auto' or one of {REFERENCE_KINDS}, got {self.reference!r}")
        if self.view not in ("auto", "information_state", "observation"):
            raise ValueError(f"view must be 'auto', 'information_state' or 'observation', got {self.view!r}")
        if self.max_moves is not None and self.max_moves < 1:
            raise ValueError(f"max_moves must be >= 1 or None, got {self.max_moves}")
        if self.params and "(" in self.game:
            raise ValueError("give game parameters either in the game string or in params, not both")


def load_game(game: str, params: dict[str, Any] | None = None) -> Any:
    """``pyspiel.load_game`` with a clear error for an unknown game or bad parameters."""
    import pyspiel

    try:
        return pyspiel.load_game(game, dict(params)) if params else pyspiel.load_game(game)
    except (pyspiel.SpielError, RuntimeError, TypeError) as exc:
        known = sorted(g.short_name for g in pyspiel.registered_games())
        raise ValueError(f"cannot load OpenSpiel game {game!r} with params {params or {}}: {exc}. "
                         f"Registered games: {', '.join(known)}") from exc


def _innermost(game: Any) -> tuple[Any, list[str]]:
    """The innermost game of a chain of game transforms (``zerosum(game=negotiation(...))``)
    and the transforms' short names, outermost first."""
    wrappers: list[str] = []
    while True:
        params = game.get_parameters()
        inner = params.get("game")
        if not (isinstance(inner, dict) and "name" in inner):
            return game, wrappers
        wrappers.append(game.get_type().short_name)
        game = load_game(inner["name"], {k: v for k, v in inner.items() if k != "name"})


def _seed_path(game: Any) -> list[str] | None:
    """Where the seed of the game's internal generator sits in its (possibly nested) parameters:
    ``["rng_seed"]``, ``["game", "rng_seed"]``, ... (None: no seed parameter)."""
    path: list[str] = []
    while True:
        params = game.get_parameters()
        inner = params.get("game")
        if isinstance(inner, dict) and "name" in inner:
            path.append("game")
            game = load_game(inner["name"], {k: v for k, v in inner.items() if k != "name"})
            continue
        name = next((p for p in _SEED_PARAMS if p in params), None)
        return None if name is None else path + [name]


def _with_seed(game: Any, path: list[str], seed: int) -> Any:
    """``game`` loaded again with the seed at ``path`` set to ``seed``."""
    import copy as _copy

    params = _copy.deepcopy(game.get_parameters())
    node = params
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = int(seed)
    return load_game(game.get_type().short_name, params)


def _copy_generator(rng: np.random.Generator) -> np.random.Generator:
    """An independent generator in the same state (3x cheaper than ``deepcopy``, which pickles)."""
    bit_generator = type(rng.bit_generator)(0)
    bit_generator.state = rng.bit_generator.state
    return np.random.Generator(bit_generator)


def _params_key(params: dict[str, Any]) -> str:
    import json

    return json.dumps(params, sort_keys=True, default=repr)


@functools.lru_cache(maxsize=128)
def _template_game(game: str, params_key: str) -> Any:
    """The game object of a configuration, loaded once per process (pyspiel games are immutable;
    some take seconds to load, e.g. colored_trails)."""
    import json

    return load_game(game, json.loads(params_key))


class _Position:
    """The pyspiel game and state of one episode, copied cheaply by ``deepcopy``.

    Games with deterministic or explicit chance share their (immutable) game object and copy the
    state with ``State.clone()``. A game with *sampled* chance keeps its generator inside the
    game object, so a copy re-creates game and state from their serialisation: replaying the
    history puts the copy's generator exactly where the original's is, and the two never share
    it afterwards.
    """

    __slots__ = ("game", "state", "sampled")

    def __init__(self, game: Any, state: Any, sampled: bool) -> None:
        self.game, self.state, self.sampled = game, state, sampled

    def __deepcopy__(self, memo: dict[int, Any]) -> _Position:
        if self.sampled:
            import pyspiel

            try:
                game, state = pyspiel.deserialize_game_and_state(
                    pyspiel.serialize_game_and_state(self.game, self.state)
                )
            except pyspiel.SpielError:
                # Game transforms (``zerosum(game=negotiation(...))``) cannot report their
                # generator's state. Each episode loads its game with a fresh seed, so a new
                # game from the same string replaying the history draws the same chance
                # outcomes (Negotiation draws only at the start).
                game = pyspiel.load_game(str(self.game))
                state = game.new_initial_state()
                for action in self.state.history():
                    state.apply_action(action)
            return _Position(game, state, True)
        return _Position(self.game, self.state.clone(), False)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (OpenSpiel's C++ error printer) for the duration."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to silence
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _context_free_name(game: Any, num_players: int, action: int) -> str:
    for player in range(num_players):
        try:
            name = game.action_to_string(player, action)
        except Exception:  # noqa: BLE001 - the action belongs to another player
            continue
        if name and not name.startswith("Action(id="):  # OpenSpiel's placeholder, not a name
            return name
    return f"action {action}"


def _check_integer_actions(game: Any) -> None:
    """Refuse games whose moves are not integer actions (OpenSpiel's newer "action structs"
    only games, e.g. crossword): they cannot list their legal moves."""
    state = game.new_initial_state()
    rng = np.random.default_rng(0)
    for _ in range(100_000):  # a bound, not a limit any game reaches: each pick is random
        if not state.is_chance_node():
            break
        outcomes = state.chance_outcomes()
        state.apply_action(outcomes[int(rng.integers(0, len(outcomes)))][0] if outcomes else 0)
    if state.is_terminal() or state.is_chance_node():
        return
    try:
        with _quiet_stderr():
            if state.is_simultaneous_node():
                state.legal_actions(0)
            else:
                state.legal_actions()
    except Exception as exc:  # noqa: BLE001 - pyspiel.SpielError
        raise ValueError(f"{game.get_type().short_name} cannot list its legal moves as actions ({exc}); "
                         "it is not supported") from exc


@functools.lru_cache(maxsize=64)
def action_catalog_for(game_string: str, from_playouts: bool) -> tuple[str, ...]:
    """One name per action id of ``game_string``, the same in every state and for every player.

    With ``from_playouts`` (the curated games, whose moves are named the same in every
    position) names come from the game's legal moves along 32 fixed random playouts. Otherwise,
    and for ids no playout met, the game's context-free name is used (player 0's, else the
    first player's that has one), else ``action <id>``. A *state* is never asked to name a move
    it does not allow (that can crash OpenSpiel: chess), and in general a state's name may
    depend on the position, which would break "index i always means the same move". Computed
    once per process and game (on first use: a catalog is needed only by numeric views and by
    replies that name no listed move).
    """
    game = load_game(game_string)
    names = _names_from_playouts(game, episodes=32) if from_playouts else {}
    with _quiet_stderr():  # OpenSpiel prints every refused call to stderr before raising
        for action in range(game.num_distinct_actions()):
            if action not in names:
                names[action] = _context_free_name(game, game.num_players(), action)
    return tuple(text_rules.dedupe_catalog([names[a] for a in range(game.num_distinct_actions())]))


def _names_from_playouts(game: Any, episodes: int) -> dict[int, str]:
    import pyspiel

    sampled = game.get_type().chance_mode == pyspiel.GameType.ChanceMode.SAMPLED_STOCHASTIC
    seed_path = _seed_path(game) if sampled else None
    rng = np.random.default_rng(0)
    names: dict[int, str] = {}
    for episode in range(episodes):
        if seed_path is not None:
            episode_game = _with_seed(game, seed_path, episode)
        else:
            episode_game = game
        state = episode_game.new_initial_state()
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes = state.chance_outcomes()
                state.apply_action(outcomes[int(rng.integers(0, len(outcomes)))][0])
                continue
            simultaneous = state.is_simultaneous_node()
            players = range(game.num_players()) if simultaneous else [state.current_player()]
            joint = []
            for player in players:
                legal = list(state.legal_actions(player))
                for action in legal:
                    names.setdefault(action, state.action_to_string(player, action))
                joint.append(legal[int(rng.integers(0, len(legal)))] if legal else 0)
            if simultaneous:
                state.apply_actions(joint)
            else:
                state.apply_action(joint[0])
    return names


class OpenSpielEnv(TextEnv):
    """An OpenSpiel game as a text environment; see the module docstring.

    ``OpenSpielEnv(game="kuhn_poker")``, ``OpenSpielEnv(game="goofspiel(num_cards=4)")`` or
    ``OpenSpielEnv(config=OpenSpielConfig(...))``; ``llm_envs.openspiel("game_string")`` is the
    same.
    """

    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "name": "openspiel_v0"}
    config_class = OpenSpielConfig
    reset_options = ()

    def __init__(self, config: OpenSpielConfig | None = None, *, render_mode: str | None = None, **overrides: Any):
        if "params" in overrides and overrides["params"] is not None:
            overrides["params"] = dict(overrides["params"])
        self.config: OpenSpielConfig = self._build_config(config, overrides)
        import pyspiel

        self._template = _template_game(self.config.game, _params_key(self.config.params))
        game_type = self._template.get_type()
        if game_type.dynamics == pyspiel.GameType.Dynamics.MEAN_FIELD:
            raise ValueError(f"{game_type.short_name} is a mean-field game: it has no players to seat")
        self._type = game_type
        self._short_name = game_type.short_name
        self._num_players = self._template.num_players()
        self._simultaneous = game_type.dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS
        self._sampled = game_type.chance_mode == pyspiel.GameType.ChanceMode.SAMPLED_STOCHASTIC
        self._perfect_information = game_type.information == pyspiel.GameType.Information.PERFECT_INFORMATION
        self._utility = {
            pyspiel.GameType.Utility.ZERO_SUM: "zero_sum",
            pyspiel.GameType.Utility.CONSTANT_SUM: "constant_sum",
            pyspiel.GameType.Utility.IDENTICAL: "identical",
        }.get(game_type.utility, "general_sum")
        # A forfeit ends the game at fixed returns for everyone. With two players (or a team
        # sharing one utility) the offender's side loses; with more sides it would replace the
        # others' actual outcome, so a seat that has lost anyway could forfeit to lift a partner
        # from a losing showdown (3-player Kuhn: its partner -2 -> +1): there an invalid move
        # is replaced by a random legal one (charged the format penalty) by default, and
        # "forfeit" is refused.
        many_sides = self._num_players > 2 and self._utility != "identical"
        if self.config.invalid_move == "auto":
            self._invalid_move = "random" if many_sides else "forfeit"
        elif self.config.invalid_move == "forfeit" and many_sides:
            raise ValueError(
                f"invalid_move='forfeit' in {self._short_name} ({self._num_players} players, {self._utility}) lets a "
                "seat that has lost anyway forfeit to lift another's result: a forfeit ends the game at fixed "
                "returns for everyone; use invalid_move='random' (the default for such games)"
            )
        else:
            self._invalid_move = self.config.invalid_move
        self._seed_param = _seed_path(self._template) if self._sampled else None
        if self._sampled and self._seed_param is None:
            raise ValueError(f"{self._short_name} samples chance internally and has no seed parameter: "
                             "its episodes could not be reproduced from a seed")
        _check_integer_actions(self._template)
        inner, self._wrappers = _innermost(self._template)
        self.preset: GamePreset | None = (
            preset_for(inner.get_type().short_name, inner.get_parameters()) if self.config.view == "auto" else None
        )
        # Instance-level metadata: the name and simultaneity depend on the game.
        self.metadata = {
            **type(self).metadata,
            "name": f"openspiel_{self._short_name}_v0",
            "is_parallelizable": self._simultaneous,
        }
        super().__init__([f"player_{i}" for i in range(self._num_players)], render_mode=render_mode)
        self._state_shape = self._tensor_shape()
        self._state_space = spaces.Box(-np.inf, np.inf, shape=self._state_shape, dtype=np.float32)
        self._reference: ReferencePlayer | None = None
        self._position: _Position | None = None
        self._reset_episode_fields()

    # ------------------------------------------------------------------ facts
    @property
    def game_string(self) -> str:
        """The OpenSpiel game string (with parameters)."""
        return str(self._template)

    @property
    def game(self) -> Any:
        """The pyspiel game of the current episode (the template before the first reset)."""
        return self._position.game if self._position is not None else self._template

    @property
    def spiel_state(self) -> Any:
        """The live pyspiel state (read it, do not step it: the environment must do that). (Not
        ``state``: that is PettingZoo's ``state()`` method, a global view this environment does
        not offer.)"""
        self._require_reset()
        return self._position.state

    def player_index(self, agent: str) -> int:
        return self.possible_agents.index(agent)

    # ------------------------------------------------------------------ episode
    def _reset_episode_fields(self) -> None:
        self._joint: dict[int, int] = {}
        self._credited = [0.0] * self._num_players
        self._pending = [0.0] * self._num_players
        self._last_record: dict[int, ActionRecord] = {}
        self._forfeit: int | None = None
        self._invalid = 0
        self._moves = 0

    def _start_episode(self, options: dict[str, Any]) -> str:
        if self._sampled:
            game = _with_seed(self._template, self._seed_param, int(self.np_random.integers(0, 2**31 - 1)))
        else:
            game = self._template
        self._position = _Position(game, game.new_initial_state(), self._sampled)
        self._reset_episode_fields()
        self._resolve_chance()
        return self._next_agent()

    def _resolve_chance(self) -> None:
        state = self._position.state
        while state.is_chance_node():
            outcomes = state.chance_outcomes()
            actions = [a for a, _ in outcomes]
            probs = np.array([p for _, p in outcomes], dtype=float)
            probs = probs / probs.sum()
            state.apply_action(int(actions[int(self.np_random.choice(len(actions), p=probs))]))

    def _shown_records(self) -> list[ActionRecord]:
        """Every record, but the moves of a simultaneous turn stay hidden until every player has
        chosen: the transcript (and ``render``) would otherwise show a bid to the player still
        choosing its own."""
        if not self._joint:
            return self.records
        chosen = {id(self._last_record[p]) for p in self._joint if p in self._last_record}
        hidden = "(chosen; shown once every player has chosen)"
        return [dataclasses.replace(r, action=hidden, parsed={}) if id(r) in chosen else r for r in self.records]

    def _acting_players(self) -> list[int]:
        """Players who still owe a move at this node (in order)."""
        state = self._position.state
        if state.is_terminal():
            return []
        if state.is_simultaneous_node():
            return [p for p in range(self._num_players) if p not in self._joint]
        return [state.current_player()]

    def _next_agent(self) -> str:
        players = self._acting_players()
        if not players:  # pragma: no cover - a terminal state ends the episode before this
            raise AssertionError("no player to move in a live state")
        return self.possible_agents[players[0]]

    def start_from(self, history: list[int], seed: int | None = None) -> None:
        """Reset, then put the game in the state reached by ``history`` (OpenSpiel action ids,
        chance outcomes included) as if the episode had started there: no records yet, the
        player to move selected. For analysis (:mod:`llm_envs.games`): asking an agent what it
        would play in any position.

        Raises:
            ValueError: if the history is illegal or leads to a terminal or chance node.
        """
        self.reset(seed=seed)
        game = self._position.game
        state = game.new_initial_state()
        for action in history:
            legal = state.legal_actions() if not state.is_chance_node() else [a for a, _ in state.chance_outcomes()]
            if state.is_simultaneous_node() or int(action) not in legal:
                raise ValueError(f"history {list(history)} is not a legal sequential history of {self.game_string}")
            state.apply_action(int(action))
        if state.is_terminal() or state.is_chance_node():
            raise ValueError("start_from needs a history that ends at a decision node")
        self._position = _Position(game, state, self._sampled)
        self._reset_episode_fields()
        self.agent_selection = self._next_agent()
        self.infos = {a: self._step_info(a) for a in self.agents}

    def legal_ids_and_texts(self, agent: str) -> tuple[list[int], list[str]]:
        """The action ids ``agent`` may play now and their names as its prompt lists them."""
        if not self.is_acting(agent):
            return [], []
        player = self.player_index(agent)
        ids = self._legal_ids(player)
        return ids, self._move_texts(player, ids)

    def parse_reply(self, agent: str, text: str) -> int | None:
        """The action id ``text`` would play for ``agent`` now (None: no legal move named)."""
        ids, texts = self.legal_ids_and_texts(agent)
        if not ids:
            return None
        index = text_rules.parse_move(text, texts, aliases=lambda: [self._catalog[a] for a in ids])
        return None if index is None else ids[index]

    def is_acting(self, agent: str) -> bool:
        """Whether ``agent`` owes a move now."""
        if not self._has_reset or self._episode_over:
            return False
        return self.player_index(agent) in self._acting_players()

    # ------------------------------------------------------------------ moves
    def _legal_ids(self, player: int) -> list[int]:
        state = self._position.state
        if state.is_terminal():
            return []
        if state.is_simultaneous_node():
            return list(state.legal_actions(player))
        return list(state.legal_actions()) if state.current_player() == player else []

    def _move_texts(self, player: int, ids: list[int]) -> list[str]:
        """The listed names of ``ids``; two moves with one name get `` #<id>`` to stay apart."""
        state = self._position.state
        texts = [state.action_to_string(player, a) for a in ids]
        keys = [text_rules.normalize(t) for t in texts]
        return [f"{t} #{a}" if keys.count(k) > 1 or not k else t for t, k, a in zip(texts, keys, ids)]

    def _apply_action(self, agent: str, action: str) -> str | None:
        player = self.player_index(agent)
        ids = self._legal_ids(player)
        texts = self._move_texts(player, ids)
        index = text_rules.parse_move(action, texts, aliases=lambda: [self._catalog[a] for a in ids])
        parsed: dict[str, Any] = {"move": texts[index] if index is not None else None,
                                  "action_id": ids[index] if index is not None else None}
        info: dict[str, Any] = {}
        if index is None:
            info["error"] = "the reply names no legal move"
        record = self._add_record(agent, action, parsed=parsed, format_ok=index is not None, info=info)
        self._last_record[player] = record
        if self._pending[player]:
            self._credit(record, "game", self._pending[player])
            self._pending[player] = 0.0
        if index is None:
            self._invalid += 1
            if self.config.format_penalty:
                self._credit(record, "format", self.config.format_penalty)
            if self._invalid_move == "forfeit":
                record.parsed["forfeit"] = True
                return self._forfeit_game(player)
            chosen = ids[int(self.np_random.integers(0, len(ids)))]
            record.parsed["played"] = self._move_texts(player, [chosen])[0]
            record.parsed["action_id"] = chosen
        else:
            chosen = ids[index]
        state = self._position.state
        if state.is_simultaneous_node():
            self._joint[player] = chosen
            if self._acting_players():
                return self._next_agent()
            state.apply_actions([self._joint[p] for p in range(self._num_players)])
            self._joint = {}
        else:
            state.apply_action(chosen)
        self._moves += 1
        self.turn += 1
        self._resolve_chance()
        self._settle(list(state.returns()))
        if state.is_terminal():
            return self._finish()
        if self.config.max_moves is not None and self._moves >= self.config.max_moves:
            return self._finish(truncated=True)
        return self._next_agent()

    def _settle(self, returns: list[float]) -> None:
        """Credit every player the change of its return since the last settlement."""
        for p in range(self._num_players):
            delta = float(returns[p]) - self._credited[p]
            if delta == 0.0:
                continue
            self._credited[p] = float(returns[p])
            record = self._last_record.get(p)
            if record is None:
                self._pending[p] += delta
            else:
                self._credit(record, "game", delta)

    def _forfeit_game(self, offender: int) -> None:
        self._forfeit = offender
        returns = text_rules.forfeit_returns(
            self._num_players, offender, self._utility, self.game.min_utility(), self.config.forfeit_return
        )
        self._settle(returns)
        return self._finish()

    def _finish(self, truncated: bool = False) -> None:
        for p in range(self._num_players):
            if self._pending[p]:
                # The player's return changed but it never moved: a passive record carries it.
                agent = self.possible_agents[p]
                record = self._add_record(agent, "", parsed={"move": None, "action_id": None},
                                          info={"passive": True})
                self._last_record[p] = record
                self._credit(record, "game", self._pending[p])
                self._pending[p] = 0.0
        self._end_episode(truncated=truncated)
        return None

    # ------------------------------------------------------------------ text
    def _instruction(self, agent: str) -> str:
        player = self.player_index(agent)
        if self.preset is not None:
            rules = self.preset.rules
        else:
            rules = (f"You are playing {self._type.long_name} (the OpenSpiel game '{self.game_string}'), "
                     f"a game for {self._num_players} player(s).")
        if "zerosum" in self._wrappers:
            rules += (" Scoring is zero-sum: your reward is your own result minus the average result "
                      "of all players, so you gain exactly what the others lose.")
        policy = (
            "A reply that names no legal move forfeits the game."
            if self._invalid_move == "forfeit"
            else "A reply that names no legal move is replaced by a random legal move."
        )
        return (
            f"{rules}\nYou are {agent} (player {player}). Each turn you see what you know of the game "
            "and the list of legal moves. Reply with exactly one legal move, written as listed "
            f"(square brackets are fine, e.g. [move]); if you name several, the last one counts. {policy}"
        )

    def _view(self, player: int, agent: str) -> str:
        state = self._position.state
        if self.preset is not None:
            try:
                return self.preset.render(state, player, agent)
            except Exception:  # noqa: BLE001 - a rendering gap must not stop the game
                pass
        return self._generic_view(player)

    def _generic_view(self, player: int) -> str:
        state = self._position.state
        prefer_info = self.config.view == "information_state" or (
            self.config.view == "auto" and not self._perfect_information
        )
        order = ("information_state", "observation") if prefer_info else ("observation", "information_state")
        for kind in order:
            provides = getattr(self._type, f"provides_{kind}_string")
            if not provides:
                continue
            try:
                text = getattr(state, f"{kind}_string")(player)
            except Exception:  # noqa: BLE001 - some games refuse a string at some nodes
                continue
            if text.strip():
                return text.rstrip()
        if self._perfect_information:
            return str(state).rstrip()
        return "(this game gives no text view of your information)"

    def _prompt(self, agent: str) -> str:
        player = self.player_index(agent)
        if self._episode_over or self._position is None:
            returns = ", ".join(f"{a} {r:+g}" for a, r in zip(self.possible_agents, self._credited))
            how = " (forfeit by " + self.possible_agents[self._forfeit] + ")" if self._forfeit is not None else ""
            return f"The game is over{how}. Returns: {returns}."
        view = self._view(player, agent)
        if not self.is_acting(agent):
            waiting = ", ".join(self.possible_agents[p] for p in self._acting_players())
            return f"{view}\n\nWaiting for {waiting} to move."
        ids = self._legal_ids(player)
        texts = self._move_texts(player, ids)
        if self.preset is not None and self.preset.describe_moves is not None:
            moves = self.preset.describe_moves(self._position.state, player, texts)
        else:
            moves = text_rules.format_move_list(texts)
        together = " (all players choose at the same time)" if self._position.state.is_simultaneous_node() else ""
        return f"{view}\n\nYour legal moves{together}: {moves}\nYour move:"

    def _role(self, agent: str) -> str:
        return agent

    #: Attributes never changed after construction: a clone shares them instead of copying. (Not
    #: the observation, action and state spaces: their sampling generators are per copy.)
    _SHARED_ATTRIBUTES = frozenset({
        "config", "_template", "_type", "preset", "metadata", "possible_agents", "_state_shape", "_reference", "render_mode", "_short_name",
        "_num_players", "_simultaneous", "_sampled", "_perfect_information", "_utility", "_seed_param",
        "_wrappers",
    })

    def clone(self) -> OpenSpielEnv:
        """An independent copy of the episode (see :meth:`TextEnv.clone`); attributes fixed at
        construction are shared, everything else is deep-copied (a clone costs tens of µs)."""
        memo: dict[int, Any] = {id(r): r for r in self._shared_resources()}
        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        for key, value in self.__dict__.items():
            if key in self._SHARED_ATTRIBUTES:
                twin.__dict__[key] = value
            elif isinstance(value, np.random.Generator):
                twin.__dict__[key] = _copy_generator(value)
            else:
                twin.__dict__[key] = copy.deepcopy(value, memo)
        return twin

    def _episode_metrics(self) -> dict[str, float]:
        finished = self._episode_over and self._forfeit is None and not self._truncated
        metrics = {
            "success": 1.0 if finished else 0.0,
            "moves": float(self._moves),
            "invalid_moves": float(self._invalid),
            "forfeit": 1.0 if self._forfeit is not None else 0.0,
        }
        for agent, value in zip(self.possible_agents, self._credited):
            metrics[f"return/{agent}"] = value
        return metrics

    def _describe_episode(self) -> str:
        text = f"OpenSpiel game: {self.game_string}"
        if self._episode_over and self._position is not None:
            text += "\nfinal state:\n" + str(self._position.state).rstrip()
        return text

    def _shared_resources(self) -> list[Any]:
        shared: list[Any] = [self._template, self._type, self.config]
        if self.preset is not None:
            shared.append(self.preset)
        if self._reference is not None:
            shared.append(self._reference)
        return shared

    # ------------------------------------------------------------------ scripted agents
    def _decision_rng(self, player: int, salt: str) -> np.random.Generator:
        """A generator for a scripted agent's choice that depends only on the episode and the
        decision, never on (or changing) the environment's own generator."""
        key = [
            int(self._last_seed or 0) % 2**63,
            self._episode_count,
            len(self.records),
            len(self._joint),
            player,
            zlib.crc32(salt.encode()),
        ]
        return np.random.default_rng(key)

    @property
    def reference_player(self) -> ReferencePlayer:
        """The solver behind the reference agent (built on first use)."""
        if self._reference is None:
            kind = self.config.reference
            if kind == "auto":
                if self.preset is not None:
                    kind = self.preset.reference
                elif self._perfect_information and not self._simultaneous:
                    kind = "mcts"
                else:
                    kind = "random"
            self._reference = make_reference_player(kind, self._template, **self.config.reference_options)
        return self._reference

    def reference_action(self, agent: str) -> str:
        player = self.player_index(agent)
        if not self.is_acting(agent):
            return ""
        action = self.reference_player.act(self._position.state, player, self._decision_rng(player, "reference"))
        return self._move_texts(player, [action])[0]

    def random_action(self, agent: str, rng: np.random.Generator) -> str:
        player = self.player_index(agent)
        if not self.is_acting(agent):
            return ""
        ids = self._legal_ids(player)
        return self._move_texts(player, ids)[int(rng.integers(0, len(ids)))]

    def reference_policy(self, agent: str) -> dict[str, float]:
        """The reference agent's move probabilities now (move text → probability)."""
        player = self.player_index(agent)
        if not self.is_acting(agent):
            return {}
        probs = self.reference_player.policy(self._position.state, player)
        ids = sorted(probs)
        return dict(zip(self._move_texts(player, ids), (probs[a] for a in ids)))

    def random_policy(self, agent: str) -> dict[str, float]:
        """The random agent's move probabilities now: uniform over the legal moves."""
        if not self.is_acting(agent):
            return {}
        texts = self.legal_actions(agent)
        return {t: 1.0 / len(texts) for t in texts}

    # ------------------------------------------------------------------ numeric hooks
    @property
    def max_legal_actions(self) -> int:
        return int(self._template.num_distinct_actions())

    def legal_actions(self, agent: str) -> list[str]:
        """The moves ``agent`` may play now, as listed in its prompt ([] when not its turn)."""
        if not self.is_acting(agent):
            return []
        player = self.player_index(agent)
        return self._move_texts(player, self._legal_ids(player))

    @property
    def _catalog(self) -> tuple[str, ...]:
        return action_catalog_for(self.game_string, self.preset is not None)

    def action_catalog(self) -> list[str]:
        """One name per OpenSpiel action id, index = id, the same for every player and state.

        A catalog name is always accepted for its action (as an alias of the listed move), so
        a numeric policy can play ``catalog[i]`` whenever ``action_mask(agent)[i] == 1``.
        """
        return list(self._catalog)

    def action_mask(self, agent: str) -> np.ndarray:
        """int8 array over :meth:`action_catalog`: 1 where the action is legal for ``agent`` now."""
        mask = np.zeros(len(self._catalog), dtype=np.int8)
        if self.is_acting(agent):
            mask[self._legal_ids(self.player_index(agent))] = 1
        return mask

    def _tensor_kind(self) -> str | None:
        if self._type.provides_information_state_tensor:
            return "information_state"
        if self._type.provides_observation_tensor:
            return "observation"
        return None

    def _tensor_shape(self) -> tuple[int, ...]:
        kind = self._tensor_kind()
        if kind is None:
            return (0,)
        try:
            with _quiet_stderr():
                return (int(getattr(self._template, f"{kind}_tensor_size")()),)
        except Exception:  # noqa: BLE001 - a game that declares a tensor it does not implement
            return (0,)

    def state_space(self) -> spaces.Box:
        """The space of :meth:`state_tensor` (flat float32; the same object on every call)."""
        return self._state_space

    def state_tensor(self, agent: str) -> np.ndarray:
        """``agent``'s information-state tensor (else observation tensor), flat float32; zeros
        before the first reset or where the game cannot give one."""
        out = np.zeros(self._state_shape, dtype=np.float32)
        kind = self._tensor_kind()
        if kind is None or self._position is None:
            return out
        try:
            values = getattr(self._position.state, f"{kind}_tensor")(self.player_index(agent))
        except Exception:  # noqa: BLE001 - e.g. a tensor asked for at a node that has none
            return out
        out[:] = np.asarray(values, dtype=np.float32).reshape(-1)[: out.size]
        return out

    # ------------------------------------------------------------------ reward contract
    def reference_is_ceiling(self, agent: str | None = None) -> bool:
        """A game: the reference agents are opponents, not a ceiling (only the per-turn
        bounds are checked)."""
        return False

    def reward_bounds(self, agent: str) -> tuple[float, float]:
        """A record is credited the change of its player's return while it was the player's
        latest move, plus the format penalty of an invalid move. Returns lie in
        ``[lo, hi]``: the game's utilities, the forfeit return, 0 (the start) and a forfeiting
        player's share in zero-sum games; so one record's reward lies in
        ``[lo − hi + format_penalty, hi − lo]``. docs/envs/openspiel.md states the same bounds."""
        forfeit = self.config.forfeit_return
        low = min(float(self.game.min_utility()), 0.0, float(forfeit) if forfeit is not None else 0.0)
        high = max(float(self.game.max_utility()), 0.0, -low / max(self._num_players - 1, 1))
        return (low - high + min(self.config.format_penalty, 0.0), high - low)
