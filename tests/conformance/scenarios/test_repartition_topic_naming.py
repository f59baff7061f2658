"""Repartition topic naming: a port of Kafka Streams 4.1.1's ``RepartitionTopicNamingTest``
(org.apache.kafka.streams.kstream), all 19 tests.

Names given with ``Grouped.as_`` / ``StreamJoined.with_name`` name the repartition topics
(and keep them stable when other operators are added upstream), a ``KGroupedStream`` or
``KGroupedTable`` with a named repartition topic reuses that one topic for every
aggregation, unnamed groupings get one topic per aggregation, two different groupings (or
joins) with the same name are a ``TopologyException``, and ``topology.optimization=all``
merges the key-changing stream's repartition topics into the first named one. The two
``describe()`` texts are Kafka's ``EXPECTED_OPTIMIZED_TOPOLOGY`` and
``EXPECTED_UNOPTIMIZED_TOPOLOGY`` verbatim.

Nothing is skipped. Java's ``SimpleProcessor`` (a ``Processor<String, String, Void, Void>``
collecting values into a list) is a Python ``Processor`` doing the same; the
``System.out.println`` peeks are ``print`` peeks (none of these tests pipes records).
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from streaming import (
    Consumed,
    Grouped,
    JoinWindows,
    KeyValue,
    Materialized,
    Processor,
    Produced,
    SessionWindows,
    StreamJoined,
    StreamsBuilder,
    TimeWindows,
    TopologyException,
    serdes,
)

INPUT_TOPIC = "input"
COUNT_TOPIC = "outputTopic_0"
AGGREGATION_TOPIC = "outputTopic_1"
REDUCE_TOPIC = "outputTopic_2"
JOINED_TOPIC = "outputTopicForJoin"

FIRST_REPARTITION_TOPIC_NAME = "count-stream"
SECOND_REPARTITION_TOPIC_NAME = "aggregate-stream"
THIRD_REPARTITION_TOPIC_NAME = "reduced-stream"
FOURTH_REPARTITION_TOPIC_NAME = "joined-stream"
REPARTITION_TOPIC_PATTERN = re.compile(r"Sink: .*-repartition")

# StreamsConfig.OPTIMIZE / StreamsConfig.NO_OPTIMIZATION
OPTIMIZE = "all"
NO_OPTIMIZATION = "none"


def kv_mapper(k: str, v: str) -> str:
    return k + v


def key_value_pair(k, v):  # KeyValue::pair
    return KeyValue(k, v)


def get_count_of_repartition_topics_found(topology_string: str, pattern: re.Pattern) -> int:
    return len(pattern.findall(topology_string))


def ms(millis: int) -> timedelta:  # Duration.ofMillis
    return timedelta(milliseconds=millis)


class SimpleProcessor(Processor):
    def __init__(self, value_list: list[str]) -> None:
        self.value_list = value_list

    def process(self, record) -> None:
        self.value_list.append(record.value)


# ---------------------------------------------------------------------------- tests


def test_should_reuse_first_repartition_topic_name_when_optimizing() -> None:
    optimized_topology = str(build_topology(OPTIMIZE).describe())
    un_optimized_topology = str(build_topology(NO_OPTIMIZATION).describe())

    assert optimized_topology == EXPECTED_OPTIMIZED_TOPOLOGY
    # only one repartition topic
    assert get_count_of_repartition_topics_found(optimized_topology, REPARTITION_TOPIC_PATTERN) == 1
    # the first named repartition topic
    assert FIRST_REPARTITION_TOPIC_NAME + "-repartition" in optimized_topology

    assert un_optimized_topology == EXPECTED_UNOPTIMIZED_TOPOLOGY
    # now 4 repartition topic
    assert (
        get_count_of_repartition_topics_found(un_optimized_topology, REPARTITION_TOPIC_PATTERN) == 4
    )
    # all 4 named repartition topics present
    assert FIRST_REPARTITION_TOPIC_NAME + "-repartition" in un_optimized_topology
    assert SECOND_REPARTITION_TOPIC_NAME + "-repartition" in un_optimized_topology
    assert THIRD_REPARTITION_TOPIC_NAME + "-repartition" in un_optimized_topology
    assert FOURTH_REPARTITION_TOPIC_NAME + "-left-repartition" in un_optimized_topology


def test_should_fail_with_same_repartition_topic_name() -> None:
    # can't use same repartition topic name
    with pytest.raises(TopologyException):
        builder = StreamsBuilder()
        (
            builder.stream("topic")
            .select_key(lambda k, v: k)
            .group_by_key(Grouped.as_("grouping"))
            .count()
            .to_stream()
        )
        (
            builder.stream("topicII")
            .select_key(lambda k, v: k)
            .group_by_key(Grouped.as_("grouping"))
            .count()
            .to_stream()
        )
        builder.build()
        pytest.fail("Should not build re-using repartition topic name")


def test_should_not_fail_with_same_repartition_topic_name_using_same_k_grouped_stream() -> None:
    builder = StreamsBuilder()
    k_grouped_stream = (
        builder.stream("topic").select_key(lambda k, v: k).group_by_key(Grouped.as_("grouping"))
    )
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(10))).count().to_stream().to(
        "output-one"
    )
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(30))).count().to_stream().to(
        "output-two"
    )

    topology_string = str(builder.build().describe())
    assert get_count_of_repartition_topics_found(topology_string, REPARTITION_TOPIC_PATTERN) == 1
    assert "grouping-repartition" in topology_string


def test_should_not_fail_with_same_repartition_topic_name_using_same_time_window_stream() -> None:
    builder = StreamsBuilder()
    k_grouped_stream = (
        builder.stream("topic").select_key(lambda k, v: k).group_by_key(Grouped.as_("grouping"))
    )
    time_windowed_k_stream = k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(10)))

    time_windowed_k_stream.count().to_stream().to("output-one")
    time_windowed_k_stream.reduce(lambda v, v2: v + v2).to_stream().to("output-two")
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(30))).count().to_stream().to(
        "output-two"
    )

    topology_string = str(builder.build().describe())
    assert get_count_of_repartition_topics_found(topology_string, REPARTITION_TOPIC_PATTERN) == 1
    assert "grouping-repartition" in topology_string


def test_should_not_fail_with_same_repartition_topic_name_using_same_session_window_stream() -> (
    None
):
    builder = StreamsBuilder()
    k_grouped_stream = (
        builder.stream("topic").select_key(lambda k, v: k).group_by_key(Grouped.as_("grouping"))
    )
    session_windowed_k_stream = k_grouped_stream.windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(ms(10))
    )

    session_windowed_k_stream.count().to_stream().to("output-one")
    session_windowed_k_stream.reduce(lambda v, v2: v + v2).to_stream().to("output-two")
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(30))).count().to_stream().to(
        "output-two"
    )

    topology_string = str(builder.build().describe())
    assert get_count_of_repartition_topics_found(topology_string, REPARTITION_TOPIC_PATTERN) == 1
    assert "grouping-repartition" in topology_string


def test_should_not_fail_with_same_repartition_topic_name_using_same_k_grouped_table() -> None:
    builder = StreamsBuilder()
    k_grouped_table = builder.table("topic").group_by(key_value_pair, Grouped.as_("grouping"))
    k_grouped_table.count().to_stream().to("output-count")
    k_grouped_table.reduce(lambda v, v2: v2, lambda v, v2: v2).to_stream().to("output-reduce")
    topology_string = str(builder.build().describe())
    assert get_count_of_repartition_topics_found(topology_string, REPARTITION_TOPIC_PATTERN) == 1
    assert "grouping-repartition" in topology_string


def test_should_not_reuse_repartition_node_with_unnamed_repartition_topics() -> None:
    builder = StreamsBuilder()
    k_grouped_stream = builder.stream("topic").select_key(lambda k, v: k).group_by_key()
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(10))).count().to_stream().to(
        "output-one"
    )
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(30))).count().to_stream().to(
        "output-two"
    )
    topology_string = str(builder.build().describe())
    assert get_count_of_repartition_topics_found(topology_string, REPARTITION_TOPIC_PATTERN) == 2


def test_should_not_reuse_repartition_node_with_unnamed_repartition_topics_k_grouped_table() -> (
    None
):
    builder = StreamsBuilder()
    k_grouped_table = builder.table("topic").group_by(key_value_pair)
    k_grouped_table.count().to_stream().to("output-count")
    k_grouped_table.reduce(lambda v, v2: v2, lambda v, v2: v2).to_stream().to("output-reduce")
    topology_string = str(builder.build().describe())
    assert get_count_of_repartition_topics_found(topology_string, REPARTITION_TOPIC_PATTERN) == 2


def test_should_not_fail_with_same_repartition_topic_name_using_same_k_grouped_stream_optimizations_on() -> (
    None
):
    builder = StreamsBuilder()
    k_grouped_stream = (
        builder.stream("topic").select_key(lambda k, v: k).group_by_key(Grouped.as_("grouping"))
    )
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(10))).count()
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(30))).count()
    properties = {"topology.optimization": OPTIMIZE}
    topology = builder.build(properties)
    assert (
        get_count_of_repartition_topics_found(str(topology.describe()), REPARTITION_TOPIC_PATTERN)
        == 1
    )


def test_should_fail_with_same_repartition_topic_name_in_join() -> None:
    # can't use same repartition topic name in joins
    with pytest.raises(TopologyException):
        builder = StreamsBuilder()
        stream1 = builder.stream("topic").select_key(lambda k, v: k)
        stream2 = builder.stream("topic2").select_key(lambda k, v: k)
        stream3 = builder.stream("topic3").select_key(lambda k, v: k)

        joined = stream1.join(
            stream2,
            lambda v1, v2: v1 + v2,
            JoinWindows.of_time_difference_with_no_grace(ms(30)),
            StreamJoined.as_("join-store").with_name("join-repartition"),
        )

        joined.join(
            stream3,
            lambda v1, v2: v1 + v2,
            JoinWindows.of_time_difference_with_no_grace(ms(30)),
            StreamJoined.as_("join-store").with_name("join-repartition"),
        )

        builder.build()
        pytest.fail("Should not build re-using repartition topic name")


def test_should_pass_with_same_repartition_topic_name_using_same_k_grouped_stream_optimized() -> (
    None
):
    builder = StreamsBuilder()
    properties = {"topology.optimization": OPTIMIZE}
    k_grouped_stream = (
        builder.stream("topic").select_key(lambda k, v: k).group_by_key(Grouped.as_("grouping"))
    )
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(10))).count()
    k_grouped_stream.windowed_by(TimeWindows.of_size_with_no_grace(ms(30))).count()
    builder.build(properties)


def test_should_keep_repartition_topic_name_for_joins() -> None:
    expected_left_repartition_topic = "(topic: my-join-left-repartition)"
    expected_right_repartition_topic = "(topic: my-join-right-repartition)"

    join_topology_first = build_stream_join(False)

    assert expected_left_repartition_topic in join_topology_first
    assert expected_right_repartition_topic in join_topology_first

    join_topology_updated = build_stream_join(True)

    assert expected_left_repartition_topic in join_topology_updated
    assert expected_right_repartition_topic in join_topology_updated


def test_should_keep_repartition_topic_name_for_group_by_key_time_windows() -> None:
    expected_time_window_repartition_topic = "(topic: time-window-grouping-repartition)"

    time_window_grouping_repartition_topology = build_stream_group_by_key_time_windows(False, True)
    assert expected_time_window_repartition_topic in time_window_grouping_repartition_topology

    time_window_grouping_updated_topology = build_stream_group_by_key_time_windows(True, True)
    assert expected_time_window_repartition_topic in time_window_grouping_updated_topology


def test_should_keep_repartition_topic_name_for_group_by_time_windows() -> None:
    expected_time_window_repartition_topic = "(topic: time-window-grouping-repartition)"

    time_window_grouping_repartition_topology = build_stream_group_by_key_time_windows(False, False)
    assert expected_time_window_repartition_topic in time_window_grouping_repartition_topology

    time_window_grouping_updated_topology = build_stream_group_by_key_time_windows(True, False)
    assert expected_time_window_repartition_topic in time_window_grouping_updated_topology


def test_should_keep_repartition_topic_name_for_group_by_key_no_windows() -> None:
    expected_no_window_repartition_topic = "(topic: kstream-grouping-repartition)"

    no_window_grouping_repartition_topology = build_stream_group_by_key_no_windows(False, True)
    assert expected_no_window_repartition_topic in no_window_grouping_repartition_topology

    no_window_grouping_updated_topology = build_stream_group_by_key_no_windows(True, True)
    assert expected_no_window_repartition_topic in no_window_grouping_updated_topology


def test_should_keep_repartition_topic_name_for_group_by_no_windows() -> None:
    expected_no_window_repartition_topic = "(topic: kstream-grouping-repartition)"

    no_window_grouping_repartition_topology = build_stream_group_by_key_no_windows(False, False)
    assert expected_no_window_repartition_topic in no_window_grouping_repartition_topology

    no_window_grouping_updated_topology = build_stream_group_by_key_no_windows(True, False)
    assert expected_no_window_repartition_topic in no_window_grouping_updated_topology


def test_should_keep_repartition_topic_name_for_group_by_key_session_windows() -> None:
    expected_session_window_repartition_topic = "(topic: session-window-grouping-repartition)"

    session_window_grouping_repartition_topology = build_stream_group_by_key_session_windows(
        False, True
    )
    assert expected_session_window_repartition_topic in session_window_grouping_repartition_topology

    session_window_grouping_updated_topology = build_stream_group_by_key_session_windows(True, True)
    assert expected_session_window_repartition_topic in session_window_grouping_updated_topology


def test_should_keep_repartition_topic_name_for_group_by_session_windows() -> None:
    expected_session_window_repartition_topic = "(topic: session-window-grouping-repartition)"

    session_window_grouping_repartition_topology = build_stream_group_by_key_session_windows(
        False, False
    )
    assert expected_session_window_repartition_topic in session_window_grouping_repartition_topology

    session_window_grouping_updated_topology = build_stream_group_by_key_session_windows(
        True, False
    )
    assert expected_session_window_repartition_topic in session_window_grouping_updated_topology


def test_should_keep_repartition_name_for_group_by_k_table() -> None:
    expected_k_table_group_by_repartition_topic = "(topic: ktable-group-by-repartition)"

    ktable_group_by_topology = build_k_table_group_by(False)
    assert expected_k_table_group_by_repartition_topic in ktable_group_by_topology

    ktable_updated_group_by_topology = build_k_table_group_by(True)
    assert expected_k_table_group_by_repartition_topic in ktable_updated_group_by_topology


# --------------------------------------------------------------------------- builders


def build_k_table_group_by(other_operations: bool) -> str:
    ktable_group_by_topic_name = "ktable-group-by"
    builder = StreamsBuilder()

    ktable = builder.table("topic")

    if other_operations:
        ktable.filter(lambda k, v: True).group_by(
            key_value_pair, Grouped.as_(ktable_group_by_topic_name)
        ).count()
    else:
        ktable.group_by(key_value_pair, Grouped.as_(ktable_group_by_topic_name)).count()

    return str(builder.build().describe())


def build_stream_group_by_key_time_windows(other_operations: bool, is_group_by_key: bool) -> str:
    grouped_time_window_repartition_topic_name = "time-window-grouping"
    builder = StreamsBuilder()

    select_key_stream = builder.stream("topic").select_key(lambda k, v: k + v)

    if is_group_by_key:
        if other_operations:
            (
                select_key_stream.filter(lambda k, v: True)
                .map_values(lambda v: v)
                .group_by_key(Grouped.as_(grouped_time_window_repartition_topic_name))
                .windowed_by(TimeWindows.of_size_with_no_grace(ms(10)))
                .count()
            )
        else:
            (
                select_key_stream.group_by_key(
                    Grouped.as_(grouped_time_window_repartition_topic_name)
                )
                .windowed_by(TimeWindows.of_size_with_no_grace(ms(10)))
                .count()
            )
    else:
        if other_operations:
            (
                select_key_stream.filter(lambda k, v: True)
                .map_values(lambda v: v)
                .group_by(kv_mapper, Grouped.as_(grouped_time_window_repartition_topic_name))
                .count()
            )
        else:
            select_key_stream.group_by(
                kv_mapper, Grouped.as_(grouped_time_window_repartition_topic_name)
            ).count()

    return str(builder.build().describe())


def build_stream_group_by_key_session_windows(other_operations: bool, is_group_by_key: bool) -> str:
    builder = StreamsBuilder()

    select_key_stream = builder.stream("topic").select_key(lambda k, v: k + v)

    grouped_session_window_repartition_topic_name = "session-window-grouping"
    if is_group_by_key:
        if other_operations:
            (
                select_key_stream.filter(lambda k, v: True)
                .map_values(lambda v: v)
                .group_by_key(Grouped.as_(grouped_session_window_repartition_topic_name))
                .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(ms(10)))
                .count()
            )
        else:
            (
                select_key_stream.group_by_key(
                    Grouped.as_(grouped_session_window_repartition_topic_name)
                )
                .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(ms(10)))
                .count()
            )
    else:
        if other_operations:
            (
                select_key_stream.filter(lambda k, v: True)
                .map_values(lambda v: v)
                .group_by(kv_mapper, Grouped.as_(grouped_session_window_repartition_topic_name))
                .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(ms(10)))
                .count()
            )
        else:
            (
                select_key_stream.group_by(
                    kv_mapper, Grouped.as_(grouped_session_window_repartition_topic_name)
                )
                .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(ms(10)))
                .count()
            )

    return str(builder.build().describe())


def build_stream_group_by_key_no_windows(other_operations: bool, is_group_by_key: bool) -> str:
    builder = StreamsBuilder()

    select_key_stream = builder.stream("topic").select_key(lambda k, v: k + v)

    group_by_and_count_repartition_topic_name = "kstream-grouping"
    if is_group_by_key:
        if other_operations:
            select_key_stream.filter(lambda k, v: True).map_values(lambda v: v).group_by_key(
                Grouped.as_(group_by_and_count_repartition_topic_name)
            ).count()
        else:
            select_key_stream.group_by_key(
                Grouped.as_(group_by_and_count_repartition_topic_name)
            ).count()
    else:
        if other_operations:
            select_key_stream.filter(lambda k, v: True).map_values(lambda v: v).group_by(
                kv_mapper, Grouped.as_(group_by_and_count_repartition_topic_name)
            ).count()
        else:
            select_key_stream.group_by(
                kv_mapper, Grouped.as_(group_by_and_count_repartition_topic_name)
            ).count()

    return str(builder.build().describe())


def build_stream_join(include_other_operations: bool) -> str:
    builder = StreamsBuilder()
    initial_stream_one = builder.stream("topic-one")
    initial_stream_two = builder.stream("topic-two")

    if include_other_operations:
        # without naming the join, the repartition topic name would change due to operator
        # changing before join performed
        updated_stream_one = (
            initial_stream_one.select_key(lambda k, v: k + v)
            .filter(lambda k, v: True)
            .peek(lambda k, v: print(k + v))
        )
        updated_stream_two = (
            initial_stream_two.select_key(lambda k, v: k + v)
            .filter(lambda k, v: True)
            .peek(lambda k, v: print(k + v))
        )
    else:
        updated_stream_one = initial_stream_one.select_key(lambda k, v: k + v)
        updated_stream_two = initial_stream_two.select_key(lambda k, v: k + v)

    join_repartition_topic_name = "my-join"
    updated_stream_one.join(
        updated_stream_two,
        lambda v1, v2: v1 + v2,
        JoinWindows.of_time_difference_with_no_grace(ms(1000)),
        StreamJoined.with_(serdes.String(), serdes.String(), serdes.String()).with_name(
            join_repartition_topic_name
        ),
    )

    return str(builder.build().describe())


def build_topology(optimization_config: str):
    def initializer() -> int:
        return 0

    def aggregator(k: str, v: str, agg: int) -> int:
        return agg + len(v)

    def reducer(v1: str, v2: str) -> str:
        return v1 + ":" + v2

    processor_value_collector: list[str] = []

    builder = StreamsBuilder()

    source_stream = builder.stream(
        INPUT_TOPIC, consumed=Consumed.with_(serdes.String(), serdes.String())
    )

    mapped_stream = source_stream.map(lambda k, v: KeyValue(k.upper(), v))

    mapped_stream.filter(lambda k, v: k == "B").map_values(lambda v: v.upper()).process(
        lambda: SimpleProcessor(processor_value_collector)
    )

    count_stream = (
        mapped_stream.group_by_key(Grouped.as_(FIRST_REPARTITION_TOPIC_NAME))
        .count(Materialized.with_(serdes.String(), serdes.Long()))
        .to_stream()
    )

    count_stream.to(COUNT_TOPIC, Produced.with_(serdes.String(), serdes.Long()))

    mapped_stream.group_by_key(Grouped.as_(SECOND_REPARTITION_TOPIC_NAME)).aggregate(
        initializer, aggregator, Materialized.with_(serdes.String(), serdes.Integer())
    ).to_stream().to(AGGREGATION_TOPIC, Produced.with_(serdes.String(), serdes.Integer()))

    # adding operators for case where the repartition node is further downstream
    mapped_stream.filter(lambda k, v: True).peek(lambda k, v: print(k + ":" + v)).group_by_key(
        Grouped.as_(THIRD_REPARTITION_TOPIC_NAME)
    ).reduce(reducer, Materialized.with_(serdes.String(), serdes.String())).to_stream().to(
        REDUCE_TOPIC, Produced.with_(serdes.String(), serdes.String())
    )

    mapped_stream.filter(lambda k, v: k == "A").join(
        count_stream,
        lambda v1, v2: v1 + ":" + str(v2),
        JoinWindows.of_time_difference_with_no_grace(ms(5000)),
        StreamJoined.with_(serdes.String(), serdes.String(), serdes.Long())
        .with_store_name(FOURTH_REPARTITION_TOPIC_NAME)
        .with_name(FOURTH_REPARTITION_TOPIC_NAME),
    ).to(JOINED_TOPIC)

    properties = {"topology.optimization": optimization_config}
    return builder.build(properties)


# Kafka's RepartitionTopicNamingTest.EXPECTED_OPTIMIZED_TOPOLOGY / EXPECTED_UNOPTIMIZED_TOPOLOGY
EXPECTED_OPTIMIZED_TOPOLOGY = (
    "Topologies:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
    "      --> KSTREAM-MAP-0000000001\n"
    "    Processor: KSTREAM-MAP-0000000001 (stores: [])\n"
    "      --> KSTREAM-FILTER-0000000002, count-stream-repartition-filter\n"
    "      <-- KSTREAM-SOURCE-0000000000\n"
    "    Processor: KSTREAM-FILTER-0000000002 (stores: [])\n"
    "      --> KSTREAM-MAPVALUES-0000000003\n"
    "      <-- KSTREAM-MAP-0000000001\n"
    "    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])\n"
    "      --> KSTREAM-PROCESSOR-0000000004\n"
    "      <-- KSTREAM-FILTER-0000000002\n"
    "    Processor: count-stream-repartition-filter (stores: [])\n"
    "      --> count-stream-repartition-sink\n"
    "      <-- KSTREAM-MAP-0000000001\n"
    "    Processor: KSTREAM-PROCESSOR-0000000004 (stores: [])\n"
    "      --> none\n"
    "      <-- KSTREAM-MAPVALUES-0000000003\n"
    "    Sink: count-stream-repartition-sink (topic: count-stream-repartition)\n"
    "      <-- count-stream-repartition-filter\n"
    "\n"
    "  Sub-topology: 1\n"
    "    Source: count-stream-repartition-source (topics: [count-stream-repartition])\n"
    "      --> KSTREAM-FILTER-0000000020, KSTREAM-AGGREGATE-0000000007, KSTREAM-AGGREGATE-0000000014, KSTREAM-FILTER-0000000029\n"
    "    Processor: KSTREAM-AGGREGATE-0000000007 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000006])\n"
    "      --> KTABLE-TOSTREAM-0000000011\n"
    "      <-- count-stream-repartition-source\n"
    "    Processor: KTABLE-TOSTREAM-0000000011 (stores: [])\n"
    "      --> joined-stream-other-windowed, KSTREAM-SINK-0000000012\n"
    "      <-- KSTREAM-AGGREGATE-0000000007\n"
    "    Processor: KSTREAM-FILTER-0000000020 (stores: [])\n"
    "      --> KSTREAM-PEEK-0000000021\n"
    "      <-- count-stream-repartition-source\n"
    "    Processor: KSTREAM-FILTER-0000000029 (stores: [])\n"
    "      --> joined-stream-this-windowed\n"
    "      <-- count-stream-repartition-source\n"
    "    Processor: KSTREAM-PEEK-0000000021 (stores: [])\n"
    "      --> KSTREAM-REDUCE-0000000023\n"
    "      <-- KSTREAM-FILTER-0000000020\n"
    "    Processor: joined-stream-other-windowed (stores: [joined-stream-other-join-store])\n"
    "      --> joined-stream-other-join\n"
    "      <-- KTABLE-TOSTREAM-0000000011\n"
    "    Processor: joined-stream-this-windowed (stores: [joined-stream-this-join-store])\n"
    "      --> joined-stream-this-join\n"
    "      <-- KSTREAM-FILTER-0000000029\n"
    "    Processor: KSTREAM-AGGREGATE-0000000014 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000013])\n"
    "      --> KTABLE-TOSTREAM-0000000018\n"
    "      <-- count-stream-repartition-source\n"
    "    Processor: KSTREAM-REDUCE-0000000023 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000022])\n"
    "      --> KTABLE-TOSTREAM-0000000027\n"
    "      <-- KSTREAM-PEEK-0000000021\n"
    "    Processor: joined-stream-other-join (stores: [joined-stream-this-join-store])\n"
    "      --> joined-stream-merge\n"
    "      <-- joined-stream-other-windowed\n"
    "    Processor: joined-stream-this-join (stores: [joined-stream-other-join-store])\n"
    "      --> joined-stream-merge\n"
    "      <-- joined-stream-this-windowed\n"
    "    Processor: KTABLE-TOSTREAM-0000000018 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000019\n"
    "      <-- KSTREAM-AGGREGATE-0000000014\n"
    "    Processor: KTABLE-TOSTREAM-0000000027 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000028\n"
    "      <-- KSTREAM-REDUCE-0000000023\n"
    "    Processor: joined-stream-merge (stores: [])\n"
    "      --> KSTREAM-SINK-0000000038\n"
    "      <-- joined-stream-this-join, joined-stream-other-join\n"
    "    Sink: KSTREAM-SINK-0000000012 (topic: outputTopic_0)\n"
    "      <-- KTABLE-TOSTREAM-0000000011\n"
    "    Sink: KSTREAM-SINK-0000000019 (topic: outputTopic_1)\n"
    "      <-- KTABLE-TOSTREAM-0000000018\n"
    "    Sink: KSTREAM-SINK-0000000028 (topic: outputTopic_2)\n"
    "      <-- KTABLE-TOSTREAM-0000000027\n"
    "    Sink: KSTREAM-SINK-0000000038 (topic: outputTopicForJoin)\n"
    "      <-- joined-stream-merge\n\n"
)


EXPECTED_UNOPTIMIZED_TOPOLOGY = (
    "Topologies:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
    "      --> KSTREAM-MAP-0000000001\n"
    "    Processor: KSTREAM-MAP-0000000001 (stores: [])\n"
    "      --> KSTREAM-FILTER-0000000029, KSTREAM-FILTER-0000000002, KSTREAM-FILTER-0000000020, aggregate-stream-repartition-filter, count-stream-repartition-filter\n"
    "      <-- KSTREAM-SOURCE-0000000000\n"
    "    Processor: KSTREAM-FILTER-0000000020 (stores: [])\n"
    "      --> KSTREAM-PEEK-0000000021\n"
    "      <-- KSTREAM-MAP-0000000001\n"
    "    Processor: KSTREAM-FILTER-0000000002 (stores: [])\n"
    "      --> KSTREAM-MAPVALUES-0000000003\n"
    "      <-- KSTREAM-MAP-0000000001\n"
    "    Processor: KSTREAM-FILTER-0000000029 (stores: [])\n"
    "      --> joined-stream-left-repartition-filter\n"
    "      <-- KSTREAM-MAP-0000000001\n"
    "    Processor: KSTREAM-PEEK-0000000021 (stores: [])\n"
    "      --> reduced-stream-repartition-filter\n"
    "      <-- KSTREAM-FILTER-0000000020\n"
    "    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])\n"
    "      --> KSTREAM-PROCESSOR-0000000004\n"
    "      <-- KSTREAM-FILTER-0000000002\n"
    "    Processor: aggregate-stream-repartition-filter (stores: [])\n"
    "      --> aggregate-stream-repartition-sink\n"
    "      <-- KSTREAM-MAP-0000000001\n"
    "    Processor: count-stream-repartition-filter (stores: [])\n"
    "      --> count-stream-repartition-sink\n"
    "      <-- KSTREAM-MAP-0000000001\n"
    "    Processor: joined-stream-left-repartition-filter (stores: [])\n"
    "      --> joined-stream-left-repartition-sink\n"
    "      <-- KSTREAM-FILTER-0000000029\n"
    "    Processor: reduced-stream-repartition-filter (stores: [])\n"
    "      --> reduced-stream-repartition-sink\n"
    "      <-- KSTREAM-PEEK-0000000021\n"
    "    Processor: KSTREAM-PROCESSOR-0000000004 (stores: [])\n"
    "      --> none\n"
    "      <-- KSTREAM-MAPVALUES-0000000003\n"
    "    Sink: aggregate-stream-repartition-sink (topic: aggregate-stream-repartition)\n"
    "      <-- aggregate-stream-repartition-filter\n"
    "    Sink: count-stream-repartition-sink (topic: count-stream-repartition)\n"
    "      <-- count-stream-repartition-filter\n"
    "    Sink: joined-stream-left-repartition-sink (topic: joined-stream-left-repartition)\n"
    "      <-- joined-stream-left-repartition-filter\n"
    "    Sink: reduced-stream-repartition-sink (topic: reduced-stream-repartition)\n"
    "      <-- reduced-stream-repartition-filter\n"
    "\n"
    "  Sub-topology: 1\n"
    "    Source: count-stream-repartition-source (topics: [count-stream-repartition])\n"
    "      --> KSTREAM-AGGREGATE-0000000007\n"
    "    Processor: KSTREAM-AGGREGATE-0000000007 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000006])\n"
    "      --> KTABLE-TOSTREAM-0000000011\n"
    "      <-- count-stream-repartition-source\n"
    "    Processor: KTABLE-TOSTREAM-0000000011 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000012, joined-stream-other-windowed\n"
    "      <-- KSTREAM-AGGREGATE-0000000007\n"
    "    Source: joined-stream-left-repartition-source (topics: [joined-stream-left-repartition])\n"
    "      --> joined-stream-this-windowed\n"
    "    Processor: joined-stream-other-windowed (stores: [joined-stream-other-join-store])\n"
    "      --> joined-stream-other-join\n"
    "      <-- KTABLE-TOSTREAM-0000000011\n"
    "    Processor: joined-stream-this-windowed (stores: [joined-stream-this-join-store])\n"
    "      --> joined-stream-this-join\n"
    "      <-- joined-stream-left-repartition-source\n"
    "    Processor: joined-stream-other-join (stores: [joined-stream-this-join-store])\n"
    "      --> joined-stream-merge\n"
    "      <-- joined-stream-other-windowed\n"
    "    Processor: joined-stream-this-join (stores: [joined-stream-other-join-store])\n"
    "      --> joined-stream-merge\n"
    "      <-- joined-stream-this-windowed\n"
    "    Processor: joined-stream-merge (stores: [])\n"
    "      --> KSTREAM-SINK-0000000038\n"
    "      <-- joined-stream-this-join, joined-stream-other-join\n"
    "    Sink: KSTREAM-SINK-0000000012 (topic: outputTopic_0)\n"
    "      <-- KTABLE-TOSTREAM-0000000011\n"
    "    Sink: KSTREAM-SINK-0000000038 (topic: outputTopicForJoin)\n"
    "      <-- joined-stream-merge\n"
    "\n"
    "  Sub-topology: 2\n"
    "    Source: aggregate-stream-repartition-source (topics: [aggregate-stream-repartition])\n"
    "      --> KSTREAM-AGGREGATE-0000000014\n"
    "    Processor: KSTREAM-AGGREGATE-0000000014 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000013])\n"
    "      --> KTABLE-TOSTREAM-0000000018\n"
    "      <-- aggregate-stream-repartition-source\n"
    "    Processor: KTABLE-TOSTREAM-0000000018 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000019\n"
    "      <-- KSTREAM-AGGREGATE-0000000014\n"
    "    Sink: KSTREAM-SINK-0000000019 (topic: outputTopic_1)\n"
    "      <-- KTABLE-TOSTREAM-0000000018\n"
    "\n"
    "  Sub-topology: 3\n"
    "    Source: reduced-stream-repartition-source (topics: [reduced-stream-repartition])\n"
    "      --> KSTREAM-REDUCE-0000000023\n"
    "    Processor: KSTREAM-REDUCE-0000000023 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000022])\n"
    "      --> KTABLE-TOSTREAM-0000000027\n"
    "      <-- reduced-stream-repartition-source\n"
    "    Processor: KTABLE-TOSTREAM-0000000027 (stores: [])\n"
    "      --> KSTREAM-SINK-0000000028\n"
    "      <-- KSTREAM-REDUCE-0000000023\n"
    "    Sink: KSTREAM-SINK-0000000028 (topic: outputTopic_2)\n"
    "      <-- KTABLE-TOSTREAM-0000000027\n\n"
)
