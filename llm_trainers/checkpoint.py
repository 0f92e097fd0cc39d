"""Atomic checkpoints: write to a temporary directory, fsync, rename, then move ``latest``.

A crash at any moment leaves either the previous checkpoint or the new one, never a torn one:
``os.replace`` of a directory and of the ``latest`` pointer file are atomic on POSIX. Ctrl-C
(SIGINT) during a save is held until the save is done, then raised: a ``KeyboardInterrupt`` inside
``torch.save`` would otherwise leave its zip writer to fail with a ``RuntimeError`` that hides the
interrupt (and ``llm-train`` would not exit with 130 and its ``--resume`` command).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["CheckpointError", "checkpoints_in", "latest_checkpoint", "load_checkpoint", "prune_checkpoints", "save_checkpoint"]


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
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
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


def save_checkpoint(root: str | os.PathLike[str], step: int, parts: dict[str, Any]) -> Path:
    """Save ``parts`` (name → picklable object, one ``<name>.pt`` each) as checkpoint ``step``;
    a Ctrl-C during the save is raised once it is done (:func:`interrupts_held`).

    Returns:
        The checkpoint directory ``root/step_<step>``.
    """
    with interrupts_held():
        return _save_checkpoint(Path(root), step, parts)


def _save_checkpoint(root: Path, step: int, parts: dict[str, Any]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:08d}"
    tmp = root / f".step_{step:08d}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    for name, obj in parts.items():
        target = tmp / f"{name}.pt"
        with open(target, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    _write_atomic_text(root / "latest", final.name + "\n")
    return final


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be resumed from as it is: ``latest`` naming no
    checkpoint, a checkpoint missing a part, or a part that cannot be read. The message names
    what is wrong and the checkpoints still there."""


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


def load_checkpoint(path: str | os.PathLike[str], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """Load every ``<name>.pt`` of a checkpoint directory into ``{name: object}``. Raises
    :class:`CheckpointError` naming the file where one of ``required`` is missing or a file
    cannot be read (a truncated write: the earlier checkpoints are named)."""
    path = Path(path)
    missing = [name for name in required if not (path / f"{name}.pt").is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(m + '.pt' for m in missing)}; "
                              f"{_earlier(path)}")
    loaded = {}
    for part in sorted(path.glob("*.pt")):
        try:
            loaded[part.stem] = torch.load(part, map_location="cpu", weights_only=False)
        except Exception as exc:  # torch raises RuntimeError, EOFError, pickle errors... for a damaged file
            raise CheckpointError(f"cannot read {part} ({type(exc).__name__}: {exc}); {_earlier(path)}") from None
    return loaded


def _earlier(path: Path) -> str:
    earlier = [p.name for p in checkpoints_in(path.parent) if p.name < path.name]
    return (f"the earlier checkpoints are {', '.join(earlier)} (write one into {path.parent / 'latest'} to resume "
            "from it)" if earlier else "no earlier checkpoint is left")


def prune_checkpoints(root: str | os.PathLike[str], keep: int) -> None:
    """Delete all but the ``keep`` newest checkpoints (never the one ``latest`` points to)."""
    root = Path(root)
    latest = latest_checkpoint(root)
    ckpts = sorted(p for p in root.glob("step_*") if p.is_dir())
    for p in ckpts[: max(0, len(ckpts) - max(1, keep))]:
        if latest is None or p.resolve() != latest.resolve():
            shutil.rmtree(p, ignore_errors=True)
