"""Where an updating changelog (values ``{"op": "+" | "-", "row": ...}``, a regular
join's) goes: into a sink with a PRIMARY KEY through a ``SinkUpsertMaterializer`` (the
sink key's final rows), or into a view (or subquery) as an upsert view keyed by the whole
row and its occurrence (the hidden ``OCCURRENCE`` column, ``CountOccurrences``), so each
copy of a row is a row of its own that a retraction deletes.

Such a view's deletes carry their row in their key, so a query that projects and filters
the view reads it back as a changelog (``project_changelog_view``) and writes it on the
same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql.catalog import TableDef
from streaming.sql.join_state import CountOccurrences, SinkUpsertMaterializer, change
from streaming.sql.rewrite import Statement
from streaming.state.stores import Stores

#: the hidden column of an updating changelog's view: which copy of its row a row is
OCCURRENCE = "$occurrence"


def add_store(compiler: Any, name: str) -> str:
    """A key-value store of JSON keys and values named ``name``, added to the topology."""
    compiler.builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store(name), serdes.Json(), serdes.Json()
        )
    )
    return name


def write_updating(compiler: Any, changes: Any, sink: TableDef, ttl: int | None) -> None:
    """Write the changelog ``changes`` into ``sink`` (a table with a key, or a view)."""
    if sink.is_view:
        _occurrences_view(compiler, changes, sink, ttl)
        return
    materializer = add_store(compiler, compiler.unique(f"{sink.name}-upsert-materializer"))
    upserts = (
        changes.select_key(lambda k, v: sink.key_of(v["row"]))
        .repartition(
            Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                compiler.unique(f"{sink.name}-upsert")
            )
        )
        .process(
            lambda: SinkUpsertMaterializer(materializer, ttl),
            materializer,
            named=Named.as_(compiler.unique(f"{sink.name}-materialize")),
        )
    )
    compiler.write(upserts, sink)


def _occurrences_view(compiler: Any, changes: Any, sink: TableDef, ttl: int | None) -> None:
    """The view ``sink`` as an upsert view of the changelog's rows, each copy apart; its
    catalog entry gets the hidden ``OCCURRENCE`` column and that key."""
    columns = tuple(c for c in sink.columns if c != OCCURRENCE)
    view = replace(
        sink,
        columns={**{c: sink.columns[c] for c in columns}, OCCURRENCE: "BIGINT"},
        primary_key=(*columns, OCCURRENCE),
        key_fields=(*columns, OCCURRENCE),
        key_format="json",
        watermark=None,
    )
    compiler.tables[sink.name] = view
    store = add_store(compiler, compiler.unique(f"{sink.name}-occurrences"))
    rows = (
        changes.select_key(lambda k, v: [v["row"].get(c) for c in columns])
        .repartition(
            Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                compiler.unique(f"{sink.name}-occurrences")
            )
        )
        .process(
            lambda: CountOccurrences(store, OCCURRENCE, ttl),
            store,
            named=Named.as_(compiler.unique(f"{sink.name}-count")),
        )
    )
    compiler.write(rows, view)


def project_changelog_view(
    compiler: Any,
    statement: Statement,
    source: TableDef,
    sink: TableDef,
    project: Callable[[dict[str, Any]], dict[str, Any]],
    where: Callable[[dict[str, Any]], bool],
) -> None:
    """``SELECT ... FROM view WHERE ...`` over a changelog's view: its rows (a delete's
    from its key) back as changes, filtered and projected, into ``sink``."""
    compiler.require_upsert_sink(
        statement, sink, f"the rows of {source.name} (a regular join's) are retracted"
    )

    def as_change(key: dict[str, Any], value: Any) -> dict[str, Any]:
        row = value if isinstance(value, dict) else key
        op = "+" if isinstance(value, dict) else "-"
        return change(op, {c: v for c, v in row.items() if c != OCCURRENCE})

    changes = (
        compiler.views[source.name]
        .filter(lambda k, v: isinstance(k, dict))
        .map(lambda k, v: (k, as_change(k, v)))
        .filter(lambda k, v: where(v["row"]))
        .map_values(lambda v: change(v["op"], project(v["row"])))
    )
    write_updating(compiler, changes, sink, compiler.settings.state_ttl_ms)
