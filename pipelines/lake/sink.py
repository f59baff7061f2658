"""The lake sink: consume topics from their manifest offsets up to the end, land Parquet.

``sink_topic(kafka, topic, lake)`` assigns every partition of ``topic`` at the
manifest's ``next_offset`` (no consumer group: the manifest is the only position), reads
``read_committed`` until each partition's end as of the start of the run, and lands
batches of at most ``batch_size`` records per partition. Re-running lands only what is new.

Before reading, the manifest checks it still refers to this cluster (``Manifest.
follow_cluster``): on another cluster (or a re-created topic) it logs a warning, the result
carries ``cluster_change`` ("cluster changed from X to Y: re-landing from the earliest
offset ...") and everything the topic holds is landed again, never a silent "landed 0".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.connection import Kafka, KafkaConnection
from pipelines.lake.manifest import locked
from pipelines.lake.paths import lake_root
from pipelines.lake.records import Decoder, KafkaRecord, value_decoder
from pipelines.lake.writer import land_partition
from pipelines.schemas import JSON, RawFormat

log = logging.getLogger(__name__)


@dataclass
class SinkResult:
    """What one sink run landed for one topic."""

    topic: str
    records: int = 0
    files: list[Path] = field(default_factory=list)
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    total_rows: int = 0
    #: the Kafka cluster read (``cluster.id`` of the metadata), None if the broker hides it
    cluster_id: str | None = None
    #: set when the lake's offsets referred to another cluster (or a re-created topic)
    cluster_change: str | None = None
    #: partition -> high watermark at the start of the run, and the lake's next offset after
    end_offsets: dict[int, int] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)
    #: partition -> (first, last) offsets deleted by retention before they were landed
    gaps: dict[int, tuple[int, int]] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: what landed, from which cluster, and where the lake stands."""
        line = (
            f"landed {self.records} records of {self.topic} in {len(self.files)} files "
            f"from cluster {self.cluster_id}"
        )
        if self.records == 0:
            line += (
                f"; nothing new: the lake holds offsets up to {self.next_offsets} and the "
                f"topic ends at {self.end_offsets}"
            )
        if self.cluster_change:
            line += f" ({self.cluster_change})"
        if self.gaps:
            line += f"; never landed, deleted by retention first: {self.gaps}"
        return line


def sink_topic(
    kafka: Kafka,
    topic: str,
    lake: Path | None = None,
    *,
    batch_size: int = 50_000,
    timeout: float = 60.0,
    consumer_config: dict[str, Any] | None = None,
    lake_topic: str | None = None,
    raw_format: RawFormat = JSON,
) -> SinkResult:
    """Land everything of ``topic`` not yet in the lake; returns what was landed.

    ``lake_topic``: the lake topic to land it as (default ``topic``), e.g. a renamed copy of
    a platform topic (``orders`` written to ``run-7-orders``) landed as the platform topic,
    typed by its schema. ``raw_format``: how the raw topics' values are written (Avro ones
    are read through the schema registry and typed by their ``.avsc``).
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    lake = lake_root(lake)
    result = SinkResult(topic)
    consumer = Consumer(
        {
            **KafkaConnection.of(kafka).client_config(),
            "group.id": f"lake-sink-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            **(consumer_config or {}),
        }
    )
    decode = value_decoder(lake_topic or topic, raw_format, topic)
    try:
        with locked(lake, lake_topic or topic) as manifest:
            cluster = consumer.list_topics(topic, timeout=timeout)
            meta = cluster.topics.get(topic)
            if meta is None or meta.error is not None:
                raise RuntimeError(f"topic {topic!r} is not available: {meta and meta.error}")
            watermarks = {
                partition: consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout
                )
                for partition in sorted(meta.partitions)
            }
            result.cluster_id = cluster.cluster_id
            result.end_offsets = {p: high for p, (_, high) in watermarks.items()}
            check = manifest.follow_cluster(cluster.cluster_id, result.end_offsets)
            if check.changed:
                manifest.save(lake)  # a new generation is on disk before any of its files
            if check.message:
                result.cluster_change = check.message
                log.warning("lake sink of %s: %s", topic, check.message)
            targets: dict[int, int] = {}
            starts: dict[int, int] = {}
            for partition, (low, high) in watermarks.items():
                if manifest.next_offset(partition) < low:
                    result.gaps[partition] = (manifest.next_offset(partition), low - 1)
                    log.warning(
                        "lake sink of %s: partition %d offsets %d..%d were deleted (retention) "
                        "before they were landed",
                        topic,
                        partition,
                        manifest.next_offset(partition),
                        low - 1,
                    )
                start = max(manifest.next_offset(partition), low)
                if start < high:
                    targets[partition] = high
                    starts[partition] = start
            if not targets:
                result.total_rows = manifest.total_rows()
                result.next_offsets = dict(manifest.next_offsets)
                return result
            consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
            lander = _Lander(raw_format, decode)
            buffers: dict[int, list[KafkaRecord]] = {p: [] for p in targets}
            positions = dict(starts)
            done: set[int] = set()
            deadline = time.monotonic() + timeout
            while len(done) < len(targets):
                messages = consumer.consume(num_messages=5000, timeout=0.5)
                if not messages and time.monotonic() > deadline:
                    raise TimeoutError(
                        f"sink of {topic!r} stalled at {positions} (targets {targets})"
                    )
                for message in messages:
                    partition, offset, error = (
                        message.partition(),
                        message.offset(),
                        message.error(),
                    )
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            assert partition is not None and offset is not None
                            # The readable end (the last stable offset under read_committed):
                            # offsets before it that were not delivered are transaction
                            # markers or aborted records. Records written since the run
                            # started lie before it too, skipped as past the target: they
                            # are the next run's, so the position stops at the target.
                            if partition in positions:
                                end = min(offset, targets[partition])
                                positions[partition] = max(positions[partition], end)
                                done.add(partition)
                            continue
                        raise RuntimeError(f"consuming {topic!r}: {error}")
                    assert partition is not None and offset is not None  # a record has both
                    if partition in done or partition not in targets:
                        continue
                    deadline = time.monotonic() + timeout
                    if offset >= targets[partition]:
                        done.add(partition)
                        continue
                    _, ts = message.timestamp()
                    buffers[partition].append(
                        KafkaRecord(partition, offset, ts, message.key(), message.value())
                    )
                    positions[partition] = offset + 1
                    if positions[partition] >= targets[partition]:
                        done.add(partition)
                    if len(buffers[partition]) >= batch_size:
                        _flush(lake, manifest, partition, buffers, positions, result, lander)
            for partition in targets:
                _flush(lake, manifest, partition, buffers, positions, result, lander)
            result.total_rows = manifest.total_rows()
            result.next_offsets = dict(manifest.next_offsets)
            return result
    finally:
        consumer.close()


@dataclass(frozen=True)
class _Lander:
    """How the sink's records are read: the values' format and their decoder."""

    raw_format: RawFormat
    decode: Decoder


def _flush(
    lake: Path,
    manifest: Any,
    partition: int,
    buffers: dict[int, list[KafkaRecord]],
    positions: dict[int, int],
    result: SinkResult,
    lander: _Lander,
) -> None:
    """Land the buffered records of ``partition`` and advance the manifest."""
    records = buffers[partition]
    buffers[partition] = []
    if not records and positions[partition] <= manifest.next_offset(partition):
        return
    result.files.extend(
        land_partition(
            lake,
            manifest,
            partition,
            records,
            positions[partition],
            lander.raw_format,
            lander.decode,
        )
    )
    result.records += len(records)
    if records:
        first, _ = result.ranges.get(partition, (records[0].offset, 0))
        result.ranges[partition] = (first, records[-1].offset)


def sink_topics(
    kafka: Kafka,
    topics: list[str] | Mapping[str, str],
    lake: Path | None = None,
    **kwargs: Any,
) -> dict[str, SinkResult]:
    """``sink_topic`` for each of ``topics``: topic names, or a mapping Kafka topic -> lake
    topic (``lake_topic``)."""
    targets = dict(topics) if isinstance(topics, Mapping) else {t: t for t in topics}
    return {
        topic: sink_topic(kafka, topic, lake, lake_topic=lake_topic, **kwargs)
        for topic, lake_topic in targets.items()
    }
