"""GROUP BY / aggregates over a join, as an aggregation of a subquery of the join.

``SELECT A.category, MAX(B.price) FROM a A JOIN b B ON ... WHERE ... GROUP BY A.id,
A.category`` becomes ``SELECT "A.category" AS category, MAX("B.price") FROM (SELECT A.id
AS "A.id", A.category AS "A.category", B.price AS "B.price" FROM a A JOIN b B ON ...
WHERE ...) AS "$join" GROUP BY "A.id", "A.category"``: the join (with its WHERE) is a
subquery that passes on every column the outer query names, and the aggregation reads
it like any other view: an append stream for a join with a stream, an updating table
for a join of two tables (the left table's key is passed on so the view keeps it, and
the aggregation takes changed rows back). Renamed columns keep their positions for
errors, and a bare column in the SELECT list keeps its name as the output's.
"""

from __future__ import annotations

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.derived import WINDOW_CALLS
from streaming.sql.errors import error_at, node_offset

#: The alias of the join's subquery (not a name a table can have in SQL text).
JOIN_ALIAS = "$join"


def inner_name(column: exp.Column) -> str:
    """The subquery's name for a column reference: ``alias.name`` or ``name``."""
    return f"{column.table}.{column.name}" if column.table else column.name


def _renamed(column: exp.Column) -> exp.Column:
    """``column`` as a reference to the subquery's column, at the same position."""
    identifier = exp.to_identifier(inner_name(column))
    identifier.meta.update(column.this.meta)
    table = column.args.get("table")
    if table is not None and isinstance(table.meta.get("start"), int):
        identifier.meta["start"] = table.meta["start"]  # errors point at "alias.column"
    return exp.Column(this=identifier)


def aggregation_over_join(
    select: exp.Select, left: TableDef, left_alias: str, source: str
) -> exp.Select:
    """The rewritten query (see the module docstring); ``select`` is not changed."""
    group = select.args.get("group")
    for item in group.expressions if group else []:
        if isinstance(item, exp.Anonymous) and item.name.upper() in WINDOW_CALLS:
            raise error_at(source, node_offset(item), "a window over a join is not supported yet")
    outer = select.copy()
    parts = [*outer.expressions, outer.args.get("group"), outer.args.get("having")]
    names: dict[str, exp.Column] = {}
    for part in parts:
        for column in list(part.find_all(exp.Column)) if part is not None else []:
            names.setdefault(inner_name(column), column.copy())
    if left.is_upsert:
        # a table-table join is updating: its key goes along so the subquery keeps it
        for key in left.primary_key:
            reference = exp.column(key, table=left_alias)
            names.setdefault(inner_name(reference), reference)
    inner = exp.Select(
        expressions=[exp.alias_(column, name, quoted=True) for name, column in names.items()]
    )
    from_key = "from_" if select.args.get("from_") is not None else "from"
    inner.set(from_key, select.args.get(from_key))
    inner.set("joins", select.args.get("joins"))
    inner.set("where", select.args.get("where"))
    items = []
    for item in outer.expressions:
        if isinstance(item, exp.Column):
            # a bare column keeps its own name as the output's
            item = exp.alias_(_renamed(item), item.name, quoted=True)
        items.append(item)
    outer.set("expressions", items)
    for part in [*outer.expressions, outer.args.get("group"), outer.args.get("having")]:
        for column in list(part.find_all(exp.Column)) if part is not None else []:
            if column.name != inner_name(column) or column.table:
                column.replace(_renamed(column))
    subquery = exp.Subquery(
        this=inner, alias=exp.TableAlias(this=exp.to_identifier(JOIN_ALIAS, quoted=True))
    )
    outer.set(from_key, exp.From(this=subquery))
    outer.set("joins", None)
    outer.set("where", None)
    return outer
