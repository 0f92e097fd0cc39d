"""Episodes as the page's script reads them: one light row per episode, the rest packed.

A *dataset* is what one episode list on the page shows (an evaluation run, one evaluation step of
a training run, the games of an arena). Its ``rows`` carry what the list and its filters need;
the whole episode of row ``i`` (records with prompts, parsed answers, sandbox output, reward
components and the credit log; per-decision tokens and call errors) is
``packed[row["c"]][row["k"]]``: packed chunks of consecutive episodes, unpacked by the browser
when one of their episodes is opened or searched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_envs.episodes import EpisodeResult
from llm_envs.report.page import pack, to_json

__all__ = ["EVAL_FILTERS", "dataset", "episode_row"]

#: Outcome filters of an evaluation list: (tag, label).
EVAL_FILTERS = (
    ("succeeded", "succeeded"),
    ("failed", "failed"),
    ("format-error", "with a format error"),
    ("call-error", "with a failed model call"),
)

# Episodes are packed in chunks of consecutive rows: one gzip stream per episode made the first
# search over 1,000 episodes take 1.7 s in Chromium (a fixed cost per stream); chunks of ~256 kB
# cut that tenfold and compress better, and opening one episode still unpacks only its chunk.
CHUNK_BYTES = 256 * 1024
CHUNK_EPISODES = 64

# Per-decision fields that only a trainer needs and that would weigh down the page.
_HEAVY_STEP_FIELDS = ("token_ids", "logprobs", "prompt_ids", "completion_ids")


def episode_row(episode: EpisodeResult) -> dict[str, Any]:
    """The list row of an episode: numbers for the columns and tags for the filters."""
    format_errors: dict[str, int] = {}
    for record in episode.records:
        if not record.get("format_ok", True):
            agent = str(record.get("agent"))
            format_errors[agent] = format_errors.get(agent, 0) + 1
    call_errors: dict[str, int] = {}
    for step in episode.steps:
        if step.get("error"):
            agent = str(step.get("agent"))
            call_errors[agent] = call_errors.get(agent, 0) + 1
    prompt, completion = episode.tokens()
    success = episode.success
    tags = ["succeeded" if success >= 1.0 else "failed"]
    if format_errors:
        tags.append("format-error")
    if call_errors:
        tags.append("call-error")
    acted = list(dict.fromkeys([str(r.get("agent")) for r in episode.records] + list(episode.agents)))
    return {
        "i": episode.index,
        "seed": episode.seed,
        "id": episode.episode_id,
        "env": episode.env_id,
        "s": success,
        "t": episode.turns,
        "r": {str(a): float(v) for a, v in episode.rewards.items()},
        "fe": format_errors,
        "ce": call_errors,
        "tok": prompt + completion,
        "n": len(episode.actions()),
        "dur": round(float(episode.duration_s), 3),
        "ag": acted,
        "tags": tags,
    }


def _detail(episode: EpisodeResult, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    records = []
    for record in episode.records:
        record = dict(record)
        record.pop("group_key", None)  # (episode_id, agent, turn): all three are already there
        record.pop("episode_id", None)
        records.append(record)
    steps = [{k: v for k, v in step.items() if k not in _HEAVY_STEP_FIELDS} for step in episode.steps]
    return {
        "env": episode.env_id,
        "id": episode.episode_id,
        "index": episode.index,
        "seed": episode.seed,
        "agents": episode.agents,
        "rewards": episode.rewards,
        "metrics": episode.metrics,
        "duration_s": episode.duration_s,
        "records": records,
        "steps": steps,
        **dict(extra or {}),
    }


def dataset(
    episodes: Sequence[EpisodeResult],
    *,
    label: str,
    agents: Sequence[str] | None = None,
    filters: Sequence[tuple[str, str]] = EVAL_FILTERS,
    rows: Sequence[dict[str, Any]] | None = None,
    columns: Sequence[str] = (),
    reward_label: str = "reward",
    noun: str = "episodes",
    extras: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The dataset of ``episodes`` (see the module docstring).

    Args:
        label: What the list is (shown above it).
        agents: The names the agent filter and the reward columns use (default: the agents of
            the episodes, in order of appearance).
        filters: ``(tag, label)`` outcome filters; a row shows under a filter when it has the tag.
        rows: Rows built by the caller (default :func:`episode_row` of each episode); a row may
            carry ``x``, the values of the extra ``columns``.
        reward_label: What the reward columns hold (``reward``, ``return``).
        noun: What the rows are (``episodes``, ``games``).
        extras: Per episode, more facts to pack with it (an arena game's seats and winner).
    """
    if agents is None:
        agents = list(dict.fromkeys(a for e in episodes for a in list(e.agents) + list(e.rewards)))
    built = [dict(r) for r in rows] if rows is not None else [episode_row(e) for e in episodes]
    chunks: list[list[str]] = [[]]  # each episode's JSON, encoded once
    size = 0
    for i, episode in enumerate(episodes):
        text = to_json(_detail(episode, extras[i] if extras else None))
        if chunks[-1] and (size + len(text) > CHUNK_BYTES or len(chunks[-1]) >= CHUNK_EPISODES):
            chunks.append([])
            size = 0
        built[i]["c"], built[i]["k"] = len(chunks) - 1, len(chunks[-1])
        chunks[-1].append(text)
        size += len(text)
    return {
        "label": label,
        "agents": list(agents),
        "filters": [list(f) for f in filters],
        "columns": list(columns),
        "rewardLabel": reward_label,
        "noun": noun,
        "rows": built,
        "packed": [pack(text="[" + ",".join(chunk) + "]") for chunk in chunks if chunk],
    }


def episodes_html(key: str, note: str = "") -> str:
    """The placeholder the script fills with the list of dataset ``key``."""
    from llm_envs.report.page import esc

    note_html = f'<p class="note">{esc(note)}</p>' if note else ""
    return f'{note_html}<div class="episodes" data-dataset="{esc(key)}"></div>'
