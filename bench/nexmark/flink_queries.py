"""Nexmark's Flink SQL queries exactly as Nexmark writes them, compiled here.

``bench/nexmark/flink_sql/q*.sql`` are Nexmark's files (``nexmark/nexmark`` at commit
6b3646c, ``nexmark-flink/src/main/resources/queries/``) unchanged, byte for byte. Their
sinks are Flink's ``'connector' = 'blackhole'``, which drops every row (appended or
updated);
``query_text`` swaps that option for a Kafka topic so that the rows can be checked, the
way Nexmark fills in its ``${...}`` parameters: ``'connector' = 'kafka'`` (no key) for an
append-only result, ``'upsert-kafka'`` with a ``PRIMARY KEY`` (``SINK_KEYS``, a JSON key)
for an updating one, as Flink needs of a Kafka sink too. The INSERTs are Nexmark's.
The queries read ``bench.nexmark.model.SQL_DDL`` (Nexmark's ``person``, ``auction`` and
``bid`` over this benchmark's topics).

Nexmark's ``${...}`` paths are filled in under ``nexmark_dir`` (``NEXMARK_DIR`` by default):
q10 writes its ``'filesystem'`` sink under ``${NEXMARK_DIR}/data/output/${SUBMIT_TIME}/bid/``
(``SUBMIT_TIME``: the output name, unique per run; ``file_output`` names the directory,
``file_records`` reads its rows back); q13 reads ``${FLINK_HOME}/data/side_input.txt``,
written as Nexmark's ``SideInputGenerator`` writes it (``write_side_input``). q14's Java
UDF runs as the Python stand-in ``bench.nexmark.udf`` registers.

``RUNS_VERBATIM`` are the queries that compile and run so; ``NOT_VERBATIM`` names, for
each other query, the construct the compiler refuses (the ``SqlError`` it raises) and why.
docs/sql/nexmark.md has the table.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.nexmark import udf
from bench.nexmark.model import AUCTION_TOPIC, BID_TOPIC, PERSON_TOPIC, SQL_DDL
from streaming import Topology
from streaming.sql import compile as compile_sql
from streaming.sql.filesystem import FileFormat, read_rows
from streaming.sql.formats import ColumnType

FLINK_DIR = Path(__file__).parent / "flink_sql"
BLACKHOLE = "'connector' = 'blackhole'"
JSON = "'format' = 'json', 'key.format' = 'json'"
#: the end of a sink's column list up to its blackhole connector option
_SINK_END = re.compile(r"\n\)\s*WITH\s*\(\s*" + re.escape(BLACKHOLE))

#: Nexmark's queries q0-q22
NEXMARK_QUERIES: tuple[str, ...] = tuple(f"q{n}" for n in range(23))

#: the input topics of each query that runs verbatim
TOPICS: dict[str, tuple[str, ...]] = {
    "q0": (BID_TOPIC,),
    "q1": (BID_TOPIC,),
    "q2": (BID_TOPIC,),
    "q3": (PERSON_TOPIC, AUCTION_TOPIC),
    "q4": (AUCTION_TOPIC, BID_TOPIC),
    "q5": (BID_TOPIC,),
    "q7": (BID_TOPIC,),
    "q8": (PERSON_TOPIC, AUCTION_TOPIC),
    "q9": (AUCTION_TOPIC, BID_TOPIC),
    "q10": (BID_TOPIC,),
    "q11": (BID_TOPIC,),
    "q12": (BID_TOPIC,),
    "q13": (BID_TOPIC,),
    "q14": (BID_TOPIC,),
    "q15": (BID_TOPIC,),
    "q16": (BID_TOPIC,),
    "q17": (BID_TOPIC,),
    "q18": (BID_TOPIC,),
    "q19": (BID_TOPIC,),
    "q20": (AUCTION_TOPIC, BID_TOPIC),
    "q21": (BID_TOPIC,),
    "q22": (BID_TOPIC,),
}

#: the primary key of the upsert sink of each query whose result is updating (Flink's
#: blackhole takes updates; a Kafka topic takes them keyed, as 'upsert-kafka')
SINK_KEYS: dict[str, tuple[str, ...]] = {
    "q4": ("id",),
    # the rows of a Top-N over a regular join are keyed by all their columns
    "q9": (
        "id",
        "itemName",
        "description",
        "initialBid",
        "reserve",
        "dateTime",
        "expires",
        "seller",
        "category",
        "extra",
        "auction",
        "bidder",
        "price",
        "bid_dateTime",
        "bid_extra",
    ),
    "q15": ("day",),
    "q16": ("channel", "day"),
    "q17": ("auction", "day"),
    "q18": ("bidder", "auction"),
    "q19": ("auction", "rank_number"),
}

#: the queries that compile and run unchanged, in Nexmark's order
RUNS_VERBATIM: tuple[str, ...] = tuple(q for q in NEXMARK_QUERIES if q in TOPICS)

#: the queries whose windows are on processing time (q12): their rows depend on the wall
#: clock, so what is checked is what does not (``flink_reference``): per bidder, the
#: counts sum to its bids, each window once, aligned to its size
PROCESSING_TIME: tuple[str, ...] = ("q12",)
#: how long of wall-clock time closes every processing-time window after the input
PROCESSING_TIME_CLOSE_MS = 20_000


@dataclass(frozen=True)
class Refusal:
    """Why a query does not run verbatim: ``error`` is a fragment of the ``SqlError``'s
    message, ``missing`` what the compiler (or this benchmark) lacks for it."""

    error: str
    missing: str


NOT_VERBATIM: dict[str, Refusal] = {
    "q6": Refusal(
        "Top-N or deduplication (ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)) is not "
        "supported yet here",
        "ROW_NUMBER over a join, and an OVER aggregation over its updating result (Flink "
        "does not run q6 either)",
    ),
}

#: where Nexmark's ``${NEXMARK_DIR}`` and ``${FLINK_HOME}`` paths are by default
NEXMARK_DIR = Path(os.environ.get("NEXMARK_DIR") or Path(tempfile.gettempdir()) / "nexmark")
#: the queries whose sink is a 'filesystem' table: its directory under ``${NEXMARK_DIR}``
#: (``${SUBMIT_TIME}`` is the output name), and the table's columns in its files
FILE_SINKS: dict[str, tuple[str, dict[str, str]]] = {
    "q10": (
        "data/output/{output}/bid",
        {"auction": "BIGINT", "bidder": "BIGINT", "price": "BIGINT"}
        | {"dateTime": "TIMESTAMP", "extra": "STRING"},
    ),
}
#: q10's partition columns
FILE_PARTITIONS: dict[str, tuple[str, ...]] = {"q10": ("dt", "hm")}
#: the rows of Nexmark's side input (``SideInputGenerator --num 10000``)
SIDE_INPUT_ROWS = 10_000


def nexmark_text(name: str) -> str:
    """Nexmark's file of query ``name``, as it is."""
    path = FLINK_DIR / f"{name}.sql"
    if not path.exists():
        raise KeyError(f"Nexmark has no {name}; it has: {', '.join(NEXMARK_QUERIES)}")
    return path.read_text()


def query_text(name: str, output: str, nexmark_dir: Path = NEXMARK_DIR) -> str:
    """Query ``name`` with its blackhole sink writing to the topic ``output`` instead: an
    append-only Kafka sink, or for an updating result (``SINK_KEYS``) an upsert-kafka
    sink with the primary key put last in its column list; Nexmark's ``${...}`` paths
    under ``nexmark_dir``."""
    text = (
        nexmark_text(name)
        .replace("${NEXMARK_DIR}", str(nexmark_dir))
        .replace("${SUBMIT_TIME}", output)
        .replace("${FLINK_HOME}", str(nexmark_dir / "flink"))
    )
    keys = SINK_KEYS.get(name)
    if keys is None:
        return text.replace(
            BLACKHOLE, f"'connector' = 'kafka', 'topic' = '{output}', 'format' = 'json'"
        )
    primary_key = ", ".join(f"`{key}`" for key in keys)
    upsert = f"'connector' = 'upsert-kafka', 'topic' = '{output}', {JSON}"
    return _SINK_END.sub(
        lambda _: f",\n  PRIMARY KEY ({primary_key}) NOT ENFORCED\n) WITH (\n  {upsert}", text
    )


def topology(name: str, output: str, nexmark_dir: Path = NEXMARK_DIR) -> Topology:
    """Query ``name`` compiled over the benchmark's topics, writing to ``output`` (q13:
    its side input file written first if missing)."""
    if name == "q13":
        write_side_input(nexmark_dir)
    udf.register()
    return compile_sql(SQL_DDL + query_text(name, output, nexmark_dir))


def side_input_path(nexmark_dir: Path = NEXMARK_DIR) -> Path:
    """``${FLINK_HOME}/data/side_input.txt``, q13's side input."""
    return nexmark_dir / "flink" / "data" / "side_input.txt"


def write_side_input(nexmark_dir: Path = NEXMARK_DIR) -> Path:
    """q13's side input as Nexmark's ``SideInputGenerator`` writes it (``i,i`` for i below
    ``SIDE_INPUT_ROWS``), unless it is there; written to a temporary name and renamed, so
    a reader never sees part of it."""
    path = side_input_path(nexmark_dir)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text("".join(f"{i},{i}\n" for i in range(SIDE_INPUT_ROWS)))
        partial.rename(path)
    return path


def file_output(name: str, output: str, nexmark_dir: Path = NEXMARK_DIR) -> Path | None:
    """The directory of query ``name``'s 'filesystem' sink (None: its sink is a topic)."""
    sink = FILE_SINKS.get(name)
    return None if sink is None else nexmark_dir / sink[0].format(output=output)


def file_records(name: str, root: Path) -> list[tuple[str | None, dict[str, Any]]]:
    """The rows in the visible files of query ``name``'s sink at ``root``, as (no key,
    row) pairs like a topic's records, partition columns read from the directories."""
    columns = {column: ColumnType(kind, kind) for column, kind in FILE_SINKS[name][1].items()}
    rows = read_rows(root, FileFormat("csv", columns, {}), FILE_PARTITIONS.get(name, ()))
    return [(None, row) for row in rows]
