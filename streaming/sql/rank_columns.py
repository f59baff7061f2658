"""The PARTITION BY and ORDER BY columns of a ranking (Top-N, deduplication) in a
subquery, as outputs of that subquery.

A ranking names its columns as written: ``c``, or ``t.c`` qualified by a table of the
subquery's FROM (``ORDER BY B.price DESC, B.ts DESC`` over ``a A, b B``, both with a
``ts``). Each becomes the subquery's output that is that column (an output of that name
for ``c``; for ``t.c``, the output that selects ``t.c``, or ``c`` unqualified, by its
output name: ``ts0`` for the second ``ts``, as ``derived`` names them), else a
hidden output ``$c`` / ``$t.c`` added to the subquery, so a qualified column is never
taken for another table's column of the same name.
"""

from __future__ import annotations

from sqlglot import exp

from streaming.sql.derived import output_names


def reference(column: exp.Column) -> str:
    """``t.c`` for a qualified column, ``c`` for a plain one."""
    return f"{column.table}.{column.name}" if column.table else column.name


def base_name(name: str) -> str:
    """The column's own name in a reference or an output name: ``c`` for ``c``, ``t.c``,
    ``$c`` or ``$t.c``."""
    return name.lstrip("$").rsplit(".", 1)[-1]


def _selects(item: exp.Expr, table: str, name: str) -> bool:
    """Whether the SELECT item is the column ``table.name`` (or ``name`` unqualified),
    aliased or not."""
    node = item.this if isinstance(item, exp.Alias) else item
    return (
        isinstance(node, exp.Column)
        and not isinstance(node.this, exp.Star)
        and node.name == name
        and node.table in ("", table)
    )


def output(items: list[exp.Expr], ref: str) -> str:
    """The name of the output of ``items`` that is the column ``ref`` (``reference``);
    without one, a hidden output ``$ref`` is appended to ``items``."""
    table, _, name = ref.rpartition(".")
    names = output_names(items)
    if not table:
        if name in names:
            return name
    else:
        for item, unique in zip(items, names, strict=True):
            if _selects(item, table, name):
                return unique
    hidden = f"${ref}"
    if not any(item.alias_or_name == hidden for item in items):
        items.append(exp.alias_(exp.column(name, table=table or None), hidden, quoted=True))
    return hidden
