"""Load a repository script (``benchmarks/…``, ``examples/…``) as a module, so that tests can call
its functions without running its ``main``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative_path: str) -> ModuleType:
    """The module of the script at ``ROOT / relative_path`` (its ``__name__`` is not ``__main__``)."""
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(f"script_under_test_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
