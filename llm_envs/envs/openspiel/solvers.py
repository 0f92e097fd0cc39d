"""Reference players for OpenSpiel games, built from the library's own solvers.

Each player gives a *policy* at a state: the probability of every legal action of the player to
move. The environment's reference agent samples from it (with a generator of its own, never the
environment's); exact measurement (:mod:`llm_envs.games`) reads it whole.

==============  ===============================================================================
``cfr``         a Nash equilibrium approximated by OpenSpiel's C++ CFR+ solver (average policy),
                run once per game string and cached in memory and on disk (Kuhn Poker: 2000
                iterations, NashConv ≈ 1e-3; Leduc Poker: 300 iterations, NashConv ≈ 5e-3).
                Imperfect-information games small enough to enumerate.
``minimax``     exact minimax over the game tree (memoised by state), uniform over the optimal
                moves. Two-player zero-sum perfect-information games small enough to solve
                (Tic-Tac-Toe: 5,478 states).
``mcts``        OpenSpiel's C++ MCTS bot (UCT, random rollouts, exact solving of decided
                subtrees) run on the true state: a strong player for larger perfect-information
                games (Connect Four). On imperfect-information games it reads hidden state,
                which reference agents may do.
``random``      uniform over the legal moves: for games with no solver.
==============  ===============================================================================

The cache directory is ``$LLM_ENVS_CACHE_DIR`` (default ``~/.cache/llm_envs``); a cached policy
is keyed by the game string, the solver, its iteration count and the OpenSpiel version, and is
written atomically, so parallel test workers never read a torn file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "REFERENCE_KINDS",
    "CFRPlayer",
    "MCTSPlayer",
    "MinimaxPlayer",
    "RandomPlayer",
    "ReferencePlayer",
    "cache_dir",
    "cfr_policy_table",
    "make_reference_player",
]

REFERENCE_KINDS = ("cfr", "minimax", "mcts", "random")

#: CFR+ iterations per game short name (others: :data:`DEFAULT_CFR_ITERATIONS`).
CFR_ITERATIONS = {"kuhn_poker": 2000, "leduc_poker": 300}
DEFAULT_CFR_ITERATIONS = 500


def cache_dir() -> Path:
    """Where solved policies are cached: ``$LLM_ENVS_CACHE_DIR`` or ``~/.cache/llm_envs``."""
    root = os.environ.get("LLM_ENVS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "llm_envs")
    return Path(root) / "openspiel"


class ReferencePlayer:
    """A policy over legal actions at any decision state of one game."""

    kind = "reference"

    def policy(self, state: Any, player: int) -> dict[int, float]:
        """Action id → probability for ``player`` at ``state`` (legal actions only)."""
        raise NotImplementedError

    def act(self, state: Any, player: int, rng: np.random.Generator) -> int:
        """One action drawn from :meth:`policy` with ``rng``."""
        probs = self.policy(state, player)
        actions = sorted(probs)
        weights = np.array([probs[a] for a in actions], dtype=float)
        weights = weights / weights.sum()
        return int(actions[int(rng.choice(len(actions), p=weights))])


def _legal(state: Any, player: int) -> list[int]:
    return list(state.legal_actions(player)) if state.is_simultaneous_node() else list(state.legal_actions())


class RandomPlayer(ReferencePlayer):
    """Uniform over the legal actions."""

    kind = "random"

    def policy(self, state: Any, player: int) -> dict[int, float]:
        legal = _legal(state, player)
        return {a: 1.0 / len(legal) for a in legal}


# ---------------------------------------------------------------------------------- CFR
def _game_key(game: Any) -> str:
    return str(game)


def _cache_path(kind: str, game_string: str, iterations: int) -> Path:
    import pyspiel

    version = getattr(pyspiel, "__version__", None)
    if version is None:
        try:
            from importlib.metadata import version as _version

            version = _version("open_spiel")
        except Exception:  # noqa: BLE001 - any failure just means "unknown version"
            version = "unknown"
    digest = hashlib.sha256(f"{kind}|{game_string}|{iterations}|{version}".encode()).hexdigest()[:16]
    safe = "".join(c if c.isalnum() else "_" for c in game_string)[:40]
    return cache_dir() / f"{kind}-{safe}-{iterations}-{digest}.json"


def _write_atomically(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@functools.lru_cache(maxsize=16)
def cfr_policy_table(game_string: str, iterations: int) -> Mapping[str, dict[int, float]]:
    """Information-state string → {action: probability} of CFR+'s average policy.

    Solved once per process and game string, and cached on disk (see the module docstring).
    """
    import pyspiel
    from open_spiel.python import policy as policy_lib

    path = _cache_path("cfr+", game_string, iterations)
    if path.exists():
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return {key: {int(a): float(p) for a, p in probs.items()} for key, probs in raw.items()}
        except (OSError, ValueError, AttributeError):
            pass  # a damaged cache file is recomputed and replaced
    game = pyspiel.load_game(game_string)
    solver = pyspiel.CFRPlusSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    average = solver.average_policy()
    # The Python TabularPolicy enumerates every information state of the game.
    enumeration = policy_lib.TabularPolicy(game)
    table: dict[str, dict[int, float]] = {}
    for key, state in zip(enumeration.state_lookup, enumeration.states):
        probs = dict(average.action_probabilities(state))
        table[key] = {int(a): float(p) for a, p in probs.items()}
    _write_atomically(path, {k: {str(a): p for a, p in v.items()} for k, v in table.items()})
    return table


class CFRPlayer(ReferencePlayer):
    """CFR+'s average policy (an approximate Nash equilibrium); see :func:`cfr_policy_table`."""

    kind = "cfr"

    def __init__(self, game: Any, iterations: int | None = None) -> None:
        short = game.get_type().short_name
        self.iterations = int(iterations or CFR_ITERATIONS.get(short, DEFAULT_CFR_ITERATIONS))
        self.game_string = _game_key(game)

    @property
    def table(self) -> Mapping[str, dict[int, float]]:
        return cfr_policy_table(self.game_string, self.iterations)

    def policy(self, state: Any, player: int) -> dict[int, float]:
        legal = _legal(state, player)
        probs = self.table.get(state.information_state_string(player))
        if probs is None:  # never happens for an enumerated game; be safe rather than raise
            return {a: 1.0 / len(legal) for a in legal}
        total = sum(probs.get(a, 0.0) for a in legal)
        if total <= 0:
            return {a: 1.0 / len(legal) for a in legal}
        return {a: probs.get(a, 0.0) / total for a in legal}


# ---------------------------------------------------------------------------------- minimax
class MinimaxPlayer(ReferencePlayer):
    """Exact minimax values (memoised per state); plays uniformly among the optimal moves.

    Values are those of player 0 (two-player zero-sum games of perfect information); chance
    nodes take expectations. States are memoised by their full text and the player to move, so
    transpositions are solved once (Tic-Tac-Toe: 5,478 states, not 549,946 histories).
    """

    kind = "minimax"

    def __init__(self, game: Any) -> None:
        self.game = game
        self._values: dict[tuple[str, int], float] = {}

    def value(self, state: Any) -> float:
        """Player 0's minimax value of ``state``."""
        key = (str(state), state.current_player())
        cached = self._values.get(key)
        if cached is not None:
            return cached
        if state.is_terminal():
            result = float(state.returns()[0])
        elif state.is_chance_node():
            result = sum(p * self.value(state.child(a)) for a, p in state.chance_outcomes())
        else:
            children = [self.value(state.child(a)) for a in state.legal_actions()]
            result = max(children) if state.current_player() == 0 else min(children)
        self._values[key] = result
        return result

    def policy(self, state: Any, player: int) -> dict[int, float]:
        legal = list(state.legal_actions())
        values = [self.value(state.child(a)) for a in legal]
        best = max(values) if player == 0 else min(values)
        optimal = [a for a, v in zip(legal, values) if abs(v - best) <= 1e-9]
        return {a: 1.0 / len(optimal) for a in optimal}


# ---------------------------------------------------------------------------------- MCTS
class MCTSPlayer(ReferencePlayer):
    """OpenSpiel's C++ MCTS bot (UCT with random rollouts, solver on) on the true state.

    The bot is deterministic given its seed, so its policy at a state is a single action; the
    seed is drawn from the generator :meth:`act` receives (:meth:`policy` uses seed 0).
    """

    kind = "mcts"

    def __init__(self, game: Any, simulations: int = 500, uct_c: float = 2.0, rollouts: int = 1) -> None:
        self.game = game
        self.simulations = int(simulations)
        self.uct_c = float(uct_c)
        self.rollouts = int(rollouts)

    def _search(self, state: Any, seed: int) -> int:
        import pyspiel

        evaluator = pyspiel.RandomRolloutEvaluator(self.rollouts, seed)
        # The state's own game: games with sampled chance load one game object per episode.
        bot = pyspiel.MCTSBot(state.get_game(), evaluator, self.uct_c, self.simulations, 1000, True, seed, False)
        return int(bot.step(state))

    def policy(self, state: Any, player: int) -> dict[int, float]:
        return {self._search(state, 0): 1.0}

    def act(self, state: Any, player: int, rng: np.random.Generator) -> int:
        return self._search(state, int(rng.integers(0, 2**31 - 1)))


@functools.lru_cache(maxsize=32)
def _shared_minimax(game_string: str) -> MinimaxPlayer:
    import pyspiel

    return MinimaxPlayer(pyspiel.load_game(game_string))


def make_reference_player(kind: str, game: Any, **options: Any) -> ReferencePlayer:
    """The reference player ``kind`` (one of :data:`REFERENCE_KINDS`) for ``game``.

    Minimax players are shared per game string within a process, so every environment instance
    reuses the values solved so far.
    """
    if kind == "cfr":
        return CFRPlayer(game, **options)
    if kind == "minimax":
        return _shared_minimax(str(game))
    if kind == "mcts":
        return MCTSPlayer(game, **options)
    if kind == "random":
        return RandomPlayer()
    raise ValueError(f"unknown reference player {kind!r}; choose one of {REFERENCE_KINDS}")
