"""``KStream``: a port of Kafka Streams 4.1.1's ``KStreamImplTest``
(org.apache.kafka.streams.kstream.internals), every test that pins outputs, topology
descriptions, names or serde behaviour.

Ported (29 of Kafka's 160 tests):

- ``shouldPreserveSerdesForOperators``: the key / value serde every operator hands on
  (Kafka's ``AbstractStream.keySerde()`` / ``valueSerde()`` are the ``key_serde`` /
  ``value_serde`` attributes; serdes are compared by identity, as Java's ``assertEquals``
  does for serde classes without ``equals``). The Java test is one method of 50 assertions;
  it is split here into one test per operator, every assertion kept, so that each
  operator's result shows on its own. The stream-stream joins use the deprecated
  ``JoinWindows.of(100 ms)``, as Kafka's test does (this project has ``JoinWindows.of``).
  Kafka's fixture also creates ``builder.globalTable("topic-2")`` next to
  ``builder.table("topic-2")`` (the topology is never built, so Kafka never validates
  it); that call is made where the global table is used, in the global-table join test.
- ``shouldUseRecordMetadataTimestampExtractorWithRepartition``: Kafka reads the source
  nodes of the built ``ProcessorTopology`` (application id ``X``); here the source nodes of
  ``Topology.source_nodes()``, topics decorated with ``Topology.decorate(topic, "X")``.
  Kafka's ``FailOnInvalidTimestamp`` (the record's own timestamp) is
  ``streaming.time.RecordTimestampExtractor`` (documented as its counterpart); a user
  source without an extractor has ``None``, as in Kafka.
- data through ``repartition(Repartitioned.with(...))``, ``to(topic, Produced)`` and a
  ``TopicNameExtractor`` (``record_context.topic`` is Java's ``context.topic()``);
- the repartition flag surviving a stream-global table join;
- ``merge`` of two and of four streams, and pattern sources (one and two patterns);
- the eight ``shouldNotAllowBadProcessSupplierOn{Process,ProcessValues}[WithStores]
  [WithNamed]`` checks (a supplier returning the same processor twice is an
  ``IllegalArgumentException``, ``ValueError`` here, whose message contains
  ``#get() must return a new object each time it is called.``);
- ``toTable`` (not materialised, materialised, key-changing, in a foreign-key join, a
  table-table join, a stream-table join, a ``groupBy().count()`` and a materialising
  ``mapValues``), ``process`` with a store added to the builder or brought by the
  supplier's ``stores()``, and ``processValues``: ``describe()`` texts verbatim, outputs and
  stores.

The config is ``StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.String())``.
``createInputTopic(..., Instant.ofEpochMilli(0L), Duration.ZERO)`` is
``create_input_topic(...).auto_advance(0, 0)``; ``Produced.valueSerde(serde)`` is
``Produced.with_(value_serde=serde)``; ``Instant`` timestamps are epoch milliseconds.

Skipped:

- 129 null-argument checks (``shouldNotAllowNull*`` of lines 133-1122 and 1594-1752:
  ``NullPointerException``s for ``null`` predicates, mappers, joiners, windows, serdes,
  ``Named``, ``Printed``, ``Produced``, ``Grouped``, ``Materialized``, ``Joined``,
  ``StreamJoined``, processor suppliers and store names); in Python ``None`` means "not
  given".
- ``shouldUseRecordMetadataTimestampExtractorWhenInternalRepartitioningTopicCreated`` and
  ``...CreatedWithRetention``: they build their join with the deprecated
  ``JoinWindows.of(...).grace(...)``, which this project never had (the property they check,
  the timestamp extractor of repartition sources, is the one checked by
  ``shouldUseRecordMetadataTimestampExtractorWithRepartition``).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from scenario_utils import (
    TOSTRING_JOINER,
    KeyValueTimestamp,
    MockApiProcessorSupplier,
    ms,
)

from streaming import (
    Consumed,
    FixedKeyProcessor,
    Grouped,
    Joined,
    JoinWindows,
    KeyValue,
    Materialized,
    Named,
    Processor,
    Produced,
    Repartitioned,
    StreamJoined,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
    serdes,
)
from streaming.state import Stores
from streaming.testing import TestRecord
from streaming.time import RecordTimestampExtractor


def select_value_key_value_mapper(key: Any, value: Any) -> KeyValue:
    # MockMapper.selectValueKeyValueMapper()
    return KeyValue(value, value)


class MockApiFixedKeyProcessor(FixedKeyProcessor):
    def process(self, record: Any) -> None:
        pass


class MockApiFixedKeyProcessorSupplier:
    def __init__(self) -> None:
        self.processors: list[MockApiFixedKeyProcessor] = []

    def __call__(self) -> MockApiFixedKeyProcessor:
        processor = MockApiFixedKeyProcessor()
        self.processors.append(processor)
        return processor


class Fixture:
    """The test class's fields and ``before()``."""

    def __init__(self, tmp_path: Any) -> None:
        self.string_consumed = Consumed.with_(serdes.String(), serdes.String())
        self.processor_supplier = MockApiProcessorSupplier()
        self.fixed_key_processor_supplier = MockApiFixedKeyProcessorSupplier()
        # StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.String())
        self.props: dict[str, Any] = {
            "application.id": str(uuid.uuid4()),
            "bootstrap.servers": "localhost:9091",
            "default.key.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
            "default.value.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
            "state.dir": str(tmp_path),
            "metrics.recording.level": "DEBUG",
        }
        self.my_serde = serdes.String()  # new Serdes.StringSerde()
        # before()
        self.builder = StreamsBuilder()
        self.test_stream = self.builder.stream("source")
        self.test_table = self.builder.table("topic")
        self.test_global_table = self.builder.global_table("global")


@pytest.fixture
def fx(tmp_path: Any) -> Fixture:
    return Fixture(tmp_path)


def as_map(store: Any) -> dict[Any, Any]:
    return dict(store.all())


# ---------------------------------------------------------------------------- serdes


class SerdesFixture:
    """``shouldPreserveSerdesForOperators``'s builder, stream and table."""

    def __init__(self) -> None:
        self.string_consumed = Consumed.with_(serdes.String(), serdes.String())
        self.my_serde = serdes.String()
        self.builder = StreamsBuilder()
        self.stream1 = self.builder.stream(["topic-1"], consumed=self.string_consumed)
        self.table1 = self.builder.table("topic-2", consumed=self.string_consumed)
        # ConsumedInternal(stringConsumed).keySerde() / valueSerde()
        self.consumed_key_serde = self.string_consumed.key_serde
        self.consumed_value_serde = self.string_consumed.value_serde


@pytest.fixture
def sf() -> SerdesFixture:
    return SerdesFixture()


def selector(key: str, value: str) -> str:
    return key


def flat_selector(key: str, value: str) -> list[KeyValue]:
    return [KeyValue(key, value)]


def mapper(value: str) -> str:
    return value


def flat_mapper(value: str) -> list[str]:
    return [value]


def joiner(value1: str, value2: str) -> str:
    return value1


def test_should_preserve_serdes_for_operators_filter(sf: SerdesFixture) -> None:
    assert sf.stream1.filter(lambda key, value: False).key_serde is sf.consumed_key_serde
    assert sf.stream1.filter(lambda key, value: False).value_serde is sf.consumed_value_serde

    assert sf.stream1.filter_not(lambda key, value: False).key_serde is sf.consumed_key_serde
    assert sf.stream1.filter_not(lambda key, value: False).value_serde is sf.consumed_value_serde


def test_should_preserve_serdes_for_operators_select_key_and_map(sf: SerdesFixture) -> None:
    assert sf.stream1.select_key(selector).key_serde is None
    assert sf.stream1.select_key(selector).value_serde is sf.consumed_value_serde

    assert sf.stream1.map(KeyValue).key_serde is None
    assert sf.stream1.map(KeyValue).value_serde is None

    assert sf.stream1.map_values(mapper).key_serde is sf.consumed_key_serde
    assert sf.stream1.map_values(mapper).value_serde is None

    assert sf.stream1.flat_map(flat_selector).key_serde is None
    assert sf.stream1.flat_map(flat_selector).value_serde is None

    assert sf.stream1.flat_map_values(flat_mapper).key_serde is sf.consumed_key_serde
    assert sf.stream1.flat_map_values(flat_mapper).value_serde is None


def test_should_preserve_serdes_for_operators_merge(sf: SerdesFixture) -> None:
    assert sf.stream1.merge(sf.stream1).key_serde is None
    assert sf.stream1.merge(sf.stream1).value_serde is None


def test_should_preserve_serdes_for_operators_repartition(sf: SerdesFixture) -> None:
    assert sf.stream1.repartition().key_serde is sf.consumed_key_serde
    assert sf.stream1.repartition().value_serde is sf.consumed_value_serde
    assert (
        sf.stream1.repartition(Repartitioned.with_(sf.my_serde, sf.my_serde)).key_serde
        is sf.my_serde
    )
    assert (
        sf.stream1.repartition(Repartitioned.with_(sf.my_serde, sf.my_serde)).value_serde
        is sf.my_serde
    )


def test_should_preserve_serdes_for_operators_group_by(sf: SerdesFixture) -> None:
    assert sf.stream1.group_by_key().key_serde is sf.consumed_key_serde
    assert sf.stream1.group_by_key().value_serde is sf.consumed_value_serde
    assert sf.stream1.group_by_key(Grouped.with_(sf.my_serde, sf.my_serde)).key_serde is sf.my_serde
    assert (
        sf.stream1.group_by_key(Grouped.with_(sf.my_serde, sf.my_serde)).value_serde is sf.my_serde
    )

    assert sf.stream1.group_by(selector).key_serde is None
    assert sf.stream1.group_by(selector).value_serde is sf.consumed_value_serde
    assert (
        sf.stream1.group_by(selector, Grouped.with_(sf.my_serde, sf.my_serde)).key_serde
        is sf.my_serde
    )
    assert (
        sf.stream1.group_by(selector, Grouped.with_(sf.my_serde, sf.my_serde)).value_serde
        is sf.my_serde
    )


@pytest.mark.parametrize("operator", ["join", "left_join", "outer_join"])
def test_should_preserve_serdes_for_operators_stream_stream_join(
    sf: SerdesFixture, operator: str
) -> None:
    def op(*args: Any) -> Any:
        return getattr(sf.stream1, operator)(*args)

    my = StreamJoined.with_
    assert op(sf.stream1, joiner, JoinWindows.of(ms(100))).key_serde is None
    assert op(sf.stream1, joiner, JoinWindows.of(ms(100))).value_serde is None
    assert (
        op(
            sf.stream1, joiner, JoinWindows.of(ms(100)), my(sf.my_serde, sf.my_serde, sf.my_serde)
        ).key_serde
        is sf.my_serde
    )
    assert (
        op(
            sf.stream1, joiner, JoinWindows.of(ms(100)), my(sf.my_serde, sf.my_serde, sf.my_serde)
        ).value_serde
        is None
    )


@pytest.mark.parametrize("operator", ["join", "left_join"])
def test_should_preserve_serdes_for_operators_stream_table_join(
    sf: SerdesFixture, operator: str
) -> None:
    def op(*args: Any) -> Any:
        return getattr(sf.stream1, operator)(*args)

    my_joined = Joined.with_(sf.my_serde, sf.my_serde, sf.my_serde)
    assert op(sf.table1, joiner).key_serde is sf.consumed_key_serde
    assert op(sf.table1, joiner).value_serde is None
    assert op(sf.table1, joiner, my_joined).key_serde is sf.my_serde
    assert op(sf.table1, joiner, my_joined).value_serde is None


def test_should_preserve_serdes_for_operators_global_table_join(sf: SerdesFixture) -> None:
    table2 = sf.builder.global_table("topic-2", consumed=sf.string_consumed)

    assert sf.stream1.join(table2, selector, joiner).key_serde is sf.consumed_key_serde
    assert sf.stream1.join(table2, selector, joiner).value_serde is None

    assert sf.stream1.left_join(table2, selector, joiner).key_serde is sf.consumed_key_serde
    assert sf.stream1.left_join(table2, selector, joiner).value_serde is None


# ---------------------------------------------------------------------------- sources, sinks


def source_node(topology: Topology, application_id: str, topic: str) -> Any:
    """``ProcessorTopology.source(topic)`` of the topology built for ``application_id``."""
    for node in topology.source_nodes():
        if topic in [topology.decorate(t, application_id) for t in node.topics]:
            return node
    raise AssertionError(f"no source node reads {topic}")


def test_should_use_record_metadata_timestamp_extractor_with_repartition(fx: Fixture) -> None:
    builder = StreamsBuilder()
    stream1 = builder.stream(["topic-1", "topic-2"], consumed=fx.string_consumed)
    stream2 = builder.stream(["topic-3", "topic-4"], consumed=fx.string_consumed)

    stream1.to("topic-5")
    stream2.repartition(Repartitioned.as_("topic-6"))

    topology = builder.build()
    assert isinstance(
        source_node(topology, "X", "X-topic-6-repartition").timestamp_extractor,
        RecordTimestampExtractor,
    )
    assert source_node(topology, "X", "topic-4").timestamp_extractor is None
    assert source_node(topology, "X", "topic-3").timestamp_extractor is None
    assert source_node(topology, "X", "topic-2").timestamp_extractor is None
    assert source_node(topology, "X", "topic-1").timestamp_extractor is None


def test_should_send_data_through_repartition_topic_using_repartitioned(fx: Fixture) -> None:
    builder = StreamsBuilder()
    input_ = "topic"
    stream = builder.stream(input_, consumed=fx.string_consumed)
    stream.repartition(Repartitioned.with_(serdes.String(), serdes.String())).process(
        fx.processor_supplier
    )

    with TopologyTestDriver(builder.build(), fx.props) as driver:
        input_topic = driver.create_input_topic(
            input_, serdes.String(), serdes.String()
        ).auto_advance(0, 0)
        input_topic.pipe_input("a", "b")
    assert fx.processor_supplier.the_captured_processor().processed() == [
        KeyValueTimestamp("a", "b", 0)
    ]


def test_should_send_data_to_topic_using_produced(fx: Fixture) -> None:
    builder = StreamsBuilder()
    input_ = "topic"
    stream = builder.stream(input_, consumed=fx.string_consumed)
    stream.to("to-topic", Produced.with_(serdes.String(), serdes.String()))
    builder.stream("to-topic", consumed=fx.string_consumed).process(fx.processor_supplier)

    with TopologyTestDriver(builder.build(), fx.props) as driver:
        input_topic = driver.create_input_topic(
            input_, serdes.String(), serdes.String()
        ).auto_advance(0, 0)
        input_topic.pipe_input("e", "f")
    assert fx.processor_supplier.the_captured_processor().processed() == [
        KeyValueTimestamp("e", "f", 0)
    ]


def test_should_send_data_to_dynamic_topics(fx: Fixture) -> None:
    builder = StreamsBuilder()
    input_ = "topic"
    stream = builder.stream(input_, consumed=fx.string_consumed)
    stream.to(
        lambda key, value, context: context.topic + "-" + key + "-" + value[0],
        Produced.with_(serdes.String(), serdes.String()),
    )
    builder.stream(input_ + "-a-v", consumed=fx.string_consumed).process(fx.processor_supplier)
    builder.stream(input_ + "-b-v", consumed=fx.string_consumed).process(fx.processor_supplier)

    with TopologyTestDriver(builder.build(), fx.props) as driver:
        input_topic = driver.create_input_topic(
            input_, serdes.String(), serdes.String()
        ).auto_advance(0, 0)
        input_topic.pipe_input("a", "v1")
        input_topic.pipe_input("a", "v2")
        input_topic.pipe_input("b", "v1")
    mock_processors = fx.processor_supplier.captured_processors(2)
    assert mock_processors[0].processed() == [
        KeyValueTimestamp("a", "v1", 0),
        KeyValueTimestamp("a", "v2", 0),
    ]
    assert mock_processors[1].processed() == [KeyValueTimestamp("b", "v1", 0)]


def test_should_propagate_repartition_flag_after_global_k_table_join() -> None:
    builder = StreamsBuilder()
    global_k_table = builder.global_table("globalTopic")
    (
        builder.stream("topic")
        .select_key(lambda k, v: v)
        .join(global_k_table, lambda k, v: k + v, lambda v1, v2: v1 + v2)
        .group_by_key()
        .count()
    )

    repartition_topic_pattern = re.compile(r"Sink: .*-repartition")
    topology = str(builder.build().describe())
    matcher = repartition_topic_pattern.search(topology)
    assert matcher is not None
    match = matcher.group()
    assert match is not None
    assert match.endswith("repartition")


def test_should_merge_two_streams(fx: Fixture) -> None:
    topic1 = "topic-1"
    topic2 = "topic-2"

    source1 = fx.builder.stream(topic1)
    source2 = fx.builder.stream(topic2)
    merged = source1.merge(source2)

    merged.process(fx.processor_supplier)

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:
        input_topic1 = driver.create_input_topic(
            topic1, serdes.String(), serdes.String()
        ).auto_advance(0, 0)
        input_topic2 = driver.create_input_topic(
            topic2, serdes.String(), serdes.String()
        ).auto_advance(0, 0)
        input_topic1.pipe_input("A", "aa")
        input_topic2.pipe_input("B", "bb")
        input_topic2.pipe_input("C", "cc")
        input_topic1.pipe_input("D", "dd")

    assert fx.processor_supplier.the_captured_processor().processed() == [
        KeyValueTimestamp("A", "aa", 0),
        KeyValueTimestamp("B", "bb", 0),
        KeyValueTimestamp("C", "cc", 0),
        KeyValueTimestamp("D", "dd", 0),
    ]


def test_should_merge_multiple_streams(fx: Fixture) -> None:
    topic1 = "topic-1"
    topic2 = "topic-2"
    topic3 = "topic-3"
    topic4 = "topic-4"

    source1 = fx.builder.stream(topic1)
    source2 = fx.builder.stream(topic2)
    source3 = fx.builder.stream(topic3)
    source4 = fx.builder.stream(topic4)
    merged = source1.merge(source2).merge(source3).merge(source4)

    merged.process(fx.processor_supplier)

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:

        def topic(name: str) -> Any:
            return driver.create_input_topic(name, serdes.String(), serdes.String()).auto_advance(
                0, 0
            )

        input_topic1 = topic(topic1)
        input_topic2 = topic(topic2)
        input_topic3 = topic(topic3)
        input_topic4 = topic(topic4)

        input_topic1.pipe_input("A", "aa", 1)
        input_topic2.pipe_input("B", "bb", 9)
        input_topic3.pipe_input("C", "cc", 2)
        input_topic4.pipe_input("D", "dd", 8)
        input_topic4.pipe_input("E", "ee", 3)
        input_topic3.pipe_input("F", "ff", 7)
        input_topic2.pipe_input("G", "gg", 4)
        input_topic1.pipe_input("H", "hh", 6)

    assert fx.processor_supplier.the_captured_processor().processed() == [
        KeyValueTimestamp("A", "aa", 1),
        KeyValueTimestamp("B", "bb", 9),
        KeyValueTimestamp("C", "cc", 2),
        KeyValueTimestamp("D", "dd", 8),
        KeyValueTimestamp("E", "ee", 3),
        KeyValueTimestamp("F", "ff", 7),
        KeyValueTimestamp("G", "gg", 4),
        KeyValueTimestamp("H", "hh", 6),
    ]


def test_should_process_from_source_that_match_pattern(fx: Fixture) -> None:
    pattern2_source = fx.builder.stream(re.compile(r"topic-\d"))

    pattern2_source.process(fx.processor_supplier)

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:

        def topic(name: str) -> Any:
            return driver.create_input_topic(name, serdes.String(), serdes.String()).auto_advance(
                0, 0
            )

        input_topic3 = topic("topic-3")
        input_topic4 = topic("topic-4")
        input_topic5 = topic("topic-5")
        input_topic6 = topic("topic-6")
        input_topic7 = topic("topic-7")

        input_topic3.pipe_input("A", "aa", 1)
        input_topic4.pipe_input("B", "bb", 5)
        input_topic5.pipe_input("C", "cc", 10)
        input_topic6.pipe_input("D", "dd", 8)
        input_topic7.pipe_input("E", "ee", 3)

    assert fx.processor_supplier.the_captured_processor().processed() == [
        KeyValueTimestamp("A", "aa", 1),
        KeyValueTimestamp("B", "bb", 5),
        KeyValueTimestamp("C", "cc", 10),
        KeyValueTimestamp("D", "dd", 8),
        KeyValueTimestamp("E", "ee", 3),
    ]


def test_should_process_from_sources_that_match_multiple_pattern(fx: Fixture) -> None:
    topic3 = "topic-without-pattern"

    pattern2_source1 = fx.builder.stream(re.compile(r"topic-\d"))
    pattern2_source2 = fx.builder.stream(re.compile(r"topic-[A-Z]"))
    source3 = fx.builder.stream(topic3)
    merged = pattern2_source1.merge(pattern2_source2).merge(source3)

    merged.process(fx.processor_supplier)

    with TopologyTestDriver(fx.builder.build(), fx.props) as driver:

        def topic(name: str) -> Any:
            return driver.create_input_topic(name, serdes.String(), serdes.String()).auto_advance(
                0, 0
            )

        input_topic3 = topic("topic-3")
        input_topic4 = topic("topic-4")
        input_topic_a = topic("topic-A")
        input_topic_z = topic("topic-Z")
        input_topic = topic(topic3)

        input_topic3.pipe_input("A", "aa", 1)
        input_topic4.pipe_input("B", "bb", 5)
        input_topic_a.pipe_input("C", "cc", 10)
        input_topic_z.pipe_input("D", "dd", 8)
        input_topic.pipe_input("E", "ee", 3)

    assert fx.processor_supplier.the_captured_processor().processed() == [
        KeyValueTimestamp("A", "aa", 1),
        KeyValueTimestamp("B", "bb", 5),
        KeyValueTimestamp("C", "cc", 10),
        KeyValueTimestamp("D", "dd", 8),
        KeyValueTimestamp("E", "ee", 3),
    ]


# ---------------------------------------------------------------------------- bad suppliers

SINGLE_REFERENCE = re.escape("#get() must return a new object each time it is called.")


def test_should_not_allow_bad_process_supplier_on_process(fx: Fixture) -> None:
    processor = fx.processor_supplier()
    with pytest.raises(ValueError, match=SINGLE_REFERENCE):
        fx.test_stream.process(lambda: processor)


def test_should_not_allow_bad_process_supplier_on_process_with_stores(fx: Fixture) -> None:
    processor = fx.processor_supplier()
    with pytest.raises(ValueError, match=SINGLE_REFERENCE):
        fx.test_stream.process(lambda: processor, "storeName")


def test_should_not_allow_bad_process_supplier_on_process_with_named(fx: Fixture) -> None:
    processor = fx.processor_supplier()
    with pytest.raises(ValueError, match=SINGLE_REFERENCE):
        fx.test_stream.process(lambda: processor, named=Named.as_("processor"))


def test_should_not_allow_bad_process_supplier_on_process_with_named_and_stores(
    fx: Fixture,
) -> None:
    processor = fx.processor_supplier()
    with pytest.raises(ValueError, match=SINGLE_REFERENCE):
        fx.test_stream.process(lambda: processor, "storeName", named=Named.as_("processor"))


def test_should_not_allow_bad_process_supplier_on_process_values(fx: Fixture) -> None:
    processor = fx.fixed_key_processor_supplier()
    with pytest.raises(ValueError, match=SINGLE_REFERENCE):
        fx.test_stream.process_values(lambda: processor)


def test_should_not_allow_bad_process_supplier_on_process_values_with_stores(
    fx: Fixture,
) -> None:
    processor = fx.fixed_key_processor_supplier()
    with pytest.raises(ValueError, match=SINGLE_REFERENCE):
        fx.test_stream.process_values(lambda: processor, "storeName")


def test_should_not_allow_bad_process_supplier_on_process_values_with_named(fx: Fixture) -> None:
    processor = fx.fixed_key_processor_supplier()
    with pytest.raises(ValueError, match=SINGLE_REFERENCE):
        fx.test_stream.process_values(lambda: processor, named=Named.as_("processor"))


def test_should_not_allow_bad_process_supplier_on_process_values_with_named_and_stores(
    fx: Fixture,
) -> None:
    processor = fx.fixed_key_processor_supplier()
    with pytest.raises(ValueError, match=SINGLE_REFERENCE):
        fx.test_stream.process_values(lambda: processor, "storeName", named=Named.as_("processor"))


# ---------------------------------------------------------------------------- toTable, process


def test_should_not_materialized_k_table_from_k_stream(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())

    builder = StreamsBuilder()

    input_ = "input"
    output = "output"

    builder.stream(input_, consumed=consumed).to_table().to_stream().to(output)

    topology_description = str(builder.build().describe())

    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000003\n\n"
    )

    with TopologyTestDriver(builder.build(), fx.props) as driver:
        input_topic = driver.create_input_topic(input_, serdes.String(), serdes.String())
        output_topic = driver.create_output_topic(output, serdes.String(), serdes.String())

        input_topic.pipe_input("A", "01", 5)
        input_topic.pipe_input("B", "02", 100)
        input_topic.pipe_input("C", "03", 0)
        input_topic.pipe_input("D", "04", 0)
        input_topic.pipe_input("A", "05", 10)
        input_topic.pipe_input("A", "06", 8)

        output_expect_records = [
            TestRecord("A", "01", 5),
            TestRecord("B", "02", 100),
            TestRecord("C", "03", 0),
            TestRecord("D", "04", 0),
            TestRecord("A", "05", 10),
            TestRecord("A", "06", 8),
        ]

        assert output_topic.read_records_to_list() == output_expect_records


class SumProcessor(Processor):
    """The processor of ``shouldProcessWithProcessorAndState`` /
    ``shouldBindStateWithProcessorSupplier``: sums value lengths per key in store "sum"."""

    def init(self, context: Any) -> None:
        self.sum_store = context.get_state_store("sum")

    def process(self, record: Any) -> None:
        key = record.key
        value = record.value

        counter = self.sum_store.get(key)
        if counter is None:
            self.sum_store.put_if_absent(key, len(value))
        else:
            if value is None:
                self.sum_store.delete(key)
            else:
                self.sum_store.put(key, counter + len(value))


PROCESSOR_P_WITH_SUM = (
    "Topologies:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
    "      --> p\n"
    "    Processor: p (stores: [sum])\n"
    "      --> none\n"
    "      <-- KSTREAM-SOURCE-0000000000\n\n"
)


def pipe_and_check_sum(builder: StreamsBuilder, props: dict[str, Any]) -> None:
    with TopologyTestDriver(builder.build(), props) as driver:
        input_topic = driver.create_input_topic("input", serdes.String(), serdes.String())

        input_topic.pipe_input("A", "0", 5)
        input_topic.pipe_input("B", "00", 100)
        input_topic.pipe_input("C", "000", 0)
        input_topic.pipe_input("D", "0000", 0)
        input_topic.pipe_input("A", "00000", 10)
        input_topic.pipe_input("A", "000000", 8)

        sum_store = driver.get_key_value_store("sum")
        assert sum_store.get("A") == 12
        assert sum_store.get("B") == 2
        assert sum_store.get("C") == 3
        assert sum_store.get("D") == 4


def test_should_process_with_processor_and_state(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())

    builder = StreamsBuilder()

    input_ = "input"

    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.in_memory_key_value_store("sum"), serdes.String(), serdes.Integer()
        )
    )

    builder.stream(input_, consumed=consumed).process(SumProcessor, "sum", named=Named.as_("p"))

    topology_description = str(builder.build().describe())

    assert topology_description == PROCESSOR_P_WITH_SUM

    pipe_and_check_sum(builder, fx.props)


def test_should_bind_state_with_processor_supplier(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())

    builder = StreamsBuilder()

    input_ = "input"

    class SumProcessorSupplier:
        def __call__(self) -> Processor:
            return SumProcessor()

        def stores(self) -> set[Any]:
            return {
                Stores.key_value_store_builder(
                    Stores.in_memory_key_value_store("sum"), serdes.String(), serdes.Integer()
                )
            }

    builder.stream(input_, consumed=consumed).process(SumProcessorSupplier(), named=Named.as_("p"))

    topology_description = str(builder.build().describe())

    assert topology_description == PROCESSOR_P_WITH_SUM

    pipe_and_check_sum(builder, fx.props)


def test_should_process_values(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())

    builder = StreamsBuilder()

    input_ = "input"
    output = "output"

    class LengthProcessor(FixedKeyProcessor):  # a ContextualFixedKeyProcessor
        def process(self, record: Any) -> None:
            self.context.forward(record.with_value(len(record.value)))

    builder.stream(input_, consumed=consumed).process_values(
        LengthProcessor, named=Named.as_("fkp")
    ).to(output, Produced.with_(value_serde=serdes.Integer()))

    topology_description = str(builder.build().describe())

    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> fkp\n"
        "    Processor: fkp (stores: [])\n"
        "      --> KSTREAM-SINK-0000000001\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000001 (topic: output)\n"
        "      <-- fkp\n\n"
    )

    with TopologyTestDriver(builder.build(), fx.props) as driver:
        input_topic = driver.create_input_topic(input_, serdes.String(), serdes.String())
        output_topic = driver.create_output_topic(output, serdes.String(), serdes.Integer())

        input_topic.pipe_input("A", "0", 5)
        input_topic.pipe_input("B", "00", 100)
        input_topic.pipe_input("C", "000", 0)
        input_topic.pipe_input("D", "0000", 0)
        input_topic.pipe_input("A", "00000", 10)
        input_topic.pipe_input("A", "000000", 8)

        output_expect_records = [
            TestRecord("A", 1, 5),
            TestRecord("B", 2, 100),
            TestRecord("C", 3, 0),
            TestRecord("D", 4, 0),
            TestRecord("A", 5, 10),
            TestRecord("A", 6, 8),
        ]

        assert output_topic.read_records_to_list() == output_expect_records


def test_should_materialize_k_table_from_k_stream(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())

    builder = StreamsBuilder()
    store_name = "store"

    input_ = "input"
    builder.stream(input_, consumed=consumed).to_table(
        Materialized.as_(Stores.in_memory_key_value_store(store_name))
    )

    topology = builder.build()

    topology_description = str(topology.describe())
    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [store])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000000\n\n"
    )

    with TopologyTestDriver(topology, fx.props) as driver:
        input_topic = driver.create_input_topic(input_, serdes.String(), serdes.String())
        store = driver.get_key_value_store(store_name)

        input_topic.pipe_input("A", "01")
        input_topic.pipe_input("B", "02")
        input_topic.pipe_input("A", "03")
        expected_store = {"A": "03", "B": "02"}

        assert as_map(store) == expected_store


def test_should_support_key_change_k_table_from_k_stream(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())

    builder = StreamsBuilder()

    input_ = "input"
    output = "output"

    builder.stream(input_, consumed=consumed).map(
        lambda key, value: KeyValue(ord(key[0]) - ord("A"), value)
    ).to_table(Materialized.with_(serdes.Integer(), None)).to_stream().to(output)

    topology = builder.build()

    topology_description = str(topology.describe())
    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-MAP-0000000001\n"
        "    Processor: KSTREAM-MAP-0000000001 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-MAP-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-TOTABLE-0000000002-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000005\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-TOTABLE-0000000002-repartition])\n"
        "      --> KSTREAM-TOTABLE-0000000002\n"
        "    Processor: KSTREAM-TOTABLE-0000000002 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000008\n"
        "      <-- KSTREAM-TOTABLE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000008 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000007\n\n"
    )

    with TopologyTestDriver(topology, fx.props) as driver:
        input_topic = driver.create_input_topic(input_, serdes.String(), serdes.String())
        output_topic = driver.create_output_topic(output, serdes.Integer(), serdes.String())

        input_topic.pipe_input("A", "01", 5)
        input_topic.pipe_input("B", "02", 100)
        input_topic.pipe_input("C", "03", 0)
        input_topic.pipe_input("D", "04", 0)
        input_topic.pipe_input("A", "05", 10)
        input_topic.pipe_input("A", "06", 8)

        output_expect_records = [
            TestRecord(0, "01", 5),
            TestRecord(1, "02", 100),
            TestRecord(2, "03", 0),
            TestRecord(3, "04", 0),
            TestRecord(0, "05", 10),
            TestRecord(0, "06", 8),
        ]

        assert output_topic.read_records_to_list() == output_expect_records


def test_should_support_foreign_key_table_table_join_with_k_table_from_k_stream(
    fx: Fixture,
) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())
    builder = StreamsBuilder()

    input1 = "input1"
    input2 = "input2"
    output = "output"

    left_table = builder.stream(input1, consumed=consumed).to_table()
    right_table = builder.stream(input2, consumed=consumed).to_table()

    def extractor(value: str) -> str:
        return value.split("|")[1]

    def fk_joiner(value1: str, value2: str) -> str:
        return "(" + value1 + "," + value2 + ")"

    left_table.join(right_table, extractor, fk_joiner).to_stream().to(output)

    topology = builder.build(fx.props)

    topology_description = str(topology.describe())

    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KTABLE-SOURCE-0000000016 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input1])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-FK-JOIN-OUTPUT-0000000018\n"
        "      <-- KTABLE-SOURCE-0000000016\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000020\n"
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])\n"
        "      --> KTABLE-SINK-0000000008\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000021\n"
        "      <-- KTABLE-FK-JOIN-OUTPUT-0000000018\n"
        "    Sink: KSTREAM-SINK-0000000021 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000020\n"
        "    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)\n"
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000003 (topics: [input2])\n"
        "      --> KSTREAM-TOTABLE-0000000004\n"
        "    Source: KTABLE-SOURCE-0000000009 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n"
        "    Processor: KSTREAM-TOTABLE-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n"
        "      <-- KSTREAM-SOURCE-0000000003\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012\n"
        "      <-- KTABLE-SOURCE-0000000009\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n"
        "      --> KTABLE-SINK-0000000015\n"
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n"
        "      --> KTABLE-SINK-0000000015\n"
        "      <-- KSTREAM-TOTABLE-0000000004\n"
        "    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)\n"
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n\n"
    )

    with TopologyTestDriver(topology, fx.props) as driver:
        left = driver.create_input_topic(input1, serdes.String(), serdes.String())
        right = driver.create_input_topic(input2, serdes.String(), serdes.String())
        output_topic = driver.create_output_topic(output, serdes.String(), serdes.String())

        # Pre-populate the RHS records. This test is all about what happens when we
        # add/remove LHS records
        right.pipe_input("rhs1", "rhsValue1")
        right.pipe_input("rhs2", "rhsValue2")
        right.pipe_input("rhs3", "rhsValue3")  # this unreferenced FK won't show up in any results

        assert output_topic.read_key_values_to_map() == {}

        left.pipe_input("lhs1", "lhsValue1|rhs1")
        left.pipe_input("lhs2", "lhsValue2|rhs2")

        expected = {
            "lhs1": "(lhsValue1|rhs1,rhsValue1)",
            "lhs2": "(lhsValue2|rhs2,rhsValue2)",
        }
        assert output_topic.read_key_values_to_map() == expected

        # Add another reference to an existing FK
        left.pipe_input("lhs3", "lhsValue3|rhs1")

        assert output_topic.read_key_values_to_map() == {"lhs3": "(lhsValue3|rhs1,rhsValue1)"}

        left.pipe_input("lhs1", None)
        assert output_topic.read_key_values_to_map() == {"lhs1": None}


def test_should_support_table_table_join_with_k_stream_to_k_table(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())
    builder = StreamsBuilder()

    left_topic = "left"
    right_topic = "right"
    output_topic = "output"

    table1 = builder.stream(left_topic, consumed=consumed).to_table()
    table2 = builder.stream(right_topic, consumed=consumed).to_table()

    table1.join(table2, TOSTRING_JOINER).to_stream().to(output_topic)

    topology = builder.build(fx.props)

    topology_description = str(topology.describe())
    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Source: KSTREAM-SOURCE-0000000003 (topics: [right])\n"
        "      --> KSTREAM-TOTABLE-0000000004\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-JOINTHIS-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-TOTABLE-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n"
        "      --> KTABLE-JOINOTHER-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000003\n"
        "    Processor: KTABLE-JOINOTHER-0000000008 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-MERGE-0000000006\n"
        "      <-- KSTREAM-TOTABLE-0000000004\n"
        "    Processor: KTABLE-JOINTHIS-0000000007 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n"
        "      --> KTABLE-MERGE-0000000006\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KTABLE-MERGE-0000000006 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000009\n"
        "      <-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008\n"
        "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000010\n"
        "      <-- KTABLE-MERGE-0000000006\n"
        "    Sink: KSTREAM-SINK-0000000010 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000009\n\n"
    )

    with TopologyTestDriver(topology, fx.props) as driver:
        left = driver.create_input_topic(left_topic, serdes.String(), serdes.String())
        right = driver.create_input_topic(right_topic, serdes.String(), serdes.String())
        output = driver.create_output_topic(output_topic, serdes.String(), serdes.String())

        right.pipe_input("lhs1", "rhsValue1")
        right.pipe_input("rhs2", "rhsValue2")
        right.pipe_input("lhs3", "rhsValue3")

        assert output.read_key_values_to_map() == {}

        left.pipe_input("lhs1", "lhsValue1")
        left.pipe_input("lhs2", "lhsValue2")

        expected = {"lhs1": "lhsValue1+rhsValue1"}

        assert output.read_key_values_to_map() == expected

        left.pipe_input("lhs3", "lhsValue3")

        assert output.read_key_values_to_map() == {"lhs3": "lhsValue3+rhsValue3"}

        left.pipe_input("lhs1", "lhsValue4")
        assert output.read_key_values_to_map() == {"lhs1": "lhsValue4+rhsValue1"}


def test_should_support_stream_table_join_with_k_stream_to_k_table(fx: Fixture) -> None:
    builder = StreamsBuilder()
    consumed = Consumed.with_(serdes.String(), serdes.String())

    stream_topic = "streamTopic"
    table_topic = "tableTopic"
    output_topic = "output"

    stream = builder.stream(stream_topic, consumed=consumed)
    table = builder.stream(table_topic, consumed=consumed).to_table()

    stream.join(table, TOSTRING_JOINER).to(output_topic)

    topology = builder.build(fx.props)

    topology_description = str(topology.describe())
    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [streamTopic])\n"
        "      --> KSTREAM-JOIN-0000000004\n"
        "    Processor: KSTREAM-JOIN-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000003])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [tableTopic])\n"
        "      --> KSTREAM-TOTABLE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: output)\n"
        "      <-- KSTREAM-JOIN-0000000004\n"
        "    Processor: KSTREAM-TOTABLE-0000000002 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000003])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000001\n\n"
    )

    with TopologyTestDriver(topology, fx.props) as driver:
        left = driver.create_input_topic(stream_topic, serdes.String(), serdes.String())
        right = driver.create_input_topic(table_topic, serdes.String(), serdes.String())
        output = driver.create_output_topic(output_topic, serdes.String(), serdes.String())

        right.pipe_input("lhs1", "rhsValue1")
        right.pipe_input("rhs2", "rhsValue2")
        right.pipe_input("lhs3", "rhsValue3")

        assert output.read_key_values_to_map() == {}

        left.pipe_input("lhs1", "lhsValue1")
        left.pipe_input("lhs2", "lhsValue2")

        expected = {"lhs1": "lhsValue1+rhsValue1"}

        assert output.read_key_values_to_map() == expected

        left.pipe_input("lhs3", "lhsValue3")

        assert output.read_key_values_to_map() == {"lhs3": "lhsValue3+rhsValue3"}

        left.pipe_input("lhs1", "lhsValue4")
        assert output.read_key_values_to_map() == {"lhs1": "lhsValue4+rhsValue1"}


def test_should_support_group_by_count_with_k_stream_to_k_table(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())
    builder = StreamsBuilder()

    input_ = "input"
    output = "output"

    (
        builder.stream(input_, consumed=consumed)
        .to_table()
        .group_by(select_value_key_value_mapper, Grouped.with_(serdes.String(), serdes.String()))
        .count()
        .to_stream()
        .to(output)
    )

    topology = builder.build(fx.props)

    topology_description = str(topology.describe())
    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-SELECT-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-SELECT-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n"
        "      <-- KTABLE-SELECT-0000000003\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n"
        "      --> KTABLE-AGGREGATE-0000000007\n"
        "    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n"
        "      --> KTABLE-TOSTREAM-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- KTABLE-AGGREGATE-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000008\n\n"
    )

    with TopologyTestDriver(builder.build(), fx.props) as driver:
        input_topic = driver.create_input_topic(
            input_, serdes.String(), serdes.String()
        ).auto_advance(0, 0)
        output_topic = driver.create_output_topic(output, serdes.String(), serdes.Long())

        input_topic.pipe_input("A", "green", 10)
        input_topic.pipe_input("B", "green", 9)
        input_topic.pipe_input("A", "blue", 12)
        input_topic.pipe_input("C", "yellow", 15)
        input_topic.pipe_input("D", "green", 11)

        assert output_topic.read_records_to_list() == [
            TestRecord("green", 1, 10),
            TestRecord("green", 2, 10),
            TestRecord("green", 1, 12),
            TestRecord("blue", 1, 12),
            TestRecord("yellow", 1, 15),
            TestRecord("green", 2, 12),
        ]


def test_should_support_trigger_materialized_with_k_table_from_k_stream(fx: Fixture) -> None:
    consumed = Consumed.with_(serdes.String(), serdes.String())
    builder = StreamsBuilder()

    input_ = "input"
    output = "output"
    store_name = "store"

    (
        builder.stream(input_, consumed=consumed)
        .to_table()
        .map_values(
            lambda value: ord(value[0]) - ord("a"),
            materialized=Materialized.as_(store_name)
            .with_key_serde(serdes.String())
            .with_value_serde(serdes.Integer()),
        )
        .to_stream()
        .to(output)
    )

    topology = builder.build(fx.props)

    topology_description = str(topology.describe())
    assert topology_description == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [])\n"
        "      --> KTABLE-MAPVALUES-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-MAPVALUES-0000000003 (stores: [store])\n"
        "      --> KTABLE-TOSTREAM-0000000004\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KTABLE-MAPVALUES-0000000003\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000004\n\n"
    )

    with TopologyTestDriver(topology, fx.props) as driver:
        input_topic = driver.create_input_topic(
            input_, serdes.String(), serdes.String()
        ).auto_advance(0, 0)
        output_topic = driver.create_output_topic(output, serdes.String(), serdes.Integer())
        store = driver.get_key_value_store(store_name)

        input_topic.pipe_input("A", "green", 10)
        input_topic.pipe_input("B", "green", 9)
        input_topic.pipe_input("A", "blue", 12)
        input_topic.pipe_input("C", "yellow", 15)
        input_topic.pipe_input("D", "green", 11)

        expected_store = {"A": 1, "B": 6, "C": 24, "D": 6}

        assert as_map(store) == expected_store

        assert output_topic.read_records_to_list() == [
            TestRecord("A", 6, 10),
            TestRecord("B", 6, 9),
            TestRecord("A", 1, 12),
            TestRecord("C", 24, 15),
            TestRecord("D", 6, 11),
        ]
