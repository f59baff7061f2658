"""Streaming SQL: Flink-SQL-style statements compiled to a ``Topology``.

``compile(text)`` turns ``CREATE TABLE ... WITH (...)`` declarations over Kafka topics and
``INSERT INTO sink SELECT ...`` queries into StreamsBuilder calls; ``explain(text)``
returns the compiled topology's ``describe()``. Supported: projection and WHERE with
expressions (arithmetic, comparison, AND/OR/NOT, IS NULL, CASE, CAST, COALESCE, UPPER,
LOWER, CONCAT / ``||``, SUBSTRING, CHAR_LENGTH, TRIM); GROUP BY on a stream with COUNT,
COUNT(DISTINCT), SUM, AVG, MIN, MAX, over TUMBLE/HOP/SESSION windows (group-window
functions or window TVFs) or none, and HAVING; joins (stream-table, also
``FOR SYSTEM_TIME AS OF``; interval joins of two streams; table-table on the keys or a
foreign key; RIGHT joins as the mirrored LEFT joins; left-deep chains of more than two
tables, ``joins``; regular joins of streams and tables, INNER / LEFT / RIGHT / FULL,
updating as Flink's, with ``SET 'table.exec.state.ttl'``, ``regular_join``);
window aggregations final (one row per window, as Flink) unless ``EMIT CHANGES``;
MATCH_RECOGNIZE (``match_recognize``, its NFA ``row_pattern``); ``PROCTIME()`` columns;
computed and Kafka METADATA columns (``computed_columns``); statement sets; EXPLAIN;
Python scalar, table (``LATERAL TABLE``) and aggregate functions (``functions``: ``@udf``
/ ``@udtf`` / ``@udaf``, ``compile(..., functions=...)`` or ``CREATE FUNCTION ... LANGUAGE
PYTHON``; a Java class name runs the Python stand-in registered for it,
``java_functions``); Flink's ``'filesystem'`` connector (``filesystem``: a partitioned sink
whose files become visible on commit, ``file_sink``, and a bounded table for lookup joins,
``file_tables``). Errors are ``SqlError`` with line and column, naming the constructs not
supported (``unsupported``).

Running: ``python -m streaming sql FILE.sql --config app.properties`` (``streaming.cli``).
Pull queries (``pull(streams, text)``, or POST to the query server's ``/sql``) read the
state store of an aggregation's sink table, which is named after the table; push queries
(``... EMIT CHANGES``: ``push(streams, text)`` or ``/sql``) stream a table's new rows
(``streaming.sql.queries``), or, when they aggregate, window or join, the running result
of a transient application compiled from them (``streaming.sql.transient``).

Queries compose: ``CREATE TABLE ... AS SELECT`` (``views``, ``derived``), ``CREATE VIEW``
and subqueries in FROM (kept inside the topology), GROUP BY over joins
(``join_groups``) and over updating tables (``KGroupedTable`` with a subtractor);
foreign-key table-table joins.

Not yet: windows over joins or updating tables; in a chain of joins, an interval join
that is not the first; the Dagster integration.
"""

from __future__ import annotations

from typing import Any

from streaming.sql.errors import SqlError
from streaming.sql.functions import udaf, udf, udtf
from streaming.topology import Topology

__all__ = ["SqlError", "compile", "explain", "pull", "push", "udaf", "udf", "udtf"]


def compile(
    text: str,
    config: dict[str, Any] | None = None,
    *,
    late_topic: str | None = None,
    functions: dict[str, Any] | None = None,
) -> Topology:
    """The topology of the statements in ``text`` (``config`` goes to ``build``); its SQL
    catalog (tables, materialized results) is registered for pull and push queries.

    ``late_topic``: where each time-windowed aggregation writes the rows it leaves out as
    late (``streaming.sql.late``), instead of logging them. ``functions``: Python
    functions the statements call, by SQL name (``streaming.sql.functions``)."""
    from streaming.sql.compiler import Compiler
    from streaming.sql.functions import Functions
    from streaming.sql.results import catalog_for, register

    try:
        given = Functions(functions)
    except ValueError as e:
        raise SqlError(str(e), line=1, column=1) from None
    compiler = Compiler(text, late_topic=late_topic, functions=given)
    compiler.compile_all()
    topology = compiler.builder.build(config)
    register(topology, catalog_for(compiler.tables, compiler.results))
    return topology


def _catalog(streams: Any) -> Any:
    from streaming.sql.results import catalog_of

    catalog = catalog_of(streams.topology)
    if catalog is None:
        raise SqlError(
            "this application was not compiled from SQL (streaming.sql.compile)", line=1, column=1
        )
    return catalog


def pull(streams: Any, text: str) -> list[dict[str, Any]]:
    """The rows of the pull query ``text`` from the stores of the running ``streams``.

    Reads this instance's store; when the key belongs to another instance (known through
    ``application.server``), raises ``SqlError`` naming it: its query server's ``/sql``
    answers, or any instance's, which forwards. A scan (no key in WHERE) returns this
    instance's share of the keys; ``/sql`` gathers every instance's."""
    from streaming import serdes
    from streaming.sql.queries import PullQuery, execute_pull, plan

    query = plan(_catalog(streams), text)
    if not isinstance(query, PullQuery):
        raise SqlError("an EMIT CHANGES query streams: use push()", line=1, column=1)
    store = query.result.store
    if streams.host_info.port >= 0 and query.key is not None:
        owner = streams.metadata_for_key(store, query.key, serdes.Json()).active_host
        if owner.port >= 0 and owner != streams.host_info:
            raise SqlError(f"the key is hosted by {owner}: query it there", line=1, column=1)
    return execute_pull(query, streams.store(store))


def push(streams: Any, text: str) -> Any:
    """A started ``PushStream`` (or, for a query that aggregates, windows or joins, a
    ``TransientPushStream``) of the push query ``text`` (``... EMIT CHANGES``): iterate it
    (or ``poll()``) for the rows of records written after this call; ``close()`` it when
    done (a transient query's application, state and topics go with it)."""
    from streaming.sql.queries import PullQuery, plan, start_push

    query = plan(_catalog(streams), text)
    if isinstance(query, PullQuery):
        raise SqlError("a push query ends with EMIT CHANGES", line=1, column=1)
    return start_push(streams, query)


def explain(text: str) -> str:
    """``Topology.describe()`` of the statements in ``text`` (``EXPLAIN`` prefixes allowed)."""
    return str(compile(text).describe())
