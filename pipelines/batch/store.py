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

from pipelines.lake.cut import LakeCut, decode_cuts, encode_cuts
from pipelines.lake.paths import batch_dir, hour_dir, lake_root
from pipelines.lake.writer import write_table

#: the Parquet key of a result's input cuts (``pipelines.lake.cut``)
CUTS_KEY = b"platform.lake_cuts"

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
    result: str,
    hour: str,
    frame: Any,
    lake: Path | None = None,
    *,
    source: str = LAKE,
    cuts: dict[str, LakeCut] | None = None,
) -> Path:
    """Replace ``result``'s file of ``hour`` (computed from ``source``) with ``frame``.

    ``frame`` is a pandas DataFrame or an Arrow table; ``cuts``: the lake files it was
    computed from, per topic, kept in the file's metadata (``read_result_cuts``).
    """
    table = (
        frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    )
    if cuts:
        metadata = dict(table.schema.metadata or {})
        metadata[CUTS_KEY] = encode_cuts(cuts)
        table = table.replace_schema_metadata(metadata)
    path = result_path(result, hour, lake, source=source)
    write_table(path, table)
    return path


def read_result(result: str, hour: str, lake: Path | None = None, *, source: str = LAKE) -> Any:
    """The pandas DataFrame of batch ``result`` for ``hour`` computed from ``source`` (None
    when never computed)."""
    import pyarrow.parquet as pq

    path = result_path(result, hour, lake, source=source)
    return pq.read_table(path).to_pandas() if path.exists() else None


def read_result_cuts(
    result: str, hour: str, lake: Path | None = None, *, source: str = LAKE
) -> dict[str, LakeCut]:
    """The lake cuts batch ``result`` of ``hour`` was computed from, per topic (empty when
    it was not computed, or not from cuts of the lake)."""
    import pyarrow.parquet as pq

    path = result_path(result, hour, lake, source=source)
    if not path.exists():
        return {}
    raw = (pq.read_schema(path).metadata or {}).get(CUTS_KEY)
    return decode_cuts(raw) if raw else {}
