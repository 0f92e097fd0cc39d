"""Fixtures for the sandbox tests: real backends, no mocks.

Every isolated backend that works on this host is exercised; a backend that cannot run here is
skipped with the reason its probe gave. On CI, bwrap, process and docker must all run: `.ci/run`
installs bubblewrap, and `make test` brings up the project's Docker engine
(``python -m sandboxes.docker_engine run``), which then adds ``docker`` to
SANDBOX_TESTS_REQUIRE.

Docker tests use the engine named by DOCKER_HOST when it is set, else the project's own engine
when it is up (``python -m sandboxes.docker_engine start``), so that no variable needs exporting
and `auto` elsewhere in the suite keeps choosing the same backend as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import sandboxes
from sandboxes.core import Sandbox, SandboxUnavailable

# Isolation tests use a light preload so the many worker restarts (after every timeout) stay
# cheap; the default preload (numpy, sympy) is tested on its own.
LIGHT_PRELOAD = ["collections", "itertools", "math", "json", "re"]
# Docker joins every isolation test where an engine answers; otherwise those cases are skipped
# with the engine error as the reason.
ISOLATED_BACKENDS = ["bwrap", "process", "docker"]


_unavailable: dict[str, str] = {}  # backend -> first line of why it cannot run (probed once)


def docker_engine_options() -> dict:
    """Options that point the docker backend at an engine: {} for DOCKER_HOST (or the SDK's
    default socket), else a client of the project's engine when that one answers."""
    if os.environ.get("DOCKER_HOST"):
        return {}
    from sandboxes import docker_engine

    host = docker_engine.engine_host()
    if host is None:
        return {}
    try:
        import docker
    except ImportError:
        return {}  # the backend itself reports the missing SDK
    return {"docker_client": docker.DockerClient(base_url=host, timeout=60)}


def make(backend: str, **options) -> Sandbox:
    """A fresh sandbox of `backend`, or skip the test with the probe's reason.

    Set SANDBOX_TESTS_REQUIRE=bwrap,process,docker (as CI does) to turn such a skip into a
    failure.
    """
    options.setdefault("preload", LIGHT_PRELOAD)
    options.setdefault("heavy_preload", ())
    options.setdefault("pool_size", 2)
    required = backend in os.environ.get("SANDBOX_TESTS_REQUIRE", "").split(",")
    if backend in _unavailable and not required:
        pytest.skip(f"{backend} backend unavailable here: {_unavailable[backend]}")
    if backend == "docker":
        options = {**docker_engine_options(), **options}
    try:
        return sandboxes.make_sandbox(backend, **options)
    except SandboxUnavailable as exc:
        if required:
            raise
        _unavailable[backend] = str(exc).splitlines()[0][:160]
        if backend == "docker":  # the engine's error is long; say how to get one at the end
            _unavailable[backend] += " ... (as root: `python -m sandboxes.docker_engine start`, or `make test`)"
        pytest.skip(f"{backend} backend unavailable here: {_unavailable[backend]}")


@pytest.fixture(scope="module", params=ISOLATED_BACKENDS)
def isolated(request) -> Iterator[Sandbox]:
    """A warm sandbox of each isolated backend, shared by the tests of one module."""
    sandbox = make(request.param)
    yield sandbox
    sandbox.close()


@pytest.fixture(params=ISOLATED_BACKENDS)
def fresh_isolated(request) -> Iterator[Sandbox]:
    """A new sandbox per test, for tests that check what is left after close()."""
    sandbox = make(request.param, pool_size=1)
    yield sandbox
    sandbox.close()


def descendants(pid: int | None = None) -> list[int]:
    """Live descendants of `pid` (default: this test process), from /proc."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] == b"Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found, frontier = [], [root]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            found.append(child)
            frontier.append(child)
    return found


def processes_with_marker(marker: str) -> list[int]:
    """Pids of any process on the host whose command line contains `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def sandbox_processes(sandbox: Sandbox) -> set[int]:
    """Every host process of `sandbox` right now: its workers' top processes and their descendants."""
    found: set[int] = set()
    for pid in sandbox.worker_pids():
        found.add(pid)
        found.update(descendants(pid))
    return found


def alive(pids: set[int]) -> list[int]:
    """Those of `pids` that still exist (zombies count as gone)."""
    living = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :].split()[0] != b"Z":
            living.append(pid)
    return living


def idle_tree_is_clean(sandbox: Sandbox) -> bool:
    """An idle worker's tree is a bare chain (bwrap monitor -> init -> worker, or launcher ->
    worker, or the worker alone): no process left behind by a job."""
    for top in sandbox.worker_pids():
        tree = [top] + descendants(top)
        if len(tree) > 3:
            return False
    return True
