"""SESSION windows in the DuckDB translation (``batch``), merged as the stream merges them.

    SELECT k, COUNT(*), SESSION_START(ts, gap), SESSION_END(ts, gap)
    FROM t WHERE ... GROUP BY k, SESSION(ts, gap)

(or ``TABLE(SESSION(TABLE t [PARTITION BY k], DESCRIPTOR(ts), gap))`` grouped by
``window_start, window_end, k``) groups each key's rows (the GROUP BY items but the window)
into sessions as Kafka's ``SessionWindows`` merges them (``session_aggregate``): a row
joins every session of its key that ends at most ``gap`` before it or starts at most
``gap`` after it, both bounds inclusive, so over all the rows a session is a run of the
key's rows (in event time order) whose consecutive times are at most ``gap`` apart. The
translation numbers those runs with window functions over the rows the WHERE keeps (a
row it drops joins no session) and adds each row's session bounds under the query's
bound columns: the start is the first row's time, the end the last row's time plus the
gap (Flink's SESSION_END and the TVF's ``window_end``, as the stream reports them). The
GROUP BY then groups by them as by a TUMBLE window's bounds. A row the stream drops as
late (its merged session closed: stream time past its end, the gap and the WATERMARK
delay) is in its session here, as a late row is in its window for the other windows.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql.derived import is_aggregation

#: the window columns the GROUP BY holds besides the session's keys
_BOUND_NAMES = ("window_start", "window_end")


def translate(
    translation: Any,
    select: exp.Select,
    from_: exp.From,
    gap: int,
    bounds: tuple[str, str],
    event_ms: str,
) -> str:
    """The DuckDB SQL of ``select`` (an INSERT's query over one table grouped by a SESSION
    window of ``gap`` ms); ``bounds`` are the columns its GROUP BY reads the session's
    start and end from, ``event_ms`` the relations' event time column."""
    joins = select.args.get("joins") or []
    if joins or not is_aggregation(select):
        raise translation.error(
            joins[0] if joins else select,
            "a SESSION window is translated to batch SQL in a GROUP BY over one table",
        )
    from_.set("this", translation._relation(from_.this, None, None))
    translation._rewrite_expressions(select)
    where = select.args.get("where")
    select.set("where", None)
    group = select.args.get("group")
    keys = [
        item
        for item in (group.expressions if group is not None else [])
        if not (isinstance(item, exp.Column) and item.name in (*bounds, *_BOUND_NAMES))
    ]
    from_.set("this", _sessions(from_.this, keys, where, gap, bounds, event_ms))
    translation._name_columns(select, bounds)
    return str(select.sql("duckdb"))


def _sessions(
    relation: exp.Subquery,
    keys: list[exp.Expr],
    where: exp.Where | None,
    gap: int,
    bounds: tuple[str, str],
    event_ms: str,
) -> exp.Expr:
    """``relation``'s rows that ``where`` keeps, each with its session's ``bounds``."""
    alias = exp.to_identifier(relation.alias_or_name).sql("duckdb")
    rows = f"SELECT * FROM {relation.sql('duckdb')}"
    if where is not None:
        rows += f" {where.sql('duckdb')}"
    by = ", ".join(k.sql("duckdb") for k in keys)
    partition = f"PARTITION BY {by} " if by else ""
    # a run starts where a row comes more than the gap after the key's row before it;
    # rows of one time are peers (RANGE): they take the same run number
    starts = (
        f"SELECT *, CASE WHEN {event_ms} - LAG({event_ms}) OVER ({partition}ORDER BY "
        f"{event_ms}) <= {gap} THEN 0 ELSE 1 END AS __session_starts FROM ({rows}) AS {alias}"
    )
    numbered = (
        f"SELECT *, SUM(__session_starts) OVER ({partition}ORDER BY {event_ms} "
        f"RANGE UNBOUNDED PRECEDING) AS __session FROM ({starts}) AS {alias}"
    )
    session = f"PARTITION BY {by + ', ' if by else ''}__session"
    start, end = bounds
    bounded = (
        f"SELECT * EXCLUDE (__session_starts, __session), "
        f"MIN({event_ms}) OVER ({session}) AS {start}, "
        f"MAX({event_ms}) OVER ({session}) + {gap} AS {end} FROM ({numbered}) AS {alias}"
    )
    parsed = sqlglot.parse_one(bounded, read="duckdb")
    assert isinstance(parsed, exp.Select)
    return parsed.subquery(relation.alias_or_name)
