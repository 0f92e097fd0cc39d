"""The text side of the OpenSpiel adapter, free of PettingZoo and of pyspiel: reading a move out
of a reply, the forfeit rule, and the wording of prompts.

A reply names a move by writing one of the legal moves as the prompt lists it (``Bet``,
``x(1,1)``), optionally in square brackets. Matching ignores letter case and spacing next to
punctuation, finds the move inside a sentence as a whole word, and takes the **last** move named
(the longer one when two end at the same place); a move's catalog text
(:meth:`OpenSpielEnv.action_catalog`) is an alias, counted inside a longer reply only when no
listed text is named. A reply that names no legal move is an **invalid move** (never an
exception); the environment then applies its ``invalid_move`` policy (:func:`forfeit_returns`).
docs/envs/openspiel.md ("Spec", Action) says the same for players.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

__all__ = [
    "INVALID_MOVE_POLICIES",
    "dedupe_catalog",
    "forfeit_returns",
    "format_move_list",
    "normalize",
    "parse_move",
]

#: ``forfeit``: the offender loses the game at once (see :func:`forfeit_returns`);
#: ``random``: a uniformly random legal move is played for the offender.
INVALID_MOVE_POLICIES = ("auto", "forfeit", "random")

_SPACES = re.compile(r"\s+")
# A space next to anything that is not a letter, digit or underscore is noise.
_SPACE_BEFORE_PUNCT = re.compile(r" (?=[^\w ])")
_SPACE_AFTER_PUNCT = re.compile(r"(?<=[^\w ]) ")


def normalize(text: str) -> str:
    """Case-folded, NFKC text with whitespace collapsed and dropped next to punctuation.

    ``"  X ( 1 , 1 )\\n"`` → ``"x(1,1)"``; ``"Proposal:  [1, 0, 2]"`` → ``"proposal:[1,0,2]"``.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SPACES.sub(" ", text).strip()
    text = _SPACE_BEFORE_PUNCT.sub("", text)
    return _SPACE_AFTER_PUNCT.sub("", text)


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _occurrences(haystack: str, needle: str) -> list[int]:
    """End positions of the whole-word occurrences of ``needle`` in ``haystack``.

    An occurrence is whole-word when the characters just outside it are not word characters,
    or when the needle's own edge is not a word character (``x(1,1)`` may follow ``[``).
    """
    ends = []
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        left_ok = start == 0 or not (_is_word_char(haystack[start - 1]) and _is_word_char(needle[0]))
        right_ok = end == len(haystack) or not (_is_word_char(haystack[end]) and _is_word_char(needle[-1]))
        if left_ok and right_ok:
            ends.append(end)
        start = haystack.find(needle, start + 1)
    return ends


def _last_named(reply: str, keys: Sequence[str]) -> int | None:
    best: tuple[int, int] | None = None  # (end position, length)
    best_index = None
    for index, key in enumerate(keys):
        if not key:
            continue
        ends = _occurrences(reply, key)
        if not ends:
            continue
        candidate = (ends[-1], len(key))
        if best is None or candidate > best:
            best, best_index = candidate, index
    return best_index


def parse_move(
    reply: str,
    moves: Sequence[str],
    aliases: Sequence[str] | Callable[[], Sequence[str]] | None = None,
) -> int | None:
    """The index in ``moves`` of the legal move ``reply`` names, or None (rules above).

    Args:
        reply: The model's text (any string; huge or hostile text is fine).
        moves: The legal moves as the prompt lists them.
        aliases: Optional second name per move (same length as ``moves``), or a function
            returning them (called only if the reply is not exactly one of ``moves``).
    """
    if not isinstance(reply, str) or not moves:
        return None
    text = normalize(reply)
    if not text:
        return None
    keys = [normalize(m) for m in moves]
    # An exact answer is the common case; it also settles replies like "Pass" among
    # {"Pass", "Pass 2"} without scanning.
    if text in keys:
        return keys.index(text)
    stripped = text[1:-1] if text.startswith("[") and text.endswith("]") else None
    if stripped is not None and stripped in keys:
        return keys.index(stripped)
    if callable(aliases):
        aliases = aliases()
    alias_keys = [normalize(a) for a in aliases] if aliases is not None else None
    if alias_keys is not None and text in alias_keys:
        return alias_keys.index(text)
    found = _last_named(text, keys)
    if found is not None or alias_keys is None:
        return found
    return _last_named(text, alias_keys)


def dedupe_catalog(texts: Sequence[str]) -> list[str]:
    """Make action names unique: a repeated name gets `` #<id>`` appended (id = its index)."""
    seen: dict[str, int] = {}
    for text in texts:
        key = normalize(text)
        seen[key] = seen.get(key, 0) + 1
    out = []
    for index, text in enumerate(texts):
        key = normalize(text)
        out.append(f"{text} #{index}" if seen[key] > 1 or not key else text)
    return out


def forfeit_returns(
    num_players: int, offender: int, utility: str, min_utility: float, forfeit_return: float | None = None
) -> list[float]:
    """Final returns when ``offender`` forfeits by an invalid move.

    The offender gets ``forfeit_return`` (default: the game's minimum utility, i.e. the worst
    result the rules allow). The others get:

    * zero-sum games: an equal share of the offender's loss, ``−r/(n−1)`` each (returns still
      sum to 0; in two-player games the opponent wins what the offender loses);
    * identical-utility (cooperative) games: the same as the offender (the team loses);
    * general-sum and constant-sum games: 0.

    Args:
        num_players: Players in the game.
        offender: Index of the player who forfeits.
        utility: ``"zero_sum"``, ``"identical"``, ``"general_sum"`` or ``"constant_sum"``.
        min_utility: The game's minimum utility.
        forfeit_return: The offender's return (None: ``min_utility``).
    """
    r = float(min_utility if forfeit_return is None else forfeit_return)
    returns = [0.0] * num_players
    returns[offender] = r
    for p in range(num_players):
        if p == offender:
            continue
        if utility == "zero_sum" and num_players > 1:
            returns[p] = -r / (num_players - 1)
        elif utility == "identical":
            returns[p] = r
    return returns


def format_move_list(moves: Sequence[str]) -> str:
    """The legal moves for a prompt, every one of them, separated by `` | ``."""
    return " | ".join(moves)
