"""The chaos suite's harness: sizes, the input feeder, application child processes, broker
faults, the verifier and the figures every scenario prints (this module holds no tests).

- ``sizes(variant)``: the knobs of a scenario, small for the default ``make test`` and set
  by ``CHAOS_SCALE`` (``small`` | ``full``) plus ``CHAOS_*`` overrides for the
  ``chaos``-marked variants (``make test-chaos`` sets ``CHAOS_SCALE=full``).
- ``Feeder``: a background idempotent producer of numbered records (key ``k<n>``, value the
  sequence number, timestamp the wall clock) at a fixed rate, bounded in count and time,
  that survives broker outages (it buffers and retries for 10 minutes).
- ``ChaosApp``: one application instance, run as a child process (``chaos_app``) that can
  be stopped (SIGTERM), killed (SIGKILL) and restarted on the same ``state.dir``; it reads
  the instance's event file (state changes, thread errors, restores, metrics).
- ``bounce`` / ``Fault``: stop (clean or SIGKILL) and restart a broker, timed.
- ``read_input`` / ``read_output``: the ground truth is what the input topic holds; the
  outputs are read ``read_committed``. Sink topics use ``LogAppendTime``, so their
  timestamps say when each output was written: the longest output gap and the time from a
  broker's return to the first new output come from them.
- ``OutputWatch``: tails an output topic while faults happen, to wait for the first
  committed output after a broker came back.
- ``CheckpointWatcher`` / ``offset_regressions``: polls the ``.checkpoint`` files under each
  instance's ``state.dir``; with the restore starts of the event files, offsets must never
  go back (Kafka's ``validateMonotonicCheckpoints``).
- ``verify_*``: duplicates, missing records, exact aggregates, ordered series per key.
- ``Figures``: what a scenario measured; ``Figures.finish()`` prints them (also collected
  for the terminal summary by ``conftest.py``) and fails the test with every violation and
  the application's stack traces. ``run_scenario`` runs the fault steps, then verifies
  whatever happened (an aborted scenario still reports what reached the outputs), cleans
  up (apps killed, brokers restarted, topics deleted) and finishes.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from streaming.runtime.partitioner import default_partition
from streaming.testing.kafka_cluster import KafkaClusterError, _die_with_parent_hook

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: figures of every scenario run in this session (printed by conftest's terminal summary)
FIGURES: list[Figures] = []


# ------------------------------------------------------------------------------ sizes


@dataclass(frozen=True)
class Sizes:
    """The knobs of a scenario run."""

    scale: str
    #: input records per second while a scenario feeds
    rate: int
    #: bounces per broker role (streams_broker_bounce)
    bounces: int
    #: seconds two of three brokers stay down (streams_broker_bounce)
    two_down_s: float
    #: kill -9 rounds (streams_eos failure_and_recovery)
    kill_rounds: int
    #: start/stop transitions (streams_standby_replica; Kafka's test has 11)
    standby_transitions: int
    #: seconds to wait for the outputs to be complete after the input stopped
    complete_timeout_s: float
    #: the application must produce new output within this many seconds of a broker's return
    recover_limit_s: float


_SMALL = Sizes("small", 100, 1, 8.0, 1, 6, 90.0, 30.0)
_FULL = Sizes("full", 150, 5, 20.0, 3, 11, 120.0, 30.0)


def sizes(variant: str) -> Sizes:
    """``small`` for the default-run variants; for ``chaos`` variants the scale named by
    ``CHAOS_SCALE`` (default small), each knob overridable (``CHAOS_RATE``,
    ``CHAOS_BOUNCES``, ``CHAOS_TWO_DOWN_S``, ``CHAOS_KILL_ROUNDS``,
    ``CHAOS_STANDBY_TRANSITIONS``, ``CHAOS_COMPLETE_TIMEOUT_S``, ``CHAOS_RECOVER_LIMIT_S``)."""
    if variant == "small":
        base = _SMALL
    else:
        scale = os.environ.get("CHAOS_SCALE", "small").lower()
        if scale not in ("small", "full"):
            raise ValueError(f"CHAOS_SCALE must be small or full, got {scale!r}")
        base = _FULL if scale == "full" else _SMALL
        overrides: dict[str, Any] = {}
        for name, typ in (
            ("rate", int),
            ("bounces", int),
            ("two_down_s", float),
            ("kill_rounds", int),
            ("standby_transitions", int),
            ("complete_timeout_s", float),
            ("recover_limit_s", float),
        ):
            raw = os.environ.get(f"CHAOS_{name.upper()}")
            if raw:
                overrides[name] = typ(raw)
        if overrides:
            base = Sizes(**{**base.__dict__, **overrides})
    return base


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def pick_keys(partitions: int, per_partition: int = 3) -> list[str]:
    """Keys ``k<n>`` such that every partition (murmur2, as the producer and Kafka Streams
    partition) gets ``per_partition`` of them."""
    chosen: dict[int, list[str]] = defaultdict(list)
    n = 0
    while any(len(chosen[p]) < per_partition for p in range(partitions)) and n < 10_000:
        key = f"k{n}"
        p = default_partition(key.encode(), partitions)
        if len(chosen[p]) < per_partition:
            chosen[p].append(key)
        n += 1
    return sorted((k for ks in chosen.values() for k in ks), key=lambda k: int(k[1:]))


def create_topics(
    cluster: Any,
    *,
    sources: Iterable[str] = (),
    sinks: Iterable[str] = (),
    partitions: int,
    config: dict[str, Any] | None = None,
) -> None:
    """Sources as given; sinks with ``LogAppendTime`` (their timestamps are write times)."""
    for name in sources:
        cluster.create_topic(name, partitions=partitions, config=config)
    for name in sinks:
        cluster.create_topic(
            name,
            partitions=partitions,
            config={**(config or {}), "message.timestamp.type": "LogAppendTime"},
        )


# ------------------------------------------------------------------------------ input


class Feeder(threading.Thread):
    """Produces record ``i`` (key ``keys[i % len(keys)]``, value ``str(i)``, timestamp the
    wall clock) at ``rate`` per second until stopped, ``max_records`` or ``max_seconds``.

    The producer is idempotent with ``acks=all`` (no duplicate in the input, whatever the
    brokers do) and retries for 10 minutes; a fatal producer error replaces the producer
    and goes on with the next number (the input topic is the ground truth anyway)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        keys: Sequence[str],
        *,
        rate: int,
        max_records: int = 1_000_000,
        max_seconds: float = 1_800.0,
    ) -> None:
        super().__init__(name=f"feeder-{topic}", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.keys = list(keys)
        self.rate = rate
        self.max_records = max_records
        self.max_seconds = max_seconds
        self.produced = 0
        self.delivered = 0
        self.failed: Counter[str] = Counter()
        self.replaced_producers = 0
        self.first_wall: float | None = None
        self.last_wall: float | None = None
        self.unflushed = 0
        #: seconds the last records took to be acknowledged once the feeder stopped
        self.flush_s = 0.0
        self._stop_event = threading.Event()
        self._fatal = threading.Event()
        self._lock = threading.Lock()

    def _producer(self) -> Producer:
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 600_000,
                "reconnect.backoff.max.ms": 500,
                "partitioner": "murmur2_random",
                "logger": _QUIET_LOGGER,
            }
        )

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        with self._lock:
            if err is None:
                self.delivered += 1
            else:
                self.failed[str(err.name())] += 1
                if err.fatal():
                    self._fatal.set()

    def run(self) -> None:
        producer = self._producer()
        began = time.monotonic()
        i = 0
        try:
            while (
                not self._stop_event.is_set()
                and i < self.max_records
                and time.monotonic() - began < self.max_seconds
            ):
                due = began + i / self.rate
                delay = due - time.monotonic()
                if delay > 0:
                    self._stop_event.wait(min(delay, 0.1))
                    producer.poll(0)
                    continue
                if self._fatal.is_set():
                    with contextlib.suppress(Exception):
                        producer.flush(5)
                    producer = self._producer()
                    self.replaced_producers += 1
                    self._fatal.clear()
                now = time.time()
                try:
                    producer.produce(
                        self.topic,
                        key=self.keys[i % len(self.keys)].encode(),
                        value=str(i).encode(),
                        timestamp=int(now * 1000),
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    producer.poll(0.1)
                    continue
                except KafkaException as exc:
                    self.failed[f"produce: {exc}"] += 1
                    self._fatal.set()
                    continue
                if self.first_wall is None:
                    self.first_wall = now
                self.last_wall = now
                self.produced += 1
                i += 1
                producer.poll(0)
        finally:
            flushing = time.monotonic()
            self.unflushed = producer.flush(120)
            self.flush_s = time.monotonic() - flushing

    def stop(self, timeout: float = 150.0) -> None:
        """Stop producing and wait for the records in flight (bounded)."""
        self._stop_event.set()
        if self.ident is not None:
            self.join(timeout)

    def summary(self) -> str:
        failed = dict(self.failed)
        return (
            f"produced {self.produced}, acknowledged {self.delivered}"
            + (f", failed {failed}" if failed else "")
            + (f", producer replaced {self.replaced_producers}x" if self.replaced_producers else "")
            + (f", unflushed {self.unflushed}" if self.unflushed else "")
            + (f", flushed in {self.flush_s:.0f}s" if self.flush_s >= 5 else "")
        )


#: librdkafka's complaints of the harness's own clients during outages are expected noise
_QUIET_LOGGER = logging.getLogger("chaos.harness.librdkafka")
_QUIET_LOGGER.addHandler(logging.NullHandler())
_QUIET_LOGGER.propagate = False


# ------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Rec:
    topic: str
    partition: int
    offset: int
    key: str | None
    value: bytes | None
    ts: int
    ts_type: int


def _consumer(bootstrap: str, committed: bool) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("chaos-reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "reconnect.backoff.max.ms": 500,
            "logger": _QUIET_LOGGER,
        }
    )


def _rec(msg: Any) -> Rec:
    ts_type, ts = msg.timestamp()
    key = msg.key()
    return Rec(
        msg.topic(),
        msg.partition(),
        msg.offset(),
        None if key is None else key.decode(),
        msg.value(),
        ts,
        ts_type,
    )


def read_input(bootstrap: str, topic: str, *, timeout: float = 60.0) -> list[Rec]:
    """Every record of ``topic`` up to its current end offsets."""
    consumer = _consumer(bootstrap, committed=False)
    try:
        meta = consumer.list_topics(topic, timeout=10)
        ends = {}
        for p in meta.topics[topic].partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends if ends[p]])
        out: list[Rec] = []
        pending = {p for p, high in ends.items() if high > 0}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(msg.error())
                    continue
                if msg.offset() < ends[msg.partition()]:
                    out.append(_rec(msg))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    pending.discard(msg.partition())
        if pending:
            raise AssertionError(f"could not read {topic} partitions {sorted(pending)} to the end")
        return out
    finally:
        consumer.close()


def read_output(
    bootstrap: str,
    topics: Sequence[str],
    *,
    complete: Callable[[list[Rec]], bool],
    timeout: float,
    quiet_s: float = 15.0,
    linger_s: float = 1.5,
) -> tuple[list[Rec], str]:
    """Read ``topics`` (read_committed) from the beginning until ``complete(records)``
    (then ``linger_s`` more, to see duplicates arriving late), until nothing new arrived
    for ``quiet_s``, or ``timeout``. Returns the records and why reading ended."""
    consumer = _consumer(bootstrap, committed=True)
    try:
        meta = consumer.list_topics(timeout=10)
        consumer.assign(
            [
                TopicPartition(t, p, OFFSET_BEGINNING)
                for t in topics
                for p in sorted(meta.topics[t].partitions)
            ]
        )
        out: list[Rec] = []
        began = time.monotonic()
        last_new = began
        done_at: float | None = None
        reason = "timeout"
        while True:
            now = time.monotonic()
            if done_at is not None and now - done_at >= linger_s:
                reason = "complete"
                break
            if now - began >= timeout:
                break
            if done_at is None and now - last_new >= quiet_s:
                reason = f"no new output for {quiet_s:.0f}s"
                break
            msgs = consumer.consume(num_messages=2000, timeout=0.3)
            for msg in msgs:
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(msg.error())
                    continue
                out.append(_rec(msg))
                last_new = time.monotonic()
            if done_at is None and complete(out):
                done_at = time.monotonic()
        return out, reason
    finally:
        consumer.close()


class OutputWatch(threading.Thread):
    """Tails an output topic ``read_committed`` while a scenario runs and records when each
    committed record was written (its ``LogAppendTime``), so that a scenario can wait for
    the application's first committed output after a fault.

    ``restart()`` reads the topic again from the start with a new consumer: the watcher is
    an instrument, and a client of its own that stopped fetching after a broker restart
    must not pass for an application that stopped writing."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name=f"watch-{topic}", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.append_times: list[float] = []
        self.restarts = 0
        self._stop_event = threading.Event()
        self._restart_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self._restart_event.clear()
            consumer = _consumer(self.bootstrap, committed=True)
            try:
                meta = consumer.list_topics(self.topic, timeout=10)
                consumer.assign(
                    [
                        TopicPartition(self.topic, p, OFFSET_BEGINNING)
                        for p in meta.topics[self.topic].partitions
                    ]
                )
                while not (self._stop_event.is_set() or self._restart_event.is_set()):
                    for msg in consumer.consume(num_messages=1000, timeout=0.2):
                        if msg.error() is None:
                            with self._lock:
                                self.append_times.append(msg.timestamp()[1] / 1000)
            finally:
                consumer.close()

    def restart(self) -> None:
        """Read the topic again from its start with a new consumer."""
        self.restarts += 1
        self._restart_event.set()

    def first_after(self, t: float) -> float | None:
        with self._lock:
            later = [x for x in self.append_times if x >= t]
        return min(later) if later else None

    def wait_after(self, t: float, timeout: float, app: ChaosApp | None = None) -> float:
        """Seconds from ``t`` to the first committed output written after it; raises
        ``AssertionError`` after ``timeout`` (``AppDied`` as soon as ``app`` died)."""
        deadline = time.monotonic() + timeout
        while True:
            first = self.first_after(t)
            if first is not None:
                return first - t
            if app is not None:
                app.check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no committed output in {self.topic} within {timeout:.0f}s after {_clock(t)}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop_event.set()
        if self.ident is not None:
            self.join(10)


def write_table(bootstrap: str, topic: str, rows: dict[str, str], ts_ms: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "logger": _QUIET_LOGGER,
        }
    )
    for key, value in rows.items():
        producer.produce(topic, key=key.encode(), value=value.encode(), timestamp=ts_ms)
    assert producer.flush(30) == 0, "the table records were not all written"


# ------------------------------------------------------------------------------ apps


class AppDied(AssertionError):
    """An application instance stopped by itself or reached ERROR."""


class ChaosApp:
    """One application instance run as ``python -m chaos_app`` (see chaos_app.py), restartable
    on the same ``state.dir`` like a Kafka system-test processor node."""

    def __init__(self, name: str, topology: str, settings: dict[str, Any], workdir: Path) -> None:
        self.name = name
        self.topology = topology
        self.workdir = workdir
        self.state_dir = workdir / f"{name}-state"
        self.settings = {**settings, "state.dir": str(self.state_dir)}
        self.events_path = workdir / f"{name}.events.jsonl"
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        #: (pid, how it ended: "stop" / "kill" / "exit", exit code)
        self.history: list[tuple[int, str, int | None]] = []
        self._events: list[dict[str, Any]] = []
        self._offset = 0
        self._buffer = b""

    # -- lifecycle

    def start(self) -> int:
        """Start the child process; returns the event index to wait from."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self._reap()
        mark = self.mark()
        cmd = [
            sys.executable,
            "-m",
            "chaos_app",
            "--topology",
            self.topology,
            "--events",
            str(self.events_path),
        ]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(REPO), str(HERE), env.get("PYTHONPATH")])
        )
        with self.log_path.open("ab") as out:
            out.write(f"\n===== {self.name} start {time.strftime('%H:%M:%S')} =====\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                cmd,
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent_hook(),
            )
        return mark

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def started(self) -> bool:
        """Started and neither stopped nor killed by the test (it may have died by itself:
        ``check_alive`` says so)."""
        return self.proc is not None

    def stop(self, timeout: float = 45.0) -> int | None:
        """SIGTERM (a clean close) and wait; SIGKILL after ``timeout``. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        how = "stop"
        if self._reached_error(proc.pid):
            how = "exit-after-error"  # it closes by itself; ERROR is reported already
            timeout = min(timeout, 15.0)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                how = "stop-timeout-killed"
        elif how == "stop":
            how = "exit"
        self.history.append((proc.pid, how, proc.returncode))
        self.proc = None
        return proc.returncode

    def _reached_error(self, pid: int) -> bool:
        return any(
            e["ev"] == "state" and e.get("pid") == pid and e["new"] in ("ERROR", "PENDING_ERROR")
            for e in self.events()
        )

    def kill(self) -> None:
        """SIGKILL (kill -9) and wait."""
        proc = self.proc
        if proc is None:
            return
        how = "kill"
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        else:
            how = "exit"
        self.history.append((proc.pid, how, proc.returncode))
        self.proc = None

    def _reap(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            pid = self.proc.pid
            how = "exit-after-error" if self._reached_error(pid) else "exit"
            self.history.append((pid, how, self.proc.returncode))
            self.proc = None

    # -- events

    def events(self) -> list[dict[str, Any]]:
        """Every event so far (read incrementally; a torn last line waits for the next call)."""
        try:
            with self.events_path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self._events
        self._offset += len(data)
        data = self._buffer + data
        lines = data.split(b"\n")
        self._buffer = lines.pop()
        for line in lines:
            if line.strip():
                with contextlib.suppress(ValueError):
                    self._events.append(json.loads(line))
        return self._events

    def mark(self) -> int:
        return len(self.events())

    def state(self) -> str | None:
        """The current state: the last state event of the running process."""
        if not self.running:
            return None
        assert self.proc is not None
        for ev in reversed(self.events()):
            if ev.get("pid") == self.proc.pid and ev["ev"] == "state":
                return ev["new"]
        return None

    def last_metrics(self) -> dict[str, Any] | None:
        if not self.running:
            return None
        assert self.proc is not None
        for ev in reversed(self.events()):
            if ev.get("pid") == self.proc.pid and ev["ev"] == "metrics":
                return ev
        return None

    def check_alive(self) -> None:
        """Raise ``AppDied`` if the instance exited by itself or reached (PENDING_)ERROR."""
        if self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            self._reap()
            raise AppDied(f"{self.name} exited by itself with code {code}")
        if self.state() in ("ERROR", "PENDING_ERROR"):
            raise AppDied(f"{self.name} reached {self.state()}")

    def wait_running(self, since: int, timeout: float) -> float:
        """Wait for a transition to RUNNING after event ``since`` and the instance to be
        RUNNING; returns the seconds waited."""
        began = time.monotonic()
        deadline = began + timeout
        while True:
            self.check_alive()
            evs = self.events()[since:]
            if any(e["ev"] == "state" and e["new"] == "RUNNING" for e in evs) and (
                self.state() == "RUNNING"
            ):
                return time.monotonic() - began
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name} did not reach RUNNING within {timeout:.0f}s "
                    f"(state {self.state()})"
                )
            time.sleep(0.1)

    def wait_processing(self, since: int, timeout: float, at_least: int = 1) -> None:
        """Wait until the instance processed ``at_least`` records more than it had at event
        ``since`` (Kafka's "processed N records" line)."""
        deadline = time.monotonic() + timeout
        assert self.proc is not None
        pid = self.proc.pid
        base = 0
        for ev in self.events()[:since]:
            if ev.get("pid") == pid and ev["ev"] == "metrics":
                base = ev.get("process_total") or 0
        while True:
            self.check_alive()
            for ev in self.events()[since:]:
                if (
                    ev.get("pid") == pid
                    and ev["ev"] == "metrics"
                    and (ev.get("process_total") or 0) >= base + at_least
                ):
                    return
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name} processed nothing new within {timeout:.0f}s "
                    f"(state {self.state()})"
                )
            time.sleep(0.1)

    def process_id(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in reversed(self.events()):
                if ev["ev"] == "started":
                    return ev["process_id"]
            self.check_alive()
            time.sleep(0.1)
        raise AssertionError(f"{self.name} did not start within {timeout:.0f}s")

    # -- what went wrong

    def problems(self) -> list[str]:
        """ERROR states, dead stream threads, failed starts, exits we did not cause, clean
        stops that did not exit 0."""
        self._reap()
        out = []
        for ev in self.events():
            if ev["ev"] == "state" and ev["new"] in ("ERROR", "PENDING_ERROR"):
                out.append(
                    f"{self.name} (pid {ev['pid']}) reached {ev['new']} at {_clock(ev['t'])}"
                )
            elif ev["ev"] == "thread_error":
                out.append(
                    f"{self.name} (pid {ev['pid']}) stream thread {ev.get('thread')} died at "
                    f"{_clock(ev['t'])}: {ev['error']}"
                )
            elif ev["ev"] == "start_failed":
                out.append(f"{self.name} (pid {ev['pid']}) failed to start: {ev['error']}")
        for pid, how, code in self.history:
            if how == "exit":
                out.append(f"{self.name} (pid {pid}) exited by itself with {_exit_text(code)}")
            elif how == "stop" and code != 0:
                out.append(f"{self.name} (pid {pid}) exited with {_exit_text(code)} on SIGTERM")
            elif how == "stop-timeout-killed":
                out.append(
                    f"{self.name} (pid {pid}) did not exit within 45 s of SIGTERM and was killed"
                )
        return out

    def states(self) -> str:
        """The state sequence per process, compressed: ``pid: CREATED>REBALANCING>...``."""
        per: dict[int, list[str]] = defaultdict(list)
        for ev in self.events():
            if ev["ev"] == "state":
                per[ev["pid"]].append(ev["new"])
        parts = []
        for pid, seq in per.items():
            compact: list[str] = []
            for s in seq:
                if compact and compact[-1].split("x")[0] == s:
                    base, _, n = compact[-1].partition("x")
                    compact[-1] = f"{base}x{int(n or 1) + 1}"
                else:
                    compact.append(s)
            parts.append(f"{pid}: " + ">".join(compact))
        return "; ".join(parts)

    def tracebacks(self, limit: int = 3, lines: int = 30) -> list[str]:
        """Stack traces: those of dead stream threads first, then those in the log."""
        found: list[str] = []
        for ev in self.events():
            if ev["ev"] in ("thread_error", "start_failed") and ev.get("traceback"):
                found.append(ev["traceback"].rstrip())
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            text = ""
        for block in _log_tracebacks(text):
            if not any(block.splitlines()[-1] in f for f in found):
                found.append(block)
        out = []
        for tb in found[:limit]:
            tb_lines = tb.splitlines()
            if len(tb_lines) > lines:
                tb_lines = [*tb_lines[:6], "  ...", *tb_lines[-(lines - 7) :]]
            out.append("\n".join(tb_lines))
        return out

    def error_lines(self, limit: int = 8) -> list[str]:
        """Native crashes, then the runtime's ERROR / WARNING log lines (distinct ones)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        crashes: dict[str, str] = {}
        seen: dict[str, str] = {}
        for line in text.splitlines():
            if re.search(r"Assertion .* failed|Fatal Python error|Segmentation fault", line):
                crashes.setdefault(line, f"native crash: {line[:300]}")
                continue
            m = re.match(r"\S+ \S+ (ERROR|WARNING) (\S+) (\S+): (.*)", line)
            if m and "librdkafka" not in m.group(3):
                msg = re.sub(r"\d+", "N", m.group(4))[:160]
                seen.setdefault(msg, line[:300])
        return [*crashes.values(), *seen.values()][:limit]


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    meaning = {1: " (the application ended in ERROR)", 3: " (close() did not finish in time)"}
    return f"code {code}{meaning.get(code, '')}"


def _log_tracebacks(text: str) -> list[str]:
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("Traceback (most recent call last):"):
            j = i + 1
            while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
                j += 1
            # the exception line, and chained tracebacks
            while j < len(lines) and not re.match(r"\d{4}-\d\d-\d\d ", lines[j]):
                j += 1
            header = lines[i - 1] if i > 0 else ""
            blocks.append("\n".join([header, *lines[i:j]]).strip())
            i = j
        else:
            i += 1
    return blocks


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def run_scenario(
    fig: Figures,
    steps: Callable[[], None],
    verify: Callable[[bool], None],
    cleanup: Callable[[], None],
    *,
    finish: bool = True,
) -> None:
    """Run the fault ``steps``; then ``verify(aborted)`` whatever happened (a scenario that
    aborted still reports what reached the outputs), ``cleanup()``, and ``fig.finish()``
    (unless ``finish`` is False: the caller finishes, e.g. after parallel scenarios)."""
    aborted = False
    began = time.monotonic()
    phases: list[str] = []
    try:
        steps()
    except Exception as exc:
        aborted = True
        frames = traceback.extract_tb(exc.__traceback__)
        where = " <- ".join(
            f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[::-1][:4]
        )
        fig.violations.append(f"scenario aborted: {type(exc).__name__}: {exc} (at {where})")
    phases.append(f"faults {time.monotonic() - began:.0f}s")
    began = time.monotonic()
    try:
        verify(aborted)
    except Exception as exc:
        fig.violations.append(f"verification failed: {type(exc).__name__}: {exc}")
    finally:
        phases.append(f"verification {time.monotonic() - began:.0f}s")
        began = time.monotonic()
        cleanup()
        phases.append(f"cleanup {time.monotonic() - began:.0f}s")
    fig.notes.append("phases: " + ", ".join(phases))
    fig.duration_s = time.monotonic() - fig.began
    if finish:
        fig.finish()


def stop_all(apps: Iterable[ChaosApp], *, kill: bool = False) -> None:
    for app in apps:
        with contextlib.suppress(Exception):
            if kill:
                app.kill()
            else:
                app.stop(timeout=60)


# ------------------------------------------------------------------------------ broker faults


@dataclass
class Fault:
    """One broker fault: what, which node, when it began and when the broker was back."""

    label: str
    nodes: tuple[int, ...]
    began: float
    ready: float | None = None
    replicated_s: float | None = None
    note: str = ""
    #: seconds: the stop itself, until the cluster fenced the node, the restart
    phases: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        down = f"{self.ready - self.began:.1f}s" if self.ready else "not back"
        rep = f", ISR full +{self.replicated_s:.1f}s" if self.replicated_s is not None else ""
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in self.phases.items())
        return (
            f"{self.label} node {','.join(map(str, self.nodes))} at {_clock(self.began)} "
            f"(down {down}: {phases}{rep}){self.note}"
        )


def bounce(
    cluster: Any,
    nodes: Sequence[int],
    *,
    hard: bool,
    label: str,
    down_s: float = 0.0,
    wait_replicated: bool = True,
) -> Fault:
    """Stop ``nodes`` (SIGTERM with controlled shutdown, or SIGKILL), keep them down
    ``down_s`` (after a SIGKILL at least until the cluster fenced them, as Kafka's test
    waits for deregistration), restart them, and wait for every partition to be fully
    replicated again."""
    fault = Fault(label, tuple(nodes), time.time())
    t0 = time.monotonic()
    for node in nodes:
        cluster.stop_node(node, kill=hard, timeout=10.0)
    stopped = time.monotonic()
    fault.phases["stop"] = stopped - t0
    if hard and len(cluster.nodes) > 1 and len(nodes) < len(cluster.nodes) - 1:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if not set(nodes) & cluster.registered_brokers():
                    break
            except Exception:
                pass
            time.sleep(0.2)
        else:
            fault.note += " (still registered after 30s)"
        fault.phases["fenced"] = time.monotonic() - stopped
    remaining = down_s - (time.monotonic() - stopped)
    if remaining > 0:
        time.sleep(remaining)
    t1 = time.monotonic()
    for node in nodes:
        fault.note += _restart(cluster, node)
    fault.ready = time.time()
    fault.phases["restart"] = time.monotonic() - t1
    if wait_replicated and len(cluster.nodes) > 1:
        try:
            fault.replicated_s = cluster.wait_fully_replicated(timeout=90)
        except Exception as exc:
            fault.note += f" (ISR not full: {exc})"
    return fault


def _restart(cluster: Any, node: int, first_try_s: float = 60.0) -> str:
    """Restart ``node``; a JVM that does not answer within ``first_try_s`` is killed and
    started once more (the fault under test is the bounce, not a stuck JVM launch).
    Returns a note for the fault's description ("" when the first start answered)."""
    log = cluster.node(node).log_path
    logged_before = log.stat().st_size if log.exists() else 0
    try:
        cluster.restart_node(node, timeout=first_try_s)
        return ""
    except KafkaClusterError:
        wrote = log.stat().st_size - logged_before if log.exists() else 0
        stuck = _process_state(cluster.node(node).pid)
        cluster.stop_node(node, kill=True)
    cluster.restart_node(node)
    return (
        f" (restarted node {node} did not answer in {first_try_s:.0f}s, having logged "
        f"{wrote} bytes, {stuck}; killed and started again)"
    )


def _process_state(pid: int | None) -> str:
    """Where a process is: its state, threads and kernel wait channel (from /proc)."""
    if pid is None:
        return "no process"
    try:
        status = dict(
            line.split(":\t", 1)
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ":\t" in line
        )
        wchan = Path(f"/proc/{pid}/wchan").read_text() or "-"
        cpu = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (
            f"state {status.get('State', '?').strip()}, {status.get('Threads', '?').strip()} "
            f"threads, wchan {wchan}, utime+stime {int(cpu[11]) + int(cpu[12])} ticks"
        )
    except (OSError, IndexError, ValueError) as exc:
        return f"state unknown ({exc})"


def drop_topics(cluster: Any, names: Iterable[str], app_ids: Iterable[str] = ()) -> None:
    """Delete a scenario's topics and its applications' internal topics (a lean cluster
    restarts and elects leaders faster); failures are ignored."""
    with contextlib.suppress(Exception):
        prefixes = tuple(f"{a}-" for a in app_ids)
        doomed = set(names) | {
            t for t in cluster.list_topics() if prefixes and t.startswith(prefixes)
        }
        if doomed:
            # one request for every topic: its answers arrive together, so they are waited
            # for together (30 s in all, not 30 s per topic), the client kept meanwhile
            admin = cluster.admin()
            futures = admin.delete_topics(sorted(doomed), operation_timeout=30)
            concurrent.futures.wait(list(futures.values()), timeout=35)


def ensure_nodes_up(cluster: Any) -> None:
    """Restart any stopped node (so that the module's cluster stays usable)."""
    for node in cluster.nodes:
        if not node.is_running():
            cluster.restart_node(node.node_id)
    if len(cluster.nodes) > 1:
        cluster.wait_fully_replicated(timeout=90)


# ------------------------------------------------------------------------------ checkpoints


class CheckpointWatcher(threading.Thread):
    """Polls the ``.checkpoint`` files under each instance's ``state.dir`` (Kafka's
    ``OffsetCheckpoint`` text format) and records every new offset it sees."""

    def __init__(self, state_dirs: dict[str, Path], interval: float = 0.25) -> None:
        super().__init__(name="checkpoint-watcher", daemon=True)
        self.state_dirs = state_dirs
        self.interval = interval
        #: (time, instance, task, topic, partition, offset)
        self.seen: list[tuple[float, str, str, str, int, int]] = []
        self._last: dict[tuple[str, str, str, int], int] = {}
        self._stop_event = threading.Event()
        self.files_read = 0

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.poll()
            self._stop_event.wait(self.interval)

    def poll(self) -> None:
        for name, root in self.state_dirs.items():
            for path in root.glob("*/*/.checkpoint"):
                offsets = _read_checkpoint(path)
                if offsets is None:
                    continue
                self.files_read += 1
                task = path.parent.name
                now = time.time()
                for (topic, partition), offset in offsets.items():
                    key = (name, task, topic, partition)
                    if self._last.get(key) != offset:
                        self._last[key] = offset
                        self.seen.append((now, name, task, topic, partition, offset))

    def stop(self) -> None:
        self._stop_event.set()
        if self.ident is not None:
            self.join(10)
        self.poll()


def _read_checkpoint(path: Path) -> dict[tuple[str, int], int] | None:
    try:
        lines = path.read_text().split("\n")
        if lines[0].strip() != "0":
            return None
        count = int(lines[1])
        out = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        return out if len(out) == count else None
    except (OSError, ValueError, IndexError):
        return None


def offset_regressions(watcher: CheckpointWatcher, apps: Sequence[ChaosApp]) -> list[str]:
    """Kafka's ``validateMonotonicCheckpoints``: per instance and changelog partition, the
    offsets written to checkpoint files and the offsets restoration starts from never
    decrease."""
    series: dict[tuple[str, str, int], list[tuple[float, int, str]]] = defaultdict(list)
    for t, name, _task, topic, partition, offset in watcher.seen:
        series[(name, topic, partition)].append((t, offset, "checkpoint"))
    stores: dict[str, str] = {}
    for app in apps:
        for ev in app.events():
            if ev["ev"] == "restore_start":
                stores[ev["topic"]] = ev["store"]
                series[(app.name, ev["topic"], ev["partition"])].append(
                    (ev["t"], ev["start"], "restore start")
                )
    out = []
    for (name, topic, partition), obs in sorted(series.items()):
        obs.sort(key=lambda o: o[0])
        for prev, cur in pairwise(obs):
            if cur[1] < prev[1]:
                store = f" (store {stores[topic]})" if topic in stores else ""
                out.append(
                    f"{name} {topic}-{partition}{store}: {prev[2]} {prev[1]} at "
                    f"{_clock(prev[0])} then {cur[2]} {cur[1]} at {_clock(cur[0])}"
                )
    return out


# ------------------------------------------------------------------------------ figures


@dataclass
class Figures:
    """What one scenario measured, and what it violated."""

    scenario: str
    scale: str
    records_in: int = 0
    records_out: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    missing: int = 0
    unexpected: int = 0
    aggregates: dict[str, str] = field(default_factory=dict)
    longest_gap_s: float | None = None
    recoveries: list[tuple[str, float | None]] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    instances: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)
    error_lines: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    began: float = field(default_factory=time.monotonic)
    #: the scenario's directory (application logs and event files)
    workdir: Path | None = None

    def add_apps(self, apps: Sequence[ChaosApp]) -> None:
        for app in apps:
            self.instances[app.name] = app.states() or "(no state change)"
            self.problems.extend(app.problems())
            self.tracebacks.extend(f"[{app.name}] {tb}" for tb in app.tracebacks())
            self.error_lines.extend(f"[{app.name}] {line}" for line in app.error_lines())

    def _keep_logs(self) -> None:
        """With ``CHAOS_LOG_DIR`` set, copy the logs and event files there (pytest keeps only
        its last few temporary directories)."""
        keep = os.environ.get("CHAOS_LOG_DIR")
        if not keep or self.workdir is None:
            return
        dest = Path(keep) / re.sub(r"[^\w.-]+", "_", self.scenario)
        dest.mkdir(parents=True, exist_ok=True)
        for path in self.workdir.iterdir():
            if path.suffix in (".log", ".jsonl"):
                shutil.copy2(path, dest / path.name)
        self.notes.append(f"logs kept in {dest}")

    def render(self, brief: bool = False) -> str:
        out = [f"=== {self.scenario} (scale {self.scale}, {self.duration_s:.0f}s) ==="]
        outs = ", ".join(f"{t} {n}" for t, n in self.records_out.items())
        out.append(
            f"  records in {self.records_in}; out: {outs}; duplicates {self.duplicates}, "
            f"missing {self.missing}, unexpected {self.unexpected}"
        )
        for name, text in self.aggregates.items():
            out.append(f"  aggregate {name}: {text}")
        gap = "n/a" if self.longest_gap_s is None else f"{self.longest_gap_s:.2f}s"
        out.append(f"  longest output gap {gap}")
        if self.recoveries:
            rec = ", ".join(
                f"{label} {'never' if s is None else f'{s:.2f}s'}" for label, s in self.recoveries
            )
            out.append(f"  time to first new output after the broker was back: {rec}")
        for fault in self.faults:
            out.append(f"  fault: {fault}")
        for name, states in self.instances.items():
            out.append(f"  {name} states: {states}")
        for note in self.notes:
            out.append(f"  {note}")
        verdict = "PASS" if not (self.problems or self.violations) else "FAIL"
        out.append(f"  verdict {verdict}")
        for p in self.problems:
            out.append(f"  PROBLEM: {p}")
        for v in self.violations:
            out.append(f"  VIOLATION: {v}")
        if brief:
            return "\n".join(out)
        for line in self.error_lines[:12]:
            out.append(f"  log: {line}")
        for tb in self.tracebacks[:4]:
            out.append("  trace:\n" + "\n".join("    " + line for line in tb.splitlines()))
        return "\n".join(out)

    @property
    def failed(self) -> bool:
        return bool(self.problems or self.violations)

    def finish(self, *, raise_on_failure: bool = True) -> None:
        """Print, record for the terminal summary, and fail on any problem or violation."""
        if not self.duration_s:
            self.duration_s = time.monotonic() - self.began
        self._keep_logs()
        text = self.render()
        print(text)
        FIGURES.append(self)
        report = os.environ.get("CHAOS_REPORT")
        if report:
            with open(report, "a") as f:
                f.write(text + "\n")
        if raise_on_failure and self.failed:
            raise AssertionError(text)


# ------------------------------------------------------------------------------ verification


def _seq(r: Rec) -> int:
    """The sequence number the feeder wrote into an input record."""
    return int(r.value or b"-1")


def input_truth(records: list[Rec], fig: Figures) -> list[Rec]:
    """Every input record (the ground truth). The feeder's producer is idempotent, yet a
    broker bounce can make librdkafka write a record twice: such an input duplicate is
    two input records, each expected once in the outputs, and is noted."""
    fig.records_in = len(records)
    twice = sorted(v for v, c in Counter(_seq(r) for r in records).items() if c > 1)
    if twice:
        fig.notes.append(
            f"the input topic holds {len(twice)} values twice (written twice by the feeder's "
            f"idempotent producer during a broker fault: {twice[:5]}); each copy counts as "
            "an input record"
        )
    return records


def check_copy(
    fig: Figures, truth: list[Rec], out: list[Rec], topic: str, parse: Callable[[Rec], int]
) -> None:
    """Every input record exactly once in ``topic``."""
    expected = Counter(_seq(r) for r in truth)
    seen = Counter(parse(r) for r in out if r.topic == topic)
    fig.records_out[topic.rsplit("-", 1)[0]] = sum(seen.values())
    dups = {v: c - expected[v] for v, c in seen.items() if v in expected and c > expected[v]}
    missing = {v: c - seen[v] for v, c in expected.items() if seen[v] < c}
    unexpected = sorted(v for v in seen if v not in expected)
    fig.duplicates += sum(dups.values())
    fig.missing += sum(missing.values())
    fig.unexpected += sum(seen[v] for v in unexpected)
    if dups:
        fig.violations.append(
            f"{len(dups)} input records more than once in {topic}: {sorted(dups)[:10]}"
        )
    if missing:
        fig.violations.append(
            f"{len(missing)} input records missing from {topic}: {sorted(missing)[:10]}"
        )
    if unexpected:
        fig.violations.append(
            f"{len(unexpected)} records in {topic} were never input: {unexpected[:10]}"
        )


def _all_copied(truth: list[Rec], out: list[Rec], topic: str, parse: Callable[[Rec], int]) -> bool:
    expected = Counter(_seq(r) for r in truth)
    seen = Counter(parse(r) for r in out if r.topic == topic)
    return all(seen[v] >= c for v, c in expected.items())


def check_aggregate(
    fig: Figures,
    name: str,
    out: list[Rec],
    topic: str,
    expected: dict[str, int],
    *,
    every_value: bool = False,
) -> None:
    """The last value per key equals ``expected``; per key the committed values strictly
    increase (a repeat or a step back is a duplicate or lost update); with
    ``every_value`` they are exactly 1..n (no cache: one update per input record)."""
    series: dict[str, list[int]] = defaultdict(list)
    for r in sorted((r for r in out if r.topic == topic), key=lambda r: (r.partition, r.offset)):
        series[r.key or ""].append(int.from_bytes(r.value or b"", "big", signed=True))
    final = {k: v[-1] for k, v in series.items()}
    wrong = {k: (final.get(k), v) for k, v in expected.items() if final.get(k) != v}
    extra = sorted(set(final) - set(expected))
    bad_series = {k: v for k, v in series.items() if any(b <= a for a, b in pairwise(v))}
    text = f"{len(expected) - len(wrong)}/{len(expected)} keys exact"
    if every_value:
        gaps = {
            k: sorted(set(range(1, expected.get(k, 0) + 1)) - set(v))[:5] for k, v in series.items()
        }
        gaps = {k: g for k, g in gaps.items() if g}
        repeats = sum(len(v) - len(set(v)) for v in series.values())
        text += f", {sum(len(v) for v in series.values())} updates, {repeats} repeated"
        fig.duplicates += repeats
        fig.missing += sum(
            len(set(range(1, expected.get(k, 0) + 1)) - set(v)) for k, v in series.items()
        ) + sum(expected[k] for k in expected if k not in series)
        if gaps:
            fig.violations.append(f"{name}: counts never emitted (key: first missing): {gaps}")
    fig.aggregates[name] = text
    if wrong:
        sample = dict(list(wrong.items())[:6])
        fig.violations.append(f"{name}: {len(wrong)} keys wrong (key: (got, expected)): {sample}")
    if extra:
        fig.violations.append(f"{name}: keys that should not exist: {extra[:6]}")
    if bad_series:
        k, v = next(iter(bad_series.items()))
        fig.violations.append(
            f"{name}: {len(bad_series)} keys whose values repeat or go back, e.g. {k}: "
            f"{_around_regression(v)}"
        )


def _around_regression(values: list[int]) -> list[int]:
    for i in range(1, len(values)):
        if values[i] <= values[i - 1]:
            return values[max(0, i - 3) : i + 3]
    return values[:6]


def output_timing(
    fig: Figures, out: list[Rec], topic: str, faults: Sequence[Fault], input_end: float | None
) -> None:
    """Longest gap between consecutive output writes (LogAppendTime) while input flowed,
    and for each fault the time from the broker's return to the first output written
    after it."""
    times = sorted(
        r.ts / 1000 for r in out if r.topic == topic and r.ts_type == TIMESTAMP_LOG_APPEND_TIME
    )
    if not times:
        if any(r.topic == topic for r in out):
            fig.notes.append(f"{topic} has no LogAppendTime timestamps: no timing figures")
        return
    end = input_end if input_end is not None else times[-1]
    window = [t for t in times if t <= end + 1.0]
    # output that stopped while input still came counts as a gap up to the input's end
    trailing = bool(window) and end > window[-1]
    points = [*window, end] if trailing else window
    if len(points) >= 2:
        gap, at = max((b - a, a) for a, b in pairwise(points))
        fig.longest_gap_s = gap
        tail = " (the output stopped before the input did)" if trailing and at == window[-1] else ""
        fig.notes.append(f"longest output gap began at {_clock(at)}{tail}")
    for fault in faults:
        if fault.ready is None:
            fig.recoveries.append((fault.label, None))
            continue
        after = [t for t in times if t >= fault.ready]
        fig.recoveries.append((fault.label, (after[0] - fault.ready) if after else None))


def expected_per_key(truth: list[Rec]) -> tuple[dict[str, int], dict[str, int]]:
    counts: dict[str, int] = Counter()
    sums: dict[str, int] = Counter()
    for r in truth:
        counts[r.key or ""] += 1
        sums[r.key or ""] += _seq(r)
    return dict(counts), dict(sums)


def verify_simple(fig: Figures, truth: list[Rec], out: list[Rec], topics: dict[str, str]) -> None:
    """The simple topology: copy exactly once, exact counts and sums per key."""
    check_copy(fig, truth, out, topics["copy"], _seq)
    counts, sums = expected_per_key(truth)
    check_aggregate(fig, "count per key", out, topics["counts"], counts)
    check_aggregate(fig, "sum per key", out, topics["sums"], sums)


def _last_values(out: list[Rec], topic: str) -> dict[str, int]:
    last: dict[str, int] = {}
    for r in out:
        if r.topic == topic:
            last[r.key or ""] = int.from_bytes(r.value or b"", "big", signed=True)
    return last


def simple_complete(truth: list[Rec], topics: dict[str, str]) -> Callable[[list[Rec]], bool]:
    counts, sums = expected_per_key(truth)

    def complete(out: list[Rec]) -> bool:
        return (
            _last_values(out, topics["counts"]) == counts
            and _last_values(out, topics["sums"]) == sums
            and _all_copied(truth, out, topics["copy"], _seq)
        )

    return complete


def expected_windows(truth: list[Rec], groups: int, window_ms: int) -> dict[str, int]:
    out: dict[str, int] = Counter()
    for r in truth:
        out[f"g{_seq(r) % groups}@{r.ts - r.ts % window_ms}"] += 1
    return dict(out)


def _joined_seq(r: Rec) -> int:
    return int((r.value or b"-1:").split(b":", 1)[0])


def verify_complex(
    fig: Figures,
    truth: list[Rec],
    out: list[Rec],
    topics: dict[str, str],
    table: dict[str, str],
    groups: int,
    window_ms: int,
) -> None:
    """The complex topology: every input joined exactly once with the right table row, and
    exact windowed counts per group after the repartition."""
    check_copy(fig, truth, out, topics["joined"], _joined_seq)
    wrong_join = [
        r
        for r in out
        if r.topic == topics["joined"]
        and (r.value or b"").split(b":", 1)[-1].decode() != table.get(r.key or "", "?")
    ]
    fig.aggregates["stream-table join"] = f"{len(wrong_join)} results with a wrong table value"
    if wrong_join:
        fig.violations.append(
            f"{len(wrong_join)} join results with a wrong table value, e.g. "
            f"{[(r.key, r.value) for r in wrong_join[:5]]}"
        )
    check_aggregate(
        fig,
        "windowed count per group",
        out,
        topics["windowed"],
        expected_windows(truth, groups, window_ms),
    )


def complex_complete(
    truth: list[Rec], topics: dict[str, str], groups: int, window_ms: int
) -> Callable[[list[Rec]], bool]:
    expected = expected_windows(truth, groups, window_ms)

    def complete(out: list[Rec]) -> bool:
        return _last_values(out, topics["windowed"]) == expected and _all_copied(
            truth, out, topics["joined"], _joined_seq
        )

    return complete
