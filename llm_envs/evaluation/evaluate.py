"""Evaluation runs: play, write the files, summarise (what ``llm-envs eval`` and ``demo`` do).

An evaluation directory holds:

``run.json``        the run's settings (everything that shapes the results: environment, split,
                    options, seed, each agent's model and sampling settings), their
                    fingerprint, and the history of the commands that played into the
                    directory; written before the first episode, checked by ``--resume``;
``episodes.jsonl``  one line per finished episode (:class:`~llm_envs.episodes.EpisodeResult`,
                    with a format version and a checksum): every action record with its reward
                    components, per-agent rewards, the environment's metrics, and each
                    decision's token usage;
``summary.json``    :func:`~llm_envs.evaluation.summary.summarize` plus the run's settings,
                    its status (complete or incomplete, and why) and the command history;
``plot.png``        success rate, reward and format-error rate with confidence intervals
                    (when matplotlib is installed).

The formats are specified in docs/evaluation.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llm_envs.agents.base import Agent
from llm_envs.core.writing import json_text
from llm_envs.episodes import EpisodeResult, IncompleteRunError, RunnerError, load_episodes
from llm_envs.evaluation.plot import PLOT_MISSING, plot_available, plot_summary
from llm_envs.evaluation.stats import Interval
from llm_envs.evaluation.summary import summarize
from llm_envs.runner import DEFAULT_MAX_CONSECUTIVE_FAILURES, EpisodeRunner, RunPlan, local_runner

#: What :func:`evaluate` calls to get the runner that plays a run's episodes.
RunnerFactory = Callable[[RunPlan], EpisodeRunner]

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
PLOT_FILE = "plot.png"
RUN_FILE = "run.json"
#: Version of ``run.json``.
RUN_FORMAT_VERSION = 1


class SettingsChangedError(RunnerError):
    """``--resume`` with settings other than those the run was started with."""


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
    tmp.write_text(json_text(data, indent=2, default=repr) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------- settings
def run_settings(
    env_id: str,
    env_kwargs: Mapping[str, Any],
    seed: int,
    agents: Mapping[str, Agent] | Agent | Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Everything that shapes a run's results (and nothing that only shapes its speed): the
    environment, its split and options, the seed, and each agent's :meth:`Agent.settings`.
    The number of episodes is not part of it: a run may be extended by resuming it.

    ``agents`` is one agent for every role, agent id → agent, or agent id → settings already
    taken (:meth:`~llm_envs.runner.EpisodeRunner.agent_settings`)."""
    if isinstance(agents, Agent):
        agents = {"*": agents}
    settings = {
        "env_id": env_id,
        "split": env_kwargs.get("split"),
        "env_kwargs": {k: v for k, v in env_kwargs.items() if k != "split"},
        "seed": int(seed),
        "agents": {
            agent_id: agent.settings() if isinstance(agent, Agent) else dict(agent)
            for agent_id, agent in agents.items()
        },
    }
    # Through JSON, so that what is compared is what is stored. An object that is not plain data
    # (a sandbox passed as an env option) counts by its type: its repr may hold a memory address.
    return json.loads(json.dumps(settings, sort_keys=True, default=_type_name))


def _type_name(value: Any) -> str:
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def settings_fingerprint(settings: Mapping[str, Any]) -> str:
    canonical = json_text(settings, sort_keys=True, separators=(",", ":"), default=repr)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def settings_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Human-readable differences between two settings dicts (``path: old -> new``)."""
    if isinstance(old, dict) and isinstance(new, dict):
        lines = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                lines.append(f"{path}: (unset) -> {json.dumps(new[key])}")
            elif key not in new:
                lines.append(f"{path}: {json.dumps(old[key])} -> (unset)")
            else:
                lines.extend(settings_diff(old[key], new[key], path))
        return lines
    return [] if old == new else [f"{prefix}: {json.dumps(old)} -> {json.dumps(new)}"]


def _open_run(
    out: Path,
    settings: dict[str, Any],
    *,
    resume: bool,
    force_resume: bool,
    command: str,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Write ``run.json`` for this invocation (checking a resumed run's settings) and return it."""
    path = out / RUN_FILE
    fingerprint = settings_fingerprint(settings)
    previous: dict[str, Any] | None = None
    if resume and path.exists():
        try:
            previous = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise RunnerError(f"cannot read {path}: {exc}; restore it, or start another run with --out") from exc
        if not isinstance(previous, dict):
            raise RunnerError(f"cannot read {path}: it holds no JSON object; restore it, or start another run with --out")
    entry: dict[str, Any] = {"command": command, "started_at": _now(), "resume": bool(resume)}
    mixed = bool(previous and previous.get("mixed_settings"))
    episodes_path = out / EPISODES_FILE
    has_episodes = episodes_path.exists() and episodes_path.stat().st_size > 0
    if previous is not None and previous.get("fingerprint") != fingerprint and not has_episodes:
        # Nothing was played under the old settings (a run stopped by a configuration error):
        # nothing can be mixed.
        entry["settings_changed"] = settings_diff(previous.get("settings", {}), settings)
    elif previous is not None and previous.get("fingerprint") != fingerprint:
        changes = settings_diff(previous.get("settings", {}), settings)
        if not force_resume:
            raise SettingsChangedError(
                f"{out} was started with other settings; resuming would mix results made under "
                f"different settings: {'; '.join(changes) or 'see run.json'}. Resume with the same "
                "settings, use another --out, or pass --force-resume to continue anyway (the summary "
                "then records mixed settings)."
            )
        log(f"warning: resuming {out} with changed settings (--force-resume): {'; '.join(changes)}")
        entry["settings_changed"] = changes
        entry["mixed"] = True  # episodes were played under the old settings
        mixed = True
    elif resume and previous is None and has_episodes:
        log(f"note: {out} has no {RUN_FILE} (an older run): its settings cannot be checked; recording them now")
    info = {
        "format_version": RUN_FORMAT_VERSION,
        "fingerprint": fingerprint,
        "settings": settings,
        "mixed_settings": mixed,
        "created_at": (previous or {}).get("created_at", _now()),
        "commands": list((previous or {}).get("commands", [])) + [entry],
    }
    _write_json_atomically(path, info)
    return info


# ---------------------------------------------------------------------------- progress
class _Progress:
    """A progress bar that tells the truth: episodes done (as each one finishes), episodes
    lost to failures, requests in flight, completion tokens per second, failed calls. A
    thread redraws it twice a second (on a terminal), so in-flight work shows even while no
    episode ends."""

    def __init__(self, runner: EpisodeRunner, label: str, total: int) -> None:
        from tqdm import tqdm

        self.runner = runner
        self.lock = threading.Lock()
        self.successes: list[float] = []
        self.bar = tqdm(total=total, desc=label, unit="ep", dynamic_ncols=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, name="eval-progress", daemon=True)
        self.thread.start()

    def _tick(self) -> None:
        # Twice a second on a terminal; into a log file, every 10 s is plenty.
        interval = 0.5 if getattr(self.bar.fp, "isatty", lambda: False)() else 10.0
        while not self.stop.wait(interval):
            self.refresh()

    def episode_done(self, result: EpisodeResult) -> None:
        with self.lock:
            self.successes.append(result.success)
        self.refresh()

    def refresh(self) -> None:
        p = self.runner.progress
        with self.lock:
            self.bar.n = p.done
            parts = [f"in flight {p.in_flight}", f"{p.completion_tokens_per_s():.0f} tok/s"]
            if self.successes:
                parts.append(f"success {sum(self.successes) / len(self.successes):.3f}")
            parts.append(f"failed calls {p.failed_calls}")
            if p.failed:
                parts.append(f"episodes lost {p.failed}")
            if p.stop_reason:
                parts.append("stopping")
            self.bar.set_postfix_str(", ".join(parts), refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.refresh()
        self.bar.close()


def _make_progress(runner: EpisodeRunner, label: str, total: int) -> _Progress | None:
    try:
        return _Progress(runner, label, total)
    except ImportError:  # tqdm is a core dependency, but a missing bar must not stop a run
        return None


# ---------------------------------------------------------------------------- evaluate
def evaluate(
    env_id: str,
    agents: Mapping[str, Agent] | Agent | Mapping[str | None, Any],
    *,
    episodes: int = 50,
    seed: int = 0,
    concurrency: int = 8,
    env_kwargs: Mapping[str, Any] | None = None,
    split: str | None = None,
    out_dir: str | os.PathLike[str],
    resume: bool = False,
    force_resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    plot: bool = True,
    max_batch_size: int | None = None,
    max_consecutive_failures: int | None = DEFAULT_MAX_CONSECUTIVE_FAILURES,
    settings: Mapping[str, Any] | None = None,
    runner: RunnerFactory | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` episodes, write ``run.json``, ``episodes.jsonl``, ``summary.json`` and
    ``plot.png`` under ``out_dir``, and return the summary.

    Args:
        env_id: A registered environment id.
        agents: One agent for every role, or agent id → agent; for a runner that builds the
            agents where it plays (``runner=RayEvaluation(...)``), agent id (None: every other
            role) → agent spec instead.
        episodes, seed, concurrency, max_batch_size, max_consecutive_failures: As for
            :class:`llm_envs.runner.Runner`.
        env_kwargs: Environment constructor keywords.
        split: Data split, for environments that have splits (default ``"test"`` for them).
        out_dir: The evaluation directory.
        resume: Continue the run already in ``out_dir`` (its settings must be the same).
        force_resume: Resume even though the settings changed (recorded as mixed settings).
        overwrite: Replace a previous run in ``out_dir`` (otherwise finding one is an error).
        progress: Show a progress bar.
        plot: Draw ``plot.png`` (skipped with a note when matplotlib is missing).
        settings: More facts to record in ``summary.json`` (e.g. the agent specs); its
            ``"command"`` goes into the command history.
        runner: What plays the episodes: a callable from a :class:`~llm_envs.runner.RunPlan`
            to an :class:`~llm_envs.runner.EpisodeRunner`. Default: :func:`~llm_envs.runner.local_runner`
            (this process); :class:`llm_envs.distributed.evaluation.RayEvaluation` plays them on
            Ray workers. Everything else here (files, checks, summary) is the same for both.
        log: Where notes go (default: nowhere).

    Raises:
        IncompleteRunError: when infrastructure failures kept episodes from finishing. The
            files are written first (``summary.json`` says ``"status": "incomplete"``), and the
            exception carries the summary as ``.summary``.
        SettingsChangedError: on ``resume`` with other settings (unless ``force_resume``).
    """
    log = log or (lambda message: None)
    out = Path(out_dir)
    episodes_path = out / EPISODES_FILE
    if episodes_path.exists() and episodes_path.stat().st_size > 0 and not resume and not overwrite:
        raise RunnerError(
            f"{out} already holds a run; pass --resume to continue it, --overwrite to replace "
            f"it, or choose another --out"
        )
    env_kwargs = resolve_split(env_id, split, env_kwargs or {})
    if resume and episodes_path.exists():
        # A run is extended by resuming, never cut: its summary would count the first
        # ``episodes`` and say nothing of the rest, which --compare and the report still read.
        beyond = {e.index for e in load_episodes(episodes_path, problems=[]) if e.index >= episodes}
        if beyond:
            raise RunnerError(
                f"{out} holds episodes up to index {max(beyond)} ({len(beyond)} past the {episodes} asked for): "
                f"resume with --episodes {max(beyond) + 1} or more, or start another run with --out"
            )
    extra_settings = dict(settings or {})
    command = str(extra_settings.pop("command", "") or "python: llm_envs.evaluation.evaluate()")

    display: _Progress | None = None

    def on_episode(result: EpisodeResult) -> None:
        if display is not None:
            display.episode_done(result)

    plan = RunPlan(
        env_id,
        agents,
        episodes,
        seed=seed,
        concurrency=concurrency,
        env_kwargs=env_kwargs,
        out_path=episodes_path,
        resume=resume,
        max_batch_size=max_batch_size,
        max_consecutive_failures=max_consecutive_failures,
        on_episode=on_episode,
    )
    # Built before anything is written: a runner that cannot play (Ray missing, agents it
    # refuses) leaves the directory as it was.
    episode_runner = (runner or local_runner)(plan)
    try:
        if overwrite and not resume and episodes_path.exists() and episodes_path.stat().st_size > 0:
            episodes_path.unlink()
            for stale in (SUMMARY_FILE, PLOT_FILE, RUN_FILE, EPISODES_FILE + ".rejected", "report.html"):
                (out / stale).unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        run_file = out / RUN_FILE
        previous_run_file = run_file.read_bytes() if run_file.exists() else None
        run_info = _open_run(
            out,
            run_settings(env_id, env_kwargs, seed, episode_runner.agent_settings()),
            resume=resume,
            force_resume=force_resume,
            command=command,
            log=log,
        )
        if progress:
            display = _make_progress(episode_runner, env_id, episodes)
        started = time.perf_counter()
        incomplete: IncompleteRunError | None = None
        try:
            results = episode_runner.run()
        except IncompleteRunError as exc:
            incomplete, results = exc, exc.results
        except RunnerError:
            if resume and episode_runner.progress.finished == 0:
                # Refused before any episode was played (the file holds another run's episodes):
                # run.json stays the run's own, or a plain resume of that run is refused after.
                if previous_run_file is None:
                    run_file.unlink(missing_ok=True)
                else:
                    tmp = run_file.with_suffix(run_file.suffix + ".tmp")
                    tmp.write_bytes(previous_run_file)
                    os.replace(tmp, run_file)
            raise
        finally:
            if display is not None:
                display.close()
        wall = time.perf_counter() - started
        facts = episode_runner.summary_facts()
    finally:
        episode_runner.close()
    for problem in episode_runner.file_problems:
        log(f"repaired {episodes_path}: {problem}" + ("" if problem.kind == "torn" else f" (moved to {EPISODES_FILE}.rejected)"))
    played = len(results) - episode_runner.resumed_episodes
    live = episode_runner.progress
    status = "complete" if incomplete is None else "incomplete"
    run_info["commands"][-1].update(
        {"ended_at": _now(), "status": status, "episodes_played": played, "calls": live.calls,
         "failed_calls": live.failed_calls}
    )
    _write_json_atomically(out / RUN_FILE, run_info)
    summary = summarize(
        results,
        extra={
            "status": status,
            "episodes_requested": episodes,
            "incomplete": None
            if incomplete is None
            else {
                "episodes": len(incomplete.failures),
                "indices": incomplete.missing,
                "reasons": incomplete.reasons(),
                "stop_reason": incomplete.stop_reason,
                "configuration_error": str(incomplete.configuration_error)
                if incomplete.configuration_error
                else None,
                "failures": [f.to_dict() for f in incomplete.failures],
            },
            "seed": seed,
            "split": env_kwargs.get("split"),
            "env_kwargs": {k: v for k, v in env_kwargs.items() if k != "split"},
            "concurrency": concurrency,
            "wall_s": wall,
            "episodes_played_now": played,
            "episodes_resumed": episode_runner.resumed_episodes,
            "episodes_per_s": played / wall if wall > 0 and played else None,
            "agent_calls": episode_runner.stats,
            "infrastructure": {
                "calls": live.calls,
                "failed_calls": live.failed_calls,
                "failed_episodes": live.failed,
                "file_repairs": [str(p) for p in episode_runner.file_problems],
            },
            "fingerprint": run_info["fingerprint"],
            "settings": run_info["settings"],
            "mixed_settings": run_info["mixed_settings"],
            "commands": run_info["commands"],
            **facts,
            **extra_settings,
        },
    )
    _write_json_atomically(out / SUMMARY_FILE, summary)
    if plot and results:
        if plot_available():
            plot_summary(summary, out / PLOT_FILE)
        else:
            log(PLOT_MISSING)
    if incomplete is not None:
        incomplete.summary = summary  # type: ignore[attr-defined]
        raise incomplete
    return summary


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
