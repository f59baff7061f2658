"""A SQL file run as an application on the real broker (``python -m streaming sql``) under
exactly_once_v2: the windowed revenue sums read back read_committed are exact, a pull query
over HTTP answers one key and window from the state store, a push query streams a row
written after it started; after a clean stop, a second run on the same state directory
answers pull queries and keeps aggregating exactly."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

from test_app_support import HERE, REPO, T0, produce, read_all, stop_app, unique, wait_for

from streaming.sql.shell import run_statement
from streaming.sql.timestamps import format_timestamp

MINUTE = 60_000
#: the windows: whole minutes ten minutes back (far inside the one-hour watermark delay)
BASE = T0 // MINUTE * MINUTE - 10 * MINUTE

SQL = """
CREATE TABLE orders (id STRING, region STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' HOUR
) WITH ('connector' = 'kafka', 'topic' = '{orders}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');

CREATE TABLE revenue (region STRING, window_start TIMESTAMP(3), revenue DOUBLE, orders BIGINT,
  PRIMARY KEY (region, window_start) NOT ENFORCED
) WITH ('connector' = 'kafka', 'topic' = '{revenue}', 'format' = 'json',
        'key.fields' = 'region');

INSERT INTO revenue
SELECT region, window_start, SUM(amount), COUNT(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY window_start, window_end, region
EMIT CHANGES;
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def window_of(i: int) -> int:
    """The window start of order ``i``: each region has orders in three windows."""
    return BASE + (i // 3) % 3 * MINUTE


def orders(start: int, n: int) -> list[dict[str, Any]]:
    """``n`` orders over three regions and three windows; amounts exact in binary."""
    return [
        {
            "id": f"o{i}",
            "region": ("EU", "US", "APAC")[i % 3],
            "amount": 1.25 + (i % 7),
            "ts": format_timestamp(window_of(i) + (i * 997) % MINUTE),
        }
        for i in range(start, start + n)
    ]


def expected(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[float, int]]:
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for row in rows:
        entry = sums[(row["region"], format_timestamp(window_of(int(row["id"][1:]))))]
        entry[0] += row["amount"]
        entry[1] += 1
    return {k: (v[0], int(v[1])) for k, v in sums.items()}


def produce_orders(bootstrap: str, topic: str, rows: list[dict[str, Any]]) -> None:
    produce(bootstrap, topic, ((r["id"].encode(), json.dumps(r).encode(), None) for r in rows))


def sink_sums(msgs: list[Any]) -> dict[tuple[str, str], tuple[float, int]]:
    """The last row of each (region, window) in the sink (one partition per region)."""
    last = {}
    for _t, _p, _o, key, value, _h in msgs:
        row = json.loads(value)
        assert key.decode() == row["region"]
        last[(row["region"], row["window_start"])] = (row["revenue"], row["orders"])
    return last


def http_sql(url: str, text: str, timeout: float = 10.0) -> Any:
    request = urllib.request.Request(url + "/sql", data=text.encode(), method="POST")
    return urllib.request.urlopen(request, timeout=timeout)


def pull(url: str, text: str) -> list[dict[str, Any]]:
    with http_sql(url, text) as reply:
        assert reply.status == 200
        return json.loads(reply.read())


def start_app(sql_file: Path, props: Path, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), str(HERE), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "streaming", "sql", str(sql_file), "--config", str(props)]
    return subprocess.Popen(
        [*cmd, "--quiet"],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    def healthy() -> bool:
        assert proc.poll() is None, f"the app exited:\n{log.read_text()[-4000:]}"
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    wait_for(healthy, 90, "the SQL app to run")


def wait_pull(url: str, text: str, want: list[dict[str, Any]]) -> None:
    """Retry a pull query until it answers ``want`` (restoring and commits take a moment)."""
    last: Any = None

    def answered() -> bool:
        nonlocal last
        try:
            last = pull(url, text)
        except urllib.error.HTTPError as exc:
            last = (exc.code, exc.read())
            return False
        return bool(last == want)

    try:
        wait_for(answered, 60, f"pull query to answer {want}")
    except AssertionError:
        raise AssertionError(f"pull query answered {last!r}, want {want!r}") from None


def test_sql_file_runs_exactly_once_with_pull_and_push_queries(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    orders_topic, revenue_topic = unique("sql-orders"), unique("sql-revenue")
    kafka_cluster.create_topic(orders_topic, partitions=3)
    kafka_cluster.create_topic(revenue_topic, partitions=3)
    sql_file = tmp_path / "revenue.sql"
    sql_file.write_text(SQL.format(orders=orders_topic, revenue=revenue_topic))
    port = free_port()
    url = f"http://localhost:{port}"
    props = tmp_path / "app.properties"
    props.write_text(
        "\n".join(
            [
                f"application.id={unique('sql-app')}",
                f"bootstrap.servers={bootstrap}",
                f"state.dir={tmp_path / 'state'}",
                f"application.server=localhost:{port}",
                "processing.guarantee=exactly_once_v2",
                "commit.interval.ms=200",
                "consumer.session.timeout.ms=6000",
            ]
        )
        + "\n"
    )
    log = tmp_path / "app.log"
    first = orders(0, 90)
    produce_orders(bootstrap, orders_topic, first)  # before the start: earliest-offset
    proc = start_app(sql_file, props, log)
    try:
        wait_healthy(url, proc, log)
        want = expected(first)
        msgs = read_all(bootstrap, [revenue_topic], until=lambda m: sink_sums(m) == want)
        assert sink_sums(msgs) == want, log.read_text()[-4000:]

        # pull query: one key and one window, over HTTP
        w1 = format_timestamp(BASE + MINUTE)
        window_query = (
            f"SELECT * FROM revenue WHERE region = 'US' AND window_start >= '{w1}' "
            f"AND window_start < '{format_timestamp(BASE + 2 * MINUTE)}'"
        )
        revenue, count = want[("US", w1)]
        row = {"region": "US", "window_start": w1, "revenue": revenue, "orders": count}
        assert pull(url, window_query) == [row]
        shown = io.StringIO()  # the shell's rendering of the same query, and of an error
        run_statement(url, window_query, shown)
        run_statement(url, "SELECT * FROM nowhere", shown)
        lines = shown.getvalue().splitlines()
        assert lines[0].split() == ["region", "|", "window_start", "|", "revenue", "|", "orders"]
        assert lines[2].split("|")[0].strip() == "US" and lines[3].startswith("error (400)")
        every = pull(url, "SELECT window_start, orders FROM revenue WHERE region = 'EU'")
        assert sorted(r["window_start"] for r in every) == sorted(
            w for (region, w) in want if region == "EU"
        )
        try:
            pull(url, "SELECT * FROM orders WHERE region = 'EU'")
            raise AssertionError("a pull query on a stream must fail")
        except urllib.error.HTTPError as exc:
            assert exc.code == 400 and b"not materialized" in exc.read()

        # push query: a row written after it started comes through, filtered and projected
        push_text = "SELECT id, amount FROM orders WHERE region = 'APAC' EMIT CHANGES"
        with http_sql(url, push_text, timeout=30) as stream:
            assert stream.headers.get_content_type() == "application/x-ndjson"
            late = orders(90, 3)  # o90 EU, o91 US, o92 APAC
            produce_orders(bootstrap, orders_topic, late)
            line = json.loads(stream.readline())
            assert line == {"id": "o92", "amount": late[2]["amount"]}
        first += late
        want = expected(first)
        msgs = read_all(bootstrap, [revenue_topic], until=lambda m: sink_sums(m) == want)
        assert sink_sums(msgs) == want
    finally:
        assert stop_app(proc) == 0, log.read_text()[-4000:]

    # second run on the same state directory: pull queries answer, new orders aggregate
    proc = start_app(sql_file, props, log)
    try:
        wait_healthy(url, proc, log)
        revenue, count = want[("US", w1)]
        row = {"region": "US", "window_start": w1, "revenue": revenue, "orders": count}
        wait_pull(url, window_query, [row])
        second = orders(93, 60)
        produce_orders(bootstrap, orders_topic, second)
        want = expected(first + second)
        msgs = read_all(bootstrap, [revenue_topic], until=lambda m: sink_sums(m) == want)
        assert sink_sums(msgs) == want, log.read_text()[-4000:]
        revenue, count = want[("US", w1)]
        row = {"region": "US", "window_start": w1, "revenue": revenue, "orders": count}
        wait_pull(url, window_query, [row])
    finally:
        assert stop_app(proc) == 0, log.read_text()[-4000:]


REGIONS = tuple(f"r{i:02d}" for i in range(12))


def regional_orders(n: int) -> list[dict[str, Any]]:
    """``n`` orders over twelve regions, all in the window at BASE."""
    return [
        {
            "id": f"o{i}",
            "region": REGIONS[i % len(REGIONS)],
            "amount": 1.0 + i % 5,
            "ts": format_timestamp(BASE + (i * 331) % MINUTE),
        }
        for i in range(n)
    ]


def owner_of(url: str, region: str) -> str:
    key = urllib.parse.quote(json.dumps({"region": region}, separators=(",", ":")))
    with urllib.request.urlopen(f"{url}/metadata/revenue/{key}?key_type=json", timeout=10) as r:
        return str(json.loads(r.read())["active_host"])


def test_pull_queries_and_scans_reach_the_instances_that_own_the_keys(kafka_cluster, tmp_path):
    """Two instances of one SQL application split the revenue store's partitions; a pull
    query sent to either instance answers every region, the other instance's ones through
    the forwarding of /sql to the key's owner, and a scan gathers both instances' rows."""
    bootstrap = kafka_cluster.bootstrap_servers
    orders_topic, revenue_topic = unique("sql2-orders"), unique("sql2-revenue")
    kafka_cluster.create_topic(orders_topic, partitions=4)
    kafka_cluster.create_topic(revenue_topic, partitions=4)
    sql_file = tmp_path / "revenue.sql"
    sql_file.write_text(SQL.format(orders=orders_topic, revenue=revenue_topic))
    app_id = unique("sql2-app")
    rows = regional_orders(240)
    produce_orders(bootstrap, orders_topic, rows)
    want = {region: sum(r["amount"] for r in rows if r["region"] == region) for region in REGIONS}
    procs, urls, logs = [], [], []
    try:
        for i in range(2):
            port = free_port()
            props = tmp_path / f"app{i}.properties"
            props.write_text(
                "\n".join(
                    [
                        f"application.id={app_id}",
                        f"bootstrap.servers={bootstrap}",
                        f"state.dir={tmp_path / f'state{i}'}",
                        f"application.server=localhost:{port}",
                        "processing.guarantee=exactly_once_v2",
                        "commit.interval.ms=200",
                        "consumer.session.timeout.ms=6000",
                    ]
                )
                + "\n"
            )
            logs.append(tmp_path / f"app{i}.log")
            procs.append(start_app(sql_file, props, logs[-1]))
            urls.append(f"http://localhost:{port}")
        for url, proc, log in zip(urls, procs, logs, strict=True):
            wait_healthy(url, proc, log)
        hosts = {url.removeprefix("http://") for url in urls}

        def split() -> bool:
            try:
                owners = {owner_of(urls[0], region) for region in REGIONS}
            except (urllib.error.URLError, OSError, KeyError):
                return False
            return owners == hosts  # both instances own some regions, nothing unassigned

        wait_for(split, 90, "both instances to own part of the revenue store")
        window = format_timestamp(BASE)
        for url in urls:
            for region in REGIONS:
                text = f"SELECT region, revenue FROM revenue WHERE region = '{region}'"
                wait_pull(url, text, [{"region": region, "revenue": want[region]}])
        owners = {region: owner_of(urls[0], region) for region in REGIONS}
        assert set(owners.values()) == hosts, owners
        # the window range narrows the same forwarded query
        text = (
            f"SELECT orders FROM revenue WHERE region = '{REGIONS[0]}' "
            f"AND window_start = '{window}'"
        )
        for url in urls:
            assert pull(url, text) == [{"orders": 240 // len(REGIONS)}]
        # a scan (no key) gathers every instance's rows, whichever instance is asked
        for url in urls:
            rows = pull(url, "SELECT region, revenue FROM revenue")
            assert sorted(rows, key=lambda r: r["region"]) == [
                {"region": region, "revenue": want[region]} for region in REGIONS
            ]
            limited = pull(url, f"SELECT * FROM revenue WHERE window_start = '{window}' LIMIT 5")
            assert len(limited) == 5 and all(r["window_start"] == window for r in limited)
    finally:
        for proc, log in zip(procs, logs, strict=True):
            assert stop_app(proc) == 0, log.read_text()[-4000:]
