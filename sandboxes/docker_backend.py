"""Docker backend: the same warm worker, one per long-lived container.

Each pool slot is a container started from `image` with no network, memory/CPU/pids limits, a
read-only root filesystem with small tmpfs for ``/sandbox`` and ``/tmp``, a non-root user, all
capabilities dropped and ``no-new-privileges``. The container's command *is* the worker
(``_worker_main.py``, pid 1 of the container), spoken to over the container's attached
stdin/stdout. Per job the worker forks, applies the job's rlimits, kills the job's process tree
at the time limit, and a container is replaced after N jobs or after any timeout, out-of-memory
or crash, exactly like the local backends.

The ``docker`` package is imported only here, so the rest of ``sandboxes`` needs nothing
installed.
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import time
from typing import Any

from . import seccomp
from .core import Limits, SandboxError, SandboxUnavailable
from .local import _SCRUBBED_ENV, SANDBOX_WORK_DIR
from .pool import WORKER_SOURCE, PooledSandbox, Worker, WorkerDied, WorkerSpec

log = logging.getLogger("sandboxes")

DOCKER_INSTALL_HINT = "install the SDK with `pip install 'llm-envs[docker]'`"
DOCKER_ENGINE_HINT = (
    "start the engine (`sudo systemctl start docker`, or Docker Desktop) or point DOCKER_HOST at a "
    "running one, and check that this user may use it (member of the `docker` group)"
)
DEFAULT_IMAGE = "python:3.11-slim"
_DEMUX_HEADER = struct.Struct(">BxxxI")


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
        self.container: Any = None
        self._sock: socket.socket | None = None
        super().__init__(spec, backend)

    def _start(self) -> None:
        sb = self._sandbox
        self.container = sb.client.containers.create(
            sb.image,
            command=[sb.python_in_image, "-I", "-B", "-c", WORKER_SOURCE],
            stdin_open=True,
            tty=False,
            network_mode="none",
            mem_limit=f"{sb.container_memory_mb}m",
            memswap_limit=f"{sb.container_memory_mb}m",
            pids_limit=sb.pids_limit,
            nano_cpus=int(sb.cpus * 1e9),
            read_only=True,
            tmpfs={
                SANDBOX_WORK_DIR: f"size={sb.tmpfs_mb}m,mode=1777",
                "/tmp": f"size={sb.tmpfs_mb}m,mode=1777",
            },
            user=sb.user,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            environment=dict(_SCRUBBED_ENV, HOME=SANDBOX_WORK_DIR),
            working_dir=SANDBOX_WORK_DIR,
            labels={"llm-envs.sandbox": "worker"},
            detach=True,
            **({"runtime": sb.runtime} if sb.runtime else {}),
        )
        attached = self.container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._sock = getattr(attached, "_sock", attached)
        self.container.start()

    def _started(self) -> None:
        pass

    def _write_bytes(self, data: bytes) -> None:
        assert self._sock is not None
        self._sock.sendall(data)

    def _read_chunk(self, timeout_s: float) -> bytes | None:
        """Demultiplex Docker's stream framing (8-byte headers) and return stdout bytes only."""
        assert self._sock is not None
        deadline = time.monotonic() + timeout_s
        while True:
            while len(self._raw) >= _DEMUX_HEADER.size:
                stream, size = _DEMUX_HEADER.unpack_from(self._raw)
                if len(self._raw) < _DEMUX_HEADER.size + size:
                    break
                payload = bytes(self._raw[_DEMUX_HEADER.size : _DEMUX_HEADER.size + size])
                del self._raw[: _DEMUX_HEADER.size + size]
                if stream == 1 and payload:
                    return payload
                if stream == 2:
                    self._stderr_seen = getattr(self, "_stderr_seen", b"")[-4000:] + payload
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if not ready:
                return None
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                return b""
            self._raw += chunk

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
        return bool(self._state().get("Running"))

    def worker_died_result(self, exc: BaseException) -> dict[str, Any]:
        state = self._state()
        return {"timed_out": "in time" in str(exc), "oom": bool(state.get("OOMKilled"))}

    def _stderr_text(self) -> str:
        text = getattr(self, "_stderr_seen", b"").decode("utf-8", "replace")
        try:
            text += self.container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        except Exception:  # noqa: BLE001
            pass
        return text.strip()[-4000:]

    def stop(self, timeout_s: float = 5.0) -> None:
        try:
            if self._sock is not None:
                self._sock.shutdown(socket.SHUT_WR)  # EOF on the worker's stdin: it exits
        except OSError:
            pass
        self.kill()

    def kill(self) -> None:
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
        image: str = DEFAULT_IMAGE,
        pool_size: int | None = None,
        preload: list[str] | None = None,
        heavy_preload: list[str] | None = None,
        max_jobs_per_worker: int = 500,
        cpus: float = 1.0,
        user: str = "65534:65534",
        tmpfs_mb: int = 128,
        python_in_image: str = "python3",
        runtime: str | None = None,
        default_limits: Limits | None = None,
        docker_client: Any = None,
    ) -> None:
        """
        Args:
            image: image with a Python >= 3.9 (and whatever packages programs may import); it
                must already be present (``docker pull <image>``): nothing is pulled here.
            pool_size: warm containers (concurrent runs); default ``max(2, cpu_count)``.
            preload, heavy_preload: modules workers import up front (missing ones skipped);
                as for the local backends, heavy ones go to a second set of containers that
                serves only the programs importing them.
            max_jobs_per_worker: a container is replaced after this many jobs.
            cpus: CPU quota per container.
            user: ``uid:gid`` inside the container (non-root).
            tmpfs_mb: size of each writable tmpfs (``/sandbox`` and ``/tmp``).
            python_in_image: interpreter command inside the image.
            runtime: container runtime, e.g. ``"runsc"`` (gVisor) to put a user-space kernel
                between programs and the host kernel; default the engine's.
            default_limits: limits for runs that pass none; the container's memory and pids
                limits are derived from them (with headroom for the worker itself).
            docker_client: an existing ``docker.DockerClient`` (default ``docker.from_env()``).
        """
        super().__init__(
            pool_size=pool_size,
            preload=preload,
            heavy_preload=heavy_preload,
            max_jobs_per_worker=max_jobs_per_worker,
            default_limits=default_limits,
        )
        self.client = connect(docker_client)
        try:
            self.client.images.get(image)
        except Exception as exc:  # noqa: BLE001 - ImageNotFound or an API error
            raise SandboxUnavailable(
                f"docker image {image!r} is not available locally ({type(exc).__name__}: {exc}); "
                f"run `docker pull {image}` (or pass image=... with Python installed)"
            ) from None
        self.image = image
        self.cpus = cpus
        self.user = user
        self.tmpfs_mb = tmpfs_mb
        self.python_in_image = python_in_image
        self.runtime = runtime
        # Per-job limits are rlimits set by the worker; the container limits are the outer fence.
        self.container_memory_mb = self.default_limits.memory_mb * 2 + 256
        self.pids_limit = self.default_limits.max_processes + 16

    def _spawn_worker(self, preload: list[str]) -> Worker:
        config = {
            "sys_path": None,  # the image's own import path
            "preload": preload,
            "work_dir": SANDBOX_WORK_DIR,
            "work_dir_is_private": True,
            "scratch_dirs": ["/tmp"],
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

    def describe(self) -> str:
        return (
            f"docker (image {self.image}; no network, read-only root, non-root {self.user}, no capabilities, "
            f"memory/pids/cpu limits; {self.max_concurrency} warm containers)"
        )


__all__ = ["DockerSandbox", "SandboxError", "WorkerDied", "connect", "docker_unavailable_reason"]
