"""``KTable``: a port of Kafka Streams 4.1.1's ``KTableImplTest``
(org.apache.kafka.streams.kstream.internals).

Ported (9 of Kafka's 29 tests): ``testKTable`` / ``testMaterializedKTable`` (a source
table, ``map_values``, ``filter``, ``to_stream().to(topic2)`` and a second table reading
``topic2``, the four streams seen by one ``MockApiProcessorSupplier``),
``shouldPreserveSerdesForOperators``, ``testStateStoreLazyEval`` / ``testStateStore``
(how many stores the driver opens), the two ``enableSendingOldValues`` checks (Kafka's
``KTableImpl.enableSendingOldValues`` / ``sendingOldValueEnabled`` are
``table.supplier.enable_sending_old_values`` / ``table.supplier.send_old_values`` here, as
in ``test_ktable.py``), ``shouldCreateSourceAndSinkNodesForRepartitioningTopic`` and
``shouldAllowNullStoreInJoin`` (a join without a ``Materialized``). The config is
``StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.String())``.

``shouldPreserveSerdesForOperators`` is one Java test of 34 assertions; it is split here
into one test per operator (``filter``, ``filter_not``, ``map_values``, ``to_stream``,
``transform_values``, ``group_by``, ``join``, ``left_join``, ``outer_join``), every
assertion kept, so that each operator's result shows on its own. Kafka's
``AbstractStream.keySerde()`` / ``valueSerde()`` are the ``key_serde`` / ``value_serde``
attributes; serdes are compared by identity, as Java's ``assertEquals`` does for serde
classes without ``equals``.

``shouldCreateSourceAndSinkNodesForRepartitioningTopic``: the store count and the four
repartition sink/source names are ported; its last four assertions read the private
``valSerializer`` / ``valDeserializer`` fields of the running sink and source nodes through
Java reflection (``Field.setAccessible``) and ``TopologyTestDriverWrapper.getProcessor``
to check that their ``ChangedSerializer`` got an inner serde; that part is Java-only and
left out.

Skipped (20 tests), Java null-argument checks with no Python counterpart (``None`` means
"not given"): ``shouldNotAllowNullSelectorOnToStream``,
``shouldNotAllowNullPredicateOnFilter``, ``shouldNotAllowNullPredicateOnFilterNot``,
``shouldNotAllowNullMapperOnMapValues``, ``shouldNotAllowNullMapperOnMapValueWithKey``,
``shouldNotAllowNullSelectorOnGroupBy``, ``shouldNotAllowNullOtherTableOn{Join,OuterJoin,
LeftJoin}``, ``shouldNotAllowNullJoinerJoin``, ``shouldNotAllowNullJoinerOn{OuterJoin,
LeftJoin}``, ``shouldThrowNullPointerOn{Filter,FilterNot,Join,LeftJoin,OuterJoin}When
MaterializedIsNull`` and ``shouldThrowNullPointerOnTransformValuesWithKeyWhen{Transformer
SupplierIsNull,MaterializedIsNull,StoreNamesNull}`` (the last two also use Mockito mocks).
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
    TOSTRING_JOINER,
    TOSTRING_REMOVER,
    KeyValueTimestamp,
    MockApiProcessor,
    MockApiProcessorSupplier,
)

from streaming import (
    Consumed,
    Grouped,
    KeyValue,
    KTable,
    Materialized,
    Produced,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
    serdes,
)

# MockInitializer.STRING_INIT, MockAggregator.TOSTRING_ADDER / TOSTRING_REMOVER,
# MockReducer.STRING_ADDER / STRING_REMOVER, MockValueJoiner.TOSTRING_JOINER


def no_op_key_value_mapper(key: Any, value: Any) -> KeyValue:  # MockMapper.noOpKeyValueMapper
    return KeyValue(key, value)


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
def consumed() -> Consumed:
    return Consumed.with_(serdes.String(), serdes.String())


@pytest.fixture
def produced() -> Produced:
    return Produced.with_(serdes.String(), serdes.String())


@pytest.fixture
def table() -> KTable:
    # setUp(): table = new StreamsBuilder().table("test")
    return StreamsBuilder().table("test")


# ---------------------------------------------------------------------------- tests


def run_four_tables(
    props: dict[str, Any], consumed: Consumed, produced: Produced, materialized: Any
) -> list[MockApiProcessor]:
    builder = StreamsBuilder()

    topic1 = "topic1"
    topic2 = "topic2"

    if materialized is None:
        table1 = builder.table(topic1, consumed=consumed)
    else:
        table1 = builder.table(topic1, consumed=consumed, materialized=materialized)

    supplier = MockApiProcessorSupplier()
    table1.to_stream().process(supplier)

    table2 = table1.map_values(lambda s: int(s))  # Integer.valueOf
    table2.to_stream().process(supplier)

    table3 = table2.filter(lambda key, value: (value % 2) == 0)
    table3.to_stream().process(supplier)
    table1.to_stream().to(topic2, produced)

    table4 = builder.table(topic2, consumed=consumed)
    table4.to_stream().process(supplier)

    with TopologyTestDriver(builder.build(), props) as driver:
        input_topic = driver.create_input_topic(topic1, serdes.String(), serdes.String())
        input_topic.pipe_input("A", "01", 5)
        input_topic.pipe_input("B", "02", 100)
        input_topic.pipe_input("C", "03", 0)
        input_topic.pipe_input("D", "04", 0)
        input_topic.pipe_input("A", "05", 10)
        input_topic.pipe_input("A", "06", 8)

    return supplier.captured_processors(4)


def test_k_table(props: dict[str, Any], consumed: Consumed, produced: Produced) -> None:
    processors = run_four_tables(props, consumed, produced, None)
    assert processors[0].processed() == [
        KeyValueTimestamp("A", "01", 5),
        KeyValueTimestamp("B", "02", 100),
        KeyValueTimestamp("C", "03", 0),
        KeyValueTimestamp("D", "04", 0),
        KeyValueTimestamp("A", "05", 10),
        KeyValueTimestamp("A", "06", 8),
    ]
    assert processors[1].processed() == [
        KeyValueTimestamp("A", 1, 5),
        KeyValueTimestamp("B", 2, 100),
        KeyValueTimestamp("C", 3, 0),
        KeyValueTimestamp("D", 4, 0),
        KeyValueTimestamp("A", 5, 10),
        KeyValueTimestamp("A", 6, 8),
    ]
    assert processors[2].processed() == [
        KeyValueTimestamp("A", None, 5),
        KeyValueTimestamp("B", 2, 100),
        KeyValueTimestamp("C", None, 0),
        KeyValueTimestamp("D", 4, 0),
        KeyValueTimestamp("A", None, 10),
        KeyValueTimestamp("A", 6, 8),
    ]
    assert processors[3].processed() == [
        KeyValueTimestamp("A", "01", 5),
        KeyValueTimestamp("B", "02", 100),
        KeyValueTimestamp("C", "03", 0),
        KeyValueTimestamp("D", "04", 0),
        KeyValueTimestamp("A", "05", 10),
        KeyValueTimestamp("A", "06", 8),
    ]


def test_materialized_k_table(
    props: dict[str, Any], consumed: Consumed, produced: Produced
) -> None:
    processors = run_four_tables(props, consumed, produced, Materialized.as_("fred"))
    assert processors[0].processed() == [
        KeyValueTimestamp("A", "01", 5),
        KeyValueTimestamp("B", "02", 100),
        KeyValueTimestamp("C", "03", 0),
        KeyValueTimestamp("D", "04", 0),
        KeyValueTimestamp("A", "05", 10),
        KeyValueTimestamp("A", "06", 8),
    ]
    assert processors[1].processed() == [
        KeyValueTimestamp("A", 1, 5),
        KeyValueTimestamp("B", 2, 100),
        KeyValueTimestamp("C", 3, 0),
        KeyValueTimestamp("D", 4, 0),
        KeyValueTimestamp("A", 5, 10),
        KeyValueTimestamp("A", 6, 8),
    ]
    assert processors[2].processed() == [
        KeyValueTimestamp("B", 2, 100),
        KeyValueTimestamp("D", 4, 0),
        KeyValueTimestamp("A", 6, 8),
    ]
    assert processors[3].processed() == [
        KeyValueTimestamp("A", "01", 5),
        KeyValueTimestamp("B", "02", 100),
        KeyValueTimestamp("C", "03", 0),
        KeyValueTimestamp("D", "04", 0),
        KeyValueTimestamp("A", "05", 10),
        KeyValueTimestamp("A", "06", 8),
    ]


# -- shouldPreserveSerdesForOperators, one test per operator


class SerdesFixture:
    def __init__(self) -> None:
        self.string_consumed = Consumed.with_(serdes.String(), serdes.String())
        self.my_serde = serdes.String()  # new Serdes.StringSerde()
        builder = StreamsBuilder()
        self.table1 = builder.table("topic-2", consumed=self.string_consumed)
        # ConsumedInternal(stringConsumed).keySerde() / valueSerde()
        self.consumed_key_serde = self.string_consumed.key_serde
        self.consumed_value_serde = self.string_consumed.value_serde

    def my_materialized(self) -> Materialized:
        return Materialized.with_(self.my_serde, self.my_serde)


@pytest.fixture
def sf() -> SerdesFixture:
    return SerdesFixture()


def selector(key: str, value: str) -> str:
    return key


def mapper(value: str) -> str:
    return value


def joiner(value1: str, value2: str) -> str:
    return value1


class IdentityValueTransformerWithKey:
    """Kafka's anonymous ``ValueTransformerWithKey`` returning the value unchanged."""

    def init(self, context: Any) -> None:
        pass

    def transform(self, key: str, value: str) -> str:
        return value

    def close(self) -> None:
        pass


def value_transformer_with_key_supplier() -> IdentityValueTransformerWithKey:
    return IdentityValueTransformerWithKey()


def test_should_preserve_serdes_for_operators_filter(sf: SerdesFixture) -> None:
    assert sf.table1.filter(lambda key, value: False).key_serde is sf.consumed_key_serde
    assert sf.table1.filter(lambda key, value: False).value_serde is sf.consumed_value_serde
    assert (
        sf.table1.filter(lambda key, value: False, materialized=sf.my_materialized()).key_serde
        is sf.my_serde
    )
    assert (
        sf.table1.filter(lambda key, value: False, materialized=sf.my_materialized()).value_serde
        is sf.my_serde
    )


def test_should_preserve_serdes_for_operators_filter_not(sf: SerdesFixture) -> None:
    assert sf.table1.filter_not(lambda key, value: False).key_serde is sf.consumed_key_serde
    assert sf.table1.filter_not(lambda key, value: False).value_serde is sf.consumed_value_serde
    assert (
        sf.table1.filter_not(lambda key, value: False, materialized=sf.my_materialized()).key_serde
        is sf.my_serde
    )
    assert (
        sf.table1.filter_not(
            lambda key, value: False, materialized=sf.my_materialized()
        ).value_serde
        is sf.my_serde
    )


def test_should_preserve_serdes_for_operators_map_values(sf: SerdesFixture) -> None:
    assert sf.table1.map_values(mapper).key_serde is sf.consumed_key_serde
    assert sf.table1.map_values(mapper).value_serde is None
    assert sf.table1.map_values(mapper, materialized=sf.my_materialized()).key_serde is sf.my_serde
    assert (
        sf.table1.map_values(mapper, materialized=sf.my_materialized()).value_serde is sf.my_serde
    )


def test_should_preserve_serdes_for_operators_to_stream(sf: SerdesFixture) -> None:
    assert sf.table1.to_stream().key_serde is sf.consumed_key_serde
    assert sf.table1.to_stream().value_serde is sf.consumed_value_serde
    assert sf.table1.to_stream(selector).key_serde is None
    assert sf.table1.to_stream(selector).value_serde is sf.consumed_value_serde


def test_should_preserve_serdes_for_operators_transform_values(sf: SerdesFixture) -> None:
    supplier = value_transformer_with_key_supplier
    assert sf.table1.transform_values(supplier).key_serde is sf.consumed_key_serde
    assert sf.table1.transform_values(supplier).value_serde is None
    assert (
        sf.table1.transform_values(supplier, materialized=sf.my_materialized()).key_serde
        is sf.my_serde
    )
    assert (
        sf.table1.transform_values(supplier, materialized=sf.my_materialized()).value_serde
        is sf.my_serde
    )


def test_should_preserve_serdes_for_operators_group_by(sf: SerdesFixture) -> None:
    assert sf.table1.group_by(KeyValue).key_serde is None
    assert sf.table1.group_by(KeyValue).value_serde is None
    assert (
        sf.table1.group_by(KeyValue, Grouped.with_(sf.my_serde, sf.my_serde)).key_serde
        is sf.my_serde
    )
    assert (
        sf.table1.group_by(KeyValue, Grouped.with_(sf.my_serde, sf.my_serde)).value_serde
        is sf.my_serde
    )


@pytest.mark.parametrize("operator", ["join", "left_join", "outer_join"])
def test_should_preserve_serdes_for_operators_table_table_join(
    sf: SerdesFixture, operator: str
) -> None:
    def op(*args: Any, **kwargs: Any) -> Any:
        return getattr(sf.table1, operator)(*args, **kwargs)

    assert op(sf.table1, joiner).key_serde is sf.consumed_key_serde
    assert op(sf.table1, joiner).value_serde is None
    assert op(sf.table1, joiner, materialized=sf.my_materialized()).key_serde is sf.my_serde
    assert op(sf.table1, joiner, materialized=sf.my_materialized()).value_serde is sf.my_serde


def test_state_store_lazy_eval(props: dict[str, Any], consumed: Consumed) -> None:
    builder = StreamsBuilder()
    topic1 = "topic1"
    topic2 = "topic2"

    table1 = builder.table(topic1, consumed=consumed)
    builder.table(topic2, consumed=consumed)

    table1_mapped = table1.map_values(lambda s: int(s))
    table1_mapped.filter(lambda key, value: (value % 2) == 0)

    with TopologyTestDriver(builder.build(), props) as driver:
        assert len(driver.get_all_state_stores()) == 0


def test_state_store(props: dict[str, Any], consumed: Consumed) -> None:
    builder = StreamsBuilder()
    topic1 = "topic1"
    topic2 = "topic2"

    table1 = builder.table(topic1, consumed=consumed)
    table2 = builder.table(topic2, consumed=consumed)

    table1_mapped = table1.map_values(lambda s: int(s))
    table1_mapped_filtered = table1_mapped.filter(lambda key, value: (value % 2) == 0)
    table2.join(table1_mapped_filtered, lambda v1, v2: f"{v1}{v2}")

    with TopologyTestDriver(builder.build(), props) as driver:
        assert len(driver.get_all_state_stores()) == 2


def test_should_not_enable_sending_old_values_if_not_materialized_already_and_not_forced_to_materialize(
    consumed: Consumed,
) -> None:
    builder = StreamsBuilder()

    table = builder.table("topic1", consumed=consumed)
    assert isinstance(table, KTable)
    table.supplier.enable_sending_old_values(False)

    assert table.supplier.send_old_values is False


def test_should_enable_sending_old_values_if_not_materialized_already_but_forced_to_materialize(
    consumed: Consumed,
) -> None:
    builder = StreamsBuilder()

    table = builder.table("topic1", consumed=consumed)
    assert isinstance(table, KTable)
    table.supplier.enable_sending_old_values(True)

    assert table.supplier.send_old_values is True


def assert_topology_contains_processor(topology: Topology, processor_name: str) -> None:
    for subtopology in topology.describe().subtopologies:
        for node in subtopology.nodes:
            if node.name == processor_name:
                return
    raise AssertionError(
        f"No processor named '{processor_name}'"
        f"found in the provided Topology:\n{topology.describe()}"
    )


def test_should_create_source_and_sink_nodes_for_repartitioning_topic(
    props: dict[str, Any], consumed: Consumed
) -> None:
    builder = StreamsBuilder()
    topic1 = "topic1"
    store_name1 = "storeName1"

    table1 = builder.table(
        topic1,
        consumed=consumed,
        materialized=Materialized.as_(store_name1)
        .with_key_serde(serdes.String())
        .with_value_serde(serdes.String()),
    )

    table1.group_by(no_op_key_value_mapper).aggregate(
        STRING_INIT, TOSTRING_ADDER, TOSTRING_REMOVER, Materialized.as_("mock-result1")
    )

    table1.group_by(no_op_key_value_mapper).reduce(
        STRING_ADDER, STRING_REMOVER, Materialized.as_("mock-result2")
    )

    topology = builder.build()
    with TopologyTestDriver(topology, props) as driver:
        assert len(driver.get_all_state_stores()) == 3

        assert_topology_contains_processor(topology, "KSTREAM-SINK-0000000003")
        assert_topology_contains_processor(topology, "KSTREAM-SOURCE-0000000004")
        assert_topology_contains_processor(topology, "KSTREAM-SINK-0000000007")
        assert_topology_contains_processor(topology, "KSTREAM-SOURCE-0000000008")


def test_should_allow_null_store_in_join(table: KTable) -> None:
    result = table.join(table, TOSTRING_JOINER)
    assert isinstance(result, KTable)
