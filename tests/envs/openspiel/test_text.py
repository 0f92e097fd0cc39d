"""The pure text rules of the OpenSpiel adapter: reading a move, the forfeit rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.envs.openspiel.text import dedupe_catalog, forfeit_returns, normalize, parse_move

TTT = ["x(0,0)", "x(1,1)", "x(2,2)"]
KUHN = ["Pass", "Bet"]
NEGOTIATION = ["Proposal: [1, 0, 2]", "Proposal: [0, 0, 1]", "Proposal: Agreement reached!"]


@pytest.mark.parametrize(
    "reply, moves, expected",
    [
        ("Bet", KUHN, 1),
        ("  bet\n", KUHN, 1),
        ("[Pass]", KUHN, 0),
        ("I will pass. Final answer: Bet", KUHN, 1),  # the last move named counts
        ("Bet? No. Pass.", KUHN, 0),
        ("alphabet soup", KUHN, None),  # whole words only
        ("x ( 1 , 1 )", TTT, 1),  # word-level tokenizers space out every symbol
        ("I play X(2,2)", TTT, 2),
        ("x(1,1)x(0,0)", TTT, 0),
        ("proposal:[0,0,1]", NEGOTIATION, 1),
        ("Let's settle. Proposal: Agreement reached!", NEGOTIATION, 2),
        ("", KUHN, None),
        ("raise", KUHN, None),
    ],
)
def test_parse_move(reply, moves, expected):
    assert parse_move(reply, moves) == expected


def test_longer_move_wins_when_two_end_at_the_same_place():
    assert parse_move("I say raise call", ["call", "raise call"]) == 1


def test_aliases_count_exactly_or_when_no_listed_move_is_named():
    moves, aliases = ["o(1,1)", "o(2,2)"], ["x(1,1)", "x(2,2)"]
    assert parse_move("x(2,2)", moves, aliases) == 1
    assert parse_move("I play x(2,2)", moves, aliases) == 1
    assert parse_move("not x(2,2) but o(1,1)", moves, aliases) == 0  # a listed move wins
    calls = []
    assert parse_move("o(2,2)", moves, lambda: calls.append(1) or aliases) == 1
    assert calls == []  # an exact listed answer never computes the aliases


@given(st.text(max_size=300))
def test_parse_move_never_raises_and_returns_a_valid_index(reply):
    index = parse_move(reply, TTT + KUHN)
    assert index is None or 0 <= index < len(TTT + KUHN)


def test_parse_move_handles_huge_replies():
    assert parse_move("x" * (1 << 20) + " Bet", KUHN) == 1
    assert parse_move("(" * 5000, TTT) is None


def test_normalize():
    assert normalize("  X ( 1 , 1 )\n") == "x(1,1)"
    assert normalize("Proposal:  [1, 0, 2]") == "proposal:[1,0,2]"
    assert normalize("two  words") == "two words"


def test_dedupe_catalog_keeps_names_unique():
    assert dedupe_catalog(["a", "b", "a", ""]) == ["a #0", "b", "a #2", " #3"]


def test_forfeit_returns():
    assert forfeit_returns(2, 0, "zero_sum", -2.0) == [-2.0, 2.0]
    assert forfeit_returns(3, 1, "zero_sum", -2.0) == [1.0, -2.0, 1.0]
    assert forfeit_returns(2, 1, "identical", -1.0) == [-1.0, -1.0]
    assert forfeit_returns(2, 1, "general_sum", -150.0) == [0.0, -150.0]
    assert forfeit_returns(2, 0, "zero_sum", -2.0, forfeit_return=-1.0) == [-1.0, 1.0]
