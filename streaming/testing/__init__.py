"""Testing without a broker: ``TopologyTestDriver`` and its topics."""

from streaming.testing.driver import (
    KeyValue,
    TestInputTopic,
    TestOutputTopic,
    TestRecord,
    TopologyTestDriver,
)

__all__ = ["KeyValue", "TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver"]
