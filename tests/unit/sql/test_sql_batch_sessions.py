"""streaming.sql.batch_sessions: SESSION windows in the DuckDB translation give the
sessions the stream emits.

Each test feeds rows through the compiled statements (``TopologyTestDriver``) and runs the
translation over the same rows in DuckDB. The rows come out of order within the
WATERMARK delay (never late: a row is behind stream time by less than the delay, so it
always reaches its session), some bridge two sessions of their key, some are exactly
the gap apart (Kafka merges them: the gap is inclusive). The stream emits each session
once it closes (stream time past its end and the delay): those are the batch's sessions
whose end plus the delay is before the last row's time.
"""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import compile
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import format_timestamp, parse_timestamp

S = {"key_serde": serdes.String(), "value_serde": serdes.Json()}
SECOND = 1_000
MINUTE = 60 * SECOND
GRACE = MINUTE
GAP = 3 * MINUTE

CLICKS = """
CREATE TABLE clicks (
  id STRING, user_name STRING, qty BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'clicks');
"""

GROUP_SESSIONS = (
    CLICKS
    + """
CREATE TABLE sessions (user_name STRING, clicks BIGINT, units BIGINT,
  first_click TIMESTAMP(3), session_end TIMESTAMP(3), end_ms BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'sessions');
INSERT INTO sessions
SELECT user_name, COUNT(*), SUM(qty), SESSION_START(ts, INTERVAL '3' MINUTE),
  SESSION_END(ts, INTERVAL '3' MINUTE), SESSION_END(ts, INTERVAL '3' MINUTE)
FROM clicks
WHERE qty > 0
GROUP BY user_name, SESSION(ts, INTERVAL '3' MINUTE);
"""
)

TVF_SESSIONS = (
    CLICKS
    + """
CREATE TABLE sessions (user_name STRING, clicks BIGINT, units BIGINT,
  first_click TIMESTAMP(3), session_end TIMESTAMP(3), end_ms BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'sessions');
INSERT INTO sessions
SELECT user_name, COUNT(*), SUM(qty), window_start, window_end, window_end
FROM TABLE(SESSION(TABLE clicks PARTITION BY user_name, DESCRIPTOR(ts), INTERVAL '3' MINUTES))
WHERE qty > 0
GROUP BY window_start, window_end, user_name;
"""
)


def click(i: int, user: str | None, ms: int, qty: int = 1) -> dict[str, Any]:
    return {"id": f"c{i}", "user_name": user, "qty": qty, "ts": format_timestamp(ms), "_ms": ms}


def bridging_trace() -> list[dict[str, Any]]:
    """``a``: two sessions the gap and 40 s apart, then (40 s behind, within the delay) a
    row exactly the gap after the first and 40 s before the second: one session of three
    rows; ``b``: the same with the bridging row one the WHERE drops (two sessions); then
    the end of the input far later."""
    t = 1_700_000_000_000
    return [
        click(0, "a", t),
        click(1, "b", t + 10 * SECOND),
        click(2, "a", t + GAP + 40 * SECOND),
        click(3, "b", t + 10 * SECOND + GAP + 40 * SECOND),
        click(4, "a", t + GAP),  # exactly the gap after the first
        click(5, "b", t + 10 * SECOND + GAP, qty=0),  # left out by WHERE qty > 0
        click(6, "end", t + 1_000 * MINUTE),
    ]


def random_trace(seed: int, n: int = 400) -> list[dict[str, Any]]:
    """Clicks of a few users (NULL one of them), gaps around the session gap, each row up
    to 50 s behind the latest time (the delay is 60 s), some of zero quantity."""
    rng = random.Random(seed)
    rows, clock = [], 1_700_000_000_000
    for i in range(n):
        clock += rng.choice([0, 5 * SECOND, 40 * SECOND, 90 * SECOND, 2 * MINUTE, GAP])
        clock += rng.randint(0, 999)
        ms = clock - rng.choice([0, 0, 0, 20 * SECOND, 50 * SECOND])
        rows.append(click(i, rng.choice(["u1", "u2", "u3", None]), ms, rng.randint(0, 4)))
    return [*rows, click(n, "end", clock + 1_000 * MINUTE)]


def run_stream(sql: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic("clicks", **S)
        for row in rows:
            value = {k: v for k, v in row.items() if not k.startswith("_")}
            source.pipe_input(row["id"], value, timestamp=row["_ms"])
        out = driver.create_output_topic("sessions", **S)
        return [r.value for r in out.read_records_to_list()]


def run_batch(sql: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    frame = pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows])
    con = duckdb.connect()
    try:
        return to_duckdb(sql).run(con, {"clicks": frame})
    finally:
        con.close()


def closed(rows: list[dict[str, Any]], trace: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The sessions closed by the end of ``trace`` (their end plus the delay before its
    last time), sorted."""
    last = max(r["_ms"] for r in trace)
    return sorted(
        (tuple(r.values()) for r in rows if r["end_ms"] + GRACE < last),
        key=lambda row: tuple(str(v) for v in row),
    )


@pytest.mark.parametrize("sql", [GROUP_SESSIONS, TVF_SESSIONS], ids=["group", "tvf"])
def test_bridged_sessions_agree(sql: str) -> None:
    trace = bridging_trace()
    stream, batch = run_stream(sql, trace), run_batch(sql, trace)
    t = trace[0]["_ms"]
    assert closed(stream, trace) == closed(batch, trace)
    a = [r for r in batch if r["user_name"] == "a"]
    assert a == [
        {
            "user_name": "a",
            "clicks": 3,
            "units": 3,
            "first_click": format_timestamp(t),
            "session_end": format_timestamp(t + 2 * GAP + 40 * SECOND),  # last click + gap
            "end_ms": t + 2 * GAP + 40 * SECOND,
        }
    ]
    b = sorted(r["clicks"] for r in batch if r["user_name"] == "b")
    assert b == [1, 1]  # the click WHERE drops joins no session


@pytest.mark.parametrize("sql", [GROUP_SESSIONS, TVF_SESSIONS], ids=["group", "tvf"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_sessions_agree(sql: str, seed: int) -> None:
    trace = random_trace(seed)
    stream, batch = run_stream(sql, trace), run_batch(sql, trace)
    expected = closed(batch, trace)
    assert closed(stream, trace) == expected
    assert len(stream) == len(expected)  # nothing else came out
    merged = [r for r in batch if r["clicks"] > 2]
    assert len(expected) > 30 and merged, "the trace should close many sessions, some long"
    assert any(r["user_name"] is None for r in batch)
    for row in batch:
        start = parse_timestamp(row["first_click"])
        assert start is not None and row["end_ms"] - start >= GAP
