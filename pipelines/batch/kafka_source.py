"""Spark's Kafka source over an offset range: the batch recompute of the kappa path.

The lake path (``pipelines.batch.read``) reads a topic's event hours from the Parquet lake;
:class:`KafkaSource` reads them straight from the Kafka topic with
``spark.read.format("kafka")`` and gives the DataFrame the lake gives (the topic's columns,
``_key``, ``_partition``, ``_offset``, ``_timestamp``, ``_valid``, ``_raw``,
``event_hour``; valid rows only), so the ``compute`` functions run unchanged on either.

- **Offsets by timestamp.** An event-time range ``[start, end)`` becomes one offset range
  per partition, resolved with confluent-kafka's ``Consumer.offsets_for_times``: from the
  first record with a timestamp at or after ``start - before_ms`` to the first at or after
  ``end + after_ms`` (exclusive). The slack covers out-of-order event times: a record may
  be sent up to the generator's ``GeneratorConfig.late_max_ms`` after its event time, and
  the stream waits ``domain.REVENUE_GRACE_MS`` on top (``after_ms`` = both). A partition
  without a record at or after a timestamp gets its end offset there (the last stable
  offset, read_committed), so every partition is listed in both ``startingOffsets`` and
  ``endingOffsets`` (Spark wants every partition of an assigned topic in both).
- **read_committed** (``kafka.isolation.level``): aborted transactions are never read,
  as in the lake sink.
- **Avro**: when the raw topics are Avro (``KafkaSource.raw_format``), a value is
  Confluent-framed: the 5-byte header (magic byte 0, 4-byte big-endian schema id) is
  stripped (``substring(value, 6)``) and the payload read with Spark's ``from_avro``
  (the spark-avro package, fetched with the Kafka source's jars), the writer schema the id
  names (the ids in the range, collected first, asked of the registry on the driver),
  resolved to the topic's ``.avsc``. A value without the header, with an unknown
  id or a payload ``from_avro`` cannot read is invalid and dropped, as below.
- **Decoding**: the value is parsed with ``from_json`` and the topic's schema
  (``read.value_ddl``, from ``domain.SCHEMAS``). A record whose value is not a JSON object
  of that schema, or lacks a required column (``domain.REQUIRED``), is invalid and dropped
  (the lake keeps such rows with ``_valid`` false; its readers drop them). The value types
  are Spark's, stricter than the lake's ``domain.parse_record``, which coerces: a value of
  another JSON type (a numeric string where a number belongs, a fraction in an integer
  column) makes the record invalid here, and a boolean in a string column reads ``true``
  (``True`` in the lake). The generator writes none of these.
- **Event time**: then the rows are filtered by event time (``event_time``, or
  ``domain.EVENT_TIME_COLUMN``) to ``[start, end)``: the rows of the lake's hour folders
  that the range covers (the same rows for hour-aligned ranges).

``KafkaSource.topics`` maps platform topic names (``domain.ORDERS``) to the Kafka topics to
read (as ``pipelines.generator.produce(topics=...)`` does), e.g. for a renamed copy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pipelines import domain
from pipelines.batch.read import spark_ddl, value_ddl
from pipelines.batch.session import ensure_kafka_source
from pipelines.batch.store import KAFKA
from pipelines.connection import Kafka, KafkaConnection
from pipelines.generator import GeneratorConfig
from pipelines.schemas import JSON, RawFormat, avro_schema_text

#: how long after its event time the generator may send a record (its late events)
LATE_MAX_MS = GeneratorConfig.late_max_ms
#: slack before a range's start and after its end (the end also waits for the grace)
BEFORE_MS = LATE_MAX_MS
AFTER_MS = LATE_MAX_MS + domain.REVENUE_GRACE_MS


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of every partition of one Kafka topic, and the timestamps
    they were resolved from (``None``: the beginning / the end of the partition)."""

    topic: str
    start: dict[int, int]
    end: dict[int, int]
    start_ms: int | None = None
    end_ms: int | None = None

    @property
    def records(self) -> int:
        """How many offsets the range spans (records, plus transaction markers)."""
        return sum(self.end[p] - self.start[p] for p in self.start)

    def spark_options(self) -> dict[str, str]:
        """``assign``, ``startingOffsets`` and ``endingOffsets`` of Spark's Kafka source,
        every partition listed explicitly."""
        partitions = sorted(self.start)
        return {
            "assign": json.dumps({self.topic: partitions}),
            "startingOffsets": json.dumps(
                {self.topic: {str(p): self.start[p] for p in partitions}}
            ),
            "endingOffsets": json.dumps({self.topic: {str(p): self.end[p] for p in partitions}}),
        }

    def summary(self) -> dict[str, Any]:
        """JSON-friendly: topic, timestamps and ``partition: [start, end)``."""
        return {
            "topic": self.topic,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "offsets": {str(p): [self.start[p], self.end[p]] for p in sorted(self.start)},
        }


def resolve_offsets(
    kafka: Kafka,
    topic: str,
    start_ms: int | None = None,
    end_ms: int | None = None,
    *,
    timeout: float = 30.0,
    consumer_config: Mapping[str, Any] | None = None,
) -> OffsetRange:
    """The offsets of ``topic``'s records from timestamp ``start_ms`` up to ``end_ms``.

    Per partition: ``start`` is the first offset whose record timestamp is at or after
    ``start_ms`` (the partition's first offset when ``None``), ``end`` the first at or after
    ``end_ms`` (exclusive; the end of the partition when ``None``). Either is the
    partition's end (its last stable offset) when no record is that late. Raises
    ``RuntimeError`` when the topic does not exist.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **KafkaConnection.of(kafka).client_config(),
            "group.id": f"kappa-batch-offsets-{topic}",  # never joined nor committed
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            **(consumer_config or {}),
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise RuntimeError(f"topic {topic!r} is not available: {meta and meta.error}")
        partitions = sorted(meta.partitions)
        # (low, end) per partition; under read_committed the end is the last stable offset
        # (librdkafka >= 1.7.1 honours isolation.level here and in offsets_for_times)
        bounds = {
            p: consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=timeout, cached=False
            )
            for p in partitions
        }

        def at(ts: int | None, otherwise: int) -> dict[int, int]:
            """Per partition: the first offset at or after ``ts`` (``bounds[p][otherwise]``
            when ``ts`` is None, the end when no record is that late)."""
            if ts is None:
                return {p: bounds[p][otherwise] for p in partitions}
            # a negative timestamp would mean "latest" / "earliest" to Kafka
            wanted = [TopicPartition(topic, p, max(0, ts)) for p in partitions]
            out = {}
            for tp in consumer.offsets_for_times(wanted, timeout=timeout):
                if tp.error is not None:
                    raise RuntimeError(f"offsets of {topic}[{tp.partition}] at {ts}: {tp.error}")
                low, end = bounds[tp.partition]
                offset = end if tp.offset < 0 else tp.offset  # -1: no record that late
                out[tp.partition] = min(max(offset, low), end)
            return out

        start = at(start_ms, 0)
        end = at(end_ms, 1)
    finally:
        consumer.close()
    start = {p: min(start[p], end[p]) for p in partitions}
    return OffsetRange(topic, start, end, start_ms, end_ms)


def schema_ids(raw: Any) -> list[int]:
    """The schema ids the Confluent-framed values of Spark Kafka rows ``raw`` name."""
    from pyspark.sql import functions as F

    value = F.col("value")
    framed = (F.length(value) > 5) & (F.substring(value, 1, 1) == F.unhex(F.lit("00")))
    ids = raw.filter(framed).select(
        F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long").alias("id")
    )
    return sorted(int(row["id"]) for row in ids.distinct().collect())


def writer_schemas(raw_format: RawFormat, ids: list[int]) -> dict[int, str]:
    """Schema id -> schema text of each of ``ids`` the registry knows (the writer schemas,
    found by id as Confluent's deserializers find them; an unknown id is left out, so its
    records are invalid)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    if raw_format.registry is None:
        return {}
    client = raw_format.registry.client()
    writers = {}
    for schema_id in ids:
        try:
            writers[schema_id] = client.get_schema(schema_id).schema_str
        except SchemaRegistryError as exc:
            if exc.http_status_code != 404:
                raise
    return writers


def avro_value(topic: str, writers: Mapping[int, str]) -> Any:
    """The Avro value of Confluent-framed Kafka rows as a struct of ``topic``'s ``.avsc``
    fields: the 5-byte header (magic byte 0, 4-byte schema id) stripped, the payload read by
    ``from_avro`` with the writer schema its id names, resolved to the ``.avsc`` (Avro's
    rules); NULL for a value without the header or with an id not in ``writers``."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    value = F.col("value")
    framed = (F.length(value) > 5) & (F.substring(value, 1, 1) == F.unhex(F.lit("00")))
    schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
    payload = F.expr("substring(value, 6)")
    options = {"mode": "PERMISSIVE", "avroSchema": avro_schema_text(topic)}
    parsed: Any = None
    for writer_id, writer in sorted(writers.items()):
        condition = framed & (schema_id == F.lit(writer_id))
        branch = from_avro(payload, writer, options)
        parsed = F.when(condition, branch) if parsed is None else parsed.when(condition, branch)
    if parsed is None:  # nothing registered: no value decodes
        parsed = F.from_json(F.lit(None).cast("string"), value_ddl(topic))
    return parsed


def decode(raw: Any, topic: str, writers: Mapping[int, str] | None = None) -> Any:
    """Spark Kafka rows (``key``, ``value``, ``partition``, ``offset``, ``timestamp``) as
    the valid rows of ``topic``'s lake table (``read.spark_ddl``'s columns): JSON values,
    or, with ``writers`` (schema id -> writer schema), Avro ones (``avro_value``)."""
    from pyspark.sql import functions as F

    columns = list(domain.SCHEMAS[topic])
    time_column = domain.EVENT_TIME_COLUMN.get(topic, "event_time")
    parsed = (
        F.from_json(F.col("value").cast("string"), value_ddl(topic), {"mode": "PERMISSIVE"})
        if writers is None
        else avro_value(topic, writers)
    )
    valid = F.col("_value").isNotNull()
    for name in domain.REQUIRED.get(topic, ()):
        valid = valid & F.col(f"_value.`{name}`").isNotNull()
    rows = (
        raw.select(
            parsed.alias("_value"),
            F.col("key").cast("string").alias("_key"),
            F.col("partition").cast("int").alias("_partition"),
            F.col("offset").cast("long").alias("_offset"),
            F.unix_millis(F.col("timestamp")).alias("_timestamp"),
        )
        .filter(valid)
        .select(
            *(F.col(f"_value.`{name}`").alias(name) for name in columns),
            "_key",
            "_partition",
            "_offset",
            "_timestamp",
            F.lit(True).alias("_valid"),
            F.lit(None).cast("string").alias("_raw"),
        )
    )
    # the lake's hour folder (UTC: DEFAULT_CONF's session time zone)
    hour = F.date_format(F.timestamp_millis(F.col(time_column)), "yyyy-MM-dd'T'HH")
    return rows.withColumn("event_hour", hour).select(
        *(F.col(name) for name in _ddl_columns(topic))
    )


def _ddl_columns(topic: str) -> list[str]:
    return [part.strip().split(" ")[0].strip("`") for part in spark_ddl(topic).split(",")]


def read_offsets(
    spark: Any,
    offsets: OffsetRange,
    kafka: Kafka,
    schema_topic: str,
    options: Mapping[str, str] | None = None,
    raw_format: RawFormat = JSON,
) -> Any:
    """The valid rows of ``offsets`` (records of topic ``offsets.topic`` decoded with
    ``schema_topic``'s schema), read with Spark's Kafka source under read_committed; an
    Avro topic (``raw_format``) with ``from_avro`` and the writer schemas registered for
    it."""
    if offsets.records == 0:
        return spark.createDataFrame([], spark_ddl(schema_topic))
    ensure_kafka_source(spark)
    reader = spark.read.format("kafka").option("kafka.isolation.level", "read_committed")
    settings = {
        **KafkaConnection.of(kafka).spark_options(),
        **offsets.spark_options(),
        **(options or {}),
    }
    for key, value in settings.items():
        reader = reader.option(key, value)
    raw = reader.load()
    writers = (
        writer_schemas(raw_format, schema_ids(raw)) if raw_format.is_avro(schema_topic) else None
    )
    return decode(raw, schema_topic, writers)


@dataclass
class KafkaSource:
    """Topics read from Kafka, as ``pipelines.batch.read`` reads them from the lake.

    ``topics``: platform topic -> Kafka topic (default: the same name); ``before_ms`` /
    ``after_ms``: the slack around an event-time range (see the module); ``options``:
    further options of Spark's Kafka source (``kafka.``-prefixed client settings too).
    Every range read is kept in ``ranges`` (for logs and metadata).
    """

    bootstrap_servers: Kafka
    topics: Mapping[str, str] = field(default_factory=dict)
    before_ms: int = BEFORE_MS
    after_ms: int = AFTER_MS
    options: Mapping[str, str] = field(default_factory=dict)
    consumer_config: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 30.0
    ranges: list[OffsetRange] = field(default_factory=list)
    #: how the raw topics' values are written (Avro ones are read with ``from_avro``)
    raw_format: RawFormat = JSON
    #: the batch source name its results are stored under (``pipelines.batch.store``)
    name: ClassVar[str] = KAFKA

    def kafka_topic(self, topic: str) -> str:
        """The Kafka topic holding platform topic ``topic``."""
        return self.topics.get(topic, topic)

    def offsets(self, topic: str, start_ms: int | None, end_ms: int | None) -> OffsetRange:
        """The offsets of ``topic`` holding event times ``[start_ms, end_ms)``, with slack
        (``None``: from the beginning / to the end)."""
        return resolve_offsets(
            self.bootstrap_servers,
            self.kafka_topic(topic),
            None if start_ms is None else start_ms - self.before_ms,
            None if end_ms is None else end_ms + self.after_ms,
            timeout=self.timeout,
            consumer_config=self.consumer_config,
        )

    def _read(self, spark: Any, topic: str, start_ms: int | None, end_ms: int | None) -> Any:
        offsets = self.offsets(topic, start_ms, end_ms)
        self.ranges.append(offsets)
        return read_offsets(
            spark, offsets, self.bootstrap_servers, topic, self.options, self.raw_format
        )

    def read_hours(self, spark: Any, topic: str, start_ms: int, end_ms: int) -> Any:
        """Valid rows of ``topic`` with event times in ``[start_ms, end_ms)``."""
        from pyspark.sql import functions as F

        time_column = domain.EVENT_TIME_COLUMN.get(topic, "event_time")
        frame = self._read(spark, topic, start_ms, end_ms)
        return frame.filter(
            (F.col(time_column) >= F.lit(start_ms)) & (F.col(time_column) < F.lit(end_ms))
        )

    def read_all(self, spark: Any, topic: str) -> Any:
        """Every valid row of ``topic`` (for small, compacted topics such as customers)."""
        return self._read(spark, topic, None, None)
