"""Choosing a backend: `make_sandbox`, `shared_sandbox`, `available_backends`.

``auto`` tries backends strongest first (docker, bwrap, process), uses the first that works, and
logs one line naming it and why each stronger one was skipped. It never falls back to the
unisolated ``unsafe`` backend unless the caller passes ``allow_unsafe=True``. The environment
variable ``SANDBOX_BACKEND`` overrides ``auto`` (e.g. ``SANDBOX_BACKEND=process``).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from .core import Sandbox, SandboxError, SandboxUnavailable

log = logging.getLogger("sandboxes")

BACKENDS = ("docker", "bwrap", "process", "unsafe")
_AUTO_ORDER = ("docker", "bwrap", "process")


def _docker(**kwargs: Any) -> Sandbox:
    from .docker_backend import DockerSandbox

    return DockerSandbox(**kwargs)


def _bwrap(**kwargs: Any) -> Sandbox:
    from .local import BwrapSandbox

    return BwrapSandbox(**kwargs)


def _process(**kwargs: Any) -> Sandbox:
    from .local import ProcessSandbox

    return ProcessSandbox(**kwargs)


def _unsafe(**kwargs: Any) -> Sandbox:
    from .local import UnsafeSandbox

    return UnsafeSandbox(**kwargs)


_CONSTRUCTORS: dict[str, Callable[..., Sandbox]] = {
    "docker": _docker,
    "bwrap": _bwrap,
    "process": _process,
    "unsafe": _unsafe,
}

# Options only some backends understand; `auto` passes each backend only what it accepts.
_BACKEND_ONLY_OPTIONS = {
    "docker": {"image", "docker_client", "cpus", "user", "tmpfs_mb", "python_in_image", "runtime"},
    "bwrap": {"bwrap", "work_dir_mb", "tmp_mb"},
}


def _options_for(backend: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    foreign = set().union(*(opts for name, opts in _BACKEND_ONLY_OPTIONS.items() if name != backend))
    return {k: v for k, v in kwargs.items() if k not in foreign}


def _probe(sandbox: Sandbox) -> None:
    probe = getattr(sandbox, "probe", None)
    if probe is not None:
        probe()


def make_sandbox(backend: str = "auto", *, allow_unsafe: bool = False, **options: Any) -> Sandbox:
    """Create a sandbox.

    Args:
        backend: ``"auto"`` (strongest that works here), ``"docker"``, ``"bwrap"``,
            ``"process"`` or ``"unsafe"``.
        allow_unsafe: permit the ``unsafe`` backend (no isolation), explicitly or as the last
            resort of ``auto``.
        **options: backend options, e.g. ``pool_size``, ``preload``, ``default_limits``,
            ``max_jobs_per_worker`` (local backends), ``image`` (docker), ``bwrap`` (path).

    Raises:
        SandboxUnavailable: the backend cannot run here (or, for ``auto``, none can); the
            message gives each reason and the fix.
    """
    if backend == "auto":
        backend = os.environ.get("SANDBOX_BACKEND", "auto") or "auto"
    if backend not in ("auto",) + BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {('auto',) + BACKENDS}")
    if backend == "unsafe":
        return _unsafe(allow_unsafe=allow_unsafe, **options)
    if backend != "auto":
        sandbox = _CONSTRUCTORS[backend](**_options_for(backend, options))
        try:
            _probe(sandbox)
        except BaseException:
            sandbox.close()
            raise
        return sandbox
    skipped: list[str] = []
    order = _AUTO_ORDER + (("unsafe",) if allow_unsafe else ())
    for name in order:
        try:
            if name == "unsafe":
                sandbox = _unsafe(allow_unsafe=True, **_options_for(name, options))
            else:
                sandbox = _CONSTRUCTORS[name](**_options_for(name, options))
        except SandboxUnavailable as exc:
            skipped.append(f"{name}: {exc}")
            continue
        try:
            _probe(sandbox)
        except SandboxUnavailable as exc:
            sandbox.close()
            skipped.append(f"{name}: {exc}")
            continue
        except BaseException:
            sandbox.close()
            raise
        reasons = f" (skipped {'; '.join(skipped)})" if skipped else ""
        log.info("sandboxes: using %s%s", sandbox.describe(), reasons)
        return sandbox
    raise SandboxUnavailable(
        "no isolated sandbox backend works on this host:\n  "
        + "\n  ".join(skipped)
        + "\nFix one of them (e.g. `pip install 'llm-envs[sandbox]'` or `apt-get install bubblewrap`), "
        "or pass allow_unsafe=True to run programs without isolation."
    )


_shared_lock = threading.Lock()
_shared: dict[str, Sandbox] = {}


def _shared_key(backend: str, allow_unsafe: bool, options: dict[str, Any]) -> str:
    # The pid is part of the key: a forked child must not talk to its parent's workers.
    try:
        return json.dumps([os.getpid(), backend, allow_unsafe, options], sort_keys=True, default=repr)
    except TypeError:
        return repr((os.getpid(), backend, allow_unsafe, sorted(options.items())))


def shared_sandbox(backend: str = "auto", *, allow_unsafe: bool = False, **options: Any) -> Sandbox:
    """A process-wide sandbox per (backend, options), created on first use and reused after.

    Many environment instances in one process then share one warm worker pool instead of each
    starting its own. The cache is keyed by process id too, so a forked child gets its own.
    The instances are closed at interpreter exit or by `close_shared_sandboxes`; closing one
    retires it (the next call creates a fresh one). Nothing else is cached: `make_sandbox`
    always creates a new, private sandbox.
    """
    key = _shared_key(backend, allow_unsafe, options)
    with _shared_lock:
        sandbox = _shared.get(key)
        if sandbox is not None and not getattr(sandbox, "_closed", False):
            return sandbox
        sandbox = make_sandbox(backend, allow_unsafe=allow_unsafe, **options)
        _shared[key] = sandbox
        return sandbox


def close_shared_sandboxes() -> None:
    """Close every sandbox handed out by `shared_sandbox` (also runs at interpreter exit)."""
    with _shared_lock:
        sandboxes = list(_shared.values())
        _shared.clear()
    for sandbox in sandboxes:
        try:
            sandbox.close()
        except SandboxError:
            pass


atexit.register(close_shared_sandboxes)


def available_backends() -> dict[str, str]:
    """Probe every isolated backend; map name -> ``"ok"`` or the reason it cannot run here."""
    status: dict[str, str] = {}
    for name in _AUTO_ORDER:
        try:
            sandbox = _CONSTRUCTORS[name](pool_size=1)
        except SandboxUnavailable as exc:
            status[name] = str(exc)
            continue
        try:
            _probe(sandbox)
            status[name] = "ok"
        except SandboxUnavailable as exc:
            status[name] = str(exc)
        finally:
            sandbox.close()
    return status
