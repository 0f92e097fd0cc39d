"""Train, validation and test splits that can never overlap.

Procedural environments draw episodes from seeds. Mapping seed ranges to splits is not enough
when the space of puzzles is small (there are only 288 complete 4x4 Sudoku grids): two seeds in
different ranges can generate the same puzzle. Instead a puzzle's split is a pure function of
its *content* (:func:`split_of`); a generator for split S rejects every candidate whose content
hashes to another split. Overlap is then impossible by construction, and tests can check it.

The content key must be a *canonical form*: the same for every variant of a puzzle that is
really the same puzzle (a Sudoku with its digits renamed, its rows permuted within a band, a
Sokoban level mirrored), or a cheap transformation of a training puzzle could land in the test
split. Each game's ``split_key`` computes one. Each split also draws its content from its own
stream (:func:`split_generator`), so that no split's puzzles are derived from another's.
"""

from __future__ import annotations

import hashlib

import numpy as np

SPLITS = ("train", "validation", "test")
# Share of content-hash buckets per split, out of 100.
_SPLIT_BUCKETS = {"train": range(0, 80), "validation": range(80, 90), "test": range(90, 100)}
# Seed offsets give each split its own stream of candidate seeds, so that seed k of "train" and
# seed k of "test" start from different generator states.
SPLIT_SEED_OFFSET = {"train": 0, "validation": 1_000_003, "test": 2_000_003}


def check_split(split: str) -> str:
    """Return ``split`` if it is a known split name, else raise a clear ``ValueError``."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    return split


def split_of(content_key: str) -> str:
    """The split that a piece of content belongs to, from a stable hash of its canonical text."""
    bucket = int.from_bytes(hashlib.sha256(content_key.encode("utf-8")).digest()[:8], "big") % 100
    for split, buckets in _SPLIT_BUCKETS.items():
        if bucket in buckets:
            return split
    raise AssertionError("unreachable: buckets cover 0..99")


def split_seed(split: str, seed: int) -> int:
    """A generator seed for episode ``seed`` of ``split`` (distinct streams per split)."""
    return SPLIT_SEED_OFFSET[check_split(split)] + int(seed)


def split_generator(rng: np.random.Generator, split: str) -> np.random.Generator:
    """A generator for one episode's content in ``split``, seeded by draws from ``rng`` *and*
    the split: the same environment seed gives unrelated draws in different splits.

    (Without it, a generator that draws a candidate and then keeps it only if it hashes to the
    requested split would start every split from the same candidate, and a cheap transformation
    of one puzzle could land in another split.) ``rng`` advances by the same amount whatever
    the split.
    """
    entropy = [int(v) for v in rng.integers(0, 2**32, size=4)]
    return np.random.default_rng([SPLITS.index(check_split(split)), 0x5B1175, *entropy])


def split_order(split: str, count: int) -> np.ndarray:
    """A fixed permutation of ``range(count)`` for ``split``: the order in which episode seeds
    0, 1, 2, ... walk through a split's ``count`` enumerated puzzles (distinct seeds below
    ``count`` get distinct puzzles; seed ``k`` and ``k + count`` get the same one)."""
    return np.random.default_rng([SPLITS.index(check_split(split)), 0x0D3E, count]).permutation(count)
