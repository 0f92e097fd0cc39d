"""Packaging metadata: the licence as an SPDX expression (setuptools >= 77), so that building
the package prints no deprecation warning about a TOML-table licence."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info < (3, 11):
    pytest.skip("tomllib is in the standard library from Python 3.11", allow_module_level=True)
import tomllib  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_the_licence_is_an_spdx_expression_and_setuptools_can_read_it():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in data["project"].get("classifiers", []))
    assert "setuptools>=77" in data["build-system"]["requires"]
