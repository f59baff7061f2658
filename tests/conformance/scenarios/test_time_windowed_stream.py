"""``TimeWindowedKStream``: a port of Kafka Streams 4.1.1's ``TimeWindowedKStreamImplTest``
(org.apache.kafka.streams.kstream.internals).

Ported (6 of Kafka's 16 tests, each run with Kafka's 4 parameter sets: emit strategy
``ON_WINDOW_UPDATE`` / ``ON_WINDOW_CLOSE`` x caching on / off): ``count``, ``reduce`` and
``aggregate`` of tumbling 500 ms windows seen through ``to_stream().process(...)``, and
the ``count`` / ``reduce`` / ``aggregate`` stores read back through the driver's window
and timestamped window stores (``fetch("1", "2", 0, 1000)``; Java's ``Instant`` arguments
are epoch milliseconds here). The config is
``StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.String())``: a random
application id, a temporary state dir and String default serdes (given by their Java
class names, which the config accepts). Kafka's ``MockApiProcessorSupplier`` /
``MockApiProcessor.processed()`` is a small Python supplier keeping the same list of
``KeyValueTimestamp``.

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
    KeyValueTimestamp,
    MockApiProcessorSupplier,
    ms,
)

from streaming import (
    Consumed,
    EmitStrategy,
    Grouped,
    KeyValue,
    Materialized,
    StreamsBuilder,
    TimeWindow,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
    serdes,
)
from streaming.state import ValueAndTimestamp

TOPIC = "input"
KEY_1_WINDOW_0 = Windowed("1", TimeWindow(0, 500))
KEY_1_WINDOW_1 = Windowed("1", TimeWindow(500, 1000))
KEY_2_WINDOW_1 = Windowed("2", TimeWindow(500, 1000))
KEY_2_WINDOW_2 = Windowed("2", TimeWindow(1000, 1500))

# data(): (StrategyType, withCache)
ON_WINDOW_UPDATE = EmitStrategy.ON_WINDOW_UPDATE
ON_WINDOW_CLOSE = EmitStrategy.ON_WINDOW_CLOSE
DATA = [
    (ON_WINDOW_UPDATE, True),
    (ON_WINDOW_UPDATE, False),
    (ON_WINDOW_CLOSE, True),
    (ON_WINDOW_CLOSE, False),
]
DATA_IDS = ["update-cache", "update-nocache", "close-cache", "close-nocache"]


def for_type(strategy_type: str) -> EmitStrategy:  # StrategyType.forType
    if strategy_type == ON_WINDOW_CLOSE:
        return EmitStrategy.on_window_close()
    return EmitStrategy.on_window_update()


# MockInitializer.STRING_INIT, MockAggregator.TOSTRING_ADDER, MockReducer.STRING_ADDER


def get_streams_config(tmp_path: Any) -> dict[str, Any]:
    # StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.String())
    return {
        "application.id": str(uuid.uuid4()),
        "bootstrap.servers": "localhost:9091",
        "default.key.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
        "default.value.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
        "state.dir": str(tmp_path),
        "metrics.recording.level": "DEBUG",
    }


class Fixture:
    """The test class's fields and ``setup(inputType, inputWithCache)``."""

    def __init__(self, input_type: str, input_with_cache: bool, tmp_path: Any) -> None:
        self.builder = StreamsBuilder()
        self.props = get_streams_config(tmp_path)
        self.type = input_type
        self.with_cache = input_with_cache
        self.emit_final = input_type == ON_WINDOW_CLOSE
        self.emit_strategy = for_type(input_type)
        stream = self.builder.stream(
            TOPIC, consumed=Consumed.with_(serdes.String(), serdes.String())
        )
        self.windowed_stream = stream.group_by_key(
            Grouped.with_(serdes.String(), serdes.String())
        ).windowed_by(TimeWindows.of_size_with_no_grace(ms(500)))

    def set_materialized_cache(self, materialized: Materialized) -> Materialized:
        if self.with_cache:
            return materialized.with_caching_enabled()
        return materialized.with_caching_disabled()


@pytest.fixture(params=DATA, ids=DATA_IDS)
def fx(request: pytest.FixtureRequest, tmp_path: Any) -> Fixture:
    input_type, input_with_cache = request.param
    return Fixture(input_type, input_with_cache, tmp_path)


def process_data(driver: TopologyTestDriver) -> None:
    input_topic = driver.create_input_topic(TOPIC, serdes.String(), serdes.String())
    input_topic.pipe_input("1", "1", 10)
    input_topic.pipe_input("1", "2", 15)
    input_topic.pipe_input("1", "3", 500)
    input_topic.pipe_input("2", "10", 550)
    input_topic.pipe_input("2", "20", 500)
    input_topic.pipe_input("2", "30", 1000)


def to_list(iterator: Any) -> list[Any]:  # StreamsTestUtils.toListAndCloseIterator
    return list(iterator)


# ---------------------------------------------------------------------------- tests


def test_should_count_windowed(fx: Fixture) -> None:
    supplier = MockApiProcessorSupplier()
    fx.windowed_stream.emit_strategy(fx.emit_strategy).count().to_stream().process(supplier)

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:
        process_data(driver)
    processed = supplier.the_captured_processor().processed()

    if fx.emit_final:
        assert processed == [
            KeyValueTimestamp(KEY_1_WINDOW_0, 2, 15),
            KeyValueTimestamp(KEY_1_WINDOW_1, 1, 500),
            KeyValueTimestamp(KEY_2_WINDOW_1, 2, 550),
        ]
    else:
        assert processed == [
            KeyValueTimestamp(KEY_1_WINDOW_0, 1, 10),
            KeyValueTimestamp(KEY_1_WINDOW_0, 2, 15),
            KeyValueTimestamp(KEY_1_WINDOW_1, 1, 500),
            KeyValueTimestamp(KEY_2_WINDOW_1, 1, 550),
            KeyValueTimestamp(KEY_2_WINDOW_1, 2, 550),
            KeyValueTimestamp(KEY_2_WINDOW_2, 1, 1000),
        ]


def test_should_reduce_windowed(fx: Fixture) -> None:
    supplier = MockApiProcessorSupplier()
    fx.windowed_stream.emit_strategy(fx.emit_strategy).reduce(STRING_ADDER).to_stream().process(
        supplier
    )

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:
        process_data(driver)

    processed = supplier.the_captured_processor().processed()
    if fx.emit_final:
        assert processed == [
            KeyValueTimestamp(KEY_1_WINDOW_0, "1+2", 15),
            KeyValueTimestamp(KEY_1_WINDOW_1, "3", 500),
            KeyValueTimestamp(KEY_2_WINDOW_1, "10+20", 550),
        ]
    else:
        assert processed == [
            KeyValueTimestamp(KEY_1_WINDOW_0, "1", 10),
            KeyValueTimestamp(KEY_1_WINDOW_0, "1+2", 15),
            KeyValueTimestamp(KEY_1_WINDOW_1, "3", 500),
            KeyValueTimestamp(KEY_2_WINDOW_1, "10", 550),
            KeyValueTimestamp(KEY_2_WINDOW_1, "10+20", 550),
            KeyValueTimestamp(KEY_2_WINDOW_2, "30", 1000),
        ]


def test_should_aggregate_windowed(fx: Fixture) -> None:
    supplier = MockApiProcessorSupplier()
    fx.windowed_stream.emit_strategy(fx.emit_strategy).aggregate(
        STRING_INIT,
        TOSTRING_ADDER,
        fx.set_materialized_cache(Materialized.with_(serdes.String(), serdes.String())),
    ).to_stream().process(supplier)

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:
        process_data(driver)

    processed = supplier.the_captured_processor().processed()

    if fx.emit_final:
        assert processed == [
            KeyValueTimestamp(KEY_1_WINDOW_0, "0+1+2", 15),
            KeyValueTimestamp(KEY_1_WINDOW_1, "0+3", 500),
            KeyValueTimestamp(KEY_2_WINDOW_1, "0+10+20", 550),
        ]
    else:
        assert processed == [
            KeyValueTimestamp(KEY_1_WINDOW_0, "0+1", 10),
            KeyValueTimestamp(KEY_1_WINDOW_0, "0+1+2", 15),
            KeyValueTimestamp(KEY_1_WINDOW_1, "0+3", 500),
            KeyValueTimestamp(KEY_2_WINDOW_1, "0+10", 550),
            KeyValueTimestamp(KEY_2_WINDOW_1, "0+10+20", 550),
            KeyValueTimestamp(KEY_2_WINDOW_2, "0+30", 1000),
        ]


def test_should_materialize_count(fx: Fixture) -> None:
    fx.windowed_stream.emit_strategy(fx.emit_strategy).count(
        fx.set_materialized_cache(
            Materialized.as_("count-store")
            .with_key_serde(serdes.String())
            .with_value_serde(serdes.Long())
        )
    )

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:
        process_data(driver)

        window_store = driver.get_window_store("count-store")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        if fx.with_cache:
            # with cache returns all records (expired from underneath as well) as part of
            # the merge process
            assert data == [
                KeyValue(Windowed("1", TimeWindow(0, 500)), 2),
                KeyValue(Windowed("1", TimeWindow(500, 1000)), 1),
                KeyValue(Windowed("2", TimeWindow(500, 1000)), 2),
                KeyValue(Windowed("2", TimeWindow(1000, 1500)), 1),
            ]
        else:
            # without cache, we get only non-expired record from underlying store.
            if not fx.emit_final:
                assert data == [KeyValue(Windowed("2", TimeWindow(1000, 1500)), 1)]
            else:
                assert data == [
                    KeyValue(Windowed("1", TimeWindow(500, 1000)), 1),
                    KeyValue(Windowed("2", TimeWindow(500, 1000)), 2),
                    KeyValue(Windowed("2", TimeWindow(1000, 1500)), 1),
                ]

        window_store = driver.get_timestamped_window_store("count-store")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        # the same values and logic described above applies here as well.
        if fx.with_cache:
            assert data == [
                KeyValue(Windowed("1", TimeWindow(0, 500)), ValueAndTimestamp.make(2, 15)),
                KeyValue(Windowed("1", TimeWindow(500, 1000)), ValueAndTimestamp.make(1, 500)),
                KeyValue(Windowed("2", TimeWindow(500, 1000)), ValueAndTimestamp.make(2, 550)),
                KeyValue(Windowed("2", TimeWindow(1000, 1500)), ValueAndTimestamp.make(1, 1000)),
            ]
        else:
            if not fx.emit_final:
                assert data == [
                    KeyValue(Windowed("2", TimeWindow(1000, 1500)), ValueAndTimestamp.make(1, 1000))
                ]
            else:
                assert data == [
                    KeyValue(Windowed("1", TimeWindow(500, 1000)), ValueAndTimestamp.make(1, 500)),
                    KeyValue(Windowed("2", TimeWindow(500, 1000)), ValueAndTimestamp.make(2, 550)),
                    KeyValue(
                        Windowed("2", TimeWindow(1000, 1500)), ValueAndTimestamp.make(1, 1000)
                    ),
                ]


def test_should_materialize_reduced(fx: Fixture) -> None:
    fx.windowed_stream.reduce(
        STRING_ADDER,
        fx.set_materialized_cache(
            Materialized.as_("reduced")
            .with_key_serde(serdes.String())
            .with_value_serde(serdes.String())
        ),
    )

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:
        process_data(driver)

        window_store = driver.get_window_store("reduced")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        if fx.with_cache:
            # with cache returns all records (expired from underneath as well) as part of
            # the merge process
            assert data == [
                KeyValue(Windowed("1", TimeWindow(0, 500)), "1+2"),
                KeyValue(Windowed("1", TimeWindow(500, 1000)), "3"),
                KeyValue(Windowed("2", TimeWindow(500, 1000)), "10+20"),
                KeyValue(Windowed("2", TimeWindow(1000, 1500)), "30"),
            ]
        else:
            # without cache, we get only non-expired record from underlying store.
            # actualFrom = observedStreamTime(1500) - retentionPeriod(1000) + 1 = 501.
            # only 1 record is non expired and would be returned.
            assert data == [KeyValue(Windowed("2", TimeWindow(1000, 1500)), "30")]

        window_store = driver.get_timestamped_window_store("reduced")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        # same logic/data as explained above.
        if fx.with_cache:
            assert data == [
                KeyValue(Windowed("1", TimeWindow(0, 500)), ValueAndTimestamp.make("1+2", 15)),
                KeyValue(Windowed("1", TimeWindow(500, 1000)), ValueAndTimestamp.make("3", 500)),
                KeyValue(
                    Windowed("2", TimeWindow(500, 1000)), ValueAndTimestamp.make("10+20", 550)
                ),
                KeyValue(Windowed("2", TimeWindow(1000, 1500)), ValueAndTimestamp.make("30", 1000)),
            ]
        else:
            assert data == [
                KeyValue(Windowed("2", TimeWindow(1000, 1500)), ValueAndTimestamp.make("30", 1000))
            ]


def test_should_materialize_aggregated(fx: Fixture) -> None:
    fx.windowed_stream.aggregate(
        STRING_INIT,
        TOSTRING_ADDER,
        fx.set_materialized_cache(
            Materialized.as_("aggregated")
            .with_key_serde(serdes.String())
            .with_value_serde(serdes.String())
        ),
    )

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:
        process_data(driver)

        window_store = driver.get_window_store("aggregated")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        if fx.with_cache:
            # with cache returns all records (expired from underneath as well) as part of
            # the merge process
            assert data == [
                KeyValue(Windowed("1", TimeWindow(0, 500)), "0+1+2"),
                KeyValue(Windowed("1", TimeWindow(500, 1000)), "0+3"),
                KeyValue(Windowed("2", TimeWindow(500, 1000)), "0+10+20"),
                KeyValue(Windowed("2", TimeWindow(1000, 1500)), "0+30"),
            ]
        else:
            # without cache, we get only non-expired record from underlying store.
            # actualFrom = observedStreamTime(1500) - retentionPeriod(1000) + 1 = 501.
            # only 1 record is non expired and would be returned.
            assert data == [KeyValue(Windowed("2", TimeWindow(1000, 1500)), "0+30")]

        window_store = driver.get_timestamped_window_store("aggregated")
        data = to_list(window_store.fetch("1", "2", 0, 1000))
        if fx.with_cache:
            assert data == [
                KeyValue(Windowed("1", TimeWindow(0, 500)), ValueAndTimestamp.make("0+1+2", 15)),
                KeyValue(Windowed("1", TimeWindow(500, 1000)), ValueAndTimestamp.make("0+3", 500)),
                KeyValue(
                    Windowed("2", TimeWindow(500, 1000)), ValueAndTimestamp.make("0+10+20", 550)
                ),
                KeyValue(
                    Windowed("2", TimeWindow(1000, 1500)), ValueAndTimestamp.make("0+30", 1000)
                ),
            ]
        else:
            assert data == [
                KeyValue(
                    Windowed("2", TimeWindow(1000, 1500)), ValueAndTimestamp.make("0+30", 1000)
                )
            ]
