"""What a compiled SQL application knows about its tables, for pull and push queries.

``SqlCatalog`` holds the declared tables and, per sink table written by an aggregation,
its ``MaterializedResult``: the state store (named after the sink table) and how a store
entry becomes a sink row. ``compile`` registers the catalog of each topology it builds
(``catalog_of(topology)``), so a query against a running ``KafkaStreams`` finds it from the
application's topology alone.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.sql.catalog import TableDef


@dataclass(frozen=True)
class MaterializedResult:
    """The aggregation state behind a sink table.

    ``kind`` is the store's kind (``keyvalue``, ``window``, ``session``); the store key is
    the JSON list of the ``group_columns`` values; ``row(key, bounds, accumulator)`` is the
    sink row of one entry (None when HAVING rejects it), ``bounds`` the window's
    (start, end) in epoch ms or None.
    """

    table: str
    store: str
    kind: str
    group_columns: tuple[str, ...]
    group_kinds: tuple[str, ...]
    window_size_ms: int | None
    session_gap_ms: int
    row: Callable[[Any, tuple[int, int] | None, Any], dict[str, Any] | None]


@dataclass
class SqlCatalog:
    """The tables of a SQL application and the materialized results among them."""

    tables: dict[str, TableDef] = field(default_factory=dict)
    results: dict[str, MaterializedResult] = field(default_factory=dict)


_CATALOGS: weakref.WeakKeyDictionary[Any, SqlCatalog] = weakref.WeakKeyDictionary()


def catalog_for(
    tables: Mapping[str, TableDef], results: Mapping[str, MaterializedResult]
) -> SqlCatalog:
    """The catalog offered to pull and push queries from a compiler's ``tables`` and
    ``results``: views live inside the topology (no topic, no store), so only declared
    tables, and the results written to them, are listed."""
    declared = {name: t for name, t in tables.items() if not t.is_view}
    return SqlCatalog(declared, {name: r for name, r in results.items() if name in declared})


def register(topology: Any, catalog: SqlCatalog) -> None:
    """Remember ``catalog`` as the SQL catalog of ``topology``."""
    _CATALOGS[topology] = catalog


def catalog_of(topology: Any) -> SqlCatalog | None:
    """The SQL catalog of a topology built by ``streaming.sql.compile`` (else None)."""
    try:
        return _CATALOGS.get(topology)
    except TypeError:  # not weak-referenceable: not ours
        return None
