"""Conformance families for KStream-KTable joins (plain and versioned) and versioned tables.

Twins of tests/conformance/java/TableJoinFamilies.java: same operators, lambdas and names. Each family
registers itself with ``families.register`` (conftest.py imports this module).

1. ``stream_table_join`` {kind inner|left, table unmaterialized|materialized|versioned, history,
   grace (versioned only, <= history), rekey, store}: stream("stream") (optionally re-keyed with
   selectKey(k -> k), which repartitions) joined with table("table"); the joiner is a ValueJoiner
   for inner joins and a ValueJoinerWithKey for left joins -> out. With a grace period, null keys
   are filtered out of the stream first (Kafka's buffer rejects them with an exception).
2. ``versioned_table`` {history, variant to_stream|count|aggregate, store}: table("input")
   materialised in a versioned store -> toStream, or -> groupBy((v mod 3, v)) -> count /
   aggregate(0, +, -) in "agg-store" -> out.
"""

from __future__ import annotations

from typing import Any

import families
import traces
from families import L, S, _mat, _to, minus, mod3, plus
from hypothesis import strategies as st

from streaming import Grouped, Joined, Materialized, StreamsBuilder


def _versioned(name: str, history: int) -> Materialized:
    return Materialized.as_versioned(name, history).with_key_serde(S()).with_value_serde(L())


def _tv(tv: int | None) -> int:
    return 99 if tv is None else tv


# ------------------------------------------------------------------ 1. stream-table join


def stream_table_join(b: StreamsBuilder, p: dict[str, Any], outs: families.Outputs) -> None:
    s = b.stream("stream", key_serde=S(), value_serde=L())
    if p.get("rekey"):
        s = s.select_key(lambda k, v: k)
    if p.get("grace") is not None:
        s = s.filter(lambda k, v: k is not None)
    table_kind = p["table"]
    if table_kind == "versioned":
        t = b.table("table", materialized=_versioned("table-store", p["history"]))
    elif table_kind == "materialized":
        t = b.table("table", materialized=_mat("table-store", p))
    else:
        t = b.table("table", key_serde=S(), value_serde=L())
    joined = Joined.with_(S(), L(), L())
    if p.get("grace") is not None:
        joined = joined.with_grace_period(p["grace"])
    if p["kind"] == "inner":
        r = s.join(t, lambda v, tv: v * 100 + _tv(tv), joined=joined)
    else:
        r = s.left_join(
            t, lambda k, v, tv: (7 if k is None else 0) + v * 100 + _tv(tv), joined=joined
        )
    _to(r, "out", outs)


@st.composite
def _stream_table_params(draw: st.DrawFn) -> dict[str, Any]:
    table = draw(st.sampled_from(("unmaterialized", "materialized", "versioned")))
    history = draw(st.integers(0, 60))
    grace = None
    if table == "versioned":
        grace = draw(st.one_of(st.none(), st.integers(0, history)))
    return {
        "kind": draw(st.sampled_from(("inner", "left"))),
        "table": table,
        "history": history,
        "grace": grace,
        "rekey": draw(st.booleans()),
        "store": draw(traces.stores),
    }


# ------------------------------------------------------------------ 2. versioned table


def versioned_table(b: StreamsBuilder, p: dict[str, Any], outs: families.Outputs) -> None:
    t = b.table("input", materialized=_versioned("vt-store", p["history"]))
    variant = p["variant"]
    if variant == "to_stream":
        _to(t.to_stream(), "out", outs)
        return
    g = t.group_by(lambda k, v: (mod3(v), v), grouped=Grouped.with_(S(), L()))
    m = _mat("agg-store", p)
    if variant == "count":
        r = g.count(materialized=m)
    else:
        r = g.aggregate(
            lambda: 0, lambda k, v, a: plus(a, v), lambda k, v, a: minus(a, v), materialized=m
        )
    _to(r.to_stream(), "out", outs)


traces.DURATION_PARAMS.add("history")

families.register(
    "stream_table_join",
    stream_table_join,
    _stream_table_params(),
    input_topics=("stream", "stream", "table"),
    caching=True,
    scaled=True,
)
families.register(
    "versioned_table",
    versioned_table,
    st.fixed_dictionaries(
        {
            "history": st.integers(0, 60),
            "variant": st.sampled_from(("to_stream", "count", "aggregate")),
            "store": traces.stores,
        }
    ),
    caching=True,
    scaled=True,
)
