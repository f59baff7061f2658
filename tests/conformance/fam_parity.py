"""Conformance families of the parity rules: null keys through explicit repartitions before
joins, custom ``Windows`` and ``UnlimitedWindows``.

Twins of tests/conformance/java/ParityFamilies.java: same operators, lambdas and names. Each
family registers itself with ``families.register`` (conftest.py imports this module).

1. ``null_key_join`` {kind stream_table_inner|stream_table_left|stream_stream_inner|
   stream_stream_left|stream_stream_outer, map_after, window}: stream("left") re-keyed with
   selectKey(v mod 3) (a null value gives a null key) through an explicit
   ``repartition(Repartitioned.with(S, L).withName("rp"))`` (then mapValues(v + 1) when
   ``map_after``), joined with table("table") or stream("right") (JoinWindows of ``window``
   with no grace) with the null-safe joiner of ``stream_join`` -> out. Kafka's KIP-962: the
   repartition passes null keys on when a left or outer join lies downstream.
2. ``custom_windows`` {windows unlimited|offset, start, size, offset, grace, op, emit
   eager|suppress, store}: groupByKey().windowedBy(UnlimitedWindows.of().startOn(start), or
   windows of ``size`` aligned at ``offset`` with the window [0, offset) before it and
   ``grace``) -> count / reduce(+) / aggregate(0, +) into "win-store" (value serde from the
   defaults), optionally suppressed until the window closes -> out.
"""

from __future__ import annotations

from typing import Any

import families
import traces
from fam_stream_joins import joiner
from families import L, S, _to, plus
from hypothesis import strategies as st

from streaming import (
    BufferConfig,
    JoinWindows,
    Materialized,
    Repartitioned,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TimeWindow,
    UnlimitedWindows,
    Windows,
    serdes,
)
from streaming.windowed import MAX_TIMESTAMP

# ---------------------------------------------------------------- 1. null keys and joins


def null_key_join(b: StreamsBuilder, p: dict[str, Any], outs: families.Outputs) -> None:
    table = b.table("table", key_serde=S(), value_serde=L())
    right = b.stream("right", key_serde=S(), value_serde=L())
    left = (
        b.stream("left", key_serde=S(), value_serde=L())
        .select_key(lambda k, v: families.mod3(v))
        .repartition(Repartitioned.with_(S(), L()).with_name("rp"))
    )
    if p.get("map_after"):
        left = left.map_values(lambda v: None if v is None else v + 1)
    windows = JoinWindows.of_time_difference_with_no_grace(p["window"])
    sj = StreamJoined.with_(S(), L(), L())
    kind = p["kind"]
    if kind == "stream_table_inner":
        joined = left.join(table, joiner)
    elif kind == "stream_table_left":
        joined = left.left_join(table, joiner)
    elif kind == "stream_stream_inner":
        joined = left.join(right, joiner, windows, sj)
    elif kind == "stream_stream_left":
        joined = left.left_join(right, joiner, windows, stream_joined=sj)
    else:
        joined = left.outer_join(right, joiner, windows, stream_joined=sj)
    _to(joined, "out", outs)


# ---------------------------------------------------------------- 2. custom windows


class OffsetWindows(Windows):
    """Windows of ``size`` from ``offset`` on; before it, the window [0, offset)."""

    def __init__(self, size: int, offset: int, grace: int) -> None:
        self._size = size
        self.offset = offset
        self.grace = grace

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        if timestamp < self.offset:
            return {0: TimeWindow(0, self.offset)}
        start = self.offset + (timestamp - self.offset) // self._size * self._size
        return {start: TimeWindow(start, start + self._size)}

    def size(self) -> int:
        return self._size

    def grace_period_ms(self) -> int:
        return self.grace


def custom_windows(b: StreamsBuilder, p: dict[str, Any], outs: families.Outputs) -> None:
    grouped = b.stream("input", key_serde=S(), value_serde=L()).group_by_key()
    windows: Windows
    if p["windows"] == "unlimited":
        size = MAX_TIMESTAMP
        windows = UnlimitedWindows.of().start_on(p["start"])
    else:
        size = p["size"]
        windows = OffsetWindows(size, p["offset"], p["grace"])
    w = grouped.windowed_by(windows)
    m = Materialized.as_("win-store")
    if p.get("store") == "in_memory":
        m = m.in_memory()
    op = p["op"]
    if op == "count":
        t = w.count(m)
    elif op == "reduce":
        t = w.reduce(plus, m)
    else:
        t = w.aggregate(lambda: 0, lambda k, v, a: plus(a, v), m)
    if p["emit"] == "suppress":
        t = t.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    t.to_stream().to("out", key_serde=serdes.TimeWindowedSerde(S(), size), value_serde=L())
    outs["out"] = ("time", size)


families.register(
    "null_key_join",
    null_key_join,
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(
                (
                    "stream_table_inner",
                    "stream_table_left",
                    "stream_stream_inner",
                    "stream_stream_left",
                    "stream_stream_outer",
                )
            ),
            "map_after": st.booleans(),
            "window": st.integers(0, 20),
        }
    ),
    input_topics=("left", "left", "right", "table"),
)
families.register(
    "custom_windows",
    custom_windows,
    st.fixed_dictionaries(
        {
            "windows": st.sampled_from(("unlimited", "offset", "offset")),
            "start": st.integers(0, 20),
            "size": st.integers(1, 30),
            "offset": st.integers(0, 15),
            "grace": st.integers(0, 15),
            "op": st.sampled_from(("count", "reduce", "aggregate")),
            "emit": st.sampled_from(("eager", "suppress")),
            "store": traces.stores,
        }
    ),
    caching=True,
)
