"""Math answer checking: the last ``\\boxed{}``, a fast exact path, then ``math-verify``.

:func:`check_answer` decides whether a predicted final answer equals the ground truth:

1. **Fast path** (microseconds, no sympy): both answers are normalised (``$``, ``\\left``,
   ``\\dfrac``, thousands separators, ``\\text{}``, a trailing period, degree and percent signs
   are removed) and compared as strings, then as exact rationals when both read as numbers
   (``42``, ``-3.5``, ``1/2``, ``\\frac{1}{2}``, ``\\frac12``, ``1e3``). Two exact rationals
   (no decimal point) that differ are a definite "no"; so are two numbers more than 1e-4 apart
   relative to their size.
2. **math-verify** for everything else (expressions, sets, intervals, matrices, ``x = 5``...).
   Its own timeouts use ``signal.alarm``, which raises outside the main thread, so they are
   disabled (``parsing_timeout=None``, ``timeout_seconds=None``) and **we** enforce the time:
   the check runs in a daemon worker thread and the caller waits at most ``timeout_s``. An
   overrun counts as *incorrect*. A Python thread cannot be killed, so an overrunning thread
   keeps running until sympy returns; :func:`stuck_checks` reports how many, and when
   :data:`MAX_STUCK_CHECKS` of them are still running new slow-path checks are refused (answer
   incorrect, with a logged warning) instead of piling more threads onto the CPU.

Predicted answers longer than :data:`MAX_ANSWER_CHARS` are never sent to sympy (a final answer
is short; a page of text is not an answer) and count as incorrect unless the fast path matched.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

#: Longest predicted answer that is handed to math-verify.
MAX_ANSWER_CHARS = 1000
#: Overrunning checks still running after which new slow-path checks are refused.
MAX_STUCK_CHECKS = 8

_T = TypeVar("_T")
_stuck_lock = threading.Lock()
_stuck_count = 0

# ---------------------------------------------------------------------------------------------
# \boxed{} extraction

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)")


def extract_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, stripped.

    Braces inside the box are balanced (``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``). The
    brace-less form ``\\boxed 5`` gives the token after the space. Returns ``None`` when there is
    no complete box (e.g. an unclosed brace), and also for an empty box.
    """
    if not isinstance(text, str):
        return None
    for match in reversed(list(_BOX_COMMAND.finditer(text))):
        content = _box_content(text, match.end())
        if content is not None:
            content = content.strip()
            return content or None
    return None


def _box_content(text: str, start: int) -> str | None:
    i = start
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text):
        return None
    if text[i] != "{":
        if i == start:  # "\boxedfoo" is another command, not a box
            return None
        token = re.match(r"[^\s$]+", text[i:])
        return token.group(0) if token else None
    depth = 0
    for j in range(i, len(text)):
        char = text[j]
        if char == "\\" and j + 1 < len(text) and text[j + 1] in "{}":
            continue
        if char == "{" and not (j > 0 and text[j - 1] == "\\"):
            depth += 1
        elif char == "}" and not (j > 0 and text[j - 1] == "\\"):
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


# ---------------------------------------------------------------------------------------------
# Fast path

_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_THOUSANDS = re.compile(r"^([+-]?)(\d{1,3}(?:,\d{3})+)(\.\d+)?$")
_DECIMAL = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?$")
_SLASH_FRACTION = re.compile(r"^([+-]?\d+)\s*/\s*([+-]?\d+)$")
_LATEX_FRACTION = re.compile(r"^([+-]?)\\frac(?:\{([+-]?\d+)\}\{([+-]?\d+)\}|(\d)(\d))$")


def normalize_answer(answer: str) -> str:
    """A canonical spelling of a short answer, for string comparison (not a parser)."""
    text = answer.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if len(text) >= len(left) + len(right) and text.startswith(left) and text.endswith(right):
            text = text[len(left) : len(text) - len(right)].strip()
    text = _TEXT_COMMAND.sub(r"\1", text)
    for old, new in (
        ("\\left", ""),
        ("\\right", ""),
        ("\\dfrac", "\\frac"),
        ("\\tfrac", "\\frac"),
        ("\\!", ""),
        ("\\,", ""),
        ("\\;", ""),
        ("\\ ", ""),
        ("^\\circ", ""),
        ("^{\\circ}", ""),
        ("°", ""),
        ("\\%", ""),
        ("%", ""),
        ("\\$", ""),
    ):
        text = text.replace(old, new)
    text = text.strip()
    while text.endswith("."):
        text = text[:-1].rstrip()
    thousands = _THOUSANDS.match(text)
    if thousands:
        text = thousands.group(1) + thousands.group(2).replace(",", "") + (thousands.group(3) or "")
    return re.sub(r"\s+", "", text)


def parse_number(answer: str) -> tuple[Fraction, bool] | None:
    """``(value, exact)`` if a normalised answer is a plain number, else ``None``.

    ``exact`` is False for decimals and scientific notation (which may be rounded values).
    Exponents beyond ±1000 are not parsed (a huge power would cost time and memory).
    """
    decimal = _DECIMAL.match(answer)
    if decimal:
        exponent = decimal.group(1)
        if exponent is not None and abs(int(exponent)) > 1000:
            return None
        try:
            value = Fraction(answer)
        except (ValueError, ZeroDivisionError):
            return None
        return value, ("." not in answer and exponent is None)
    slash = _SLASH_FRACTION.match(answer)
    latex = _LATEX_FRACTION.match(answer) if slash is None else None
    if slash:
        numerator, denominator = slash.group(1), slash.group(2)
        sign = ""
    elif latex:
        sign = latex.group(1)
        numerator = latex.group(2) or latex.group(4)
        denominator = latex.group(3) or latex.group(5)
    else:
        return None
    try:
        value = Fraction(int(numerator), int(denominator))
    except (ValueError, ZeroDivisionError):
        return None
    return (-value if sign == "-" else value), True


def _fast_check(predicted: str, truth: str) -> bool | None:
    """True or False when the cheap comparison is conclusive, None when sympy must decide."""
    pred, gold = normalize_answer(predicted), normalize_answer(truth)
    if not pred:
        return False
    if pred == gold:
        return True
    pred_number, gold_number = parse_number(pred), parse_number(gold)
    if pred_number is None or gold_number is None:
        return None
    (pred_value, pred_exact), (gold_value, gold_exact) = pred_number, gold_number
    if pred_value == gold_value:
        return True
    if pred_exact and gold_exact:
        return False
    scale = max(abs(pred_value), abs(gold_value), Fraction(1))
    if abs(pred_value - gold_value) / scale > Fraction(1, 10_000):
        return False
    return None  # close decimals: let math-verify apply its rounding rules


# ---------------------------------------------------------------------------------------------
# math-verify with our own deadline


class _DropTimeoutWarning(logging.Filter):
    """math-verify warns that its timeouts are off; ours are on, so the warning misleads."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader", "math_verify"):
    logging.getLogger(_name).addFilter(_DropTimeoutWarning())


def _math_verify_equal(predicted: str, truth: str) -> bool:
    from math_verify import parse, verify

    def parse_answer(text: str) -> list[Any]:
        # Inside a box, math-verify reads the whole answer instead of hunting for the last
        # number in free text; fall back to its free-text extraction if the box gives nothing.
        boxed = text if extract_boxed(text) is not None else "\\boxed{" + text + "}"
        parsed = parse(boxed, parsing_timeout=None)
        return parsed if parsed else parse(text, parsing_timeout=None)

    gold = parse_answer(truth)
    pred = parse_answer(predicted)
    if not gold or not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=None))


def run_with_deadline(fn: Callable[[], _T], timeout_s: float) -> tuple[bool, _T | None]:
    """Run ``fn`` in a daemon thread; ``(finished, result)`` after at most ``timeout_s``.

    Exceptions raised by ``fn`` propagate. An overrunning call keeps running in the background
    (threads cannot be killed) and is counted by :func:`stuck_checks` until it returns.
    """
    global _stuck_count
    outcome: dict[str, Any] = {}
    finished = threading.Event()
    state = {"abandoned": False}
    state_lock = threading.Lock()

    def target() -> None:
        global _stuck_count
        try:
            outcome["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = error
        finally:
            with state_lock:
                finished.set()
                abandoned = state["abandoned"]
            if abandoned:
                with _stuck_lock:
                    _stuck_count -= 1

    worker = threading.Thread(target=target, name="math-verify-check", daemon=True)
    worker.start()
    finished.wait(max(0.0, float(timeout_s)))
    with state_lock:
        if not finished.is_set():
            state["abandoned"] = True
            with _stuck_lock:
                _stuck_count += 1
            return False, None
    if "error" in outcome:
        raise outcome["error"]
    return True, outcome.get("value")


def stuck_checks() -> int:
    """How many overrunning answer checks are still running in background threads."""
    with _stuck_lock:
        return _stuck_count


def check_answer(predicted: str, truth: str, timeout_s: float = 5.0) -> bool:
    """Whether ``predicted`` is the same final answer as ``truth``.

    Args:
        predicted: A short answer expression (``"42"``, ``"\\frac{1}{2}"``, ``"x = 3"``). If it
            contains a ``\\boxed{}``, the last box is used, so a whole solution text works too.
        truth: The ground-truth answer expression.
        timeout_s: Wall-clock budget for the math-verify step; an overrun is "incorrect".

    Never raises for any input strings, and is safe to call from any thread.
    """
    if not isinstance(predicted, str) or not isinstance(truth, str):
        return False
    boxed = extract_boxed(predicted)
    if boxed is not None:
        predicted = boxed
    fast = _fast_check(predicted, truth)
    if fast is not None:
        return fast
    if len(predicted) > MAX_ANSWER_CHARS:
        return False
    if stuck_checks() >= MAX_STUCK_CHECKS:
        logger.warning(
            "%d answer checks overran their deadline and are still running; "
            "treating this answer as incorrect without checking it",
            stuck_checks(),
        )
        return False
    try:
        finished, equal = run_with_deadline(lambda: _math_verify_equal(predicted, truth), timeout_s)
    except Exception:  # noqa: BLE001 - any failure inside sympy is "not verified"
        logger.debug("math-verify failed on %r vs %r", predicted, truth, exc_info=True)
        return False
    if not finished:
        logger.info("answer check overran %.1fs: %r vs %r", timeout_s, predicted[:80], truth[:80])
        return False
    return bool(equal)
