"""Types shared by every backend: limits, jobs, results, errors and the `Sandbox` base class.

Standard library only: the package must import on a bare interpreter.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import marshal
import math
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

FileContent = str | bytes
FileMap = Mapping[str, FileContent]


#: The first bytes of a *shared code* file: `SHARED_CODE_MAGIC`, the interpreter's
#: ``sys.implementation.cache_tag``, a newline, then ``marshal.dumps`` of a code object. Made by
#: `shared_code_file`, which also declares the content shared code in this process: only such a
#: content is ever held (bytes that merely look like one, from anywhere else, are only a file).
#: A pooled sandbox's worker that keeps such a file (a large file sent again and again, see
#: `sandboxes.pool.FileStore`) has its zygote unmarshal it and run it once as the body of a
#: module, if the tag is its interpreter's, and a run that is given the file finds that module
#: in ``sys.modules["_sandbox_shared_code"].modules[<file name>]`` (the file is written into the
#: job's directory as well, so a run that does not look, or a worker that could not hold it,
#: loses nothing). The body runs in the zygote, before every later run of that worker: it must
#: only define names (functions, classes, constants: no threads, files or descriptors), and the
#: module is in the memory of every later run: only the caller's own, public code belongs in
#: such a file (a test harness's driver), never anything secret, never code of untrusted
#: origin.
SHARED_CODE_MAGIC = b"#sandbox-shared-code "
#: Contents made by `shared_code_file` in this process (oldest first, at most 64).
_SHARED_CODE: dict[bytes, None] = {}
_SHARED_CODE_LOCK = threading.Lock()


def shared_code_file(code: Any, cache_tag: str | None = None) -> bytes:
    """The content of a shared code file holding `code` (see `SHARED_CODE_MAGIC`), for an
    interpreter whose ``sys.implementation.cache_tag`` is `cache_tag` (default: this one's);
    declared shared code, so that a pooled sandbox may hold it (`is_shared_code`)."""
    tag = cache_tag if cache_tag is not None else (sys.implementation.cache_tag or "none")
    content = SHARED_CODE_MAGIC + tag.encode("ascii") + b"\n" + marshal.dumps(code)
    with _SHARED_CODE_LOCK:
        _SHARED_CODE[content] = None
        while len(_SHARED_CODE) > 64:
            del _SHARED_CODE[next(iter(_SHARED_CODE))]
    return content


def is_shared_code(content: bytes) -> bool:
    """Whether `content` was made by `shared_code_file` in this process (and is still among the
    last 64 so made)."""
    with _SHARED_CODE_LOCK:
        return content in _SHARED_CODE


class SandboxError(RuntimeError):
    """The sandbox itself failed (a broken backend, not a bad program). The message names the fix."""


class SandboxUnavailable(SandboxError):
    """A backend cannot run on this host; the message says why and how to make it work."""


#: Largest value each limit accepts: far above any sensible run, low enough that every kernel
#: interface the limits go through (rlimits, timers, select) takes them.
MAX_LIMITS: dict[str, int | float] = {
    "time_s": 24 * 3600.0,
    "memory_mb": 1 << 20,  # 1 TiB
    "max_processes": 1 << 16,
    "output_bytes": 1 << 30,
    "file_size_mb": 1 << 20,
    "open_files": 1 << 20,  # the kernel's nr_open ceiling
}


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits for one run.

    Attributes:
        time_s: wall-clock limit in seconds; the whole process tree is killed when it passes.
            CPU time is capped at ``ceil(time_s) + 1`` seconds as a second line of defence.
        memory_mb: memory budget of the whole run, in MiB: the anonymous memory all its
            processes add on top of the warm interpreter they start from, plus the bytes it
            stores in the sandbox's file systems (measured every 10 ms; the run is killed and
            flagged ``oom`` when it goes over). Each process's address space is also capped at
            this much above the interpreter (an allocation beyond it raises ``MemoryError``).
        max_processes: processes (and threads) the program may have at once, itself included.
        output_bytes: cap per stream (stdout and stderr each); on overflow the program is
            killed and the stream flagged truncated.
        file_size_mb: largest file the program may write (RLIMIT_FSIZE); the writable work
            directory is also capped in total where the backend supports it.
        open_files: file descriptors the program may hold at once.

    Every value must be a finite, positive number (an int, but for `time_s`) no larger than
    `MAX_LIMITS`; anything else (``inf``, ``nan``, ``1e12`` seconds, a negative, a bool, a
    string) raises ``ValueError`` here, not when a run starts.
    """

    time_s: float = 5.0
    memory_mb: int = 512
    max_processes: int = 32
    output_bytes: int = 64_000
    file_size_mb: int = 16
    open_files: int = 64

    def __post_init__(self) -> None:
        time_s = self.time_s
        if (
            isinstance(time_s, bool)
            or not isinstance(time_s, (int, float))
            or not math.isfinite(time_s)
            or not 0 < time_s <= MAX_LIMITS["time_s"]
        ):
            raise ValueError(
                f"Limits.time_s must be a finite number of seconds in (0, {MAX_LIMITS['time_s']:g}], got {time_s!r}"
            )
        for name in ("memory_mb", "max_processes", "output_bytes", "file_size_mb", "open_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMITS[name]:
                raise ValueError(f"Limits.{name} must be an int between 1 and {MAX_LIMITS[name]}, got {value!r}")
        if self.open_files < 8:
            # The interpreter itself needs a handful of descriptors to start.
            raise ValueError(f"Limits.open_files must be >= 8, got {self.open_files}")


DEFAULT_LIMITS = Limits()


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What happened when a program ran.

    Attributes:
        stdout, stderr: decoded as UTF-8 (invalid bytes replaced), each capped at
            ``Limits.output_bytes`` bytes.
        stdout_truncated, stderr_truncated: the stream passed its cap (the program was killed).
        exit_code: the program's exit status; negative means killed by that signal (as in
            ``subprocess``); ``None`` when the sandbox killed it (time limit, output cap) or
            lost it (a worker crash).
        timed_out: the wall-clock limit passed.
        oom: the program ran out of its memory budget.
        duration_s: wall-clock time of the program itself, from start to exit or kill.
        backend: name of the backend that ran it ("bwrap", "process", "docker", "unsafe").
        sandbox_error: set when the *sandbox* failed (its worker died, hung, or answered
            something malformed) so the program's outcome is unknown: an infrastructure
            failure, never a result of the program. The other fields are then empty. ``None``
            for every run the sandbox carried out.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    oom: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = 0.0
    backend: str = ""
    sandbox_error: str | None = None

    @property
    def ok(self) -> bool:
        """Exited with status 0, within its time and memory limits."""
        return self.exit_code == 0 and not self.timed_out and not self.oom and self.sandbox_error is None


@dataclasses.dataclass(frozen=True)
class Job:
    """One program to run in a batch (see `Sandbox.run_batch`)."""

    source: str
    stdin: str = ""
    files: FileMap | None = None
    limits: Limits | None = None


def validate_files(files: FileMap | None) -> dict[str, bytes]:
    """Check file names (relative, no ``..``, not ``main.py``) and encode contents as bytes.

    File names come from the caller, not from the program, so a bad name is a caller bug and
    raises ``ValueError``.
    """
    out: dict[str, bytes] = {}
    for name, content in (files or {}).items():
        if not isinstance(name, str) or not name or name.startswith("/") or "\x00" in name:
            raise ValueError(f"file name must be a non-empty relative path, got {name!r}")
        parts = name.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"file name must not contain empty, '.' or '..' parts: {name!r}")
        if name == "main.py":
            raise ValueError("'main.py' is reserved for the program source")
        if isinstance(content, str):
            out[name] = content.encode("utf-8")
        elif isinstance(content, (bytes, bytearray, memoryview)):
            out[name] = bytes(content)
        else:
            raise TypeError(f"file {name!r}: content must be str or bytes, got {type(content).__name__}")
    return out


class Sandbox:
    """Runs untrusted Python programs. Subclasses implement `run`; batching and async come free.

    A hostile or broken *program* never makes `run` raise: it always returns a `RunResult`.
    A broken *sandbox* (backend missing, worker that cannot start) raises `SandboxError`.
    """

    #: Backend name reported in `RunResult.backend`.
    name: str = "abstract"
    #: Default concurrency of `run_batch` / `arun` (a warm pool sets it to its size).
    max_concurrency: int = 2

    def __init__(self) -> None:
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._closed = False
        self._owner_pid = os.getpid()

    def _check_usable(self) -> None:
        """Refuse use after close() or from a forked child (its pipes belong to the parent)."""
        if self._closed:
            raise SandboxError(f"{self.name} sandbox is closed")
        if os.getpid() != self._owner_pid:
            raise SandboxError(
                f"this {self.name} sandbox belongs to process {self._owner_pid}; after fork() create a new "
                "one in the child (shared_sandbox() keeps one per process)"
            )

    # -- the one method a backend must provide -------------------------------------------
    def run(
        self,
        source: str,
        *,
        stdin: str = "",
        files: FileMap | None = None,
        limits: Limits | None = None,
    ) -> RunResult:
        raise NotImplementedError

    # -- derived forms ---------------------------------------------------------------------
    def _thread_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        # Threads suffice: every backend waits on pipes/sockets, which release the GIL.
        with self._executor_lock:
            if self._closed:
                raise SandboxError(f"{self.name} sandbox is closed")
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=max(1, self.max_concurrency), thread_name_prefix=f"sandbox-{self.name}"
                )
            return self._executor

    def run_batch(self, jobs: Sequence[Job]) -> list[RunResult]:
        """Run many jobs concurrently (up to `max_concurrency` at once); results keep job order."""
        jobs = list(jobs)
        if not jobs:
            return []
        if len(jobs) == 1:
            job = jobs[0]
            return [self.run(job.source, stdin=job.stdin, files=job.files, limits=job.limits)]
        pool = self._thread_pool()
        futures = [
            pool.submit(self.run, job.source, stdin=job.stdin, files=job.files, limits=job.limits) for job in jobs
        ]
        return [future.result() for future in futures]

    async def arun(
        self,
        source: str,
        *,
        stdin: str = "",
        files: FileMap | None = None,
        limits: Limits | None = None,
    ) -> RunResult:
        """Async form of `run`; runs on the sandbox's thread pool so the event loop stays free."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._thread_pool(), lambda: self.run(source, stdin=stdin, files=files, limits=limits)
        )

    def describe(self) -> str:
        """One line saying what isolation this sandbox provides."""
        return self.name

    def isolation(self) -> dict[str, Any]:
        """What this sandbox isolates, as plain JSON-able data (for listings, audits and logs).

        Keys every backend gives: ``backend``, ``description`` (`describe`), ``limits`` (the
        default `Limits` as a dict), ``isolated`` (False only for ``unsafe``). The pooled
        backends add ``filesystem`` (``read_only``: what of the host is visible, ``writable``:
        the private, wiped directories, ``hidden``: what is covered), ``imports`` (the standard
        library and the allowed packages with their paths; see ``packages=``), ``uids`` (the
        uid scheme), ``network``, ``namespaces``, ``seccomp`` and ``memory`` (how ``memory_mb``
        is enforced). Nothing starts: it describes the configuration, not a probe.
        """
        limits = getattr(self, "default_limits", DEFAULT_LIMITS)
        return {
            "backend": self.name,
            "description": self.describe(),
            "isolated": self.name != "unsafe",
            "limits": dataclasses.asdict(limits),
        }

    def close(self) -> None:
        """Stop workers and release resources. Idempotent."""
        with self._executor_lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"
