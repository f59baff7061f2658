"""``SELECT *`` and ``SELECT t.*`` over a join, as Flink reads them: every column of each
table in join order (the FROM table's first), or of the one table ``t`` names, each
qualified by its table's alias (a view's hidden ``$column`` outputs left out)."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.errors import error_at, node_offset


def expand_join_star(
    select: exp.Select, table_of: Callable[[exp.Table], TableDef], source: str
) -> None:
    """Replace ``*`` / ``t.*`` in ``select``'s list by the columns they stand for
    (``table_of``: the catalog entry of a table in FROM or JOIN)."""
    items = select.expressions
    if not any(_star_of(item) is not None for item in items):
        return
    from_ = select.args.get("from_") or select.args.get("from")
    nodes = [from_.this] if from_ is not None else []
    nodes += [join.this for join in select.args.get("joins") or []]
    tables = [
        (node.alias or node.name, table_of(node)) for node in nodes if isinstance(node, exp.Table)
    ]
    expanded: list[exp.Expr] = []
    for item in items:
        star = _star_of(item)
        if star is None:
            expanded.append(item)
            continue
        chosen = [(a, t) for a, t in tables if star == "" or a == star]
        if not chosen:
            raise error_at(source, node_offset(item), f"unknown table {star} in {star}.*")
        for alias, table in chosen:
            expanded.extend(
                exp.column(c, table=alias, quoted=True) for c in table.columns if c[:1] != "$"
            )
    select.set("expressions", expanded)


def _star_of(item: exp.Expr) -> str | None:
    """ "" for ``*``, the alias for ``t.*``, None for any other item."""
    if isinstance(item, exp.Star):
        return ""
    if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
        return item.table
    return None
