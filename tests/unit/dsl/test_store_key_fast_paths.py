"""The session aggregation's and the stream-stream join's fast paths against their general ones.

``KStreamSessionWindowAggregateProcessor`` works on the store keys of this package's
``SessionStore`` (``find_session_keys``, ``remove_schema_key``, ``put_schema_key``) and
``StreamStreamJoinProcessor`` reads the other side with ``WindowStore.fetch_range_list``; any
other store takes the general path (``find_sessions``/``remove``/``put``, ``fetch_range``).
Both paths must write the same output records and the same changelog bytes, with and without
a record cache, for merges of several sessions, late records and both emit strategies.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from streaming import (
    EmitStrategy,
    JoinWindows,
    Materialized,
    SessionWindows,
    StreamsBuilder,
    TopologyTestDriver,
    serdes,
)
from streaming.dsl.processors.session_aggregate import KStreamSessionWindowAggregateProcessor
from streaming.dsl.processors.stream_stream_join import StreamStreamJoinProcessor
from streaming.state.session_store import SessionStore
from streaming.state.window_store import WindowStore

S, L = serdes.String(), serdes.Long()
BASE = 1_700_000_000_000
Captured = dict[str, list[tuple[Any, Any, int, Any]]]


def _run(builder: StreamsBuilder, inputs: list[tuple[str, str, str, int]], cache: int) -> Captured:
    """``inputs`` (topic, key, value, timestamp) through the topology; every topic it wrote
    (outputs and changelogs) as bytes."""
    config = {
        "application.id": "fast-paths",
        "statestore.cache.max.bytes": cache,
        "__emit.interval.ms.kstreams.windowed.aggregation__": 0,
    }
    with TopologyTestDriver(builder.build(), config) as driver:
        topics = {t: driver.create_input_topic(t, key_serde=S, value_serde=S) for t, *_ in inputs}
        for topic, key, value, ts in inputs:
            topics[topic].pipe_input(key, value, timestamp=ts)
        written = [
            t for t in driver.produced_topic_names() if t.endswith("-changelog") or t == "out"
        ]
        return {
            t: [
                (r.key, r.value, r.timestamp, r.headers)
                for r in driver.create_output_topic(
                    t, key_serde=serdes.Bytes(), value_serde=serdes.Bytes()
                ).read_records_to_list()
            ]
            for t in sorted(written)
        }


def _sessions(emit: EmitStrategy) -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde=S, value_serde=S)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(1_000, 500))
        .emit_strategy(emit)
        .aggregate(
            lambda: "",
            lambda _k, v, agg: agg + v,
            lambda _k, a, b: a + "|" + b,
            Materialized.as_("sessions").with_key_serde(S).with_value_serde(S),
        )
        .to_stream()
        .map(lambda wk, agg: (f"{wk.key}@{wk.window.start}-{wk.window.end}", agg))
        .to("out", key_serde=S, value_serde=S)
    )
    return builder


def _session_trace() -> list[tuple[str, str, str, int]]:
    """Sessions that grow, records that bridge two sessions of a key (a merge of several),
    repeats of a timestamp, and late records."""
    rng = random.Random(11)
    records = []
    ts = BASE
    for n in range(400):
        ts += rng.choice([0, 50, 300, 900, 1_200, 2_500])
        late = rng.random() < 0.1
        records.append(("in", f"k{rng.randrange(4)}", f"v{n}", ts - (4_000 if late else 0)))
    # two sessions of one key, then a record between them merging both
    records += [("in", "m", "a", ts), ("in", "m", "b", ts + 1_800), ("in", "m", "c", ts + 900)]
    return records


@pytest.mark.parametrize("cache", [0, 10 << 20], ids=["uncached", "cached"])
@pytest.mark.parametrize("emit", ["update", "close"])
def test_session_store_keys_write_what_the_general_path_writes(
    emit: str, cache: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    strategy = (
        EmitStrategy.on_window_close() if emit == "close" else EmitStrategy.on_window_update()
    )
    trace = _session_trace()
    fast = _run(_sessions(strategy), trace, cache)
    with monkeypatch.context() as patch:
        init = KStreamSessionWindowAggregateProcessor.init

        def init_general(self: KStreamSessionWindowAggregateProcessor, context: Any) -> None:
            init(self, context)
            assert self.by_store_key
            self.by_store_key = False

        patch.setattr(KStreamSessionWindowAggregateProcessor, "init", init_general)
        general = _run(_sessions(strategy), trace, cache)
    changelog = "fast-paths-sessions-changelog"
    assert set(fast) == {"out", changelog}
    assert len(fast[changelog]) > 400 and len(fast["out"]) > 10
    # a merge of two sessions: both are removed (tombstones in the changelog)
    assert sum(1 for _k, v, _t, _h in fast[changelog] if v is None) > 50
    assert fast == general


def test_session_find_session_keys_decodes_like_find_sessions() -> None:
    """``find_session_keys`` yields the store keys and values ``find_sessions`` decodes."""
    builder = _sessions(EmitStrategy.on_window_update())
    with TopologyTestDriver(builder.build(), {"application.id": "fast-paths"}) as driver:
        topic = driver.create_input_topic("in", key_serde=S, value_serde=S)
        for ts, key in [(0, "a"), (500, "a"), (5_000, "a"), (5_200, "b"), (9_000, "a")]:
            topic.pipe_input(key, f"v{ts}", timestamp=BASE + ts)
        store = driver.get_session_store("sessions")
        assert isinstance(store, SessionStore)
        decoded = list(store.find_sessions("a", BASE, BASE + 10_000))
        raw = list(store.find_session_keys(store.raw_key("a"), BASE, BASE + 10_000))
        assert len(decoded) == 3
        assert [(store._decode_key(k), store.value_from(v)) for k, v in raw] == decoded


def _join() -> StreamsBuilder:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S)
    right = builder.stream("right", key_serde=S, value_serde=S)
    left.join(
        right,
        lambda a, b: f"{a}+{b}",
        JoinWindows.of_time_difference_and_grace(1_000, 500).before(200),
    ).to("out", key_serde=S, value_serde=S)
    return builder


@pytest.mark.parametrize("cache", [0, 10 << 20], ids=["uncached", "cached"])
def test_join_fetch_range_list_writes_what_fetch_range_writes(
    cache: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(5)
    trace = []
    ts = BASE
    for n in range(300):
        ts += rng.choice([0, 100, 400, 1_500])
        side = rng.choice(["left", "right"])
        trace.append((side, f"k{rng.randrange(3)}", f"{side[0]}{n}", ts - rng.choice([0, 0, 800])))
    fast = _run(_join(), trace, cache)
    with monkeypatch.context() as patch:
        init = StreamStreamJoinProcessor.init

        def init_general(self: StreamStreamJoinProcessor, context: Any) -> None:
            init(self, context)
            assert self._fetch_list is not None
            self._fetch_list = None

        patch.setattr(StreamStreamJoinProcessor, "init", init_general)
        general = _run(_join(), trace, cache)
    assert len(fast["out"]) > 40
    assert fast == general


def test_window_fetch_range_list_is_fetch_range() -> None:
    builder = _join()
    with TopologyTestDriver(builder.build(), {"application.id": "fast-paths"}) as driver:
        left = driver.create_input_topic("left", key_serde=S, value_serde=S)
        for ts in (0, 100, 100, 400, 500):
            left.pipe_input("a", f"v{ts}", timestamp=BASE + ts)
        left.pipe_input("b", "other", timestamp=BASE + 100)
        names = [n for n in driver.get_all_state_stores() if "this" in n.lower()]
        stores = [driver.get_state_store(n) for n in names]
        store = next(s for s in stores if list(s.fetch_range("a", BASE, BASE + 3_000)))
        assert isinstance(store, WindowStore)
        expected = list(store.fetch_range("a", BASE, BASE + 3_000))
        assert [ts - BASE for ts, _v in expected] == [0, 100, 100, 400, 500]
        assert store.fetch_range_list("a", BASE, BASE + 3_000) == expected
        assert store.fetch_range_list("a", BASE + 50, BASE + 400) == expected[1:4]
        assert store.fetch_range_list("c", BASE, BASE + 3_000) == []
