"""Conformance families for KStream-KStream joins.

Twins of tests/conformance/java/StreamJoinFamilies.java: same operators, lambdas and names. Each
family registers itself with ``families.register`` (conftest.py imports this module).

``stream_join`` {kind inner|left|outer, before, after (may be negative, before + after >= 0),
grace|None, store rocksdb|in_memory, self_join, rekey none|left|right|both, named}:
stream("left") joined with stream("right") (or with itself for ``self_join``: "right" is then a
source without children, its records are dropped) in
``JoinWindows.ofTimeDifference[AndGrace|WithNoGrace](before).after(after)`` with
``StreamJoined.with(S, L, L)`` (+ in-memory store suppliers, + withName("sj").withStoreName("sjs")
when ``named``); ``rekey`` re-keys a side with selectKey(v mod 3) first (null values give null
keys), which repartitions it. Joiner: ``(l ?? -99) * 1000 + (r ?? -99)`` -> out. Time params
(before, after, grace) scale with the seconds variant.

Note on timing: left/outer joins emit their non-joined records on a wall-clock throttle
(``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__``); Kafka's
TopologyTestDriver sets it to 0, so does ours.
"""

from __future__ import annotations

from typing import Any

import families
import traces
from families import L, S, _to, mod3
from hypothesis import strategies as st

from streaming import JoinWindows, StreamJoined, StreamsBuilder


def _nz(v: int | None) -> int:
    return -99 if v is None else v


def joiner(left: int | None, right: int | None) -> int:
    """The family's null-safe joiner: which side was missing stays visible."""
    return _nz(left) * 1000 + _nz(right)


def _windows(p: dict[str, Any]) -> JoinWindows:
    if p.get("grace") is None:
        w = JoinWindows.of_time_difference_with_no_grace(p["before"])
    else:
        w = JoinWindows.of_time_difference_and_grace(p["before"], p["grace"])
    return w.after(p["after"])  # may be negative: Kafka only needs before + after >= 0


def stream_join(b: StreamsBuilder, p: dict[str, Any], outs: families.Outputs) -> None:
    left = b.stream("left", key_serde=S(), value_serde=L())
    right = b.stream("right", key_serde=S(), value_serde=L())
    rekey = p.get("rekey", "none")
    if rekey in ("left", "both"):
        left = left.select_key(lambda k, v: mod3(v))
    if p.get("self_join"):
        right = left
    elif rekey in ("right", "both"):
        right = right.select_key(lambda k, v: mod3(v))
    sj = StreamJoined.with_(S(), L(), L())
    if p.get("store") == "in_memory":
        sj = sj.with_store_type("in_memory")
    if p.get("named"):
        sj = sj.with_name("sj").with_store_name("sjs")
    kind = p["kind"]
    if kind == "inner":
        r = left.join(right, joiner, _windows(p), sj)
    elif kind == "left":
        r = left.left_join(right, joiner, _windows(p), stream_joined=sj)
    else:
        r = left.outer_join(right, joiner, _windows(p), stream_joined=sj)
    _to(r, "out", outs)


@st.composite
def _stream_join_params(draw: st.DrawFn) -> dict[str, Any]:
    before = draw(st.integers(0, 30))
    after = draw(st.one_of(st.integers(0, 30), st.integers(0, 30), st.integers(-before, 0)))
    return {
        "kind": draw(st.sampled_from(("inner", "left", "outer"))),
        "before": before,
        "after": after,
        "grace": draw(traces.optional_grace),
        "store": draw(traces.stores),
        "self_join": draw(st.integers(0, 3)) == 0,
        "rekey": draw(st.sampled_from(("none", "none", "left", "right", "both"))),
        "named": draw(st.booleans()),
    }


traces.DURATION_PARAMS.update({"before", "after"})
families.register(
    "stream_join",
    stream_join,
    _stream_join_params(),
    input_topics=("left", "right"),
    scaled=True,
)
