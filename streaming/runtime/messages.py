"""What a consumed ``confluent_kafka.Message`` carries, typed as it is: a record names its
topic, partition and offset, an end-of-partition event its topic and partition, and a
changelog record has a key. The client's stubs type every one of them Optional."""

from __future__ import annotations

from typing import cast

from confluent_kafka import Message


def topic_partition(msg: Message) -> tuple[str, int]:
    """The (topic, partition) of a consumed record or partition event."""
    return cast("tuple[str, int]", (msg.topic(), msg.partition()))


def offset_of(msg: Message) -> int:
    """The offset of a consumed record."""
    return cast(int, msg.offset())


def changelog_entry(msg: Message) -> tuple[bytes, bytes | None, int]:
    """(key, value, timestamp) of a changelog record, as a store's restore callback takes
    them."""
    return cast(bytes, msg.key()), cast("bytes | None", msg.value()), msg.timestamp()[1]
