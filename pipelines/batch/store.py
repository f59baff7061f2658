"""Batch results in the lake: one Parquet file per result and hour, replaced on re-run.

Results computed from the lake (source ``"lake"``) live in ``<lake>/batch/<result>/``;
those computed from another source (``"kafka"``: the kappa path,
``pipelines.batch.kafka_source``) apart, in ``<lake>/batch/<result>_from_<source>/``
(``result_name``), so neither replaces the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from pipelines.lake.paths import batch_dir, hour_dir, lake_root
from pipelines.lake.writer import write_table

#: the batch recompute's sources: the Parquet lake, or the Kafka topics themselves
LAKE = "lake"
KAFKA = "kafka"


def result_name(result: str, source: str = LAKE) -> str:
    """The stored name of batch ``result`` computed from ``source`` (``revenue_5m``,
    ``revenue_5m_from_kafka``)."""
    return result if source == LAKE else f"{result}_from_{source}"


def result_path(result: str, hour: str, lake: Path | None = None, *, source: str = LAKE) -> Path:
    """``<lake>/batch/<result_name>/event_hour=<hour>/part-0.parquet``."""
    base = batch_dir(lake_root(lake), result_name(result, source))
    return hour_dir(base, hour) / "part-0.parquet"


def write_result(
    result: str, hour: str, frame: Any, lake: Path | None = None, *, source: str = LAKE
) -> Path:
    """Replace ``result``'s file of ``hour`` (computed from ``source``) with ``frame``.

    ``frame`` is a pandas DataFrame or an Arrow table.
    """
    table = (
        frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    )
    path = result_path(result, hour, lake, source=source)
    write_table(path, table)
    return path


def read_result(result: str, hour: str, lake: Path | None = None, *, source: str = LAKE) -> Any:
    """The pandas DataFrame of batch ``result`` for ``hour`` computed from ``source`` (None
    when never computed)."""
    import pyarrow.parquet as pq

    path = result_path(result, hour, lake, source=source)
    return pq.read_table(path).to_pandas() if path.exists() else None
