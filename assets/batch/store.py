"""Batch results in the lake: one Parquet file per result and hour, replaced on re-run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from assets.lake.paths import batch_dir, hour_dir, lake_root
from assets.lake.writer import write_table


def write_result(result: str, hour: str, frame: Any, lake: Path | None = None) -> Path:
    """Replace ``<lake>/batch/<result>/event_hour=<hour>/part-0.parquet`` with ``frame``.

    ``frame`` is a pandas DataFrame or an Arrow table.
    """
    table = (
        frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    )
    path = hour_dir(batch_dir(lake_root(lake), result), hour) / "part-0.parquet"
    write_table(path, table)
    return path


def read_result(result: str, hour: str, lake: Path | None = None) -> Any:
    """The pandas DataFrame of batch ``result`` for ``hour`` (None when never computed)."""
    import pyarrow.parquet as pq

    path = hour_dir(batch_dir(lake_root(lake), result), hour) / "part-0.parquet"
    return pq.read_table(path).to_pandas() if path.exists() else None
