"""The stream's own account of the records its windowed aggregations left out as late.

A windowed aggregation does not count a record in a window whose end is at or before its
close time (the highest timestamp it has seen minus the grace period); under emit-on-close,
a window already emitted as final (before a restart) no longer changes its output either.
Reconciliation needs exactly these records to explain why a stream window differs from
the batch recompute, and a lake-side approximation cannot know them: the aggregation sees
a repartitioned interleaving of its input that exists only inside the task.

The aggregation reports them itself (``KTable.late_records``, the engine's late side
output): ``report_late`` writes one row per (record, window) to the application's late
topic, in the same transaction as the aggregation's output, in the rows SQL applications
write too (``streaming.sql.late``).
"""

from __future__ import annotations

from typing import Any

from pipelines.streams.common import KEY_SERDE, VALUE_SERDE
from streaming import KTable, Named, Produced
from streaming.sql.late import late_row


def report_late(table: KTable, *, result: str, topic: str, key_serde: Any = KEY_SERDE) -> None:
    """Write the records the windowed aggregation that made ``table`` left out as late to
    ``topic`` (``result``: what the rows name the aggregation; ``key_serde``: the serde of
    the aggregation's input keys). Call it after the rest of the topology is built, so that
    the other nodes keep their generated names."""
    table.late_records(Named.as_(f"late-{result}")).map_values(
        lambda late: late_row(late, result)
    ).to(topic, Produced(key_serde=key_serde, value_serde=VALUE_SERDE))
