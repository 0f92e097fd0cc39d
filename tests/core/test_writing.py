"""Text agents wrote, written out whatever it holds (llm_envs.core.writing)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from llm_envs.core.writing import json_text

# Any text: lone surrogates (category Cs) included, which st.text() leaves out by default.
ANY_TEXT = st.text(st.characters(exclude_categories=()))


@given(st.recursive(ANY_TEXT | st.integers() | st.none(), lambda inner: st.lists(inner) | st.dictionaries(ANY_TEXT, inner)))
def test_json_text_round_trips_any_text_through_strict_utf8(data):
    text = json_text(data, sort_keys=True)
    assert json.loads(text) == data
    assert json.loads(text.encode("utf-8").decode("utf-8")) == data


def test_json_text_writes_only_lone_surrogates_as_escapes():
    assert json_text({"a\ud800": "é 😀 \udfff"}) == '{"a\\ud800": "é 😀 \\udfff"}'
    assert json_text(["plain", 1], separators=(",", ":")) == json.dumps(["plain", 1], separators=(",", ":"))
