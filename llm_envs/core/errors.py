"""Infrastructure failures: something outside the model failed, so a step cannot be judged.

A model's action, however bad, is an outcome: the environment judges it (a format penalty, a
low reward). When the *machinery* fails instead — the LLM server behind an agent, the sandbox
that runs an agent's program — there is nothing to judge, and scoring anyway would report a
wrong number as model behaviour (in training: a reward that is pure infrastructure noise).

:class:`InfrastructureError` is the one exception for that. Its subclasses are
:class:`~llm_envs.agents.AgentError` (an agent produced no action) and :class:`SandboxFailure`
(the sandbox failed under a program an agent wrote). Whoever drives an environment treats
every one of them alike:

* ``llm_envs.runner`` (``llm-envs eval``) stops the episode and records it as incomplete, never
  as finished; the run ends incomplete (exit status 3) and ``--resume`` plays it again;
* the trainer's rollouts drop the episode (it is counted in ``rollout/infra_failed_episodes``)
  and never train on it;
* anyone else stepping an environment by hand (PettingZoo code) gets the exception from
  ``env.step``. The environments of this package raise it before they change any state, so
  the same action can be stepped again once the infrastructure works, or the episode dropped.
"""

from __future__ import annotations

__all__ = ["SANDBOX_FAILURE_KINDS", "InfrastructureError", "SandboxFailure"]


class InfrastructureError(Exception):
    """Something outside the model failed: no model outcome exists for this step.

    Attributes:
        message: What went wrong.
        kind: A short name of the failure (an :class:`~llm_envs.agents.AgentError` kind, or one
            of :data:`SANDBOX_FAILURE_KINDS`); an incomplete episode's ``reason``.
    """

    kind: str = "infrastructure"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def is_configuration_error(self) -> bool:
        """A failure that retrying cannot fix because the run is set up wrong (only some
        agent failures are)."""
        return False

    def __str__(self) -> str:
        return self.message


#: The kinds of :class:`SandboxFailure`, with what each means.
SANDBOX_FAILURE_KINDS = {
    "sandbox": "the sandbox failed under a program (its worker died, hung or answered something "
    "malformed), on every attempt",
    "sandbox_unavailable": "the sandbox backend cannot run on this host",
}


class SandboxFailure(InfrastructureError):
    """The sandbox failed while running a program an agent wrote: the program's outcome is
    unknown, so the step cannot be judged (it is not the program's failure).

    Raised by the code-running helpers of :mod:`llm_envs.verifiers.code` after their retries
    (each retry runs on a fresh worker: the sandbox replaces a failed one), and so by
    ``env.step`` of every environment that runs code.

    Args:
        message: What the sandbox reported (``RunResult.sandbox_error``, or the exception).
        kind: One of :data:`SANDBOX_FAILURE_KINDS`.
        attempts: How many runs were tried.
    """

    def __init__(self, message: str, *, kind: str = "sandbox", attempts: int = 1) -> None:
        if kind not in SANDBOX_FAILURE_KINDS:
            raise ValueError(
                f"unknown SandboxFailure kind {kind!r}; expected one of {', '.join(SANDBOX_FAILURE_KINDS)}"
            )
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts

    def __repr__(self) -> str:
        return f"SandboxFailure({self.message!r}, kind={self.kind!r}, attempts={self.attempts})"
