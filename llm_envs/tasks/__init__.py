"""Task sources (problem sets) and their registry."""

from llm_envs.tasks.base import (
    DatasetUnavailableError,
    Problem,
    TaskSource,
    load_task_source,
    register_task_source,
    task_source_names,
)

__all__ = [
    "DatasetUnavailableError",
    "Problem",
    "TaskSource",
    "load_task_source",
    "register_task_source",
    "task_source_names",
]
