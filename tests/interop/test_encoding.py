"""Encoders: text <-> fixed-size id arrays."""

import string

import numpy as np
import pytest

from llm_envs.interop import ByteEncoder, CharEncoder, TokenizerEncoder, encode_fixed
from llm_envs.interop.encoding import DEFAULT_CHARSET


def test_char_encoder_round_trip_and_unknown_characters():
    encoder = CharEncoder()
    text = "#### U R\n(x) = 3"
    ids = encoder.encode(text)
    assert all(1 <= i <= len(string.printable) for i in ids)
    assert encoder.decode(ids) == text
    assert encoder.vocab_size == len(DEFAULT_CHARSET) + 2 and DEFAULT_CHARSET.startswith(string.printable)
    assert encoder.encode("é") == [encoder.unknown_id] and encoder.unknown_characters("aé") == {"é"}
    assert encoder.decode([encoder.unknown_id, 0, encoder.encode("a")[0]]) == "\N{REPLACEMENT CHARACTER}a"


def test_char_encoder_is_stable_and_rejects_unordered_charsets():
    assert CharEncoder("abc").encode("cab") == [3, 1, 2]
    with pytest.raises(TypeError):
        CharEncoder(frozenset("abc"))
    with pytest.raises(ValueError):
        CharEncoder("aa")


@pytest.mark.parametrize("text", ["", "plain", "émoji 🎲 and 漢字", "\x00\x1b[31m", "a" * 3000])
def test_byte_encoder_is_lossless(text):
    encoder = ByteEncoder()
    ids = encoder.encode(text)
    assert all(1 <= i < encoder.vocab_size for i in ids)
    assert encoder.decode(ids) == text


def test_tokenizer_encoder_wraps_callables():
    vocab = ["<pad>", "hello", "world", "<unk>"]
    encoder = TokenizerEncoder(
        lambda text: [vocab.index(w) if w in vocab else 3 for w in text.split()],
        len(vocab),
        decode=lambda ids: " ".join(vocab[i] for i in ids),
    )
    assert encoder.encode("hello there world") == [1, 3, 2]
    assert encoder.decode([1, 0, 2, 0]) == "hello world"
    assert TokenizerEncoder(lambda t: [1], 4).encode("x") == [1]
    with pytest.raises(TypeError):
        TokenizerEncoder(lambda t: [1], 4).decode([1])


def test_encode_fixed_pads_and_truncates():
    encoder = CharEncoder("abcdefghij")
    short = encode_fixed(encoder, "abc", 6)
    assert short.dtype == np.int32 and short.tolist() == [1, 2, 3, 0, 0, 0]
    assert encode_fixed(encoder, "abcdefghij", 4).tolist() == [7, 8, 9, 10]  # keeps the end
    assert encode_fixed(encoder, "abcdefghij", 4, keep="start").tolist() == [1, 2, 3, 4]
    bad = TokenizerEncoder(lambda text: [7], 5)
    with pytest.raises(ValueError, match="outside"):
        encode_fixed(bad, "x", 3)


def test_the_default_charset_tells_the_task_operators_apart():
    # "Compute 2/7 − 3/2" and "Compute 2/7 ÷ 3/2" (two Debate questions, other answers) were one
    # observation: every character outside printable ASCII had one id.
    encoder = CharEncoder()
    assert encoder.encode("2/7 − 3/2") != encoder.encode("2/7 ÷ 3/2") != encoder.encode("2/7 × 3/2")
    assert not encoder.unknown_characters("≤ → ➜ ➞ • ─ ♠♥♦♣ ± – ’")
