"""The order the stream reads a relation's rows in, for the DuckDB translation (``batch``).

The stream's deduplication and Top-N break ties on their ORDER BY by the order they read
the rows (``batch_rank``). A topic's partition is read in offset order, so a relation with
an ``_offset`` column (the record's offset, as the lake stores it) gives that order; a
relation without one is taken in the order given: each row's position, DuckDB's
``ROW_NUMBER() OVER ()`` over the scan (a streaming window, which keeps the scan's
insertion order). A relation that needs it is registered under another name and read
through a view adding the order as ``INPUT_ORDER``. Rows of one key from different
partitions of a topic reach the stream in the order it happens to interleave them,
which no column records: among those, the translation orders by offset.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

#: the column of a relation's input order (``_offset``, else the row's position)
INPUT_ORDER = "__input_order"
#: the record offset column of the lake's relations (``batch_columns.RECORD_COLUMNS``)
OFFSET = "_offset"
_GIVEN = "__given_"


def register(con: Any, name: str, relation: Any, ordered: bool) -> None:
    """Register ``relation`` on ``con`` as ``name``, with its ``INPUT_ORDER`` column when
    ``ordered``."""
    if not ordered:
        con.register(name, relation)
        return
    given = _GIVEN + name
    con.register(given, relation)
    source = _quoted(given)
    columns = [d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description]
    order = f"TRY_CAST({OFFSET} AS BIGINT)" if OFFSET in columns else "ROW_NUMBER() OVER ()"
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {_quoted(name)} AS "
        f"SELECT *, {order} AS {INPUT_ORDER} FROM {source}"
    )


def unregister(con: Any, name: str, ordered: bool) -> None:
    """Undo ``register``."""
    if not ordered:
        con.unregister(name)
        return
    con.execute(f"DROP VIEW IF EXISTS {_quoted(name)}")
    con.unregister(_GIVEN + name)


def _quoted(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("duckdb")
