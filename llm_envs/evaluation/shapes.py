"""Shapes of the JSON files runs write, and reading a file as its shape: a field a hand edit gave
another shape (``"rewards": {"a": null}``, ``"episodes": "many"``) reads as absent and is named,
so every reader of a run (the report, ``llm-envs eval --compare``) shows what it can instead of
failing (docs/report.md, "Tolerant reading")."""

from __future__ import annotations

from typing import Any

# What the report reads from a run's JSON, as shapes: "any"; "scalar" (text, number, true/false);
# "int"; "number"; a dict (a mapping; the keys it names have these shapes, others are kept as
# they are); ("map", shape) (a mapping whose every value has that shape); ("list", shape).
# null is "not given" everywhere. docs/report.md ("Tolerant reading").
Shape = Any
_INTERVAL: Shape = {"value": "number", "low": "number", "high": "number", "n": "number", "errors": "number",
                    "effective_n": "number"}
_COMMAND: Shape = {"command": "scalar", "status": "scalar", "calls": "int", "failed_calls": "int",
                   "settings_changed": ("list", "any")}
EVAL_SUMMARY: Shape = {
    "env_id": "scalar", "episodes": "int", "episodes_requested": "int", "episodes_resumed": "int",
    "status": "scalar", "seed": "scalar", "split": "scalar", "confidence": "number", "wall_s": "number",
    "episodes_per_s": "number", "command": "scalar",
    "agents": ("map", "scalar"), "success": _INTERVAL, "turns": _INTERVAL,
    "rewards": ("map", _INTERVAL), "format_error_rate": ("map", _INTERVAL),
    "call_error_rate": ("map", _INTERVAL), "metrics": ("map", _INTERVAL),
    "tokens_per_episode": {"prompt": _INTERVAL, "completion": _INTERVAL, "total": _INTERVAL,
                           "by_agent": ("map", _INTERVAL)},
    "incomplete": {"episodes": "scalar", "reasons": "any"},
    "infrastructure": {"calls": "int", "failed_calls": "int"},
    "commands": ("list", _COMMAND),
}
ARENA_SUMMARY: Shape = {
    "env_id": "scalar", "agents": ("map", "any"), "settings": "any",
    "ratings": ("list", {"agent": "scalar"}),
    "head_to_head": ("map", ("map", {})),
}
# An arena game's episode (games.jsonl has no checksum to refuse an edited one by, as
# episodes.jsonl has): what the report reads of it.
_EPISODE: Shape = {
    "index": "int", "seed": "int", "env_id": "scalar", "episode_id": "scalar", "agents": ("map", "scalar"),
    "rewards": ("map", "number"), "metrics": {"success": "number", "turns": "number"}, "duration_s": "number",
    "records": ("list", {"agent": "scalar", "info": {}}),
    "steps": ("list", {"agent": "scalar", "prompt_tokens": "int", "completion_tokens": "int"}),
}
ARENA_GAME: Shape = {"game_index": "int", "seed": "int", "seats": ("map", "scalar"), "returns": ("map", "any"),
                     "winner": "scalar", "episode": _EPISODE}
TRAINING_CONFIG: Shape = {"run": {}, "env": {}}
_SCALARS = (str, int, float, bool)
_WRONG = object()


def conform(data: Any, shape: Shape, where: str, ignored: list[str]) -> Any:
    """``data`` read as ``shape`` (see the shapes above): a value of another shape is left out
    (a mapping's key dropped, a list's item dropped; at the top, or as a mapping's value, the
    shape's empty value: ``{}``, ``[]`` or None) and named in ``ignored``, as ``where.key (what
    it was)``. A null is the shape's empty value, without a word (a null int or number: its key
    dropped)."""
    value = _conform(data, shape, where, ignored)
    return _empty(shape) if value is _WRONG else value


def _conform(value: Any, shape: Shape, where: str, ignored: list[str]) -> Any:
    if value is None:
        return _empty(shape)
    if shape == "any":
        return value
    if isinstance(shape, str):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        fits = {"scalar": isinstance(value, _SCALARS), "number": number,
                "int": number and isinstance(value, int)}[shape]
        return value if fits else _ignore(value, where, ignored)
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return _ignore(value, where, ignored)
        out = dict(value)
        for key, inner in shape.items():
            if key in out:
                checked = _conform(out[key], inner, f"{where}.{key}", ignored)
                # (a null number is dropped too: readers take a missing key's default, not None)
                if checked is _WRONG or (checked is None and inner in ("int", "number")):
                    del out[key]
                else:
                    out[key] = checked
        return out
    kind, inner = shape
    if kind == "map":
        if not isinstance(value, dict):
            return _ignore(value, where, ignored)
        out = {}
        for key, item in value.items():
            checked = _conform(item, inner, f"{where}.{key}", ignored)
            out[key] = _empty(inner) if checked is _WRONG else checked
        return out
    if not isinstance(value, list):
        return _ignore(value, where, ignored)
    items = (_conform(item, inner, f"{where}[{i}]", ignored) for i, item in enumerate(value))
    return [item for item in items if item is not _WRONG]


def _empty(shape: Shape) -> Any:
    if isinstance(shape, dict) or (isinstance(shape, tuple) and shape[0] == "map"):
        return {}
    if isinstance(shape, tuple):
        return []
    return None


def _ignore(value: Any, where: str, ignored: list[str]) -> Any:
    what = (f"a {type(value).__name__}" if isinstance(value, (dict, list)) else
            repr(value) if len(repr(value)) <= 40 else f"a {type(value).__name__}")
    ignored.append(f"{where} ({what})")
    return _WRONG
