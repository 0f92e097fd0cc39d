"""The question pool D of Multi-Agent Evolve: seeded from a task source, grown by the proposer.

The pool outlives episodes (and, through a JSONL file, runs) and is shared by every environment
instance it is handed to, so it is thread-safe: every read and write holds one lock.

Rules (MAE, arXiv 2510.23595, §4.1):

* it starts from seed questions (a task source's problems, or a saved JSONL file);
* a proposed question joins only if its judged quality is ``>= min_quality`` (0.7), which
  :meth:`QuestionPool.add` enforces. ``min_quality`` is fixed when the pool is made: it is the
  one admission threshold (the environment reads it from here, and a checkpoint never changes
  it);
* duplicates (same text up to whitespace) are not added twice.

Persistence: :meth:`QuestionPool.save` writes the whole pool atomically; a pool created with
``path=`` (or :meth:`QuestionPool.open`) also appends every accepted question to that JSONL file
as it is added, so a crash loses nothing and the next run continues from the file. Appends are
serialised by the pool's lock; two *processes* appending to one file is not supported.

Each line of the JSONL file is ``{"question": str, "answer": str | null, "quality": float |
null, "source": str}``. ``answer`` is a ground truth when one is known (seed problems); it is
used for metrics only, never for reward.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llm_envs.tasks import TaskSource

DEFAULT_MIN_QUALITY = 0.7


def question_key(question: str) -> str:
    """Identity of a question: a hash of its text with what does not change what it asks taken
    out: compatibility forms unified (NFKC: a full-width "１" is "1"), invisible format
    characters dropped (zero-width spaces and joiners, soft hyphens, direction marks: Unicode
    category Cf), case folded, whitespace runs collapsed. A copy of a pooled question that
    differs from it only so is the same question (a proposer cannot make the shown reference
    "new" with a zero-width space); any visible edit makes another question."""
    text = unicodedata.normalize("NFKC", question)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf").casefold()
    canonical = " ".join(text.split())
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class PoolEntry:
    """One question of the pool.

    Attributes:
        question: The question text.
        answer: Ground-truth answer if known (seed problems), for metrics only.
        quality: The judge's normalised quality when it was proposed; ``None`` for seeds.
        source: ``"seed"``, ``"proposed"`` or a task-source problem id.
        split: The task split a seed problem came from (``None``: proposed, or not known).
    """

    question: str
    answer: str | None = None
    quality: float | None = None
    source: str = "seed"
    split: str | None = None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PoolEntry:
        """An entry from its JSON form (a pool file's line, a checkpoint's entry)."""
        return cls(
            str(data["question"]),
            None if data.get("answer") is None else str(data["answer"]),
            None if data.get("quality") is None else float(data["quality"]),
            str(data.get("source", "seed")),
            None if data.get("split") is None else str(data["split"]),
        )

    @property
    def key(self) -> str:
        return question_key(self.question)

    def __deepcopy__(self, memo: dict) -> PoolEntry:
        return self  # immutable: clones share it


class QuestionPool:
    """A thread-safe, persistent, append-only set of questions.

    Args:
        entries: Initial (seed) entries; they are accepted without a quality check.
        min_quality: Smallest quality a *proposed* question needs to join.
        path: If given, every entry accepted from now on is appended to this JSONL file.
    """

    def __init__(
        self,
        entries: Iterable[PoolEntry] = (),
        *,
        min_quality: float = DEFAULT_MIN_QUALITY,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        self._min_quality = float(min_quality)
        self.path = Path(path) if path is not None else None
        self._lock = threading.RLock()
        self._entries: list[PoolEntry] = []
        self._keys: dict[str, int] = {}
        for entry in entries:
            self._insert(entry)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_task_source(
        cls,
        source: TaskSource,
        size: int,
        *,
        min_quality: float = DEFAULT_MIN_QUALITY,
        path: str | os.PathLike[str] | None = None,
    ) -> QuestionPool:
        """Seed a pool with the first ``size`` problems of ``source`` (deterministic)."""
        count = min(int(size), len(source))
        entries = []
        for index in range(count):
            problem = source.get(index)
            entries.append(PoolEntry(problem.prompt, problem.answer, None, f"seed:{problem.id}", getattr(source, "split", None)))
        return cls(entries, min_quality=min_quality, path=path)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        min_quality: float = DEFAULT_MIN_QUALITY,
        append: bool = True,
    ) -> QuestionPool:
        """Read a pool saved as JSONL. With ``append``, new entries go on to that file."""
        entries = []
        with open(path, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    entries.append(PoolEntry.from_data(json.loads(line)))
                except (ValueError, KeyError, TypeError) as error:
                    raise ValueError(f"{path}:{line_number}: not a pool entry ({error})") from error
        return cls(entries, min_quality=min_quality, path=path if append else None)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        seed: Iterable[PoolEntry],
        *,
        min_quality: float = DEFAULT_MIN_QUALITY,
    ) -> QuestionPool:
        """The pool stored at ``path`` if the file exists; otherwise a new pool of ``seed``,
        saved there. Either way later additions are appended to ``path``.

        Raises:
            ValueError: the file's seed questions come from another task split than ``seed``'s
                (an evaluation given a training run's pool answered its training questions).
                Seeds whose split is not recorded (files written before it was) pass.
        """
        seed = list(seed)
        if Path(path).exists():
            pool = cls.load(path, min_quality=min_quality, append=True)
            wanted = {entry.split for entry in seed if entry.split is not None}
            stored = {entry.split for entry in pool if entry.quality is None and entry.split is not None}
            if wanted and stored and stored != wanted:
                example = next((e for e in pool if e.quality is None and e.split not in wanted), None)
                raise ValueError(
                    f"the question pool at {path} was seeded from the {', '.join(sorted(stored))} split, and this "
                    f"environment draws from the {', '.join(sorted(wanted))} split"
                    + (f" (e.g. {example.question[:60]!r}, {example.source})" if example is not None else "")
                    + ": give this environment a pool_path of its own (or none)"
                )
            return pool
        pool = cls(seed, min_quality=min_quality)
        pool.save(path)
        pool.path = Path(path)
        return pool

    # ------------------------------------------------------------------ access
    @property
    def min_quality(self) -> float:
        """The admission threshold: a proposed question joins only with quality >= this."""
        return self._min_quality

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __iter__(self) -> Iterator[PoolEntry]:
        return iter(self.entries())

    def __contains__(self, question: object) -> bool:
        return isinstance(question, str) and self.lookup(question) is not None

    def entries(self) -> list[PoolEntry]:
        """A snapshot of the entries, in insertion order."""
        with self._lock:
            return list(self._entries)

    def lookup(self, question: str) -> PoolEntry | None:
        """The entry with the same text as ``question`` (up to whitespace), if any."""
        with self._lock:
            index = self._keys.get(question_key(question))
            return None if index is None else self._entries[index]

    def sample(self, rng: np.random.Generator) -> PoolEntry:
        """An entry drawn uniformly with ``rng``."""
        with self._lock:
            if not self._entries:
                raise ValueError("the question pool is empty")
            return self._entries[int(rng.integers(len(self._entries)))]

    # ------------------------------------------------------------------ growth
    def add(
        self,
        question: str,
        quality: float,
        *,
        answer: str | None = None,
        source: str = "proposed",
    ) -> bool:
        """Add a proposed question if ``quality >= min_quality`` and it is new.

        Returns whether it was added. Accepted entries are appended to :attr:`path` if set.
        """
        if not quality >= self.min_quality:  # also rejects NaN
            return False
        if not question.strip():
            return False
        entry = PoolEntry(question, answer, float(quality), source)
        with self._lock:
            if entry.key in self._keys:
                return False
            self._insert(entry)
            if self.path is not None:
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(_to_line(entry))
                    handle.flush()
            return True

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the whole pool to ``path`` as JSONL, atomically (temp file + rename)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            lines = [_to_line(entry) for entry in self._entries]
        descriptor, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.writelines(lines)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp_name, target)
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The pool's contents, JSON-serialisable, for a training checkpoint (not the threshold:
        that belongs to the run's configuration)."""
        with self._lock:
            return {"entries": [asdict(e) for e in self._entries]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the contents with a :meth:`state_dict` (a resumed run's pool).

        Entries added after the checkpoint are dropped, and the backing file, if any, is
        rewritten to match, so the resumed run continues from exactly the checkpointed pool.
        The admission threshold stays this pool's own (a ``"min_quality"`` key, which older
        checkpoints carry, is ignored): one source of truth, the run's configuration.
        """
        entries = [PoolEntry.from_data(data) for data in state["entries"]]
        with self._lock:
            self._entries = []
            self._keys = {}
            for entry in entries:
                self._insert(entry)
            if self.path is not None:
                self.save(self.path)

    # ------------------------------------------------------------------ internals
    def _insert(self, entry: PoolEntry) -> None:
        if entry.key not in self._keys:
            self._keys[entry.key] = len(self._entries)
            self._entries.append(entry)

    def __getstate__(self) -> dict[str, Any]:
        # Locks cannot be pickled or deep-copied; a copy gets its own lock.
        with self._lock:
            state = dict(self.__dict__)
            state["_entries"] = list(self._entries)
            state["_keys"] = dict(self._keys)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"QuestionPool(size={len(self)}, min_quality={self.min_quality}, path={self.path})"


def _to_line(entry: PoolEntry) -> str:
    return json.dumps(asdict(entry), ensure_ascii=True) + "\n"
