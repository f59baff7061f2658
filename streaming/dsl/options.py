"""Operation options: ``Materialized``, ``Grouped``, ``Named``, ``Produced``, ``Repartitioned``...

Kafka Streams passes these as builder objects; here every DSL method also takes plain
keyword arguments, and these classes exist for users who prefer the Kafka style.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from streaming.time import to_millis


@dataclass(frozen=True)
class Named:
    """A user-chosen processor name."""

    name: str | None = None

    @staticmethod
    def as_(name: str) -> Named:
        return Named(name)


@dataclass(frozen=True)
class Materialized:
    """How a KTable/aggregation is stored: name, serdes, store kind, caching, logging."""

    store_name: str | None = None
    key_serde: Any = None
    value_serde: Any = None
    store_type: str = "rocksdb"  # "rocksdb" | "in_memory"
    caching_enabled: bool = True
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict)
    retention_ms: int | None = None
    store_supplier: Any = None
    versioned_history_retention_ms: int | None = None

    @staticmethod
    def as_(store_name_or_supplier: Any) -> Materialized:
        if isinstance(store_name_or_supplier, str):
            return Materialized(store_name=store_name_or_supplier)
        return Materialized(
            store_name=getattr(store_name_or_supplier, "name", None),
            store_supplier=store_name_or_supplier,
        )

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None) -> Materialized:
        return Materialized(key_serde=key_serde, value_serde=value_serde)

    @staticmethod
    def as_versioned(name: str, history_retention: int | timedelta) -> Materialized:
        return Materialized(
            store_name=name,
            versioned_history_retention_ms=to_millis(history_retention, "history retention"),
        )

    def with_key_serde(self, serde: Any) -> Materialized:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Materialized:
        return replace(self, value_serde=serde)

    def with_caching_enabled(self) -> Materialized:
        return replace(self, caching_enabled=True)

    def with_caching_disabled(self) -> Materialized:
        return replace(self, caching_enabled=False)

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> Materialized:
        return replace(self, logging_enabled=True, log_config=dict(config or {}))

    def with_logging_disabled(self) -> Materialized:
        return replace(self, logging_enabled=False, log_config={})

    def with_retention(self, retention: int | timedelta) -> Materialized:
        return replace(self, retention_ms=to_millis(retention, "retention"))

    def with_store_type(self, store_type: str) -> Materialized:
        if store_type not in ("rocksdb", "in_memory"):
            raise ValueError(f"store_type must be 'rocksdb' or 'in_memory', got {store_type!r}")
        return replace(self, store_type=store_type)

    def in_memory(self) -> Materialized:
        return self.with_store_type("in_memory")


def as_materialized(value: Materialized | str | None) -> Materialized:
    """Accept a ``Materialized``, a plain store name, or None."""
    if value is None:
        return Materialized()
    if isinstance(value, str):
        return Materialized(store_name=value)
    if isinstance(value, Materialized):
        return value
    raise TypeError(f"materialized must be a store name or Materialized, got {value!r}")


@dataclass(frozen=True)
class Grouped:
    """Serdes and name for a grouping (and the repartition topic it may create)."""

    name: str | None = None
    key_serde: Any = None
    value_serde: Any = None

    @staticmethod
    def as_(name: str) -> Grouped:
        return Grouped(name=name)

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None, name: str | None = None) -> Grouped:
        return Grouped(name=name, key_serde=key_serde, value_serde=value_serde)

    def with_name(self, name: str) -> Grouped:
        return replace(self, name=name)

    def with_key_serde(self, serde: Any) -> Grouped:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Grouped:
        return replace(self, value_serde=serde)


@dataclass(frozen=True)
class Repartitioned:
    """Name, serdes, partition count and partitioner of an explicit repartition."""

    name: str | None = None
    key_serde: Any = None
    value_serde: Any = None
    number_of_partitions: int | None = None
    partitioner: Any = None

    @staticmethod
    def as_(name: str) -> Repartitioned:
        return Repartitioned(name=name)

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None) -> Repartitioned:
        return Repartitioned(key_serde=key_serde, value_serde=value_serde)

    def with_number_of_partitions(self, n: int) -> Repartitioned:
        return replace(self, number_of_partitions=n)

    def with_stream_partitioner(self, partitioner: Any) -> Repartitioned:
        return replace(self, partitioner=partitioner)


@dataclass(frozen=True)
class Produced:
    """Serdes, partitioner and processor name of a sink."""

    key_serde: Any = None
    value_serde: Any = None
    partitioner: Any = None
    name: str | None = None

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None) -> Produced:
        return Produced(key_serde, value_serde)

    @staticmethod
    def as_(name: str) -> Produced:
        return Produced(name=name)


@dataclass(frozen=True)
class Consumed:
    """Serdes, timestamp extractor and processor name of a source."""

    key_serde: Any = None
    value_serde: Any = None
    timestamp_extractor: Any = None
    name: str | None = None

    @staticmethod
    def with_(key_serde: Any = None, value_serde: Any = None) -> Consumed:
        return Consumed(key_serde, value_serde)

    @staticmethod
    def as_(name: str) -> Consumed:
        return Consumed(name=name)


@dataclass(frozen=True)
class Branched:
    """A named branch of ``split()``, optionally transformed by a function or consumer."""

    name: str | None = None
    function: Any = None
    consumer: Any = None

    @staticmethod
    def as_(name: str) -> Branched:
        return Branched(name=name)

    @staticmethod
    def with_function(function: Any, name: str | None = None) -> Branched:
        return Branched(name=name, function=function)

    @staticmethod
    def with_consumer(consumer: Any, name: str | None = None) -> Branched:
        return Branched(name=name, consumer=consumer)
