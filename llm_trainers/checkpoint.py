"""Atomic, checksummed checkpoints; the run directory's lock.

A checkpoint is written to a temporary directory, fsync'ed, renamed, then ``latest`` is moved. A
crash at any moment leaves either the previous checkpoint or the new one, never a torn one:
``os.replace`` of a directory and of the ``latest`` pointer file are atomic on POSIX. Each part's
SHA-256 goes into the checkpoint's ``manifest.json`` (written before the rename), and
:func:`load_checkpoint` refuses a part whose bytes differ (bit rot, a bad copy: ``torch.load``
itself checks no checksum and loaded such a part silently); a checkpoint written before manifests
existed loads unchecked. What an interrupted save leaves (a ``.step_N.tmp<pid>`` directory, a
``latest.tmp<pid>`` file: a ``kill -9`` or a full disk) is removed by the next save or start
(:func:`remove_stale_temporaries`) and at once when the save fails with an exception, which is
then a :class:`CheckpointSaveError`. Ctrl-C (SIGINT) during a save is held until the save is done,
then raised: a ``KeyboardInterrupt`` inside ``torch.save`` would otherwise leave its zip writer to
fail with a ``RuntimeError`` that hides the interrupt (and ``llm-train`` would not exit with 130
and its ``--resume`` command).

:func:`lock_run_directory` takes an exclusive ``flock`` on ``<output_dir>/.llm-train.lock`` for as
long as a run uses the directory: a second process (a second ``--resume`` of the same run) is
refused instead of training the same steps and replacing the first one's checkpoints. The kernel
drops the lock when its process ends, however it ends, so no stale lock is ever left.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

__all__ = ["LOCK_FILE", "MANIFEST", "CheckpointError", "CheckpointSaveError", "NoCheckpointError", "RunDirectoryLocked",
           "RunLock", "checkpoints_in", "latest_checkpoint", "load_checkpoint", "lock_run_directory",
           "prune_checkpoints", "remove_stale_temporaries", "save_checkpoint"]

#: The file in a checkpoint directory that lists its parts with their sizes and SHA-256.
MANIFEST = "manifest.json"
#: The lock file of a run directory (:func:`lock_run_directory`); it holds the holder's pid and host.
LOCK_FILE = ".llm-train.lock"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT (Python's default handler only, in the main thread) until the block ends, then
    raise the ``KeyboardInterrupt`` it would have raised."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if received:
        raise KeyboardInterrupt


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be resumed from as it is: ``latest`` naming no
    checkpoint, a checkpoint missing a part, or a part that cannot be read or whose bytes differ
    from those written. The message names what is wrong and the checkpoints still there."""


class NoCheckpointError(CheckpointError, FileNotFoundError):
    """``--resume`` where the run directory holds nothing to continue (no checkpoint, no warm
    start). A :class:`FileNotFoundError` too, as it was before it had a class of its own."""


class CheckpointSaveError(RuntimeError):
    """A checkpoint that could not be written (a full disk, a file system error). Its temporary
    directory is removed; ``latest`` still names the previous checkpoint. The message names the
    checkpoint, the error and the free space left there."""


class RunDirectoryLocked(RuntimeError):
    """Another process holds the run directory's lock (:func:`lock_run_directory`)."""


class _HashingWriter:
    """A binary file as ``torch.save`` writes to it (``write`` and ``flush``), hashing the bytes
    on their way: the checksum costs no second read of what may be tens of GB."""

    def __init__(self, file: Any) -> None:
        self.file = file
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.sha256.update(view)
        self.size += view.nbytes
        return self.file.write(view)

    def flush(self) -> None:
        self.file.flush()


def save_checkpoint(root: str | os.PathLike[str], step: int, parts: dict[str, Any]) -> Path:
    """Save ``parts`` (name → picklable object, one ``<name>.pt`` each) as checkpoint ``step``,
    with a ``manifest.json`` of their sizes and SHA-256; a Ctrl-C during the save is raised once
    it is done (:func:`interrupts_held`). First removes what earlier, interrupted saves left under
    ``root`` (:func:`remove_stale_temporaries`: the caller holds the run directory's lock).

    Returns:
        The checkpoint directory ``root/step_<step>``.

    Raises:
        CheckpointSaveError: The file system refused a write (its temporary files are removed).
    """
    with interrupts_held():
        return _save_checkpoint(Path(root), step, parts)


def _save_checkpoint(root: Path, step: int, parts: dict[str, Any]) -> Path:
    final = root / f"step_{step:08d}"
    tmp = root / f".step_{step:08d}.tmp{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(root)
        tmp.mkdir()
        manifest: dict[str, dict[str, Any]] = {}
        for name, obj in parts.items():
            target = tmp / f"{name}.pt"
            with open(target, "wb") as f:
                writer = _HashingWriter(f)
                torch.save(obj, writer)
                f.flush()
                os.fsync(f.fileno())
            manifest[target.name] = {"bytes": writer.size, "sha256": writer.sha256.hexdigest()}
        with open(tmp / MANIFEST, "w") as f:
            json.dump({"format": 1, "parts": manifest}, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(root)
        _write_atomic_text(root / "latest", final.name + "\n")
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if _is_write_failure(exc):
            raise CheckpointSaveError(f"cannot write checkpoint {final.name} under {root}: {_describe(exc)}"
                                      f"{_free_space(root)}") from exc
        raise
    return final


def _is_write_failure(exc: BaseException) -> bool:
    """An error of the file system rather than of the objects saved: an ``OSError`` (ENOSPC,
    EIO, EDQUOT...), or torch's zip writer reporting that a write failed."""
    return isinstance(exc, OSError) or (isinstance(exc, RuntimeError) and "PytorchStreamWriter" in str(exc))


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"


def _free_space(root: Path) -> str:
    try:
        free = shutil.disk_usage(root if root.exists() else root.parent).free
    except OSError:
        return ""
    return f" ({free / 2**20:.0f} MiB free there)"


_STALE = re.compile(r"(\.step_\d{8}|latest)\.tmp\d+")


def remove_stale_temporaries(root: str | os.PathLike[str]) -> list[str]:
    """Remove what interrupted saves left under ``root`` (``.step_N.tmp<pid>`` directories,
    ``latest.tmp<pid>`` files, whatever process wrote them: a killed process never removes its
    own). Returns their names. Only safe while this process holds the run directory's lock
    (:func:`lock_run_directory`): another process's save in progress looks the same."""
    root = Path(root)
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:  # no directory yet
        return removed
    for entry in entries:
        if not _STALE.fullmatch(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
        removed.append(entry.name)
    if removed:
        log.info("removed what interrupted checkpoint saves left in %s: %s", root, ", ".join(sorted(removed)))
    return removed


_CHECKPOINT_NAME = re.compile(r"step_\d{8}")


def checkpoints_in(root: str | os.PathLike[str]) -> list[Path]:
    """The checkpoint directories under ``root``, oldest first."""
    return sorted(p for p in Path(root).glob("step_*") if p.is_dir() and _CHECKPOINT_NAME.fullmatch(p.name))


def latest_checkpoint(root: str | os.PathLike[str]) -> Path | None:
    """The checkpoint ``latest`` points to; ``None`` where there is no ``latest`` and no
    checkpoint. Raises :class:`CheckpointError` where ``latest`` names no checkpoint directory
    of ``root`` (a step directory removed by hand, a partial copy, an empty or garbled file) or
    is missing beside checkpoints: a run is there, and starting afresh would overwrite it."""
    root = Path(root)
    pointer = root / "latest"
    left = checkpoints_in(root)
    if not pointer.exists():
        if left:
            raise CheckpointError(f"{root} holds checkpoints ({', '.join(p.name for p in left)}) but no 'latest' "
                                  "pointer: write the one to resume from into it, or pass --overwrite")
        return None
    name = pointer.read_text(errors="replace").strip()
    path = root / name
    if _CHECKPOINT_NAME.fullmatch(name) and path.is_dir():
        return path
    there = f"the checkpoints left are {', '.join(p.name for p in left)}" if left else "no checkpoint is left"
    raise CheckpointError(f"{pointer} names {name!r}, which is not a checkpoint directory there; {there}. "
                          "Write the one to resume from into it, or pass --overwrite to start afresh")


def load_checkpoint(path: str | os.PathLike[str], required: tuple[str, ...] = (),
                    parts: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Load the ``<name>.pt`` parts of a checkpoint directory into ``{name: object}``: every
    part, or those of ``parts`` that are there. Where the checkpoint has a ``manifest.json``,
    each part loaded is checked against it first (size and SHA-256; a checkpoint written before
    manifests is loaded unchecked). Raises :class:`CheckpointError` naming the file where one of
    ``required`` is missing, a part is not the one written (a missing, truncated or altered
    file), or a file cannot be read; the earlier checkpoints are named."""
    path = Path(path)
    missing = [name for name in required if not (path / f"{name}.pt").is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(m + '.pt' for m in missing)}; "
                              f"{_earlier(path)}")
    manifest = _read_manifest(path)
    if manifest is not None:
        gone = sorted(name for name in manifest if not (path / name).is_file()
                      and (parts is None or Path(name).stem in parts))
        if gone:
            raise CheckpointError(f"checkpoint {path} lacks {', '.join(gone)}, which its {MANIFEST} lists; "
                                  f"{_earlier(path)}")
    loaded = {}
    for part in sorted(path.glob("*.pt")):
        if parts is not None and part.stem not in parts:
            continue
        if manifest is not None:
            _verify(part, manifest.get(part.name), path)
        try:
            loaded[part.stem] = torch.load(part, map_location="cpu", weights_only=False)
        except Exception as exc:  # torch raises RuntimeError, EOFError, pickle errors... for a damaged file
            raise CheckpointError(f"cannot read {part} ({type(exc).__name__}: {exc}); {_earlier(path)}") from None
    return loaded


def _read_manifest(path: Path) -> dict[str, dict[str, Any]] | None:
    file = path / MANIFEST
    if not file.exists():
        return None  # written before checkpoints had manifests
    try:
        data = json.loads(file.read_text())
        parts = data["parts"]
        if not isinstance(parts, dict) or not all(isinstance(v, dict) for v in parts.values()):
            raise TypeError("'parts' is not a mapping of part → {bytes, sha256}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"cannot read {file} ({type(exc).__name__}: {exc}); {_earlier(path)}") from None
    return parts


def _verify(part: Path, expected: dict[str, Any] | None, path: Path) -> None:
    """Refuse ``part`` unless its size and SHA-256 are the manifest's."""
    if expected is None:
        raise CheckpointError(f"cannot read {part}: the checkpoint's {MANIFEST} does not list it (it was not "
                              f"written with the checkpoint); {_earlier(path)}")
    size = part.stat().st_size
    if size != expected.get("bytes"):
        raise CheckpointError(f"cannot read {part}: it holds {size} bytes where the checkpoint wrote "
                              f"{expected.get('bytes')} (a truncated or damaged file); {_earlier(path)}")
    digest = hashlib.sha256()
    with open(part, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    if digest.hexdigest() != expected.get("sha256"):
        raise CheckpointError(f"cannot read {part}: its bytes differ from those written (SHA-256 "
                              f"{digest.hexdigest()[:16]}..., {MANIFEST} says {str(expected.get('sha256'))[:16]}...): "
                              f"the file is damaged; {_earlier(path)}")


def _earlier(path: Path) -> str:
    earlier = [p.name for p in checkpoints_in(path.parent) if p.name < path.name]
    return (f"the earlier checkpoints are {', '.join(earlier)} (write one into {path.parent / 'latest'} to resume "
            "from it)" if earlier else "no earlier checkpoint is left")


def prune_checkpoints(root: str | os.PathLike[str], keep: int) -> None:
    """Delete all but the ``keep`` newest checkpoints (never the one ``latest`` points to)."""
    root = Path(root)
    latest = latest_checkpoint(root)
    ckpts = checkpoints_in(root)
    for p in ckpts[: max(0, len(ckpts) - max(1, keep))]:
        if latest is None or p.resolve() != latest.resolve():
            shutil.rmtree(p, ignore_errors=True)


# ---------------------------------------------------------------------------- the run directory's lock
# Locks this process holds: lock file (resolved) → [descriptor, holders]. Re-entrant within the
# process (the CLI holds the lock across the Trainer it builds, and a Trainer takes it too), since
# flock locks of two descriptors of one file exclude each other even in one process.
_held: dict[str, list[int]] = {}
_held_guard = threading.Lock()


class RunLock:
    """This process's hold on a run directory (:func:`lock_run_directory`); :meth:`release` (or the
    end of a ``with`` block) gives it up, once."""

    def __init__(self, key: str | None) -> None:
        self.key = key
        self.released = key is None

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        with _held_guard:
            held = _held.get(self.key)  # type: ignore[arg-type]
            if held is None:
                return
            held[1] -= 1
            if held[1] <= 0:
                del _held[self.key]  # type: ignore[arg-type]
                os.close(held[0])  # (closing the descriptor drops the flock)

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def lock_run_directory(out: str | os.PathLike[str]) -> RunLock:
    """Take the exclusive lock of run directory ``out`` (created if missing) for this process:
    ``fcntl.flock`` on ``out/.llm-train.lock``, which then holds this process's pid and host.
    Re-entrant within a process; the kernel drops it when the process ends, a ``kill -9``
    included. Where the file system has no locks (or the platform no ``fcntl``) it warns and
    returns a lock that holds nothing.

    Raises:
        RunDirectoryLocked: Another process holds it; the message names that process.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    try:
        import fcntl
    except ImportError:  # not POSIX
        log.warning("no fcntl here: %s is not locked against a second run", out)
        return RunLock(None)
    key = os.path.realpath(path)
    with _held_guard:
        if key in _held:
            _held[key][1] += 1
            return RunLock(key)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _lock_holder(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise RunDirectoryLocked(
                    f"{out} is in use by another process{holder}: two runs in one output_dir would train the same "
                    f"steps and replace each other's checkpoints; wait for it to end (or stop it), or use another "
                    f"run.output_dir") from None
            log.warning("cannot lock %s (%s): it is not locked against a second run", path, exc)
            return RunLock(None)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        except OSError:  # the lock holds without its note
            pass
        _held[key] = [fd, 1]
        return RunLock(key)


def _lock_holder(fd: int) -> str:
    try:
        note = os.pread(fd, 200, 0).decode(errors="replace").split()
    except OSError:
        return ""
    if len(note) >= 2 and note[0].isdigit():
        return f" (pid {note[0]} on {note[1]})"
    return ""
