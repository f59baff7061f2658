"""``t.*`` and ``*`` in a SELECT list over tables, as the columns they stand for.

Flink expands ``SELECT A.*, B.price FROM auction A, bid B`` to every column of ``A``; the
compiler works on named columns, so before a statement compiles, each ``t.*`` in a query
whose FROM and joins are tables (or views) of the catalog becomes ``t.c1, t.c2, ...``, and
a bare ``*`` among other items (``SELECT *, PROCTIME() AS p_time FROM bid``) or over a
join becomes every column of every table in order. Left as written (the paths that take
them read them themselves): a bare ``*`` alone over one table, a bare ``*`` beside a
ranking function (Top-N, deduplication), a statement over a window TVF (its table stands
for the TVF's rows, window bounds included), and a bare ``*`` over a join whose tables
share a column name (the join compiler names those).
"""

from __future__ import annotations

from sqlglot import exp

from streaming.sql.catalog import TableDef


def _relations(select: exp.Select, tables: dict[str, TableDef]) -> list[tuple[str, TableDef]]:
    """(name in the query, table) of the FROM table and the joined ones; [] if any of them
    is not a table of the catalog (a subquery, a TVF, a LATERAL TABLE)."""
    from_ = select.args.get("from_")
    items = [from_.this] if from_ is not None else []
    items += [join.this for join in select.args.get("joins") or []]
    found: list[tuple[str, TableDef]] = []
    for item in items:
        if not isinstance(item, exp.Table) or item.name not in tables:
            return []
        found.append((item.alias_or_name, tables[item.name]))
    return found


def _columns(alias: str, table: TableDef) -> list[exp.Expr]:
    return [exp.column(name, table=alias, quoted=True) for name in table.columns if name[:1] != "$"]


def expand_stars(tree: exp.Expr, tables: dict[str, TableDef], over_tvf: bool) -> None:
    """Expand ``t.*`` and ``*`` (as the module says) in every SELECT of ``tree``, in
    place; nothing if the statement reads a window TVF (``over_tvf``)."""
    if over_tvf:
        return
    for select in list(tree.find_all(exp.Select)):
        items = select.expressions
        qualified = [i for i in items if isinstance(i, exp.Column) and isinstance(i.this, exp.Star)]
        bare = [i for i in items if isinstance(i, exp.Star)]
        if not qualified and not bare:
            continue
        relations = _relations(select, tables)
        if not relations:
            continue
        joined = len(relations) > 1
        if bare and not joined and (len(items) == 1 or select.find(exp.Window) is not None):
            bare = []
        names = [n for _, t in relations for n in t.columns if n[:1] != "$"]
        if bare and len(names) != len(set(names)):
            bare = []
        by_alias = dict(relations)
        expanded: list[exp.Expr] = []
        for item in items:
            if item in qualified and item.table in by_alias:
                expanded += _columns(item.table, by_alias[item.table])
            elif any(item is b for b in bare):
                for alias, table in relations:
                    expanded += _columns(alias, table)
            else:
                expanded.append(item)
        select.set("expressions", expanded)
