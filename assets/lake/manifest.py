"""The offset manifest: which offset ranges of each topic partition are in the lake.

One JSON file per topic, ``<lake>/_manifest/<topic>.json``, replaced atomically; a lock
file serialises sinks of the same topic. Parquet files are written before the manifest
moves on, and files beyond the manifest's ``next_offset`` are leftovers of an interrupted
run that ``Manifest.remove_orphans`` deletes, so a re-run never duplicates records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from assets.lake.paths import manifest_dir, parse_part_file_name, topic_dir


@dataclass
class Manifest:
    """The landed offset ranges of one topic: ``{partition: [[from, to, rows], ...]}``."""

    topic: str
    next_offsets: dict[int, int] = field(default_factory=dict)
    ranges: dict[int, list[list[int]]] = field(default_factory=dict)

    @staticmethod
    def path(lake: Path, topic: str) -> Path:
        """The manifest file of ``topic``."""
        return manifest_dir(lake) / f"{topic}.json"

    @classmethod
    def load(cls, lake: Path, topic: str) -> Manifest:
        """The manifest of ``topic`` (empty when none was written)."""
        path = cls.path(lake, topic)
        if not path.exists():
            return cls(topic)
        data = json.loads(path.read_text())
        return cls(
            topic,
            {int(p): int(o) for p, o in data["next_offsets"].items()},
            {int(p): r for p, r in data["ranges"].items()},
        )

    def save(self, lake: Path) -> None:
        """Write the manifest atomically."""
        path = self.path(lake, self.topic)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(
            json.dumps(
                {
                    "topic": self.topic,
                    "next_offsets": {str(p): o for p, o in sorted(self.next_offsets.items())},
                    "ranges": {str(p): r for p, r in sorted(self.ranges.items())},
                },
                indent=1,
            )
        )
        os.replace(tmp, path)

    def next_offset(self, partition: int) -> int:
        """The first offset of ``partition`` not yet in the lake."""
        return self.next_offsets.get(partition, 0)

    def record(self, partition: int, first: int, last: int, rows: int, next_offset: int) -> None:
        """Note that offsets ``first..last`` (``rows`` records) landed; resume at ``next_offset``."""
        if rows:
            self.ranges.setdefault(partition, []).append([first, last, rows])
        self.next_offsets[partition] = max(next_offset, self.next_offset(partition))

    def total_rows(self) -> int:
        """Records landed over every partition."""
        return sum(r[2] for ranges in self.ranges.values() for r in ranges)

    def remove_orphans(self, lake: Path) -> list[Path]:
        """Delete part files whose range starts at or after the partition's ``next_offset``."""
        removed = []
        base = topic_dir(lake, self.topic)
        if not base.exists():
            return removed
        for path in base.glob("event_hour=*/part-*.parquet"):
            parsed = parse_part_file_name(path.name)
            if parsed is None:
                continue
            partition, first, _ = parsed
            if first >= self.next_offset(partition):
                path.unlink()
                removed.append(path)
        return removed


@contextlib.contextmanager
def locked(lake: Path, topic: str) -> Iterator[Manifest]:
    """Hold ``topic``'s lock, yield its manifest with orphan files already removed."""
    directory = manifest_dir(lake)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{topic}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            manifest = Manifest.load(lake, topic)
            manifest.remove_orphans(lake)
            yield manifest
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
