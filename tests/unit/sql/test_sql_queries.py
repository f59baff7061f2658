"""Pull and push query planning (``streaming.sql.queries``), pull queries answered from the
stores of a test driver, the SQL catalog that ``compile`` registers, and the CLI's mapping
of 'scan.startup.mode'."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.cli import startup_offset_reset
from streaming.query.service import QueryService, Response
from streaming.runtime.metadata import HostInfo
from streaming.sql import SqlError, compile
from streaming.sql.queries import PullQuery, PushQuery, execute_pull, plan
from streaming.sql.results import SqlCatalog, catalog_of
from streaming.sql.shell import format_rows

ORDERS = """
CREATE TABLE orders (id STRING, region STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');
"""
WINDOWED = (
    ORDERS
    + """
CREATE TABLE revenue (region STRING, window_start TIMESTAMP(3), revenue DOUBLE, orders BIGINT,
  PRIMARY KEY (region, window_start) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 'revenue', 'format' = 'json', 'key.fields' = 'region');
INSERT INTO revenue
SELECT region, window_start, SUM(amount), COUNT(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTES))
GROUP BY window_start, window_end, region;
"""
)
TOTALS = (
    ORDERS
    + """
CREATE TABLE totals (region STRING, total DOUBLE, n BIGINT, PRIMARY KEY (region) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 'totals', 'format' = 'json', 'key.fields' = 'region');
INSERT INTO totals SELECT region, SUM(amount), COUNT(*) FROM orders GROUP BY region
HAVING COUNT(*) > 1;
"""
)
MIN5 = 300_000
T10 = 1_704_103_200_000  # 2024-01-01 10:00:00 UTC


def catalog(text: str) -> SqlCatalog:
    found = catalog_of(compile(text))
    assert found is not None
    return found


def pull_plan(text: str, query: str) -> PullQuery:
    planned = plan(catalog(text), query)
    assert isinstance(planned, PullQuery)
    return planned


def error(text: str, query: str) -> str:
    with pytest.raises(SqlError) as info:
        plan(catalog(text), query)
    return str(info.value)


def test_the_aggregate_store_is_named_after_the_sink_table():
    result = catalog(WINDOWED).results["revenue"]
    assert (result.store, result.kind, result.group_columns) == ("revenue", "window", ("region",))
    assert "stores: [revenue]" in str(compile(WINDOWED).describe())
    assert catalog(TOTALS).results["totals"].kind == "keyvalue"
    assert set(catalog(WINDOWED).tables) == {"orders", "revenue"}


def test_pull_query_plans_a_key_lookup_and_a_window_range():
    q = pull_plan(WINDOWED, "SELECT * FROM revenue WHERE region = 'EU'")
    assert (q.key, q.window_from, q.window_to, q.columns) == (["EU"], 0, (1 << 63) - 1, None)
    q = pull_plan(
        WINDOWED,
        "SELECT region, revenue FROM revenue WHERE window_start >= '2024-01-01 10:00:00' "
        "AND region = 'EU' AND window_start < '2024-01-01 10:05:00'",
    )
    assert (q.key, q.window_from, q.window_to) == (["EU"], T10, T10 + MIN5 - 1)
    assert q.columns == ("region", "revenue")
    q = pull_plan(WINDOWED, f"SELECT * FROM revenue WHERE 'EU' = region AND window_start = {T10}")
    assert (q.window_from, q.window_to) == (T10, T10)
    q = pull_plan(
        WINDOWED,
        "SELECT * FROM revenue WHERE region = 'EU' AND window_start BETWEEN "
        "'2024-01-01 10:00:00' AND '2024-01-01 10:10:00'",
    )
    assert (q.window_from, q.window_to) == (T10, T10 + 2 * MIN5)


def test_push_query_plans_a_filter_and_projection_on_any_table():
    q = plan(
        catalog(WINDOWED),
        "SELECT id, amount * 2 AS double_amount FROM orders WHERE region = 'EU' EMIT CHANGES",
    )
    assert isinstance(q, PushQuery) and q.table.topic == "orders"
    row = {"id": "o1", "region": "EU", "amount": 2.5, "ts": "2024-01-01 10:00:00"}
    assert q.where(row) and not q.where({**row, "region": "US"})
    assert q.project(row) == {"id": "o1", "double_amount": 5.0}
    q = plan(catalog(WINDOWED), "SELECT * FROM revenue EMIT CHANGES")
    assert isinstance(q, PushQuery)
    assert q.project({"region": "EU", "revenue": 1.0}) == {
        "region": "EU",
        "window_start": None,
        "revenue": 1.0,
        "orders": None,
    }


@pytest.mark.parametrize(
    "query, message",
    [
        ("SELECT * FROM orders WHERE region = 'EU'", "table orders is not materialized"),
        ("SELECT * FROM nowhere EMIT CHANGES", "line 1, column 15: unknown table nowhere"),
        ("SELECT * FROM nowhere WHERE region = 'EU'", "unknown table nowhere"),
        ("SELECT * FROM revenue LIMIT -1", "LIMIT needs a non-negative integer"),
        ("SELECT * FROM orders LIMIT 3 EMIT CHANGES", "LIMIT is not supported in a push query"),
        ("SELECT * FROM revenue WHERE region > 'EU'", "region needs an equality"),
        ("SELECT * FROM revenue WHERE region = 'EU' AND orders = 2", "not on orders"),
        ("SELECT * FROM revenue WHERE region = 'EU' OR region = 'US'", "a conjunction"),
        ("SELECT * FROM revenue WHERE region = 1", "type mismatch"),
        ("SELECT * FROM revenue WHERE region = 'EU' AND window_start >= 'soon'", "TIMESTAMP"),
        ("SELECT nope FROM revenue WHERE region = 'EU'", "selects * or columns of revenue"),
        ("SELECT * FROM revenue WHERE region = 'EU' EMIT FINAL", "EMIT FINAL is not a query"),
        ("SELECT region FROM revenue GROUP BY region", "GROUP BY is not supported in a pull"),
        ("SELECT region FROM orders GROUP BY nope EMIT CHANGES", "column 36: unknown column nope"),
        ("SELECT region FROM orders ORDER BY region EMIT CHANGES", "ORDER BY is not supported"),
        ("SELECT nope FROM orders EMIT CHANGES", "unknown column nope"),
        ("SELECT * FROM orders WHERE amount EMIT CHANGES", "WHERE needs a BOOLEAN"),
        ("SELECT 1; SELECT 2", "exactly one SELECT"),
        ("INSERT INTO revenue SELECT * FROM revenue", "one SELECT statement"),
    ],
)
def test_query_errors(query, message):
    assert message in error(WINDOWED, query)


def test_a_select_in_a_sql_application_points_at_pull_and_push_queries():
    with pytest.raises(SqlError, match="pull and push queries go to a running application"):
        compile(ORDERS + "SELECT * FROM orders;")


def test_pull_queries_read_the_driver_stores():
    topology = compile(WINDOWED)
    found = catalog_of(topology)
    assert found is not None
    with TopologyTestDriver(topology) as driver:
        src = driver.create_input_topic("orders", key_serde=serdes.String())
        src.pipe_input(
            "o1", {"id": "o1", "region": "EU", "amount": 10.0, "ts": "2024-01-01 10:01:00"}
        )
        src.pipe_input(
            "o2", {"id": "o2", "region": "EU", "amount": 4.5, "ts": "2024-01-01 10:03:30"}
        )
        src.pipe_input(
            "o3", {"id": "o3", "region": "EU", "amount": 1.0, "ts": "2024-01-01 10:07:00"}
        )
        src.pipe_input(
            "o4", {"id": "o4", "region": "US", "amount": 2.0, "ts": "2024-01-01 10:02:00"}
        )
        store = driver.get_window_store("revenue")
        every = plan(found, "SELECT * FROM revenue WHERE region = 'EU'")
        assert isinstance(every, PullQuery)
        assert execute_pull(every, store) == [
            {
                "region": "EU",
                "window_start": "2024-01-01 10:00:00.000",
                "revenue": 14.5,
                "orders": 2,
            },
            {
                "region": "EU",
                "window_start": "2024-01-01 10:05:00.000",
                "revenue": 1.0,
                "orders": 1,
            },
        ]
        one = plan(
            found,
            "SELECT revenue, orders FROM revenue WHERE region = 'EU' "
            "AND window_start >= '2024-01-01 10:05:00' AND window_start < '2024-01-01 10:10:00'",
        )
        assert isinstance(one, PullQuery)
        assert execute_pull(one, store) == [{"revenue": 1.0, "orders": 1}]
        none = plan(found, "SELECT * FROM revenue WHERE region = 'APAC'")
        assert isinstance(none, PullQuery) and execute_pull(none, store) == []
        # a scan: every key's windows in key order, the window range and LIMIT applied
        # (o4 came after the 10:00 window closed: dropped as late; o5 is on time)
        src.pipe_input(
            "o5", {"id": "o5", "region": "US", "amount": 3.0, "ts": "2024-01-01 10:08:00"}
        )
        scan = plan(found, "SELECT region, orders FROM revenue")
        assert isinstance(scan, PullQuery) and scan.is_scan
        assert execute_pull(scan, store) == [
            {"region": "EU", "orders": 2},
            {"region": "EU", "orders": 1},
            {"region": "US", "orders": 1},
        ]
        first = plan(
            found,
            "SELECT region, revenue FROM revenue WHERE window_start = '2024-01-01 10:00:00' LIMIT 1",
        )
        assert isinstance(first, PullQuery)
        assert execute_pull(first, store) == [{"region": "EU", "revenue": 14.5}]


def test_pull_query_on_a_key_value_result_applies_having():
    topology = compile(TOTALS)
    found = catalog_of(topology)
    assert found is not None
    with TopologyTestDriver(topology) as driver:
        src = driver.create_input_topic("orders", key_serde=serdes.String())
        for i, region in enumerate(["EU", "EU", "US"]):
            src.pipe_input(f"o{i}", {"id": f"o{i}", "region": region, "amount": 1.5, "ts": i})
        store = driver.get_key_value_store("totals")
        eu = plan(found, "SELECT * FROM totals WHERE region = 'EU'")
        us = plan(found, "SELECT * FROM totals WHERE region = 'US'")
        assert isinstance(eu, PullQuery) and isinstance(us, PullQuery)
        assert execute_pull(eu, store) == [{"region": "EU", "total": 3.0, "n": 2}]
        assert execute_pull(us, store) == []  # one order: HAVING COUNT(*) > 1 rejects it


def test_scan_startup_mode_maps_to_auto_offset_reset():
    assert startup_offset_reset(catalog(WINDOWED)) == "earliest"
    latest = ORDERS.replace("earliest-offset", "latest-offset")
    assert startup_offset_reset(catalog(latest)) == "latest"
    assert (
        startup_offset_reset(
            catalog(ORDERS.replace(",\n        'scan.startup.mode' = 'earliest-offset'", ""))
        )
        is None
    )
    with pytest.raises(SystemExit, match="'group-offsets' is not supported"):
        startup_offset_reset(catalog(ORDERS.replace("earliest-offset", "group-offsets")))
    mixed = WINDOWED.replace(
        "'key.fields' = 'region'", "'key.fields' = 'region', 'scan.startup.mode' = 'latest-offset'"
    )
    with pytest.raises(SystemExit, match="disagree"):
        startup_offset_reset(catalog(mixed))


def test_the_shell_formats_rows_as_a_table():
    text = format_rows([{"region": "EU", "revenue": 14.5}, {"region": "US", "revenue": None}])
    assert text.splitlines() == [
        "region | revenue",
        "-------+--------",
        "EU     | 14.5   ",
        "US     | NULL   ",
    ]
    assert format_rows([]) == "(no rows)"


def test_the_shell_token_defaults_to_the_environment(monkeypatch):
    import streaming.sql.shell as shell_module
    from streaming.cli import main

    seen = []
    monkeypatch.setattr(shell_module, "shell", lambda server, token=None: seen.append(token) or 0)
    monkeypatch.setenv("STREAMING_QUERY_TOKEN", "from-env")
    assert main(["sql", "--shell", "--server", "http://h:1"]) == 0
    assert main(["sql", "--shell", "--server", "http://h:1", "--token", "from-argv"]) == 0
    monkeypatch.delenv("STREAMING_QUERY_TOKEN")
    assert main(["sql", "--shell", "--server", "http://h:1"]) == 0
    assert seen == ["from-env", "from-argv", None]


class FakeStreams:
    """What ``QueryService.sql`` uses of a ``KafkaStreams``: one task ``0_0`` that hosts
    every key on ``owner``, and the driver's stores."""

    def __init__(self, topology: Any, driver: Any, owner: HostInfo) -> None:
        self.topology = topology
        self.driver = driver
        self.owner = owner
        self.host_info = HostInfo("localhost", 7000)
        self.plan = SimpleNamespace(subtopology_for_store=lambda store: SimpleNamespace(id=0))

    def metadata_for_key(self, store: str, key: Any, serde: Any) -> Any:
        return SimpleNamespace(active_host=self.owner, partition=0)

    def local_tasks(self) -> dict[str, str]:
        return {"0_0": "RUNNING"}

    def store(self, name: str) -> Any:
        return self.driver.get_window_store(name)


def test_the_query_service_answers_pull_queries_locally_and_forwards_remote_keys():
    topology = compile(WINDOWED)
    with TopologyTestDriver(topology) as driver:
        src = driver.create_input_topic("orders", key_serde=serdes.String())
        src.pipe_input("o1", {"id": "o1", "region": "EU", "amount": 2.0, "ts": T10})
        query = "SELECT revenue FROM revenue WHERE region = 'EU'"
        local = QueryService(FakeStreams(topology, driver, HostInfo("localhost", 7000)))
        answer = local.sql(query)
        assert isinstance(answer, Response) and answer.status == 200
        assert answer.json() == [{"revenue": 2.0}]
        bad = local.sql("SELECT * FROM revenue WHERE region = 'EU' AND orders = 1")
        assert bad.status == 400 and "filters on its key only" in bad.json()["error"]
        assert local.sql("  ").status == 400
        remote = QueryService(FakeStreams(topology, driver, HostInfo("other", 7001)))
        calls = []
        remote._forward = lambda owner, path, params: calls.append((owner, path, params)) or "fwd"  # type: ignore[method-assign]
        assert remote.sql(query) == "fwd"
        assert calls == [(HostInfo("other", 7001), "/sql", {"q": query})]
        assert remote.sql(query, forwarded=True).json() == [{"revenue": 2.0}]  # never again
    plain = QueryService(FakeStreams(object(), None, HostInfo("localhost", 7000)))
    assert plain.sql(query).status == 404
