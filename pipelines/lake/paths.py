"""Where things live in the lake."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_LAKE = REPO / ".lake"
HOUR_FORMAT = "%Y-%m-%dT%H"
HOUR_MS = 3_600_000


def lake_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The lake root: ``root``, else ``.lake/`` in the repository."""
    return Path(root or DEFAULT_LAKE).resolve()


def hour_of(ts_ms: int) -> str:
    """The ``event_hour`` partition value (``YYYY-MM-DDTHH``, UTC) of epoch ms ``ts_ms``."""
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).strftime(HOUR_FORMAT)


def hour_start_ms(hour: str) -> int:
    """Epoch ms of the start of ``hour`` (``YYYY-MM-DDTHH`` or Dagster's ``YYYY-MM-DD-HH:MM``)."""
    if len(hour) > 13:  # Dagster hourly partition key, e.g. 2025-01-01-00:00
        parsed = datetime.strptime(hour, "%Y-%m-%d-%H:%M")
    else:
        parsed = datetime.strptime(hour, HOUR_FORMAT)
    return int(parsed.replace(tzinfo=UTC).timestamp() * 1000)


def topic_dir(lake: Path, topic: str) -> Path:
    """The folder of ``topic`` in ``lake``."""
    return lake / topic


def hour_dir(base: Path, hour: str) -> Path:
    """The ``event_hour=...`` folder of ``hour`` under ``base``."""
    return base / f"event_hour={hour}"


def part_file_name(partition: int, first: int, last: int, generation: int = 0) -> str:
    """``part-<partition>-<from>-<to>.parquet`` (offsets inclusive); from the manifest's
    generation 1 on (a Kafka cluster change, see ``manifest``) ``...-<to>-g<n>.parquet``, so
    the offsets of another cluster never overwrite files landed from an earlier one."""
    suffix = f"-g{generation}" if generation else ""
    return f"part-{partition}-{first}-{last}{suffix}.parquet"


def parse_part_file(name: str) -> tuple[int, int, int, int] | None:
    """``(partition, from, to, generation)`` of a part file name, or ``None``."""
    if not (name.startswith("part-") and name.endswith(".parquet")):
        return None
    pieces = name[len("part-") : -len(".parquet")].split("-")
    generation = 0
    if len(pieces) == 4 and pieces[3].startswith("g") and pieces[3][1:].isdigit():
        generation = int(pieces.pop()[1:])
    if len(pieces) != 3 or not all(p.isdigit() for p in pieces):
        return None
    return int(pieces[0]), int(pieces[1]), int(pieces[2]), generation


def batch_dir(lake: Path, result: str) -> Path:
    """The folder of batch result ``result``."""
    return lake / "batch" / result


def manifest_dir(lake: Path) -> Path:
    """The folder of the offset manifests."""
    return lake / "_manifest"
