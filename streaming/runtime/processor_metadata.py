"""Per-task processor metadata committed with the input offsets (Kafka's KIP-825).

Kafka Streams keeps small facts a processor must not forget across a task migration or a
crash, such as the last window close time a windowed aggregation emitted final results up to
(``EmitStrategy.on_window_close``), in the task's ``ProcessorMetadata``: a ``str -> long`` map
committed together with the input offsets, as the offset commit's ``metadata`` string of each
of the task's input partitions. Under exactly-once it is part of the transaction, so it always
matches the committed output. A task created later (on another instance, or after a crash)
reads its input partitions' committed metadata back and takes, per key, the largest value.

The encoding is Kafka's ``TopicPartitionMetadata`` (so a Java application reads ours and
vice versa): base64 (standard alphabet, padded) of

- a version byte (1: partition time only; 2: partition time and processor metadata),
- the partition time, int64 big-endian (-1 when unknown),
- version 2: the processor metadata, empty when there is none, else an int32 entry count and
  per entry the int32 length of the UTF-8 key, the key, and the int64 value.

Unknown versions and undecodable strings (metadata another tool committed) are ignored, as
Kafka does: the partition time is unknown and the processor metadata empty.
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct
from collections.abc import Iterable, Iterator, Mapping

log = logging.getLogger(__name__)

#: Kafka's ``RecordQueue.UNKNOWN``
UNKNOWN = -1
VERSION_PARTITION_TIME = 1
#: Kafka's ``TopicPartitionMetadata.LATEST_MAGIC_BYTE``
LATEST_VERSION = 2

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1


class ProcessorMetadata:
    """Kafka's ``ProcessorMetadata``: key -> int, with a flag telling it needs a commit."""

    __slots__ = ("_entries", "needs_commit")

    def __init__(self, entries: Mapping[str, int] | None = None) -> None:
        self._entries: dict[str, int] = dict(entries or {})
        self.needs_commit = False

    def add(self, key: str, value: int) -> None:
        """Kafka's ``addMetadata``: set ``key`` (the next commit carries it)."""
        value = int(value)
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise ValueError(f"processor metadata value out of the int64 range: {value}")
        self._entries[key] = value
        self.needs_commit = True

    def get(self, key: str) -> int | None:
        return self._entries.get(key)

    def update(self, other: ProcessorMetadata) -> None:
        """Merge ``other`` in, keeping the larger value per key (Kafka's ``update``)."""
        entries = self._entries
        for key, value in other._entries.items():
            current = entries.get(key)
            if current is None or current < value:
                entries[key] = value

    def items(self) -> Iterator[tuple[str, int]]:
        return iter(self._entries.items())

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProcessorMetadata) and self._entries == other._entries

    def __repr__(self) -> str:
        return f"ProcessorMetadata({self._entries!r}, needs_commit={self.needs_commit})"

    # -- bytes ----------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """Kafka's ``ProcessorMetadata.serialize`` (empty when there is no entry)."""
        if not self._entries:
            return b""
        parts = [_INT.pack(len(self._entries))]
        for key in sorted(self._entries):
            raw = key.encode()
            parts += (_INT.pack(len(raw)), raw, _LONG.pack(self._entries[key]))
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes) -> ProcessorMetadata:
        """Kafka's ``ProcessorMetadata.deserialize``; raises ``ValueError`` when malformed."""
        if not data:
            return cls()
        try:
            (count,) = _INT.unpack_from(data, 0)
            pos = 4
            if count < 0:
                raise ValueError(f"negative entry count {count}")
            entries = {}
            for _ in range(count):
                (size,) = _INT.unpack_from(data, pos)
                pos += 4
                if size < 0 or pos + size > len(data):
                    raise ValueError(f"bad key length {size}")
                key = data[pos : pos + size].decode()
                pos += size
                (entries[key],) = _LONG.unpack_from(data, pos)
                pos += 8
        except (struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"malformed processor metadata: {exc}") from exc
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} trailing bytes after the processor metadata")
        return cls(entries)


def encode(partition_time: int, metadata: ProcessorMetadata) -> str:
    """Kafka's ``TopicPartitionMetadata.encode``: the offset commit metadata string."""
    raw = bytes((LATEST_VERSION,)) + _LONG.pack(partition_time) + metadata.serialize()
    return base64.b64encode(raw).decode("ascii")


def decode(text: str | None) -> tuple[int, ProcessorMetadata]:
    """Kafka's ``TopicPartitionMetadata.decode``: (partition time, processor metadata).

    Never raises: a missing, foreign or unknown-version string gives ``(UNKNOWN, empty)``."""
    if not text:
        return UNKNOWN, ProcessorMetadata()
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
        if not raw:
            raise ValueError("empty")
        version = raw[0]
        if version == VERSION_PARTITION_TIME:
            (partition_time,) = _LONG.unpack_from(raw, 1)
            return partition_time, ProcessorMetadata()
        if version == LATEST_VERSION:
            (partition_time,) = _LONG.unpack_from(raw, 1)
            return partition_time, ProcessorMetadata.deserialize(raw[9:])
        log.warning(
            "Unsupported offset metadata version found. Supported version <= %s. Found version %s.",
            LATEST_VERSION,
            version,
        )
    except (ValueError, UnicodeEncodeError, binascii.Error, struct.error) as exc:
        log.warning("Unsupported offset metadata found: %s", exc)
    return UNKNOWN, ProcessorMetadata()


def merge(committed: Iterable[str | None]) -> tuple[int, ProcessorMetadata]:
    """Combine the committed metadata of a task's input partitions: the largest partition
    time and, per key, the largest value (Kafka's ``initializeTaskTimeAndProcessorMetadata``)."""
    time = UNKNOWN
    merged = ProcessorMetadata()
    for text in committed:
        partition_time, metadata = decode(text)
        time = max(time, partition_time)
        merged.update(metadata)
    merged.needs_commit = False
    return time, merged
