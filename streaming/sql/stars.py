"""``t.*`` and ``*`` in a SELECT list, as the columns they stand for.

Flink expands ``SELECT A.*, B.price FROM auction A, bid B`` to every column of ``A``; the
compiler works on named columns, so before a statement compiles, each ``t.*`` in a query
whose FROM and joins are tables (or views) of the catalog becomes ``t.c1, t.c2, ...``, and
a bare ``*`` among other items (``SELECT *, PROCTIME() AS p_time FROM bid``) or over a
join becomes every column of every table in order. Left as written (the paths that take
them read them themselves): a bare ``*`` alone over one table, a bare ``*`` beside a
ranking function (Top-N, deduplication), a statement over a window TVF (its table stands
for the TVF's rows, window bounds included), and a bare ``*`` over a join whose tables
share a column name (the join compiler names those).

A query over one table or view (a subquery in FROM once compiled into its view) has its
``*`` and ``t.*`` expanded later, as it compiles (``expand_over_source``): a ``*`` alone
over a table, over an aggregating subquery, over a subquery of a subquery are then that
table's or view's columns in order (a view's hidden ``$column`` outputs left out). The
batch translation, which compiles no views, expands the same stars over subqueries by
their output names (``expand_over_subqueries``).
"""

from __future__ import annotations

from sqlglot import exp

from streaming.sql import derived
from streaming.sql.catalog import TableDef
from streaming.sql.join_star import expand_join_star
from streaming.sql.rewrite import Statement


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


def expand_stars(
    tree: exp.Expr,
    tables: dict[str, TableDef],
    over_tvf: bool,
    lateral_after: frozenset[str] = frozenset(),
) -> None:
    """Expand ``t.*`` and ``*`` (as the module says) in every SELECT of ``tree``, in
    place; nothing if the statement reads a window TVF (``over_tvf``), nor in a SELECT
    whose FROM table (by alias or name) is in ``lateral_after``: its LATERAL TABLE's
    columns are part of its ``*`` (``lateral``)."""
    if over_tvf:
        return
    for select in list(tree.find_all(exp.Select)):
        from_ = select.args.get("from_")
        first = from_.this if from_ is not None else None
        if isinstance(first, exp.Table) and {first.alias_or_name, first.name} & lateral_after:
            continue
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


def expand_over_source(
    select: exp.Select, statement: Statement, tables: dict[str, TableDef]
) -> None:
    """``*`` and ``t.*`` in the SELECT list of a query over one table or view of
    ``tables`` as its columns, in place; left as written (the paths that read them
    themselves, or a ``SqlError`` that names them): a query over a join, over a LATERAL
    TABLE or over a window TVF of the table (its rows have the window bounds too)."""
    from_ = select.args.get("from_")
    node = from_.this if from_ is not None else None
    if not isinstance(node, exp.Table) or select.args.get("joins") or node.name not in tables:
        return
    alias = node.alias_or_name
    if any(lateral.after in (alias, node.name) for lateral in statement.laterals):
        return
    if any(tvf.table == node.name for tvf in statement.window_tvfs):
        return
    table = tables[node.name]
    items = select.expressions
    expanded: list[exp.Expr] = []
    for item in items:
        qualified = isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        if isinstance(item, exp.Star) or (qualified and item.table in (alias, node.name)):
            expanded += [exp.column(c, quoted=True) for c in table.columns if c[:1] != "$"]
        else:
            expanded.append(item)
    select.set("expressions", expanded)


def output_names(select: exp.Select) -> list[str]:
    """The output names of ``select`` as the stream names a view's columns: the alias,
    else the column's name, else ``EXPR$i``, made unique (``derived.output_names``)."""
    return derived.output_names(select.expressions)


def expand_over_subqueries(
    tree: exp.Expr, statement: Statement, tables: dict[str, TableDef], source: str
) -> None:
    """``*`` and ``t.*`` of every SELECT in ``tree``, innermost first, in place: over a
    join of tables of ``tables`` as ``join_star`` expands them, over one table as
    ``expand_over_source``, over one subquery whose SELECT list names its columns as the
    subquery's output names. A ranking (``OVER``) over one table is left as written (its
    translation reads the ``*``), as is a SELECT that reads a window TVF."""
    tvf_tables = {tvf.table for tvf in statement.window_tvfs}
    for select in reversed(list(tree.find_all(exp.Select))):
        from_ = select.args.get("from_")
        node = from_.this if from_ is not None else None
        joins = select.args.get("joins") or []
        if joins:
            read = [node, *(join.this for join in joins)]
            if all(
                isinstance(n, exp.Table) and n.name in tables and n.name not in tvf_tables
                for n in read
            ):
                expand_join_star(select, lambda t: tables[t.name], source)
            continue
        if any(item.find(exp.Window) for item in select.expressions):
            continue
        if not isinstance(node, exp.Subquery):
            expand_over_source(select, statement, tables)
            continue
        inner = node.this
        if not isinstance(inner, exp.Select) or any(_is_star(i) for i in inner.expressions):
            continue
        alias = node.alias_or_name
        expanded: list[exp.Expr] = []
        for item in select.expressions:
            if isinstance(item, exp.Star) or (_is_star(item) and alias and item.table == alias):
                expanded += [exp.column(name, quoted=True) for name in output_names(inner)]
            else:
                expanded.append(item)
        select.set("expressions", expanded)


def _is_star(item: exp.Expr) -> bool:
    """Whether a SELECT item is ``*`` or ``t.*``."""
    return isinstance(item, exp.Star) or (
        isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
    )
