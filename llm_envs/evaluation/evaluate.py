"""Evaluation runs: play, write the files, summarise (what ``llm-envs eval`` and ``demo`` do).

An evaluation directory holds:

``episodes.jsonl``  one line per finished episode (:class:`~llm_envs.runner.EpisodeResult`):
                    every action record with its reward components, per-agent rewards, the
                    environment's metrics, and each decision's token usage and call error;
``summary.json``    :func:`~llm_envs.evaluation.summary.summarize` plus the run's settings;
``plot.png``        success rate, reward and format-error rate with confidence intervals
                    (when matplotlib is installed).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llm_envs.agents.base import Agent
from llm_envs.evaluation.plot import PLOT_MISSING, plot_available, plot_summary
from llm_envs.evaluation.stats import Interval
from llm_envs.evaluation.summary import summarize
from llm_envs.runner import EpisodeResult, Runner, RunnerError, load_episodes

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
PLOT_FILE = "plot.png"


def env_supports_split(env_id: str) -> bool:
    """Whether the environment's config dataclass has a ``split`` field."""
    from llm_envs.registry import entry

    config_class = getattr(entry(env_id).load(), "config_class", None)
    return (
        config_class is not None
        and dataclasses.is_dataclass(config_class)
        and any(f.name == "split" for f in dataclasses.fields(config_class))
    )


def resolve_split(env_id: str, split: str | None, env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` with the evaluation split set.

    An environment whose config has a ``split`` field is evaluated on ``split`` (default
    ``"test"``); asking for a split of an environment without splits is an error.
    """
    kwargs = dict(env_kwargs)
    if "split" in kwargs:
        if split is not None and kwargs["split"] != split:
            raise ValueError(f"split given twice: {split!r} and env argument split={kwargs['split']!r}")
        return kwargs
    if env_supports_split(env_id):
        from llm_envs.core.splits import check_split

        kwargs["split"] = check_split(split or "test")
    elif split is not None:
        raise ValueError(f"{env_id} has no data splits (its config has no 'split' field); drop --split")
    return kwargs


def _write_json_atomically(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=repr) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def evaluate(
    env_id: str,
    agents: Mapping[str, Agent] | Agent,
    *,
    episodes: int = 50,
    seed: int = 0,
    concurrency: int = 8,
    env_kwargs: Mapping[str, Any] | None = None,
    split: str | None = None,
    out_dir: str | os.PathLike[str],
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    plot: bool = True,
    max_batch_size: int | None = None,
    settings: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` episodes, write ``episodes.jsonl``, ``summary.json`` and ``plot.png``
    under ``out_dir``, and return the summary.

    Args:
        env_id: A registered environment id.
        agents: One agent for every role, or agent id → agent.
        episodes, seed, concurrency, max_batch_size: As for :func:`llm_envs.runner.run_episodes`.
        env_kwargs: Environment constructor keywords.
        split: Data split, for environments that have splits (default ``"test"`` for them).
        out_dir: The evaluation directory.
        resume: Continue the run already in ``out_dir``.
        overwrite: Replace a previous run in ``out_dir`` (otherwise finding one is an error).
        progress: Show a tqdm progress bar.
        plot: Draw ``plot.png`` (skipped with a note when matplotlib is missing).
        settings: More facts to record in ``summary.json`` (e.g. the agent specs).
        log: Where notes go (default: nowhere).
    """
    log = log or (lambda message: None)
    out = Path(out_dir)
    episodes_path = out / EPISODES_FILE
    if episodes_path.exists() and episodes_path.stat().st_size > 0 and not resume:
        if not overwrite:
            raise RunnerError(
                f"{out} already holds a run; pass --resume to continue it, --overwrite to replace "
                f"it, or choose another --out"
            )
        episodes_path.unlink()
        for stale in (SUMMARY_FILE, PLOT_FILE):
            (out / stale).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    env_kwargs = resolve_split(env_id, split, env_kwargs or {})

    already = 0
    if resume and episodes_path.exists():
        already = len({e.index for e in load_episodes(episodes_path) if e.index < episodes})
    bar = _progress_bar(episodes, already, env_id) if progress else None
    successes: list[float] = []

    def on_episode(result: EpisodeResult) -> None:
        successes.append(result.success)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(success=f"{sum(successes) / len(successes):.3f}", refresh=False)

    runner = Runner(
        env_id,
        agents,
        episodes,
        seed=seed,
        concurrency=concurrency,
        env_kwargs=env_kwargs,
        out_path=episodes_path,
        resume=resume,
        max_batch_size=max_batch_size,
        on_episode=on_episode,
    )
    started = time.perf_counter()
    try:
        results = runner.run()
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - started
    played = len(results) - runner.resumed_episodes
    summary = summarize(
        results,
        extra={
            "seed": seed,
            "split": env_kwargs.get("split"),
            "env_kwargs": {k: v for k, v in env_kwargs.items() if k != "split"},
            "concurrency": concurrency,
            "wall_s": wall,
            "episodes_played_now": played,
            "episodes_resumed": runner.resumed_episodes,
            "episodes_per_s": played / wall if wall > 0 and played else None,
            "agent_calls": runner.stats,
            **dict(settings or {}),
        },
    )
    _write_json_atomically(out / SUMMARY_FILE, summary)
    if plot:
        if plot_available():
            plot_summary(summary, out / PLOT_FILE)
        else:
            log(PLOT_MISSING)
    return summary


def _progress_bar(total: int, initial: int, label: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a core dependency, but a missing bar must not stop a run
        return None
    return tqdm(total=total, initial=initial, desc=label, unit="ep", dynamic_ncols=True)


# ---------------------------------------------------------------------------- demo
@dataclasses.dataclass
class DemoRow:
    """One line of the demo table."""

    env_id: str
    agent: str
    success: Interval | None = None
    rewards: dict[str, float] = dataclasses.field(default_factory=dict)
    turns: float = math.nan
    seconds: float = 0.0
    note: str = ""

    def cells(self) -> list[str]:
        if self.success is None:
            return [self.env_id, self.agent, "-", "-", "-", f"{self.seconds:.1f}", self.note]
        rewards = " ".join(f"{a}={r:+.2f}" for a, r in self.rewards.items())
        return [
            self.env_id,
            self.agent,
            self.success.format(2),
            rewards,
            f"{self.turns:.1f}",
            f"{self.seconds:.1f}",
            self.note,
        ]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["success"] = self.success.to_dict() if self.success else None
        return data


DEMO_HEADER = ["environment", "agents", "success [95% CI]", "mean reward per agent", "turns", "s", "note"]


def run_demo(
    *,
    episodes: int = 4,
    concurrency: int = 4,
    seed: int = 0,
    out_dir: str | os.PathLike[str] = "runs/demo",
    env_ids: list[str] | None = None,
    agent_labels: tuple[str, ...] = ("reference", "random"),
    log: Callable[[str], None] = print,
) -> list[DemoRow]:
    """Every registered environment of the ``llm`` namespace (or ``env_ids``), played by its
    reference agents and by the random agent.

    An environment that does not construct (or whose agents fail) gets a row with a note, and
    the demo goes on. Each run is written as an evaluation directory under
    ``out_dir/<Env-vN>/<agent>/``; the table is also saved as ``out_dir/summary.json``.
    """
    import llm_envs
    from llm_envs.agents.spec import resolve_agents

    out = Path(out_dir)
    # TextArena's games (namespace "textarena") are many and only have legal-move players: --env.
    ids = env_ids if env_ids is not None else [i for i in llm_envs.env_ids() if i.startswith("llm/")]
    rows: list[DemoRow] = []
    for env_id in ids:
        started = time.perf_counter()
        try:
            env = llm_envs.make(env_id)
            possible_agents = list(env.possible_agents)
            env.close()
        except Exception as exc:  # noqa: BLE001 - an unfinished environment must not stop the demo
            row = DemoRow(
                env_id,
                "-",
                seconds=time.perf_counter() - started,
                note=f"skipped: does not construct ({_short(exc)})",
            )
            rows.append(row)
            log(f"  {env_id}: {row.note}")
            continue
        for label in agent_labels:
            started = time.perf_counter()
            try:
                agents = resolve_agents({None: label}, possible_agents)
                summary = evaluate(
                    env_id,
                    agents,
                    episodes=episodes,
                    seed=seed,
                    concurrency=concurrency,
                    out_dir=out / env_id.split("/")[-1] / label,
                    overwrite=True,
                    progress=False,
                    plot=False,
                    settings={"agent_specs": {None: label}},
                )
            except Exception as exc:  # noqa: BLE001 - report and go on with the next run
                row = DemoRow(
                    env_id, label, seconds=time.perf_counter() - started, note=f"failed: {_short(exc)}"
                )
            else:
                row = DemoRow(
                    env_id,
                    label,
                    success=Interval(**summary["success"]),
                    rewards={a: float(r["value"]) for a, r in summary["rewards"].items()},
                    turns=float(summary["turns"]["value"]),
                    seconds=time.perf_counter() - started,
                )
            rows.append(row)
            log(
                f"  {env_id} / {label}: "
                + (row.note or f"success {row.success.format(2)}")
                + f" ({row.seconds:.1f}s)"
            )
    out.mkdir(parents=True, exist_ok=True)
    _write_json_atomically(
        out / SUMMARY_FILE, {"episodes": episodes, "seed": seed, "rows": [r.to_dict() for r in rows]}
    )
    return rows


def _short(exc: BaseException, limit: int = 100) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
