"""A worker process that answers math-verify equality questions over a pipe.

Run as a script (``python _math_worker.py``), never imported by the parent: it depends on
nothing of ours, so the parent's ``__main__`` is never re-executed (unlike ``multiprocessing``'s
spawn) and start-up costs only the imports of ``math_verify`` and sympy.

Protocol: one JSON object per line on stdin, ``{"predicted": str, "truth": str}``; one JSON
object per line on stdout, ``{"equal": bool}`` (``false`` on any error). The first line the
worker writes is ``{"ready": true}``. EOF on stdin ends the worker. The parent kills the worker
when an answer overruns its deadline, so nothing here needs a timeout: math-verify's own
signal-based timeouts are disabled (``parsing_timeout=None``, ``timeout_seconds=None``).
"""

from __future__ import annotations

import json
import logging
import sys


def _limit_memory(megabytes: int) -> None:
    # A "number" like 10^(10^10) would otherwise eat the machine before the deadline fires.
    try:
        import resource

        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def _equal(predicted: str, truth: str) -> bool:
    from math_verify import parse, verify

    def parse_answer(text: str) -> list:
        # Inside a box math-verify reads the whole answer instead of hunting for the last number
        # in free text. When that yields no sympy object, free-text extraction gets a chance
        # ("The answer is 42").
        boxed = text if "\\boxed" in text else "\\boxed{" + text + "}"
        parsed = parse(boxed, parsing_timeout=None)
        if any(not isinstance(item, str) for item in parsed):
            return parsed
        free = parse(text, parsing_timeout=None)
        return free or parsed

    gold = parse_answer(truth)
    pred = parse_answer(predicted)
    if not gold or not pred:
        return False
    if not verify(gold, pred, timeout_seconds=None):
        return False
    # verify() rounds to 6 decimals, so every number below 5e-7 equals every other (0.0 was
    # paid for 6.626e-34, -3e-7 for 3e-7): two numbers must also agree relatively.
    gold_value, pred_value = _real_number(gold), _real_number(pred)
    if gold_value is not None and pred_value is not None:
        return abs(gold_value - pred_value) <= RELATIVE_TOLERANCE * max(abs(gold_value), abs(pred_value))
    return True


#: As ``llm_envs.verifiers.math.RELATIVE_TOLERANCE`` (this script imports nothing of ours).
RELATIVE_TOLERANCE = 1e-4


def _real_number(parsed: list) -> float | None:
    """The value of math-verify's first parsed object when it is a real number, else None."""
    import sympy

    for item in parsed:
        if isinstance(item, str):
            continue
        try:
            if isinstance(item, sympy.Basic) and item.is_number and item.is_real:
                return float(item.evalf(30))
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            return None
        return None
    return None


def main() -> None:
    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    _limit_memory(memory_mb)
    logging.disable(
        logging.WARNING
    )  # math-verify warns that its (signal) timeouts are off
    import math_verify  # noqa: F401  (import before "ready", so start-up is not billed to a check)

    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            equal = _equal(str(request["predicted"]), str(request["truth"]))
        except BaseException:  # noqa: BLE001 - MemoryError, RecursionError, sympy errors: "no"
            equal = False
        out.write('{"equal": true}\n' if equal else '{"equal": false}\n')
        out.flush()


if __name__ == "__main__":
    main()
