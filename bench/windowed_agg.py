"""Broker benchmark: the same windowed aggregation through this engine, Quix Streams, a
hand-written confluent-kafka loop and Apache Kafka Streams 4.1.1 itself, against one local
Kafka broker, in one run.

Workload: ``--records`` JSON orders pre-produced to a 2-partition topic (Quix Streams skips
the repartition topic for a 1-partition input), order-id keys, event timestamps ~20 ms
apart (closer above 180,000 records: the input spans at most an hour of event time);
rekeyed by region through a repartition topic; summed in 5-minute tumbling windows
(grace longer than the input's span, see ``bench.wa_common``) in RocksDB with a changelog;
under exactly-once and at-least-once. Each engine runs in its own process (``bench.wa_ours``,
``bench.wa_quix`` in ``.venv-quix``, ``bench.wa_raw``, ``bench/java/WindowedAgg.java``
compiled against the jars ``make setup`` fetched for the conformance harness) with the same
commit interval: 100 ms
under exactly-once (Kafka Streams' default; Quix's own default is 5 s), 1 s under
at-least-once (Kafka Streams' 30 s would dominate a run of a few seconds).

Throughput = records / seconds from the moment the runner starts its application (it prints
``READY``) until the consumer group has committed the whole input and every record of the
repartition topic (the output is committed with those offsets: in the same transaction under
exactly-once, flushed before the offset commit under at-least-once); the end is the first
check that saw it all committed, which a second check 50 ms later confirms. Afterwards the output
is read back (read_committed, to the end offsets of every partition) and the last value per
(region, window) must equal the expected sums for every engine, so no one wins by doing less.
``ours-2t`` and ``java-2t`` are the same runners with ``num.stream.threads=2`` (the input's
partition count). The table shows every run's CPU time and peak RSS.

    python -m bench.windowed_agg [--records 200000] [--modes eos,alos]
                                 [--engines ours,quix,raw,java,ours-2t,java-2t]
                                 [--json PATH]

Each engine runs ``--repeat`` times per mode (interleaved, default 2: the machine is shared,
so the summary keeps each engine's best run; the table lists every run with its CPU time).
Prints a table, then per mode one line in this exact form (tooling reads it):

    windowed-agg eos: ours N rec/s, quix M rec/s, raw R rec/s, ours/quix X.XX, ours/raw Y.YY
    windowed-agg-2 eos: ours N rec/s, java J rec/s, ours/java Z.ZZ

``spark`` (not in the default engines) is Spark Structured Streaming 4.1 (``bench.wa_spark``:
Kafka source, 5-minute tumbling window with the same grace as watermark delay, RocksDB state
store, update output mode, Kafka sink, ``local[N]`` with N = ``--partitions``). Its Kafka
sink is not transactional, so it runs under ``alos`` only (skipped in ``eos``). Its
start-up (JVM, SparkSession, the query's analysis up to ``start()``) is measured apart and
shown in the table's ``start-up s``; its clock starts at ``READY``, printed once the query
has started, so the first micro-batch's planning (offsets, query planning, write-ahead log:
the ``(+N)`` after the start-up, from the runner's progress log) is inside its timed seconds. Spark commits its input to its checkpoint, not to the consumer group, so its
end condition is the checkpoint's: the latest batch in ``commits/`` (written after the
batch's output was written and flushed) has, in ``offsets/``, the input's end offset for
every partition (``CheckpointMonitor``). Its CPU time and peak RSS are those of the runner's
process tree (Python driver + JVM; peak RSS summed). ``--spark-max-offsets N`` sets
``maxOffsetsPerTrigger`` (default: none, the first micro-batch takes the whole backlog).
With spark in ``alos`` one more line follows (after the others, which keep their shape):

    windowed-agg alos spark: spark S rec/s, ours/spark X.XX

``--json PATH`` also writes every run and the summary lines to ``PATH`` (``bench.results``;
``best`` marks the run each summary line keeps), which ``python -m bench.charts`` draws.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from confluent_kafka import Consumer, TopicPartition

from bench.broker import CommitMonitor, Monitor, produce, read_output, run_measured
from bench.results import run_meta, write_json
from bench.wa_common import GRACE_MS, WINDOW_MS
from streaming.testing import LocalKafkaCluster

REPO = Path(__file__).resolve().parents[1]
QUIX_PYTHON = Path(os.environ.get("QUIX_PYTHON", REPO / ".venv-quix" / "bin" / "python"))
#: three of the regions hash (murmur2) to each partition of the 2-partition repartition
#: topic, so that two stream threads or workers of any engine split the aggregation evenly
#: (with a skewed key set the busier partition caps what a second worker can add)
REGIONS = ["EU", "US", "APAC", "MEA", "ANZ", "AFRICA"]
ENGINES = ("ours", "quix", "raw", "java", "ours-2t", "java-2t")
OPTIONAL_ENGINES = ("spark",)  # asked for by name (--engines ...,spark)
ALOS_ONLY = ("spark",)  # its Kafka sink is not transactional
MODULES = {
    "ours": "bench.wa_ours",
    "quix": "bench.wa_quix",
    "raw": "bench.wa_raw",
    "spark": "bench.wa_spark",
}
JAVA_SOURCE = REPO / "bench" / "java" / "WindowedAgg.java"
JAVA_JARS = REPO / ".jars" / "streams"
JAVA_CLASSES = REPO / ".jars" / "bench-classes"
DEFAULT_COMMIT_MS = {"eos": 100, "alos": 1000}


@dataclass
class Result:
    """One engine's run in one mode."""

    engine: str
    mode: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    output_records: int = 0
    peak_rss_mb: float = 0.0
    windows: int = 0
    correct: bool = False
    startup_seconds: float | None = None  # Spark: JVM + session + query start, not timed
    first_planning_seconds: float | None = None  # Spark: in the timed seconds (batch 0)
    error: str = ""
    details: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return 0.0 if not self.seconds else self._records / self.seconds

    @property
    def cpu_us_per_record(self) -> float:
        return 1e6 * self.cpu_seconds / self._records if self._records else 0.0

    _records: int = 0

    def as_json(self, *, best: bool) -> dict[str, object]:
        """The run as one entry of ``--json``'s ``results``."""
        return {
            "engine": self.engine,
            "mode": self.mode,
            "records": self._records,
            "seconds": round(self.seconds, 3),
            "rate": round(self.rate, 1),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "cpu_us_per_record": round(self.cpu_us_per_record, 2),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "output_records": self.output_records,
            "windows": self.windows,
            "correct": self.correct,
            "startup_seconds": self.startup_seconds,
            "first_planning_seconds": self.first_planning_seconds,
            "error": self.error,
            "best": best,
        }


# -- input ---------------------------------------------------------------------------------


#: the input's event-time span at most (well under the grace period, ``wa_common.GRACE``)
MAX_SPAN_MS = 3_600_000


def make_orders(n: int, seed: int = 7) -> list[tuple[bytes, bytes, int]]:
    """``n`` (key, JSON value, timestamp) orders with timestamps ~20 ms apart, or closer so
    that they span at most an hour: within the grace period, so that no engine drops a record
    as late however far one input partition runs ahead of the other (two stream threads or
    workers take one partition each).

    Timestamps start at a window boundary about that span before now: older records would
    be deleted by the broker's time retention (24 h) in the middle of the run."""
    rng = random.Random(seed)
    out = []
    max_gap = max(1, min(40, 2 * MAX_SPAN_MS // max(1, n)))
    ts = int(time.time() * 1000) - n * max_gap // 2 - 2 * WINDOW_MS
    ts -= ts % WINDOW_MS
    for i in range(n):
        ts += rng.randint(0, max_gap)
        value = {
            "order_id": f"o{i}",
            "customer_id": f"c{rng.randint(1, 5000)}",
            "region": rng.choice(REGIONS),
            "amount": round(rng.random() * 100, 2),
            "currency": "EUR",
        }
        out.append((f"o{i}".encode(), orjson.dumps(value), ts))
    return out


def expected_sums(orders: list[tuple[bytes, bytes, int]]) -> dict[tuple[str, int], float]:
    """Final sum per (region, window start); timestamps never go back, so nothing is late."""
    sums: dict[tuple[str, int], float] = {}
    for _key, value, ts in orders:
        order = orjson.loads(value)
        slot = (order["region"], ts - ts % WINDOW_MS)
        sums[slot] = sums.get(slot, 0.0) + order["amount"]
    return sums


def produce_orders(bootstrap: str, topic: str, orders: list[tuple[bytes, bytes, int]]) -> None:
    produce(bootstrap, ((topic, key, value, ts) for key, value, ts in orders))


def java_classes() -> Path:
    """Compile ``bench/java/WindowedAgg.java`` (once per change) against Kafka Streams' jars."""
    if not any(JAVA_JARS.glob("kafka-streams-*.jar")):
        raise RuntimeError(f"Kafka Streams jars missing from {JAVA_JARS}: run `make setup`")
    marker = JAVA_CLASSES / "WindowedAgg.class"
    if not marker.exists() or marker.stat().st_mtime < JAVA_SOURCE.stat().st_mtime:
        JAVA_CLASSES.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-d", str(JAVA_CLASSES), "-cp", f"{JAVA_JARS}/*", str(JAVA_SOURCE)],
            check=True,
        )
    return JAVA_CLASSES


def runner_command(
    engine: str,
    partitions: int,
    ours_settings: tuple[str, ...],
    spark_max_offsets: int = 0,
) -> list[str]:
    """How to start one engine's runner (the common arguments follow)."""
    base, _, threads = engine.partition("-")
    if base == "java":
        return [
            "java",
            "-cp",
            f"{java_classes()}:{JAVA_JARS}/*",
            "WindowedAgg",
            "--threads",
            "2" if threads == "2t" else "1",
            "--window-ms",
            str(WINDOW_MS),
            "--grace-ms",
            str(GRACE_MS),
        ]
    python = str(QUIX_PYTHON) if base == "quix" else sys.executable
    cmd = [python, "-m", MODULES[base]]
    if base in ("raw", "spark"):
        cmd += ["--partitions", str(partitions)]
    if base == "spark" and spark_max_offsets:
        cmd += ["--max-offsets", str(spark_max_offsets)]
    if base == "ours":
        for item in ours_settings:
            cmd += ["--set", item]
        if threads == "2t":
            cmd += ["--set", "num.stream.threads=2"]
    return cmd


class CheckpointMonitor:
    """Tells when a Spark query has committed all of its input to its checkpoint.

    Spark writes ``offsets/N`` (the end offsets of micro-batch N) before running batch N and
    ``commits/N`` after the batch's output was written (the Kafka sink flushes its producer
    before a task commits); both by writing a temporary file and renaming it. Done: the latest
    committed batch's offsets reach the input's end offset on every partition, i.e. every
    input record's update is in the output topic."""

    def __init__(self, bootstrap: str, input_topic: str, checkpoint: Path) -> None:
        self.input_topic = input_topic
        self.checkpoint = checkpoint
        self.last_seen: dict[str, object] = {}
        self.finished_at: float | None = None
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
        try:
            meta = consumer.list_topics(input_topic, timeout=10).topics[input_topic]
            self.input_end = {
                p: consumer.get_watermark_offsets(
                    TopicPartition(input_topic, p), timeout=10, cached=False
                )[1]
                for p in meta.partitions
            }
        finally:
            consumer.close()

    def done(self, group: str) -> bool:
        commits = self.checkpoint / "commits"
        batches = (
            [int(f.name) for f in commits.iterdir() if f.name.isdigit()] if commits.is_dir() else []
        )
        if not batches:
            self.last_seen = {"committed batch": None}
            return False
        batch = max(batches)
        offsets = self.batch_offsets(batch)
        self.last_seen = {"committed batch": batch, "offsets": offsets, "ends": self.input_end}
        finished = all(offsets.get(p, -1) >= end for p, end in self.input_end.items())
        if finished:
            self.finished_at = time.monotonic()
        return finished

    def batch_offsets(self, batch: int) -> dict[int, int]:
        """The input's end offsets of micro-batch ``batch`` (``offsets/<batch>``: a version
        line, the batch's metadata, then one JSON line per source)."""
        text = (self.checkpoint / "offsets" / str(batch)).read_text()
        for line in text.splitlines()[1:]:
            try:
                source = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(source, dict) and isinstance(source.get(self.input_topic), dict):
                return {int(p): int(o) for p, o in source[self.input_topic].items()}
        raise RuntimeError(f"no offsets of {self.input_topic} in {text!r}")

    def close(self) -> None:
        pass


def _wait_for_first_batch_log(log_path: Path, timeout: float) -> None:
    """Until Spark's runner has logged its first micro-batch's progress (it polls for it
    every half second), at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while first_batch_planning(log_path) is None and time.monotonic() < deadline:
        time.sleep(0.1)


def first_batch_planning(log_path: Path) -> float | None:
    """Seconds Spark's first micro-batch spent before processing (offsets, planning, write-
    ahead log), from the runner's ``batch 0: ... durationMs {...}`` log line, if any."""
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("batch 0:") and "durationMs " in line:
            durations = ast.literal_eval(line.split("durationMs ", 1)[1])
            keys = ("latestOffset", "getBatch", "queryPlanning", "walCommit")
            return sum(durations.get(k, 0) for k in keys) / 1000
    return None


# -- output --------------------------------------------------------------------------------


def final_sums(
    engine: str, records: list[tuple[bytes | None, bytes | None]]
) -> dict[tuple[str, int], float]:
    """The last value per (region, window start) of an engine's output (every record of
    which has a key and a value)."""
    out: dict[tuple[str, int], float] = {}
    for key, value in records:
        if key is None or value is None:
            raise ValueError(f"{engine} wrote a record without a key or value: {key!r}")
        if engine == "quix":
            window = orjson.loads(value)
            out[(key.decode(), window["start"])] = window["value"]
        else:  # ours, raw, java, spark: region bytes + 8-byte big-endian window start, JSON number
            out[(key[:-8].decode(), int.from_bytes(key[-8:], "big", signed=True))] = orjson.loads(
                value
            )
    return out


def compare(expected: dict[tuple[str, int], float], got: dict[tuple[str, int], float]) -> list[str]:
    problems = []
    for slot, want in sorted(expected.items()):
        have = got.get(slot)
        if have is None:
            problems.append(f"missing window {slot}")
        elif abs(have - want) > 1e-6 * max(1.0, abs(want)):
            problems.append(f"window {slot}: {have} != {want}")
    problems.extend(f"unexpected window {slot}" for slot in sorted(set(got) - set(expected)))
    return problems


# -- one run -------------------------------------------------------------------------------


def run_engine(
    engine: str,
    mode: str,
    *,
    kafka: LocalKafkaCluster,
    input_topic: str,
    partitions: int,
    n: int,
    expected: dict[tuple[str, int], float],
    commit_ms: int,
    timeout: float,
    workdir: Path,
    profile_dir: Path | None = None,
    ours_settings: tuple[str, ...] = (),
    spark_max_offsets: int = 0,
) -> Result:
    result = Result(engine, mode, _records=n)
    spark = engine == "spark"
    if engine in ALOS_ONLY and mode != "alos":
        raise ValueError(f"{engine} runs under at-least-once (alos) only")
    group = f"wa-{engine}-{mode}-{uuid.uuid4().hex[:6]}"
    output = f"{group}-out"
    kafka.create_topic(output, partitions=1)
    state_dir = workdir / group
    state_dir.mkdir(parents=True)
    cmd = [
        *runner_command(engine, partitions, ours_settings, spark_max_offsets),
        "--bootstrap",
        kafka.bootstrap_servers,
        "--input",
        input_topic,
        "--output",
        output,
        "--group",
        group,
        "--guarantee",
        mode,
        "--state-dir",
        str(state_dir),
        "--commit-interval-ms",
        str(commit_ms),
    ]
    profiled = profile_dir is not None and not engine.startswith("java") and not spark
    if profile_dir is not None and profiled:  # wall-clock profile (idle included) of the runner
        out = profile_dir / f"{engine}-{mode}.txt"
        cmd = [
            "py-spy",
            "record",
            "--idle",
            "--subprocesses",
            "-r",
            "200",
            "-f",
            "raw",
            "-o",
            str(out),
            "--",
            *cmd,
        ]
    log_path = workdir / f"{group}.log"
    monitor: Monitor
    if spark:  # Spark commits to its checkpoint, not to the group
        monitor = CheckpointMonitor(kafka.bootstrap_servers, input_topic, state_dir / "checkpoint")
    else:
        monitor = CommitMonitor(kafka.bootstrap_servers, [input_topic], mode == "eos")
    # py-spy writes its profile on Ctrl-C; the runners close cleanly on SIGTERM
    try:
        measured = run_measured(
            cmd,
            name=engine,
            group=group,
            monitor=monitor,
            timeout=timeout,
            log_path=log_path,
            stop_signal=signal.SIGINT if profiled else signal.SIGTERM,
            # Spark's work is in its JVM, ours-2t's in its worker processes
            tree=spark or engine == "ours-2t",
            # not measured: Spark's runner logs the micro-batches' progress (durations)
            after=(lambda _proc: _wait_for_first_batch_log(log_path, 10.0)) if spark else None,
        )
        for line in measured.preamble:
            if line.startswith("STARTUP "):
                result.startup_seconds = float(line.split()[1])
        result.seconds = measured.seconds
        result.cpu_seconds = measured.cpu_seconds
        result.peak_rss_mb = measured.peak_rss_mb
    except Exception as exc:
        result.error = str(exc)
    finally:
        monitor.close()
    if spark:
        result.first_planning_seconds = first_batch_planning(log_path)
    if result.error:
        return result
    records = read_output(kafka.bootstrap_servers, output)
    got = final_sums(engine, records)
    result.output_records = len(records)
    result.windows = len(got)
    result.details = compare(expected, got)
    result.correct = not result.details
    return result


def report(mode: str, results: dict[str, Result]) -> str:
    """The one-line summary tooling reads."""

    def rate(engine: str) -> float:
        r = results.get(engine)
        return r.rate if r is not None and r.correct else 0.0

    ours, quix, raw = rate("ours"), rate("quix"), rate("raw")
    return (
        f"windowed-agg {mode}: ours {ours:.0f} rec/s, quix {quix:.0f} rec/s, raw {raw:.0f} rec/s, "
        f"ours/quix {ours / quix if quix else 0.0:.2f}, ours/raw {ours / raw if raw else 0.0:.2f}"
    )


def report_two_workers(mode: str, results: dict[str, Result]) -> str:
    """The two-worker line: both engines with ``num.stream.threads=2``."""

    def rate(engine: str) -> float:
        r = results.get(engine)
        return r.rate if r is not None and r.correct else 0.0

    ours, java = rate("ours-2t"), rate("java-2t")
    return (
        f"windowed-agg-2 {mode}: ours {ours:.0f} rec/s, java {java:.0f} rec/s, "
        f"ours/java {ours / java if java else 0.0:.2f}"
    )


def report_spark(mode: str, results: dict[str, Result]) -> str:
    """The Spark line (alos only): Spark's rate, and ours over it."""

    def rate(engine: str) -> float:
        r = results.get(engine)
        return r.rate if r is not None and r.correct else 0.0

    ours, spark = rate("ours"), rate("spark")
    return (
        f"windowed-agg {mode} spark: spark {spark:.0f} rec/s, "
        f"ours/spark {ours / spark if spark else 0.0:.2f}"
    )


def startup_cell(r: Result) -> str:
    """Spark's start-up before ``READY``, then (+ first micro-batch's planning, timed)."""
    if r.startup_seconds is None:
        return "-"
    if r.first_planning_seconds is None:
        return f"{r.startup_seconds:.1f}"
    return f"{r.startup_seconds:.1f} (+{r.first_planning_seconds:.1f})"


def print_table(all_results: list[Result], n: int, commit_ms: dict[str, int]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"windowed-agg: {n:,} JSON orders, 5-minute tumbling sum, RocksDB "
        "(every run; the summary keeps each engine's best)"
    )
    for col in (
        "mode",
        "engine",
        "rec/s",
        "seconds",
        "cpu s",
        "cpu µs/rec",
        "peak RSS MB",
        "commit ms",
        "start-up s",
        "outputs",
    ):
        table.add_column(col, justify="right" if col not in ("mode", "engine") else "left")
    table.add_column("final sums")
    for r in all_results:
        check = "ok" if r.correct else (r.error or f"{len(r.details)} wrong: {r.details[:2]}")
        table.add_row(
            r.mode,
            r.engine,
            f"{r.rate:,.0f}",
            f"{r.seconds:.2f}",
            f"{r.cpu_seconds:.1f}",
            f"{r.cpu_us_per_record:.0f}",
            f"{r.peak_rss_mb:,.0f}",
            "checkpoint" if r.engine == "spark" else str(commit_ms[r.mode]),
            startup_cell(r),
            f"{r.output_records:,}",
            check,
        )
    Console(width=max(120, Console().width)).print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--modes", default="eos,alos")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--commit-interval-ms-eos", type=int, default=DEFAULT_COMMIT_MS["eos"])
    parser.add_argument("--commit-interval-ms-alos", type=int, default=DEFAULT_COMMIT_MS["alos"])
    parser.add_argument("--timeout", type=float, default=600.0, help="per engine run")
    parser.add_argument(
        "--repeat", type=int, default=2, help="rounds; the summary lines keep each one's best"
    )
    parser.add_argument(
        "--ours-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra KafkaStreams setting for our engine (experiments; the default run has none)",
    )
    parser.add_argument(
        "--profile-dir", type=Path, help="record py-spy profiles (collapsed stacks) here"
    )
    parser.add_argument("--keep-logs", type=Path, help="copy every runner's log here")
    parser.add_argument(
        "--json", type=Path, metavar="PATH", help="also write every run and the summary here"
    )
    parser.add_argument(
        "--spark-max-offsets",
        type=int,
        default=0,
        metavar="N",
        help="Spark's maxOffsetsPerTrigger (default: none, one micro-batch takes the backlog)",
    )
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    commit_ms = {"eos": args.commit_interval_ms_eos, "alos": args.commit_interval_ms_alos}
    unknown = set(engines) - set(ENGINES) - set(OPTIONAL_ENGINES)
    if unknown:
        print(f"unknown engines: {sorted(unknown)}", file=sys.stderr)
        return 2
    for engine in set(engines) & set(ALOS_ONLY):
        if "alos" not in modes:
            print(f"{engine} runs under at-least-once only: add alos to --modes", file=sys.stderr)
            return 2
        if len(modes) > 1:
            print(f"{engine}: skipped under {modes} except alos", file=sys.stderr)
    if "quix" in engines and not QUIX_PYTHON.exists():
        print(
            f"Quix Streams environment missing ({QUIX_PYTHON}); run `make bench` (it creates "
            ".venv-quix from bench/requirements-quix.txt) or set QUIX_PYTHON",
            file=sys.stderr,
        )
        return 2
    orders = make_orders(args.records)
    expected = expected_sums(orders)
    lines: list[str] = []
    all_results: list[Result] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-wa-") as tmp, LocalKafkaCluster() as kafka:
        input_topic = "bench-orders"
        kafka.create_topic(input_topic, partitions=args.partitions)
        produce_orders(kafka.bootstrap_servers, input_topic, orders)
        best: dict[tuple[str, str], Result] = {}
        for round_no in range(args.repeat):
            for mode in modes:
                for engine in engines:
                    if engine in ALOS_ONLY and mode != "alos":
                        continue
                    r = run_engine(
                        engine,
                        mode,
                        kafka=kafka,
                        input_topic=input_topic,
                        partitions=args.partitions,
                        n=args.records,
                        expected=expected,
                        commit_ms=commit_ms[mode],
                        timeout=args.timeout,
                        workdir=Path(tmp),
                        profile_dir=args.profile_dir,
                        ours_settings=tuple(args.ours_set),
                        spark_max_offsets=args.spark_max_offsets,
                    )
                    all_results.append(r)
                    if args.keep_logs is not None:
                        args.keep_logs.mkdir(parents=True, exist_ok=True)
                        for log in Path(tmp).glob(f"wa-{engine}-{mode}-*.log"):
                            shutil.copy(log, args.keep_logs / log.name)
                    status = "ok" if r.correct else f"FAILED: {r.error or r.details[:3]}"
                    print(
                        f"  [{round_no + 1}/{args.repeat}] {mode} {engine}: {r.rate:,.0f} rec/s "
                        f"({r.seconds:.2f} s, {r.cpu_seconds:.1f} cpu s) {status}",
                        file=sys.stderr,
                        flush=True,
                    )
                    failed |= not r.correct
                    kept = best.get((mode, engine))
                    if kept is None or (r.correct and (not kept.correct or r.rate > kept.rate)):
                        best[(mode, engine)] = r
        for mode in modes:
            per_engine = {e: best[(mode, e)] for e in engines if (mode, e) in best}
            lines.append(report(mode, per_engine))
            if {"ours-2t", "java-2t"} & set(engines):
                lines.append(report_two_workers(mode, per_engine))
            if "spark" in per_engine:
                lines.append(report_spark(mode, per_engine))
    print_table(all_results, args.records, commit_ms)
    for line in lines:
        print(line)
    if args.json is not None:
        best_ids = {id(r) for r in best.values()}
        meta = run_meta(
            records=args.records,
            partitions=args.partitions,
            modes=modes,
            engines=engines,
            repeat=args.repeat,
            commit_interval_ms=commit_ms,
        )
        runs = [r.as_json(best=id(r) in best_ids) for r in all_results]
        write_json(args.json, "windowed-agg", meta, lines, runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
