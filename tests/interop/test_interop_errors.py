"""What an interop entry point says where its optional package is missing."""

from __future__ import annotations

import importlib.util

import pytest


def test_without_the_verifiers_package_the_error_says_where_it_lives():
    # (a bare ModuleNotFoundError traceback, where the docs' snippet is run in .venv)
    if importlib.util.find_spec("verifiers") is not None:
        pytest.skip("verifiers is installed in this interpreter: the message is for one without it")
    from llm_envs.interop.verifiers import load_environment

    with pytest.raises(ImportError, match="make verifiers-venv"):
        load_environment("llm/Signalling-v0")
