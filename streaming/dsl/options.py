"""Operation options: ``Materialized``, ``Grouped``, ``Named``, ``Produced``, ``Repartitioned``...

Kafka Streams passes these as builder objects; here every DSL method also takes plain
keyword arguments, and these classes exist for users who prefer the Kafka style.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from streaming.errors import TopologyException
from streaming.time import to_millis

#: Kafka's ``Named.MAX_NAME_LENGTH`` (a topic name's limit)
MAX_NAME_LENGTH = 249


def validate_name(name: str) -> None:
    """Kafka's ``Named.validate``: store names become topic names (``<app>-<store>-changelog``),
    so they are held to Kafka's topic-name rules."""

    if not name:
        raise TopologyException("Name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopologyException('Name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise TopologyException(
            f"Name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, name: {name}"
        )
    if not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        raise TopologyException(
            f'Name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )


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
            validate_name(store_name_or_supplier)
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
        return Materialized.as_(value)
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

    def with_name(self, name: str) -> Repartitioned:
        return replace(self, name=name)

    def with_key_serde(self, key_serde: Any) -> Repartitioned:
        return replace(self, key_serde=key_serde)

    def with_value_serde(self, value_serde: Any) -> Repartitioned:
        return replace(self, value_serde=value_serde)

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

    def with_name(self, name: str) -> Produced:
        return replace(self, name=name)

    def with_key_serde(self, serde: Any) -> Produced:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Produced:
        return replace(self, value_serde=serde)

    def with_stream_partitioner(self, partitioner: Any) -> Produced:
        return replace(self, partitioner=partitioner)


def _java_str(obj: Any) -> str:
    return "null" if obj is None else str(obj)


def print_key_value(key: Any, value: Any) -> str:
    """``Printed``'s default line body, as Kafka formats it: ``key, value``."""
    return f"{_java_str(key)}, {_java_str(value)}"


@dataclass(frozen=True)
class Printed:
    """Where and how ``KStream.print`` writes each record (Kafka's ``Printed``): lines of
    ``[label]: key, value`` to standard output or to a file."""

    path: str | None = None
    label: str | None = None
    mapper: Callable[[Any, Any], str] = print_key_value
    name: str | None = None

    @staticmethod
    def to_sys_out() -> Printed:
        return Printed()

    @staticmethod
    def to_file(path: str | Path) -> Printed:
        """Lines go to ``path``, which is created (or emptied) now, as Kafka does."""
        text = str(path)
        if not text.strip():
            raise ValueError("filePath can't be an empty string")
        try:
            Path(text).write_text("", encoding="utf-8")
        except OSError as exc:
            raise TopologyException(f"Unable to write stream to file at [{text}] {exc}") from exc
        return Printed(path=text)

    def with_label(self, label: str) -> Printed:
        return replace(self, label=label)

    def with_key_value_mapper(self, mapper: Callable[[Any, Any], str]) -> Printed:
        """``mapper(key, value)`` makes the part of the line after the label."""
        return replace(self, mapper=mapper)

    def with_name(self, name: str) -> Printed:
        return replace(self, name=name)


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

    def with_name(self, name: str) -> Consumed:
        return replace(self, name=name)

    def with_key_serde(self, serde: Any) -> Consumed:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Consumed:
        return replace(self, value_serde=serde)

    def with_timestamp_extractor(self, extractor: Any) -> Consumed:
        return replace(self, timestamp_extractor=extractor)


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


@dataclass(frozen=True)
class Joined:
    """Serdes, processor name and grace period of a KStream-KTable join (Kafka's ``Joined``).

    The key and stream value serdes are used if the stream must be repartitioned; a grace period
    (versioned tables only) delays each stream record until stream time passes it plus grace.
    """

    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
    name: str | None = None
    grace_period_ms: int | None = None

    @staticmethod
    def with_(
        key_serde: Any = None,
        value_serde: Any = None,
        other_value_serde: Any = None,
        name: str | None = None,
        grace_period: int | timedelta | None = None,
    ) -> Joined:
        grace = None if grace_period is None else to_millis(grace_period, "grace period")
        return Joined(key_serde, value_serde, other_value_serde, name, grace)

    @staticmethod
    def as_(name: str) -> Joined:
        return Joined(name=name)

    def with_key_serde(self, serde: Any) -> Joined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> Joined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Any) -> Joined:
        return replace(self, other_value_serde=serde)

    def with_name(self, name: str) -> Joined:
        return replace(self, name=name)

    def with_grace_period(self, grace_period: int | timedelta) -> Joined:
        return replace(self, grace_period_ms=to_millis(grace_period, "grace period"))


@dataclass(frozen=True)
class StreamJoined:
    """Serdes, names, stores and logging of a KStream-KStream join (Kafka's ``StreamJoined``).

    ``name`` names the join's processors (and repartition topics); ``store_name`` its stores.
    Without serdes the stores use the default serdes. ``store_type`` ("rocksdb" | "in_memory",
    Kafka's ``withDslStoreSuppliers``) picks the kind of all three stores; ``this_store_supplier``
    / ``other_store_supplier`` (window stores retaining duplicates) replace the window stores.
    """

    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
    name: str | None = None
    store_name: str | None = None
    store_type: str | None = None
    this_store_supplier: Any = None
    other_store_supplier: Any = None
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def with_(
        key_serde: Any = None, value_serde: Any = None, other_value_serde: Any = None
    ) -> StreamJoined:
        return StreamJoined(key_serde, value_serde, other_value_serde)

    @staticmethod
    def as_(store_name: str) -> StreamJoined:
        return StreamJoined(store_name=store_name)

    @staticmethod
    def with_store_suppliers(this_store_supplier: Any, other_store_supplier: Any) -> StreamJoined:
        return StreamJoined(
            this_store_supplier=this_store_supplier, other_store_supplier=other_store_supplier
        )

    def with_name(self, name: str) -> StreamJoined:
        return replace(self, name=name)

    def with_store_name(self, store_name: str) -> StreamJoined:
        return replace(self, store_name=store_name)

    def with_key_serde(self, serde: Any) -> StreamJoined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Any) -> StreamJoined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Any) -> StreamJoined:
        return replace(self, other_value_serde=serde)

    def with_store_type(self, store_type: str) -> StreamJoined:
        if store_type not in ("rocksdb", "in_memory"):
            raise ValueError(f"store_type must be 'rocksdb' or 'in_memory', got {store_type!r}")
        return replace(self, store_type=store_type)

    def in_memory(self) -> StreamJoined:
        return self.with_store_type("in_memory")

    def with_this_store_supplier(self, supplier: Any) -> StreamJoined:
        return replace(self, this_store_supplier=supplier)

    def with_other_store_supplier(self, supplier: Any) -> StreamJoined:
        return replace(self, other_store_supplier=supplier)

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> StreamJoined:
        return replace(self, logging_enabled=True, log_config=dict(config or {}))

    def with_logging_disabled(self) -> StreamJoined:
        return replace(self, logging_enabled=False, log_config={})


@dataclass(frozen=True)
class TableJoined:
    """Name and partitioners of a foreign-key table join (Kafka's ``TableJoined``).

    ``partitioner(topic, key, value, n)`` partitions the left table's keys (responses);
    ``other_partitioner`` the foreign table's keys (subscriptions); None = the default.
    """

    partitioner: Any = None
    other_partitioner: Any = None
    name: str | None = None

    @staticmethod
    def with_(partitioner: Any = None, other_partitioner: Any = None) -> TableJoined:
        return TableJoined(partitioner, other_partitioner)

    @staticmethod
    def as_(name: str) -> TableJoined:
        return TableJoined(name=name)

    def with_partitioner(self, partitioner: Any) -> TableJoined:
        return replace(self, partitioner=partitioner)

    def with_other_partitioner(self, other_partitioner: Any) -> TableJoined:
        return replace(self, other_partitioner=other_partitioner)

    def with_name(self, name: str) -> TableJoined:
        return replace(self, name=name)
