"""Lake topics as Spark DataFrames, restricted to a range of event hours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines import domain
from pipelines.lake.cut import LakeCut
from pipelines.lake.paths import HOUR_MS, hour_dir, hour_of, lake_root, topic_dir

_SPARK_TYPES = {
    "str": "string",
    "float": "double",
    "int": "bigint",
    "bool": "boolean",
    "list": "array<string>",
}
_META_DDL = (
    "_key string, _partition int, _offset bigint, _timestamp bigint, _valid boolean, "
    "_raw string, event_hour string"
)


def value_ddl(topic: str) -> str:
    """The Spark DDL schema of ``topic``'s record values (its columns in ``domain.SCHEMAS``)."""
    return ", ".join(f"`{n}` {_SPARK_TYPES[k]}" for n, k in domain.SCHEMAS[topic].items())


def spark_ddl(topic: str) -> str:
    """The Spark DDL schema of ``topic``'s lake table."""
    return f"{value_ddl(topic)}, {_META_DDL}"


def hours_between(start_ms: int, end_ms: int) -> list[str]:
    """``event_hour`` values of every hour overlapping ``[start_ms, end_ms)``."""
    first = start_ms - start_ms % HOUR_MS
    return [hour_of(ts) for ts in range(first, end_ms, HOUR_MS)]


def _read(spark: Any, topic: str, base: Path, files: list[Path]) -> Any:
    if not files:
        return spark.createDataFrame([], spark_ddl(topic))
    frame = spark.read.option("basePath", str(base)).parquet(*(str(f) for f in files))
    return frame.filter("_valid")


def read_hours(
    spark: Any,
    topic: str,
    start_ms: int,
    end_ms: int,
    lake: Path | None = None,
    cut: LakeCut | None = None,
) -> Any:
    """Valid rows of ``topic`` in the hour folders overlapping ``[start_ms, end_ms)`` (only
    the files within ``cut``, when given)."""
    base = topic_dir(lake_root(lake), topic)
    files = [
        f for h in hours_between(start_ms, end_ms) for f in hour_dir(base, h).glob("*.parquet")
    ]
    return _read(spark, topic, base, sorted(files if cut is None else cut.select(files)))


def read_all(spark: Any, topic: str, lake: Path | None = None, cut: LakeCut | None = None) -> Any:
    """Every valid row of ``topic`` (for small, compacted topics such as customers; only the
    files within ``cut``, when given)."""
    base = topic_dir(lake_root(lake), topic)
    files = list(base.glob("event_hour=*/*.parquet"))
    return _read(spark, topic, base, sorted(files if cut is None else cut.select(files)))
