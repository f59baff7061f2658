"""Conformance families for GlobalKTable joins, cogroup and repartition topologies.

Twins of tests/conformance/java/MoreFamilies.java: same operators, lambdas and names. Each family
registers itself with ``families.register`` (conftest.py imports this module).

1. ``global_join`` {kind inner|left, selector key|mod3|null_for_b, materialized, store}:
   stream("stream") joined with globalTable("global") (unnamed, or Materialized
   "global-store") on selector(k, v) = k / v mod 3 / (k == "b" ? null : k); inner joins use a
   ValueJoiner v * 100 + gv, left joins a ValueJoinerWithKey (k == null ? 7 : 0) + v * 100 +
   (gv == null ? 99 : gv) -> out.
2. ``cogroup`` {windows none|tumbling|sliding|session, size, grace, emit eager|suppress,
   rekey none|generated|named, store, retention_extra}: in1 grouped by key (or by v mod 3, with
   a generated or a Grouped-named repartition topic) and in2 grouped by key, cogrouped with
   aggregators a + v and a + 10 v, aggregate(0) into "cog-store" (window store with
   TimeWindows(size, grace) / SlidingWindows(size, grace), session store with
   SessionWindows(size, grace) and merger a1 + a2), optionally suppressed until the window
   closes -> out. Kafka's cogroup has no emit strategy.
3. ``repartition`` {variant, named, store}:
   - ``select_key_repartition``: selectKey(v mod 3).repartition() (or Repartitioned "rp")
     .groupByKey().count("cnt-store") -> out;
   - ``group_by_twice``: groupBy(v mod 3).reduce(+, "r1"), toStream().groupBy(v mod 2)
     .reduce(+, "r2") -> out (two repartition topics, the second fed by the first);
   - ``shared_grouping``: selectKey(v mod 3).groupByKey() (or Grouped "grp": one repartition
     topic shared by both aggregations) -> count("c1") -> out and reduce(+, "c2") -> out2;
   - ``to_table_group_by``: selectKey(v mod 3).toTable("t1") (a repartition) .groupBy((v mod 2,
     v)).reduce(+, -, "r2") -> out; and the input also goes through map((k, v) -> (v mod 3,
     v)).groupByKey().count("c3") -> out2.
"""

from __future__ import annotations

from typing import Any

import families
import traces
from families import L, S, _grace, _mat, _to, minus, mod3, plus
from hypothesis import strategies as st

from streaming import (
    BufferConfig,
    Grouped,
    Repartitioned,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    serdes,
)


def _input(b: StreamsBuilder, topic: str) -> Any:
    return b.stream(topic, key_serde=S(), value_serde=L())


def times10(v: int | None) -> int | None:
    return None if v is None else v * 10


def mod2(v: int | None) -> str | None:
    return None if v is None else str(v % 2)


# ------------------------------------------------------------------ 1. global join


def _selector(kind: str) -> Any:
    if kind == "key":
        return lambda k, v: k
    if kind == "mod3":
        return lambda k, v: mod3(v)
    if kind == "null_for_b":
        return lambda k, v: None if k == "b" else k
    raise ValueError(kind)


def global_join(b: StreamsBuilder, p: dict[str, Any], outs: families.Outputs) -> None:
    s = _input(b, "stream")
    if p["materialized"]:
        g = b.global_table("global", materialized=_mat("global-store", p))
    else:
        g = b.global_table("global", key_serde=S(), value_serde=L())
    selector = _selector(p["selector"])
    if p["kind"] == "inner":
        r = s.join(g, selector, lambda v, gv: v * 100 + gv)
    else:
        r = s.left_join(
            g,
            selector,
            lambda k, v, gv: (7 if k is None else 0) + v * 100 + (99 if gv is None else gv),
        )
    _to(r, "out", outs)


# ------------------------------------------------------------------ 2. cogroup


def cogroup(b: StreamsBuilder, p: dict[str, Any], outs: families.Outputs) -> None:
    s1 = _input(b, "in1")
    rekey = p["rekey"]
    if rekey == "none":
        g1 = s1.group_by_key(Grouped.with_(S(), L()))
    elif rekey == "generated":
        g1 = s1.group_by(lambda k, v: mod3(v), Grouped.with_(S(), L()))
    else:
        g1 = s1.group_by(lambda k, v: mod3(v), Grouped.with_(S(), L(), "regroup"))
    g2 = _input(b, "in2").group_by_key(Grouped.with_(S(), L()))
    c = g1.cogroup(lambda k, v, a: plus(a, v)).cogroup(g2, lambda k, v, a: plus(a, times10(v)))
    kind = p["windows"]
    size = p["size"]
    grace = p.get("grace")
    if kind == "none":
        _to(c.aggregate(lambda: 0, materialized=_mat("cog-store", p)).to_stream(), "out", outs)
        return
    if kind == "tumbling":
        w = (
            TimeWindows.of_size_with_no_grace(size)
            if grace is None
            else TimeWindows.of_size_and_grace(size, grace)
        )
        t = c.windowed_by(w).aggregate(
            lambda: 0, materialized=_mat("cog-store", p, size + _grace(p))
        )
    elif kind == "sliding":
        w = (
            SlidingWindows.of_time_difference_with_no_grace(size)
            if grace is None
            else SlidingWindows.of_time_difference_and_grace(size, grace)
        )
        t = c.windowed_by(w).aggregate(
            lambda: 0, materialized=_mat("cog-store", p, 2 * size + _grace(p))
        )
    elif kind == "session":
        w = (
            SessionWindows.of_inactivity_gap_with_no_grace(size)
            if grace is None
            else SessionWindows.of_inactivity_gap_and_grace(size, grace)
        )
        t = c.windowed_by(w).aggregate(
            lambda: 0,
            lambda k, a1, a2: plus(a1, a2),
            materialized=_mat("cog-store", p, size + _grace(p)),
        )
    else:
        raise ValueError(kind)
    if p["emit"] == "suppress":
        t = t.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    if kind == "session":
        t.to_stream().to("out", key_serde=serdes.SessionWindowedSerde(S()), value_serde=L())
        outs["out"] = "session"
    else:
        t.to_stream().to("out", key_serde=serdes.TimeWindowedSerde(S(), size), value_serde=L())
        outs["out"] = ("time", size)


# ------------------------------------------------------------------ 3. repartition


def repartition(b: StreamsBuilder, p: dict[str, Any], outs: families.Outputs) -> None:
    s = _input(b, "input")
    variant = p["variant"]
    named = p["named"]
    if variant == "select_key_repartition":
        rp = Repartitioned.with_(S(), L())
        if named:
            rp = Repartitioned(name="rp", key_serde=S(), value_serde=L())
        r = (
            s.select_key(lambda k, v: mod3(v))
            .repartition(rp)
            .group_by_key()
            .count(materialized=_mat("cnt-store", p))
        )
        _to(r.to_stream(), "out", outs)
    elif variant == "group_by_twice":
        g = Grouped.with_(S(), L(), "first" if named else None)
        r1 = s.group_by(lambda k, v: mod3(v), g).reduce(plus, materialized=_mat("r1", p))
        g2 = Grouped.with_(S(), L(), "second" if named else None)
        r2 = (
            r1.to_stream()
            .group_by(lambda k, v: mod2(v), g2)
            .reduce(plus, materialized=_mat("r2", p))
        )
        _to(r2.to_stream(), "out", outs)
    elif variant == "shared_grouping":
        g = s.select_key(lambda k, v: mod3(v)).group_by_key(
            Grouped.with_(S(), L(), "grp" if named else None)
        )
        _to(g.count(materialized=_mat("c1", p)).to_stream(), "out", outs)
        _to(g.reduce(plus, materialized=_mat("c2", p)).to_stream(), "out2", outs)
    elif variant == "to_table_group_by":
        t = s.select_key(lambda k, v: mod3(v)).to_table(materialized=_mat("t1", p))
        r = t.group_by(
            lambda k, v: (mod2(v), v), Grouped.with_(S(), L(), "tg" if named else None)
        ).reduce(plus, minus, materialized=_mat("r2", p))
        _to(r.to_stream(), "out", outs)
        c3 = (
            s.map(lambda k, v: (mod3(v), v))
            .group_by_key(Grouped.with_(S(), L()))
            .count(materialized=_mat("c3", p))
        )
        _to(c3.to_stream(), "out2", outs)
    else:
        raise ValueError(variant)


# ------------------------------------------------------------------ registration


families.register(
    "global_join",
    global_join,
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(("inner", "left")),
            "selector": st.sampled_from(("key", "mod3", "null_for_b")),
            "materialized": st.booleans(),
            "store": traces.stores,
        }
    ),
    input_topics=("stream", "stream", "global"),
    caching=True,
)
families.register(
    "cogroup",
    cogroup,
    st.fixed_dictionaries(
        {
            "windows": st.sampled_from(("none", "tumbling", "sliding", "session")),
            "size": st.integers(1, 30),
            "grace": traces.optional_grace,
            "emit": st.sampled_from(("eager", "suppress")),
            "rekey": st.sampled_from(("none", "generated", "named")),
            "store": traces.stores,
            "retention_extra": traces.retention_extras,
        }
    ),
    input_topics=("in1", "in2"),
    caching=True,
    scaled=True,
)
families.register(
    "repartition",
    repartition,
    st.fixed_dictionaries(
        {
            "variant": st.sampled_from(
                ("select_key_repartition", "group_by_twice", "shared_grouping", "to_table_group_by")
            ),
            "named": st.booleans(),
            "store": traces.stores,
        }
    ),
    caching=True,
)
