"""`parse_python`: ``ast.parse`` made safe to call from many threads at once."""

from __future__ import annotations

import ast
import threading

# CPython 3.11 can raise a spurious "SystemError: AST constructor recursion depth mismatch" from
# `ast.parse` when threads parse concurrently (python/cpython#106905). Environments grade from many
# threads, so every parse in this project goes through `parse_python`: one at a time, and retried
# once if it happens anyway (a third-party library may be parsing without the lock).
_AST_LOCK = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)``, safe to call from many threads at once (see the comment above).

    Raises what ``ast.parse`` raises for text that is not a program (``SyntaxError``,
    ``ValueError``, ``RecursionError``, ``MemoryError``).
    """
    with _AST_LOCK:
        try:
            return ast.parse(source)
        except SystemError:
            return ast.parse(source)
