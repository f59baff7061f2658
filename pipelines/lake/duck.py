"""DuckDB views over the lake: one view per topic and per batch result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines import domain
from pipelines.lake.cut import LakeCut
from pipelines.lake.paths import batch_dir, lake_root, topic_dir


def view_name(topic: str) -> str:
    """The SQL view name of ``topic`` (``revenue-per-region-5m`` -> ``revenue_per_region_5m``)."""
    return topic.replace("-", "_").replace(".", "_")


def parquet_glob(base: Path) -> str:
    """The glob of every part file under ``base``."""
    return str(base / "event_hour=*" / "*.parquet")


def has_files(base: Path) -> bool:
    """Whether ``base`` holds any part file."""
    return base.exists() and any(base.glob("event_hour=*/*.parquet"))


def create_views(
    con: Any, lake: Path | None = None, topics: tuple[str, ...] | None = None
) -> list[str]:
    """Create (or replace) a view per landed topic and batch result; returns the names."""
    lake = lake_root(lake)
    topics = topics or (*domain.RAW_TOPICS, *domain.DERIVED_TOPICS)
    sources = {view_name(t): topic_dir(lake, t) for t in topics}
    batch_root = lake / "batch"
    if batch_root.exists():
        for result in sorted(p.name for p in batch_root.iterdir() if p.is_dir()):
            sources[f"batch_{result}"] = batch_dir(lake, result)
    created = []
    for name, base in sources.items():
        if not has_files(base):
            continue
        con.execute(
            f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet("
            f"'{parquet_glob(base)}', hive_partitioning = true, union_by_name = true, "
            "hive_types = {'event_hour': VARCHAR})"
        )
        created.append(name)
    return created


def connect(lake: Path | None = None, database: str = ":memory:") -> Any:
    """A DuckDB connection with the lake's views."""
    import duckdb

    con = duckdb.connect(database)
    create_views(con, lake)
    return con


def read_topic(topic: str, lake: Path | None = None, *, valid_only: bool = True) -> Any:
    """Every landed row of ``topic`` as a pandas DataFrame (empty when nothing landed)."""
    import duckdb
    import pandas as pd

    from pipelines.lake.records import arrow_schema

    base = topic_dir(lake_root(lake), topic)
    if not has_files(base):
        return arrow_schema(topic).empty_table().to_pandas()
    where = " WHERE _valid" if valid_only else ""
    con = duckdb.connect()
    try:
        df = con.execute(
            f"SELECT * FROM read_parquet('{parquet_glob(base)}', hive_partitioning = true, "
            f"union_by_name = true, hive_types = {{'event_hour': VARCHAR}}){where} "
            "ORDER BY _partition, _offset"
        ).df()
    finally:
        con.close()
    return pd.DataFrame(df)


def read_topic_hours(
    topic: str,
    hours: list[str],
    lake: Path | None = None,
    *,
    valid_only: bool = True,
    cut: LakeCut | None = None,
) -> Any:
    """The landed rows of ``topic`` in the ``event_hour`` folders ``hours`` (pandas; only
    the files within ``cut``, when given)."""
    import duckdb

    from pipelines.lake.paths import hour_dir
    from pipelines.lake.records import arrow_schema

    base = topic_dir(lake_root(lake), topic)
    paths = [p for h in hours for p in sorted(hour_dir(base, h).glob("*.parquet"))]
    files = [str(p) for p in (paths if cut is None else cut.select(paths))]
    if not files:
        return arrow_schema(topic).empty_table().to_pandas()
    where = " WHERE _valid" if valid_only else ""
    con = duckdb.connect()
    try:
        return con.execute(
            "SELECT * FROM read_parquet(?, union_by_name = true)"
            f"{where} ORDER BY _partition, _offset",
            [files],
        ).df()
    finally:
        con.close()
