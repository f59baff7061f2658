"""Rows of a topic partition -> Parquet files per event hour, then the manifest moves on."""

from __future__ import annotations

import os
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.lake.manifest import Manifest, locked
from pipelines.lake.paths import hour_dir, part_file_name, topic_dir
from pipelines.lake.records import Decoder, KafkaRecord, arrow_schema, to_row, value_decoder
from pipelines.schemas import JSON, RawFormat


def write_table(path: Path, table: pa.Table) -> None:
    """Write ``table`` to ``path`` atomically (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def land_partition(
    lake: Path,
    manifest: Manifest,
    partition: int,
    records: Sequence[KafkaRecord],
    next_offset: int,
    raw_format: RawFormat = JSON,
    decode: Decoder | None = None,
) -> list[Path]:
    """Write ``records`` (one partition, offset order) and advance the manifest.

    The caller holds the topic's lock. Records below the manifest's ``next_offset`` are
    skipped, so landing the same range twice writes nothing the second time. ``raw_format``
    says how the values are written (``decode`` reads them; by default as ``raw_format``
    says, from the lake's topic).
    """
    start = manifest.next_offset(partition)
    fresh = [r for r in records if r.offset >= start]
    by_hour: dict[str, list[dict[str, Any]]] = defaultdict(list)
    decode = decode or value_decoder(manifest.topic, raw_format)
    for record in fresh:
        hour, row = to_row(manifest.topic, record, decode)
        by_hour[hour].append(row)
    schema = arrow_schema(manifest.topic, raw_format)
    written = []
    for hour, rows in sorted(by_hour.items()):
        first = min(r["_offset"] for r in rows)
        last = max(r["_offset"] for r in rows)
        path = hour_dir(topic_dir(lake, manifest.topic), hour) / part_file_name(
            partition, first, last, manifest.generation
        )
        write_table(path, pa.Table.from_pylist(rows, schema=schema))
        written.append(path)
    if fresh or next_offset > start:
        first = fresh[0].offset if fresh else start
        last = fresh[-1].offset if fresh else start
        manifest.record(partition, first, last, len(fresh), max(next_offset, start))
        manifest.save(lake)
    return written


def land_events(
    lake: Path,
    events: Iterable[Any],
    *,
    partitions: int = 4,
) -> dict[str, int]:
    """Land generator ``Event`` s directly (no broker), as if consumed from Kafka.

    Partitions come from a hash of the key and offsets count up per partition from the
    manifest, so fixtures go through the same files and manifest as the Kafka sink.
    Returns the number of records landed per topic.
    """
    per_topic: dict[str, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for event in events:
        key = b"" if event.key is None else event.key.encode()
        per_topic[event.topic][zlib.crc32(key) % partitions].append(event)
    counts = {}
    for topic, by_partition in per_topic.items():
        with locked(lake, topic) as manifest:
            landed = 0
            for partition, part_events in sorted(by_partition.items()):
                base = manifest.next_offset(partition)
                records = [
                    KafkaRecord(
                        partition,
                        base + i,
                        e.timestamp,
                        None if e.key is None else e.key.encode(),
                        e.value,
                    )
                    for i, e in enumerate(part_events)
                ]
                land_partition(lake, manifest, partition, records, base + len(records))
                landed += len(records)
            counts[topic] = landed
    return counts


EMPTY_HOUR = "empty"


def ensure_layout(lake: Path, topics: Iterable[str] | None = None) -> list[Path]:
    """Give every topic a zero-row ``event_hour=empty`` file with its schema.

    Readers that glob a topic (DuckDB views, dbt sources) then work before anything has
    landed, and see the right columns. The file holds no rows, so it changes no result.
    """
    from pipelines import domain

    created = []
    for topic in topics or (*domain.RAW_TOPICS, *domain.DERIVED_TOPICS):
        path = hour_dir(topic_dir(lake, topic), EMPTY_HOUR) / "part-empty.parquet"
        if not path.exists():
            write_table(path, arrow_schema(topic).empty_table())
            created.append(path)
    return created
