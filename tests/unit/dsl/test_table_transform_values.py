"""``KTable.transform_values`` (Kafka's ``KTableTransformValues``): one transformer per task
with the processor context and its stores, deletes seen by the transformer, forwarding
refused, the unmaterialized table read by a join through its own transformer, and a
materialized one queryable under its name."""

from __future__ import annotations

import pytest

from streaming import Materialized, StreamsBuilder, TopologyTestDriver, serdes
from streaming.state import Stores

S = serdes.String()


class Versioned:
    """Appends how often its key was seen (counted in the ``seen`` store); a delete stays
    a delete."""

    def init(self, context):
        self.seen = context.get_state_store("seen")

    def transform(self, key, value):
        if value is None:
            return None
        n = (self.seen.get(key) or 0) + 1
        self.seen.put(key, n)
        return f"{value}#{n}"

    def close(self):
        pass


class Upper:
    """Stateless: no init or close needed."""

    def transform(self, key, value):
        return None if value is None else value.upper()


def _build(transformer, materialized=None, stores=("seen",)):
    b = StreamsBuilder()
    b.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), S, serdes.Long())
    )
    table = b.table("t", key_serde=S, value_serde=S).transform_values(
        transformer, *stores, materialized=materialized
    )
    table.to_stream().to("changes", key_serde=S, value_serde=S)
    b.stream("s", key_serde=S, value_serde=S).join(table, lambda v, t: f"{v}->{t}").to(
        "joined", key_serde=S, value_serde=S
    )
    return b.build()


def _run(topology):
    with TopologyTestDriver(topology, {"application.id": "tv"}) as driver:
        table = driver.create_input_topic("t", S, S)
        stream = driver.create_input_topic("s", S, S)
        table.pipe_input("a", "x", 1)
        table.pipe_input("a", "y", 2)
        stream.pipe_input("a", "order", 3)
        table.pipe_input("a", None, 4)
        stream.pipe_input("a", "late order", 5)
        changes = driver.create_output_topic("changes", S, S).read_key_values_to_list()
        joined = driver.create_output_topic("joined", S, S).read_key_values_to_list()
        stored = None
        if "versions" in driver.get_all_state_stores():
            stored = dict(driver.get_key_value_store("versions").all())
        return (
            [(kv.key, kv.value) for kv in changes],
            [(kv.key, kv.value) for kv in joined],
            stored,
        )


def test_a_materialized_transform_uses_its_store_sees_deletes_and_serves_joins():
    changes, joined, stored = _run(_build(Versioned, Materialized.as_("versions")))
    assert changes == [("a", "x#1"), ("a", "y#2"), ("a", None)]
    assert joined == [("a", "order->y#2")]  # read from the materialized store
    assert stored == {}  # the delete removed the row


def test_an_unmaterialized_transform_serves_joins_through_its_own_transformer():
    changes, joined, _ = _run(_build(Upper, stores=()))
    assert changes == [("a", "X"), ("a", "Y"), ("a", None)]
    assert joined == [("a", "order->Y")]


def test_a_joins_getter_cannot_reach_the_transformers_stores():
    # as in Kafka: the getter's transformer is initialised with the join's context, which
    # is connected to the table's stores only
    with pytest.raises(Exception, match="has no access to StateStore seen"):
        _run(_build(Versioned))


class Forwarding(Versioned):
    def init(self, context):
        self.context = context

    def transform(self, key, value):
        self.context.forward(key, value)


def test_transformer_may_not_forward():
    b = StreamsBuilder()
    b.table("t", key_serde=S, value_serde=S).transform_values(Forwarding).to_stream().to("o")
    driver = TopologyTestDriver(b.build(), {"application.id": "tv"})
    try:
        with pytest.raises(Exception, match=r"forward\(\) is not supported"):
            driver.create_input_topic("t", S, S).pipe_input("a", "x", 1)
    finally:
        driver.close()


def test_a_supplier_must_make_a_new_transformer_each_time():
    shared = Versioned()
    with pytest.raises(ValueError, match="must return a new object each time"):
        StreamsBuilder().table("t").transform_values(lambda: shared)
