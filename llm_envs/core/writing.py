"""Writing out text that agents and models wrote, whatever it holds: JSON that a UTF-8 file can
always hold (every file and key this project writes), terminals that print anything, and fenced
blocks in a prompt that the text cannot close."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

# A Python string may hold a lone surrogate (U+D800-U+DFFF), which UTF-8 cannot encode: text from
# a model API that sent an invalid escape such as "\ud800", or bytes decoded with
# "surrogateescape". ``json.dumps(..., ensure_ascii=False)`` leaves it as it is.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    return "\\u%04x" % ord(match.group())


def json_text(data: Any, **options: Any) -> str:
    """``json.dumps(data, ensure_ascii=False, **options)``, with every lone surrogate written as
    its JSON escape (``\\ud800``), so that the text always encodes as UTF-8.

    A surrogate can only stand inside a JSON string, where the escape is valid JSON that reads
    back (``json.loads``) as the same character: the data round-trips exactly. All other text,
    non-ASCII included, is written as itself.
    """
    text = json.dumps(data, ensure_ascii=False, **options)
    return _LONE_SURROGATE.sub(_escaped, text)


def without_lone_surrogates(data: Any) -> Any:
    """``data`` (strings, and lists, tuples and dicts of them, keys included) with every lone
    surrogate replaced by U+FFFD, for a writer that cannot escape one (pydantic's JSON, which
    ``llm-envs serve`` replies with); everything else as it is."""
    if isinstance(data, str):
        return _LONE_SURROGATE.sub("\ufffd", data) if _LONE_SURROGATE.search(data) else data
    if isinstance(data, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(without_lone_surrogates(v) for v in data)
    return data


# What a terminal acts on instead of printing: C0 controls but tab and newline (ESC starts the
# sequences that clear the screen, move the cursor, set the title or plant a hyperlink), DEL, C1
# controls, and the bidirectional overrides and isolates that reorder what is shown.
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


_BACKTICK_RUN = re.compile(r"`{3,}")


def fenced(text: str, language: str = "") -> str:
    """``text`` in a ```` ``` ```` block of a prompt (````` ```language `````), with every run of
    three or more backticks in it broken up (```` `` ` ````): whatever a program printed or an
    agent wrote, it cannot close the block and write lines at the top level of the prompt that
    read as the environment's own."""
    body = _BACKTICK_RUN.sub(lambda run: " ".join(run.group()[i : i + 2] for i in range(0, len(run.group()), 2)), text)
    return f"```{language}\n{body.rstrip(chr(10))}\n```"


def for_terminal(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character a terminal would act on written as its escape (``\x1b``,
    ``\u202e``): text that a model wrote, printed by ``llm-envs show`` or to a person playing,
    can then neither repaint the reader's screen (hiding or faking lines), set its title nor plant
    a link. Tabs and newlines stay, unless ``one_line``: then they are escaped too (``\n``), for
    text that stands in one line of the program's own, such as a table cell or a name, where a
    line break would start a line that reads as the program's."""
    pattern = _ONE_LINE_CONTROLS if one_line else _TERMINAL_CONTROLS
    return pattern.sub(_terminal_escape, text)


_ONE_LINE_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t"}  # (only one-line text escapes them)


def _terminal_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    return "\\x%02x" % ord(char) if ord(char) < 0x100 else "\\u%04x" % ord(char)


def escape_unencodable_output() -> None:
    """Make this process's stdout and stderr write what their encoding cannot hold as a
    backslash escape (``\\ud800``) instead of raising. The command lines call it first: they
    print text that agents and models wrote (``llm-envs show``), which may hold a lone surrogate
    or characters a terminal's encoding lacks."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # closed, or not a text stream after all
                pass
