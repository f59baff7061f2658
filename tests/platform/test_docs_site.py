"""The docs site as a reader sees it: built with ``mkdocs build --strict``, served over HTTP
and opened in headless Chromium (Debian's, as the UI test drives it): the pages render with
no console error, and the search finds ``windowed_by`` in the API reference."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
PAGES = [
    "",
    "getting-started/first-sql-query/",
    "tutorials/windowed-revenue/",
    "concepts/time-and-windows/",
    "operating/configuration/",
    "platform/",
    "reference/streaming/",
    "differences/",
]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    site = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join(10)


def test_the_pages_render_without_console_errors_and_the_search_finds_the_api(
    site_url: str,
) -> None:
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        for path in PAGES:
            response = page.goto(site_url + path, wait_until="networkidle")
            assert response is not None and response.ok, path
            assert page.locator("article h1").first.inner_text().strip(), path
        # the search: Material's own index, queried through its search box
        page.goto(site_url, wait_until="networkidle")
        page.locator("label.md-search__icon, .md-search__input").first.click()
        page.locator("input.md-search__input").press_sequentially("windowed_by", delay=20)
        hit = page.locator(
            "a.md-search-result__link[href*='#streaming.KGroupedStream.windowed_by']"
        )
        hit.first.wait_for(timeout=30_000)
        assert "windowed_by" in hit.first.inner_text()
        browser.close()
    assert errors == []
