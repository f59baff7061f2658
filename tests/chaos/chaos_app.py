"""The application child process of the chaos suite, and its topologies.

``python -m chaos_app --topology simple --events app.events.jsonl --set key=value ...``
(with ``tests/chaos`` on ``PYTHONPATH``) runs one ``KafkaStreams`` instance like
``python -m streaming run`` does, and in addition writes one JSON object per line to the
events file, flushed at once, so that the harness can follow the instance even after a
SIGKILL:

- ``start`` (pid), ``started`` (after ``start()`` returned);
- ``state``: every ``KafkaStreams`` state change (``set_state_listener``), ``new``/``old``;
- ``thread_error``: an exception that killed a stream thread (the uncaught exception
  handler, which answers ``SHUTDOWN_CLIENT``, the default), with its traceback;
- ``restore_start`` / ``restore_end``: changelog restoration (``StateRestoreListener``);
- ``metrics``: about once a second the state, active and standby tasks, records processed,
  commits, rebalances and aborted transactions;
- ``closed``: after ``close()``: the final state, whether it finished within
  ``--close-timeout`` (30 s; if not, every thread's stack goes to the log), how long it
  took and the threads still alive. The process then exits at once (``os._exit``).

Application settings come as ``--set`` like ``python -m streaming run``; ``app.chaos.*`` keys
name the topics of the topologies below (settings of your own go under ``app.``).
The process exits with 1 when the application ended in ERROR, 0 otherwise; SIGTERM or
Ctrl-C close it cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from datetime import timedelta
from typing import Any

log = logging.getLogger("chaos_app")

#: the tumbling window of the complex topology's windowed count (event time = produce time)
WINDOW_MS = 5_000
#: its grace: far more than any stall of a scenario, so no record is ever dropped as late
WINDOW_GRACE = timedelta(hours=1)
#: groups the complex topology re-keys to (through a repartition topic)
GROUPS = 5


# ---------------------------------------------------------------------------- topologies


def simple(config: dict[str, Any]) -> Any:
    """Kafka's EOS "simple" client: echo the input, and per key the count and the sum of the
    values (``chaos.input`` -> ``chaos.copy``, ``chaos.counts``, ``chaos.sums``)."""
    from streaming import StreamsBuilder, serdes
    from streaming.dsl.options import Materialized

    b = StreamsBuilder()
    s = b.stream(config["app.chaos.input"], key_serde=serdes.String(), value_serde=serdes.String())
    s.to(config["app.chaos.copy"], key_serde=serdes.String(), value_serde=serdes.String())
    grouped = s.group_by_key()
    grouped.count(materialized="counts").to_stream().to(
        config["app.chaos.counts"], key_serde=serdes.String(), value_serde=serdes.Long()
    )
    grouped.aggregate(
        lambda: 0,
        lambda _k, v, agg: agg + int(v),
        materialized=Materialized.as_("sums")
        .with_key_serde(serdes.String())
        .with_value_serde(serdes.Long()),
    ).to_stream().to(config["app.chaos.sums"], key_serde=serdes.String(), value_serde=serdes.Long())
    return b


def complex_(config: dict[str, Any]) -> Any:
    """Kafka's EOS "complex" client, in this engine's terms: a stream-table left join
    (``chaos.input`` with the table ``chaos.table``, co-partitioned) written to
    ``chaos.joined``, and a re-key through a repartition topic into a tumbling-window count
    per group written to ``chaos.windowed`` as ``g<n>@<window start>`` -> count."""
    from streaming import StreamsBuilder, TimeWindows, serdes

    b = StreamsBuilder()
    table = b.table(
        config["app.chaos.table"],
        key_serde=serdes.String(),
        value_serde=serdes.String(),
        materialized="regions",
    )
    s = b.stream(config["app.chaos.input"], key_serde=serdes.String(), value_serde=serdes.String())
    s.left_join(table, lambda v, region: f"{v}:{region}").to(
        config["app.chaos.joined"], key_serde=serdes.String(), value_serde=serdes.String()
    )
    (
        s.select_key(lambda _k, v: f"g{int(v) % GROUPS}")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(WINDOW_MS, WINDOW_GRACE))
        .count(materialized="window-counts")
        .to_stream()
        .map(lambda wk, c: (f"{wk.key}@{wk.window.start}", c))
        .to(config["app.chaos.windowed"], key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return b


def standby(config: dict[str, Any]) -> Any:
    """Kafka's ``StreamsStandByReplicaTest``: the same per-key count in an in-memory and in a
    persistent store, each written to its sink (``chaos.sink1``, ``chaos.sink2``)."""
    from streaming import StreamsBuilder, serdes
    from streaming.dsl.options import Materialized

    b = StreamsBuilder()
    s = b.stream(config["app.chaos.input"], key_serde=serdes.String(), value_serde=serdes.String())
    grouped = s.group_by_key()
    grouped.count(materialized=Materialized.as_("in-memory-counts").in_memory()).to_stream().to(
        config["app.chaos.sink1"], key_serde=serdes.String(), value_serde=serdes.Long()
    )
    grouped.count(materialized="persistent-counts").to_stream().to(
        config["app.chaos.sink2"], key_serde=serdes.String(), value_serde=serdes.Long()
    )
    return b


TOPOLOGIES = {"simple": simple, "complex": complex_, "standby": standby}


# ---------------------------------------------------------------------------- the runner


class EventLog:
    """Appends one JSON object per line, written with one ``os.write`` (whole lines survive
    a SIGKILL) and thread-safe."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps(
            {"t": time.time(), "pid": os.getpid(), "ev": event, **fields}, default=str
        )
        with self._lock:
            os.write(self._fd, (line + "\n").encode())


class RestoreEvents:
    """A ``StateRestoreListener`` that writes restore events."""

    def __init__(self, events: EventLog) -> None:
        self.events = events

    def on_restore_start(self, tp: Any, store: str, start: int, end: int) -> None:
        self.events.write(
            "restore_start",
            topic=tp.topic,
            partition=tp.partition,
            store=store,
            start=start,
            end=end,
        )

    def on_restore_end(self, tp: Any, store: str, total: int) -> None:
        self.events.write(
            "restore_end", topic=tp.topic, partition=tp.partition, store=store, restored=total
        )


def _metrics(app: Any) -> dict[str, Any]:
    m = app.metrics()
    keys = (
        "state",
        "threads",
        "tasks",
        "standby-tasks",
        "process-total",
        "commit-total",
        "rebalance-total",
        "aborted-transactions-total",
        "restore-records-total",
        "consumer-lag-max",
    )
    return {k.replace("-", "_"): m.get(k) for k in keys}


def main(argv: list[str] | None = None) -> int:
    # a native crash (librdkafka assertion, RocksDB) prints every thread's Python stack
    faulthandler.enable()
    stop = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    parser = argparse.ArgumentParser(prog="chaos_app")
    parser.add_argument("--topology", required=True, choices=sorted(TOPOLOGIES))
    parser.add_argument("--events", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--close-timeout", type=float, default=30.0)
    parser.add_argument("--metrics-interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stdout,
        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s",
    )
    logging.getLogger("streaming.runtime.librdkafka").setLevel(logging.WARNING)
    config: dict[str, Any] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set expects key=value, got {item!r}")
        config[key.strip()] = value.strip()

    events = EventLog(args.events)
    events.write("start", topology=args.topology, config=config)
    from streaming.app import KafkaStreams, State
    from streaming.runtime.errors import StreamThreadExceptionResponse

    app = KafkaStreams(TOPOLOGIES[args.topology](config), config)
    app.set_state_listener(lambda new, old: events.write("state", new=new.name, old=old.name))

    def on_thread_error(exc: BaseException) -> Any:
        events.write(
            "thread_error",
            thread=threading.current_thread().name,
            error=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc)),
        )
        return StreamThreadExceptionResponse.SHUTDOWN_CLIENT  # Kafka's default

    app.set_uncaught_exception_handler(on_thread_error)
    app.set_global_state_restore_listener(RestoreEvents(events))
    if stop.is_set():
        events.write("closed", state=app.state.name, clean=True)
        return 0
    try:
        app.start()
    except BaseException as exc:
        events.write(
            "start_failed",
            error=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc)),
        )
        raise
    events.write("started", process_id=app.process_id)
    last = 0.0
    while not stop.is_set() and app.state not in (State.ERROR, State.NOT_RUNNING):
        now = time.monotonic()
        if now - last >= args.metrics_interval:
            last = now
            try:
                events.write("metrics", **_metrics(app))
            except Exception as exc:  # the runtime is mid-rebalance; next time
                events.write("metrics_failed", error=repr(exc))
        stop.wait(0.1)
    with_error = app.state in (State.ERROR, State.PENDING_ERROR)
    began = time.monotonic()
    clean = app.close(timeout=args.close_timeout)
    with contextlib.suppress(Exception):
        events.write("metrics", **_metrics(app))
    lingering = [
        t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()
    ]
    events.write(
        "closed",
        state=app.state.name,
        clean=clean,
        seconds=round(time.monotonic() - began, 2),
        threads_alive=lingering,
    )
    if not clean:
        # what close() is waiting for, in the log
        faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
    if with_error or app.state is State.ERROR:
        print("application stopped with an error; see the log", file=sys.stderr)
        return 1
    return 0 if clean else 3


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # exit even if a thread of the runtime still runs (the "closed" event lists them)
    os._exit(code)
