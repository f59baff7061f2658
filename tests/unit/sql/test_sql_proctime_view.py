"""``PROCTIME()`` in a view's SELECT list (Nexmark's q12: ``CREATE VIEW B AS SELECT *,
PROCTIME() AS p_time FROM bid``): the column is the view's processing-time attribute, and
a window TVF over the view groups its rows by the wall clock."""

from __future__ import annotations

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.timestamps import parse_timestamp

DDL = """
CREATE TABLE bids (bidder BIGINT, price BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'bids', 'format' = 'json');
CREATE TABLE out (bidder BIGINT, n BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

QUERY = """
CREATE VIEW B AS SELECT *, PROCTIME() AS p_time FROM bids WHERE price > 0;
INSERT INTO out
SELECT bidder, count(*), window_start, window_end
FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;
"""


def test_a_window_over_the_views_processing_time_follows_the_wall_clock():
    with TopologyTestDriver(compile(DDL + QUERY)) as driver:
        bids = driver.create_input_topic("bids", key_serde=serdes.String())
        for n in range(30):  # one bid a wall-clock second, alternating bidders
            bids.pipe_input("k", {"bidder": n % 2, "price": 1 if n != 3 else 0})
            driver.advance_wall_clock_time(1_000)
        driver.advance_wall_clock_time(20_000)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        rows = [r.value for r in out.read_records_to_list()]
    assert sum(r["n"] for r in rows) == 29  # every bid but the filtered one, once
    assert sum(r["n"] for r in rows if r["bidder"] == 1) == 14
    for row in rows:
        start, end = parse_timestamp(row["starttime"]), parse_timestamp(row["endtime"])
        assert start is not None and end is not None
        assert start % 10_000 == 0 and end - start == 10_000
    # 30 s of wall clock: three or four windows per bidder, depending on the start
    assert 3 <= len({r["starttime"] for r in rows}) <= 4


def test_the_window_takes_the_processing_time_after_the_repartition():
    """As Flink's window operator, the aggregation assigns each row to the window of the
    wall clock when it processes it: the stamping runs in the sub-topology that reads the
    repartition topic, so a row that waited there is never late for its window."""
    topology = compile(DDL + QUERY)
    stamping = [names for names in topology.subtopologies() if "out-proctime" in names]
    assert len(stamping) == 1
    assert "out-group-by-repartition-source" in stamping[0]
    assert "KSTREAM-SOURCE-0000000000" not in stamping[0]


@pytest.mark.parametrize(
    "query",
    [
        "INSERT INTO out SELECT bidder, price, PROCTIME(), PROCTIME() FROM bids;",
        "CREATE VIEW V AS SELECT bidder, count(*) AS n, PROCTIME() AS p FROM bids GROUP BY bidder;",
    ],
)
def test_proctime_elsewhere_is_an_error_naming_it(query: str):
    with pytest.raises(SqlError, match=r"PROCTIME\(\) in a query is"):
        compile(DDL + query)
