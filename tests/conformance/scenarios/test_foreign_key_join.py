"""Foreign-key KTable-KTable joins: ports of Kafka Streams 4.1's
``KTableKTableForeignKeyJoinScenarioTest`` (default and explicit serdes, the internal topic and
pseudo-topic names), plus the subscription instructions checked end to end (foreign key
changes, deletes, null foreign keys) against what Kafka Streams 4.1.1 outputs for the script.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import (
    Materialized,
    StreamsBuilder,
    TableJoined,
    TopologyTestDriver,
    serdes,
)

I = serdes.Integer()  # noqa: E741
S = serdes.String()


def _fk(value: str) -> int:
    return int(value.split("-")[0])


def _validate_topology_can_process_data(b: StreamsBuilder, tmp_path: Any) -> None:
    """validateTopologyCanProcessData: Integer/String default serdes."""
    config = {
        "default.key.serde": "integer",
        "default.value.serde": "string",
        "state.dir": str(tmp_path),
    }
    with TopologyTestDriver(b.build(), config) as d:
        d.create_input_topic("A", I, S).pipe_input(1, "999-alpha")
        d.create_input_topic("B", I, S).pipe_input(999, "beta")
        out = d.create_output_topic("output", I, S).read_key_values_to_map()
    assert out == {1: "(999-alpha,(999-alpha,beta))"}


@pytest.mark.parametrize(
    "variant",
    ["default", "consumed", "join_result_serdes", "equi_join_result_serdes", "produced"],
)
def test_should_work_with_serdes(variant: str, tmp_path: Any) -> None:
    """shouldWorkWithDefaultSerdes / ...AndConsumedSerdes / ...AndJoinResultSerdes /
    ...AndEquiJoinResultSerdes / ...AndProducedSerdes."""
    b = StreamsBuilder()
    a = b.table("A", key_serde=I, value_serde=S) if variant == "consumed" else b.table("A")
    bt = b.table("B")
    mat = Materialized.as_("asdf")
    if variant == "join_result_serdes":
        mat = mat.with_key_serde(I).with_value_serde(S)
    fk_result = a.join(bt, _fk, lambda av, bv: f"({av},{bv})", materialized=mat)
    final_mat = Materialized.with_(I, S) if variant == "equi_join_result_serdes" else None
    final = a.join(fk_result, lambda av, fv: f"({av},{fv})", materialized=final_mat)
    if variant == "produced":
        final.to_stream().to("output", key_serde=I, value_serde=S)
    else:
        final.to_stream().to("output")
    _validate_topology_can_process_data(b, tmp_path)


class RecordingSerde:
    """UniqueTopicSerdeScope: a serde that records the topics it serialises for."""

    def __init__(self, inner: Any, topics: set[str], is_key: bool) -> None:
        self.inner = inner
        self.topics = topics
        self.suffix = "--key" if is_key else "--value"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        self.topics.add(f"{topic}{self.suffix}")
        return self.inner.serialize(topic, data)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        return self.inner.deserialize(topic, data)


def test_should_use_expected_topics_with_serde(tmp_path: Any) -> None:
    """shouldUseExpectedTopicsWithSerde: internal topic and pseudo-topic names (the changelog
    topics are left out: the test driver writes no changelogs through the user serdes)."""
    app = "ktable-ktable-joinOnForeignKey"
    topics: set[str] = set()
    b = StreamsBuilder()
    left = b.table(
        "left_table",
        key_serde=RecordingSerde(I, topics, True),
        value_serde=RecordingSerde(S, topics, False),
    )
    right = b.table(
        "right_table",
        key_serde=RecordingSerde(I, topics, True),
        value_serde=RecordingSerde(S, topics, False),
    )
    left.join(
        right,
        lambda v: int(v.split("|")[1]),
        lambda v1, v2: f"({v1},{v2})",
        materialized=Materialized.with_(None, RecordingSerde(S, topics, False)),
    ).to_stream().to("output-topic")
    config = {"application.id": app, "state.dir": str(tmp_path)}
    with TopologyTestDriver(b.build(), config) as d:
        d.create_input_topic("left_table", I, S).pipe_input(2, "lhsValue1|1")
        d.create_input_topic("right_table", I, S).pipe_input(1, "rhsValue1")
    expected = {
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic-fk--key",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic-pk--key",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic-vh--value",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic--key",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic--key",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic--value",
    }
    assert expected <= topics
    assert not {t for t in topics if "FK-JOIN" in t} - expected


# -- end-to-end instruction cases -------------------------------------------------------


def _fk_topology(kind: str, **kwargs: Any) -> StreamsBuilder:
    b = StreamsBuilder()
    left = b.table("left", key_serde=S, value_serde=S)
    right = b.table("right", key_serde=S, value_serde=S)
    op = left.join if kind == "inner" else left.left_join
    op(
        right,
        lambda v: None if v.split("|")[1] == "" else v.split("|")[1],
        lambda lv, rv: f"{lv}+{'null' if rv is None else rv}",
        **kwargs,
    ).to_stream().to("out", key_serde=S, value_serde=S)
    return b


def _run(b: StreamsBuilder, tmp_path: Any, steps: list[tuple[str, str, Any, int]]) -> list[Any]:
    cfg = {"state.dir": str(tmp_path), "statestore.cache.max.bytes": 0}
    with TopologyTestDriver(b.build(), cfg, initial_wall_clock_time_ms=0) as d:
        inputs = {t: d.create_input_topic(t, S, S) for t in ("left", "right")}
        for topic, key, value, ts in steps:
            inputs[topic].pipe_input(key, value, ts)
        return [
            (r.key, r.value, r.timestamp)
            for r in d.create_output_topic("out", S, S).read_records_to_list()
        ]


STEPS = [
    ("left", "l1", "a|r1", 1),  # no r1 yet: inner emits nothing, left emits a+null
    ("right", "r1", "x", 2),  # r1 arrives: l1 joins (timestamp of the right update)
    ("left", "l2", "b|r1", 3),  # a second subscriber of r1 (max of both timestamps)
    ("right", "r1", "y", 4),  # r1 changes: both subscribers get the new value (prefix scan)
    ("left", "l1", "c|r2", 5),  # l1 moves to r2, which does not exist: (l1, null) / c+null
    ("right", "r1", None, 6),  # r1 deleted: l2 loses its match
    ("left", "l2", "d|", 7),  # null foreign key
    ("left", "l1", None, 8),  # l1 deleted
    ("right", "r2", "z", 9),  # nobody subscribes to r2 any more
]


def test_inner_fk_join_instructions(tmp_path: Any) -> None:
    # expected: what Kafka Streams 4.1.1's TopologyTestDriver outputs for STEPS
    out = _run(_fk_topology("inner"), tmp_path, STEPS)
    assert out == [
        ("l1", "a|r1+x", 2),
        ("l2", "b|r1+x", 3),
        ("l1", "a|r1+y", 4),
        ("l2", "b|r1+y", 4),
        ("l1", None, 5),  # PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE to the new foreign key
        ("l2", None, 6),
        ("l2", None, 7),  # null foreign key: DELETE_KEY_AND_PROPAGATE to the old one
        ("l1", None, 8),
    ]


def test_left_fk_join_instructions(tmp_path: Any) -> None:
    # expected: what Kafka Streams 4.1.1's TopologyTestDriver outputs for STEPS
    out = _run(_fk_topology("left"), tmp_path, STEPS)
    assert out == [
        ("l1", "a|r1+null", 1),
        ("l1", "a|r1+x", 2),
        ("l2", "b|r1+x", 3),
        ("l1", "a|r1+y", 4),
        ("l2", "b|r1+y", 4),
        ("l1", "c|r2+null", 5),
        ("l2", "b|r1+null", 6),
        ("l2", "d|+null", 7),
        ("l1", None, 8),
    ]


def test_fk_join_names(tmp_path: Any) -> None:
    """doJoinOnForeignKey's generated names, and the TableJoined-derived ones."""
    topo = _fk_topology("inner").build()
    assert "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic" in topo.internal_topics
    assert "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic" in topo.internal_topics
    for name in (
        "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007",
        "KTABLE-SINK-0000000008",
        "KTABLE-SOURCE-0000000009",
        "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011",
        "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012",
        "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013",
        "KTABLE-SINK-0000000015",
        "KTABLE-SOURCE-0000000016",
        "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017",
        "KTABLE-FK-JOIN-OUTPUT-0000000018",
    ):
        assert name in topo.nodes, name
    assert "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010" in topo.store_builders
    named = _fk_topology("left", table_joined=TableJoined.as_("fk")).build()
    assert "fk-subscription-registration-topic" in named.internal_topics
    assert "fk-subscription-response-topic" in named.internal_topics
    assert "fk-subscription-store" in named.store_builders
    assert {"fk-subscription-receive", "fk-result", "fk-subscription-response-resolver"} <= set(
        named.nodes
    )
