"""Nexmark on a Kafka broker: each query as its own ``KafkaStreams`` process, timed and verified.

``prepare`` generates the events (event time ending a couple of minutes before now, so the
broker's time retention keeps them), creates the three topics and produces them with the
closing events. ``run_query`` starts ``bench.nexmark.runner`` for one query (exactly-once
v2, its own application id) and measures, from its ``READY`` until its consumer group has
committed all of its input topics and every record of its repartition topics: wall seconds
and the process's CPU seconds. Then (not timed), for queries over bids, a second later one
more closing bid (``flush_bid``: emit-on-close of sessions is throttled to once per
wall-clock second), the runner stops, its output is read to the end offsets
(read_committed; q10's: the visible files of its 'filesystem' sink) and compared with
DuckDB's result over the same events. The SQL q12 counts bids per processing-time window:
its last windows close on the wall clock after the input, so the runner stops only once
its committed rows count as many bids as were produced (``wait_output``), and its check
is the one processing time allows (``flink_reference``)
(``bench.nexmark.sql_queries.check``). A query runs on the ``"dsl"`` engine (its DSL
topology) or the ``"sql"`` one (its compiled SQL, ``bench.nexmark.sql_queries``: Nexmark's
text where it runs verbatim).

Events/s counts all generated events, as Nexmark does (its source generates all three kinds
and each query reads what it needs); a query here reads only its own topics.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.broker import (
    CommitMonitor,
    produce,
    read_output,
    run_measured,
    wait_committed,
    wait_output,
)
from bench.nexmark.flink_queries import PROCESSING_TIME, file_output, file_records
from bench.nexmark.generator import GeneratorConfig, closing_events, flush_bid, generate
from bench.nexmark.model import BID_TOPIC, TOPICS, Event
from bench.nexmark.queries import QueryContext
from bench.nexmark.sql_queries import build, check, input_topics
from streaming.testing import LocalKafkaCluster

#: Flink 1.13's events/s per core (nexmark/nexmark README: 100 M events, 8 task managers,
#: in-process generator, exactly-once checkpoints every 3 minutes, RocksDB)
FLINK_PER_CORE: dict[str, float] = {
    "q0": 155_020,
    "q1": 157_940,
    "q2": 175_210,
    "q3": 152_120,
    "q4": 34_330,
    "q5": 22_140,
    "q7": 12_330,
    "q8": 146_140,
    "q11": 39_700,
}


@dataclass
class QueryResult:
    """One query's run: what it read, how long it took, and whether its output was right."""

    query: str
    events: int
    input_records: int
    engine: str = "dsl"
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    output_records: int = 0
    error: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return not self.error and not self.problems

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    @property
    def per_core(self) -> float:
        return self.events / self.cpu_seconds if self.cpu_seconds else 0.0

    def as_json(self) -> dict[str, object]:
        """The run as one entry of ``--json``'s ``results``, with Flink's figure beside it."""
        return {
            "query": self.query,
            "engine": self.engine,
            "events": self.events,
            "input_records": self.input_records,
            "seconds": round(self.seconds, 3),
            "rate": round(self.rate, 1),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "per_core": round(self.per_core, 1),
            "flink_per_core": FLINK_PER_CORE.get(self.query),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "output_records": self.output_records,
            "correct": self.correct,
            "error": self.error[:300],
        }


def prepare(
    kafka: LocalKafkaCluster, n: int, *, events_per_second: int, seed: int, partitions: int
) -> tuple[GeneratorConfig, list[Event]]:
    """Generate ``n`` events plus the closing ones and produce them to fresh topics."""
    span_ms = n * 1000 // events_per_second
    base = int(time.time() * 1000) - span_ms - 120_000
    config = GeneratorConfig(
        seed=seed, events_per_second=events_per_second, base_time_ms=base - base % 10_000
    )
    events = generate(n, config)
    events += closing_events(events)
    for topic in TOPICS:
        kafka.create_topic(topic, partitions=partitions)
    produce(kafka.bootstrap_servers, _records(events))
    return config, events


def _records(events: list[Event]) -> list[tuple[str, bytes | None, bytes, int]]:
    return [(e.topic, e.key.encode(), orjson.dumps(e.value), e.timestamp) for e in events]


def run_query(
    query: str,
    *,
    kafka: LocalKafkaCluster,
    config: GeneratorConfig,
    events: list[Event],
    generated: int,
    workdir: Path,
    commit_ms: int = 100,
    timeout: float = 900.0,
    settings: tuple[str, ...] = (),
    engine: str = "dsl",
) -> QueryResult:
    """Run one query on ``engine`` over the events in the topics; ``events`` gains the
    flush bid, if any.

    Its events/s count the ``generated`` events (without the closing ones)."""
    topics = input_topics(query)
    result = QueryResult(query, generated, sum(1 for e in events if e.topic in topics), engine)
    group = f"nexmark-{engine}-{query}-{uuid.uuid4().hex[:6]}"
    output = f"{group}-out"
    kafka.create_topic(output, partitions=1)
    topology = build(engine, query, QueryContext(output, config.max_auction_length_ms))
    repartition = [f"{group}-{t}" for t in topology.internal_topics if t.endswith("-repartition")]
    state_dir = workdir / group
    state_dir.mkdir(parents=True)
    log_path = workdir / f"{group}.log"
    cmd = [
        sys.executable,
        "-m",
        "bench.nexmark.runner",
        "--query",
        query,
        "--bootstrap",
        kafka.bootstrap_servers,
        "--output",
        output,
        "--group",
        group,
        "--state-dir",
        str(state_dir),
        "--commit-interval-ms",
        str(commit_ms),
        "--max-auction-length-ms",
        str(config.max_auction_length_ms),
        "--engine",
        engine,
    ]
    for item in settings:
        cmd += ["--set", item]
    monitor = CommitMonitor(kafka.bootstrap_servers, topics, eos=True, repartition=repartition)

    def flush(proc: subprocess.Popen[bytes]) -> None:
        if BID_TOPIC not in topics:
            return
        time.sleep(1.1)  # past the once-a-second throttle of emit-on-close
        bid = flush_bid(events)
        events.append(bid)
        produce(kafka.bootstrap_servers, _records([bid]))
        monitor.refresh_input_end(topics)
        wait_committed(proc, monitor, group, time.monotonic() + 120, query, log_path)
        if query in PROCESSING_TIME and engine == "sql":
            # the last windows close on the wall clock, after the input: wait for the
            # rows that count every bid (the check finds any lost or duplicated)
            bids = sum(1 for e in events if e.topic == BID_TOPIC)
            wait_output(
                kafka.bootstrap_servers,
                output,
                lambda records: _counted(records) >= bids,
                time.monotonic() + 120,
                proc,
            )

    try:
        measured = run_measured(
            cmd,
            name=query,
            group=group,
            monitor=monitor,
            timeout=timeout,
            log_path=log_path,
            after=flush,
        )
        result.seconds = measured.seconds
        result.cpu_seconds = measured.cpu_seconds
        result.peak_rss_mb = measured.peak_rss_mb
    except Exception as exc:
        result.error = str(exc)
        return result
    finally:
        monitor.close()
    files = file_output(query, output) if engine == "sql" else None
    records: list[tuple[str | None, Any]]
    if files is not None:
        records = list(file_records(query, files))
        shutil.rmtree(files.parent, ignore_errors=True)
    else:
        records = [
            (
                key.decode() if key is not None else None,
                orjson.loads(value) if value is not None else None,
            )
            for key, value in read_output(kafka.bootstrap_servers, output)
        ]
    result.output_records = len(records)
    result.problems = check(engine, query, events, records)
    return result


def _counted(records: list[tuple[bytes | None, bytes | None]]) -> int:
    """The bids the rows of a processing-time count (q12's ``bid_count``) account for."""
    return sum(orjson.loads(value).get("bid_count") or 0 for _key, value in records if value)


def print_table(results: list[QueryResult], n: int) -> None:
    """The results as a table, with Flink 1.13's per-core throughput for comparison."""
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"Nexmark: {n:,} events, one process per query, exactly-once v2 "
        "(events/s per core = events / CPU seconds of the query's process)"
    )
    columns = [
        "query",
        "engine",
        "events",
        "read",
        "seconds",
        "events/s",
        "CPU s",
        "events/s/core",
        "Flink 1.13/core",
        "ours/Flink",
        "RSS MB",
        "outputs",
        "check",
    ]
    for col in columns:
        table.add_column(col, justify="left" if col in ("query", "check") else "right")
    for r in results:
        flink = FLINK_PER_CORE.get(r.query)
        status = (
            "ok" if r.correct else (r.error[:80] or f"{len(r.problems)} wrong: {r.problems[:1]}")
        )
        table.add_row(
            r.query,
            r.engine,
            f"{r.events:,}",
            f"{r.input_records:,}",
            f"{r.seconds:.2f}",
            f"{r.rate:,.0f}",
            f"{r.cpu_seconds:.1f}",
            f"{r.per_core:,.0f}",
            f"{flink:,.0f}" if flink else "-",
            f"{r.per_core / flink:.3f}" if flink and r.per_core else "-",
            f"{r.peak_rss_mb:,.0f}",
            f"{r.output_records:,}",
            status,
        )
    Console(width=max(140, Console().width)).print(table)
