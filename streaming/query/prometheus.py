"""``KafkaStreams.metrics()`` in the Prometheus text exposition format (version 0.0.4).

Every sample carries the ``application_id`` label; per-partition metrics (consumer lag,
restore progress) add ``topic`` and ``partition`` (and ``store``). Counters end in
``_total``. Numeric entries of ``metrics()`` that this module does not know are exported as
gauges named after the key, so new counters show up without a change here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "kafka_streams_"

# metrics() key -> (metric name without the prefix, type, help)
KNOWN: dict[str, tuple[str, str, str]] = {
    "threads": ("alive_stream_threads", "gauge", "Stream threads alive"),
    "process-total": ("records_processed_total", "counter", "Records processed"),
    "process-rate": ("process_rate", "gauge", "Records processed per second (recent)"),
    "commit-total": ("commits_total", "counter", "Commits (transactions under exactly-once)"),
    "commit-latency-avg": ("commit_latency_avg_ms", "gauge", "Average commit latency in ms"),
    "commit-latency-max": ("commit_latency_max_ms", "gauge", "Maximum commit latency in ms"),
    "punctuate-total": ("punctuations_total", "counter", "Wall-clock punctuations run"),
    "rebalance-total": ("rebalances_total", "counter", "Rebalances seen by the stream threads"),
    "aborted-transactions-total": (
        "aborted_transactions_total",
        "counter",
        "Transactions aborted (exactly-once)",
    ),
    "dropped-records-total": ("dropped_records_total", "counter", "Records dropped"),
    "late-records-dropped-total": (
        "late_records_dropped_total",
        "counter",
        "Records dropped for arriving after their window closed",
    ),
    "restore-records-total": ("restored_records_total", "counter", "Changelog records restored"),
    "records-sent-total": ("records_sent_total", "counter", "Records produced"),
    "consumer-lag-max": ("consumer_lag_max", "gauge", "Largest consumer lag of any partition"),
    "producer-replacements-total": (
        "producer_replacements_total",
        "counter",
        "Producers replaced after being fenced or failing fatally",
    ),
    "stalled-threads": (
        "stalled_threads",
        "gauge",
        "Stream threads retrying a retriable failure (e.g. a broker down)",
    ),
    "stalled-seconds-max": (
        "stalled_seconds_max",
        "gauge",
        "Longest current stall of a stream thread in seconds (fails at task.timeout.ms)",
    ),
    "stalls-total": ("stalls_total", "counter", "Stalls the stream threads went through"),
}
_STRUCTURED = {"state", "tasks", "consumer-lag", "restore-progress", "stall-reason"}
_STATES = (
    "CREATED",
    "REBALANCING",
    "RUNNING",
    "PENDING_SHUTDOWN",
    "NOT_RUNNING",
    "PENDING_ERROR",
    "ERROR",
)
_NAME_RE = re.compile(r"[^a-zA-Z0-9_]")


def _escape(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, Any]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _split_tp(name: str) -> tuple[str, str]:
    """``"orders-3"`` -> ``("orders", "3")`` (topic names may contain dashes)."""
    topic, _, partition = name.rpartition("-")
    return (topic, partition) if partition.isdigit() else (name, "")


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(
        self, name: str, kind: str, help_text: str, samples: Iterable[tuple[dict, Any]]
    ) -> None:
        samples = list(samples)
        if not samples:
            return
        full = PREFIX + name
        self.lines.append(f"# HELP {full} {help_text}")
        self.lines.append(f"# TYPE {full} {kind}")
        for labels, value in samples:
            self.lines.append(f"{full}{_labels(labels)} {_number(value)}")


def render(metrics: Mapping[str, Any], application_id: str) -> str:
    """The Prometheus text for one ``metrics()`` snapshot of application ``application_id``."""
    base = {"application_id": application_id}
    out = _Writer()
    state = metrics.get("state")
    if state is not None:
        out.family(
            "state",
            "gauge",
            "1 for the application's current state (KafkaStreams.State)",
            [({**base, "state": s}, 1 if s == state else 0) for s in _STATES],
        )
    tasks = metrics.get("tasks")
    if tasks is not None:
        out.family("active_tasks", "gauge", "Active tasks on this instance", [(base, len(tasks))])
    for key, (name, kind, help_text) in KNOWN.items():
        value = metrics.get(key)
        if isinstance(value, int | float):
            out.family(name, kind, help_text, [(base, value)])
    lag = metrics.get("consumer-lag") or {}
    lag_samples = []
    for tp, value in sorted(lag.items()):
        topic, partition = _split_tp(tp)
        lag_samples.append(({**base, "topic": topic, "partition": partition}, value))
    out.family(
        "consumer_lag", "gauge", "Records not yet consumed, per input partition", lag_samples
    )
    restore = metrics.get("restore-progress") or {}
    restored, remaining, done = [], [], []
    for tp, progress in sorted(restore.items()):
        topic, partition = _split_tp(tp)
        labels = {
            **base,
            "store": progress.get("store", ""),
            "topic": topic,
            "partition": partition,
        }
        restored.append((labels, progress.get("restored", 0)))
        remaining.append((labels, progress.get("remaining", 0)))
        done.append((labels, bool(progress.get("done"))))
    out.family(
        "restore_records_restored", "gauge", "Changelog records restored, per partition", restored
    )
    out.family(
        "restore_records_remaining",
        "gauge",
        "Changelog records still to restore, per partition",
        remaining,
    )
    out.family("restore_done", "gauge", "1 when the partition's restoration finished", done)
    for key, value in sorted(metrics.items()):
        if key in KNOWN or key in _STRUCTURED or isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            name = _NAME_RE.sub("_", key).strip("_").lower()
            out.family(name, "gauge", f"metrics()[{key!r}]", [(base, value)])
    return "\n".join(out.lines) + "\n"


__all__ = ["CONTENT_TYPE", "render"]
