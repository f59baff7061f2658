"""The metrics page (docs/operating/metrics.md) names every metric the Prometheus exporter
writes, and no other."""

from __future__ import annotations

import re
from pathlib import Path

from streaming.query.prometheus import KNOWN, PREFIX, render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operating" / "metrics.md"


def test_the_metrics_table_is_what_the_exporter_writes() -> None:
    snapshot = {key: 1 for key in KNOWN}
    snapshot |= {
        "state": "RUNNING",
        "tasks": ["0_0"],
        "consumer-lag": {"orders-0": 3},
        "restore-progress": {"app-store-changelog-0": {"store": "s", "restored": 1}},
    }
    written = set(re.findall(rf"^# TYPE ({PREFIX}\w+) ", render(snapshot, "app"), re.M))
    table = PAGE.read_text().split("## The metrics", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(kafka_streams_\w+)` \|", table, re.M))
    assert len(written) >= 24
    assert listed == written
