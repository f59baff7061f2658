"""The merge node of a cogrouped aggregation: Kafka's ``KTablePassThrough``.

Every grouped stream of a cogroup has its own aggregate processor (the ordinary
``KStreamAggregate`` / windowed / session ones), all reading and writing one shared store;
their updates meet in this pass-through node, which is the resulting KTable.
"""

from __future__ import annotations

from typing import Any

from streaming.dsl.processors.table import TableSupplier
from streaming.topology.processor import Processor, Record


class CogroupMergeSupplier(TableSupplier):
    """``COGROUPKSTREAM-MERGE-``: forwards the changes of all aggregate processors."""

    def __init__(self, parents: list[TableSupplier], store_name: str) -> None:
        self.parents = parents
        self.store_name = store_name

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        # an aggregation is always materialised: every parent can send old values
        for parent in self.parents:
            parent.enable_sending_old_values(force_materialization)
        self.send_old_values = True
        return True

    def view(self) -> Any:
        """The shared store, read as the aggregate processors' own view reads it."""
        return self.parents[0].view()

    def __call__(self) -> Processor:
        return _PassThrough()


class _PassThrough(Processor):
    def process(self, record: Record) -> None:
        self.context.forward(record)
