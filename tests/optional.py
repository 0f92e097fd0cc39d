"""Tests of optional extras: skipped with the reason where the extra is missing, failed instead
where ``LLM_ENVS_TESTS_REQUIRE`` names the feature (comma-separated; CI sets
``serve,verifiers`` in .ci/run, as it sets SANDBOX_TESTS_REQUIRE for the sandbox backends), so
that a broken install cannot turn those tests into silent skips.

Features: ``serve`` (the serve extra: openenv-core and its web stack; tests/serve,
tests/trainers/test_env_url.py, tests/evaluation/test_transformers_serve.py) and ``verifiers``
(the verifiers virtual environment, ``make verifiers-venv``; tests/interop/test_verifiers.py).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

#: The variable that turns a missing extra into a failure.
REQUIRE_VARIABLE = "LLM_ENVS_TESTS_REQUIRE"
FEATURES = ("serve", "verifiers")


def required(feature: str) -> bool:
    """Whether ``LLM_ENVS_TESTS_REQUIRE`` names ``feature``."""
    if feature not in FEATURES:
        raise ValueError(f"unknown feature {feature!r}; known: {FEATURES}")
    names = {name.strip() for name in os.environ.get(REQUIRE_VARIABLE, "").split(",")}
    return feature in names


def skip_or_fail(feature: str, reason: str) -> None:
    """Skip the module (or test) with ``reason``, or fail it where the feature is required."""
    if required(feature):
        pytest.fail(f"{REQUIRE_VARIABLE} names {feature!r}, but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def import_or_skip(module: str, feature: str, reason: str) -> Any:
    """``pytest.importorskip`` that fails instead where ``feature`` is required."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        skip_or_fail(feature, reason)
    try:
        return pytest.importorskip(module, reason=reason)
    except pytest.skip.Exception:
        skip_or_fail(feature, f"{reason} ({module} does not import)")


def missing_modules(*modules: str) -> list[str]:
    """The modules of ``modules`` that are not installed."""
    return [m for m in modules if importlib.util.find_spec(m) is None]
