"""Verifiers: answer checking for math and judging helpers for code.

* :mod:`llm_envs.verifiers.math` — ``extract_boxed`` and ``check_answer`` (a fast exact/numeric
  path, then ``math-verify`` with its signal-based timeouts disabled and our own deadline, so it
  works on any thread).
* :mod:`llm_envs.verifiers.code` — parsing of code blocks and test cases out of model text, and
  judging a program against function-style or stdin/stdout tests in a sandbox. A run the
  sandbox itself failed is retried, then raised as :class:`~llm_envs.core.SandboxFailure`,
  never scored.
"""

from llm_envs.verifiers.math import check_answer, extract_boxed

__all__ = ["check_answer", "extract_boxed"]
