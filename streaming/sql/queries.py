"""Pull and push queries against a running SQL application.

**Pull queries** (``SELECT * | cols FROM result WHERE ...``, no EMIT) read the state store
of an aggregation's sink table (``MaterializedResult``): the WHERE clause is a conjunction
of ``col = literal`` on every GROUP BY column (the store key) and, on a windowed result,
bounds on ``window_start`` (``=``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``; TIMESTAMP text
or epoch ms) that become a window-start range fetch. The answer is the sink rows of the
matching entries, i.e. the current (possibly not yet final) aggregate, as ksqlDB's pull
queries answer.

**Push queries** (``SELECT ... FROM t [WHERE ...] EMIT CHANGES``) stream the rows of any
declared table's topic written after the query started: ``PushStream`` reads the topic
with a fresh consumer (no group; read_committed) from each partition's end offset taken
when it starts, and applies the compiled WHERE and projection to each JSON value
(tombstones are skipped). A push query that aggregates, windows, joins or reads a
subquery is compiled instead into a ``TransientQuery`` run by a transient application
(``transient``).

``plan(catalog, text)`` parses a query into a ``PullQuery``, a ``PushQuery`` or a
``TransientQuery``; ``execute_pull`` answers a pull query from a store view;
``start_push`` starts the stream of a push query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from sqlglot import exp

from streaming.errors import SerializationError
from streaming.sql.catalog import TableDef
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.expressions import compile_expression
from streaming.sql.results import MaterializedResult, SqlCatalog
from streaming.sql.rewrite import split_statements
from streaming.sql.scopes import RowScope
from streaming.sql.timestamps import parse_timestamp
from streaming.sql.unsupported import check_tree

if TYPE_CHECKING:
    from streaming.sql.transient import TransientQuery

LONG_MAX = (1 << 63) - 1
Row = dict[str, Any]


@dataclass(frozen=True)
class PullQuery:
    """A key lookup, or with ``key`` None a scan of every key (both within the window-start
    range ``[window_from, window_to]``, inclusive) on a materialized result; ``columns``
    None means ``SELECT *``; ``limit`` caps the rows (``LIMIT n``)."""

    result: MaterializedResult
    key: list[Any] | None
    window_from: int
    window_to: int
    columns: tuple[str, ...] | None
    limit: int | None = None

    @property
    def is_scan(self) -> bool:
        return self.key is None


@dataclass(frozen=True)
class PushQuery:
    """A filter and projection over the rows of ``table``'s topic."""

    table: TableDef
    where: Callable[[Row], bool]
    project: Callable[[Row], Row]


def plan(catalog: SqlCatalog, text: str) -> PullQuery | PushQuery | TransientQuery:
    """The pull or push query of one ``SELECT`` statement (a ``SqlError`` otherwise): a
    push query that aggregates, windows or joins is compiled into a ``TransientQuery``."""
    from streaming.sql.compiler import parse

    statements = split_statements(text)
    if len(statements) != 1:
        raise SqlError("expected exactly one SELECT statement", line=1, column=1)
    statement = statements[0]
    tree = parse(statement, text)
    check_tree(tree, statement, text)
    if not isinstance(tree, exp.Select):
        raise error_at(text, statement.start, "a pull or push query is one SELECT statement")
    if statement.laterals:
        raise error_at(
            text,
            statement.laterals[0].offset,
            "LATERAL TABLE (a Python table function) in a pull or push query is not supported yet",
        )
    if statement.match_recognize:
        raise error_at(
            text,
            statement.match_recognize[0].offset,
            "MATCH_RECOGNIZE in a pull or push query is not supported yet: INSERT its "
            "matches INTO a table (or CREATE VIEW) in an application",
        )
    if statement.emit == "FINAL":
        raise error_at(text, statement.emit_offset, "EMIT FINAL is not a query: use EMIT CHANGES")
    if statement.watermark is not None:
        raise error_at(text, statement.watermark.offset, "a query takes no WATERMARK")
    if statement.emit == "CHANGES":
        for clause in ("order", "limit", "distinct"):
            if tree.args.get(clause):
                word = {"order": "ORDER BY"}.get(clause, clause.upper())
                raise error_at(
                    text,
                    node_offset(tree.args[clause], statement.start),
                    f"{word} is not supported in a push query",
                )
        from streaming.sql.transient import compile_transient, needs_topology

        if needs_topology(tree, statement):
            return compile_transient(catalog, text, statement, tree)
    if statement.window_tvf is not None:
        raise error_at(text, statement.start, "window TVFs are not supported in a pull query")
    for clause in ("joins", "group", "having", "order", "distinct"):
        if tree.args.get(clause):
            word = {"group": "GROUP BY", "order": "ORDER BY"}.get(clause, clause.upper())
            raise error_at(
                text,
                node_offset(tree.args[clause], statement.start),
                f"{word} is not supported in a pull query (a push query, EMIT CHANGES, "
                "may aggregate and join)"
                if clause != "order"
                else f"{word} is not supported in a pull or push query",
            )
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None or not isinstance(from_.this, exp.Table):
        raise error_at(text, statement.start, "a query needs FROM <table>")
    name = from_.this.name
    if name not in catalog.tables:
        raise error_at(text, node_offset(from_.this, statement.start), f"unknown table {name}")
    if statement.emit == "CHANGES":
        return _push(catalog.tables[name], tree, text, from_.this.alias or None)
    result = catalog.results.get(name)
    if result is None:
        raise error_at(
            text,
            node_offset(from_.this, statement.start),
            f"table {name} is not materialized: pull queries read the results of GROUP BY "
            f"queries ({', '.join(sorted(catalog.results)) or 'none here'}); "
            "add EMIT CHANGES for a push query",
        )
    return _pull(catalog.tables[name], result, tree, text, statement.start)


# -- pull ------------------------------------------------------------------------------


def _pull(
    table: TableDef, result: MaterializedResult, select: exp.Select, text: str, start: int
) -> PullQuery:
    columns: tuple[str, ...] | None = None
    if not any(isinstance(e, exp.Star) for e in select.expressions):
        names = []
        for item in select.expressions:
            if not isinstance(item, exp.Column) or item.name not in table.columns:
                raise error_at(
                    text,
                    node_offset(item, start),
                    f"a pull query selects * or columns of {table.name}: {item.sql()}",
                )
            names.append(item.name)
        columns = tuple(names)
    key: dict[str, Any] = {}
    lo, hi = 0, LONG_MAX
    where = select.args.get("where")
    for term in _conjuncts(where.this) if where is not None else []:
        column, op, values = _comparison(term, text, start)
        if column in result.group_columns:
            if op != "=":
                raise error_at(
                    text, node_offset(term, start), f"{column} needs an equality: {column} = ..."
                )
            kind = result.group_kinds[result.group_columns.index(column)]
            key[column] = _key_value(values[0], kind, text, start)
        elif column == "window_start" and result.window_size_ms is not None:
            bounds = [_time_value(v, text, start) for v in values]
            if op == "BETWEEN":
                lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
            elif op == "=":
                lo, hi = max(lo, bounds[0]), min(hi, bounds[0])
            elif op == ">=":
                lo = max(lo, bounds[0])
            elif op == ">":
                lo = max(lo, bounds[0] + 1)
            elif op == "<=":
                hi = min(hi, bounds[0])
            else:
                hi = min(hi, bounds[0] - 1)
        else:
            allowed = " = ..., ".join(result.group_columns) + " = ..."
            if result.window_size_ms is not None:
                allowed += " and window_start bounds"
            raise error_at(
                text,
                node_offset(term, start),
                f"a pull query on {table.name} filters on its key only ({allowed}), "
                f"not on {column}",
            )
    limit = _limit(select, text, start)
    missing = [c for c in result.group_columns if c not in key]
    if not key and result.kind == "session":
        raise error_at(
            text,
            node_offset(select, start),
            f"a pull query on {table.name} (session windows) needs the key: WHERE "
            + " AND ".join(f"{c} = ..." for c in missing),
        )
    if key and missing:
        raise error_at(
            text,
            node_offset(select, start),
            f"a pull query on {table.name} needs the whole key (or none, a scan): WHERE "
            + " AND ".join(f"{c} = ..." for c in missing),
        )
    if not key:
        return PullQuery(result, None, lo, hi, columns, limit)
    return PullQuery(result, [key[c] for c in result.group_columns], lo, hi, columns, limit)


def _limit(select: exp.Select, text: str, start: int) -> int | None:
    """``LIMIT n`` of a pull query (a non-negative integer literal), or None."""
    node = select.args.get("limit")
    if node is None:
        return None
    value = node.expression
    if not (isinstance(value, exp.Literal) and value.is_int and int(value.name) >= 0):
        raise error_at(text, node_offset(node, start), "LIMIT needs a non-negative integer")
    return int(value.name)


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


_OPS: dict[type, str] = {exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_FLIPPED = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _comparison(node: exp.Expr, text: str, start: int) -> tuple[str, str, list[exp.Expr]]:
    """(column, operator, literal operands) of ``col op literal`` (either side) or
    ``col BETWEEN a AND b``."""
    if isinstance(node, exp.Between) and isinstance(node.this, exp.Column):
        return node.this.name, "BETWEEN", [node.args["low"], node.args["high"]]
    op = _OPS.get(type(node))
    if op is not None and isinstance(node, exp.Binary):
        if isinstance(node.left, exp.Column) and not isinstance(node.right, exp.Column):
            return node.left.name, op, [node.right]
        if isinstance(node.right, exp.Column) and not isinstance(node.left, exp.Column):
            return node.right.name, _FLIPPED[op], [node.left]
    raise error_at(
        text,
        node_offset(node, start),
        f"a pull query's WHERE is a conjunction of column = literal and window_start bounds: "
        f"{node.sql()}",
    )


def _literal(node: exp.Expr, text: str, start: int) -> Any:
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -_literal(node.this, text, start)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        number = node.this
        return float(number) if any(c in number for c in ".eE") else int(number)
    raise error_at(text, node_offset(node, start), f"expected a literal, got {node.sql()}")


def _key_value(node: exp.Expr, kind: str, text: str, start: int) -> Any:
    value = _literal(node, text, start)
    if kind == "STRING" and isinstance(value, str):
        return value
    if kind == "BIGINT" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "DOUBLE" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "BOOLEAN" and isinstance(value, bool):
        return value
    if kind == "TIMESTAMP":
        return value
    raise error_at(
        text, node_offset(node, start), f"type mismatch: {node.sql()} is not a {kind} key value"
    )


def _time_value(node: exp.Expr, text: str, start: int) -> int:
    millis = parse_timestamp(_literal(node, text, start))
    if millis is None:
        raise error_at(
            text, node_offset(node, start), f"{node.sql()} is not a TIMESTAMP or epoch ms"
        )
    return millis


def execute_pull(query: PullQuery, store: Any) -> list[Row]:
    """The rows of ``query`` from a read-only view of its result's store."""
    result = query.result
    entries: list[tuple[Any, tuple[int, int] | None, Any]] = []
    size = result.window_size_ms or 0
    if query.key is None:  # a scan: this instance's share of every key, in key order
        if result.kind == "keyvalue":
            entries = [(key, None, acc) for key, acc in store.all()]
        else:
            for windowed, acc in store.fetch_all(query.window_from, query.window_to):
                start = windowed.window.start
                entries.append((windowed.key, (start, min(start + size, LONG_MAX)), acc))
        entries.sort(key=lambda e: (orjson.dumps(e[0]), e[1]))
    elif result.kind == "keyvalue":
        acc = store.get(query.key)
        if acc is not None:
            entries.append((query.key, None, acc))
    elif result.kind == "window":
        for start, acc in store.fetch(query.key, query.window_from, query.window_to):
            entries.append((query.key, (start, min(start + size, LONG_MAX)), acc))
    else:
        for windowed, acc in store.fetch(query.key):
            if query.window_from <= windowed.window.start <= query.window_to:
                end = windowed.window.end + result.session_gap_ms
                entries.append((query.key, (windowed.window.start, end), acc))
    rows: list[Row] = []
    for key, bounds, acc in entries:
        if query.limit is not None and len(rows) >= query.limit:
            break
        row = result.row(key, bounds, acc)
        if row is None:
            continue
        rows.append(row if query.columns is None else {c: row.get(c) for c in query.columns})
    return rows


# -- push ------------------------------------------------------------------------------


def _push(table: TableDef, select: exp.Select, text: str, alias: str | None) -> PushQuery:
    scope = RowScope(table, text, alias)
    where_node = select.args.get("where")
    where: Callable[[Row], bool] = lambda row: True  # noqa: E731
    if where_node is not None:
        compiled = compile_expression(where_node.this, scope)
        if compiled.kind not in ("BOOLEAN", "NULL"):
            raise error_at(
                text,
                node_offset(where_node.this),
                f"type mismatch: WHERE needs a BOOLEAN, {where_node.this.sql()} is {compiled.kind}",
            )
        fn = compiled.fn
        where = lambda row: fn(row) is True  # noqa: E731
    items: list[tuple[str, Callable[[Row], Any]]] = []
    star = False
    for i, item in enumerate(select.expressions):
        if isinstance(item, exp.Star):
            star = True
            continue
        expression = item.this if isinstance(item, exp.Alias) else item
        name = item.alias_or_name or f"EXPR${i}"
        items.append((name, compile_expression(expression, scope).fn))
    columns = list(table.columns)

    def project(row: Row) -> Row:
        out = {c: row.get(c) for c in columns} if star else {}
        for name, fn in items:
            out[name] = fn(row)
        return out

    return PushQuery(table, where, project)


class PushStream:
    """The rows of a push query, read from its table's topic after ``start()``.

    ``client_config`` holds the consumer settings (bootstrap servers, security);
    ``start`` assigns every partition at its current end offset (fetched synchronously, so
    a record written after ``start`` returns is seen); ``poll`` returns the next rows.
    """

    def __init__(self, query: PushQuery, client_config: dict[str, Any]) -> None:
        self.query = query
        self.client_config = client_config
        self._values = query.table.value_serde()
        self._consumer: Any = None

    def start(self, timeout: float = 10.0) -> PushStream:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                **self.client_config,
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "isolation.level": "read_committed",
            }
        )
        try:
            topic = self.query.table.topic
            meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise SqlError(
                    f"topic {topic} of table {self.query.table.name} does not exist",
                    line=1,
                    column=1,
                )
            assignment = []
            for partition in sorted(meta.partitions):
                tp = TopicPartition(topic, partition)
                _low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
                assignment.append(TopicPartition(topic, partition, high))
            consumer.assign(assignment)
        except BaseException:
            consumer.close()
            raise
        self._consumer = consumer
        return self

    def poll(self, timeout: float = 0.5) -> list[Row]:
        """The rows of the records that arrived within ``timeout`` seconds."""
        if self._consumer is None:
            raise RuntimeError("PushStream.poll before start()")
        rows = []
        values = self._values
        for msg in self._consumer.consume(num_messages=500, timeout=timeout):
            if msg.error() or msg.value() is None:
                continue
            try:
                value = values.deserialize(msg.topic(), msg.value())
            except SerializationError:
                continue
            if isinstance(value, dict) and self.query.where(value):
                rows.append(self.query.project(value))
        return rows

    def __iter__(self) -> Iterator[Row]:
        while self._consumer is not None:
            yield from self.poll()

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def __enter__(self) -> PushStream:
        return self if self._consumer is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def push_client_config(streams: Any) -> dict[str, Any]:
    """Consumer settings of a push query against ``streams``: the application's consumer
    settings (security included) with a group id of its own that is never joined."""
    config = streams.config
    settings = config.clients(getattr(streams, "client_logger", None)).state_consumer(
        role="sql-push",
        client_id=f"{config.application_id}-sql-push",
        user=config.consumer,
        partition_eof=False,
    )
    settings.pop("group.instance.id", None)
    return settings


def start_push(streams: Any, query: PushQuery | TransientQuery) -> Any:
    """A started push stream of ``query`` against the running ``streams``: a table's
    topic tailed (``PushStream``), or a transient application (``TransientPushStream``)."""
    from streaming.sql.transient import TransientPushStream

    if isinstance(query, PushQuery):
        return PushStream(query, push_client_config(streams)).start()
    return TransientPushStream(query, streams.config).start()
