"""Global state for the test driver: Kafka's ``GlobalStateUpdateTask`` over a ``StreamTask``.

The global nodes of a topology (``Topology.global_node_names()``) run in a task of their
own. Each record of a global topic is deserialised by its source, processed at once with
its own timestamp (no timestamp extractor, no stream time), and the stores are flushed,
as Kafka's ``TopologyTestDriver.processGlobalRecord`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.runtime.partition_group import StampedRecord
from streaming.runtime.task import StreamTask
from streaming.topology.graph import Topology
from streaming.topology.processor import Headers


class GlobalStateTask:
    """Updates the global stores of a topology, one record at a time."""

    def __init__(
        self,
        topology: Topology,
        *,
        application_id: str,
        config: dict[str, Any],
        clock: Callable[[], int],
        cache: Any = None,
        caching_enabled: bool = True,
        state_dir: Any = None,
    ) -> None:
        self.topics = set(topology.global_topics())
        self._offsets: dict[str, int] = {}
        self._task = StreamTask(
            "global",
            topology,
            topology.global_node_names(),
            application_id=application_id,
            config=config,
            send=self._no_output,
            clock=clock,
            cache=cache,
            caching_enabled=caching_enabled,
            state_dir=state_dir,
        )

    @staticmethod
    def _no_output(topic: str, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"a global store processor cannot write to topic {topic}")

    def initialize(self) -> None:
        self._task.initialize()

    @property
    def stores(self) -> dict[str, Any]:
        """Store name -> the opened global store."""
        return self._task.context.stores

    def update(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers
    ) -> None:
        """Process one raw record of a global topic, then flush the global stores."""
        source = self._task.sources[topic]
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        record = StampedRecord(
            topic,
            0,
            offset,
            timestamp,
            source.key_serde.deserialize(topic, key),
            source.value_serde.deserialize(topic, value),
            headers,
        )
        self._task.process_stamped(record)
        self._task.flush()

    def close(self) -> None:
        self._task.close(flush=True)
