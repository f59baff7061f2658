"""Pure comparisons of stream results with batch results (pandas in, report out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pipelines.reconcile.tolerance import Tolerance

if TYPE_CHECKING:  # imported where used: a Dagster code location loads without pandas
    import pandas as pd

MATCH = "match"
VALUE_DIFF = "value_diff"
MISSING_IN_STREAM = "missing_in_stream"
MISSING_IN_BATCH = "missing_in_batch"
#: a final result the stream wrote more than once (its values may agree)
DUPLICATE_IN_STREAM = "duplicate_in_stream"


def _empty_frame() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame()


@dataclass
class Reconciliation:
    """The outcome of one comparison: pass/fail, statistics, per-key table, worst keys."""

    name: str
    passed: bool
    stats: dict[str, Any]
    table: pd.DataFrame
    worst: pd.DataFrame = field(default_factory=_empty_frame)

    def summary(self) -> str:
        """One line for logs and check descriptions."""
        s = self.stats
        return (
            f"{self.name}: {'PASS' if self.passed else 'FAIL'}; {s['batch_rows']} batch / "
            f"{s['stream_rows']} stream keys, {s['matched']} match, {s['unexplained']} "
            f"unexplained, {s['explained_by_late_data']} explained by late data"
        )


def latest_per_key(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """The last record per key in arrival order (a changelog's current value)."""
    if frame.empty:
        return frame
    order = [c for c in ("_partition", "_offset") if c in frame.columns]
    ordered = frame.sort_values(order, kind="stable") if order else frame
    return ordered.drop_duplicates(list(keys), keep="last")


def _int_keys(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    import pandas as pd

    for key in keys:
        if pd.api.types.is_numeric_dtype(frame[key]):
            frame[key] = frame[key].astype("int64")
    return frame


def compare_keyed(
    name: str,
    stream: pd.DataFrame,
    batch: pd.DataFrame,
    *,
    keys: Sequence[str],
    values: Sequence[str] = (),
    late: pd.DataFrame | None = None,
    count_column: str | None = None,
    late_values: Mapping[str, str] | None = None,
    tolerance: Tolerance | None = None,
    worst_limit: int = 20,
    final: bool = False,
) -> Reconciliation:
    """Compare ``stream`` with ``batch`` on ``keys`` (and ``values``, if any).

    ``final``: the stream writes each key once (a window emitted on close, a session, an
    alert); a key it wrote more than once is an unexplained difference
    (``DUPLICATE_IN_STREAM`` when its last value agrees), counted in ``duplicates``. Without
    it the stream's last record per key is its value (a changelog).

    ``late`` (columns ``keys`` + ``late_count`` and the columns ``late_values`` names)
    holds the records the stream dropped as late. A differing key is *explained by late
    data* when the stream's shortfall is exactly what it dropped: ``count_column`` lower
    than batch by ``late_count`` and each value ``v`` lower by ``late[late_values[v]]``
    (without ``count_column``: a key the stream lacks that has late records). Everything else
    that differs is *unexplained*; ``tolerance`` decides how much of it passes.
    """
    import pandas as pd

    tolerance = tolerance or Tolerance()
    keys = list(keys)
    values = list(values)
    s = latest_per_key(stream, keys)[keys + values].copy()
    copies = (
        stream.groupby(keys, dropna=False).size().rename("stream_records").reset_index()
        if final and not stream.empty
        else None
    )
    b = batch[keys + values].drop_duplicates(keys).copy()
    for frame in (s, b):
        _int_keys(frame, keys)
    if copies is not None:
        s = s.merge(_int_keys(copies, keys), on=keys, how="left")
    merged = b.merge(s, on=keys, how="outer", suffixes=("_batch", "_stream"), indicator=True)
    late_values = dict(late_values or {})
    late_columns = ["late_count", *late_values.values()]
    if late is not None and not late.empty:
        late_frame = _int_keys(late[[*keys, *late_columns]].copy(), keys)
        merged = merged.merge(late_frame, on=keys, how="left")
    else:
        for column in late_columns:
            merged[column] = 0
    for column in late_columns:
        merged[column] = merged[column].fillna(0).astype("int64")

    status = np.where(
        merged["_merge"] == "left_only",
        MISSING_IN_STREAM,
        np.where(merged["_merge"] == "right_only", MISSING_IN_BATCH, MATCH),
    )
    worst_diff = np.zeros(len(merged))
    for value in values:
        bv = merged[f"{value}_batch"].astype("float64")
        sv = merged[f"{value}_stream"].astype("float64")
        diff = (bv - sv).abs()
        allowed = np.maximum(tolerance.value_abs, tolerance.value_rel * bv.abs())
        differs = (merged["_merge"] == "both") & (diff > allowed)
        status = np.where(differs & (status == MATCH), VALUE_DIFF, status)
        merged[f"{value}_diff"] = bv - sv
        rel = diff / bv.abs().replace(0, np.nan)
        worst_diff = np.fmax(worst_diff, rel.fillna(diff).fillna(np.inf).to_numpy())
    extra = (
        merged["stream_records"].fillna(1).astype("int64") - 1
        if "stream_records" in merged
        else pd.Series(0, index=merged.index)
    )
    status = np.where((extra > 0) & (status == MATCH), DUPLICATE_IN_STREAM, status)
    merged["status"] = status
    if count_column is not None:
        short = merged["status"].isin([VALUE_DIFF, MISSING_IN_STREAM]) & (merged["late_count"] > 0)
        for column, late_column in {count_column: "late_count", **late_values}.items():
            deficit = merged[f"{column}_batch"].fillna(0) - merged[f"{column}_stream"].fillna(0)
            short &= deficit == merged[late_column]
        explained = (short & (extra == 0)).to_numpy()
    else:
        explained = (
            (merged["status"] == MISSING_IN_STREAM) & (merged["late_count"] > 0)
        ).to_numpy()
    merged["explained_by_late_data"] = explained
    merged["severity"] = np.where(merged["status"] == MATCH, 0.0, np.where(explained, 1.0, 2.0))
    merged["drift"] = np.where(merged["status"] == MATCH, 0.0, worst_diff)
    table = merged.drop(columns=["_merge"])

    batch_keys = int((table["status"] != MISSING_IN_BATCH).sum())
    stats = {
        "batch_rows": batch_keys,
        "stream_rows": int((table["status"] != MISSING_IN_STREAM).sum()),
        "matched": int((table["status"] == MATCH).sum()),
        "value_diffs": int((table["status"] == VALUE_DIFF).sum()),
        "missing_in_stream": int((table["status"] == MISSING_IN_STREAM).sum()),
        "missing_in_batch": int((table["status"] == MISSING_IN_BATCH).sum()),
        "duplicates": int(extra.sum()),
        "key_coverage": (
            float((table["status"].isin([MATCH, VALUE_DIFF])).sum()) / batch_keys
            if batch_keys
            else 1.0
        ),
    }
    return _judged(name, table, stats, tolerance, worst_limit)


def _judged(
    name: str, table: pd.DataFrame, stats: dict[str, Any], tolerance: Tolerance, worst_limit: int
) -> Reconciliation:
    """The reconciliation of a comparison ``table`` (``status``, ``explained_by_late_data``,
    ``severity``, ``drift`` per key): ``stats`` with the explained and unexplained counts,
    passed when ``tolerance`` allows the unexplained keys, its worst keys first."""
    differing = table[table["status"] != MATCH]
    unexplained = int((~differing["explained_by_late_data"]).sum())
    stats = {
        **stats,
        "explained_by_late_data": int(differing["explained_by_late_data"].sum()),
        "unexplained": unexplained,
    }
    worst = differing.sort_values(["severity", "drift"], ascending=False, kind="stable").head(
        worst_limit
    )
    passed = tolerance.allows(unexplained, stats["batch_rows"])
    return Reconciliation(name, passed, stats, table, worst)


def explain_by_late_data(
    report: Reconciliation,
    explained: pd.Series,
    tolerance: Tolerance | None = None,
    worst_limit: int = 20,
) -> Reconciliation:
    """``report`` with the differing keys where ``explained`` (aligned with its table) is
    True counted as explained by late data too, and judged again by ``tolerance``: for a
    stream whose late data is known another way than a late report ``compare_keyed`` takes."""
    table = report.table.copy()
    differs = table["status"] != MATCH
    table["explained_by_late_data"] = table["explained_by_late_data"] | (explained & differs)
    table["severity"] = np.where(~differs, 0.0, np.where(table["explained_by_late_data"], 1.0, 2.0))
    return _judged(report.name, table, report.stats, tolerance or Tolerance(), worst_limit)
