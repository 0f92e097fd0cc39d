"""Read saved episodes back as transcripts (``llm-envs show``).

An evaluation run (``llm-envs eval``, ``llm-envs demo``) writes one JSON object per finished
episode to ``episodes.jsonl``. :func:`load_episodes` reads them from a run directory (searched
recursively, so a whole ``runs/demo`` works) or from the file itself; :func:`select_episodes`
filters them; :func:`episode_transcript` renders one exactly as
:meth:`llm_envs.core.TextEnv.transcript` renders a live episode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from llm_envs.core.records import format_transcript
from llm_envs.episodes import EpisodeResult
from llm_envs.episodes import load_episodes as _load_episode_file
from llm_envs.evaluation.evaluate import EPISODES_FILE


class TranscriptError(ValueError):
    """A path that holds no saved episodes."""


#: Where ``llm-train`` writes the transcripts of its periodic evaluations.
TRAINING_EVAL_FILES = "eval/step_*.jsonl"


def episode_files(path: str | Path) -> list[Path]:
    """The saved-episode files under ``path``, sorted.

    ``path`` is a file of episodes, an evaluation run directory (every ``episodes.jsonl`` below
    it), or a training run directory (its evaluations, ``eval/step_*.jsonl``).
    """
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.exists():
        raise TranscriptError(f"{path} does not exist")
    files = sorted(path.rglob(EPISODES_FILE)) or sorted(path.glob(TRAINING_EVAL_FILES))
    if not files and path.name == "eval":
        files = sorted(path.glob("step_*.jsonl"))
    if not files:
        raise TranscriptError(
            f"no {EPISODES_FILE} under {path} and no {TRAINING_EVAL_FILES}: is it an "
            "`llm-envs eval` or `llm-train` output directory?"
        )
    return files


def load_episodes(path: str | Path, *, problems: list[Any] | None = None) -> list[EpisodeResult]:
    """Every episode saved under ``path``, file by file (a torn last line is skipped).

    A corrupt or duplicate line raises :class:`~llm_envs.episodes.EpisodeFileError`, unless
    ``problems`` (a list) is given: the line is then skipped and its problem appended there,
    prefixed with the file it is in.
    """
    episodes: list[EpisodeResult] = []
    for file in episode_files(path):
        found: list[Any] | None = [] if problems is not None else None
        episodes += _load_episode_file(file, problems=found)
        if problems is not None and found:
            problems.extend(f"{file}: {problem}" for problem in found)
    return episodes


def select_episodes(
    episodes: Iterable[EpisodeResult],
    *,
    indices: Sequence[int] | None = None,
    outcome: str | None = None,
    agent: str | None = None,
) -> list[EpisodeResult]:
    """Filter episodes.

    Args:
        indices: keep episodes whose ``index`` (position in the run) is listed.
        outcome: ``"failed"`` (success < 1) or ``"succeeded"`` (success == 1).
        agent: keep episodes this agent played, with only its actions (the others are dropped).
    """
    if outcome not in (None, "failed", "succeeded"):
        raise ValueError(f"outcome must be 'failed' or 'succeeded', not {outcome!r}")
    chosen: list[EpisodeResult] = []
    seen_agents: set[str] = set()
    for episode in episodes:
        if indices is not None and episode.index not in indices:
            continue
        if outcome == "failed" and episode.success >= 1.0:
            continue
        if outcome == "succeeded" and episode.success < 1.0:
            continue
        if agent is not None:
            seen_agents.update(episode.agents)
            if agent not in episode.agents:
                continue  # a run directory may hold several environments
            episode = dataclasses.replace(
                episode, records=[r for r in episode.records if r.get("agent") == agent]
            )
        chosen.append(episode)
    if agent is not None and seen_agents and agent not in seen_agents:
        raise ValueError(f"no agent {agent!r} in these episodes; agents: {', '.join(sorted(seen_agents))}")
    return chosen


def episode_transcript(episode: EpisodeResult, *, prompts: bool = False) -> str:
    """One saved episode as text: who played, every action with its reward, the metrics.

    An action whose agent call failed (the HTTP error, the timeout, ...) says so in place of the
    empty action text the environment received.
    """
    errors = {
        step.get("record_index"): step["error"] for step in episode.steps if step.get("error")
    }
    records = [
        {**r, "action": f"<agent call failed: {errors[r.get('index')]}>"}
        if r.get("index") in errors and not str(r.get("action", "")).strip()
        else r
        for r in episode.records
    ]
    players = ", ".join(f"{a}={name}" for a, name in episode.agents.items())
    rewards = ", ".join(f"{a}={float(r):+.3f}" for a, r in episode.rewards.items())
    return format_transcript(
        f"{episode.env_id} | episode {episode.episode_id} (#{episode.index}, seed {episode.seed})",
        records,
        description=f"played by: {players}\ntotal rewards: {rewards}",
        metrics=episode.metrics,
        prompts=prompts,
    )
