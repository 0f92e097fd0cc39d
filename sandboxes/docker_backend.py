"""Docker backend: the same warm worker, one per long-lived container.

Each pool slot is a container started from `image` with no network, memory/CPU/pids limits, a
read-only root filesystem with small tmpfs for ``/sandbox`` and ``/tmp``, a non-root uid of its
own (random per container, so no two containers share a uid's process count or may signal each
other), all capabilities dropped and ``no-new-privileges``. The container's command *is* the
worker (``_worker_main.py``, pid 1 of the container), spoken to over the container's attached
stdin/stdout. Per job the worker forks, applies the job's rlimits, kills the job's process tree
at the time limit, and a container is replaced after N jobs or after any timeout, out-of-memory
or crash, exactly like the local backends.

No container outlives its sandbox: `close` removes them, so does an exit handler for sandboxes
never closed, and if the host process dies without either (SIGKILL, a crash) its containers see
end-of-input (``stdin_once``) and stop; the next `DockerSandbox` on the engine removes them.

The default image is the one ``python -m sandboxes.docker_engine start`` builds offline from
Debian packages (see `sandboxes.docker_engine`); ``python:3.11-slim`` is used if that one is
absent but this one was pulled.

The ``docker`` package is imported only here, so the rest of ``sandboxes`` needs nothing
installed.
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import select
import socket
import struct
import threading
import time
import weakref
from typing import Any

from . import docker_engine, seccomp
from .core import Limits, SandboxError, SandboxUnavailable
from .local import _SCRUBBED_ENV, SANDBOX_WORK_DIR
from .pool import WORKER_SOURCE, PooledSandbox, Worker, WorkerDied, WorkerSpec

log = logging.getLogger("sandboxes")

DOCKER_INSTALL_HINT = "install the SDK with `pip install 'llm-envs[docker]'`"
DOCKER_ENGINE_HINT = (
    "start one with `sudo python -m sandboxes.docker_engine start` (Debian packages only, no registry "
    "needed) and export the DOCKER_HOST it prints, or start your own (`sudo systemctl start docker`, "
    "Docker Desktop) and check that this user may use it (member of the `docker` group)"
)
#: The image the backend uses when none is given: the one `sandboxes.docker_engine` builds.
DEFAULT_IMAGE = docker_engine.image_tag()
#: Used instead when the engine lacks DEFAULT_IMAGE but has this one (pulled from a registry).
FALLBACK_IMAGE = "python:3.11-slim"
_DEMUX_HEADER = struct.Struct(">BxxxI")
# Containers run as a random uid from this range (none of the host's accounts), one per container.
_UID_RANGE = (1_000_000, 2_000_000_000)
_LABEL = "llm-envs.sandbox"
_OWNER_LABEL = "llm-envs.sandbox.owner"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return "unknown"


def _process_start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()[19].decode()


def _owner_label() -> str:
    """This process, as ``boot id/pid/start time``: a pid reused after we die does not match."""
    return f"{_boot_id()}/{os.getpid()}/{_process_start_time(os.getpid())}"


def _owner_is_gone(label: str) -> bool:
    """Whether the process named by an owner label died (only decidable on the same boot)."""
    try:
        boot, pid, start = label.split("/")
    except ValueError:
        return False
    return boot == _boot_id() and _process_start_time(int(pid)) != start


# Every live container worker of this process, removed at interpreter exit if still there.
_live_workers: weakref.WeakSet[_ContainerWorker] = weakref.WeakSet()
_live_lock = threading.Lock()


@atexit.register
def _remove_containers_at_exit() -> None:
    with _live_lock:
        workers = list(_live_workers)
    for worker in workers:
        worker.kill()


def remove_orphan_containers(client: Any) -> int:
    """Remove sandbox containers whose owning process on this host has died; returns how many.

    Such containers have already stopped (their input closed when the owner died); this only
    keeps them from piling up. Containers of live processes, or of other hosts, are left alone.
    """
    removed = 0
    try:
        containers = client.containers.list(all=True, filters={"label": _LABEL})
    except Exception as exc:  # noqa: BLE001 - housekeeping must never stop a sandbox from starting
        log.debug("listing sandbox containers: %s", exc)
        return 0
    for container in containers:
        owner = (container.labels or {}).get(_OWNER_LABEL, "")
        if _owner_is_gone(owner):
            try:
                container.remove(force=True)
                removed += 1
            except Exception as exc:  # noqa: BLE001 - already gone is fine
                log.debug("removing orphan sandbox container: %s", exc)
    return removed


def docker_unavailable_reason(exc: BaseException) -> str:
    """Turn the SDK's connection failure into a message that names the cause and the fix."""
    return f"cannot reach a Docker engine ({type(exc).__name__}: {exc}); {DOCKER_ENGINE_HINT}"


def connect(client: Any = None) -> Any:
    """Return a docker client that answered a ping, or raise `SandboxUnavailable` saying why.

    Without an engine the SDK raises ``docker.errors.DockerException`` from ``from_env()``; with
    a pinned API version the client builds fine and ``ping()`` raises a ``requests``
    ``ConnectionError`` instead (not a DockerException). Both mean the same thing here.
    """
    try:
        import docker
        import docker.errors
    except ImportError:
        raise SandboxUnavailable(f"the docker Python SDK is not installed; {DOCKER_INSTALL_HINT}") from None
    connection_errors: tuple[type[BaseException], ...] = (docker.errors.DockerException, ConnectionError, OSError)
    try:
        import requests.exceptions

        connection_errors += (requests.exceptions.ConnectionError, requests.exceptions.Timeout)
    except ImportError:  # pragma: no cover - requests is a dependency of docker
        pass
    try:
        if client is None:
            client = docker.from_env()
        client.ping()
    except connection_errors as exc:
        raise SandboxUnavailable(docker_unavailable_reason(exc)) from None
    return client


class _ContainerWorker(Worker):
    """A worker whose process is pid 1 of a container, reached through the attach socket."""

    def __init__(self, spec: WorkerSpec, backend: str, sandbox: DockerSandbox) -> None:
        self._sandbox = sandbox
        self._raw = bytearray()  # multiplexed stream bytes not yet decoded
        self._frame_stream = 0  # stream id of the Docker frame being read
        self._frame_left = 0  # its payload bytes not yet received
        self._stderr_seen = b""
        self.container: Any = None
        self._sock: socket.socket | None = None
        self._eof = False  # the attach stream ended: the worker (and its container) is gone
        super().__init__(spec, backend)

    def _start(self) -> None:
        try:
            self._create_and_start()
        except Exception as exc:  # noqa: BLE001 - any engine error: remove what was made, then say so
            self.kill()
            raise SandboxError(
                f"docker sandbox: cannot start a worker container in {self._sandbox.image} "
                f"({type(exc).__name__}: {exc})"
            ) from None

    def _create_and_start(self) -> None:
        sb = self._sandbox
        user = sb.user or f"{secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0]}"
        if ":" not in user:
            user = f"{user}:{user}"
        self.container = sb.client.containers.create(
            sb.image,
            command=[sb.python_in_image, "-I", "-B", "-c", WORKER_SOURCE],
            stdin_open=True,
            tty=False,
            network_mode="none",  # a network namespace with loopback only
            network_disabled=True,  # and no network configuration at all
            mem_limit=f"{sb.container_memory_mb}m",
            memswap_limit=f"{sb.container_memory_mb}m",
            pids_limit=sb.pids_limit,
            nano_cpus=int(sb.cpus * 1e9),
            read_only=True,
            tmpfs={
                SANDBOX_WORK_DIR: f"size={sb.tmpfs_mb}m,mode=1777",
                "/tmp": f"size={sb.tmpfs_mb}m,mode=1777",
            },
            user=user,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            environment=dict(_SCRUBBED_ENV, HOME=SANDBOX_WORK_DIR),
            # No working_dir: Docker would re-create it on the tmpfs as root 0755, and the
            # non-root worker could no longer write its job directories there.
            working_dir="/",
            labels={_LABEL: "worker", _OWNER_LABEL: sb.owner},
            # The attach stream carries every job's source and output: never store it on disk.
            log_config={"type": "none"},
            # detach=False is how the SDK asks for StdinOnce: when the attached client goes away
            # (this process died), the worker reads EOF and exits, and with it the container.
            detach=False,
            **({"runtime": sb.runtime} if sb.runtime else {}),
        )
        attached = self.container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._sock = getattr(attached, "_sock", attached)
        with _live_lock:
            _live_workers.add(self)
        self.container.start()
        self._locate_oom_counter()

    def _started(self) -> None:
        pass

    def _write_bytes(self, data: bytes) -> None:
        assert self._sock is not None
        self._sock.sendall(data)

    def _demux(self) -> bytes:
        """Decode Docker's stream framing (an 8-byte header: stream id, 3 zero bytes, length)
        from what has been received; return the stdout bytes, keep a tail of stderr.

        Payloads are passed on as they arrive, not once a whole Docker frame is in: a header
        announcing gigabytes must not make the host buffer them (the protocol frames above this
        layer are bounded by the pool).
        """
        out = bytearray()
        while self._raw:
            if self._frame_left == 0:
                if len(self._raw) < _DEMUX_HEADER.size:
                    break
                self._frame_stream, self._frame_left = _DEMUX_HEADER.unpack_from(self._raw)
                del self._raw[: _DEMUX_HEADER.size]
                continue
            take = min(self._frame_left, len(self._raw))
            payload = bytes(self._raw[:take])
            del self._raw[:take]
            self._frame_left -= take
            if self._frame_stream == 1:
                out += payload
            elif self._frame_stream == 2:
                self._stderr_seen = (self._stderr_seen + payload)[-4000:]
        return bytes(out)

    def _read_chunk(self, timeout_s: float) -> bytes | None:
        """The worker's stdout bytes (Docker's framing removed); b"" at EOF; None on timeout."""
        assert self._sock is not None
        deadline = time.monotonic() + timeout_s
        while True:
            data = self._demux()
            if data:
                return data
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if not ready:
                return None
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                self._eof = True
                return b""
            self._raw += chunk

    def _recv(self, deadline: float) -> dict[str, Any]:
        frame = super()._recv(deadline)
        # The kernel's out-of-memory killer may have killed processes of the job when the
        # container's memory cgroup (the run's whole process tree and its tmpfs files) was full,
        # without the program seeing a MemoryError: count it as out of memory too.
        if "exit_code" in frame and not frame.get("oom") and self._new_oom_kills():
            frame["oom"] = True  # also makes the pool replace this container
        return frame

    def _locate_oom_counter(self) -> None:
        """Find the container's memory cgroup on this host (none for a remote engine)."""
        self._oom_counter: str | None = None
        self._oom_kills_seen = 0
        try:
            self.container.reload()
            pid = int(self.container.attrs["State"]["Pid"])
            with open(f"/proc/{pid}/cgroup") as fh:
                lines = fh.read().splitlines()
        except Exception:  # noqa: BLE001 - a remote engine, or the container already gone
            return
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):  # cgroup v1
                candidate = f"/sys/fs/cgroup/memory{path}/memory.oom_control"
            elif controllers == "":  # cgroup v2 (also listed on v1 hosts, where it has no memory)
                candidate = f"/sys/fs/cgroup{path}/memory.events"
            else:
                continue
            if os.path.exists(candidate):
                self._oom_counter = candidate
                if "memory" in controllers:
                    break
        self._oom_kills_seen = self._oom_kills()

    def _oom_kills(self) -> int:
        if self._oom_counter is None:
            return 0
        try:
            with open(self._oom_counter) as fh:
                for line in fh:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return self._oom_kills_seen

    def _new_oom_kills(self) -> bool:
        seen, self._oom_kills_seen = self._oom_kills_seen, self._oom_kills()
        return self._oom_kills_seen > seen

    def _state(self) -> dict[str, Any]:
        try:
            self.container.reload()
            return dict(self.container.attrs.get("State", {}))
        except Exception:  # noqa: BLE001 - the container may already be gone
            return {}

    def exit_status(self) -> int | None:
        state = self._state()
        return None if state.get("Running") else state.get("ExitCode")

    def alive(self) -> bool:
        """Whether the attach stream is still open, read locally: the pool asks twice per job,
        and asking the engine (an inspect call) would cost more than the job itself."""
        if self._sock is None or self._eof:
            return False
        try:
            ready, _, _ = select.select([self._sock], [], [], 0)
            if ready:
                chunk = self._sock.recv(1 << 20)
                if not chunk:
                    self._eof = True
                    return False
                self._raw += chunk  # decoded by the next _read_chunk
        except (OSError, ValueError):
            self._eof = True
            return False
        return True

    def worker_died_result(self, exc: BaseException) -> dict[str, Any]:
        oom = self._new_oom_kills() or bool(self._state().get("OOMKilled"))
        return {"timed_out": "in time" in str(exc), "oom": oom}

    def killed_for_memory(self) -> bool:
        # Only the run allocates while it runs: an OOM kill in the container since the last
        # result (the zygote, say) was the run's doing.
        return self._new_oom_kills()

    def _stderr_text(self) -> str:
        # What the worker wrote to stderr before it was ready came through the attach stream
        # (the container keeps no log).
        return self._stderr_seen.decode("utf-8", "replace").strip()[-4000:]

    def stop(self, timeout_s: float = 5.0) -> None:
        try:
            if self._sock is not None:
                self._sock.shutdown(socket.SHUT_WR)  # EOF on the worker's stdin: it exits
        except OSError:
            pass
        self.kill()

    def kill(self) -> None:
        with _live_lock:
            _live_workers.discard(self)
        if self.container is not None:
            try:
                self.container.remove(force=True)
            except Exception as exc:  # noqa: BLE001 - already gone is fine
                log.debug("removing sandbox container: %s", exc)
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass


class DockerSandbox(PooledSandbox):
    """Warm workers in locked-down Docker containers (see the module docstring)."""

    name = "docker"
    strength = 3

    def __init__(
        self,
        *,
        image: str | None = None,
        pool_size: int | None = None,
        preload: list[str] | None = None,
        heavy_preload: list[str] | None = None,
        max_jobs_per_worker: int = 500,
        cpus: float = 1.0,
        user: str | None = None,
        tmpfs_mb: int = 128,
        python_in_image: str = "python3",
        runtime: str | None = None,
        default_limits: Limits | None = None,
        docker_client: Any = None,
        packages: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        """
        Args:
            image: image with a Python >= 3.9 (and whatever packages programs may import); it
                must already be in the engine: nothing is pulled here. Default: `DEFAULT_IMAGE`
                (``python -m sandboxes.docker_engine start`` builds it), else
                ``python:3.11-slim`` if present.
            pool_size: warm containers (concurrent runs); default ``max(2, cpu_count)``.
            preload, heavy_preload: modules workers import up front (missing ones skipped);
                as for the local backends, heavy ones go to a second set of containers that
                serves only the programs importing them.
            max_jobs_per_worker: a container is replaced after this many jobs.
            cpus: CPU quota per container.
            user: ``uid:gid`` inside the containers (never root). Default: a random uid per
                container, so that runs in different containers never share a process count
                (``RLIMIT_NPROC`` counts per uid) and cannot signal each other.
            tmpfs_mb: size of each writable tmpfs (``/sandbox`` and ``/tmp``).
            python_in_image: interpreter command inside the image.
            runtime: container runtime, e.g. ``"runsc"`` (gVisor) to put a user-space kernel
                between programs and the host kernel; default the engine's.
            default_limits: limits for runs that pass none; the container's memory and pids
                limits are derived from them (with headroom for the worker itself).
            docker_client: an existing ``docker.DockerClient`` (default ``docker.from_env()``).
            packages: accepted for the same options as the local backends; in a container
                the image decides what is importable (the project's image holds the standard
                library, numpy and sympy only, and nothing of the host).
        """
        super().__init__(
            pool_size=pool_size,
            preload=preload,
            heavy_preload=heavy_preload,
            max_jobs_per_worker=max_jobs_per_worker,
            default_limits=default_limits,
        )
        if user is not None and (user.split(":")[0] in ("0", "root") or user.split(":")[-1] in ("0", "root")):
            raise ValueError(f"user={user!r}: sandbox containers never run as root")
        self.client = connect(docker_client)
        self.image = self._find_image(image)
        self.owner = _owner_label()
        remove_orphan_containers(self.client)
        self.cpus = cpus
        self.user = user
        self.tmpfs_mb = tmpfs_mb
        self.python_in_image = python_in_image
        self.runtime = runtime
        self.packages = list(packages) if packages is not None else None
        # Per-job limits are rlimits set by the worker; the container limits are the outer fence.
        self.container_memory_mb = self.default_limits.memory_mb * 2 + 256
        self.pids_limit = self.default_limits.max_processes + 16

    def _find_image(self, image: str | None) -> str:
        candidates = [image] if image else [DEFAULT_IMAGE, FALLBACK_IMAGE]
        problems = []
        for candidate in candidates:
            try:
                self.client.images.get(candidate)
                return candidate
            except Exception as exc:  # noqa: BLE001 - ImageNotFound or an API error
                problems.append(f"{candidate}: {type(exc).__name__}")
        engine = getattr(getattr(self.client, "api", None), "base_url", "the engine")
        if image:
            fix = f"`docker pull {image}`, or build it there"
        else:
            fix = (
                "build the sandbox image with `sudo python -m sandboxes.docker_engine start` "
                "(offline, from Debian packages), or pass image=... with Python >= 3.9"
            )
        raise SandboxUnavailable(f"no sandbox image in the Docker engine at {engine} ({'; '.join(problems)}); {fix}")

    def _spawn_worker(self, preload: list[str]) -> Worker:
        config = {
            "sys_path": None,  # the image's own import path
            "preload": preload,
            "work_dir": SANDBOX_WORK_DIR,
            "work_dir_is_private": True,
            # Every writable place in the container, emptied after each job ("/sandbox" holds
            # the job directories, and nothing else may survive there either).
            "scratch_dirs": ["/tmp", "/dev/shm", SANDBOX_WORK_DIR],
            "kill_all": True,  # pid 1 of its own container
            "seccomp_bpf": seccomp.build_filter().hex() if seccomp.supported() else None,
            "seccomp_required": False,
            "env": {},
        }
        spec = WorkerSpec(argv=[], config=config, env={}, work_dir_on_host=False)
        return _ContainerWorker(spec, self.name, self)

    def probe(self) -> None:
        worker = self._spawn_worker([])
        worker.stop()

    def isolation(self) -> dict[str, Any]:
        info = super().isolation()
        info.update(
            filesystem={
                "root": f"the image {self.image}, read-only; nothing of the host is mounted",
                "read_only": [f"image {self.image}"],
                "writable": {SANDBOX_WORK_DIR: self.tmpfs_mb, "/tmp": self.tmpfs_mb, "/dev/shm": 64},
                "writable_note": "private tmpfs (size caps in MiB), emptied after every run",
                "hidden": ["every host path"],
                "proc": "the container's own pid namespace",
                "dev": "Docker's minimal /dev",
            },
            imports={
                "standard_library": "the image's",
                "packages": "the image's: the project's image holds numpy and sympy (with mpmath) only",
                "sys_path": "the image's interpreter's own",
            },
            uids=(f"uid {self.user}" if self.user else "a random non-root uid per container")
            + ", shared by the worker and its runs (job seccomp filter, pid 1, non-dumpable)",
            network="none (network_mode=none, network disabled); non-Unix sockets denied by seccomp",
            namespaces=["pid", "net", "ipc", "uts", "mnt", "cgroup"],
            seccomp={
                "worker": "non-Unix sockets, namespaces, mounts, ptrace, keyrings, bpf, perf, io_uring, ... denied",
                "job": "no signal, pidfd, prlimit, scheduling or signal redirection aimed at the worker or zygote",
            },
            memory=(
                f"the container's memory cgroup ({self.container_memory_mb} MiB, swap included: the whole "
                "process tree and its tmpfs) reported as oom, and the per-run accounting of the local backends inside it"
            ),
            runtime=self.runtime or "the engine's default",
        )
        return info

    def describe(self) -> str:
        user = f"uid {self.user}" if self.user else "a random non-root uid per container"
        return (
            f"docker (image {self.image}; no network, read-only root, {user}, no capabilities, "
            f"memory/pids/cpu limits; {self.max_concurrency} warm containers)"
        )


__all__ = [
    "DEFAULT_IMAGE",
    "DockerSandbox",
    "SandboxError",
    "WorkerDied",
    "connect",
    "docker_unavailable_reason",
    "remove_orphan_containers",
]
