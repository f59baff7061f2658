"""Sliding-windowed ``TimeWindowedKStream``: a port of Kafka Streams 4.1.1's
``SlidingWindowedKStreamImplTest`` (org.apache.kafka.streams.kstream.internals).

Ported (8 of Kafka's 18 tests): ``count``, ``reduce`` and ``aggregate`` over
``SlidingWindows.ofTimeDifferenceAndGrace(100 ms, 1000 ms)`` seen through
``to_stream().process(...)`` (Kafka's ``MockApiProcessor.lastValueAndTimestampPerKey``),
the three stores read back through the driver's window and timestamped window stores
(``fetch("1", "2", 0, 1000)``; Java's ``Instant`` arguments are epoch milliseconds here),
the ``IllegalArgumentException`` (``ValueError``) for a retention smaller than window size
plus grace, and the dropping of windows outside the retention of a user-supplied
in-memory window store. The config is
``StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.String())``.

Skipped (10 tests), Java null-argument checks with no Python counterpart (``None`` means
"not given"): ``shouldThrowNullPointerOnAggregateIf{Initializer,Aggregator}IsNull``,
``shouldThrowNullPointerOnReduceIfReducerIsNull``,
``shouldThrowNullPointerOnMaterializedAggregateIf{Initializer,Aggregator,Materialized}IsNull``,
``shouldThrowNullPointerOnMaterializedReduceIf{Reducer,Materialized,Named}IsNull`` and
``shouldThrowNullPointerOnCountIfMaterializedIsNull``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from scenario_utils import (
    STRING_ADDER,
    STRING_INIT,
    TOSTRING_ADDER,
    MockApiProcessorSupplier,
    ms,
)

from streaming import (
    Consumed,
    Grouped,
    KeyValue,
    Materialized,
    SlidingWindows,
    StreamsBuilder,
    TimeWindow,
    TopologyTestDriver,
    Windowed,
    serdes,
)
from streaming.state import Stores, ValueAndTimestamp

TOPIC = "input"


# MockInitializer.STRING_INIT, MockAggregator.TOSTRING_ADDER, MockReducer.STRING_ADDER


@pytest.fixture
def props(tmp_path: Any) -> dict[str, Any]:
    # StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.String())
    return {
        "application.id": str(uuid.uuid4()),
        "bootstrap.servers": "localhost:9091",
        "default.key.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
        "default.value.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
        "state.dir": str(tmp_path),
        "metrics.recording.level": "DEBUG",
    }


@pytest.fixture
def builder() -> StreamsBuilder:
    return StreamsBuilder()


@pytest.fixture
def windowed_stream(builder: StreamsBuilder) -> Any:
    # before()
    stream = builder.stream(TOPIC, consumed=Consumed.with_(serdes.String(), serdes.String()))
    return stream.group_by_key(Grouped.with_(serdes.String(), serdes.String())).windowed_by(
        SlidingWindows.of_time_difference_and_grace(ms(100), ms(1000))
    )


def process_data(driver: TopologyTestDriver) -> None:
    input_topic = driver.create_input_topic(TOPIC, serdes.String(), serdes.String())
    input_topic.pipe_input("1", "1", 100)
    input_topic.pipe_input("1", "2", 150)
    input_topic.pipe_input("1", "3", 500)
    input_topic.pipe_input("2", "10", 200)
    input_topic.pipe_input("2", "20", 150)


def to_list(iterator: Any) -> list[Any]:  # StreamsTestUtils.toListAndCloseIterator
    return list(iterator)


def w(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, TimeWindow(start, end))


# ---------------------------------------------------------------------------- tests


def test_should_count_sliding_windows(
    builder: StreamsBuilder, props: dict[str, Any], windowed_stream: Any
) -> None:
    supplier = MockApiProcessorSupplier()
    windowed_stream.count().to_stream().process(supplier)

    with TopologyTestDriver(builder.build(), props) as driver:
        process_data(driver)
    last = supplier.the_captured_processor().last_value_and_timestamp_per_key()
    assert last.get(w("1", 0, 100)) == ValueAndTimestamp.make(1, 100)
    assert last.get(w("1", 101, 201)) == ValueAndTimestamp.make(1, 150)
    assert last.get(w("1", 50, 150)) == ValueAndTimestamp.make(2, 150)
    assert last.get(w("1", 400, 500)) == ValueAndTimestamp.make(1, 500)
    assert last.get(w("2", 100, 200)) == ValueAndTimestamp.make(2, 200)
    assert last.get(w("2", 50, 150)) == ValueAndTimestamp.make(1, 150)
    assert last.get(w("2", 151, 251)) == ValueAndTimestamp.make(1, 200)


def test_should_reduce_sliding_windows(
    builder: StreamsBuilder, props: dict[str, Any], windowed_stream: Any
) -> None:
    supplier = MockApiProcessorSupplier()
    windowed_stream.reduce(STRING_ADDER).to_stream().process(supplier)

    with TopologyTestDriver(builder.build(), props) as driver:
        process_data(driver)
    last = supplier.the_captured_processor().last_value_and_timestamp_per_key()
    assert last.get(w("1", 0, 100)) == ValueAndTimestamp.make("1", 100)
    assert last.get(w("1", 101, 201)) == ValueAndTimestamp.make("2", 150)
    assert last.get(w("1", 50, 150)) == ValueAndTimestamp.make("1+2", 150)
    assert last.get(w("1", 400, 500)) == ValueAndTimestamp.make("3", 500)
    assert last.get(w("2", 100, 200)) == ValueAndTimestamp.make("10+20", 200)
    assert last.get(w("2", 50, 150)) == ValueAndTimestamp.make("20", 150)
    assert last.get(w("2", 151, 251)) == ValueAndTimestamp.make("10", 200)


def test_should_aggregate_sliding_windows(
    builder: StreamsBuilder, props: dict[str, Any], windowed_stream: Any
) -> None:
    supplier = MockApiProcessorSupplier()
    windowed_stream.aggregate(
        STRING_INIT,
        TOSTRING_ADDER,
        Materialized.with_(serdes.String(), serdes.String()),
    ).to_stream().process(supplier)

    with TopologyTestDriver(builder.build(), props) as driver:
        process_data(driver)
    last = supplier.the_captured_processor().last_value_and_timestamp_per_key()
    assert last.get(w("1", 0, 100)) == ValueAndTimestamp.make("0+1", 100)
    assert last.get(w("1", 101, 201)) == ValueAndTimestamp.make("0+2", 150)
    assert last.get(w("1", 50, 150)) == ValueAndTimestamp.make("0+1+2", 150)
    assert last.get(w("1", 400, 500)) == ValueAndTimestamp.make("0+3", 500)
    assert last.get(w("2", 100, 200)) == ValueAndTimestamp.make("0+10+20", 200)
    assert last.get(w("2", 50, 150)) == ValueAndTimestamp.make("0+20", 150)
    assert last.get(w("2", 151, 251)) == ValueAndTimestamp.make("0+10", 200)


def test_should_materialize_count(
    builder: StreamsBuilder, props: dict[str, Any], windowed_stream: Any
) -> None:
    windowed_stream.count(
        Materialized.as_("count-store")
        .with_key_serde(serdes.String())
        .with_value_serde(serdes.Long())
    )

    with TopologyTestDriver(builder.build(), props) as driver:
        process_data(driver)

        window_store = driver.get_window_store("count-store")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        assert data == [
            KeyValue(w("1", 0, 100), 1),
            KeyValue(w("1", 50, 150), 2),
            KeyValue(w("1", 101, 201), 1),
            KeyValue(w("1", 400, 500), 1),
            KeyValue(w("2", 50, 150), 1),
            KeyValue(w("2", 100, 200), 2),
            KeyValue(w("2", 151, 251), 1),
        ]

        window_store = driver.get_timestamped_window_store("count-store")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        assert data == [
            KeyValue(w("1", 0, 100), ValueAndTimestamp.make(1, 100)),
            KeyValue(w("1", 50, 150), ValueAndTimestamp.make(2, 150)),
            KeyValue(w("1", 101, 201), ValueAndTimestamp.make(1, 150)),
            KeyValue(w("1", 400, 500), ValueAndTimestamp.make(1, 500)),
            KeyValue(w("2", 50, 150), ValueAndTimestamp.make(1, 150)),
            KeyValue(w("2", 100, 200), ValueAndTimestamp.make(2, 200)),
            KeyValue(w("2", 151, 251), ValueAndTimestamp.make(1, 200)),
        ]


def test_should_materialize_reduced(
    builder: StreamsBuilder, props: dict[str, Any], windowed_stream: Any
) -> None:
    windowed_stream.reduce(
        STRING_ADDER,
        Materialized.as_("reduced")
        .with_key_serde(serdes.String())
        .with_value_serde(serdes.String()),
    )

    with TopologyTestDriver(builder.build(), props) as driver:
        process_data(driver)

        window_store = driver.get_window_store("reduced")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        assert data == [
            KeyValue(w("1", 0, 100), "1"),
            KeyValue(w("1", 50, 150), "1+2"),
            KeyValue(w("1", 101, 201), "2"),
            KeyValue(w("1", 400, 500), "3"),
            KeyValue(w("2", 50, 150), "20"),
            KeyValue(w("2", 100, 200), "10+20"),
            KeyValue(w("2", 151, 251), "10"),
        ]

        window_store = driver.get_timestamped_window_store("reduced")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        assert data == [
            KeyValue(w("1", 0, 100), ValueAndTimestamp.make("1", 100)),
            KeyValue(w("1", 50, 150), ValueAndTimestamp.make("1+2", 150)),
            KeyValue(w("1", 101, 201), ValueAndTimestamp.make("2", 150)),
            KeyValue(w("1", 400, 500), ValueAndTimestamp.make("3", 500)),
            KeyValue(w("2", 50, 150), ValueAndTimestamp.make("20", 150)),
            KeyValue(w("2", 100, 200), ValueAndTimestamp.make("10+20", 200)),
            KeyValue(w("2", 151, 251), ValueAndTimestamp.make("10", 200)),
        ]


def test_should_materialize_aggregated(
    builder: StreamsBuilder, props: dict[str, Any], windowed_stream: Any
) -> None:
    windowed_stream.aggregate(
        STRING_INIT,
        TOSTRING_ADDER,
        Materialized.as_("aggregated")
        .with_key_serde(serdes.String())
        .with_value_serde(serdes.String()),
    )

    with TopologyTestDriver(builder.build(), props) as driver:
        process_data(driver)

        window_store = driver.get_window_store("aggregated")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        assert data == [
            KeyValue(w("1", 0, 100), "0+1"),
            KeyValue(w("1", 50, 150), "0+1+2"),
            KeyValue(w("1", 101, 201), "0+2"),
            KeyValue(w("1", 400, 500), "0+3"),
            KeyValue(w("2", 50, 150), "0+20"),
            KeyValue(w("2", 100, 200), "0+10+20"),
            KeyValue(w("2", 151, 251), "0+10"),
        ]

        window_store = driver.get_timestamped_window_store("aggregated")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        assert data == [
            KeyValue(w("1", 0, 100), ValueAndTimestamp.make("0+1", 100)),
            KeyValue(w("1", 50, 150), ValueAndTimestamp.make("0+1+2", 150)),
            KeyValue(w("1", 101, 201), ValueAndTimestamp.make("0+2", 150)),
            KeyValue(w("1", 400, 500), ValueAndTimestamp.make("0+3", 500)),
            KeyValue(w("2", 50, 150), ValueAndTimestamp.make("0+20", 150)),
            KeyValue(w("2", 100, 200), ValueAndTimestamp.make("0+10+20", 200)),
            KeyValue(w("2", 151, 251), ValueAndTimestamp.make("0+10", 200)),
        ]


def test_should_throw_illegal_argument_when_retention_is_too_small(windowed_stream: Any) -> None:
    with pytest.raises(ValueError):
        windowed_stream.aggregate(
            STRING_INIT,
            TOSTRING_ADDER,
            Materialized.as_("aggregated")
            .with_key_serde(serdes.String())
            .with_value_serde(serdes.String())
            .with_retention(ms(1)),
        )


def test_should_drop_windows_outside_of_retention(
    builder: StreamsBuilder, props: dict[str, Any], windowed_stream: Any
) -> None:
    store_supplier = Stores.in_memory_window_store("aggregated", ms(1200), ms(100), False)
    windowed_stream.aggregate(
        STRING_INIT,
        TOSTRING_ADDER,
        Materialized.as_(store_supplier)
        .with_key_serde(serdes.String())
        .with_value_serde(serdes.String())
        .with_caching_disabled(),
    )

    with TopologyTestDriver(builder.build(), props) as driver:
        input_topic = driver.create_input_topic(TOPIC, serdes.String(), serdes.String())

        input_topic.pipe_input("1", "2", 100)
        input_topic.pipe_input("1", "3", 500)
        input_topic.pipe_input("1", "4", 799)
        input_topic.pipe_input("1", "4", 1000)
        input_topic.pipe_input("1", "5", 2000)

        window_store = driver.get_window_store("aggregated")
        data = to_list(window_store.fetch("1", "1", 0, 10000))
        assert data == [
            KeyValue(w("1", 900, 1000), "0+4"),
            KeyValue(w("1", 1900, 2000), "0+5"),
        ]

        window_store = driver.get_timestamped_window_store("aggregated")
        data = to_list(window_store.fetch("1", "1", 0, 2000))
        assert data == [
            KeyValue(w("1", 900, 1000), ValueAndTimestamp.make("0+4", 1000)),
            KeyValue(w("1", 1900, 2000), ValueAndTimestamp.make("0+5", 2000)),
        ]
