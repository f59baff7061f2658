"""``LakeCut``: which part files a reader saw; ``of_orders``: late records of those orders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipelines.lake.cut import LakeCut, decode_cuts, encode_cuts
from pipelines.lake.manifest import Manifest
from pipelines.reconcile.late import of_orders


def test_a_cut_holds_the_files_landed_before_it(tmp_path: Path) -> None:
    manifest = Manifest("orders", next_offsets={0: 10, 1: 4}, generation=1)
    manifest.save(tmp_path)
    cut = LakeCut.now(tmp_path, "orders")
    assert cut == LakeCut(1, {0: 10, 1: 4})
    assert cut.holds("part-0-0-9-g1.parquet")
    assert not cut.holds("part-0-10-12-g1.parquet")  # landed after the cut
    assert cut.holds("part-1-0-3-g1.parquet") and not cut.holds("part-1-2-4-g1.parquet")
    assert not cut.holds("part-2-0-0-g1.parquet")  # a partition the cut had not seen
    assert cut.holds("part-1-50-60.parquet")  # an earlier cluster's file
    assert not cut.holds("part-0-0-1-g2.parquet")  # a later cluster's
    assert cut.holds("part-empty.parquet")  # the layout file, no rows
    assert decode_cuts(encode_cuts({"orders": cut})) == {"orders": cut}
    assert LakeCut.now(tmp_path, "clicks") == LakeCut(0, {})


def test_late_records_are_kept_once_per_copy_of_their_order() -> None:
    late = pd.DataFrame(
        {
            "result": ["r", "r", "r", "r", "h", "r"],
            "order_id": ["a", "a", "a", "b", "a", "c"],
            "window_start": [0, 0, 0, 0, 0, 5],
        }
    )
    orders = pd.DataFrame({"order_id": ["a", "a", "b"]})  # "a" twice (a duplicate), no "c"
    kept = of_orders(late, orders)
    assert kept.index.tolist() == [0, 1, 3, 4]
    assert of_orders(late, orders.iloc[0:0]).empty
