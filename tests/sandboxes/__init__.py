"""Tests of the sandboxes package (real backends; see conftest.py)."""
