"""``filesystem`` tables in the DuckDB translation (``streaming.sql.batch``,
``batch_files``): a sink's query gives the rows its files hold, DuckDB reads a table's
files as the stream reads them, and a processing-time lookup join gives the stream's rows
while the files stay as they are (the batch meets the table as it is when it runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb
from streaming.sql.batch_files import read_sql
from streaming.sql.catalog import TableDef
from streaming.sql.compiler import Compiler
from streaming.sql.file_tables import file_format
from streaming.sql.filesystem import directory, read_rows

BIDS = """
CREATE TABLE bids (auction BIGINT, price BIGINT, note STRING, ts TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'bids', 'format' = 'json');
"""
ROWS = [
    {"auction": 1, "price": 5, "note": "plain", "ts": "2024-01-01 10:05:01.000"},
    {"auction": 2, "price": 6, "note": 'say "hi", bye', "ts": "2024-01-01 10:05:02.000"},
    {"auction": 3, "price": 7, "note": None, "ts": "2024-01-01 11:00:00.000"},
    {"auction": 4, "price": 8, "note": "x", "ts": None},
]


def batch(sql: str, relations: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows of ``to_duckdb(sql)`` over ``relations`` (file tables: their files)."""
    con = duckdb.connect()
    try:
        frames = {name: pd.DataFrame(rows) for name, rows in relations.items()}
        return to_duckdb(sql).run(con, frames)
    finally:
        con.close()


def by(rows: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in keys))


def table(sql: str, name: str) -> TableDef:
    compiler = Compiler(sql)
    compiler.compile_all()
    return compiler.tables[name]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_a_filesystem_sinks_query_gives_the_rows_its_files_hold(tmp_path: Path, fmt: str):
    """The SELECT into the sink's columns, partition columns included, is what the
    stream's files hold once read back (CSV has no NULL string: the rows have none)."""
    sql = (
        BIDS
        + f"""
CREATE TABLE logged (auction BIGINT, note STRING, ts TIMESTAMP(3), dt STRING, hm STRING)
PARTITIONED BY (dt, hm) WITH ('connector' = 'filesystem', 'path' = 'file://{tmp_path}/',
  'format' = '{fmt}');
INSERT INTO logged
SELECT auction, note, ts, DATE_FORMAT(ts, 'yyyy-MM-dd'), DATE_FORMAT(ts, 'HH:mm') FROM bids;
"""
    )
    rows = ROWS if fmt == "json" else [{**r, "note": r["note"] or "n"} for r in ROWS]
    with TopologyTestDriver(compile(sql), {"application.id": "files"}) as driver:
        source = driver.create_input_topic("bids", key_serde=serdes.String())
        for row in rows:
            source.pipe_input(None, row)
    sink = table(sql, "logged")
    written = list(read_rows(directory(sink.options["path"]), file_format(sink), ("dt", "hm")))
    assert len(written) == len(rows)
    translated = batch(sql, {"bids": rows})
    assert by(translated, "auction") == by(written, "auction")
    assert translated[0] | {"note": "?"} == {
        "auction": 1,
        "note": "?",
        "ts": "2024-01-01 10:05:01.000",
        "dt": "2024-01-01",
        "hm": "10:05",
    }


FILE_TABLE = """
CREATE TABLE side (s STRING, n BIGINT, d DOUBLE, b BOOLEAN, t TIMESTAMP(3), dt STRING)
PARTITIONED BY (dt) WITH ('connector' = 'filesystem', 'path' = 'file://{path}',
  'format' = '{fmt}'{options});
"""
CSV_FILES = {
    "dt=2024-01-01/part-0": 'plain,1,1.5,true,"2024-01-01 10:00:00.000"\n'
    '"x, ""y""\nz", 7 ,-2.25,FALSE,\n',
    "dt=__DEFAULT_PARTITION__/part-1": ",,,,\n",
    "dt=2024-01-01/.part-3.inprogress": "hidden,9,9.0,true,\n",
    "_SUCCESS": "",
}
NULL_LITERAL = ", 'csv.null-literal' = 'N/A'"
JSON_FILES = {
    "dt=2024-01-01/part-0": '{"s": "plain", "n": 1, "d": 1.5, "b": true, '
    '"t": "2024-01-01 10:00:00.000"}\n{"s": "x, \\"y\\"", "n": null}\n',
    "dt=__DEFAULT_PARTITION__/part-1": '{"s": "", "d": -2}\n',
    "dt=2024-01-01/.part-3.inprogress": '{"s": "hidden"}\n',
}


@pytest.mark.parametrize(
    ("fmt", "files", "options"),
    [
        ("csv", CSV_FILES, ""),
        ("csv", CSV_FILES | {"dt=10%3A05/part-2": "N/A,N/A,N/A,N/A,N/A\n"}, NULL_LITERAL),
        ("json", JSON_FILES, ""),
    ],
)
def test_duckdb_reads_a_file_table_as_the_stream_reads_it(
    tmp_path: Path, fmt: str, files: dict[str, str], options: str
):
    """Quoted fields, empty ones (NULL but in STRING columns), the null literal, spaces
    around numbers, booleans in any case, escaped and default partitions, hidden files."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    side = table(BIDS + FILE_TABLE.format(path=tmp_path, fmt=fmt, options=options), "side")
    streamed = list(read_rows(tmp_path, file_format(side), side.partition_keys))
    con = duckdb.connect()
    try:
        cursor = con.execute(read_sql(side))
        names = [d[0] for d in cursor.description]
        read = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()
    assert len(streamed) == (3 if fmt == "json" else 3 + (options == NULL_LITERAL))
    assert by(read, "s", "dt") == by(streamed, "s", "dt")
    assert not any(r["s"] == "hidden" for r in read)


def test_duckdb_reads_an_empty_file_table_as_no_rows(tmp_path: Path):
    side = table(BIDS + FILE_TABLE.format(path=tmp_path, fmt="csv", options=""), "side")
    assert duckdb.connect().execute(read_sql(side)).fetchall() == []


LOOKUP = """
CREATE TABLE bids (auction BIGINT, price BIGINT, note STRING)
WITH ('connector' = 'kafka', 'topic' = 'bids', 'format' = 'json');
CREATE TABLE side (key BIGINT, `value` VARCHAR) WITH (
  'connector.type' = 'filesystem', 'connector.path' = 'file://{path}', 'format.type' = 'csv');
CREATE TABLE out (auction BIGINT, price BIGINT, `value` VARCHAR)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT B.auction, B.price, S.`value`
FROM (SELECT *, PROCTIME() AS p FROM bids WHERE price > 0) B
{join} side FOR SYSTEM_TIME AS OF B.p AS S ON MOD(B.auction, 10) = S.key;
"""
LOOKED_UP = [
    {"auction": auction, "price": price, "note": None}
    for auction, price in ((11, 5), (22, 5), (33, 5), (None, 5), (21, -1), (2, 6))
]


@pytest.mark.parametrize("join", ["JOIN", "LEFT JOIN"])
def test_a_lookup_join_in_batch_gives_the_streams_rows(tmp_path: Path, join: str):
    """Nexmark q13's shape (a subquery adding PROCTIME(), filtered): each row meets the
    file's rows of its key; the batch reads the file as it is when it runs."""
    side = tmp_path / "side_input.txt"
    side.write_text('1,one\n2,two\n2,"two, again"\n')
    sql = LOOKUP.format(path=side, join=join)
    with TopologyTestDriver(compile(sql)) as driver:
        bids = driver.create_input_topic("bids", key_serde=serdes.String())
        for row in LOOKED_UP:
            bids.pipe_input(None, row)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        stream = [r.value for r in out.read_records_to_list()]
    translated = batch(sql, {"bids": LOOKED_UP})
    assert by(translated, "auction", "value") == by(stream, "auction", "value")
    matched = [(r["auction"], r["value"]) for r in by(stream, "auction", "value")]
    assert matched[:4] == [(11, "one"), (2, "two"), (2, "two, again"), (22, "two")]
    assert len(matched) == (5 if join == "JOIN" else 7)
    side.write_text("3,three\n")  # the table as it is when the batch runs
    later = batch(sql, {"bids": LOOKED_UP})
    assert [(r["auction"], r["value"]) for r in by(later, "auction") if r["value"]] == [
        (33, "three")
    ]


def test_processing_time_windows_are_not_translated():
    sql = (
        BIDS
        + """
CREATE TABLE counts (auction BIGINT, n BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'counts', 'format' = 'json');
CREATE VIEW B AS SELECT *, PROCTIME() AS p FROM bids;
INSERT INTO counts SELECT auction, COUNT(*), window_start, window_end
FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(p), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
"""
    )
    with pytest.raises(SqlError, match="TUMBLE over p, the processing time of B"):
        to_duckdb(sql)
