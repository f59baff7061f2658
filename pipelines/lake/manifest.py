"""The offset manifest: which offset ranges of each topic partition are in the lake.

One JSON file per topic, ``<lake>/_manifest/<topic>.json``, replaced atomically; a lock
file serialises sinks of the same topic. Parquet files are written before the manifest
moves on, and files beyond the manifest's ``next_offset`` are leftovers of an interrupted
run that ``Manifest.remove_orphans`` deletes, so a re-run never duplicates records.

Offsets only mean something on the cluster they came from, so the manifest also records the
Kafka cluster id. ``Manifest.follow_cluster`` checks it (and that no partition ends below
what was landed: a re-created topic) before every landing; when either changed, the landed
ranges are retired into ``previous`` (their files stay in the lake), the ``generation``
goes up (new part files are named ``...-g<n>.parquet``, so they never overwrite the old
ones) and landing restarts from the earliest offset, with a message saying so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.lake.paths import manifest_dir, parse_part_file, topic_dir


@dataclass(frozen=True)
class ClusterCheck:
    """What ``Manifest.follow_cluster`` found: ``message`` (None: nothing to say) when the
    lake's positions were reset; ``changed`` when the manifest must be saved."""

    changed: bool = False
    message: str | None = None


@dataclass
class Manifest:
    """The landed offset ranges of one topic: ``{partition: [[from, to, rows], ...]}``, the
    Kafka cluster they refer to, and the retired ranges of earlier clusters (``previous``)."""

    topic: str
    next_offsets: dict[int, int] = field(default_factory=dict)
    ranges: dict[int, list[list[int]]] = field(default_factory=dict)
    cluster_id: str | None = None
    generation: int = 0
    previous: list[dict[str, Any]] = field(default_factory=list)

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
            cluster_id=data.get("cluster_id"),
            generation=int(data.get("generation", 0)),
            previous=list(data.get("previous", [])),
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
                    "cluster_id": self.cluster_id,
                    "generation": self.generation,
                    "next_offsets": {str(p): o for p, o in sorted(self.next_offsets.items())},
                    "ranges": {str(p): r for p, r in sorted(self.ranges.items())},
                    "previous": self.previous,
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

    def current_rows(self) -> int:
        """Records landed from the current cluster (this generation), over every partition."""
        return sum(r[2] for ranges in self.ranges.values() for r in ranges)

    def total_rows(self) -> int:
        """Records in the lake: this generation's and those of earlier clusters."""
        return self.current_rows() + sum(int(g.get("rows", 0)) for g in self.previous)

    def follow_cluster(
        self, cluster_id: str | None, end_offsets: Mapping[int, int]
    ) -> ClusterCheck:
        """Make sure the landed offsets refer to what is read now: cluster ``cluster_id``
        whose partitions of the topic end at ``end_offsets`` (high watermarks).

        A first landing (or a manifest written before cluster ids were recorded, whose
        offsets still fit) adopts ``cluster_id``. Another cluster id, or a partition ending
        below the lake's ``next_offset`` (the topic was re-created, or the manifest predates
        cluster ids and the cluster was replaced), retires the landed ranges and restarts
        from the earliest offset: ``message`` says so."""
        went_back = sorted(
            (p, o, end_offsets.get(p, 0))
            for p, o in self.next_offsets.items()
            if o > end_offsets.get(p, 0)
        )
        if self.cluster_id is not None and cluster_id is not None and cluster_id != self.cluster_id:
            message = (
                f"cluster changed from {self.cluster_id} to {cluster_id}: re-landing from the "
                f"earliest offset ({self.current_rows()} records landed from "
                f"{self.cluster_id} stay in the lake)"
            )
        elif went_back:
            p, landed, end = went_back[0]
            if self.cluster_id is None and cluster_id is not None:
                what = f"cluster changed from an unrecorded one to {cluster_id}"
            else:
                what = f"topic {self.topic!r} was re-created on cluster {cluster_id}"
            message = (
                f"{what} (partition {p} ends at offset {end}, the lake holds offsets up to "
                f"{landed}): re-landing from the earliest offset ({self.current_rows()} "
                "records landed before stay in the lake)"
            )
        else:
            if cluster_id is not None and self.cluster_id != cluster_id:
                self.cluster_id = cluster_id
                return ClusterCheck(changed=True)
            return ClusterCheck()
        self._retire(cluster_id, message)
        return ClusterCheck(changed=True, message=message)

    def _retire(self, cluster_id: str | None, reason: str) -> None:
        """Move the landed ranges to ``previous`` and start a new generation."""
        if self.next_offsets or self.ranges:
            self.previous.append(
                {
                    "generation": self.generation,
                    "cluster_id": self.cluster_id,
                    "rows": self.current_rows(),
                    "next_offsets": {str(p): o for p, o in sorted(self.next_offsets.items())},
                    "ranges": {str(p): r for p, r in sorted(self.ranges.items())},
                    "retired_at_ms": int(time.time() * 1000),
                    "reason": reason,
                }
            )
            self.generation += 1
        self.next_offsets = {}
        self.ranges = {}
        self.cluster_id = cluster_id

    def remove_orphans(self, lake: Path) -> list[Path]:
        """Delete this generation's part files whose range starts at or after the
        partition's ``next_offset``, and files of a later generation (an interrupted run).
        Files of earlier generations (earlier clusters) are kept."""
        removed: list[Path] = []
        base = topic_dir(lake, self.topic)
        if not base.exists():
            return removed
        for path in base.glob("event_hour=*/part-*.parquet"):
            parsed = parse_part_file(path.name)
            if parsed is None:
                continue
            partition, first, _, generation = parsed
            if generation > self.generation or (
                generation == self.generation and first >= self.next_offset(partition)
            ):
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
