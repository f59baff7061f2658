"""The exceptions a user of ``streaming`` catches, in one place (Kafka's
``org.apache.kafka.streams.errors`` and ``ConfigException``); the runtime's internal task
failures stay in ``streaming.runtime.failures``."""

from __future__ import annotations


class StreamsException(RuntimeError):
    """A processing failure, with the node and record that caused it."""


class TopologyException(StreamsException, ValueError):
    """An invalid topology: the message says what to fix."""


class IllegalStateException(RuntimeError):
    """The call is not allowed in the application's current state."""


class InvalidStateStoreException(RuntimeError):
    """The store cannot be queried (unknown name, or the application is not running)."""


class ConfigException(ValueError):
    """An invalid configuration: the message names the key and what to fix."""


class SerializationError(ValueError):
    """Raised when bytes cannot be decoded (or a value cannot be encoded) by a serde."""


__all__ = [
    "ConfigException",
    "IllegalStateException",
    "InvalidStateStoreException",
    "SerializationError",
    "StreamsException",
    "TopologyException",
]
