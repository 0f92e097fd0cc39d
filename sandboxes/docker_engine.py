"""A private Docker engine for the docker sandbox backend, set up from Debian packages alone.

No image registry is needed: the sandbox image is built offline from Debian packages
(``mmdebstrap``) and imported into an engine that this module starts with private paths, so it
never touches a Docker installation the host may already have::

    python -m sandboxes.docker_engine start    # as root; prints the DOCKER_HOST to use
    python -m sandboxes.docker_engine status   # exit 0 when the engine answers and has the image
    python -m sandboxes.docker_engine stop     # stops the engine it started (by its pid)
    python -m sandboxes.docker_engine run -- CMD ...   # start if possible, run CMD, stop after

``start`` (idempotent; safe to run while an engine is up, also from several shells at once):

1. installs Debian's ``docker.io`` and ``mmdebstrap`` through ``apt-get`` when ``dockerd`` or
   ``mmdebstrap`` is missing;
2. starts ``dockerd`` with its own data root, exec root, socket and pid file, no bridge and no
   iptables rules (sandbox containers have no network at all), storage driver ``overlay2``
   (``vfs`` only if the data root cannot hold overlay2), unless it already answers;
3. builds the sandbox image when the engine lacks it:
   ``mmdebstrap --variant=minbase --include=python3,... bookworm - | docker import``, tagged
   ``llm-envs-sandbox:<hash of the recipe>`` so that it is rebuilt only when `IMAGE_RECIPE`
   changes. The docker backend uses this image by default.

``run`` is what ``make test`` and CI use: it brings the engine up when it can (root), adds
``docker`` to ``SANDBOX_TESTS_REQUIRE`` so that a broken docker backend fails the tests instead of
skipping them, runs the command, and stops the engine afterwards if it started it (and no other
``run`` still uses it). Where it cannot (not root, no ``apt-get``), it says why and runs the
command anyway: the Docker tests then skip with that reason, everything else runs.

Paths (override with the environment variables): ``SANDBOX_DOCKER_RUN_DIR`` (default
``/run/llm-envs-docker``: socket, pid file, exec root, log) and ``SANDBOX_DOCKER_DATA_DIR``
(default ``/var/lib/llm-envs-docker``: images and containers; kept across stops, so a restart
does not rebuild the image).

Standard library only; nothing here is imported by the rest of ``sandboxes``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path

#: What the sandbox image is made of. Changing anything here changes the image's tag, and the
#: next ``start`` builds the new image. numpy and sympy are the docker counterpart of the local
#: backends' default heavy preload, so programs that import them run on every backend.
IMAGE_RECIPE: dict[str, object] = {
    "suite": "bookworm",  # Python 3.11, as the project's CI
    "variant": "minbase",
    "include": ["python3", "python3-numpy", "python3-sympy"],
    # Documentation and translations are of no use to a sandbox; leaving them out saves ~50 MB.
    "dpkg_exclude": ["/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*"],
    "changes": ["ENV LANG=C.UTF-8"],
}
IMAGE_REPOSITORY = "llm-envs-sandbox"
DEBIAN_PACKAGES = ("docker.io", "mmdebstrap")

_STARTUP_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0


class EngineError(RuntimeError):
    """The engine cannot be set up here; the message says why and what to do."""


def run_dir() -> Path:
    return Path(os.environ.get("SANDBOX_DOCKER_RUN_DIR") or "/run/llm-envs-docker")


def data_dir() -> Path:
    return Path(os.environ.get("SANDBOX_DOCKER_DATA_DIR") or "/var/lib/llm-envs-docker")


def socket_path() -> Path:
    return run_dir() / "docker.sock"


def pid_file() -> Path:
    return run_dir() / "dockerd.pid"


def log_file() -> Path:
    return run_dir() / "dockerd.log"


def docker_host() -> str:
    """The ``DOCKER_HOST`` value of this module's engine (whether or not it is running)."""
    return f"unix://{socket_path()}"


def image_tag(recipe: dict[str, object] | None = None) -> str:
    """``llm-envs-sandbox:<first 12 hex digits of the recipe's SHA-256>``."""
    canonical = json.dumps(IMAGE_RECIPE if recipe is None else recipe, sort_keys=True, separators=(",", ":"))
    return f"{IMAGE_REPOSITORY}:{hashlib.sha256(canonical.encode()).hexdigest()[:12]}"


# -- talking to the engine (its HTTP API over the unix socket) ---------------------------------
class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _api(method: str, path: str, *, body=None, headers: dict[str, str] | None = None, timeout: float = 10.0):
    """One API call; returns (HTTP status, response body). Raises OSError if nothing answers."""
    conn = _UnixHTTPConnection(str(socket_path()), timeout)
    try:
        conn.request(
            method,
            path,
            body=body,
            headers=headers or {},
            encode_chunked=body is not None and not isinstance(body, bytes),
        )
        response = conn.getresponse()
        return response.status, response.read()
    except http.client.HTTPException as exc:
        raise OSError(f"bad answer from the engine: {exc}") from None
    finally:
        conn.close()


def ping(timeout: float = 2.0) -> bool:
    """Whether this module's engine answers on its socket."""
    try:
        status, body = _api("GET", "/_ping", timeout=timeout)
    except OSError:
        return False
    return status == 200 and body == b"OK"


def engine_host() -> str | None:
    """``DOCKER_HOST`` of this module's engine if it is up, else None (how tests find it)."""
    return docker_host() if ping() else None


def image_present(tag: str | None = None) -> bool:
    status, _ = _api("GET", f"/images/{urllib.parse.quote(tag or image_tag(), safe='')}/json")
    return status == 200


# -- the daemon process -------------------------------------------------------------------------
def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    except OSError:
        return []


def daemon_pid() -> int | None:
    """The pid of *this module's* dockerd, from its pid file, or None.

    A pid file can be stale, and its pid reused by an unrelated process: only a live process
    whose command line is dockerd with this engine's socket counts.
    """
    try:
        pid = int(pid_file().read_text().strip())
    except (OSError, ValueError):
        return None
    argv = _cmdline(pid)
    if argv and os.path.basename(argv[0]) == "dockerd" and f"unix://{socket_path()}" in argv:
        return pid
    return None


def _dockerd_argv(storage_driver: str) -> list[str]:
    dockerd = shutil.which("dockerd") or "dockerd"
    return [
        dockerd,
        "--data-root", str(data_dir() / "docker"),
        "--exec-root", str(run_dir() / "exec"),
        "-H", docker_host(),
        "--pidfile", str(pid_file()),
        # Sandbox containers run with network_mode=none: the engine needs no bridge, and must not
        # rewrite the host's firewall or forwarding settings.
        "--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false",
        "--storage-driver", storage_driver,
    ]  # fmt: skip


def _log_tail(lines: int = 15) -> str:
    try:
        return "\n".join(log_file().read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# containerd puts sockets such as <exec root>/containerd/containerd.sock.ttrpc under the run
# directory, and a unix socket path has at most 107 bytes.
_MAX_RUN_DIR_CHARS = 60


def _start_daemon(storage_driver: str) -> int:
    """Start dockerd in its own session and wait until it answers; return its pid."""
    if len(str(run_dir())) > _MAX_RUN_DIR_CHARS:
        raise EngineError(
            f"the run directory {run_dir()} is too long for the engine's unix sockets "
            f"({len(str(run_dir()))} characters, at most {_MAX_RUN_DIR_CHARS}): set SANDBOX_DOCKER_RUN_DIR to a shorter path"
        )
    run_dir().mkdir(parents=True, exist_ok=True, mode=0o711)
    (data_dir() / "docker").mkdir(parents=True, exist_ok=True, mode=0o711)
    for stale in (socket_path(), pid_file()):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    argv = _dockerd_argv(storage_driver)
    with open(log_file(), "wb") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, cwd="/"
        )
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineError(
                f"dockerd exited with status {proc.returncode} at start; its log ({log_file()}):\n{_log_tail()}"
            )
        if ping(timeout=1.0):
            return proc.pid
        time.sleep(0.1)
    _terminate(proc.pid)
    raise EngineError(
        f"dockerd did not answer within {_STARTUP_TIMEOUT_S:.0f} s; its log ({log_file()}):\n{_log_tail()}"
    )


def _children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2 :].split()[1]) == pid:
                found.append(int(name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def _terminate(pid: int) -> None:
    """SIGTERM dockerd (it stops its containers and its containerd), then SIGKILL what is left."""
    helpers = _children(pid)  # its containerd, which a SIGKILLed dockerd would orphan
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    grace = time.monotonic() + 5  # dockerd stops its containerd on the way out: let it
    while any(_alive(p) for p in helpers) and time.monotonic() < grace:
        time.sleep(0.1)
    for straggler in [pid] + helpers:
        if _alive(straggler):
            with contextlib.suppress(ProcessLookupError):
                os.kill(straggler, signal.SIGKILL)


def _unmount_under(roots: Sequence[Path]) -> None:
    """Detach the mounts dockerd leaves behind under its own directories (it bind-mounts its
    data root onto itself), deepest first, so that the directories can be deleted."""
    prefixes = [str(root.resolve()) for root in roots]
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    # Field 5 is the mount point, with spaces and such escaped as octal.
    points = {line.split()[4].encode().decode("unicode_escape") for line in lines}
    ours = [p for p in points if any(p == prefix or p.startswith(prefix + "/") for prefix in prefixes)]
    for point in sorted(ours, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


# -- packages and image ---------------------------------------------------------------------
def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise EngineError(
            f"{what} needs root (dockerd runs as root); run `sudo {sys.executable} -m sandboxes.docker_engine start`, "
            "or point DOCKER_HOST at an engine you may use"
        )


def missing_packages() -> list[str]:
    missing = []
    if shutil.which("dockerd") is None:
        missing.append("docker.io")
    if shutil.which("mmdebstrap") is None:
        missing.append("mmdebstrap")
    return missing


def install_packages(log=print) -> float:
    """apt-get install what is missing of `DEBIAN_PACKAGES`; returns the seconds it took."""
    missing = missing_packages()
    if not missing:
        return 0.0
    _require_root(f"installing {', '.join(missing)}")
    if shutil.which("apt-get") is None:
        raise EngineError(
            f"{', '.join(missing)} missing and no apt-get here: install Docker's engine and mmdebstrap yourself"
        )
    started = time.monotonic()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = [
        "apt-get",
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        "-o",
        "DPkg::Lock::Timeout=600",
        *missing,
    ]
    log(f"docker engine: apt-get install {' '.join(missing)}")
    proc = subprocess.run(install, env=env, capture_output=True, text=True)
    if proc.returncode != 0:  # most often stale package lists: refresh them once
        subprocess.run(
            ["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=600"],
            env=env,
            capture_output=True,
            text=True,
        )
        proc = subprocess.run(install, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or missing_packages():
        raise EngineError(
            f"apt-get could not install {', '.join(missing)}:\n{(proc.stdout + proc.stderr)[-2000:]}"
        )
    return time.monotonic() - started


def _mmdebstrap_argv(recipe: dict[str, object]) -> list[str]:
    argv = [
        "mmdebstrap",
        f"--variant={recipe['variant']}",
        "--include=" + ",".join(recipe["include"]),
        "--quiet",
    ]
    argv += [f"--dpkgopt=path-exclude={pattern}" for pattern in recipe["dpkg_exclude"]]
    argv += ['--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*']
    return argv + [str(recipe["suite"]), "-"]


def _build_tmpdir() -> str:
    """Where mmdebstrap assembles the root filesystem: in memory when there is room. On disk,
    unpacking and then deleting ~15,000 files is slow (about 50 s more on the development
    machine, whose disk is mounted with ``discard``)."""
    try:
        stat = os.statvfs("/dev/shm")
        if stat.f_bavail * stat.f_frsize > 2 * 1024**3:
            return "/dev/shm"
    except OSError:
        pass
    return os.environ.get("TMPDIR") or "/tmp"


def build_image(recipe: dict[str, object] | None = None, log=print) -> float:
    """Build the image from Debian packages and import it under `image_tag`; returns seconds.

    The tarball streams straight into the engine under a temporary tag, which becomes the real
    tag only once mmdebstrap has exited cleanly: a failed build never leaves a broken image
    under the name the backend looks for.
    """
    recipe = IMAGE_RECIPE if recipe is None else recipe
    tag = image_tag(recipe)
    if shutil.which("mmdebstrap") is None:
        raise EngineError("mmdebstrap is missing: `apt-get install mmdebstrap` (or run `start` as root)")
    started = time.monotonic()
    log(f"docker engine: building {tag} from Debian packages ({', '.join(recipe['include'])})")
    partial = f"partial-{os.getpid()}"
    query = urllib.parse.urlencode(
        [("fromSrc", "-"), ("repo", IMAGE_REPOSITORY), ("tag", partial)]
        + [("changes", c) for c in recipe["changes"]]
    )
    errors_file = run_dir() / "mmdebstrap.log"
    with open(errors_file, "wb") as errors:
        proc = subprocess.Popen(
            _mmdebstrap_argv(recipe),
            stdout=subprocess.PIPE,
            stderr=errors,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, TMPDIR=_build_tmpdir()),
        )
    assert proc.stdout is not None
    try:
        status, body = _api(
            "POST",
            f"/images/create?{query}",
            body=proc.stdout,
            headers={"Content-Type": "application/x-tar"},
            timeout=600,
        )
    finally:
        proc.stdout.close()
        returncode = proc.wait()
    problem = None
    if returncode != 0:
        problem = (
            f"mmdebstrap exited with status {returncode}:\n{errors_file.read_text(errors='replace')[-2000:]}"
        )
    elif status != 200 or b'"error"' in body:
        problem = f"the engine refused the image (HTTP {status}): {body.decode(errors='replace')[-1000:]}"
    if problem is None:
        repo, name = tag.split(":")
        status, body = _api("POST", f"/images/{IMAGE_REPOSITORY}:{partial}/tag?repo={repo}&tag={name}")
        if status not in (200, 201):
            problem = f"could not tag the image (HTTP {status}): {body.decode(errors='replace')}"
    _api("DELETE", f"/images/{IMAGE_REPOSITORY}:{partial}?noprune=1")
    if problem:
        raise EngineError(f"building {tag} failed: {problem}")
    return time.monotonic() - started


# -- start / stop / status --------------------------------------------------------------------
@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Serialize start/stop across processes (two `make test` at once must not race)."""
    run_dir().mkdir(parents=True, exist_ok=True, mode=0o711)
    with open(run_dir() / "lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclasses.dataclass
class Started:
    """What `start` did: the engine's pid, whether it was started now, and the time per step."""

    pid: int | None
    started_now: bool
    storage_driver: str
    seconds: dict[str, float]


def _storage_driver_in_use() -> str:
    try:
        return json.loads(_api("GET", "/info")[1]).get("Driver", "?")
    except (OSError, ValueError):
        return "?"


def start(*, build: bool = True, log=print) -> Started:
    """Bring the engine up (and build the image) unless already done; see the module docstring."""
    with _locked():
        return _start_locked(build=build, log=log)


def _start_locked(*, build: bool, log) -> Started:
    seconds: dict[str, float] = {}
    pid, started_now = daemon_pid(), False
    if ping():
        if pid is None:
            log(
                f"docker engine: an engine this module did not start answers on {socket_path()}; using it as it is"
            )
    else:
        _require_root("starting the docker engine")
        seconds["install"] = install_packages(log)
        if pid is not None:  # alive but not answering: start over
            _terminate(pid)
        clock = time.monotonic()
        try:
            pid = _start_daemon("overlay2")
        except EngineError as exc:
            if "graphdriver" not in str(exc) and "overlay" not in str(exc):
                raise
            log(
                f"docker engine: overlay2 is not supported under {data_dir()}; falling back to vfs "
                "(slower: every container copies the whole image)"
            )
            pid = _start_daemon("vfs")
        seconds["dockerd"] = time.monotonic() - clock
        started_now = True
    if build and not image_present():
        seconds["image"] = build_image(log=log)
    return Started(pid, started_now, _storage_driver_in_use(), seconds)


def stop(log=print) -> bool:
    """Stop this module's dockerd by its recorded pid; returns whether one was running.

    The data root (and so the image) is kept; a pid file naming any other process is ignored.
    """
    with _locked():
        return _stop_locked(log)


def _stop_locked(log) -> bool:
    pid = daemon_pid()
    if pid is None:
        return False
    log(f"docker engine: stopping dockerd (pid {pid})")
    _terminate(pid)
    _unmount_under([data_dir(), run_dir()])
    for leftover in (socket_path(), pid_file(), run_dir() / "started-by-run"):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    return True


def status() -> dict[str, object]:
    up = ping()
    return {
        "running": up,
        "pid": daemon_pid(),
        "docker_host": docker_host(),
        "image": image_tag(),
        "image_present": bool(up and image_present()),
        "storage_driver": _storage_driver_in_use() if up else None,
        "data_dir": str(data_dir()),
        "log": str(log_file()),
    }


# -- run: the wrapper `make test` and CI use ------------------------------------------------
def _users_dir() -> Path:
    return run_dir() / "users"


def _live_users() -> list[int]:
    users = []
    with contextlib.suppress(FileNotFoundError):
        for entry in _users_dir().iterdir():
            if entry.name.isdigit() and _alive(int(entry.name)):
                users.append(int(entry.name))
            else:
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
    return users


def _append_required(value: str, backend: str) -> str:
    names = [n for n in value.split(",") if n]
    return ",".join(names if backend in names else names + [backend])


def run(command: Sequence[str], *, require: bool = False, log=print) -> int:
    """Run `command` with the engine up when possible; return its exit status.

    The engine is stopped afterwards only if a `run` started it and no other `run` still uses
    it (each registers its pid under the run directory); one started by `start` stays up.
    """
    if os.environ.get("SANDBOX_DOCKER_ENGINE") == "off":
        log("docker engine: not started (SANDBOX_DOCKER_ENGINE=off)")
        return _call(command, dict(os.environ))
    try:
        with _locked():
            started = _start_locked(build=True, log=log)
            _users_dir().mkdir(parents=True, exist_ok=True)
            (_users_dir() / str(os.getpid())).touch()
            if started.started_now:
                (run_dir() / "started-by-run").touch()
    except EngineError as exc:
        if require:
            log(f"docker engine: required but could not be started: {exc}")
            return 1
        log(f"docker engine: not started ({str(exc).splitlines()[0]}); the Docker backend's tests will skip")
        return _call(command, dict(os.environ))
    steps = ", ".join(f"{k} {v:.1f} s" for k, v in started.seconds.items()) or "already up"
    log(
        f"docker engine: up at {docker_host()} (pid {started.pid}, {started.storage_driver}; {steps}); image {image_tag()}"
    )
    env = dict(os.environ)
    # The engine answers and has the image: a docker backend that fails now is a real failure.
    env["SANDBOX_TESTS_REQUIRE"] = _append_required(env.get("SANDBOX_TESTS_REQUIRE", ""), "docker")
    try:
        return _call(command, env)
    finally:
        with _locked():
            with contextlib.suppress(FileNotFoundError):
                (_users_dir() / str(os.getpid())).unlink()
            if not _live_users() and (run_dir() / "started-by-run").exists():
                _stop_locked(log)


def cleanup(log=print) -> bool:
    """Stop the engine if a `run` started it and none is still running (for an exit trap, in
    case a `run` was killed before it could stop the engine itself). Returns whether it did."""
    with _locked():
        if not _live_users() and (run_dir() / "started-by-run").exists():
            return _stop_locked(log)
    return False


def _call(command: Sequence[str], env: dict[str, str]) -> int:
    """Run the command to its end. SIGTERM and SIGHUP are passed on to it and Ctrl-C reaches it
    from the terminal; either way we wait for it, so that the engine is stopped only after the
    tests have removed their containers."""
    proc = subprocess.Popen(list(command), env=env)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, forward),
        signal.SIGHUP: signal.signal(signal.SIGHUP, forward),
        signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
    }
    try:
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- command line ------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sandboxes.docker_engine",
        description="A private Docker engine and the sandbox image, from Debian packages (see docs/sandboxes.md).",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    p_start = sub.add_parser(
        "start", help="install if missing, start dockerd, build the image; print DOCKER_HOST"
    )
    p_start.add_argument("--no-image", action="store_true", help="start the engine only")
    sub.add_parser("stop", help="stop the dockerd that `start` started (by its pid); keeps the image")
    sub.add_parser("status", help="print the engine's state as JSON; exit 0 if it is up with the image")
    sub.add_parser("host", help="print DOCKER_HOST of the engine if it is up (exit 1 if not)")
    sub.add_parser("cleanup", help="stop the engine if a `run` started it and no `run` uses it any more")
    p_run = sub.add_parser(
        "run", help="run a command with the engine up when possible, then stop it if started here"
    )
    p_run.add_argument("--require", action="store_true", help="fail instead of running without an engine")
    p_run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        if args.action == "start":
            started = start(build=not args.no_image, log=log)
            steps = ", ".join(f"{k} {v:.1f} s" for k, v in started.seconds.items()) or "already up"
            log(
                f"docker engine: up (pid {started.pid}, storage {started.storage_driver}; {steps}); image {image_tag()}"
            )
            print(f"export DOCKER_HOST={docker_host()}")
            return 0
        if args.action == "stop":
            if not stop(log=log):
                log("docker engine: not running (nothing to stop)")
            return 0
        if args.action == "status":
            state = status()
            print(json.dumps(state, indent=2))
            return 0 if state["running"] and state["image_present"] else 1
        if args.action == "cleanup":
            cleanup(log=log)
            return 0
        if args.action == "host":
            host = engine_host()
            if host:
                print(host)
            return 0 if host else 1
        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        if not command:
            parser.error("run needs a command: run -- COMMAND [ARGS...]")
        return run(
            command, require=args.require or os.environ.get("SANDBOX_DOCKER_ENGINE") == "require", log=log
        )
    except EngineError as exc:
        log(f"docker engine: {exc}")
        return 1
    except OSError as exc:
        if exc.errno == errno.EACCES:
            log(f"docker engine: permission denied ({exc}); run as root")
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
