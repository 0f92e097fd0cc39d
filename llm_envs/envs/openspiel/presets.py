"""Curated OpenSpiel games: the registered ids, the rules in plain words, and how each game's
state reads as text for a language model.

OpenSpiel's own strings are written for programs (Kuhn Poker's information state is ``"0pb"``),
so the curated games render their state from the public API of ``pyspiel`` instead: the
player's private card, the betting so far, a labelled board. This module only *presents*
states; every rule stays in OpenSpiel. Any other game uses the generic view (the player's
information-state or observation string) described in :mod:`llm_envs.envs.openspiel.env`.

======================  ====================  ===========  ==========================================
id                      OpenSpiel game        reference    notes
======================  ====================  ===========  ==========================================
``llm/TicTacToe-v0``    ``tic_tac_toe``       minimax      exact; optimal play always draws
``llm/ConnectFour-v0``  ``connect_four``      mcts         C++ MCTS, 500 simulations per move
``llm/KuhnPoker-v0``    ``kuhn_poker``        cfr          CFR+ Nash; value to player 0 is −1/18
``llm/LeducPoker-v0``   ``leduc_poker``       cfr          CFR+ Nash (NashConv ≈ 5e-3)
``llm/Negotiation-v0``  ``negotiation``       mcts         proposals only (no symbolic utterances),
                                                           scored zero-sum by OpenSpiel's ``zerosum``
                                                           transform (reward = own value − mean),
                                                           a competitive negotiation like SPIRAL's;
                                                           MCTS reads both valuations
======================  ====================  ===========  ==========================================
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CURATED", "GamePreset", "preset_for"]

Renderer = Callable[[Any, int, str], str]
MoveDescriber = Callable[[Any, int, list[str]], str]


@dataclass(frozen=True)
class GamePreset:
    """How one curated game is registered and shown.

    Attributes:
        env_id: The registered id (``llm/KuhnPoker-v0``).
        game: OpenSpiel short name of the game rendered (the innermost one when the registered
            game is wrapped, e.g. in ``zerosum``).
        params: Parameters the rendering needs (any game of that name with these parameters is
            rendered this way, wrapped or not).
        title: Display name.
        rules: The rules in plain words (the system prompt).
        reference: Reference solver kind (:data:`~llm_envs.envs.openspiel.solvers.REFERENCE_KINDS`).
        render: ``(state, player, agent_label) -> text``: what the player knows now.
        describe_moves: ``(state, player, legal texts) -> text`` replacing the full move list
            (games with hundreds of moves); None lists every move.
        description: One line for the registry.
    """

    env_id: str
    game: str
    title: str
    rules: str
    reference: str
    render: Renderer
    params: dict[str, Any] = field(default_factory=dict)
    describe_moves: MoveDescriber | None = None
    description: str = ""
    registered_game: str = ""

    @property
    def game_string(self) -> str:
        """The OpenSpiel game string the registered id loads."""
        return self.registered_game or self.game


def _label(player: int) -> str:
    return f"player_{player}"


def _player_moves(state: Any) -> list[tuple[int, str]]:
    """``(player, move text)`` of every non-chance action so far (public in the games that use
    it: all their player actions are seen by everyone)."""
    out = []
    for item in state.full_history():
        if item.player >= 0:
            out.append((item.player, state.action_to_string(item.player, item.action)))
    return out


# ---------------------------------------------------------------------------------- boards
def _board_with_coordinates(rows: list[str], columns_only: bool = False) -> str:
    width = max((len(r) for r in rows), default=0)
    header = "   " + " ".join(str(c) for c in range(width))
    if columns_only:
        body = ["   " + " ".join(r) for r in rows]
    else:
        body = [f"{i:>2} " + " ".join(r) for i, r in enumerate(rows)]
    return "\n".join([header, *body])


def _render_tic_tac_toe(state: Any, player: int, agent: str) -> str:
    rows = [r for r in state.observation_string(player).splitlines() if r.strip()]
    mark = "x" if player == 0 else "o"
    return (
        f"You are {agent} and play '{mark}'; '.' is an empty cell.\n"
        f"Board (rows and columns numbered from 0):\n{_board_with_coordinates(rows)}"
    )


def _render_connect_four(state: Any, player: int, agent: str) -> str:
    rows = [r for r in state.observation_string(player).splitlines() if r.strip()]
    mark = "x" if player == 0 else "o"
    return (
        f"You are {agent} and play '{mark}'; '.' is empty. Pieces fall to the lowest empty cell "
        f"of the column you choose.\nBoard (columns numbered from 0, bottom row last):\n"
        f"{_board_with_coordinates(rows, columns_only=True)}"
    )


# ---------------------------------------------------------------------------------- poker
def _kuhn_card(card: int, num_players: int) -> str:
    if num_players == 2:
        return "JQK"[card]
    return f"{card} (of 0..{num_players})"


def _render_kuhn(state: Any, player: int, agent: str) -> str:
    n = state.get_game().num_players()
    history = state.history()
    lines = [f"You are {agent}."]
    if len(history) > player:
        lines.append(f"Your card: {_kuhn_card(history[player], n)}.")
    moves = _player_moves(state)
    betting = ", ".join(f"{_label(p)} {m}" for p, m in moves) or "none yet"
    lines.append(f"Actions so far: {betting}.")
    return "\n".join(lines)


_LEDUC_FIELD = re.compile(r"\[(\w[\w ]*?): ?([^\]]*)\]")
_LEDUC_RANKS = "JQK"


def _render_leduc(state: Any, player: int, agent: str) -> str:
    fields = dict(_LEDUC_FIELD.findall(state.information_state_string(player)))
    lines = [f"You are {agent}."]
    private = fields.get("Private", "").strip()
    if private.lstrip("-").isdigit() and int(private) >= 0:
        lines.append(f"Your private card: {_LEDUC_RANKS[int(private) // 2]}.")
    public = fields.get("Public", "").strip()
    if public.lstrip("-").isdigit() and int(public) >= 0:
        lines.append(f"Public card: {_LEDUC_RANKS[int(public) // 2]}.")
    else:
        lines.append("Public card: not dealt yet (it comes after the first betting round).")
    if "Pot" in fields:
        lines.append(f"Pot: {fields['Pot'].strip()} chips.")
    money = fields.get("Money", "").split()
    if len(money) == state.get_game().num_players():
        lines.append("Chips left: " + ", ".join(f"{_label(p)} {m}" for p, m in enumerate(money)) + ".")
    rounds: list[list[str]] = [[], []]
    chance_seen = 0
    n = state.get_game().num_players()
    for item in state.full_history():
        if item.player < 0:
            chance_seen += 1
            continue
        round_index = 0 if chance_seen <= n else 1
        rounds[round_index].append(f"{_label(item.player)} {state.action_to_string(item.player, item.action)}")
    lines.append("Round 1 betting: " + (", ".join(rounds[0]) or "none yet") + ".")
    if rounds[1] or chance_seen > n:
        lines.append("Round 2 betting: " + (", ".join(rounds[1]) or "none yet") + ".")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- negotiation
_NEGOTIATION_FIELD = re.compile(r"^(.*?):\s*(.*)$")


def _render_negotiation(state: Any, player: int, agent: str) -> str:
    fields = {}
    for line in state.observation_string(player).splitlines():
        match = _NEGOTIATION_FIELD.match(line.strip())
        if match:
            fields[match.group(1).strip()] = match.group(2).strip()
    pool = fields.get("Item pool", "?")
    values = fields.get(f"Agent {player} util vec", "?")
    lines = [
        f"You are {agent}.",
        f"Items in the pool (quantities of item types A, B, C): {pool}.",
        f"Your value for one item of each type: {values} (the other player values them differently, "
        "and you do not know how).",
    ]
    history = [(p, m) for p, m in _player_moves(state)]
    if history:
        lines.append("Proposals so far (each names what its proposer keeps): " +
                     "; ".join(f"{_label(p)} {m.removeprefix('Proposal: ')}" for p, m in history) + ".")
    else:
        lines.append("No proposal yet.")
    if "Max steps" in fields:
        lines.append(f"The game ends without a deal after {fields['Max steps']} proposals in all.")
    return "\n".join(lines)


def _describe_negotiation_moves(state: Any, player: int, texts: list[str]) -> str:
    proposals = [t for t in texts if t.startswith("Proposal: [")]
    others = [t for t in texts if t not in proposals]
    parts = []
    if proposals:
        bounds = [0, 0, 0]
        for text in proposals:
            numbers = [int(x) for x in re.findall(r"-?\d+", text)]
            bounds = [max(b, v) for b, v in zip(bounds, numbers)] if len(numbers) == 3 else bounds
        parts.append(
            "Proposal: [a, b, c] (the numbers of items A, B, C you keep; the other player gets the "
            f"rest), with 0 ≤ a ≤ {bounds[0]}, 0 ≤ b ≤ {bounds[1]}, 0 ≤ c ≤ {bounds[2]}"
        )
    parts += others
    return " | ".join(parts)


# ---------------------------------------------------------------------------------- catalog
CURATED: tuple[GamePreset, ...] = (
    GamePreset(
        env_id="llm/TicTacToe-v0",
        game="tic_tac_toe",
        title="Tic-Tac-Toe",
        rules=(
            "Tic-Tac-Toe on a 3x3 board. player_0 plays 'x' and moves first, player_1 plays 'o'. "
            "On your turn you mark one empty cell; a move is written x(row,col) or o(row,col). "
            "Three of your marks in a row, column or diagonal win (+1, the loser gets -1); a full "
            "board without a line is a draw (0)."
        ),
        reference="minimax",
        render=_render_tic_tac_toe,
        description="Tic-Tac-Toe (OpenSpiel); minimax reference.",
    ),
    GamePreset(
        env_id="llm/ConnectFour-v0",
        game="connect_four",
        title="Connect Four",
        rules=(
            "Connect Four on a board of 6 rows and 7 columns. player_0 plays 'x' and moves first, "
            "player_1 plays 'o'. On your turn you drop a piece into a column that is not full; a "
            "move is written x<column> or o<column> (e.g. x3). Four of your pieces in a line "
            "(horizontal, vertical or diagonal) win (+1, the loser gets -1); a full board is a draw."
        ),
        reference="mcts",
        render=_render_connect_four,
        description="Connect Four (OpenSpiel); MCTS reference.",
    ),
    GamePreset(
        env_id="llm/KuhnPoker-v0",
        game="kuhn_poker",
        title="Kuhn Poker",
        rules=(
            "Kuhn Poker: a deck of three cards J < Q < K; each of the two players antes 1 chip and "
            "gets one private card. player_0 acts first. A player may Pass (check, or fold when facing "
            "a bet) or Bet (put in 1 more chip, or call a bet). After Pass-Pass, Bet-Bet or "
            "Pass-Bet-Bet the higher card wins the pot; after a Bet answered by Pass the bettor wins "
            "it. Your reward is the chips you win (positive) or lose (negative)."
        ),
        reference="cfr",
        render=_render_kuhn,
        description="Kuhn Poker (OpenSpiel); CFR+ Nash reference.",
    ),
    GamePreset(
        env_id="llm/LeducPoker-v0",
        game="leduc_poker",
        title="Leduc Poker",
        rules=(
            "Leduc Hold'em: a deck of six cards, two each of J < Q < K. Each of the two players antes "
            "1 chip and gets one private card. There are two betting rounds; after the first, one "
            "public card is dealt. In each round a player may Fold, Call (or check) or Raise (2 "
            "chips in round 1, 4 in round 2; at most two raises per round). At the showdown a "
            "player whose private card pairs the public card wins; otherwise the higher private "
            "card wins. Your reward is the chips you win or lose."
        ),
        reference="cfr",
        render=_render_leduc,
        description="Leduc Poker (OpenSpiel); CFR+ Nash reference.",
    ),
    GamePreset(
        env_id="llm/Negotiation-v0",
        game="negotiation",
        params={"enable_utterances": False},
        registered_game="zerosum(game=negotiation(enable_utterances=False))",
        title="Negotiation",
        rules=(
            "Negotiation over a pool of items of three types. Each player values the item types "
            "privately. Players take turns proposing a split, written Proposal: [a, b, c] = how "
            "many items of each type the proposer keeps (the other player gets the rest). Instead "
            "of proposing you may accept the most recent proposal with 'Proposal: Agreement "
            "reached!'. On agreement each player's result is the value of the items they get; "
            "without agreement before the step limit, both get 0."
        ),
        reference="mcts",
        render=_render_negotiation,
        describe_moves=_describe_negotiation_moves,
        description="Competitive negotiation over items (OpenSpiel, zero-sum, proposals only); MCTS reference.",
    ),
)

_BY_GAME = {p.game: p for p in CURATED}


def preset_for(short_name: str, params: dict[str, Any] | None = None) -> GamePreset | None:
    """The curated preset of an OpenSpiel game, if it has one and the game's parameters agree
    with every parameter the preset sets (Negotiation's rendering assumes no utterances)."""
    preset = _BY_GAME.get(short_name)
    if preset is None:
        return None
    params = params or {}
    if any(params.get(key) != value for key, value in preset.params.items()):
        return None
    return preset
