"""A benchmark's results as a JSON file (``--json PATH``), which ``bench.charts`` draws.

Every file has the same envelope: ``benchmark`` (its name), ``meta`` (how and where it ran:
the command line, the UTC time, the machine's cores, plus the benchmark's own settings),
``summary`` (the lines the benchmark printed for tooling, exactly as printed) and
``results`` (one object per run, the benchmark's own fields)."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson


def run_meta(**settings: Any) -> dict[str, Any]:
    """Where and how this run happened, with the benchmark's ``settings``."""
    return {
        "command": " ".join(["python -m", _module_name(), *sys.argv[1:]]),
        "generated_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        **settings,
    }


def _module_name() -> str:
    """The ``-m`` module of this process (``bench.windowed_agg``), or its script."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec.name.removesuffix(".__main__") if spec is not None else sys.argv[0]


def write_json(
    path: Path,
    benchmark: str,
    meta: Mapping[str, Any],
    summary: Sequence[str],
    results: Sequence[Mapping[str, Any]],
) -> None:
    """Write one benchmark's results to ``path`` (its folder is created)."""
    document = {
        "benchmark": benchmark,
        "meta": dict(meta),
        "summary": list(summary),
        "results": [dict(r) for r in results],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")


def read_json(path: Path, benchmark: str) -> dict[str, Any]:
    """A results file written by ``write_json`` for ``benchmark``."""
    document = orjson.loads(path.read_bytes())
    if not isinstance(document, dict) or document.get("benchmark") != benchmark:
        raise ValueError(f"{path} holds no {benchmark} results")
    return document
