"""Metrics sinks: JSON lines (always) and TensorBoard (when installed)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["MetricsLogger"]


class MetricsLogger:
    """Append one JSON object per logged step to ``metrics.jsonl`` (and TensorBoard scalars).

    Args:
        path: The JSONL file.
        tensorboard_dir: TensorBoard log directory, or None. Ignored (with ``tensorboard_error``
            set) when the ``tensorboard`` package is not installed.
        keep_lines: On resume, truncate the file to this many lines first, dropping entries
            written after the checkpoint being resumed (they will be produced again).
    """

    def __init__(self, path: str | os.PathLike[str], tensorboard_dir: str | os.PathLike[str] | None = None,
                 keep_lines: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if keep_lines is not None and self.path.exists():
            lines = self.path.read_text().splitlines(keepends=True)[:keep_lines]
            self.path.write_text("".join(lines))
        if self.path.exists():
            with self.path.open() as existing:
                self.lines = sum(1 for _ in existing)
        else:
            self.lines = 0
        self._file = self.path.open("a")
        self._tb = None
        self.tensorboard_error: str | None = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(tensorboard_dir))
            except ImportError as exc:  # not installed (the 'tensorboard' extra)
                self.tensorboard_error = f"{type(exc).__name__}: {exc}"

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        row = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        self.lines += 1
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
