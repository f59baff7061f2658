"""What the broker benchmarks share: producing the input, running a runner process until its
consumer group has committed all of it (wall time, CPU time, peak RSS), reading the output.

Used by ``bench.windowed_agg`` and ``bench.nexmark``. A runner is a process that prints
``READY`` right before it starts consuming and closes cleanly on SIGTERM (``serve`` does both
for a topology of this engine).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from confluent_kafka import (
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

if TYPE_CHECKING:
    from streaming.topology import Topology

REPO = Path(__file__).resolve().parents[1]


def produce(bootstrap: str, records: Iterable[tuple[str, bytes | None, bytes, int]]) -> None:
    """Write (topic, key, value, timestamp) records, partitioned as Java clients do."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 20}
    )
    for topic, key, value, ts in records:
        while True:
            try:
                producer.produce(topic, value, key, timestamp=ts)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60) != 0:
        raise RuntimeError("could not produce the input")


# -- progress ------------------------------------------------------------------------------


class Monitor(Protocol):
    """Tells when a runner has processed (and committed) all of its input."""

    last_seen: dict[str, object]
    #: once ``done``: when the monitor first saw the input committed (a monotonic time)
    finished_at: float | None

    def done(self, group: str) -> bool: ...


class CommitMonitor:
    """Tells when a consumer group has committed all of its input and its repartition topics.

    ``repartition`` names the group's repartition topics (possibly none); None finds them by
    name (topics containing the group id that start with ``repartition__`` (Quix) or end
    with ``-repartition``), and then at least one must exist.
    """

    def __init__(
        self,
        bootstrap: str,
        input_topics: Sequence[str],
        eos: bool,
        repartition: Sequence[str] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self._readers: dict[str, Consumer] = {}
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-monitor-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
            }
        )
        self.eos = eos
        self.repartition = repartition
        self.last_seen: dict[str, object] = {}
        self.finished_at: float | None = None
        self._previous: dict[str, object] | None = None
        self._previous_at = 0.0
        self.input_end: dict[tuple[str, int], int] = {}
        self.refresh_input_end(input_topics)

    def refresh_input_end(self, input_topics: Sequence[str]) -> None:
        """Read the input's end offsets again (after more input was produced)."""
        self.input_end = {}
        for topic in input_topics:
            meta = self.admin.list_topics(topic=topic, timeout=10).topics[topic]
            for p in meta.partitions:
                tp = TopicPartition(topic, p)
                self.input_end[(topic, p)] = self.consumer.get_watermark_offsets(
                    tp, timeout=10, cached=False
                )[1]

    def done(self, group: str) -> bool:
        """All input offsets committed, and every repartition record consumed and committed,
        seen on two checks in a row with the same repartition end offsets: one check reads
        the topics one after another, and a chain of repartition topics (a stage's commit
        writes the next stage's input) can move between the reads."""
        finished = self._finished(group)
        seen_at = time.monotonic()
        snapshot = dict(self.last_seen) if finished else None
        stable = snapshot is not None and snapshot == self._previous
        if stable:
            # the input was all committed when the first of the two checks saw it
            self.finished_at = self._previous_at
        self._previous = snapshot
        self._previous_at = seen_at
        return stable

    def _finished(self, group: str) -> bool:
        if self.repartition is None:
            repartition = [
                name
                for name in self.admin.list_topics(timeout=10).topics
                if group in name
                and (name.startswith("repartition__") or name.endswith("-repartition"))
            ]
            if not repartition:
                self.last_seen = {"committed": {}}
                return False
        else:
            repartition = list(self.repartition)
        repartition_parts = [
            TopicPartition(topic, p)
            for topic in repartition
            for p in self.admin.list_topics(topic=topic, timeout=10).topics[topic].partitions
        ]
        committed = self._committed(
            group, [TopicPartition(t, p) for t, p in self.input_end] + repartition_parts
        )
        self.last_seen = {"committed": committed}
        for key, end in self.input_end.items():
            if committed.get(key, -1) < end:
                return False
        for tp in repartition_parts:
            high = self.consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]
            # under exactly-once every write is transactional, so the last offset (no open
            # transaction once all input is committed) is a commit marker
            need = high - 1 if self.eos and high > 0 else high
            self.last_seen[f"{tp.topic}-{tp.partition} needs"] = need
            if committed.get((tp.topic, tp.partition), 0) < need:
                return False
        return True

    def _committed(self, group: str, parts: list[TopicPartition]) -> dict[tuple[str, int], int]:
        """The group's committed offsets of ``parts``, read by a consumer with the group's id
        that never joins it (OffsetFetch): the admin client's call can crash the process
        while the group has no offsets."""
        reader = self._readers.get(group)
        if reader is None:
            reader = self._readers[group] = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": group,
                    "enable.auto.commit": False,
                }
            )
        try:
            found = reader.committed(parts, timeout=10)
        except Exception:
            return {}
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in found
            if tp.error is None and tp.offset >= 0
        }

    def close(self) -> None:
        self.consumer.close()
        for reader in self._readers.values():
            reader.close()


def signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (all its threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants (from every process's parent in ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    return tree


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process and its live descendants (PySpark's JVM)."""
    return sum(cpu_seconds(p) for p in process_tree(pid))


def tree_peak_rss_mb(pid: int) -> float:
    """The sum of the peak resident sets of a live process and its live descendants, in MB."""
    return sum(peak_rss_mb(p) for p in process_tree(pid))


def peak_rss_mb(pid: int) -> float:
    """The peak resident set (``VmHWM``) of a live process, in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Measured:
    """A runner's run: wall seconds from ``READY`` until all input was committed (when the
    monitor first saw it, not the check that confirmed it), the CPU seconds it used
    meanwhile, its peak RSS, and the lines it printed before ``READY``."""

    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    preamble: tuple[str, ...] = ()


def wait_committed(
    proc: subprocess.Popen[bytes],
    monitor: Monitor,
    group: str,
    deadline: float,
    name: str,
    log_path: Path,
) -> None:
    """Wait until ``monitor`` sees the group's input committed (RuntimeError: the runner
    exited, or the deadline passed)."""
    while not monitor.done(group):
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited early: {log_path.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{name} did not finish in time: {monitor.last_seen}; "
                f"log: {log_path.read_text()[-1500:]}"
            )
        time.sleep(0.05)


def run_measured(
    cmd: list[str],
    *,
    name: str,
    group: str,
    monitor: Monitor,
    timeout: float,
    log_path: Path,
    stop_signal: signal.Signals = signal.SIGTERM,
    after: Callable[[subprocess.Popen[bytes]], None] | None = None,
    tree: bool = False,
) -> Measured:
    """Start ``cmd`` (its own process group, stderr to ``log_path``), measure it from its
    ``READY`` until ``monitor`` sees all input committed, run ``after(proc)`` (not measured),
    then stop it with ``stop_signal`` (SIGKILL after 60 s). RuntimeError if it fails.

    With ``tree``, CPU time and peak RSS are those of the runner and its descendants (a
    PySpark runner's work is in the JVM it launches), else the runner's own."""
    cpu = tree_cpu_seconds if tree else cpu_seconds
    rss = tree_peak_rss_mb if tree else peak_rss_mb
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=log, start_new_session=True
        )
        try:
            line = b"?"
            preamble: list[str] = []
            while line and line.strip() != b"READY":  # (py-spy prints a line of its own)
                line = proc.stdout.readline()  # type: ignore[union-attr]
                if line and line.strip() != b"READY":
                    preamble.append(line.decode(errors="replace").strip())
            if line.strip() != b"READY":
                proc.wait(30)
                raise RuntimeError(f"{name} did not start: {log_path.read_text()[-2000:]}")
            started = time.monotonic()
            cpu0 = cpu(proc.pid)
            wait_committed(proc, monitor, group, started + timeout, name, log_path)
            finished = monitor.finished_at or time.monotonic()
            measured = Measured(
                finished - started, cpu(proc.pid) - cpu0, rss(proc.pid), tuple(preamble)
            )
            if after is not None:
                after(proc)
            return measured
        finally:
            # the runner leads its own process group (with py-spy: py-spy and the runner)
            if proc.poll() is None:
                signal_group(proc, stop_signal)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    signal_group(proc, signal.SIGKILL)
                    proc.wait()


# -- output --------------------------------------------------------------------------------


def read_output(
    bootstrap: str, topic: str, timeout: float = 120.0
) -> list[tuple[bytes | None, bytes | None]]:
    """Every committed record of ``topic``: read to the end offset of each partition (the
    runner is stopped, so no transaction is open), however slowly the machine answers."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
        for p in meta.partitions
    }
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    out: list[tuple[bytes | None, bytes | None]] = []
    pending = {p for p, end in ends.items() if end > 0}
    deadline = time.monotonic() + timeout
    try:
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"reading {topic}: partitions {sorted(pending)} never ended")
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(error)
                    # the end of what read_committed may see: past the last commit marker
                    partition, offset = msg.partition(), msg.offset()
                    if partition is not None and (offset or 0) >= ends[partition] - 1:
                        pending.discard(partition)
                    continue
                out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def wait_output(
    bootstrap: str,
    topic: str,
    done: Callable[[list[tuple[bytes | None, bytes | None]]], bool],
    deadline: float,
    proc: subprocess.Popen[bytes] | None = None,
) -> list[tuple[bytes | None, bytes | None]]:
    """Read ``topic``'s committed records (read_committed) as a runner writes them until
    ``done(records so far)``; RuntimeError if the deadline passes first or ``proc`` (the
    runner) exits. For output whose last records come on the wall clock, not the input
    (windows on processing time)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-waiter-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        while not done(out):
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the runner exited while {topic} was awaited")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: {len(out)} records, the awaited ones never came")
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                error = msg.error()
                if error is None:
                    out.append((msg.key(), msg.value()))
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(error)
    finally:
        consumer.close()
    return out


# -- the runner side -----------------------------------------------------------------------


def serve(topology: Topology, config: dict[str, Any]) -> None:
    """Run ``topology`` as a ``KafkaStreams`` application until SIGTERM, then close it.

    Prints ``READY`` right before ``start()``, which ``run_measured`` waits for."""
    from streaming.app import KafkaStreams

    app = KafkaStreams(topology, config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("READY", flush=True)
    app.start()
    try:
        while not stop.is_set() and app.state.is_running_or_rebalancing():
            stop.wait(0.2)
    finally:
        app.close(timeout=60)
