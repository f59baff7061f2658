"""Conformance families for KTable-KTable joins: primary key and foreign key.

Twins of tests/conformance/java/ForeignKeyFamilies.java: same operators, lambdas and names. Each
family registers itself with ``families.register`` (conftest.py imports this module).

1. ``table_join`` {kind, left_mat, right_mat, filtered, join_mat, after, named, store}:
   table("left") (materialized "left-store" or not) and table("right") ("right-store"), one side
   optionally filter(v even) (unmaterialized: its value getter filters on the fly), then
   join / leftJoin / outerJoin with joiner (l, r) -> (l ?: 1000) * 1000 + (r ?: 500), optionally
   Named "jn" and Materialized "join-store", then toStream, or filter(v even), or
   groupBy((v mod 3, v)).reduce(+, -) in "gb-store" (which needs the join's old values) -> out.
2. ``fk_join`` {kind, left_mat, right_filtered, join_mat, extractor, null_fk, after, named,
   store}: table("left").join / leftJoin(table("right") (optionally filter(v even)), fk = "abc"
   [v mod 3] (null when null_fk and v mod 4 == 3), as f(v) or f(k, v), same joiner,
   TableJoined "fk" or not, Materialized "fk-store" or not) -> toStream / filter / groupBy as 1.
3. ``table_view`` {view, kind, store}: table("left") join / leftJoin a table read through its
   value getter: table("right").mapValues(v * 10); .filter(v even).mapValues(v + 1);
   table("right") join / leftJoin / outerJoin table("right2"); stream("right").groupByKey()
   .count("cnt-store") (then suppress(untilTimeLimit(10 ms, unbounded))); table("right")
   .groupBy((k, v)).reduce(+, -) in "red-store" -> toStream -> out.
4. ``windowed_table_join`` {window, kind, store}: stream("left") and stream("right")
   .groupByKey().windowedBy(tumbling 10 ms | session gap 5 ms).count("lw-store" / "rw-store"),
   joined / leftJoined / outerJoined on the windowed key -> toStream -> out.
"""

from __future__ import annotations

from typing import Any

from families import L, Outputs, S, _mat, _to, is_even, minus, mod3, plus, register
from hypothesis import strategies as st

from streaming import (
    BufferConfig,
    Grouped,
    Named,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TableJoined,
    TimeWindows,
    serdes,
)
from streaming.dsl.options import Materialized


def joiner(left: int | None, right: int | None) -> int:
    return (1000 if left is None else left) * 1000 + (500 if right is None else right)


def _table(b: StreamsBuilder, topic: str, materialized: Materialized | None) -> Any:
    if materialized is None:
        return b.table(topic, key_serde=S(), value_serde=L())
    return b.table(topic, key_serde=S(), value_serde=L(), materialized=materialized)


def _after(t: Any, p: dict[str, Any], outs: Outputs) -> None:
    after = p["after"]
    if after == "filter":
        t = t.filter(lambda k, v: is_even(v))
    elif after == "groupby":
        t = t.group_by(lambda k, v: (mod3(v), v), grouped=Grouped.with_(S(), L())).reduce(
            plus, minus, materialized=_mat("gb-store", p)
        )
    elif after != "none":
        raise ValueError(after)
    _to(t.to_stream(), "out", outs)


# ------------------------------------------------------------------ 1. table_join


def table_join(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    left = _table(b, "left", _mat("left-store", p) if p["left_mat"] else None)
    right = _table(b, "right", _mat("right-store", p) if p["right_mat"] else None)
    if p["filtered"] == "left":
        left = left.filter(lambda k, v: is_even(v))
    elif p["filtered"] == "right":
        right = right.filter(lambda k, v: is_even(v))
    named = Named.as_("jn") if p["named"] else None
    materialized = _mat("join-store", p) if p["join_mat"] else None
    kind = p["kind"]
    op = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[kind]
    _after(op(right, joiner, named=named, materialized=materialized), p, outs)


register(
    "table_join",
    table_join,
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(("inner", "left", "outer")),
            "left_mat": st.booleans(),
            "right_mat": st.booleans(),
            "filtered": st.sampled_from(("none", "left", "right")),
            "join_mat": st.booleans(),
            "after": st.sampled_from(("none", "none", "filter", "groupby")),
            "named": st.booleans(),
            "store": st.sampled_from(("rocksdb", "in_memory")),
        }
    ),
    input_topics=("left", "right"),
    caching=True,
)


# ------------------------------------------------------------------ 2. fk_join


def fk_of(v: int | None, null_fk: bool) -> str | None:
    if v is None or (null_fk and v % 4 == 3):
        return None
    return "abc"[v % 3]


def fk_join(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    left = _table(b, "left", _mat("left-store", p) if p["left_mat"] else None)
    right = _table(b, "right", None)
    if p["right_filtered"]:
        right = right.filter(lambda k, v: is_even(v))
    null_fk = p["null_fk"]
    if p["extractor"] == "value":
        extractor: Any = lambda v: fk_of(v, null_fk)  # noqa: E731
    else:
        extractor = lambda k, v: fk_of(v, null_fk)  # noqa: E731
    table_joined = TableJoined.as_("fk") if p["named"] else None
    materialized = _mat("fk-store", p) if p["join_mat"] else None
    op = left.join if p["kind"] == "inner" else left.left_join
    result = op(right, extractor, joiner, table_joined=table_joined, materialized=materialized)
    _after(result, p, outs)


register(
    "fk_join",
    fk_join,
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(("inner", "left")),
            "left_mat": st.booleans(),
            "right_filtered": st.booleans(),
            "join_mat": st.booleans(),
            "extractor": st.sampled_from(("value", "key_value")),
            "null_fk": st.booleans(),
            "after": st.sampled_from(("none", "none", "filter", "groupby")),
            "named": st.booleans(),
            "store": st.sampled_from(("rocksdb", "in_memory")),
        }
    ),
    input_topics=("left", "right", "left"),
    caching=True,
)


# ------------------------------------------------------------------ 3. table_view


def table_view(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    """table("left") joined with a derived table, read through that table's value getter."""
    view = p["view"]
    r2 = _table(b, "right2", None)  # read by every view, so that traces may use the topic
    if view == "map_values":
        other = _table(b, "right", None).map_values(lambda v: v * 10)
    elif view == "filter_map":
        other = _table(b, "right", None).filter(lambda k, v: is_even(v)).map_values(lambda v: v + 1)
    elif view.startswith("join_"):
        r1 = _table(b, "right", None)
        op = {"join_inner": r1.join, "join_left": r1.left_join, "join_outer": r1.outer_join}[view]
        other = op(r2, joiner)
    elif view in ("count", "suppress"):
        other = (
            b.stream("right", key_serde=S(), value_serde=L())
            .group_by_key(Grouped.with_(S(), L()))
            .count(materialized=_mat("cnt-store", p))
        )
        if view == "suppress":
            other = other.suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    elif view == "table_reduce":
        other = (
            _table(b, "right", None)
            .group_by(lambda k, v: (k, v), grouped=Grouped.with_(S(), L()))
            .reduce(plus, minus, materialized=_mat("red-store", p))
        )
    else:
        raise ValueError(view)
    left = _table(b, "left", None)
    op = left.join if p["kind"] == "inner" else left.left_join
    _to(op(other, joiner).to_stream(), "out", outs)


register(
    "table_view",
    table_view,
    st.fixed_dictionaries(
        {
            "view": st.sampled_from(
                (
                    "map_values",
                    "filter_map",
                    "join_inner",
                    "join_left",
                    "join_outer",
                    "count",
                    "suppress",
                    "table_reduce",
                )
            ),
            "kind": st.sampled_from(("inner", "left")),
            "store": st.sampled_from(("rocksdb", "in_memory")),
        }
    ),
    input_topics=("left", "right", "right2"),
    caching=True,
)


# ------------------------------------------------------------------ 4. windowed_table_join


def windowed_table_join(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    """Windowed counts of "left" and "right" joined on the windowed key (window value getters)."""
    session = p["window"] == "session"

    def counts(topic: str, store: str) -> Any:
        g = b.stream(topic, key_serde=S(), value_serde=L()).group_by_key(Grouped.with_(S(), L()))
        if session:
            w = g.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5))
            return w.count(materialized=_mat(store, p, 5))
        w = g.windowed_by(TimeWindows.of_size_with_no_grace(10))
        return w.count(materialized=_mat(store, p, 10))

    left = counts("left", "lw-store")
    right = counts("right", "rw-store")
    op = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[p["kind"]]
    joined = op(right, joiner).to_stream()
    if session:
        joined.to("out", key_serde=serdes.SessionWindowedSerde(S()), value_serde=L())
        outs["out"] = "session"
    else:
        joined.to("out", key_serde=serdes.TimeWindowedSerde(S(), 10), value_serde=L())
        outs["out"] = ("time", 10)


register(
    "windowed_table_join",
    windowed_table_join,
    st.fixed_dictionaries(
        {
            "window": st.sampled_from(("tumbling", "session")),
            "kind": st.sampled_from(("inner", "left", "outer")),
            "store": st.sampled_from(("rocksdb", "in_memory")),
        }
    ),
    input_topics=("left", "right"),
    caching=True,
)
