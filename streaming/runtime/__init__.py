"""Running topologies: tasks, their context, punctuation, and ``KafkaStreams``."""

from streaming.errors import StreamsException
from streaming.runtime.task import ConsumerRecord, StreamTask

__all__ = ["ConsumerRecord", "StreamTask", "StreamsException"]
