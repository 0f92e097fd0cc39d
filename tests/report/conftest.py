"""Headless Chromium for the report tests: one browser per test module.

The browser tests need Debian's ``chromium`` and the ``playwright`` Python package (its own
browser download is not used); without them they skip and say which is missing. Each report
they open is checked for console errors and for requests leaving the page, and its screenshot is
saved under ``tests/artifacts/report/`` (or ``$LLM_ENVS_TEST_ARTIFACTS/report/``; git ignores it).
``REPORT_TESTS_REQUIRE_BROWSER=1`` (CI) turns the skip into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from llm_envs.report.browser import open_browser, unavailable_reason

ARTIFACTS = Path(os.environ.get("LLM_ENVS_TEST_ARTIFACTS") or Path(__file__).resolve().parents[1] / "artifacts") / "report"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = unavailable_reason()
    if reason is not None:
        message = f"the report's browser tests need headless Chromium and Playwright: {reason}"
        if os.environ.get("REPORT_TESTS_REQUIRE_BROWSER"):  # set by .ci/run once chromium is installed
            pytest.fail(message)
        pytest.skip(message)
    with open_browser(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


@dataclass
class ReportPage:
    """An opened report, with what its console said and what it tried to load."""

    page: Any
    problems: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def count(self, selector: str) -> int:
        return self.page.locator(selector).count()

    def texts(self, selector: str) -> list[str]:
        return self.page.locator(selector).all_inner_texts()

    def assert_clean(self) -> None:
        """No console error or warning, no uncaught exception, no request beyond the file."""
        assert self.problems == [], self.problems
        assert self.requests == [], self.requests

    def screenshot(self, name: str, full_page: bool = True) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        assert path.stat().st_size > 10_000  # a real picture, not an empty page
        return path


@pytest.fixture
def open_report(browser: Any) -> Iterator[Any]:
    pages: list[Any] = []

    def _open(html: Path, hash_: str = "") -> ReportPage:
        page = browser.new_page()
        pages.append(page)
        opened = ReportPage(page)
        page.on("console", lambda m: opened.problems.append(f"console.{m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: opened.problems.append(f"uncaught: {e}"))
        page.on("request", lambda r: opened.requests.append(r.url)
                if not r.url.startswith(("file:", "data:", "blob:")) else None)
        page.goto(Path(html).resolve().as_uri() + hash_)
        page.wait_for_selector("body[data-ready='1']", timeout=15_000)
        return opened

    yield _open
    for page in pages:
        page.close()
