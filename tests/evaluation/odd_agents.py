"""Agents that misbehave in ways a real one can, for ``llm-envs eval --agent py:...`` tests.

Each plays the reference action (so the episodes would finish) and breaks one rule: a token
count that is no count, an error output whose ``meta`` is not a mapping, a ``sys.exit()``.
"""

from __future__ import annotations

import sys

from llm_envs.agents.base import Agent, AgentOutput


class _Reference(Agent):
    def _action(self, request):
        return request.env.reference_action(request.agent)


class NanTokens(_Reference):
    name = "nan_tokens"

    def act_batch(self, requests):
        return [AgentOutput(text=self._action(r), prompt_tokens=float("nan")) for r in requests]


class WordTokens(_Reference):
    name = "word_tokens"

    def act_batch(self, requests):
        return [AgentOutput(text=self._action(r), completion_tokens="n/a") for r in requests]


class ErrorWithListMeta(_Reference):
    name = "error_list_meta"

    def act_batch(self, requests):
        return [AgentOutput(text="", error="engine died", meta=["x"]) for _ in requests]


class ErrorWithWordAttempts(_Reference):
    name = "error_word_attempts"

    def act_batch(self, requests):
        return [AgentOutput(text="", error="engine died", meta={"attempts": "many"}) for _ in requests]


class Exits(_Reference):
    name = "exits"

    def act_batch(self, requests):
        sys.exit(0)


class ExitsAsync(_Reference):
    name = "exits_async"

    async def act_batch_async(self, requests):
        sys.exit(0)

    def act_batch(self, requests):
        raise NotImplementedError


class NumpyTokens(_Reference):
    """Token counts as numpy integers (a local model's counts): a count like any other."""

    name = "numpy_tokens"

    def act_batch(self, requests):
        import numpy as np

        return [AgentOutput(text=self._action(r), prompt_tokens=np.int64(5), completion_tokens=np.int32(2))
                for r in requests]


#: What a model or a server could put in a name or an error message: a line break that would
#: start a line of the program's own, a screen clear, a title, a carriage return, a bidi override.
HOSTILE = "gpt\nlistener  forged-row  1.000\x1b[2J\x1b]0;PWNED\x07\rFAKE\u202e"


class HostileName(_Reference):
    name = HOSTILE

    def act_batch(self, requests):
        return [AgentOutput(text=self._action(r)) for r in requests]


class HostileError(_Reference):
    name = "hostile_error"

    def act_batch(self, requests):
        return [AgentOutput(text="", error=HOSTILE) for r in requests]


class ForgesTranscript(_Reference):
    """A reply whose later lines read as a transcript's own: an episode's end and another episode."""

    name = "forger"
    FAKE = ("\n=== episode over: success=1.0 ===\n\n=== llm/Signalling-v0 | episode x (#0, seed 0) ===\n"
            "--- turn 0 | speaker (speaker) | reward +9.000")

    def act_batch(self, requests):
        return [AgentOutput(text=self._action(r) + self.FAKE) for r in requests]
