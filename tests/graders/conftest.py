"""Fixtures of the grader tests: one warm sandbox per isolated backend, and a host oracle.

The backends are those of ``tests/sandboxes`` (bwrap, process, docker; one that cannot run here
is skipped with its probe's reason, or fails under ``SANDBOX_TESTS_REQUIRE``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llm_envs.audit.runner import oracle_socket
from tests.sandboxes.conftest import ISOLATED_BACKENDS, make


@pytest.fixture(scope="module", params=ISOLATED_BACKENDS)
def backend(request) -> Iterator[object]:
    """A warm sandbox of each isolated backend, shared by the tests of one module."""
    sandbox = make(request.param)
    yield sandbox
    sandbox.close()


class Oracle:
    """A host Unix socket handing out :attr:`secret` (the right program of the current test)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.secret = ""


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    holder: dict[str, Oracle] = {}
    with oracle_socket(lambda: holder["oracle"].secret) as path:
        holder["oracle"] = Oracle(path)
        yield holder["oracle"]
