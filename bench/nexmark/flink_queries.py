"""Nexmark's Flink SQL queries exactly as Nexmark writes them, compiled here.

``bench/nexmark/flink_sql/q*.sql`` are Nexmark's files (``nexmark/nexmark``,
``nexmark-flink/src/main/resources/queries/``) unchanged. Their sinks are Flink's
``'connector' = 'blackhole'``, which drops every row; ``query_text`` swaps that one option
for a Kafka topic (``'connector' = 'kafka', 'topic' = <output>, 'format' = 'json'``, no
key) so that the rows can be checked, the way Nexmark fills in its ``${...}`` parameters.
The queries read ``bench.nexmark.model.SQL_DDL`` (Nexmark's ``person``, ``auction`` and
``bid`` over this benchmark's topics).

``RUNS_VERBATIM`` are the queries that compile and run so; ``NOT_VERBATIM`` names, for
each other query, the construct the compiler refuses (the ``SqlError`` it raises) and why.
docs/sql/nexmark.md has the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.nexmark.model import AUCTION_TOPIC, BID_TOPIC, PERSON_TOPIC, SQL_DDL
from streaming import Topology
from streaming.sql import compile as compile_sql

FLINK_DIR = Path(__file__).parent / "flink_sql"
BLACKHOLE = "'connector' = 'blackhole'"

#: Nexmark's queries q0-q22
NEXMARK_QUERIES: tuple[str, ...] = tuple(f"q{n}" for n in range(23))

#: the input topics of each query that runs verbatim
TOPICS: dict[str, tuple[str, ...]] = {
    "q0": (BID_TOPIC,),
    "q1": (BID_TOPIC,),
    "q2": (BID_TOPIC,),
    "q5": (BID_TOPIC,),
    "q7": (BID_TOPIC,),
    "q8": (PERSON_TOPIC, AUCTION_TOPIC),
    "q11": (BID_TOPIC,),
    "q21": (BID_TOPIC,),
    "q22": (BID_TOPIC,),
}

#: the queries that compile and run unchanged, in Nexmark's order
RUNS_VERBATIM: tuple[str, ...] = tuple(q for q in NEXMARK_QUERIES if q in TOPICS)


@dataclass(frozen=True)
class Refusal:
    """Why a query does not run verbatim: ``error`` is a fragment of the ``SqlError``'s
    message, ``missing`` what the compiler (or this benchmark) lacks for it."""

    error: str
    missing: str


NOT_VERBATIM: dict[str, Refusal] = {
    "q3": Refusal(
        "a join of two streams needs a time bound",
        "a regular (unbounded) join of two streams (auction x person)",
    ),
    "q4": Refusal(
        "expires is not a time attribute of auction",
        "a regular join of two streams with a non-equi condition (B.dateTime BETWEEN "
        "A.dateTime AND A.expires), and an updating result into a sink without a PRIMARY KEY",
    ),
    "q6": Refusal(
        "Top-N or deduplication (ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)) is not "
        "supported yet here",
        "ROW_NUMBER over a join, and an OVER aggregation over its updating result (Flink "
        "does not run q6 either)",
    ),
    "q9": Refusal(
        "SELECT * is not supported yet",
        "A.* in a join's select list, a regular join of two streams, Top-N over it",
    ),
    "q10": Refusal(
        "unsupported table property PARTITIONED BY",
        "a partitioned 'filesystem' sink (PARTITIONED BY, partition commit)",
    ),
    "q12": Refusal(
        "SELECT * is not supported yet",
        "SELECT *, PROCTIME() in a view, and a TUMBLE window TVF on processing time",
    ),
    "q13": Refusal(
        "unknown table option 'connector.path'",
        "a bounded 'filesystem' side input (legacy 'connector.type' options) for a "
        "processing-time lookup join",
    ),
    "q14": Refusal(
        "only LANGUAGE PYTHON functions run here",
        "Nexmark's Java UDF (com.github.nexmark.flink.udf.CountChar)",
    ),
    "q15": Refusal(
        "only columns and windows are supported",
        "GROUP BY an expression (DATE_FORMAT(...)); then COUNT(DISTINCT ...) FILTER (WHERE "
        "...) and an updating result into a sink without a PRIMARY KEY",
    ),
    "q16": Refusal(
        "only columns and windows are supported",
        "GROUP BY an expression (DATE_FORMAT(...)), as q15",
    ),
    "q17": Refusal(
        "only columns and windows are supported",
        "GROUP BY an expression (DATE_FORMAT(...)), as q15",
    ),
    "q18": Refusal(
        "the result is updating",
        "none in the compiler (keep-last deduplication compiles): its result is updating and "
        "the sink has no PRIMARY KEY, which a Kafka sink needs (Flink's blackhole takes updates)",
    ),
    "q19": Refusal(
        "the result is updating",
        "none in the compiler (Top-N compiles): its result is updating and the sink has no "
        "PRIMARY KEY, which a Kafka sink needs (Flink's blackhole takes updates)",
    ),
    "q20": Refusal(
        "a join of two streams needs a time bound",
        "a regular (unbounded) join of two streams (bid x auction)",
    ),
}


def nexmark_text(name: str) -> str:
    """Nexmark's file of query ``name``, as it is."""
    path = FLINK_DIR / f"{name}.sql"
    if not path.exists():
        raise KeyError(f"Nexmark has no {name}; it has: {', '.join(NEXMARK_QUERIES)}")
    return path.read_text()


def query_text(name: str, output: str) -> str:
    """Query ``name`` with its blackhole sink writing to the topic ``output`` instead."""
    text = nexmark_text(name)
    sink = f"'connector' = 'kafka', 'topic' = '{output}', 'format' = 'json'"
    return text.replace(BLACKHOLE, sink)


def topology(name: str, output: str) -> Topology:
    """Query ``name`` compiled over the benchmark's topics, writing to ``output``."""
    return compile_sql(SQL_DDL + query_text(name, output))
