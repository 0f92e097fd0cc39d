"""tests/optional.py: a missing extra skips its tests, unless LLM_ENVS_TESTS_REQUIRE names it
(as CI does), where it fails them."""

from __future__ import annotations

import pytest

from tests.optional import REQUIRE_VARIABLE, import_or_skip, skip_or_fail


def test_a_missing_extra_skips_unless_required(monkeypatch):
    monkeypatch.delenv(REQUIRE_VARIABLE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        skip_or_fail("serve", "the serve extra is not installed")
    monkeypatch.setenv(REQUIRE_VARIABLE, "verifiers, serve")
    with pytest.raises(pytest.fail.Exception, match="names 'serve', but the serve extra is not installed"):
        skip_or_fail("serve", "the serve extra is not installed")
    with pytest.raises(pytest.fail.Exception):
        import_or_skip("no_such_module_for_this_test", "verifiers", "verifiers is not installed")
    monkeypatch.setenv(REQUIRE_VARIABLE, "verifiers")
    with pytest.raises(pytest.skip.Exception):
        import_or_skip("no_such_module_for_this_test.sub", "serve", "missing")
    assert import_or_skip("json", "serve", "never missing").dumps([]) == "[]"
