"""Headless Chromium for reports: screenshots, the browser tests and the load-time benchmark.

Uses the system's Chromium (Debian's ``chromium`` package: ``apt-get install chromium``) driven
by Playwright's Python package (``pip install playwright``) through ``executable_path``;
Playwright's own browser download is never needed. Both are optional: without them
:class:`BrowserUnavailable` says what is missing. Set ``LLM_ENVS_CHROMIUM`` to use another
Chromium binary.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM_FLAGS", "BrowserUnavailable", "chromium_path", "open_browser", "screenshot", "unavailable_reason"]

#: A quiet, offline headless Chromium: no GPU, no sandbox (it runs as root in containers),
#: nothing fetched in the background.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class BrowserUnavailable(RuntimeError):
    """Chromium or Playwright is not installed."""


def chromium_path() -> str | None:
    """The Chromium binary to use, or None."""
    configured = os.environ.get("LLM_ENVS_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def unavailable_reason() -> str | None:
    """Why the browser cannot start here (None when it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package 'playwright' is not installed (pip install playwright; its browser download is not needed)"
    if chromium_path() is None:
        return "no Chromium binary found (apt-get install chromium, or set LLM_ENVS_CHROMIUM)"
    return None


@contextmanager
def open_browser(user_data_dir: str | os.PathLike[str] | None = None) -> Iterator[Any]:
    """A Playwright browser context in headless Chromium with a fresh profile (a new temporary
    directory unless ``user_data_dir`` is given); closed on exit."""
    reason = unavailable_reason()
    if reason is not None:
        raise BrowserUnavailable(reason)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="llm-envs-chromium-") as fresh:
        profile = str(user_data_dir) if user_data_dir is not None else fresh
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=chromium_path(),
                headless=True,
                args=list(CHROMIUM_FLAGS),
                viewport={"width": 1280, "height": 900},
            )
            try:
                yield context
            finally:
                context.close()


def screenshot(html: str | os.PathLike[str], png: str | os.PathLike[str], *, width: int = 1280,
               height: int = 900, full_page: bool = False, hash_: str = "") -> Path:
    """Open the report ``html`` from disk and save a PNG of it (the first screen, or the whole
    page). ``hash_`` (e.g. ``"#ep/run/3"``) opens an episode first."""
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    with open_browser() as context:
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": height})
        page.goto(Path(html).resolve().as_uri() + hash_)
        page.wait_for_selector("body[data-ready='1']")
        page.screenshot(path=str(png), full_page=full_page)
    return png
