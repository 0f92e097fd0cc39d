"""What a run of episodes leaves behind, and the file it is kept in.

:class:`EpisodeResult` (one finished episode) and :class:`EpisodeFailure` (why one is missing);
the results file ``episodes.jsonl``: one checksummed JSON line per finished episode, written
durably by :class:`EpisodeWriter`, read and repaired by :func:`load_episodes`; and
:class:`RunLedger`, the bookkeeping every episode runner shares (resume from the file, record
each episode as it finishes or fails, account for every missing one at the end). The line format
is specified in docs/evaluation.md ("episodes.jsonl"); the runners are in :mod:`llm_envs.runner`
and :mod:`llm_envs.distributed.evaluation`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_envs.core.writing import json_text

if TYPE_CHECKING:
    from llm_envs.agents.base import AgentError

__all__ = [
    "EPISODES_FORMAT_VERSION",
    "EpisodeFailure",
    "EpisodeFileError",
    "EpisodeFileProblem",
    "EpisodeResult",
    "EpisodeWriter",
    "IncompleteRunError",
    "RunLedger",
    "RunnerError",
    "encode_episode_line",
    "load_episodes",
    "scan_episode_file",
]

#: Version of an ``episodes.jsonl`` line (written into each line as ``format_version``).
#: 1: no version field, no checksum; 2: ``format_version`` and ``checksum``.
EPISODES_FORMAT_VERSION = 2


class RunnerError(RuntimeError):
    """The run cannot go on (a bad agent mapping, a results file from another run, ...)."""


class EpisodeFileError(RunnerError):
    """A results file with corrupt or duplicate lines (see :func:`load_episodes`)."""


@dataclass
class EpisodeResult:
    """Everything one finished episode left behind; one line of the JSONL file.

    Attributes:
        index: Episode number within the run (0-based).
        seed: The seed the environment was reset with (``run seed + index``).
        env_id: The environment id.
        episode_id: The environment's own episode id.
        agents: Agent id → name of the agent that played it.
        rewards: Agent id → total reward (the sum of its records' rewards).
        metrics: :meth:`TextEnv.episode_metrics` (always ``success`` and ``turns``).
        records: Every :class:`~llm_envs.core.ActionRecord`, as ``to_dict()``.
        steps: One entry per agent decision, in order of play: ``agent``, ``record_index`` (the
            record the action produced), ``prompt_tokens``, ``completion_tokens``, ``error``
            (always ``None`` since format 2: a failed call is never played) and ``meta`` of the
            :class:`~llm_envs.agents.AgentOutput` (plus ``token_ids`` and ``logprobs`` when the
            run stores them).
        duration_s: Wall time from reset to the end of the episode.
    """

    index: int
    seed: int
    env_id: str
    episode_id: str
    agents: dict[str, str]
    rewards: dict[str, float]
    metrics: dict[str, float]
    records: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    duration_s: float = 0.0

    @property
    def success(self) -> float:
        return float(self.metrics.get("success", 0.0))

    @property
    def turns(self) -> float:
        return float(self.metrics.get("turns", 0.0))

    def actions(self, agent: str | None = None) -> list[dict[str, Any]]:
        """The records of actions ``agent`` (or any agent) took: every record but the passive
        ones (``info["passive"]``: a game player that never moved but whose return changed,
        e.g. when the other forfeited), which carry a reward and no action."""
        return [
            r for r in self.records
            if (agent is None or r.get("agent") == agent) and not (r.get("info") or {}).get("passive")
        ]

    def tokens(self, agent: str | None = None) -> tuple[int, int]:
        """(prompt, completion) tokens used in the episode, by ``agent`` or by all."""
        steps = [s for s in self.steps if agent is None or s["agent"] == agent]
        return (
            sum(int(s.get("prompt_tokens", 0)) for s in steps),
            sum(int(s.get("completion_tokens", 0)) for s in steps),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeResult:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def outcome(self) -> dict[str, Any]:
        """The deterministic part (everything but timings): equal for equal runs."""
        data = self.to_dict()
        data.pop("duration_s")
        for step in data["steps"]:
            meta = step.get("meta") or {}
            step["meta"] = {k: v for k, v in meta.items() if "latency" not in k and k not in ("cached", "attempts")}
        return data


@dataclass
class EpisodeFailure:
    """Why an episode of the run is missing.

    Attributes:
        index, seed: The episode.
        reason: The failure kind (:data:`llm_envs.agents.base.ERROR_KINDS`, or
            :data:`llm_envs.core.errors.SANDBOX_FAILURE_KINDS` when the sandbox failed under an
            agent's program), or ``"not_started"`` (the run stopped before it began),
            ``"stopped"`` (it was in play when the run was stopped) or ``"worker_lost"`` (the
            process playing it died, on a cluster, more often than the runner retries).
        message: What happened (the server's message, the exception).
        agent: The agent id whose call failed, if one did (``None`` for a failure inside
            ``env.step``, such as a sandbox failure).
        decisions: Decisions already played in the episode when it stopped.
    """

    index: int
    seed: int
    reason: str
    message: str
    agent: str | None = None
    decisions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class IncompleteRunError(RunnerError):
    """Some episodes of the run could not be played because of infrastructure failures.

    None of them was written as finished; ``resume=True`` plays them. Attributes: ``results``
    (every finished episode, by index), ``failures`` (one :class:`EpisodeFailure` per missing
    episode, by index), ``num_episodes``, ``stop_reason`` (why no more episodes were started,
    if the run stopped early), ``configuration_error`` (the :class:`AgentError` that
    aborted the run, if it was one) and ``agent_name`` (the agent that raised it).
    """

    def __init__(
        self,
        results: list[EpisodeResult],
        failures: list[EpisodeFailure],
        num_episodes: int,
        *,
        stop_reason: str | None = None,
        configuration_error: AgentError | None = None,
        agent_name: str | None = None,
    ) -> None:
        self.results = results
        self.failures = failures
        self.num_episodes = num_episodes
        self.stop_reason = stop_reason
        self.configuration_error = configuration_error
        self.agent_name = agent_name
        super().__init__(self._message(agent_name))

    @property
    def missing(self) -> list[int]:
        return [f.index for f in self.failures]

    def reasons(self) -> dict[str, int]:
        """``"reason: message"`` → number of episodes, most frequent first."""
        return dict(Counter(f"{f.reason}: {f.message}" for f in self.failures).most_common())

    def _message(self, agent_name: str | None) -> str:
        if self.configuration_error is not None:
            # (a server refusing every prompt as too long is set up for a shorter context than
            # --max-tokens asks for: its model name, URL and key are fine)
            check = ("--max-tokens against the server's context length" if "context" in str(self.configuration_error)
                     else "the model name, the URL and the API key")
            return (
                f"{agent_name or 'an agent'} failed on its first call with a configuration error, "
                f"so the run stopped: {self.configuration_error}. Check {check}. "
                f"{len(self.results)} of {self.num_episodes} episodes are finished; "
                "no other episode was written."
            )
        counts = Counter(f.reason for f in self.failures)
        hit = sum(n for reason, n in counts.items() if reason not in ("not_started", "stopped"))
        parts = []
        if hit:
            first = next(f for f in self.failures if f.reason not in ("not_started", "stopped"))
            parts.append(f"{hit} hit an infrastructure failure (e.g. {first.reason}: {first.message})")
        if counts.get("stopped"):
            parts.append(f"{counts['stopped']} were in play when the run stopped")
        if counts.get("not_started"):
            parts.append(f"{counts['not_started']} were not started")
        why = f"; the run stopped starting episodes after {self.stop_reason}" if self.stop_reason else ""
        return (
            f"{len(self.failures)} of {self.num_episodes} episodes are incomplete: "
            + ", ".join(parts)
            + why
            + ". None of them was written as finished; resume the run (--resume) to play them."
        )


# ---------------------------------------------------------------------------- JSONL files
_CHECKSUM_TAIL = re.compile(rb', "checksum": "sha256:([0-9a-f]{16})"\}\s*$')


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def encode_episode_line(result: EpisodeResult) -> str:
    """One results-file line (format 2): the episode, its ``format_version`` and a checksum of
    the line's own bytes (SHA-256 of the line without the checksum field), newline-terminated."""
    body = json_text({**result.to_dict(), "format_version": EPISODES_FORMAT_VERSION})
    return body[:-1] + f', "checksum": "sha256:{_digest(body.encode("utf-8"))}"}}\n'


@dataclass
class EpisodeFileProblem:
    """A line of a results file that cannot be used: ``kind`` is ``"corrupt"`` (not JSON, not
    an episode, or its checksum does not match its bytes), ``"duplicate"`` (the same episode
    line again) or ``"conflict"`` (another result for an episode index already seen), or
    ``"torn"`` (an unterminated last line, what a crash during a write leaves)."""

    line: int
    kind: str
    detail: str
    index: int | None = None

    def __str__(self) -> str:
        return f"line {self.line}: {self.kind}: {self.detail}"


def _parse_line(line: bytes) -> EpisodeResult:
    """The episode of one line, or ``ValueError`` saying what is wrong with it."""
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an episode object")
    if "checksum" in data:
        match = _CHECKSUM_TAIL.search(line)
        if match is None:
            raise ValueError("the checksum field is not where the writer puts it")
        if _digest(line[: match.start()] + b"}") != match.group(1).decode():
            raise ValueError("checksum mismatch: the line was changed after it was written")
    try:
        episode = EpisodeResult.from_dict(data)
    except TypeError as exc:
        raise ValueError(f"not an episode record ({exc})") from None
    if not isinstance(episode.index, int) or episode.index < 0:
        raise ValueError(f"bad episode index {episode.index!r}")
    return episode


def scan_episode_file(
    path: str | os.PathLike[str],
) -> tuple[list[tuple[bytes, EpisodeResult]], list[tuple[bytes, EpisodeFileProblem]]]:
    """Read a results file: the good lines (raw bytes and episode, first copy of each index)
    and the problems (raw bytes and what is wrong), in file order."""
    raw = Path(path).read_bytes()
    good: list[tuple[bytes, EpisodeResult]] = []
    bad: list[tuple[bytes, EpisodeFileProblem]] = []
    seen: dict[int, bytes] = {}
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if number == len(lines):  # the text after the final newline: empty, or a torn write
            if line.strip():
                bad.append((line, EpisodeFileProblem(number, "torn", "unterminated last line (an interrupted write)")))
            break
        if not line.strip():
            continue
        try:
            episode = _parse_line(line)
        except ValueError as exc:
            bad.append((line, EpisodeFileProblem(number, "corrupt", str(exc))))
            continue
        if episode.index in seen:
            kind = "duplicate" if seen[episode.index] == line else "conflict"
            detail = (
                f"episode {episode.index} again"
                if kind == "duplicate"
                else f"a different result for episode {episode.index} (the first one is kept)"
            )
            bad.append((line, EpisodeFileProblem(number, kind, detail, episode.index)))
            continue
        seen[episode.index] = line
        good.append((line, episode))
    return good, bad


def load_episodes(
    path: str | os.PathLike[str],
    *,
    repair: bool = False,
    problems: list[EpisodeFileProblem] | None = None,
) -> list[EpisodeResult]:
    """Read the episodes of a JSONL results file (in file order; a missing file has none).

    Every line is checked: it must be an episode object whose checksum (format 2) matches its
    bytes, and each episode index may appear once. A torn last line (no newline: a crash during
    a write) is always skipped. Any other bad line:

    * by default raises :class:`EpisodeFileError` naming the lines;
    * with ``problems`` given (a list), is skipped and appended to it as an
      :class:`EpisodeFileProblem` (torn lines too);
    * with ``repair=True``, is skipped and the file is rewritten without it: the bad lines are
      appended to ``<file>.rejected`` (so nothing is lost), the first copy of a duplicated
      episode is kept. A resumed run then plays the episodes whose lines were rejected.
    """
    path = Path(path)
    if not path.exists():
        return []
    good, bad = scan_episode_file(path)
    if problems is not None:
        problems.extend(problem for _, problem in bad)
    serious = [problem for _, problem in bad if problem.kind != "torn"]
    if repair and bad:
        _rewrite_episode_file(path, [line for line, _ in good], bad)
    elif serious and problems is None:
        listed = "; ".join(str(p) for p in serious[:5]) + (f"; and {len(serious) - 5} more" if len(serious) > 5 else "")
        raise EpisodeFileError(
            f"{path} has {len(serious)} bad line(s): {listed}. Resuming the run (--resume, or "
            f"load_episodes(..., repair=True)) moves them to {path.name}.rejected and plays those "
            "episodes again."
        )
    return [episode for _, episode in good]


def _rewrite_episode_file(path: Path, keep: list[bytes], rejected: list[tuple[bytes, EpisodeFileProblem]]) -> None:
    serious = [(line, problem) for line, problem in rejected if problem.kind != "torn"]
    if serious:
        with open(path.with_name(path.name + ".rejected"), "ab") as f:
            for line, problem in serious:
                f.write(f"# {problem}\n".encode() + line + b"\n")
            f.flush()
            os.fsync(f.fileno())
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(b"".join(line + b"\n" for line in keep))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class EpisodeWriter:
    """Appends one line per episode to a results file (:func:`encode_episode_line`), durably
    (flush + fsync) before :meth:`write` returns. Every episode runner writes through it."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")

    def write(self, result: EpisodeResult) -> None:
        self._file.write(encode_episode_line(result))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


# ---------------------------------------------------------------------------- the ledger of a run
class RunLedger:
    """The bookkeeping of one run that every episode runner shares: which of the episodes
    ``0 .. num_episodes - 1`` (episode ``i`` played from seed ``seed + i``) an earlier run
    finished, which this run finished or lost and why, and at the end an account of every
    missing one. Finished episodes are written to the results file as they arrive.

    Args:
        num_episodes, seed: The run.
        out_path: The results file (``episodes.jsonl``), or None: nothing is written and there
            is nothing to resume.
        resume: Keep the episodes in ``out_path`` (after repairing it, see :func:`load_episodes`)
            and play only the missing ones. Without it, a file that already holds episodes is
            refused.

    Use: :meth:`load`, :meth:`check_resumed`, :meth:`open`; then :meth:`record` each finished
    episode and :meth:`fail` each lost one; :meth:`close`; :meth:`finish`.
    """

    def __init__(self, num_episodes: int, seed: int, out_path: Path | None, resume: bool) -> None:
        self.num_episodes = num_episodes
        self.seed = seed
        self.out_path = out_path
        self.resume = resume
        #: Episodes an earlier run finished (the first line of each index below num_episodes).
        self.resumed: dict[int, EpisodeResult] = {}
        #: Episodes finished by this run.
        self.finished: dict[int, EpisodeResult] = {}
        #: Episodes this run lost (an infrastructure failure), by index.
        self.failures: dict[int, EpisodeFailure] = {}
        #: What resuming found wrong in the results file (and repaired).
        self.file_problems: list[EpisodeFileProblem] = []
        #: After :meth:`finish`: one failure per missing episode, by index.
        self.missing: list[EpisodeFailure] = []
        self._loaded: list[EpisodeResult] = []
        self._writer: EpisodeWriter | None = None

    def load(self) -> None:
        """Read what an earlier run left in the results file (``resume``: the file is repaired
        first), or refuse a file that already holds episodes (no ``resume``)."""
        if self.out_path is None:
            return
        if self.resume:
            self.file_problems = []
            self._loaded = load_episodes(self.out_path, repair=True, problems=self.file_problems)
            for result in self._loaded:
                if result.index < self.num_episodes:
                    self.resumed.setdefault(result.index, result)
        elif self.out_path.exists() and self.out_path.stat().st_size > 0:
            raise RunnerError(
                f"{self.out_path} already holds episodes; pass resume=True to continue that "
                f"run, or choose another path"
            )

    def check_resumed(self, env_id: str, names: Mapping[str, str]) -> None:
        """Refuse to mix runs: every episode in the file must be of ``env_id``, played from this
        run's seed for its index by the agents ``names`` (agent id → agent name)."""
        for result in self._loaded:
            if result.env_id != env_id or result.seed != self.seed + result.index:
                raise RunnerError(
                    f"{self.out_path} holds episode {result.index} of another run "
                    f"(env {result.env_id!r}, seed {result.seed}; this run: env {env_id!r}, "
                    f"seed {self.seed + result.index}); refusing to mix them"
                )
            if dict(result.agents) != dict(names):
                raise RunnerError(
                    f"{self.out_path} holds episode {result.index} played by other agents "
                    f"({result.agents}; this run: {dict(names)}); refusing to mix them"
                )

    def todo(self) -> list[int]:
        """The episodes still to play, in order."""
        return [i for i in range(self.num_episodes) if i not in self.resumed]

    def open(self) -> None:
        """Open the results file for appending (no-op without ``out_path``)."""
        if self.out_path is not None and self._writer is None:
            self._writer = EpisodeWriter(self.out_path)

    def record(self, result: EpisodeResult) -> None:
        """A finished episode: written to the file (durably) before this returns."""
        if self._writer is not None:
            self._writer.write(result)
        self.finished[result.index] = result

    def fail(self, failure: EpisodeFailure) -> None:
        """An episode an infrastructure failure stopped: never written, played again on resume."""
        self.failures[failure.index] = failure

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def finish(
        self,
        *,
        in_play: Collection[int] = (),
        stop_reason: str | None = None,
        configuration_error: AgentError | None = None,
        agent_name: str | None = None,
    ) -> list[EpisodeResult]:
        """Every finished episode (resumed ones included), by index; sets :attr:`missing`.

        An episode neither finished nor failed is accounted as ``"stopped"`` if it was in play
        (``in_play``) when the run stopped, else ``"not_started"``.

        Raises:
            IncompleteRunError: if any episode is missing (with ``stop_reason``, and the
                ``configuration_error`` of ``agent_name`` that aborted the run, if one did).
        """
        results = {**self.resumed, **self.finished}
        stop_message = (
            f"the run stopped: {agent_name} failed with a configuration error"
            if configuration_error is not None
            else stop_reason
        )
        failures = dict(self.failures)
        for index in range(self.num_episodes):
            if index in results or index in failures:
                continue
            reason = "stopped" if index in in_play else "not_started"
            failures[index] = EpisodeFailure(index, self.seed + index, reason, stop_message or "the run stopped")
        self.missing = [failures[i] for i in sorted(failures) if i not in results]
        ordered = [results[i] for i in sorted(results)]
        if self.missing:
            raise IncompleteRunError(
                ordered,
                self.missing,
                self.num_episodes,
                stop_reason=stop_reason,
                configuration_error=configuration_error,
                agent_name=agent_name,
            )
        return ordered
