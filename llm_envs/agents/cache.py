"""An opt-in cache of model responses, so that a rerun or a resumed run never pays twice.

The key of a response is everything that determines it: the server (base URL), the model, the
chat messages, every sampling field of the request body (temperature, top_p, max_tokens, stop,
the sampling seed, ``extra_body``...), and the decision's identity in the run (the episode's seed
and the decision's position in the episode). The last part matters when sampling is random: two
episodes that happen to show the same prompt must still get two independent samples, while the
same decision of the same episode, played again by a rerun or a ``--resume``, gets its recorded
answer back. Only successful responses are stored.

The cache is one SQLite file (standard library; safe for several processes), one row per
response: ``key`` (SHA-256 of the canonical JSON of the key parts) and the response as JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from llm_envs.core.writing import json_text

__all__ = ["ResponseCache", "cache_key"]


def cache_key(
    base_url: str, body: dict[str, Any], episode_seed: int | None, decision: int | None, agent: str = ""
) -> str:
    """The cache key of a request body sent to ``base_url`` for one decision of one episode."""
    parts = {
        "base_url": base_url,
        "body": body,  # model, messages and every sampling field
        "episode_seed": episode_seed,
        "decision": decision,
        "agent": agent,
    }
    canonical = json_text(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """A persistent map from :func:`cache_key` to a response (a JSON-serialisable dict).

    Args:
        path: The SQLite file (created with its parent directory). A directory is given the
            file name ``responses.sqlite``.
    """

    FILE_NAME = "responses.sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        path = Path(path).expanduser()
        if path.is_dir():
            path = path / self.FILE_NAME
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, response TEXT NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            raise ValueError(f"cannot open the response cache {str(path)!r}: {exc}") from exc
        self.path = path
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        try:
            value = json.loads(row[0])
        except json.JSONDecodeError:  # a damaged row is a miss (it will be overwritten)
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, response: dict[str, Any]) -> None:
        data = json_text(response)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses (key, response) VALUES (?, ?)", (key, data))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"
