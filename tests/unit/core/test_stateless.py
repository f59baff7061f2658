"""Stateless KStream operators through the test driver."""

from streaming import Branched, StreamsBuilder, TopologyTestDriver, serdes

S, L = serdes.String(), serdes.Long()


def run(build, inputs, outputs, key_serde=S, value_serde=L):
    builder = StreamsBuilder()
    build(builder.stream("in", key_serde=S, value_serde=L))
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("in", S, L)
        for key, value, ts in inputs:
            topic.pipe_input(key, value, timestamp=ts)
        return {
            name: [
                (r.key, r.value, r.timestamp)
                for r in driver.create_output_topic(
                    name, key_serde, value_serde
                ).read_records_to_list()
            ]
            for name in outputs
        }


def test_filter_map_values_and_timestamps():
    out = run(
        lambda s: s.filter(lambda k, v: v % 2 == 0)
        .map_values(lambda v: v * 10)
        .to("out", value_serde=L),
        [("a", 1, 5), ("b", 2, 3), ("c", 4, 9)],
        ["out"],
    )
    assert out["out"] == [("b", 20, 3), ("c", 40, 9)]


def test_flat_map_values_and_select_key():
    out = run(
        lambda s: s.flat_map_values(lambda v: [v] * v)
        .select_key(lambda k, v: k + "x")
        .to("out", key_serde=S, value_serde=L),
        [("a", 2, 1), ("b", 0, 2), ("c", 1, 3)],
        ["out"],
    )
    assert out["out"] == [("ax", 2, 1), ("ax", 2, 1), ("cx", 1, 3)]


def test_split_routes_to_first_matching_branch_and_default():
    def build(s):
        branches = (
            s.split(named="b-")
            .branch(lambda k, v: v < 0, Branched.as_("neg"))
            .branch(lambda k, v: v < 10, Branched.as_("small"))
            .default_branch(Branched.as_("big"))
        )
        for name, stream in branches.items():
            stream.to(name)

    out = run(
        build,
        [("a", -1, 0), ("b", 5, 1), ("c", 50, 2), ("d", -7, 3)],
        ["b-neg", "b-small", "b-big"],
    )
    assert out == {
        "b-neg": [("a", -1, 0), ("d", -7, 3)],
        "b-small": [("b", 5, 1)],
        "b-big": [("c", 50, 2)],
    }


def test_merge_peek_foreach_and_topic_extractor():
    seen = []

    def build(s):
        evens = s.filter(lambda k, v: v % 2 == 0)
        odds = s.filter_not(lambda k, v: v % 2 == 0)
        merged = evens.merge(odds).peek(lambda k, v: seen.append(("peek", k, v)))
        merged.foreach(lambda k, v: seen.append(("each", k, v)))
        # merge drops the serdes (Kafka's doMerge): the sink names them
        merged.to(lambda k, v, ctx: "even" if v % 2 == 0 else "odd", key_serde=S, value_serde=L)

    out = run(build, [("a", 1, 0), ("b", 2, 1)], ["even", "odd"])
    assert out == {"even": [("b", 2, 1)], "odd": [("a", 1, 0)]}
    assert seen == [("peek", "a", 1), ("each", "a", 1), ("peek", "b", 2), ("each", "b", 2)]


def test_map_with_null_values_keeps_them():
    out = run(
        lambda s: s.map(lambda k, v: (k.upper(), v)).to("out", key_serde=S, value_serde=L),
        [("a", None, 1)],
        ["out"],
    )
    assert out["out"] == [("A", None, 1)]
