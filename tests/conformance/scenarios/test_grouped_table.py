"""``KGroupedTable``: a port of Kafka Streams 4.1.1's ``KGroupedTableImplTest``
(org.apache.kafka.streams.kstream.internals).

Ported (7 of Kafka's 20 tests): the invalid store name checks of ``aggregate`` and
``reduce`` (``Materialized.as("~foo bar~")`` is a ``TopologyException``), ``reduce`` with a
named, an internal (generated) and a fully materialised store, and ``count`` / ``aggregate``
read back through the driver's key-value and timestamped key-value stores. The config is
``StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.Integer())``: a random
application id, a temporary state dir and String / Integer default serdes (given by their
Java class names, which the config accepts). Kafka's ``MockApiProcessorSupplier`` /
``MockApiProcessor.lastValueAndTimestampPerKey`` is a small Python processor supplier
keeping the same map (a null value removes the key).

Skipped (13 tests), Java null-argument checks with no Python counterpart:
``shouldNotAllowNull{Initializer,Adder,Subtractor}OnAggregate``,
``shouldNotAllowNull{Adder,Subtractor}OnReduce``,
``shouldThrowNullPointOnCountWhenMaterializedIsNull``,
``shouldThrowNullPointerOnReduceWhen{Materialized,Adder,Subtractor}IsNull`` and
``shouldThrowNullPointerOnAggregateWhen{Initializer,Adder,Subtractor,Materialized}IsNull``
all assert ``Objects.requireNonNull`` ``NullPointerException``s for ``null`` arguments (in
Python ``materialized=None`` is the documented "not given" default, and a ``null``
lambda is a Java overload/type artefact).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from scenario_utils import (
    STRING_ADDER,
    STRING_INIT,
    STRING_REMOVER,
    TOSTRING_ADDER,
    TOSTRING_REMOVER,
    MockApiProcessorSupplier,
)

from streaming import (
    Consumed,
    Grouped,
    KeyValue,
    Materialized,
    StreamsBuilder,
    TopologyException,
    TopologyTestDriver,
    serdes,
)
from streaming.state import ValueAndTimestamp

INVALID_STORE_NAME = "~foo bar~"
TOPIC = "input"


# MockInitializer.STRING_INIT, MockAggregator.TOSTRING_ADDER / TOSTRING_REMOVER


# MockReducer


def INTEGER_ADDER(value1: int, value2: int) -> int:
    return value1 + value2


def INTEGER_SUBTRACTOR(value1: int, value2: int) -> int:
    return value1 - value2


# MockMapper.selectValueKeyValueMapper()
def select_value_key_value_mapper(key: Any, value: Any) -> KeyValue:
    return KeyValue(value, value)


def int_projection(key: str, value: float) -> KeyValue:
    # (key, value) -> KeyValue.pair(key, value.intValue())
    return KeyValue(key, int(value))


@pytest.fixture
def props(tmp_path: Any) -> dict[str, Any]:
    # StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.Integer())
    return {
        "application.id": str(uuid.uuid4()),
        "bootstrap.servers": "localhost:9091",
        "default.key.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
        "default.value.serde": "org.apache.kafka.common.serialization.Serdes$IntegerSerde",
        "state.dir": str(tmp_path),
        "metrics.recording.level": "DEBUG",
    }


@pytest.fixture
def builder() -> StreamsBuilder:
    return StreamsBuilder()


@pytest.fixture
def grouped_table(builder: StreamsBuilder) -> Any:
    # before()
    return builder.table(
        "blah", consumed=Consumed.with_(serdes.String(), serdes.String())
    ).group_by(select_value_key_value_mapper)


def test_should_not_allow_invalid_store_name_on_aggregate(grouped_table: Any) -> None:
    with pytest.raises(TopologyException):
        grouped_table.aggregate(
            STRING_INIT,
            TOSTRING_ADDER,
            TOSTRING_REMOVER,
            Materialized.as_(INVALID_STORE_NAME),
        )


def test_should_not_allow_invalid_store_name_on_reduce(grouped_table: Any) -> None:
    with pytest.raises(TopologyException):
        grouped_table.reduce(STRING_ADDER, STRING_REMOVER, Materialized.as_(INVALID_STORE_NAME))


def get_reduced_results(input_k_table: Any) -> MockApiProcessorSupplier:
    supplier = MockApiProcessorSupplier()
    input_k_table.to_stream().process(supplier)
    return supplier


def assert_reduced(
    reduced_results: dict[str, ValueAndTimestamp], topic: str, driver: TopologyTestDriver
) -> None:
    input_topic = driver.create_input_topic(topic, serdes.String(), serdes.Double())
    input_topic.pipe_input("A", 1.1, 10)
    input_topic.pipe_input("B", 2.2, 11)

    assert reduced_results.get("A") == ValueAndTimestamp.make(1, 10)
    assert reduced_results.get("B") == ValueAndTimestamp.make(2, 11)

    input_topic.pipe_input("A", 2.6, 30)
    input_topic.pipe_input("B", 1.3, 30)
    input_topic.pipe_input("A", 5.7, 50)
    input_topic.pipe_input("B", 6.2, 20)

    assert reduced_results.get("A") == ValueAndTimestamp.make(5, 50)
    assert reduced_results.get("B") == ValueAndTimestamp.make(6, 30)


def test_should_reduce(builder: StreamsBuilder, props: dict[str, Any]) -> None:
    reduced = (
        builder.table(
            TOPIC,
            consumed=Consumed.with_(serdes.String(), serdes.Double()),
            materialized=Materialized.as_("store")
            .with_key_serde(serdes.String())
            .with_value_serde(serdes.Double()),
        )
        .group_by(int_projection)
        .reduce(INTEGER_ADDER, INTEGER_SUBTRACTOR, Materialized.as_("reduced"))
    )

    supplier = get_reduced_results(reduced)
    with TopologyTestDriver(builder.build(), props) as driver:
        assert_reduced(
            supplier.the_captured_processor().last_value_and_timestamp_per_key(), TOPIC, driver
        )
        assert reduced.queryable_store_name == "reduced"


def test_should_reduce_with_internal_store_name(
    builder: StreamsBuilder, props: dict[str, Any]
) -> None:
    reduced = (
        builder.table(
            TOPIC,
            consumed=Consumed.with_(serdes.String(), serdes.Double()),
            materialized=Materialized.as_("store")
            .with_key_serde(serdes.String())
            .with_value_serde(serdes.Double()),
        )
        .group_by(int_projection)
        .reduce(INTEGER_ADDER, INTEGER_SUBTRACTOR)
    )

    supplier = get_reduced_results(reduced)
    with TopologyTestDriver(builder.build(), props) as driver:
        assert_reduced(
            supplier.the_captured_processor().last_value_and_timestamp_per_key(), TOPIC, driver
        )
        assert reduced.queryable_store_name is None


def test_should_reduce_and_materialize_results(
    builder: StreamsBuilder, props: dict[str, Any]
) -> None:
    reduced = (
        builder.table(TOPIC, consumed=Consumed.with_(serdes.String(), serdes.Double()))
        .group_by(int_projection)
        .reduce(
            INTEGER_ADDER,
            INTEGER_SUBTRACTOR,
            Materialized.as_("reduce")
            .with_key_serde(serdes.String())
            .with_value_serde(serdes.Integer()),
        )
    )

    supplier = get_reduced_results(reduced)
    with TopologyTestDriver(builder.build(), props) as driver:
        assert_reduced(
            supplier.the_captured_processor().last_value_and_timestamp_per_key(), TOPIC, driver
        )
        reduce = driver.get_key_value_store("reduce")
        assert reduce.get("A") == 5
        assert reduce.get("B") == 6

        reduce = driver.get_timestamped_key_value_store("reduce")
        assert reduce.get("A") == ValueAndTimestamp.make(5, 50)
        assert reduce.get("B") == ValueAndTimestamp.make(6, 30)


def process_data(topic: str, driver: TopologyTestDriver) -> None:
    input_topic = driver.create_input_topic(topic, serdes.String(), serdes.String())
    input_topic.pipe_input("A", "1", 10)
    input_topic.pipe_input("B", "1", 50)
    input_topic.pipe_input("C", "1", 30)
    input_topic.pipe_input("D", "2", 40)
    input_topic.pipe_input("E", "2", 60)


def test_should_count_and_materialize_results(
    builder: StreamsBuilder, props: dict[str, Any]
) -> None:
    builder.table(TOPIC, consumed=Consumed.with_(serdes.String(), serdes.String())).group_by(
        select_value_key_value_mapper, Grouped.with_(serdes.String(), serdes.String())
    ).count(
        Materialized.as_("count").with_key_serde(serdes.String()).with_value_serde(serdes.Long())
    )

    with TopologyTestDriver(builder.build(), props) as driver:
        process_data(TOPIC, driver)

        counts = driver.get_key_value_store("count")
        assert counts.get("1") == 3
        assert counts.get("2") == 2

        counts = driver.get_timestamped_key_value_store("count")
        assert counts.get("1") == ValueAndTimestamp.make(3, 50)
        assert counts.get("2") == ValueAndTimestamp.make(2, 60)


def test_should_aggregate_and_materialize_results(
    builder: StreamsBuilder, props: dict[str, Any]
) -> None:
    builder.table(TOPIC, consumed=Consumed.with_(serdes.String(), serdes.String())).group_by(
        select_value_key_value_mapper, Grouped.with_(serdes.String(), serdes.String())
    ).aggregate(
        STRING_INIT,
        TOSTRING_ADDER,
        TOSTRING_REMOVER,
        Materialized.as_("aggregate")
        .with_value_serde(serdes.String())
        .with_key_serde(serdes.String()),
    )

    with TopologyTestDriver(builder.build(), props) as driver:
        process_data(TOPIC, driver)

        aggregate = driver.get_key_value_store("aggregate")
        assert aggregate.get("1") == "0+1+1+1"
        assert aggregate.get("2") == "0+2+2"

        aggregate = driver.get_timestamped_key_value_store("aggregate")
        assert aggregate.get("1") == ValueAndTimestamp.make("0+1+1+1", 50)
        assert aggregate.get("2") == ValueAndTimestamp.make("0+2+2", 60)
