"""Interactive queries over HTTP: two instances of one application share a 4-partition input;
each serves its local stores at its ``application.server`` and forwards the others, so every
key (key-value, window and session stores) is answered correctly from either instance.
Also: metadata, range/all fan-out, 404s, /metrics (Prometheus text) and /health."""

from __future__ import annotations

import socket
import urllib.error
import urllib.parse
import urllib.request

import orjson
import pytest
from test_app_support import last_value_per_key, long_value, produce, read_all, unique, wait_for

from streaming import SessionWindows, StreamsBuilder, TimeWindows, serdes
from streaming.app import KafkaStreams, State
from streaming.query import QueryServer
from streaming.runtime.metadata import HostInfo
from streaming.runtime.partitioner import default_partition

KEYS = 24
PER_KEY = 5


def _topology(source: str, counts: str):
    builder = StreamsBuilder()
    stream = builder.stream(source, key_serde=serdes.String(), value_serde=serdes.String())
    grouped = stream.group_by_key()
    grouped.count(materialized="counts").to_stream().to(counts, value_serde=serdes.Long())
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(1_000)).count(materialized="windows")
    grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(500)).count(
        materialized="sessions"
    )
    return builder.build()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(base: str, path: str, **params: str) -> tuple[int, object, dict[str, str]]:
    url = base + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            body, status, headers = reply.read(), reply.status, dict(reply.headers)
    except urllib.error.HTTPError as exc:
        body, status, headers = exc.read(), exc.code, dict(exc.headers)
    if headers.get("Content-Type", "").startswith("application/json"):
        return status, orjson.loads(body), headers
    return status, body.decode(), headers


@pytest.fixture
def two_instances(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    source, counts = unique("qs-in"), unique("qs-counts")
    kafka_cluster.create_topic(source, partitions=4)
    kafka_cluster.create_topic(counts, partitions=4)
    app_id = unique("qs")
    apps: dict[HostInfo, KafkaStreams] = {}
    servers: list[QueryServer] = []
    try:
        for i in range(2):
            port = _free_port()
            config = {
                "application.id": app_id,
                "bootstrap.servers": bootstrap,
                "state.dir": str(tmp_path / f"i{i}"),
                "application.server": f"127.0.0.1:{port}",
                "commit.interval.ms": 100,
                "consumer.session.timeout.ms": 6000,
            }
            app = KafkaStreams(_topology(source, counts), config)
            app.start()
            apps[HostInfo("127.0.0.1", port)] = app
            # KafkaStreams serves queries at application.server by itself
            assert isinstance(app.query_server, QueryServer)
            assert app.query_server.port == port
            servers.append(app.query_server)
        for app in apps.values():
            assert app.wait_until(State.RUNNING, 60)

        def balanced():
            return all(len(a.local_tasks()) == 2 for a in apps.values()) and all(
                a.state is State.RUNNING for a in apps.values()
            )

        wait_for(balanced, 60, "two tasks on each instance")
        keys = [f"key/{i}" if i % 7 == 0 else f"key-{i}" for i in range(KEYS)]
        # PER_KEY records per key in the window [10000, 11000), one session [10000, 10004]
        produce(
            bootstrap,
            source,
            ((k.encode(), b"v", 10_000 + j) for j in range(PER_KEY) for k in keys),
        )

        def counted(msgs):
            last = last_value_per_key(msgs, counts)
            return len(last) == KEYS and all(long_value(v) == PER_KEY for v in last.values())

        read_all(bootstrap, [counts], until=counted, timeout=60)
        yield apps, servers, keys
    finally:
        for server in servers:
            server.stop()
        for app in apps.values():
            app.close(60)


def test_every_key_answered_from_either_instance(two_instances):
    apps, servers, keys = two_instances
    bases = [s.url for s in servers]
    a, _b = apps.values()
    for key in keys:
        quoted = urllib.parse.quote(key, safe="")
        partition = default_partition(key.encode(), 4)
        owner = a.metadata_for_key("counts", key, serdes.String()).active_host
        assert owner in apps
        for base in bases:
            status, body, headers = _get(base, f"/stores/counts/keys/{quoted}")
            assert status == 200, body
            assert body == {
                "store": "counts",
                "key": key,
                "partition": partition,
                "host": str(owner),
                "value": PER_KEY,
            }
            if base.endswith(f":{owner.port}"):
                assert "X-Streaming-Answered-By" not in headers
            else:
                assert headers["X-Streaming-Answered-By"] == str(owner)

            status, body, _ = _get(base, f"/stores/windows/keys/{quoted}")
            assert status == 200, body
            assert body["windows"] == [{"start": 10_000, "end": 11_000, "value": PER_KEY}]
            status, body, _ = _get(base, f"/stores/windows/keys/{quoted}", **{"from": "11000"})
            assert status == 404, body
            status, body, _ = _get(
                base, f"/stores/windows/keys/{quoted}", **{"from": "9000", "to": "10000"}
            )
            assert status == 200 and body["windows"][0]["value"] == PER_KEY

            status, body, _ = _get(base, f"/stores/sessions/keys/{quoted}")
            assert status == 200, body
            assert body["sessions"] == [
                {"start": 10_000, "end": 10_000 + PER_KEY - 1, "value": PER_KEY}
            ]

            status, body, _ = _get(base, f"/metadata/counts/{quoted}")
            assert status == 200
            assert body["active_host"] == str(owner)
            assert body["partition"] == partition


def test_scans_metadata_and_errors(two_instances):
    apps, servers, keys = two_instances
    for server in servers:
        base = server.url
        status, body, _ = _get(base, "/stores/counts/all")
        assert status == 200
        assert sorted(e["key"] for e in body["entries"]) == sorted(keys)
        assert all(e["value"] == PER_KEY for e in body["entries"])
        assert sorted(body["hosts"]) == sorted(str(h) for h in apps)
        # local only: this instance's half
        status, local, _ = _get(base, "/stores/counts/all", local="true")
        assert status == 200 and 0 < len(local["entries"]) < KEYS
        status, body, _ = _get(base, "/stores/counts/range", **{"from": "key-1", "to": "key-2"})
        assert status == 200
        assert sorted(e["key"] for e in body["entries"]) == sorted(
            k for k in keys if "key-1" <= k <= "key-2"
        )
        status, body, _ = _get(base, "/stores/windows/range", **{"from": "10000", "to": "10000"})
        assert status == 200
        assert sorted(e["key"] for e in body["entries"]) == sorted(keys)
        assert {(e["start"], e["end"], e["value"]) for e in body["entries"]} == {
            (10_000, 11_000, PER_KEY)
        }
        status, body, _ = _get(base, "/stores/windows/all")
        assert status == 200 and len(body["entries"]) == KEYS

        status, body, _ = _get(base, "/metadata")
        assert status == 200
        assert sorted(f"{m['host']}:{m['port']}" for m in body) == sorted(str(h) for h in apps)
        for m in body:
            app = apps[HostInfo(m["host"], m["port"])]
            assert set(m["tasks"]) == set(app.local_tasks())
            assert {"counts", "windows", "sessions"} <= set(m["stores"])
            assert len(m["topic_partitions"]) == 2
        status, body, _ = _get(base, "/stores")
        assert {s["store"]: s["kind"] for s in body} == {
            "counts": "keyvalue",
            "windows": "window",
            "sessions": "session",
        }

        status, body, _ = _get(base, "/stores/nope/keys/x")
        assert status == 404 and "unknown store 'nope'" in body["error"]
        status, body, _ = _get(base, "/stores/counts/keys/missing-key")
        assert status == 404 and "not found" in body["error"]
        status, body, _ = _get(base, "/stores/counts/keys/1", key_type="long")
        assert status == 400 and "key serde" in body["error"]  # counts has String keys
        status, body, _ = _get(base, "/stores/counts/keys/1", key_type="string")
        assert status == 404
        status, body, _ = _get(base, "/stores/counts/keys/x", key_type="long")
        assert status == 400 and "not a valid long" in body["error"]
        status, body, _ = _get(base, "/no/such/path")
        assert status == 404

        status, body, _ = _get(base, "/health")
        assert status == 200 and body["state"] == "RUNNING" and body["healthy"] is True
        status, text, headers = _get(base, "/metrics")
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert "# TYPE kafka_streams_records_processed_total counter" in text
        processed = [
            line for line in text.splitlines() if line.startswith("kafka_streams_records_processed")
        ]
        assert len(processed) == 1 and float(processed[0].rsplit(" ", 1)[1]) > 0
        assert 'kafka_streams_state{application_id="' in text
        assert 'state="RUNNING"} 1' in text
