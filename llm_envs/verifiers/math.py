"""Math answer checking: the last ``\\boxed{}``, a fast exact path, then ``math-verify``.

:func:`check_answer` decides whether a predicted final answer equals the ground truth:

1. **Fast path** (microseconds, no sympy): both answers are normalised (``$``, ``\\left``,
   ``\\dfrac``, thousands separators, ``\\text{}``, a trailing period, degree and percent signs
   are removed) and compared as strings, then as exact rationals when both read as numbers
   (``42``, ``-3.5``, ``1/2``, ``\\frac{1}{2}``, ``\\frac12``, ``1e3``). Two exact rationals
   (no decimal point) that differ are a definite "no"; so are two numbers more than 1e-4 apart
   relative to the larger (no absolute floor: ``0.0`` is not 6.626e-34).
2. **math-verify** for everything else (expressions, sets, intervals, matrices, ``x = 5``...).
   Its own timeouts use ``signal.alarm``, which raises outside the main thread, so they are
   disabled (``parsing_timeout=None``, ``timeout_seconds=None``) and **we** enforce the time.
   Its rounding to 6 decimals makes every number below 5e-7 equal, so where both answers are
   numbers its "yes" must also hold to 1e-4 relative.
   A thread cannot do that: sympy's big-integer arithmetic (``10^{10^{10}}``) holds the GIL, so
   a waiting thread never even wakes up. The check therefore runs in a small pool of warm worker
   processes (``_math_worker.py``, started on first use, about a second each, memory-limited);
   the caller waits at most ``timeout_s`` for the reply, and on an overrun the worker is killed
   and the answer counts as *incorrect*. Any thread may call :func:`check_answer`.

Predicted answers longer than :data:`MAX_ANSWER_CHARS` are never sent to sympy (a final answer
is short; a page of text is not an answer) and count as incorrect unless the fast path matched.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
from fractions import Fraction

logger = logging.getLogger(__name__)

#: Longest predicted answer that is handed to math-verify.
MAX_ANSWER_CHARS = 1000

#: Two numbers further apart than this, relative to the larger, are different answers (the fast
#: path's "no"; ``_math_worker.py`` holds math-verify's "yes" for two numbers to it too).
RELATIVE_TOLERANCE = Fraction(1, 10_000)

# ---------------------------------------------------------------------------------------------
# \boxed{} extraction

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)")


def extract_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, stripped.

    Braces inside the box are balanced (``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``);
    escaped braces ``\\{`` ``\\}`` do not count. The brace-less form ``\\boxed 5`` gives the
    token after the space. Returns ``None`` when there is no complete box (e.g. an unclosed
    brace) or the box is empty. Linear in the length of ``text``.
    """
    if not isinstance(text, str) or ("\\boxed" not in text and "\\fbox" not in text):
        return None
    closing = _matching_braces(text)
    for match in reversed(list(_BOX_COMMAND.finditer(text))):
        i = match.end()
        while i < len(text) and text[i] in " \t":
            i += 1
        if i >= len(text):
            continue
        if text[i] == "{":
            j = closing.get(i)
            if j is None:
                continue
            content = text[i + 1 : j].strip()
        elif i > match.end():  # "\\boxed 5"; "\\boxedfoo" is another command
            token = re.match(r"[^\s$]+", text[i:])
            content = token.group(0) if token else ""
        else:
            continue
        return content or None
    return None


def _matching_braces(text: str) -> dict[int, int]:
    """Position of each unescaped ``{`` -> position of its matching ``}`` (one pass)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    escaped = False
    for position, char in enumerate(text):
        if escaped:
            escaped = False
            continue
        if char == "\\":
            escaped = True
        elif char == "{":
            stack.append(position)
        elif char == "}" and stack:
            pairs[stack.pop()] = position
    return pairs


# ---------------------------------------------------------------------------------------------
# Fast path

_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_THOUSANDS = re.compile(r"^([+-]?)(\d{1,3}(?:,\d{3})+)(\.\d+)?$")
#: A number standing alone (not a subscript, an argument of ``\\frac1 2``, decimals grouped
#: after the point) followed by a space and a digit: two numbers side by side.
_TWO_NUMBERS = re.compile(r"(?<![A-Za-z_^\d.\\{])\d+(?:\.\d+)? \d")
_SPACED_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:[ \t]\d{3})+(?:\.\d+)?(?!\d)")
_SPACED_DECIMALS = re.compile(r"(?<=\d\.)\d{3}(?:[ \t]\d{1,3})+(?!\d)")  # 3.141 592
# One way to split any digit run (``\d+\.?\d*`` had many, and took quadratic time to refuse a
# long run of digits followed by anything else: 20,000 digits, 21 s with the GIL held).
_DECIMAL = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?$")
_SLASH_FRACTION = re.compile(r"^([+-]?\d+)\s*/\s*([+-]?\d+)$")
_LATEX_FRACTION = re.compile(
    r"^([+-]?)\\frac(?:\{([+-]?\d+)\}\{([+-]?\d+)\}|(\d)(\d))$"
)


def normalize_answer(answer: str) -> str:
    """A canonical spelling of a short answer, for string comparison (not a parser)."""
    text = answer.strip().rstrip(".").strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if (
            len(text) >= len(left) + len(right)
            and text.startswith(left)
            and text.endswith(right)
        ):
            text = text[len(left) : len(text) - len(right)].strip()
    text = _TEXT_COMMAND.sub(r"\1", text)
    for old, new in (
        ("\\left", ""),
        ("\\right", ""),
        ("\\dfrac", "\\frac"),
        ("\\tfrac", "\\frac"),
        # LaTeX spaces are spaces: "1\\,000" still groups thousands below, "5\\,6" is two numbers
        ("\\!", " "),
        ("\\,", " "),
        ("\\;", " "),
        ("\\ ", " "),
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
        text = (
            thousands.group(1)
            + thousands.group(2).replace(",", "")
            + (thousands.group(3) or "")
        )
    # Digits on both sides of a space are two numbers ("5 6" is not 56, "2 3/4" not 23/4),
    # unless the space groups thousands ("1 000 000"): one space is kept between them.
    text = _SPACED_THOUSANDS.sub(lambda m: re.sub(r"\s+", "", m.group(0)), text)
    text = _SPACED_DECIMALS.sub(lambda m: re.sub(r"\s+", "", m.group(0)), text)
    text = re.sub(r"(?<=\d)\s+(?=\d)", " ", text)
    return re.sub(r"(?<!\d)\s+|\s+(?!\d)", "", text)


def parse_number(answer: str) -> tuple[Fraction, bool] | None:
    """``(value, exact)`` if a normalised answer is a plain number, else ``None``.

    ``exact`` is False for decimals and scientific notation (which may be rounded values).
    Exponents beyond ±1000 are not parsed (a huge power would cost time and memory).
    """
    decimal = _DECIMAL.match(answer)
    if decimal:
        exponent = decimal.group(1)
        # (read by its length first: int() refuses more than 4,300 digits with ValueError)
        digits = None if exponent is None else exponent.lstrip("+-").lstrip("0")
        if digits is not None and (len(digits) > 4 or int(digits or "0") > 1000):
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
    if _TWO_NUMBERS.search(pred) and not _TWO_NUMBERS.search(gold):
        return False  # two numbers side by side are not the one the truth is
    pred_number, gold_number = parse_number(pred), parse_number(gold)
    if pred_number is None or gold_number is None:
        return None
    (pred_value, pred_exact), (gold_value, gold_exact) = pred_number, gold_number
    if pred_value == gold_value:
        return True
    if pred_exact and gold_exact:
        return False
    # Relative, with no floor: with a floor of 1, "0.0" was close to 6.626e-34 and math-verify's
    # rounding to 6 decimals then paid it (and 3.2e-19 for 1.6e-19, -3e-7 for 3e-7).
    scale = max(abs(pred_value), abs(gold_value))
    if abs(pred_value - gold_value) > scale * RELATIVE_TOLERANCE:
        return False
    return None  # close decimals: let math-verify apply its rounding rules


# ---------------------------------------------------------------------------------------------
# math-verify in worker processes, with our own deadline


class VerifierUnavailableError(RuntimeError):
    """The math-verify worker process could not be started (a broken installation)."""


class _WorkerDied(Exception):
    pass


_WORKER_SCRIPT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "_math_worker.py"
)
_WORKER_START_TIMEOUT_S = 120.0


class _Worker:
    """One ``_math_worker.py`` process: a request line in, an answer line out."""

    def __init__(self, memory_mb: int) -> None:
        # Kept open for the worker's lifetime (read only if it fails to start); closed in kill().
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        # -I: isolated mode (no PYTHON* variables, no script directory or user site on the path).
        self.process = subprocess.Popen(
            [sys.executable, "-I", _WORKER_SCRIPT, str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            close_fds=True,
        )
        self._buffer = b""
        try:
            ready = self._read_line(time.monotonic() + _WORKER_START_TIMEOUT_S)
        except (_WorkerDied, TimeoutError) as error:
            self.kill()
            self._stderr.seek(0)
            detail = self._stderr.read().decode("utf-8", "replace")[-2000:]
            raise VerifierUnavailableError(
                f"the math-verify worker ({sys.executable} {_WORKER_SCRIPT}) did not start: "
                f"{error!r}; is math-verify installed (pip install math-verify)? {detail}"
            ) from error
        if json.loads(ready) != {"ready": True}:
            self.kill()
            raise VerifierUnavailableError(
                f"unexpected greeting from the math worker: {ready!r}"
            )

    def ask(self, predicted: str, truth: str, deadline: float) -> bool:
        """The worker's verdict; ``TimeoutError`` past ``deadline``, ``_WorkerDied`` on a crash."""
        request = json.dumps({"predicted": predicted, "truth": truth}) + "\n"
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(request.encode("utf-8"))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise _WorkerDied(repr(error)) from error
        reply = json.loads(self._read_line(deadline))
        return bool(reply.get("equal", False))

    def _read_line(self, deadline: float) -> str:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("math-verify check overran its deadline")
            # (at most a minute a wait: a deadline far off, or infinite, is still a deadline)
            readable, _, _ = select.select([fd], [], [], min(remaining, 60.0))
            if not readable:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise _WorkerDied(f"worker exited with status {self.process.poll()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def kill(self) -> None:
        """Stop this worker process (ours: started by :class:`_Worker`) and free its pipes."""
        try:
            self.process.kill()
        except OSError:
            pass
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self._stderr.close()


class _WorkerPool:
    """Up to ``size`` warm workers shared by every thread of this process."""

    def __init__(self, size: int, memory_mb: int) -> None:
        self.size = size
        self.memory_mb = memory_mb
        self.owner_pid = os.getpid()
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self.overruns = 0

    def check(self, predicted: str, truth: str, timeout_s: float) -> bool:
        with self._slots:
            with self._lock:
                worker = self._idle.pop() if self._idle else None
            if worker is None:
                worker = _Worker(
                    self.memory_mb
                )  # start-up time is not billed to the check
            try:
                equal = worker.ask(
                    predicted, truth, time.monotonic() + max(0.0, timeout_s)
                )
            except TimeoutError:
                # Killing the process is the only way to stop sympy mid-computation; the next
                # check starts a fresh worker.
                worker.kill()
                with self._lock:
                    self.overruns += 1
                logger.info(
                    "answer check overran %.1fs: %r vs %r",
                    timeout_s,
                    predicted[:80],
                    truth[:80],
                )
                return False
            except (_WorkerDied, ValueError) as error:
                worker.kill()
                logger.info(
                    "math-verify worker failed (%s) on %r vs %r",
                    error,
                    predicted[:80],
                    truth[:80],
                )
                return False
            except BaseException:
                worker.kill()  # in an unknown state: never back to the idle workers, nor leaked
                raise
            with self._lock:
                self._idle.append(worker)
            return equal

    def close(self) -> None:
        with self._lock:
            workers, self._idle = self._idle, []
        for worker in workers:
            worker.kill()


_pool_lock = threading.Lock()
_pool: _WorkerPool | None = None
_POOL_SIZE = max(1, min(4, os.cpu_count() or 1))
_MEMORY_MB = 2048


def configure_verifier(
    *, workers: int | None = None, memory_mb: int | None = None
) -> None:
    """Set the number of math-verify worker processes and their memory limit (MiB).

    Takes effect for checks started after the call (the current workers are stopped).
    """
    global _pool, _POOL_SIZE, _MEMORY_MB
    with _pool_lock:
        if workers is not None:
            if workers < 1:
                raise ValueError("workers must be >= 1")
            _POOL_SIZE = int(workers)
        if memory_mb is not None:
            _MEMORY_MB = int(memory_mb)
        old, _pool = _pool, None
    if old is not None and old.owner_pid == os.getpid():
        old.close()


def _get_pool() -> _WorkerPool:
    global _pool
    with _pool_lock:
        # After a fork the child must not share the parent's pipes: it gets its own workers.
        if _pool is None or _pool.owner_pid != os.getpid():
            _pool = _WorkerPool(_POOL_SIZE, _MEMORY_MB)
        return _pool


def overrun_count() -> int:
    """How many answer checks of this process overran their deadline (and were killed)."""
    return _pool.overruns if _pool is not None and _pool.owner_pid == os.getpid() else 0


@atexit.register
def _close_pool() -> None:
    if _pool is not None and _pool.owner_pid == os.getpid():
        _pool.close()


def check_answer(predicted: str, truth: str, timeout_s: float = 5.0) -> bool:
    """Whether ``predicted`` is the same final answer as ``truth``.

    Args:
        predicted: A short answer expression (``"42"``, ``"\\frac{1}{2}"``, ``"x = 3"``). If it
            contains a ``\\boxed{}``, the last box is used, so a whole solution text works too.
        truth: The ground-truth answer expression.
        timeout_s: Wall-clock budget of the math-verify step; an overrun counts as incorrect.

    Never raises because of the answers' content, and is safe to call from any thread. The only
    error is :class:`VerifierUnavailableError` when the worker process cannot start at all.
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
    return _get_pool().check(predicted, truth, timeout_s)
