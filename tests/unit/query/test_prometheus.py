"""The Prometheus text of a ``metrics()`` snapshot: names, types, labels, escaping."""

from __future__ import annotations

import re

from streaming.query import prometheus

SNAPSHOT = {
    "state": "RUNNING",
    "threads": 1,
    "tasks": ["0_0", "0_1", "1_0"],
    "process-total": 1234,
    "process-rate": 250.5,
    "commit-total": 7,
    "commit-latency-avg": 3.25,
    "commit-latency-max": 9.0,
    "punctuate-total": 0,
    "rebalance-total": 1,
    "aborted-transactions-total": 0,
    "dropped-records-total": 2,
    "late-records-dropped-total": 2,
    "restore-records-total": 40,
    "restore-progress": {
        "app-counts-changelog-1": {
            "store": "counts",
            "start-offset": 0,
            "end-offset": 50,
            "restored": 40,
            "remaining": 10,
            "done": False,
        }
    },
    "consumer-lag": {"orders-with-dashes-0": 5, "orders-with-dashes-1": 0},
    "consumer-lag-max": 5,
    "records-sent-total": 99,
    "some-new-counter": 3,
}

SAMPLE = re.compile(r'^[a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? [-+0-9.eInfa]+$')


def _samples(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = value
    return out


def test_every_line_is_valid_exposition_format():
    text = prometheus.render(SNAPSHOT, "revenue")
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        assert SAMPLE.match(line), line


def test_counters_gauges_and_labels():
    text = prometheus.render(SNAPSHOT, "revenue")
    samples = _samples(text)
    app = '{application_id="revenue"}'
    assert "# TYPE kafka_streams_records_processed_total counter" in text
    assert samples[f"kafka_streams_records_processed_total{app}"] == "1234"
    assert samples[f"kafka_streams_process_rate{app}"] == "250.5"
    assert samples[f"kafka_streams_commit_latency_avg_ms{app}"] == "3.25"
    assert samples[f"kafka_streams_late_records_dropped_total{app}"] == "2"
    assert samples[f"kafka_streams_active_tasks{app}"] == "3"
    assert samples['kafka_streams_state{application_id="revenue",state="RUNNING"}'] == "1"
    assert samples['kafka_streams_state{application_id="revenue",state="ERROR"}'] == "0"
    # topic names with dashes keep them; the partition is the last number
    lag = 'kafka_streams_consumer_lag{application_id="revenue",topic="orders-with-dashes",partition="0"}'
    assert samples[lag] == "5"
    restore = '{application_id="revenue",store="counts",topic="app-counts-changelog",partition="1"}'
    assert samples[f"kafka_streams_restore_records_remaining{restore}"] == "10"
    assert samples[f"kafka_streams_restore_records_restored{restore}"] == "40"
    assert samples[f"kafka_streams_restore_done{restore}"] == "0"
    # unknown numeric metrics are still exported, as gauges
    assert "# TYPE kafka_streams_some_new_counter gauge" in text
    assert samples[f"kafka_streams_some_new_counter{app}"] == "3"
    # one HELP and one TYPE per family
    types = [line for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types))


def test_label_values_are_escaped_and_empty_families_skipped():
    text = prometheus.render({"state": "RUNNING", "consumer-lag": {}}, 'we"ird\\app\nid')
    assert 'application_id="we\\"ird\\\\app\\nid"' in text
    assert "kafka_streams_consumer_lag" not in text
    assert "kafka_streams_restore" not in text
