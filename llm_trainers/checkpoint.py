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
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["latest_checkpoint", "load_checkpoint", "prune_checkpoints", "save_checkpoint"]


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


def latest_checkpoint(root: str | os.PathLike[str]) -> Path | None:
    """The checkpoint ``latest`` points to (None if there is none)."""
    pointer = Path(root) / "latest"
    if not pointer.exists():
        return None
    path = Path(root) / pointer.read_text().strip()
    return path if path.is_dir() else None


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load every ``<name>.pt`` of a checkpoint directory into ``{name: object}``."""
    path = Path(path)
    return {p.stem: torch.load(p, map_location="cpu", weights_only=False) for p in sorted(path.glob("*.pt"))}


def prune_checkpoints(root: str | os.PathLike[str], keep: int) -> None:
    """Delete all but the ``keep`` newest checkpoints (never the one ``latest`` points to)."""
    root = Path(root)
    latest = latest_checkpoint(root)
    ckpts = sorted(p for p in root.glob("step_*") if p.is_dir())
    for p in ckpts[: max(0, len(ckpts) - max(1, keep))]:
        if latest is None or p.resolve() != latest.resolve():
            shutil.rmtree(p, ignore_errors=True)
