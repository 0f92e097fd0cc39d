"""Host side of the warm worker pool shared by every backend (bwrap, process, unsafe, docker).

A *worker* is a Python interpreter started inside the sandbox (its command line comes from the
backend) that preloads common modules and then forks one child per job; see
``_worker_main.py``. The pool keeps up to ``size`` workers, hands each job to an idle one, and
replaces a worker after ``max_jobs_per_worker`` jobs, after any timeout or out-of-memory, when
the worker could not restore a clean state, or when the worker died. Replacements start in the
background so callers do not wait for the preload. :class:`PooledSandbox` is the `Sandbox` built
on it that the backends subclass.

The host trusts nothing a worker sends: every frame is bounded in size before it is read (a
result can only be as large as the job's output caps allow), must be well-formed JSON of the
expected shape, and must carry the id of the job the host is waiting for. Anything else means
the worker is broken or subverted: it is replaced, and the run's result says the *sandbox*
failed (`RunResult.sandbox_error`), never what the program did.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import queue
import re
import secrets
import select
import shutil
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import seccomp
from .core import FileMap, Limits, RunResult, Sandbox, SandboxError, is_shared_code, validate_files

if TYPE_CHECKING:  # pragma: no cover - Self is Python 3.11+; annotations are not evaluated
    from typing import Self

log = logging.getLogger("sandboxes")

_HEADER = struct.Struct(">I")
WORKER_SOURCE = (Path(__file__).with_name("_worker_main.py")).read_text(encoding="utf-8")
LAUNCHER_SOURCE = (Path(__file__).with_name("_launcher_main.py")).read_text(encoding="utf-8")

#: Modules every worker imports before serving jobs when the caller does not choose (cheap
#: standard-library ones; missing ones are skipped).
DEFAULT_PRELOAD: tuple[str, ...] = (
    "collections",
    "itertools",
    "functools",
    "math",
    "re",
    "json",
    "heapq",
    "bisect",
    "string",
    "random",
    "fractions",
    "decimal",
    "typing",
    "dataclasses",
    "statistics",
    "unittest",
)

#: Heavy modules, preloaded only in a second set of workers that serves the programs importing
#: them. A fork costs more the bigger the worker (page tables copied, then torn down at exit:
#: ~10 ms with sympy and numpy loaded against ~1 ms without), so trivial programs should not pay
#: for sympy, and sympy programs should not pay ~0.5 s to import it.
DEFAULT_HEAVY_PRELOAD: tuple[str, ...] = ("numpy", "numpy.random", "sympy")

# Extra wall-clock allowance, beyond the job's own time limit, before the host declares a worker
# hung: covers writing files, forking and reaping a fork bomb.
_HOST_GRACE_S = 15.0
# A live worker acknowledges a job at once; silence this long means it is gone or wedged.
_ACK_TIMEOUT_S = 10.0
# Largest startup frame (launcher report, ready frame) the host accepts.
_MAX_STARTUP_FRAME = 1 << 20


class _Spawner:
    """Starts every worker process from one long-lived thread.

    bubblewrap's ``--die-with-parent`` (and any parent-death signal) fires when the *thread*
    that forked the child exits, not the process. Workers started from short-lived threads
    (a ``run_batch`` executor, a background replacement) would be killed when that thread ends.
    """

    _lock = threading.Lock()
    _requests: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen], queue.SimpleQueue]] = queue.SimpleQueue()
    _thread: threading.Thread | None = None

    @classmethod
    def popen(cls, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        with cls._lock:
            if cls._thread is None or not cls._thread.is_alive():
                cls._thread = threading.Thread(target=cls._serve, name="sandbox-spawner", daemon=True)
                cls._thread.start()
        reply: queue.SimpleQueue = queue.SimpleQueue()
        cls._requests.put((start, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value

    @classmethod
    def _serve(cls) -> None:
        while True:
            start, reply = cls._requests.get()
            try:
                reply.put((True, start()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                reply.put((False, exc))


class WorkerDied(SandboxError):
    """The worker process exited or stopped answering."""


class ProtocolError(WorkerDied):
    """The worker sent something that is not the frame the host expects (too large, malformed,
    wrong shape, or about another job): it is broken or subverted."""


def max_result_frame(limits: Limits) -> int:
    """Largest result frame a job with `limits` can honestly produce: both streams at their cap,
    every byte escaped by JSON (``\\u00XX``, 6 bytes), plus the fixed fields."""
    return 2 * 6 * limits.output_bytes + 65536


_RESULT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "stdout": str,
    "stderr": str,
    "stdout_truncated": bool,
    "stderr_truncated": bool,
    "timed_out": bool,
    "oom": bool,
    "worker_clean": bool,
}


def validate_result(reply: Any, job_id: str, limits: Limits) -> dict[str, Any]:
    """Check a result frame against what a worker may send for this job; raise `ProtocolError`."""
    if not isinstance(reply, dict):
        raise ProtocolError(f"result is a {type(reply).__name__}, not an object")
    if reply.get("id") != job_id:
        raise ProtocolError(f"result for job {reply.get('id')!r} while waiting for {job_id!r}")
    if "worker_error" in reply:
        if not isinstance(reply["worker_error"], str):
            raise ProtocolError("worker_error is not a string")
        return reply
    for name, kind in _RESULT_FIELDS.items():
        if not isinstance(reply.get(name), kind):
            raise ProtocolError(f"result field {name!r} missing or not {getattr(kind, '__name__', kind)}")
    for name in ("stdout", "stderr"):
        if len(reply[name]) > limits.output_bytes:
            raise ProtocolError(f"{name} longer than the job's output cap")
    code = reply.get("exit_code")
    if code is not None and (type(code) is not int or not -128 <= code <= 255):
        raise ProtocolError(f"exit_code {code!r} is not an exit status")
    duration = reply.get("duration_s")
    if type(duration) not in (int, float) or not math.isfinite(duration) or not 0 <= duration <= limits.time_s + _HOST_GRACE_S:
        raise ProtocolError(f"duration_s {duration!r} is not a duration of this job")
    leftovers = reply.get("leftover_processes", 0)
    if type(leftovers) is not int or leftovers < 0:
        raise ProtocolError("leftover_processes is not a count")
    return reply


@dataclasses.dataclass
class WorkerSpec:
    """How to start one worker: the command line and what the worker is told at startup."""

    argv: list[str]
    config: dict[str, Any]
    env: dict[str, str]
    #: The first frame comes from the launcher (namespaces obtained), then the worker's.
    expects_launcher_frame: bool = False
    #: Whether the worker's work directory lives on the host filesystem, so the host deletes it
    #: when the worker is gone (even if it was killed before it could tidy up). ``None``: on the
    #: host unless the launcher reports private tmpfs directories. Only directories the worker
    #: created itself (named ``sandbox-worker-*``) are ever deleted.
    work_dir_on_host: bool | None = False
    startup_timeout_s: float = 120.0
    #: Host descriptors to keep open while the worker lives (its uid block's lock), closed on kill.
    hold_fds: list[int] = dataclasses.field(default_factory=list)


def with_host_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The worker config with what the host decides for every backend, whoever wrote the
    config: the per-job seccomp filter wherever the worker filter is on (a backend that loads
    one gets both), and whether the zygote may use huge pages (:func:`huge_pages_allowed`)."""
    if config.get("seccomp_bpf") and "job_seccomp_bpf" not in config and seccomp.supported():
        config = dict(config, job_seccomp_bpf=seccomp.build_job_filter().hex())
    if "huge_pages" not in config:
        config = dict(config, huge_pages=huge_pages_allowed())
    return config


#: Set to ``off`` (or ``0``, ``false``, ``no``) to keep every worker's zygote in 4 KiB pages.
HUGE_PAGES_ENV = "SANDBOX_HUGE_PAGES"
_THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def huge_pages_allowed() -> bool:
    """Whether a worker's zygote may map its memory in transparent huge pages once it has built
    everything (cheaper forks; docs/sandboxes.md, "What a run costs"): not where
    ``SANDBOX_HUGE_PAGES`` is ``off``, nor where this machine's transparent huge pages are set
    to ``never``. (``MADV_COLLAPSE`` itself ignores that setting; the worker honours it.)"""
    if os.environ.get(HUGE_PAGES_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        return False
    try:
        return "[never]" not in _THP_SETTING.read_text()
    except OSError:
        return True


class Worker:
    """One running worker and its protocol channel (here: the pipes of a host process).

    Subclasses change the transport (the docker backend talks to a container) by overriding
    `_start`, `_write_bytes`, `_read_chunk`, `exit_status`, `alive`, `stop`, `kill` and
    `_stderr_text`; the handshake and framing stay the same.
    """

    def __init__(self, spec: WorkerSpec, backend: str) -> None:
        self.backend = backend
        self.jobs_done = 0
        self.spec = spec
        self._buffer = bytearray()
        self.launcher_info: dict[str, Any] = {}
        self.host_cleanup_dir: str | None = None
        self.info: dict[str, Any] = {}
        self._held_fds = list(spec.hold_fds)
        #: Largest frame the next `_recv` accepts (the pool sets it per job from its limits).
        self.frame_limit = _MAX_STARTUP_FRAME
        #: Ids of the files this worker keeps (sent once with ``keep_files``; see `FileStore`),
        #: and their bytes.
        self.stored_files: set[str] = set()
        self.stored_bytes = 0
        try:
            self._start()
        except BaseException:
            self._release_held()
            raise
        try:
            self._send(with_host_settings(spec.config))
            deadline = time.monotonic() + spec.startup_timeout_s
            if spec.expects_launcher_frame:
                frame = self._recv(deadline)
                launcher = frame.get("launcher")
                if not isinstance(launcher, dict):
                    raise ProtocolError("the launcher's first frame is not its report")
                self.launcher_info = launcher
            ready = self._recv(deadline)
            if "error" in ready:
                raise WorkerDied(str(ready["error"]))
            if ready.get("ready") is not True:
                raise ProtocolError("the worker did not report ready")
            self.info = ready
            on_host = spec.work_dir_on_host
            if on_host is None:
                on_host = "private_dirs" not in self.launcher_info.get("applied", [])
            work_dir = str(ready.get("work_dir", ""))
            if on_host and os.path.basename(work_dir).startswith("sandbox-worker-"):
                self.host_cleanup_dir = work_dir
        except WorkerDied as exc:
            stderr = self._stderr_text()
            self.kill()
            raise SandboxError(
                f"{backend} sandbox worker failed to start: {exc}"
                + (f"\n--- worker stderr ---\n{stderr}" if stderr else "")
            ) from None
        self._started()

    # -- transport: a host process with pipes ------------------------------------------------
    def _start(self) -> None:
        spec = self.spec
        self.proc = _Spawner.popen(
            lambda: subprocess.Popen(
                spec.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=spec.env,
                close_fds=True,
                start_new_session=True,  # a signal to the host's process group must not hit it
                cwd="/",
            )
        )

    def _started(self) -> None:
        # After startup nothing reads stderr; close our end so a stray writer gets EPIPE, not a hang.
        assert self.proc.stderr is not None
        self.proc.stderr.close()

    def _write_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _read_chunk(self, timeout_s: float) -> bytes | None:
        """Up to 1 MiB from the worker; b"" at EOF; None if nothing came within timeout_s."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout_s)
        if not ready:
            return None
        return os.read(fd, 1 << 20)

    def exit_status(self) -> int | None:
        return self.proc.poll()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _stderr_text(self) -> str:
        try:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=5)
            assert self.proc.stderr is not None
            return self.proc.stderr.read().decode("utf-8", "replace").strip()[-4000:]
        except Exception:
            return ""

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the worker to exit (EOF on its input), then kill it if it does not."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self) -> None:
        """Kill the worker and everything in its sandbox.

        The worker's own session holds only host-side helpers (bwrap's monitor, the launcher);
        killing them tears down the pid namespace (bwrap's --die-with-parent, the launcher's
        parent-death signal).
        """
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.proc.kill()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("sandbox worker %d did not exit after SIGKILL", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self.host_cleanup_dir:
            shutil.rmtree(self.host_cleanup_dir, ignore_errors=True)
        self._release_held()

    def _release_held(self) -> None:
        held, self._held_fds = getattr(self, "_held_fds", []), []
        for fd in held:
            try:
                os.close(fd)
            except OSError:
                pass

    # -- framing ---------------------------------------------------------------------------
    def _send(self, obj: Any) -> None:
        body = json.dumps(obj, separators=(",", ":")).encode("utf-8")
        try:
            self._write_bytes(_HEADER.pack(len(body)) + body)
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise WorkerDied(f"cannot write to worker: {exc}") from None

    def _read_some(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WorkerDied("worker did not answer in time")
        chunk = self._read_chunk(remaining)
        if chunk is None:
            raise WorkerDied("worker did not answer in time")
        if not chunk:
            raise WorkerDied(f"worker exited (status {self.exit_status()})")
        self._buffer += chunk

    def _recv(self, deadline: float) -> dict[str, Any]:
        """The next frame, a JSON object; `ProtocolError` if it announces more than
        `frame_limit` bytes (checked before anything of it is read), or is not a JSON object."""
        limit = self.frame_limit
        while len(self._buffer) < _HEADER.size:
            self._read_some(deadline)
        (length,) = _HEADER.unpack_from(self._buffer)
        if length > limit:
            raise ProtocolError(f"frame of {length} bytes announced, at most {limit} expected")
        while len(self._buffer) < _HEADER.size + length:
            self._read_some(deadline)
        body = bytes(self._buffer[_HEADER.size : _HEADER.size + length])
        del self._buffer[: _HEADER.size + length]
        try:
            frame = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ProtocolError(f"frame is not JSON ({type(exc).__name__})") from None
        if not isinstance(frame, dict):
            raise ProtocolError(f"frame is a JSON {type(frame).__name__}, not an object")
        return frame

    def worker_died_result(self, exc: BaseException) -> dict[str, Any]:
        """What to report for a job whose worker died or hung (backends may add detail)."""
        return {"timed_out": "in time" in str(exc), "oom": False}

    def killed_for_memory(self) -> bool:
        """Whether the kernel's out-of-memory killer fired in this worker's memory fence since
        the job started (a container's cgroup; backends without one say False). Then a
        worker that lost its zygote lost it to the run's memory: the run's result is ``oom``,
        not a sandbox failure that a program could cause on demand to go unscored."""
        return False


def _encode_job(source: str, stdin: str, files: dict[str, bytes], limits: Limits) -> dict[str, Any]:
    return {
        "id": secrets.token_hex(8),
        "source": source,
        "stdin": stdin,
        "files": {name: content.hex() for name, content in files.items()},
        "limits": dataclasses.asdict(limits),
    }


class FileStore:
    """Large files that come back run after run (a test harness's driver), sent to each worker
    once and then named.

    A file of at least `min_bytes` seen a second time (by content) gets an id; a worker that
    does not hold it yet receives it inline with ``keep_files`` and keeps it (up to
    `worker_budget` bytes per worker); later jobs name it in ``stored_files`` and the worker
    writes its copy into the job's directory. What a run sees is the same file either way: the
    content comes only from the host, and a run cannot reach the worker's memory. It saves the
    host's and the worker's encoding, decoding and copying of the file (for a 64 KB file,
    ~1.5 ms of CPU per run on the 2-core development machine). A kept file that is *shared
    code* (made by `sandboxes.core.shared_code_file` in this process) is also run once by the
    worker's zygote as a module (``hold_files``), unless `hold_shared_code` is off (a benchmark
    compares both). Thread-safe.
    """

    def __init__(self, *, min_bytes: int = 8192, worker_budget: int = 16 << 20, max_files: int = 64) -> None:
        self.min_bytes = min_bytes
        self.worker_budget = worker_budget
        self.max_files = max_files
        self.hold_shared_code = True
        self._ids: dict[bytes, str] = {}  # content -> id, oldest first
        self._seen: dict[int, None] = {}  # hashes of contents seen once, oldest first
        self._lock = threading.Lock()
        self._counter = 0

    def file_id(self, content: bytes) -> str | None:
        """The id of `content` if it is worth storing (large, and seen before), else None."""
        if len(content) < self.min_bytes or self.worker_budget <= 0:
            return None
        with self._lock:
            found = self._ids.get(content)
            if found is not None:
                return found
            digest = hash(content)  # cached on the bytes object; a collision only stores early
            if digest not in self._seen:
                self._seen[digest] = None
                while len(self._seen) > 4 * self.max_files:
                    del self._seen[next(iter(self._seen))]
                return None
            self._counter += 1
            found = self._ids[content] = f"f{self._counter}"
            while len(self._ids) > self.max_files:
                del self._ids[next(iter(self._ids))]  # workers may keep it: never named again
            return found

    def job_frame(self, job: dict[str, Any], files: dict[str, bytes], worker: Worker) -> dict[str, Any]:
        """`job` (from `_encode_job` without its files) with `files` for `worker`: inline, or
        named where the worker holds them. Records what the worker is asked to keep."""
        inline: dict[str, str] = {}
        stored: dict[str, str] = {}
        keep: dict[str, str] = {}
        for name, content in files.items():
            file_id = self.file_id(content)
            if file_id is not None and file_id in worker.stored_files:
                stored[name] = file_id
                continue
            inline[name] = content.hex()
            if file_id is not None and worker.stored_bytes + len(content) <= self.worker_budget:
                keep[name] = file_id
                worker.stored_files.add(file_id)
                worker.stored_bytes += len(content)
        frame = dict(job, files=inline)
        if stored:
            frame["stored_files"] = stored
        if keep:
            frame["keep_files"] = keep
            if self.hold_shared_code:
                hold = [name for name in keep if is_shared_code(files[name])]
                if hold:
                    frame["hold_files"] = hold
        return frame


class WarmPool:
    """A bounded set of warm workers, safe to use from many threads at once."""

    def __init__(
        self,
        spawn: Callable[[], Worker],
        *,
        size: int,
        max_jobs_per_worker: int,
        backend: str,
    ) -> None:
        if size < 1:
            raise ValueError(f"pool size must be >= 1, got {size}")
        self._spawn = spawn
        self.size = size
        self.max_jobs_per_worker = max_jobs_per_worker
        self.backend = backend
        self._idle: queue.SimpleQueue[Worker | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._live = 0  # workers running or starting
        self._closed = False
        self._all: set[Worker] = set()
        self._replacements: list[threading.Thread] = []
        #: Large files sent to each worker once (`FileStore`); set ``file_store.worker_budget``
        #: to 0 to send every file inline.
        self.file_store = FileStore()
        #: Workers started so far (first starts and replacements): a diagnostic, e.g. to see that
        #: a run did not cost its worker.
        self.workers_started = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def _start_worker(self) -> Worker:
        with self._lock:
            self.workers_started += 1
        worker = self._spawn()
        with self._lock:
            if self._closed:
                closed = True
            else:
                closed = False
                self._all.add(worker)
        if closed:
            worker.stop()
            raise SandboxError(f"{self.backend} sandbox is closed")
        return worker

    def warm(self) -> None:
        """Start all workers now (in parallel) instead of on first use."""
        with self._lock:
            missing = self.size - self._live
            self._live += max(0, missing)
        errors: list[BaseException] = []

        def start_one() -> None:
            try:
                self._idle.put(self._start_worker())
            except BaseException as exc:  # noqa: BLE001 - reported below
                with self._lock:
                    self._live -= 1
                self._idle.put(None)  # a slot freed up: wake a caller waiting for a worker
                errors.append(exc)

        threads = [threading.Thread(target=start_one, daemon=True) for _ in range(max(0, missing))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def _acquire(self) -> Worker:
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                worker = None
                with self._lock:
                    closed = self._closed
                    may_start = not closed and self._live < self.size
                    if may_start:
                        self._live += 1
                if closed:
                    self._idle.put(None)  # pass the wake-up on: every waiting caller learns it
                    raise SandboxError(f"{self.backend} sandbox is closed") from None
                if may_start:
                    try:
                        return self._start_worker()
                    except BaseException:
                        with self._lock:
                            self._live -= 1
                        # A slot freed up: wake a caller waiting for a worker (it was left
                        # waiting on a pool with no worker, live or starting, for ever).
                        self._idle.put(None)
                        raise
                worker = self._idle.get()
            if worker is None:
                continue  # a wake-up: a slot freed up, or the pool closed
            if worker.alive():
                return worker
            self._discard(worker, replace=False)

    def _discard(self, worker: Worker, *, replace: bool) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            closed = self._closed
            if not replace or closed:
                self._live -= 1
        if closed or not replace:
            self._idle.put(None)
            return

        def start_replacement() -> None:
            try:
                self._idle.put(self._start_worker())
            except BaseException as exc:  # noqa: BLE001 - the next caller will retry and raise
                if not self._closed:
                    log.warning("could not start a replacement %s worker: %s", self.backend, exc)
                with self._lock:
                    self._live -= 1
                self._idle.put(None)

        thread = threading.Thread(target=start_replacement, daemon=True, name=f"sandbox-{self.backend}-respawn")
        with self._lock:
            self._replacements = [t for t in self._replacements if t.is_alive()]
            self._replacements.append(thread)
            # Started before the lock is let go: close() joins every thread listed, and joining
            # one not yet started raised RuntimeError.
            thread.start()

    def _release(self, worker: Worker, *, recycle: bool) -> None:
        with self._lock:
            closed = self._closed
        if closed:
            worker.stop()
            with self._lock:
                self._all.discard(worker)
                self._live -= 1
            self._idle.put(None)  # a caller waiting for this worker learns that the pool closed
            return
        if recycle or worker.jobs_done >= self.max_jobs_per_worker or not worker.alive():
            self._discard(worker, replace=True)
        else:
            self._idle.put(worker)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            replacements = list(self._replacements)
        for thread in replacements:
            thread.join(timeout=30)
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            if worker is not None:
                worker.stop()
                with self._lock:
                    self._all.discard(worker)
                    self._live -= 1
        # Busy workers are stopped by _release when their job returns. Callers waiting for a
        # worker are woken (each passes the wake-up on) and raise "closed".
        self._idle.put(None)

    # -- running -----------------------------------------------------------------------------
    def run(self, source: str, stdin: str, files: dict[str, bytes], limits: Limits) -> RunResult:
        job = _encode_job(source, stdin, {}, limits)
        job_id = job["id"]
        for attempt in range(3):
            worker = self._acquire()
            started = False
            try:
                worker._send(self.file_store.job_frame(job, files, worker))
                worker.frame_limit = 1024
                ack = worker._recv(time.monotonic() + _ACK_TIMEOUT_S)
                if ack != {"accepted": job_id}:
                    raise ProtocolError(f"expected the acknowledgement of job {job_id}, got {str(ack)[:80]!r}")
                started = True
                worker.jobs_done += 1
                worker.frame_limit = max_result_frame(limits)
                reply = validate_result(worker._recv(time.monotonic() + limits.time_s + _HOST_GRACE_S), job_id, limits)
            except WorkerDied as exc:
                detail = worker.worker_died_result(exc)  # before the worker is torn down
                self._discard(worker, replace=True)
                if not started and not isinstance(exc, ProtocolError) and attempt < 2:
                    continue  # the worker was gone before it took the job (killed while idle): retry
                if detail.get("oom"):  # the engine killed the whole worker for the program's memory
                    return RunResult(stdout="", stderr="", exit_code=None, oom=True, backend=self.backend)
                return self._sandbox_failure(f"the worker running this program failed ({exc}); it was replaced")
            except BaseException:
                self._discard(worker, replace=True)
                raise
            if "worker_error" in reply:
                oom = worker.killed_for_memory()
                self._discard(worker, replace=True)
                if oom:
                    return RunResult(stdout="", stderr="", exit_code=None, oom=True, backend=self.backend)
                return self._sandbox_failure(f"the worker could not run this program ({reply['worker_error']}); it was replaced")
            # Leftover processes were already killed and reaped by the worker; a worker is only
            # replaced when its job hit a limit or it could not restore a clean state.
            recycle = bool(reply["timed_out"] or reply["oom"] or not reply["worker_clean"])
            self._release(worker, recycle=recycle)
            return RunResult(
                stdout=reply["stdout"],
                stderr=reply["stderr"],
                exit_code=reply["exit_code"],
                timed_out=reply["timed_out"],
                oom=reply["oom"],
                stdout_truncated=reply["stdout_truncated"],
                stderr_truncated=reply["stderr_truncated"],
                duration_s=float(reply["duration_s"]),
                backend=self.backend,
            )
        raise AssertionError("unreachable")

    def _sandbox_failure(self, message: str) -> RunResult:
        log.warning("%s sandbox: %s", self.backend, message)
        return RunResult(
            stdout="",
            stderr=f"sandbox: {message}",
            exit_code=None,
            backend=self.backend,
            sandbox_error=message,
        )

    def worker_pids(self) -> Sequence[int]:
        """Host pids of the live workers' top processes (bwrap, launcher or interpreter; none for
        containers), for tests and diagnostics: every process of a worker's sandbox descends
        from it."""
        with self._lock:
            workers = list(self._all)
        return [w.proc.pid for w in workers if getattr(w, "proc", None) is not None and w.alive()]


class PreloadRouter:
    """Two warm pools behind one interface: *light* workers (``preload``) for most programs and,
    started only when first needed, *heavy* workers (``preload`` + ``heavy_preload``) for programs
    that import a heavy package. A program goes to the heavy pool when its source (or one of its
    files) has an import statement naming a top-level package of ``heavy_preload``.
    """

    def __init__(
        self,
        spawn: Callable[[list[str]], Worker],
        *,
        preload: Sequence[str],
        heavy_preload: Sequence[str],
        size: int,
        max_jobs_per_worker: int,
        backend: str,
    ) -> None:
        light_modules = list(preload)
        heavy_modules = light_modules + [m for m in heavy_preload if m not in light_modules]
        self.light = WarmPool(
            lambda: spawn(light_modules), size=size, max_jobs_per_worker=max_jobs_per_worker, backend=backend
        )
        packages = sorted({name.split(".")[0] for name in heavy_preload})
        self._verdicts: dict[bytes, bool] = {}  # large file content -> imports a heavy package
        self._verdict_lock = threading.Lock()
        self._cache_verdicts = True
        self.heavy: WarmPool | None = None
        self._heavy_import: re.Pattern[str] | None = None
        if packages:
            self.heavy = WarmPool(
                lambda: spawn(heavy_modules), size=size, max_jobs_per_worker=max_jobs_per_worker, backend=backend
            )
            # Line starts include a literal backslash-n so sources embedded in JSON files count.
            self._heavy_import = re.compile(
                r"(?:^|\n|\\n|;)[ \t]*(?:import|from)[ \t]+[^\n#]*?\b(?:%s)\b" % "|".join(map(re.escape, packages))
            )

    def pool_for(self, source: str, files: dict[str, bytes]) -> WarmPool:
        if self.heavy is None or self._heavy_import is None:
            return self.light
        if self._heavy_import.search(source):
            return self.heavy
        for content in files.values():
            if self._imports_heavy(content):
                return self.heavy
        return self.light

    def _imports_heavy(self, content: bytes) -> bool:
        """Whether a file names a heavy package in an import statement. Remembered for large
        files (by content): a harness sends the same 64 KB driver with every run, and searching
        it cost ~2.7 ms of the host's CPU per run."""
        assert self._heavy_import is not None
        if len(content) < 4096 or not self._cache_verdicts:
            return self._heavy_import.search(content.decode("utf-8", "replace")) is not None
        with self._verdict_lock:
            known = self._verdicts.get(content)
        if known is not None:
            return known
        verdict = self._heavy_import.search(content.decode("utf-8", "replace")) is not None
        with self._verdict_lock:
            self._verdicts[content] = verdict
            while len(self._verdicts) > 64:
                del self._verdicts[next(iter(self._verdicts))]
        return verdict

    def run(self, source: str, stdin: str, files: dict[str, bytes], limits: Limits) -> RunResult:
        return self.pool_for(source, files).run(source, stdin, files, limits)

    def set_large_file_caches(self, enabled: bool) -> None:
        """Turn on or off what is remembered about large files (the routing verdict, and the
        `FileStore` of each pool): a benchmark compares both; results are the same."""
        self._cache_verdicts = enabled
        for pool in (self.light, self.heavy):
            if pool is not None:
                pool.file_store.worker_budget = FileStore().worker_budget if enabled else 0

    def set_shared_code(self, enabled: bool) -> None:
        """Turn on or off the zygote's holding of shared code files (for files kept from now
        on): a benchmark compares both; results are the same."""
        for pool in (self.light, self.heavy):
            if pool is not None:
                pool.file_store.hold_shared_code = enabled

    def warm(self, heavy: bool = True) -> None:
        self.light.warm()
        if heavy and self.heavy is not None:
            self.heavy.warm()

    @property
    def workers_started(self) -> int:
        return self.light.workers_started + (self.heavy.workers_started if self.heavy is not None else 0)

    def worker_pids(self) -> list[int]:
        pids = list(self.light.worker_pids())
        if self.heavy is not None:
            pids += self.heavy.worker_pids()
        return pids

    def close(self) -> None:
        self.light.close()
        if self.heavy is not None:
            self.heavy.close()


def default_pool_size() -> int:
    """Warm workers per pool when the caller does not choose: one per CPU, at least two."""
    return max(2, os.cpu_count() or 2)


class PooledSandbox(Sandbox):
    """A `Sandbox` whose runs go to warm workers behind a `PreloadRouter`: the part the local
    backends and the docker backend share. A backend implements `_spawn_worker`."""

    def __init__(
        self,
        *,
        pool_size: int | None,
        preload: Sequence[str] | None,
        heavy_preload: Sequence[str] | None,
        max_jobs_per_worker: int,
        default_limits: Limits | None,
    ) -> None:
        """Arguments as documented by the backends; ``None`` picks the defaults
        (`default_pool_size`, `DEFAULT_PRELOAD`, `DEFAULT_HEAVY_PRELOAD`, ``Limits()``). No
        worker starts before the first run (or `warm`)."""
        super().__init__()
        self.preload = list(DEFAULT_PRELOAD if preload is None else preload)
        self.heavy_preload = list(DEFAULT_HEAVY_PRELOAD if heavy_preload is None else heavy_preload)
        self.default_limits = default_limits or Limits()
        self.max_concurrency = pool_size or default_pool_size()
        self._pool = PreloadRouter(
            self._spawn_worker,
            preload=self.preload,
            heavy_preload=self.heavy_preload,
            size=self.max_concurrency,
            max_jobs_per_worker=max_jobs_per_worker,
            backend=self.name,
        )

    def _spawn_worker(self, preload: list[str]) -> Worker:
        """Start one worker that has imported `preload` (raises `SandboxError` if it cannot)."""
        raise NotImplementedError

    def warm(self, heavy: bool = True) -> Self:
        """Start every worker now (they otherwise start on first use); `heavy`: the heavy
        workers too. Returns self."""
        self._pool.warm(heavy)
        return self

    def run(
        self,
        source: str,
        *,
        stdin: str = "",
        files: FileMap | None = None,
        limits: Limits | None = None,
    ) -> RunResult:
        self._check_usable()
        if not isinstance(source, str):
            raise TypeError(f"source must be str, got {type(source).__name__}")
        if not isinstance(stdin, str):
            raise TypeError(f"stdin must be str, got {type(stdin).__name__}")
        return self._pool.run(source, stdin, validate_files(files), limits or self.default_limits)

    def worker_pids(self) -> Sequence[int]:
        """Host pids of the live workers' top processes (none for docker containers)."""
        return self._pool.worker_pids()

    @property
    def workers_started(self) -> int:
        """Workers (containers) started so far, replacements included."""
        return self._pool.workers_started

    def close(self) -> None:
        self._pool.close()
        super().close()
