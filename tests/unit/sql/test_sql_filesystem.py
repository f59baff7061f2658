"""Flink's 'filesystem' connector: a sink's files (Flink's partition layout and CSV
quoting), their visibility only once the task commits (exactly-once: abort and restart
too), and a bounded table read once for a processing-time lookup join."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.file_sink import FileSink
from streaming.sql.filesystem import (
    FileFormat,
    csv_line,
    escape_path_name,
    read_rows,
    unescape_path_name,
)
from streaming.sql.formats import ColumnType

BIDS = """
CREATE TABLE bids (auction BIGINT, price BIGINT, note STRING, ts TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'bids', 'format' = 'json');
"""


def sink_sql(path: Path, fmt: str = "csv") -> str:
    return (
        BIDS
        + f"""
CREATE TABLE logged (auction BIGINT, note STRING, ts TIMESTAMP(3), dt STRING, hm STRING)
PARTITIONED BY (dt, hm) WITH (
  'connector' = 'filesystem', 'path' = 'file://{path}/', 'format' = '{fmt}',
  'sink.rolling-policy.rollover-interval' = '1min'
);
INSERT INTO logged
SELECT auction, note, ts, DATE_FORMAT(ts, 'yyyy-MM-dd'), DATE_FORMAT(ts, 'HH:mm') FROM bids;
"""
    )


def pipe(sql: str, rows: list[dict[str, Any]]) -> None:
    with TopologyTestDriver(compile(sql), {"application.id": "files"}) as driver:
        bids = driver.create_input_topic("bids", key_serde=serdes.String())
        for row in rows:
            bids.pipe_input(None, row)


def files(root: Path) -> dict[str, str]:
    """Every file under ``root`` (hidden ones too) by relative path -> its text."""
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


ROWS = [
    {"auction": 1, "price": 5, "note": "plain", "ts": "2024-01-01 10:05:01.000"},
    {"auction": 2, "price": 6, "note": 'say "hi", bye', "ts": "2024-01-01 10:05:02.000"},
    {"auction": 3, "price": 7, "note": None, "ts": "2024-01-01 11:00:00.000"},
]


def test_sink_writes_partition_directories_without_the_partition_columns(tmp_path: Path):
    pipe(sink_sql(tmp_path), ROWS)
    written = files(tmp_path)
    assert sorted(str(Path(p).parent) for p in written) == [
        "dt=2024-01-01/hm=10%3A05",
        "dt=2024-01-01/hm=10%3A05",
        "dt=2024-01-01/hm=11%3A00",
    ]
    assert all(Path(p).name.startswith("part-") for p in written)  # none hidden: committed
    lines = sorted(line for text in written.values() for line in text.splitlines())
    assert lines == [
        '1,plain,"2024-01-01 10:05:01.000"',
        '2,"say ""hi"", bye","2024-01-01 10:05:02.000"',
        '3,,"2024-01-01 11:00:00.000"',
    ]


def test_sink_in_json_reads_back_with_its_partitions(tmp_path: Path):
    pipe(sink_sql(tmp_path, "json"), ROWS)
    columns = {"auction": "BIGINT", "note": "STRING", "ts": "TIMESTAMP"}
    fmt = FileFormat("json", {c: ColumnType(k, k) for c, k in columns.items()}, {})
    rows = sorted(read_rows(tmp_path, fmt, ("dt", "hm")), key=lambda r: r["auction"])
    assert rows == [
        {"auction": 1, "note": "plain", "ts": ROWS[0]["ts"], "dt": "2024-01-01", "hm": "10:05"},
        {"auction": 2, "note": ROWS[1]["note"], "ts": ROWS[1]["ts"]}
        | {"dt": "2024-01-01", "hm": "10:05"},
        {"auction": 3, "note": None, "ts": ROWS[2]["ts"], "dt": "2024-01-01", "hm": "11:00"},
    ]


@pytest.mark.parametrize(
    ("value", "kind", "written"),
    [
        ("plain", "STRING", "plain"),
        ("two words", "STRING", '"two words"'),  # a space is below Jackson's safe character
        ("a,b", "STRING", '"a,b"'),
        ('q"q', "STRING", '"q""q"'),
        ("line\nbreak", "STRING", '"line\nbreak"'),
        ("x" * 24, "STRING", "x" * 24),
        ("x" * 25, "STRING", '"' + "x" * 25 + '"'),  # longer than 24: quoted unchecked
        ("", "STRING", ""),
        (None, "STRING", ""),
        (-42, "BIGINT", "-42"),
        (1.5, "DOUBLE", "1.5"),
        (True, "BOOLEAN", "true"),
        ("2024-01-01 10:05:01.000", "TIMESTAMP", '"2024-01-01 10:05:01.000"'),
    ],
)
def test_csv_quoting_is_flinks(value: Any, kind: str, written: str):
    assert csv_line([value], [kind]) == written + "\n"


def test_csv_lines_read_back(tmp_path: Path):
    columns = {"a": ColumnType("STRING", "STRING"), "n": ColumnType("BIGINT", "BIGINT")}
    fmt = FileFormat("csv", columns, {})
    rows = [{"a": 'x, "y"\nz', "n": 1}, {"a": "two words", "n": None}, {"a": "", "n": 3}]
    (tmp_path / "part-0").write_bytes(b"".join(fmt.line(row) for row in rows))
    (tmp_path / ".part-1.inprogress").write_bytes(fmt.line({"a": "hidden", "n": 9}))
    (tmp_path / "_SUCCESS").write_bytes(b"")
    assert list(read_rows(tmp_path, fmt)) == rows


@pytest.mark.parametrize("value", ["10:05", "a/b=c?", "100%", "plain", "x{[]}^*'\"#\\"])
def test_partition_values_escape_as_flink_does_and_back(value: str):
    escaped = escape_path_name(value)
    assert not set(escaped) & set(":/=?{[]^*'\"#\\")
    assert unescape_path_name(escaped) == value
    assert escape_path_name("10:05") == "10%3A05"


class TaskContext:
    """What a store reads of its task when it opens."""

    application_id = "app"
    task_id = "0_1"

    def __init__(self, transactional: bool) -> None:
        self.transactional_state = transactional


def file_sink(root: Path, transactional: bool = True) -> FileSink:
    fmt = FileFormat("csv", {"n": ColumnType("BIGINT", "BIGINT")}, {})
    sink = FileSink("logged-files", root, fmt, ("p",))
    sink.init(TaskContext(transactional), sink)
    return sink


def visible(root: Path) -> list[str]:
    columns = {"n": ColumnType("BIGINT", "BIGINT")}
    return sorted(
        str(r["n"]) + r["p"] for r in read_rows(root, FileFormat("csv", columns, {}), ("p",))
    )


def test_exactly_once_files_become_visible_only_when_the_transaction_commits(tmp_path: Path):
    sink = file_sink(tmp_path)
    sink.write({"n": 1, "p": "a"})
    sink.write({"n": 2, "p": "b"})
    assert visible(tmp_path) == []
    assert sink.uncommitted_bytes > 0
    sink.flush()  # before the transaction commits: pending, still hidden
    assert visible(tmp_path) == []
    assert all(Path(p).name.endswith(".pending") for p in files(tmp_path))
    sink.commit({})
    assert visible(tmp_path) == ["1a", "2b"]
    assert sink.uncommitted_bytes == 0
    sink.write({"n": 3, "p": "a"})  # the next epoch: a new file
    sink.flush()
    sink.commit({})
    assert visible(tmp_path) == ["1a", "2b", "3a"]
    assert len(files(tmp_path)) == 3


def test_rows_after_a_flush_go_to_new_files_of_the_same_commit(tmp_path: Path):
    sink = file_sink(tmp_path)
    sink.write({"n": 1, "p": "a"})
    sink.flush()
    sink.write({"n": 2, "p": "a"})
    sink.flush()
    sink.commit({})
    assert visible(tmp_path) == ["1a", "2a"]
    assert len(files(tmp_path)) == 2


def test_an_aborted_transaction_leaves_no_file(tmp_path: Path):
    sink = file_sink(tmp_path)
    sink.write({"n": 1, "p": "a"})
    sink.flush()
    sink.commit({})
    sink.write({"n": 2, "p": "a"})
    sink.flush()
    sink.write({"n": 3, "p": "b"})
    sink.close()  # closed without the commit: the transaction aborted
    assert visible(tmp_path) == ["1a"]
    assert len(files(tmp_path)) == 2  # the pending file of epoch 1, still hidden
    restarted = file_sink(tmp_path)
    restarted.recover(0)  # the committed epoch: 0
    assert visible(tmp_path) == ["1a"]
    assert len(files(tmp_path)) == 1


@pytest.mark.parametrize(("committed", "seen"), [(0, ["1a"]), (None, [])])
def test_a_restart_publishes_the_pending_files_of_a_committed_epoch(
    tmp_path: Path, committed: int | None, seen: list[str]
):
    """A task died after its transaction committed (epoch 0 in its processor metadata)
    but before it renamed its pending files, or before the commit (nothing committed)."""
    dead = file_sink(tmp_path)
    dead.write({"n": 1, "p": "a"})
    dead.flush()
    restarted = file_sink(tmp_path)
    restarted.recover(committed)
    assert visible(tmp_path) == seen
    assert len(files(tmp_path)) == len(seen)  # no hidden file is left
    assert restarted.epoch == (0 if committed is None else committed + 1)


def test_without_exactly_once_a_flush_makes_the_files_visible(tmp_path: Path):
    sink = file_sink(tmp_path, transactional=False)
    sink.write({"n": 1, "p": "a"})
    sink.flush()
    assert visible(tmp_path) == ["1a"]


LOOKUP = """
CREATE TABLE bids (auction BIGINT, price BIGINT, p AS PROCTIME())
WITH ('connector' = 'kafka', 'topic' = 'bids', 'format' = 'json');
CREATE TABLE side (key BIGINT, `value` VARCHAR) WITH (
  'connector.type' = 'filesystem', 'connector.path' = 'file://{path}', 'format.type' = 'csv');
CREATE TABLE out (auction BIGINT, price BIGINT, `value` VARCHAR)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT B.auction, B.price, S.`value`
FROM bids B {join} side FOR SYSTEM_TIME AS OF B.p AS S ON MOD(B.auction, 10) = S.key;
"""


def lookup(tmp_path: Path, join: str = "JOIN") -> list[dict[str, Any]]:
    side = tmp_path / "side_input.txt"
    side.write_text('1,one\n2,two\n2,"two, again"\n')
    sql = LOOKUP.format(path=side, join=join)
    with TopologyTestDriver(compile(sql)) as driver:
        bids = driver.create_input_topic("bids", key_serde=serdes.String())
        for auction in (11, 22, 33, None):
            bids.pipe_input(None, {"auction": auction, "price": 5})
        side.write_text("3,three\n")  # bounded: read once, the change is not seen
        bids.pipe_input(None, {"auction": 3, "price": 6})
        out = driver.create_output_topic("out", key_serde=serdes.String())
        return [r.value for r in out.read_records_to_list()]


def test_a_bounded_file_table_is_a_lookup_join_read_once(tmp_path: Path):
    assert lookup(tmp_path) == [
        {"auction": 11, "price": 5, "value": "one"},
        {"auction": 22, "price": 5, "value": "two"},
        {"auction": 22, "price": 5, "value": "two, again"},
    ]


def test_a_left_lookup_join_keeps_the_rows_without_a_match(tmp_path: Path):
    rows = lookup(tmp_path, "LEFT JOIN")
    assert [(r["auction"], r["value"]) for r in rows] == [
        (11, "one"),
        (22, "two"),
        (22, "two, again"),
        (33, None),
        (None, None),
        (3, None),
    ]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            BIDS + "CREATE TABLE o (a BIGINT, d STRING) PARTITIONED BY (d) "
            "WITH ('connector' = 'kafka', 'topic' = 'o');",
            "PARTITIONED BY is a 'filesystem' table's partition directories",
        ),
        (
            BIDS + "CREATE TABLE o (a BIGINT) WITH ('connector' = 'filesystem', 'format' = 'csv');",
            "a 'filesystem' table needs a 'path'",
        ),
        (
            BIDS + "CREATE TABLE o (a BIGINT) "
            "WITH ('connector' = 'filesystem', 'path' = '/o', 'format' = 'avro');",
            "a 'filesystem' table's 'format' is csv or json, not 'avro'",
        ),
        (
            BIDS + "CREATE TABLE o (a BIGINT, d STRING) PARTITIONED BY (x) "
            "WITH ('connector' = 'filesystem', 'path' = '/o', 'format' = 'csv');",
            "PARTITIONED BY names unknown column x",
        ),
        (
            BIDS + "CREATE TABLE f (a BIGINT, n BIGINT) "
            "WITH ('connector' = 'filesystem', 'path' = '/f', 'format' = 'csv');\n"
            "INSERT INTO f SELECT auction, COUNT(*) FROM bids GROUP BY auction;",
            "the result is updating: a non-windowed aggregation updates its rows; a "
            "'filesystem' sink takes appended rows only",
        ),
        (
            BIDS + "CREATE TABLE f (a BIGINT) "
            "WITH ('connector' = 'filesystem', 'path' = '/f', 'format' = 'csv');\n"
            "CREATE TABLE o (a BIGINT) WITH ('connector' = 'kafka', 'topic' = 'o');\n"
            "INSERT INTO o SELECT a FROM f;",
            "f is a 'filesystem' table: it is read only as the table of a lookup join",
        ),
        (
            BIDS + "CREATE TABLE f (a BIGINT, b STRING) "
            "WITH ('connector' = 'filesystem', 'path' = '/f', 'format' = 'csv');\n"
            "CREATE TABLE o (a BIGINT, b STRING) WITH ('connector' = 'kafka', 'topic' = 'o');\n"
            "INSERT INTO o SELECT B.auction, F.b FROM bids B JOIN f F ON B.auction = F.a;",
            "f is a 'filesystem' table: it is read only as the table of a lookup join",
        ),
        (
            BIDS + "CREATE TABLE f (a BIGINT, b STRING) "
            "WITH ('connector' = 'filesystem', 'path' = '/f', 'format' = 'csv');\n"
            "CREATE TABLE o (a BIGINT, b STRING) WITH ('connector' = 'kafka', 'topic' = 'o');\n"
            "INSERT INTO o SELECT B.auction, F.b FROM bids B "
            "JOIN f FOR SYSTEM_TIME AS OF B.ts AS F ON B.auction = F.a;",
            "a stream joins it as a lookup table, FROM stream JOIN f FOR SYSTEM_TIME AS OF",
        ),
    ],
)
def test_filesystem_tables_are_refused_where_they_do_not_fit(sql: str, message: str):
    with pytest.raises(SqlError, match=message.replace("(", r"\(").replace(".", r"\.")):
        compile(sql)
