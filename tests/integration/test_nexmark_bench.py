"""``python -m bench.nexmark``'s runner end to end on the real broker: a few thousand Nexmark
events produced once, then each as its own exactly-once process: q4 (a windowed stream-stream
join and a table aggregation with a subtractor, through a repartition topic), q6 (a
``Processor`` closing auctions on stream-time punctuation, then a table aggregation), q8 (a
windowed join of a topic with a repartition topic the application fills itself:
``max.task.idle.ms``), q11 (session windows emitted on close, which needs the flush bid
after the throttle) and Nexmark's SQL q10 (its 'filesystem' sink's files, visible only once
committed); every output, read back read_committed (q10's: the visible files once the
query stopped), must equal DuckDB's result."""

from __future__ import annotations

from pathlib import Path

from bench.nexmark.run import prepare, run_query
from streaming.testing import LocalKafkaCluster

EVENTS = 3_000


def test_nexmark_queries_on_the_broker_are_verified(
    kafka_cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    # 500 events/s of event time: 6 s, so q11's sessions close and q4's auctions get bids
    config, events = prepare(kafka_cluster, EVENTS, events_per_second=500, seed=11, partitions=1)
    for query, engine in (
        ("q4", "dsl"),
        ("q6", "dsl"),
        ("q8", "dsl"),
        ("q11", "dsl"),
        ("q10", "sql"),
    ):
        result = run_query(
            query,
            kafka=kafka_cluster,
            config=config,
            events=events,
            generated=EVENTS,
            workdir=tmp_path,
            timeout=300,
            engine=engine,
        )
        assert result.error == ""
        assert result.problems == []
        assert result.output_records > 0
        assert result.seconds > 0 and result.cpu_seconds > 0
