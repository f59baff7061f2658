"""The docs site builds with ``mkdocs build --strict`` (what ``make docs`` runs): a broken link
or anchor, a page missing from the nav, a snippet file that is not there, a docstring the API
reference cannot render, or a configuration key missing from the reference fails it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    # the pages a newcomer starts from, the tutorials and the generated API reference are there
    for page in (
        "index.html",
        "getting-started/install/index.html",
        "tutorials/windowed-revenue/index.html",
        "operating/configuration/index.html",
        "reference/streaming/index.html",
        "reference/sql/index.html",
    ):
        assert (site / page).is_file(), page
    api = (site / "reference" / "streaming" / "index.html").read_text()
    assert 'id="streaming.KGroupedStream.windowed_by"' in api
    # every public symbol of streaming and streaming.sql has its entry in the API reference
    import streaming
    import streaming.sql

    for module, page in ((streaming, "streaming"), (streaming.sql, "sql")):
        ids = set(
            re.findall(r'id="([\w.]+)"', (site / "reference" / page / "index.html").read_text())
        )
        names = {i.rsplit(".", 1)[-1] for i in ids if i.startswith("streaming.")}
        missing = [n for n in module.__all__ if n not in names and n != "serdes"]
        assert missing == [], f"reference/{page} lacks {missing}"
    tutorial = (site / "tutorials" / "windowed-revenue" / "index.html").read_text()
    assert "TimeWindows" in tutorial and "TUMBLE" in tutorial  # the included code is there


def test_nested_lists_are_indented_as_python_markdown_nests_them() -> None:
    """Python-Markdown (MkDocs) nests a list in a list item at 4 spaces; a list indented 2
    spaces, as GitHub nests it, renders flattened into its parent list."""
    flat = []
    for page in (REPO / "docs").rglob("*.md"):
        fenced = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif not fenced and re.match(r"^ {1,3}([-*+]|\d+\.) ", line):
                flat.append(f"{page.relative_to(REPO)}:{number}")
    assert flat == []
