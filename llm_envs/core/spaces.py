"""Spaces for free-form text.

Gymnasium's :class:`~gymnasium.spaces.Text` only *contains* strings whose every character is in
its ``charset``. Language models emit arbitrary Unicode (emoji, control characters, other
scripts) and environments echo parts of it back into later observations, so a strict charset
would declare perfectly legal observations out of bounds. :class:`FreeText` keeps ``Text``'s
sampling behaviour (useful for fuzzing) but contains *any* ``str`` up to ``max_length``.
"""

from __future__ import annotations

import copy
import string
from typing import Any

from gymnasium import spaces

# An ordered ``str`` (never a set): Gymnasium hashes set charsets differently across processes.
PRINTABLE_CHARSET = string.printable


class FreeText(spaces.Text):
    """A text space that contains any Python ``str`` of at most ``max_length`` characters.

    ``sample()`` draws from the printable ASCII charset, which is what PettingZoo's ``api_test``
    uses to fuzz actions. Environments never validate actions against this space: any string is
    a legal action and malformed text earns the environment's format penalty instead.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(
            max_length=max_length, min_length=min_length, charset=PRINTABLE_CHARSET, seed=seed
        )

    def contains(self, x: Any) -> bool:  # noqa: D401 - gymnasium signature
        """Return True for any ``str`` whose length is within ``[min_length, max_length]``."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"FreeText({self.min_length}, {self.max_length})"

    def __deepcopy__(self, memo: dict[int, Any]) -> FreeText:
        """Share the immutable charset tables, copy only the RNG.

        ``TextEnv.clone()`` deep-copies the cached spaces; the default deep copy walks the
        charset's ~100 numpy scalars, which made a clone cost milliseconds.
        """
        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        twin.__dict__.update(self.__dict__)
        if self._np_random is not None:
            twin._np_random = copy.deepcopy(self._np_random, memo)
        return twin


# Observation text can be long (code problems, transcripts of several turns).
OBSERVATION_MAX_CHARS = 1 << 20
# Bound for ``action_space.sample()``; real actions may be longer and are accepted.
ACTION_SAMPLE_MAX_CHARS = 2048


def observation_space() -> spaces.Dict:
    """The observation space shared by every text environment.

    A ``Dict`` with two text keys. The text key is deliberately not named ``"observation"``:
    PettingZoo's ``api_test`` recurses into a key of that name and checks a ``dtype`` that text
    does not have.
    """
    return spaces.Dict(
        {
            "instruction": FreeText(OBSERVATION_MAX_CHARS),
            "prompt": FreeText(OBSERVATION_MAX_CHARS),
        }
    )


def action_space() -> FreeText:
    """The action space shared by every text environment: any string."""
    return FreeText(ACTION_SAMPLE_MAX_CHARS)
