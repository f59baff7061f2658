"""Tutorial: sessionizing clicks (a session ends after 30 minutes without a click), in the
DSL and in SQL.

``docs/tutorials/sessions.md`` includes this file's sections (between the ``--8<--``
markers); ``tests/unit/test_docs_examples.py`` runs both topologies and checks that each
writes what its ``EXPECTED_...`` says. ``python docs/examples/sessions.py`` prints what each
writes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from streaming import (
    EmitStrategy,
    SessionWindows,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
    serdes,
)
from streaming.sql import compile
from streaming.time import FieldTimestampExtractor

# --8<-- [start:clicks]
MINUTE = 60_000
T0 = 1_704_067_200_000  # 2024-01-01 00:00 UTC in epoch milliseconds
CLICKS = [  # (user, click); "ts" is the event time
    ("u1", {"user": "u1", "page": "home", "ts": T0}),
    ("u1", {"user": "u1", "page": "cart", "ts": T0 + 10 * MINUTE}),
    ("u2", {"user": "u2", "page": "home", "ts": T0 + 12 * MINUTE}),
    ("u1", {"user": "u1", "page": "pay", "ts": T0 + 25 * MINUTE}),  # 15 min on: same session
    ("u1", {"user": "u1", "page": "home", "ts": T0 + 90 * MINUTE}),  # 65 min on: a new one
    ("u2", {"user": "u2", "page": "home", "ts": T0 + 200 * MINUTE}),  # moves stream time on
]
# --8<-- [end:clicks]


# --8<-- [start:dsl]
def dsl_topology() -> Topology:
    builder = StreamsBuilder()
    clicks = builder.stream(
        "clicks",
        key_serde=serdes.String(),
        value_serde=serdes.Json(),
        timestamp_extractor=FieldTimestampExtractor("ts"),
    )
    sessions = (
        clicks.group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(timedelta(minutes=30), 0))
        .emit_strategy(EmitStrategy.on_window_close())  # each session once, when it ends
        .count()
    )
    (
        sessions.to_stream()
        .map(
            lambda window, clicks: (
                window.key,
                {
                    "user": window.key,
                    "session_start": window.window.start,
                    "session_end": window.window.end,
                    "clicks": clicks,
                },
            )
        )
        .to("click-sessions", key_serde=serdes.String(), value_serde=serdes.Json())
    )
    return builder.build()


# --8<-- [end:dsl]


# --8<-- [start:sql]
def sql_topology() -> Topology:
    return compile("""
        CREATE TABLE clicks (`user` STRING, page STRING, ts BIGINT,
          WATERMARK FOR ts AS ts
        ) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'format' = 'json');

        CREATE TABLE click_sessions (`user` STRING, session_start BIGINT,
          session_end BIGINT, clicks BIGINT
        ) WITH ('connector' = 'kafka', 'topic' = 'click-sessions', 'format' = 'json',
                'key.fields' = 'user');

        INSERT INTO click_sessions
        SELECT `user`, window_start, window_end, COUNT(*)
        FROM TABLE(SESSION(TABLE clicks PARTITION BY `user`, DESCRIPTOR(ts),
                           INTERVAL '30' MINUTE))
        GROUP BY `user`, window_start, window_end;
    """)


# --8<-- [end:sql]


# --8<-- [start:run]
def run(topology: Topology) -> list[tuple[Any, Any]]:
    """Pipe the clicks through ``topology``; what it wrote to click-sessions."""
    with TopologyTestDriver(topology) as driver:
        clicks = driver.create_input_topic("clicks", key_serde=serdes.String())
        for user, click in CLICKS:
            clicks.pipe_input(user, click)
        out = driver.create_output_topic("click-sessions", key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


# --8<-- [end:run]

# fmt: off
# --8<-- [start:expected-dsl]
EXPECTED_DSL = [  # Kafka Streams: a session ends at its last click
    ("u2", {"user": "u2", "session_start": T0 + 12 * MINUTE, "session_end": T0 + 12 * MINUTE, "clicks": 1}),
    ("u1", {"user": "u1", "session_start": T0, "session_end": T0 + 25 * MINUTE, "clicks": 3}),
    ("u1", {"user": "u1", "session_start": T0 + 90 * MINUTE, "session_end": T0 + 90 * MINUTE, "clicks": 1}),
]
# --8<-- [end:expected-dsl]

# --8<-- [start:expected-sql]
EXPECTED_SQL = [  # Flink SQL: a session ends at its last click plus the gap
    ("u2", {"user": "u2", "session_start": T0 + 12 * MINUTE, "session_end": T0 + 42 * MINUTE, "clicks": 1}),
    ("u1", {"user": "u1", "session_start": T0, "session_end": T0 + 55 * MINUTE, "clicks": 3}),
    ("u1", {"user": "u1", "session_start": T0 + 90 * MINUTE, "session_end": T0 + 120 * MINUTE, "clicks": 1}),
]
# --8<-- [end:expected-sql]
# fmt: on

if __name__ == "__main__":
    print("DSL:", run(dsl_topology()))
    print("SQL:", run(sql_topology()))
