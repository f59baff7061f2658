"""Kafka's ``ReadOnlyKeyValueStore`` / ``ReadOnlyWindowStore`` / ``ReadOnlySessionStore``
query surface, through the test driver's stores and through the runtime's interactive-query
views (which read every local task's store under its thread's lock)."""

from __future__ import annotations

import threading

import pytest

from streaming import (
    Materialized,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.runtime.queries import view_for
from streaming.windowed import SessionWindow, TimeWindow, Windowed

S = serdes.String()
RECORDS = [("a", 0), ("b", 10), ("c", 20), ("a", 110), ("b", 250), ("a", 260)]


@pytest.fixture
def driver():
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde=S, value_serde=S).group_by_key()
    grouped.count(Materialized.as_("counts"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(100)).count(
        Materialized.as_("windows").with_retention(10_000)
    )
    grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(50)).count(
        Materialized.as_("sessions").with_retention(10_000)
    )
    with TopologyTestDriver(builder.build(), {"statestore.cache.max.bytes": 0}) as d:
        source = d.create_input_topic("in", S, S)
        for key, ts in RECORDS:
            source.pipe_input(key, "v", ts)
        yield d


def _views(driver, name):
    """The driver's plain view, and the runtime's view over the same store."""
    store = driver.get_state_store(name)
    builder = driver.topology.store_builders[name]
    runtime = view_for(builder, name, lambda: [(threading.Lock(), store)])
    return store, runtime


def w(key, start, size=100):
    return Windowed(key, TimeWindow(start, start + size))


def test_window_store_overloads(driver):
    plain = driver.get_window_store("windows")
    _, runtime = _views(driver, "windows")
    for view in (plain, runtime):
        assert view.fetch("a", 100) == 1
        assert list(view.fetch("a", 0, 199)) == [(0, 1), (100, 1)]  # starts in [from, to]
        assert list(view.backward_fetch("a", 0, 199)) == [(100, 1), (0, 1)]
        # RocksDB's window key schema orders by key, then window start
        assert list(view.fetch("a", "b", 0, 100)) == [
            (w("a", 0), 1),
            (w("a", 100), 1),
            (w("b", 0), 1),
        ]
        assert list(view.fetch(None, "a", 0, 300)) == [
            (w("a", 0), 1),
            (w("a", 100), 1),
            (w("a", 200), 1),
        ]
        assert list(view.backward_fetch("b", None, 200, 300)) == [(w("b", 200), 1)]
        assert list(view.fetch_all(200, 300)) == [(w("a", 200), 1), (w("b", 200), 1)]
        assert list(view.backward_fetch_all(200, 300)) == [(w("b", 200), 1), (w("a", 200), 1)]
        assert len(list(view.all())) == 6
        assert list(view.backward_all()) == list(reversed(list(view.all())))
    with pytest.raises(TypeError, match="2 to 4 arguments"):
        plain.fetch("a", 0, 1, 2, 3)


def s(key, start, end):
    return Windowed(key, SessionWindow(start, end))


def test_session_store_overloads(driver):
    store, runtime = _views(driver, "sessions")
    for view in (store, runtime):
        assert list(view.fetch("a")) == [
            (s("a", 0, 0), 1),
            (s("a", 110, 110), 1),
            (s("a", 260, 260), 1),
        ]
        assert next(iter(view.backward_fetch("a"))) == (s("a", 260, 260), 1)
        assert {k.key for k, _ in view.fetch("b", "c")} == {"b", "c"}
        assert {k.key for k, _ in view.backward_fetch("b", "c")} == {"b", "c"}
        assert list(view.find_sessions("a", 100, 200)) == [(s("a", 110, 110), 1)]
        assert next(iter(view.backward_find_sessions("a", 0, 300))) == (s("a", 260, 260), 1)
        assert list(view.find_sessions("a", "b", 200, 300)) == [
            (s("a", 260, 260), 1),
            (s("b", 250, 250), 1),
        ]
        assert {k.key for k, _ in view.backward_find_sessions(None, None, 0, 30)} == {"a", "b", "c"}
        assert view.fetch_session("c", 20, 20) == 1


def test_key_value_store_surface(driver):
    plain = driver.get_key_value_store("counts")
    _, runtime = _views(driver, "counts")
    for view in (plain, runtime):
        assert list(view.all()) == [("a", 3), ("b", 2), ("c", 1)]
        assert list(view.reverse_all()) == [("c", 1), ("b", 2), ("a", 3)]
        assert list(view.range("b", None)) == [("b", 2), ("c", 1)]
        assert list(view.reverse_range(None, "b")) == [("b", 2), ("a", 3)]
        assert list(view.prefix_scan("b", S)) == [("b", 2)]
        assert view.approximate_num_entries() >= 3  # RocksDB's estimate
