"""Per-action records: what every step of a text environment leaves behind for trainers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ActionRecord:
    """One agent's action and everything it earned, including credit that arrived later.

    Attributes:
        index: Position of this record in the episode (0-based, in order of play).
        episode_id: Identifier of the episode (stable across clones of the same episode).
        agent: The PettingZoo agent id that acted.
        role: The role the agent played at this step (e.g. ``"tool"``, ``"solver"``).
        turn: The environment's turn counter when the action was taken.
        observation: The observation the agent acted on (``{"instruction", "prompt"}``).
        action: The raw action text, exactly as received.
        parsed: What the environment extracted from the action (moves, score, answer, ...).
        format_ok: Whether the action followed the required output format.
        reward_components: Named parts of the reward (e.g. ``{"team": 1.0, "local": 0.3}``).
        reward: Total reward credited to this action so far (the sum of the components).
        final: True once no more credit can arrive for this action.
        group_key: The AT-GRPO group key ``(episode_id, agent, turn)``: actions sampled from the
            same observation share it.
        info: Small extra facts for metrics and debugging (never used as reward).
        credits: Every credit in order of arrival, as ``(component, amount, at)``: ``at`` is the
            index of the record whose step produced it (this record's own index for an
            immediate reward, a later one for delayed credit). Records saved before this field
            existed read back without it.
    """

    index: int
    episode_id: str
    agent: str
    role: str
    turn: int
    observation: dict[str, str]
    action: str
    parsed: dict[str, Any] = field(default_factory=dict)
    format_ok: bool = True
    reward_components: dict[str, float] = field(default_factory=dict)
    reward: float = 0.0
    final: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    credits: list[tuple[str, float, int]] = field(default_factory=list)

    @property
    def group_key(self) -> tuple[str, str, int]:
        return (self.episode_id, self.agent, self.turn)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view (parsed values that are not JSON types become strings)."""
        data = asdict(self)
        data["group_key"] = list(self.group_key)
        data["parsed"] = _jsonable(data["parsed"])
        data["info"] = _jsonable(data["info"])
        data["credits"] = [{"component": c, "amount": a, "at": at} for c, a, at in self.credits]
        return data


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):  # numpy scalars
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    return repr(value)


def format_transcript(
    title: str,
    records: Iterable[ActionRecord | Mapping[str, Any]],
    *,
    description: str | None = None,
    metrics: Mapping[str, Any] | None = None,
    prompts: bool = False,
) -> str:
    """An episode as readable text: a title, the task, every action with its reward, the metrics.

    What an agent wrote (and the prompt it saw) is indented under its turn's line, every line of
    it: a reply cannot start a line the way the transcript's own lines start (``===``, ``---``),
    so it cannot fake an episode's end, its rewards or another episode.

    ``records`` are :class:`ActionRecord` objects (a live environment) or their
    :meth:`~ActionRecord.to_dict` form (an ``episodes.jsonl`` line), so a transcript read back
    from disk looks exactly like one printed during play. With ``prompts=True`` each action is
    preceded by the prompt its agent saw. ``metrics`` (when given) closes the transcript.
    """
    lines = [f"=== {title} ==="]
    if description:
        lines.append(description)
    for record in records:
        r = record.to_dict() if isinstance(record, ActionRecord) else record
        components = r.get("reward_components") or {}
        parts = ", ".join(f"{k}={float(v):+.3f}" for k, v in components.items())
        flag = "" if r.get("format_ok", True) else "  [format error]"
        lines.append(
            f"--- turn {r.get('turn')} | {r.get('agent')} ({r.get('role')}) | "
            f"reward {float(r.get('reward', 0.0)):+.3f}{' (' + parts + ')' if parts else ''}{flag}"
        )
        if prompts:
            observation = r.get("observation") or {}
            lines.append(">>> prompt")
            lines.append(_quoted(str(observation.get("prompt", ""))))
            lines.append("<<< action")
        action = str(r.get("action", ""))
        lines.append(_quoted(action) if action.strip() else "<empty action>")
    if metrics is not None:
        shown = ", ".join(f"{k}={v}" for k, v in metrics.items())
        lines.append(f"=== episode over: {shown} ===")
    return "\n".join(lines)


#: The indent of the text agents wrote (and their prompts) in a transcript.
QUOTE_INDENT = "    "


def _quoted(text: str) -> str:
    return "\n".join(QUOTE_INDENT + line if line else line for line in text.split("\n"))
