"""Text ↔ fixed-size integer arrays, for MARL libraries that only take numbers.

An *encoder* maps text to a list of integer ids in ``[0, vocab_size)`` and back. Id ``pad_id``
pads short texts to a fixed length and is skipped when decoding. Three encoders ship here:

=======================  ======================================================================
:class:`CharEncoder`      one id per character of a given ordered charset (default:
                          :data:`DEFAULT_CHARSET`, printable ASCII and the symbols the
                          registered environments write); any other character maps to one
                          "unknown" id. ``vocab_size`` is ``len(charset) + 2``.
:class:`ByteEncoder`      one id per UTF-8 byte (lossless for any text); ``vocab_size`` 257.
:class:`TokenizerEncoder` any tokenizer given as callables (``encode``, ``decode``) plus its
                          vocabulary size; :meth:`TokenizerEncoder.from_hf` adapts a Hugging
                          Face tokenizer.
=======================  ======================================================================

:func:`encode_fixed` turns a text into an ``int32`` array of exactly ``length`` ids, keeping the
*end* of a long text by default, or its start; :func:`encode_head_and_tail` keeps a *head* whole
(the state: a grid, a board) and then as much of the end of the rest as fits.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "DEFAULT_CHARSET",
    "ByteEncoder",
    "CharEncoder",
    "TextEncoder",
    "TokenizerEncoder",
    "encode_fixed",
    "encode_head_and_tail",
]


#: :class:`CharEncoder`'s default charset: printable ASCII, then the symbols the registered
#: environments write (the task text's operators ``× ÷ −``, Negotiation's ``≤``, the TextArena
#: games' arrows, bullets, box drawing and card suits). With ASCII alone these all became the
#: one unknown id: "Compute 2/7 − 3/2" and "Compute 2/7 ÷ 3/2" were the same observation.
DEFAULT_CHARSET = string.printable + "×÷−±≤≥≠≈√π°·…–—‘’“”→←↑↓➜➞•─│┌┐└┘├┤┬┴┼♠♥♦♣"


@runtime_checkable
class TextEncoder(Protocol):
    """What the numeric view needs from an encoder.

    Attributes:
        vocab_size: Every id is in ``[0, vocab_size)``.
        pad_id: The id that pads short texts; :meth:`decode` skips it.
    """

    vocab_size: int
    pad_id: int

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` (no padding, no truncation)."""
        ...

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; padding ids are skipped, any other id decodes to something."""
        ...


class CharEncoder:
    """One id per character: ``0`` pads, ``1..len(charset)`` are the charset's characters in
    order, ``len(charset) + 1`` stands for any character outside the charset.

    Args:
        charset: An ordered ``str`` of distinct characters. (Never a ``set``: set order depends
            on the process's hash seed, so ids would differ between processes.)
        unknown: What an unknown id decodes to.
    """

    pad_id = 0

    def __init__(self, charset: str = DEFAULT_CHARSET, *, unknown: str = "\N{REPLACEMENT CHARACTER}"):
        if not isinstance(charset, str):
            raise TypeError(f"charset must be an ordered str, got {type(charset).__name__}")
        if not charset or len(set(charset)) != len(charset):
            raise ValueError("charset must be a non-empty str of distinct characters")
        self.charset = charset
        self.unknown = unknown
        self._ids = {char: i + 1 for i, char in enumerate(charset)}
        self.unknown_id = len(charset) + 1
        self.vocab_size = len(charset) + 2

    def encode(self, text: str) -> list[int]:
        ids = self._ids
        unknown_id = self.unknown_id
        return [ids.get(char, unknown_id) for char in text]

    def unknown_characters(self, text: str) -> set[str]:
        """The characters of ``text`` that all encode to the unknown id."""
        return {char for char in text if char not in self._ids}

    def decode(self, ids: Iterable[int]) -> str:
        chars = []
        for raw in ids:
            i = int(raw)
            if i == self.pad_id:
                continue
            chars.append(self.charset[i - 1] if 1 <= i <= len(self.charset) else self.unknown)
        return "".join(chars)

    def __repr__(self) -> str:
        return f"CharEncoder(vocab_size={self.vocab_size})"


class ByteEncoder:
    """One id per UTF-8 byte (``byte + 1``; ``0`` pads). Lossless for every ``str``."""

    pad_id = 0
    vocab_size = 257

    def encode(self, text: str) -> list[int]:
        return [b + 1 for b in text.encode("utf-8", errors="surrogatepass")]

    def decode(self, ids: Iterable[int]) -> str:
        data = bytes(int(i) - 1 for i in ids if 1 <= int(i) <= 256)
        return data.decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return "ByteEncoder()"


class TokenizerEncoder:
    """An encoder made of a tokenizer's ``encode``/``decode`` callables.

    Args:
        encode: ``str -> Sequence[int]``; every id must be in ``[0, vocab_size)``.
        decode: ``list[int] -> str`` (only needed for text actions).
        vocab_size: The number of ids.
        pad_id: The id used for padding (skipped when decoding).
    """

    def __init__(
        self,
        encode: Callable[[str], Sequence[int]],
        vocab_size: int,
        *,
        decode: Callable[[list[int]], str] | None = None,
        pad_id: int = 0,
    ):
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id {pad_id} is outside [0, {vocab_size})")
        self._encode = encode
        self._decode = decode
        self.vocab_size = int(vocab_size)
        self.pad_id = int(pad_id)

    @classmethod
    def from_hf(cls, tokenizer: Any) -> TokenizerEncoder:
        """Adapt a Hugging Face tokenizer (no special tokens are added when encoding)."""
        pad_id = tokenizer.pad_token_id
        if pad_id is None:
            pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        return cls(
            lambda text: tokenizer(text, add_special_tokens=False)["input_ids"],
            len(tokenizer),
            decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=True),
            pad_id=pad_id,
        )

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self._encode(text)]

    def decode(self, ids: Iterable[int]) -> str:
        if self._decode is None:
            raise TypeError("this TokenizerEncoder was built without decode=; it cannot decode")
        return self._decode([int(i) for i in ids if int(i) != self.pad_id])

    def __repr__(self) -> str:
        return f"TokenizerEncoder(vocab_size={self.vocab_size}, pad_id={self.pad_id})"


def encode_fixed(encoder: TextEncoder, text: str, length: int, *, keep: str = "end") -> np.ndarray:
    """``text`` as an ``int32`` array of exactly ``length`` ids, padded with ``encoder.pad_id``.

    Args:
        encoder: The encoder.
        text: The text.
        length: The array length.
        keep: For a text longer than ``length``: ``"end"`` keeps its last ``length`` ids (the
            default: prompts end with the current state and the answer format), ``"start"`` its
            first ones. Padding always goes after the ids.

    Raises:
        ValueError: if the encoder produced an id outside ``[0, vocab_size)``.
    """
    if keep not in ("end", "start"):
        raise ValueError(f"keep must be 'end' or 'start', got {keep!r}")
    ids = encoder.encode(text)
    if len(ids) > length:
        ids = ids[-length:] if keep == "end" else ids[:length]
    return _padded(encoder, ids, length)


def encode_head_and_tail(
    encoder: TextEncoder, head: str, text: str, length: int, *, separator: str = "\n\n"
) -> np.ndarray:
    """``head``, ``separator`` and then the *end* of ``text``, as exactly ``length`` ids.

    ``head`` (the state: a grid, a board) is never cut: a head longer than ``length`` raises
    ``ValueError`` that names the length needed, instead of silently dropping the state. What
    room is left holds the last ids of ``text`` (the current turn, the answer format, the
    moves); padding goes after.
    """
    head_ids = encoder.encode(head + separator)
    if len(head_ids) > length:
        raise ValueError(
            f"the state text needs {len(head_ids)} ids, more than obs_length={length}; raise "
            "obs_length (or use keep='end'/'start', which may cut the state)"
        )
    room = length - len(head_ids)
    tail_ids = encoder.encode(text)[-room:] if room else []
    return _padded(encoder, head_ids + tail_ids, length)


def _padded(encoder: TextEncoder, ids: list[int], length: int) -> np.ndarray:
    out = np.full(length, encoder.pad_id, dtype=np.int32)
    if ids:
        array = np.asarray(ids, dtype=np.int64)
        if array.min() < 0 or array.max() >= encoder.vocab_size:
            raise ValueError(
                f"{encoder!r} produced ids outside [0, {encoder.vocab_size}): "
                f"min {array.min()}, max {array.max()}"
            )
        out[: len(ids)] = array
    return out
