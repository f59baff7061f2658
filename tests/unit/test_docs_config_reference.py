"""The configuration reference (docs/operating/configuration.md) lists exactly the keys
``StreamsConfig`` accepts: the docs build's hook (docs/hooks/config_reference.py) fails on
drift, and this test runs the same check without building the site."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from streaming.runtime.config_keys import KNOWN_KEYS

HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "config_reference.py"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_config_reference", HOOK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_page_lists_every_key_and_no_other() -> None:
    hook = _hook()
    listed = hook.documented_keys(hook.page_text())
    assert len(listed) == len(set(listed)), "a key is listed twice"
    assert set(listed) == set(KNOWN_KEYS)


def test_a_key_missing_from_the_page_is_reported() -> None:
    hook = _hook()
    text = hook.page_text()
    without = text.replace("| `poll.ms` |", "| poll.ms |")
    assert hook.drift(without) == ({"poll.ms"}, set())
    extra = text + "| `no.such.key` | 1 | nothing |\n"
    assert hook.drift(extra) == (set(), {"no.such.key"})
