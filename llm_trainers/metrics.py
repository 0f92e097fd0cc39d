"""Metrics sinks: JSON lines (always), TensorBoard (when installed) and Weights & Biases (when
``run.wandb`` asks for it: ``offline`` writes the run under ``<output_dir>/wandb`` for a later
``wandb sync``, ``online`` sends it)."""

from __future__ import annotations

import json
import math
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MetricsLogger", "WandbSettings"]


class MetricsLogger:
    """Append one JSON object per logged step to ``metrics.jsonl`` (and TensorBoard scalars).

    Args:
        path: The JSONL file.
        tensorboard_dir: TensorBoard log directory, or None. Ignored (with ``tensorboard_error``
            set) when the ``tensorboard`` package is not installed.
        keep_lines: On resume, truncate the file to this many lines first, dropping entries
            written after the checkpoint being resumed (they will be produced again).
        wandb: A W&B run to log to as well.
        purge_step: Where ``tensorboard_dir`` already holds events (an earlier attempt of the
            run), hide those of this step and later ones: the new events file starts with
            TensorBoard's restart marker (``SummaryWriter(purge_step=...)``), so the steps the
            resumed run logs again are not shown twice. None: keep them all.
    """

    def __init__(self, path: str | os.PathLike[str], tensorboard_dir: str | os.PathLike[str] | None = None,
                 keep_lines: int | None = None, wandb: WandbSettings | None = None,
                 purge_step: int | None = None) -> None:
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

                earlier = purge_step is not None and any(Path(tensorboard_dir).glob("events.out.tfevents.*"))
                self._tb = SummaryWriter(str(tensorboard_dir), purge_step=purge_step if earlier else None)
            except ImportError as exc:  # not installed (the 'tensorboard' extra)
                self.tensorboard_error = f"{type(exc).__name__}: {exc}"
        self._wandb = _start_wandb(wandb) if wandb is not None else None

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
        if self._wandb is not None:
            scalars = {k: v for k, v in metrics.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
            self._wandb.log(scalars, step=step)

    def log_episodes(self, step: int, episodes_file: str | os.PathLike[str], limit: int = 16) -> None:
        """A table of the first ``limit`` episodes of an evaluation (``eval/step_N.jsonl``) in
        W&B (``eval/episodes``): seed, success, each agent's reward, the transcript. Nothing
        without W&B."""
        if self._wandb is None:
            return
        import wandb

        rows = []
        with open(episodes_file, encoding="utf-8") as handle:
            for line in handle:
                if len(rows) >= limit:
                    break
                episode = json.loads(line)
                transcript = "\n".join(
                    f"[{r.get('agent')} turn {r.get('turn')}] {r.get('action', '')}" for r in episode.get("records", []))
                rows.append([step, episode.get("seed"), float(episode.get("metrics", {}).get("success", 0.0)),
                             json.dumps(episode.get("rewards", {})), transcript])
        table = wandb.Table(columns=["step", "seed", "success", "rewards", "transcript"], data=rows)
        self._wandb.log({"eval/episodes": table}, step=step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


@dataclass(frozen=True)
class WandbSettings:
    """A W&B run: ``mode`` ``offline`` (written under ``directory``/wandb, nothing sent) or
    ``online``; the resolved config is its ``config``; the run id is kept in
    ``directory/wandb_run_id`` so that a resumed training run continues the same W&B run
    (``continue_run``; otherwise a new id replaces the file's: a run started afresh, or whose
    RL steps restart because it stopped before its first checkpoint, is a new W&B run, whose
    steps W&B would otherwise drop as lower than those it already has)."""

    mode: str
    project: str
    name: str
    directory: str
    config: dict[str, Any]
    continue_run: bool = True


def _start_wandb(settings: WandbSettings) -> Any:
    try:
        import wandb
    except ImportError:
        raise ValueError("run.wandb needs the wandb package: pip install 'llm-envs[wandb]'") from None
    directory = Path(settings.directory)
    directory.mkdir(parents=True, exist_ok=True)
    id_file = directory / "wandb_run_id"
    run_id = id_file.read_text().strip() if settings.continue_run and id_file.exists() else ""
    run_id = run_id or secrets.token_hex(4)
    id_file.write_text(run_id + "\n")
    return wandb.init(project=settings.project, name=settings.name, dir=str(directory), mode=settings.mode,
                      config=settings.config, id=run_id, resume="allow")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
