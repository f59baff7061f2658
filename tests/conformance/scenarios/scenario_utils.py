"""Ports of Kafka Streams' test utilities shared by the ported Kafka tests (no tests here):
``MockApiProcessor(Supplier)``, ``KeyValueTimestamp``, and ``MockInitializer`` /
``MockAggregator`` / ``MockReducer`` / ``MockValueJoiner`` functions."""

from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any, NamedTuple

from streaming.state import ValueAndTimestamp
from streaming.topology.processor import Processor


def is_check_supplier_call() -> bool:
    """Kafka's ``StreamsTestUtils.isCheckSupplierCall``: the mock processor suppliers do not
    count the processors ``ApiUtils.checkSupplier`` (``check_supplier`` here) asks for."""
    return any(frame.function == "check_supplier" for frame in inspect.stack()[1:6])


def ms(millis: int) -> timedelta:  # Duration.ofMillis
    return timedelta(milliseconds=millis)


class KeyValueTimestamp(NamedTuple):
    key: Any
    value: Any
    timestamp: int


class MockApiProcessor(Processor):
    """Records what it processes, and the last value and timestamp per key."""

    def __init__(self) -> None:
        self._processed: list[KeyValueTimestamp] = []
        self._last: dict[Any, ValueAndTimestamp] = {}

    def process(self, record: Any) -> None:
        self._processed.append(KeyValueTimestamp(record.key, record.value, record.timestamp))
        if record.value is not None:
            self._last[record.key] = ValueAndTimestamp.make(record.value, record.timestamp)
        else:
            self._last.pop(record.key, None)

    def processed(self) -> list[KeyValueTimestamp]:
        return list(self._processed)

    def last_value_and_timestamp_per_key(self) -> dict[Any, ValueAndTimestamp]:
        return self._last


class MockApiProcessorSupplier:
    """Keeps every processor it made, except those ``check_supplier`` asked for."""

    def __init__(self) -> None:
        self.processors: list[MockApiProcessor] = []

    def __call__(self) -> MockApiProcessor:
        processor = MockApiProcessor()
        if not is_check_supplier_call():
            self.processors.append(processor)
        return processor

    def the_captured_processor(self) -> MockApiProcessor:
        return self.captured_processors(1)[0]

    def captured_processors(self, expected_number_of_processors: int) -> list[MockApiProcessor]:
        assert len(self.processors) == expected_number_of_processors, "the number of processors"
        return self.processors


def STRING_INIT() -> str:  # MockInitializer.STRING_INIT
    return "0"


def TOSTRING_ADDER(agg_key: Any, value: Any, aggregate: Any) -> str:  # MockAggregator
    return f"{aggregate}+{value}"


def TOSTRING_REMOVER(agg_key: Any, value: Any, aggregate: Any) -> str:  # MockAggregator
    return f"{aggregate}-{value}"


def STRING_ADDER(value1: str, value2: str) -> str:  # MockReducer
    return value1 + "+" + value2


def STRING_REMOVER(value1: str, value2: str) -> str:  # MockReducer
    return value1 + "-" + value2


def TOSTRING_JOINER(value1: Any, value2: Any) -> str:  # MockValueJoiner
    return f"{value1}+{value2}"
