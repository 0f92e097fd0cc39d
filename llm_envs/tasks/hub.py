"""Machinery shared by the dataset loaders: hub or local files, split policies, lazy problems.

A :class:`HubSpec` describes one dataset: its Hugging Face Hub id and config, its hub splits,
how a row becomes a :class:`~llm_envs.tasks.base.Problem`, and how to get it offline.
:class:`HubTaskSource` serves one split of it, from a **local** JSONL / JSON / parquet file or
directory in the *same schema as the hub dataset* (``path=``; a file named after a hub split
holds that split; nothing is downloaded), or from the **hub** through ``datasets.load_dataset``
(``repo=`` for a mirror or a local clone of the hub repository). A dataset that cannot be found
raises :class:`~llm_envs.tasks.base.DatasetUnavailableError` with the commands that fetch it;
nothing ever falls back to other data.

Split policies (``split_policy=``): ``"official"`` (the dataset's own splits; the default where
it has train and test), ``"hash"`` (all rows pooled, each to
:func:`llm_envs.core.splits.split_of` of its problem text, 80/10/10; the default for
single-split datasets, so training never sees their test problems) and ``"benchmark"`` (every
row a test problem). Rows are filtered once (cheap predicates) and turned into problems lazily,
on ``get``. docs/tasks.md ("Local files", "Splits", "Getting the data offline") says the same
for users.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_envs.core.splits import check_split, split_of
from llm_envs.tasks.base import DatasetUnavailableError, Problem, TaskSource, task_source_factory
from llm_envs.tasks.memorisable import exclude_by_default, is_memorisable

log = logging.getLogger(__name__)

SPLIT_POLICIES = ("official", "hash", "benchmark")
_DATA_SUFFIXES = (".jsonl", ".json", ".parquet")
# "test-00000-of-00001.parquet", "train-00000-of-00003-1a2b3c.parquet" -> split "test"/"train"
_SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}.*$")

Row = dict[str, Any]


@dataclass(frozen=True)
class HubSpec:
    """One dataset: where it lives, its schema, and how a row becomes a problem.

    Attributes:
        name: Registry name (``"gsm8k"``).
        repo: Hugging Face Hub dataset id (``"openai/gsm8k"``).
        config: Hub config name (``"main"``), or ``None``.
        hub_splits: Every split the hub dataset has.
        official_splits: Our split name -> hub split name under the ``"official"`` policy; empty
            for single-split datasets.
        schema: Human-readable description of the fields a row must have (for docs and errors).
        convert: ``(row, split, row_index, options) -> Problem``.
        key: ``row -> str``: the problem text whose hash decides the split (``"hash"`` policy).
        keep: ``(row, options) -> bool``: rows that can be used (e.g. stdin problems with tests).
        data_files: For hub datasets stored as raw files without a loader (APPS,
            LiveCodeBench): ``options -> {hub split: [hf:// urls]}``, read with the ``json``
            builder.
        default_options: Loader options and their defaults (``{"config": ..., ...}``).
        has_golden_solutions: Whether problems carry a golden solution (LiveCodeBench: no).
        scan_fields: The only fields ``key`` and ``keep`` read; a hub table is scanned through
            these columns alone (reading whole rows of a multi-gigabyte table would be slow).
        screens_memorisable: A code dataset: problems a lookup table of the prompt's examples
            passes are left out of ``train`` unless ``keep_memorisable=True``
            (:mod:`llm_envs.tasks.memorisable`).
    """

    name: str
    repo: str
    config: str | None
    hub_splits: tuple[str, ...]
    official_splits: Mapping[str, str]
    schema: str
    convert: Callable[[Row, str, int, Mapping[str, Any]], Problem]
    key: Callable[[Row], str]
    keep: Callable[[Row, Mapping[str, Any]], bool] | None = None
    data_files: Callable[[Mapping[str, Any]], dict[str, list[str]]] | None = None
    default_options: Mapping[str, Any] = field(default_factory=dict)
    has_golden_solutions: bool = True
    scan_fields: tuple[str, ...] | None = None
    screens_memorisable: bool = False

    @property
    def default_policy(self) -> str:
        return "official" if self.official_splits else "hash"

    def how_to_get(
        self,
        hub_split: str,
        config: str | None,
        options: Mapping[str, Any] | None = None,
    ) -> str:
        """Commands that make the dataset available offline."""
        if self.data_files is not None:
            files = self.data_files(options or self.default_options).get(hub_split, [])
            names = " ".join(f.rsplit("/", 1)[-1] for f in files)
            fetch = (
                f"    huggingface-cli download {self.repo} {names} --repo-type dataset "
                f"--local-dir <dir>\n"
            )
        else:
            config_arg = f", {config!r}" if config else ""
            fetch = (
                f'    python -c "import datasets; datasets.load_dataset({self.repo!r}{config_arg}, '
                f"split={hub_split!r}).to_json('{hub_split}.jsonl')\"\n"
            )
        return (
            "Get it on a machine with internet access, then copy the file(s) here:\n"
            + fetch
            + "and pass path='<the file or its directory>' (task_path= in an environment config; --env-arg task_path=... on the command line). "
            f"Alternatively pass repo='<directory>' with a copy of the whole hub repository "
            f"(huggingface-cli download {self.repo} --repo-type dataset --local-dir <directory>), "
            f"or point HF_HOME at a Hugging Face cache that already holds {self.repo}. "
            f"Expected schema: {self.schema}"
        )


def normalize_key(text: str) -> str:
    """The canonical form of a problem text for hashing (whitespace collapsed)."""
    return " ".join(str(text).split())


# ---------------------------------------------------------------------------------------------
# reading local files


def _split_from_filename(path: Path) -> str:
    stem = path.name
    for suffix in _DATA_SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return _SHARD_SUFFIX.sub("", stem)


def read_rows(path: Path) -> list[Row]:
    """Rows of one JSONL, JSON (array or lines) or parquet file."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError, ImportError) as error:
        raise DatasetUnavailableError(f"cannot read {path}: {error}") from error
    if path.suffix == ".json" and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as error:
            raise DatasetUnavailableError(
                f"{path} is not valid JSON: {error}"
            ) from error
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise DatasetUnavailableError(f"{path}: expected a JSON array of objects")
        return rows
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as error:
            raise DatasetUnavailableError(
                f"{path}, line {number}: not valid JSON ({error})"
            ) from error
        if not isinstance(row, dict):
            raise DatasetUnavailableError(
                f"{path}, line {number}: expected a JSON object"
            )
        rows.append(row)
    return rows


def read_local(spec: HubSpec, path: str | Path) -> dict[str, list[Row]]:
    """``{hub split: rows}`` from a local file or directory (see the module docstring)."""
    root = Path(path).expanduser()
    if not root.exists():
        raise DatasetUnavailableError(
            f"{spec.name}: {root} does not exist. Expected a JSONL/JSON/parquet file or a "
            f"directory of them in the schema of {spec.repo}. "
            + spec.how_to_get(spec.hub_splits[0], spec.config)
        )
    files = (
        sorted(
            p for p in root.iterdir() if p.is_file() and p.name.endswith(_DATA_SUFFIXES)
        )
        if root.is_dir()
        else [root]
    )
    if not files:
        raise DatasetUnavailableError(
            f"{spec.name}: no .jsonl/.json/.parquet file in {root}"
        )
    by_split: dict[str, list[Row]] = {}
    for file in files:
        split = _split_from_filename(file)
        if split not in spec.hub_splits:
            if len(spec.hub_splits) == 1:
                split = spec.hub_splits[0]
            else:
                raise DatasetUnavailableError(
                    f"{spec.name}: cannot tell which split {file.name} holds; name each file after "
                    f"a split of {spec.repo} ({', '.join(spec.hub_splits)}), e.g. "
                    f"{spec.hub_splits[0]}.jsonl"
                )
        by_split.setdefault(split, []).extend(read_rows(file))
    return by_split


# ---------------------------------------------------------------------------------------------
# reading the hub


def _local_repo(repo: str | Path | None) -> Path | None:
    """``repo`` as a local directory (``~`` expanded, as for ``path=``), or None for a hub id."""
    if repo is None:
        return None
    local = Path(repo).expanduser()
    return local if local.is_dir() else None


def _hub_files(spec: HubSpec, files: Sequence[str], repo: str | Path | None) -> list[str]:
    """``spec``'s raw hub files, moved to ``repo`` (another hub id, or a local copy's paths)."""
    if repo is None:
        return list(files)
    prefix = f"hf://datasets/{spec.repo}/"
    relative = [f[len(prefix) :] if f.startswith(prefix) else f for f in files]
    local = _local_repo(repo)
    if local is not None:
        return [str(local / name) for name in relative]
    return [f"hf://datasets/{repo}/{name}" for name in relative]


def load_hub_split(
    spec: HubSpec,
    hub_split: str,
    options: Mapping[str, Any],
    *,
    repo: str | Path | None = None,
) -> Sequence[Row]:
    """One split of the hub dataset through ``datasets.load_dataset`` (a lazy Arrow table).

    ``repo`` replaces the dataset's hub id: another hub id, or a local directory holding a copy
    of the hub repository.
    """
    config = options.get("config", spec.config)
    local = _local_repo(repo)
    where = spec.repo if repo is None else str(local or repo)
    try:
        import datasets
    except ImportError as error:
        raise DatasetUnavailableError(
            f"{spec.name}: the 'datasets' package is needed to load {spec.repo} from the hub "
            f"(pip install datasets). " + spec.how_to_get(hub_split, config)
        ) from error
    try:
        if spec.data_files is not None:
            files = _hub_files(spec, spec.data_files(options)[hub_split], repo)
            return datasets.load_dataset(
                "json", data_files={hub_split: files}, split=hub_split
            )
        return datasets.load_dataset(where, config, split=hub_split)
    except Exception as error:
        source = "the Hugging Face Hub" if local is None else "a local copy"
        raise DatasetUnavailableError(
            f"{spec.name}: could not load {where} (config {config!r}, split {hub_split!r}) "
            f"from {source}: {type(error).__name__}: {error}\n"
            + spec.how_to_get(hub_split, config, options)
        ) from error


# ---------------------------------------------------------------------------------------------
# the source


class HubTaskSource(TaskSource):
    """One split of a hub dataset (or of a local copy of it); see the module docstring.

    Args:
        spec: The dataset.
        split: ``"train"``, ``"validation"`` or ``"test"``.
        path: A local file or directory in the hub schema; ``None`` loads from the hub.
        repo: Where ``datasets.load_dataset`` finds the hub repository: another hub id, or a
            local directory holding a copy of it (its own layout: ``README.md`` configs, shard
            files). Default: the dataset's hub id. Exclusive with ``path``.
        split_policy: ``"official"``, ``"hash"`` or ``"benchmark"``; default per dataset.
        limit: Keep only the first ``limit`` problems of the split.
        keep_memorisable: Code datasets: keep the problems a lookup table of the prompt's
            examples passes (:mod:`llm_envs.tasks.memorisable`). Default ``None``: left out of
            ``train``, kept in ``validation`` and ``test``; ``False`` leaves them out of every
            split. Screening converts every row of the split once, at load.
        **options: Dataset options (see each loader's ``default_options``).
    """

    def __init__(
        self,
        spec: HubSpec,
        split: str = "train",
        *,
        path: str | Path | None = None,
        repo: str | Path | None = None,
        split_policy: str | None = None,
        limit: int | None = None,
        keep_memorisable: bool | None = None,
        **options: Any,
    ) -> None:
        if path is not None and repo is not None:
            raise ValueError(f"{spec.name}: give path= (files in the hub schema) or repo= (a hub repository), not both")
        self.spec = spec
        self.name = spec.name
        self.split = check_split(split)
        self.has_golden_solutions = spec.has_golden_solutions
        unknown = sorted(set(options) - set(spec.default_options))
        if unknown:
            raise TypeError(
                f"{spec.name}: unknown option(s) {unknown}; valid: "
                f"{sorted(set(spec.default_options) | {'path', 'repo', 'split_policy', 'limit'})}"
            )
        self.options = {**spec.default_options, **options}
        policy = split_policy or spec.default_policy
        if policy not in SPLIT_POLICIES:
            raise ValueError(
                f"split_policy must be one of {SPLIT_POLICIES}, got {policy!r}"
            )
        self.split_policy = policy
        hub_splits = self._hub_splits_needed()
        local = read_local(spec, path) if path is not None else None
        self._tables: dict[str, Sequence[Row]] = {}
        for hub_split in hub_splits:
            if local is not None:
                if hub_split not in local:
                    if policy == "official":
                        raise DatasetUnavailableError(
                            f"{spec.name}: {path} holds no {hub_split!r} split (found: "
                            f"{', '.join(sorted(local)) or 'nothing'}); add {hub_split}.jsonl or "
                            f"{hub_split}.parquet. "
                            + spec.how_to_get(
                                hub_split, self.options.get("config", spec.config)
                            )
                        )
                    continue
                self._tables[hub_split] = local[hub_split]
            else:
                self._tables[hub_split] = load_hub_split(spec, hub_split, self.options, repo=repo)
        #: Rows of the tables read that ``spec.keep`` left out (a field missing, empty or not of
        #: its type: no usable question, answer or tests); logged as a warning when there are any.
        self.rows_left_out = 0
        self._index: list[tuple[str, int]] = self._select_rows()
        if self.rows_left_out:
            log.warning("%s: %d row(s) of %s left out (a field missing, empty or not of its type; schema: %s)",
                        spec.name, self.rows_left_out, path or repo or spec.repo, spec.schema)
        #: Ids of the memorisable problems left out of this split (docs/tasks.md).
        self.memorisable_excluded: list[str] = []
        if spec.screens_memorisable and exclude_by_default(self.split, keep_memorisable):
            self._index, self.memorisable_excluded = self._screen_memorisable()
        if limit is not None:
            self._index = self._index[: max(0, int(limit))]
        if not self._index:
            raise ValueError(
                f"{spec.name}: split {self.split!r} (policy {policy!r}) has no usable problems "
                f"in {path or repo or spec.repo}"
            )
        self._convert_cached = functools.lru_cache(maxsize=256)(self._convert)

    def _hub_splits_needed(self) -> tuple[str, ...]:
        return hub_splits_for(self.spec, self.split, self.split_policy)

    def _select_rows(self) -> list[tuple[str, int]]:
        selected = []
        keep = self.spec.keep
        for hub_split, table in self._tables.items():
            scan = table
            if self.spec.scan_fields is not None and hasattr(table, "select_columns"):
                present = [f for f in self.spec.scan_fields if f in table.column_names]
                scan = table.select_columns(present)
            for row_index in range(len(scan)):
                row = scan[row_index]
                if keep is not None and not keep(row, self.options):
                    self.rows_left_out += 1
                    continue
                if (
                    self.split_policy == "hash"
                    and split_of(normalize_key(self.spec.key(row))) != self.split
                ):
                    continue
                selected.append((hub_split, row_index))
        return selected

    def _screen_memorisable(self) -> tuple[list[tuple[str, int]], list[str]]:
        kept, excluded = [], []
        for hub_split, row_index in self._index:
            problem = self.spec.convert(self._tables[hub_split][row_index], self.split, row_index, self.options)
            if is_memorisable(problem):
                excluded.append(problem.id)
            else:
                kept.append((hub_split, row_index))
        return kept, excluded

    def _convert(self, position: int) -> Problem:
        hub_split, row_index = self._index[position]
        return self.spec.convert(
            self._tables[hub_split][row_index], self.split, row_index, self.options
        )

    def __len__(self) -> int:
        return len(self._index)

    def get(self, index: int) -> Problem:
        if not 0 <= index < len(self._index):
            raise IndexError(
                f"index {index} out of range for {self.name} {self.split} ({len(self)} problems)"
            )
        return self._convert_cached(index)

    def __getstate__(self) -> dict[str, Any]:
        # The lru_cache wrapper cannot be pickled; it is rebuilt on unpickling.
        state = dict(self.__dict__)
        state.pop("_convert_cached", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._convert_cached = functools.lru_cache(maxsize=256)(self._convert)


def hub_splits_for(spec: HubSpec, split: str, split_policy: str | None = None) -> tuple[str, ...]:
    """The hub splits ``split`` of ``spec`` is drawn from under ``split_policy`` (default: the
    dataset's), without loading anything.

    Raises:
        ValueError: the dataset has no such split under that policy (GSM8K has no official
            validation split).
    """
    policy = split_policy or spec.default_policy
    if policy == "official":
        if not spec.official_splits:
            raise ValueError(
                f"{spec.name} has a single split; use split_policy='hash' (disjoint "
                f"train/validation/test by content hash) or 'benchmark' (everything is test)"
            )
        if split not in spec.official_splits:
            raise ValueError(
                f"{spec.name} has no official {split!r} split (it has "
                f"{', '.join(spec.official_splits)}); use split_policy='hash' to carve "
                f"disjoint train/validation/test splits out of all its rows"
            )
        return (spec.official_splits[split],)
    if policy == "benchmark" and split != "test":
        raise ValueError(
            f"split_policy='benchmark' makes all of {spec.name} the test split; "
            f"asked for {split!r}. Use split_policy='hash' for train/validation splits"
        )
    return spec.hub_splits


def split_problem(name: str, split: str, split_policy: str | None = None) -> str | None:
    """Why task source ``name`` cannot serve ``split`` under ``split_policy`` (a dataset split
    it lacks: GSM8K and APPS have no official validation split), found without loading it;
    ``None`` when it can, or when only loading it would tell (a source that is not a hub one)."""
    spec = getattr(task_source_factory(name), "spec", None)
    if spec is None:
        return None
    try:
        hub_splits_for(spec, split, split_policy)
    except ValueError as exc:
        return str(exc)
    return None


def split_policy_of(name: str, split_policy: str | None = None) -> str | None:
    """The split policy task source ``name`` applies (``split_policy``, else its dataset's
    default); ``None`` for a source that is not a hub one (it has no policies)."""
    spec = getattr(task_source_factory(name), "spec", None)
    if spec is None:
        return None
    return split_policy or spec.default_policy


def hub_factory(spec: HubSpec) -> Callable[..., HubTaskSource]:
    """The registry factory of ``spec``: ``factory(split=..., path=..., **options)``; its
    ``spec`` attribute is ``spec`` (what :func:`llm_envs.tasks.split_problem` reads)."""

    def factory(split: str = "train", **kwargs: Any) -> HubTaskSource:
        return HubTaskSource(spec, split, **kwargs)

    factory.spec = spec  # type: ignore[attr-defined]

    factory.__name__ = f"load_{spec.name}"
    factory.__doc__ = f"Load {spec.name} ({spec.repo}). Schema: {spec.schema}"
    return factory
