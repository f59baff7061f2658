"""MkDocs hook: the configuration reference lists exactly the keys ``StreamsConfig`` accepts.

``operating/configuration.md`` has a table of every key under "## Every key"; the build
fails (``PluginError``) when a key of ``streaming.runtime.config_keys.KNOWN_KEYS`` is
missing from it or the table names a key the runtime does not know, so the page cannot
drift from the config module. ``tests/unit/test_docs_config_reference.py`` runs the same
check without building the site."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

PAGE = "operating/configuration.md"
#: the checkout being built: its config module is the one the page must match, whichever
#: copy of ``streaming`` the environment has installed
ROOT = Path(__file__).resolve().parents[2]
_SECTION = "## Every key"
_ROW = re.compile(r"^\| `([^`]+)` \|", re.M)


def documented_keys(markdown: str) -> list[str]:
    """The keys of the table under "## Every key", in page order."""
    if _SECTION not in markdown:
        return []
    section = markdown.split(_SECTION, 1)[1].split("\n## ", 1)[0]
    return _ROW.findall(section)


def drift(markdown: str) -> tuple[set[str], set[str]]:
    """(keys the runtime knows that the page lacks, keys the page lists that it does not)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from streaming.runtime.config_keys import KNOWN_KEYS

    listed = set(documented_keys(markdown))
    return set(KNOWN_KEYS) - listed, listed - set(KNOWN_KEYS)


def page_text() -> str:
    """The reference page's source."""
    return (Path(__file__).resolve().parents[1] / PAGE).read_text()


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Fail the build when the reference page and the runtime's keys differ."""
    if page.file.src_uri != PAGE:
        return markdown
    missing, unknown = drift(markdown)
    if missing or unknown:
        from mkdocs.exceptions import PluginError

        raise PluginError(
            f"{PAGE} is out of date with streaming/runtime/config_keys.py: "
            f"missing {sorted(missing)}, not a key {sorted(unknown)}"
        )
    return markdown
