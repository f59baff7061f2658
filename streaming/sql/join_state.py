"""The processors of a regular (unbounded) join, as Flink's runtime runs one.

A regular join's rows are a changelog: each record's value is a change ``{"op": "+" |
"-", "row": ...}`` (an insert, or the retraction of a row emitted before).

- ``ChangelogNormalize``: an upsert table's records (key, row or None) as changes, the
  key's previous row retracted before its new one is inserted (Flink's
  ``ChangelogNormalize``); keeps each key's last row.
- ``StreamingJoin``: the join itself (Flink's ``StreamingJoinOperator``), keyed by the
  join key; keeps every row of each side under its join key with its count and (for a
  side an outer join keeps) how many rows of the other side it matches, so it knows when
  to emit or retract the row padded with NULLs.
- ``SinkUpsertMaterializer``: changes -> upserts on the sink's PRIMARY KEY (Flink's
  ``SinkUpsertMaterializer``): keeps the rows of each sink key, writes the latest, and
  when that one is retracted the one before it (a tombstone when none is left).

Bounded state (``'table.exec.state.ttl'``, or a ``STATE_TTL`` hint per input of a
join; ``ttl_ms`` / ``ttls``): an entry not written for the TTL
(processing time, as Flink's ``OnCreateAndWrite`` / ``NeverReturnExpired``) is treated as
gone when read, and a wall-clock punctuator drops expired entries every TTL.
"""

from __future__ import annotations

from typing import Any

from streaming.topology.processor import Processor, PunctuationType, Record

#: how often (at most) the wall-clock punctuator looks for expired entries
MAX_PURGE_INTERVAL_MS = 60_000


def change(op: str, row: Any) -> dict[str, Any]:
    """A changelog record's value: ``op`` "+" (insert) or "-" (retraction) of ``row``."""
    return {"op": op, "row": row}


class _Expiring(Processor):
    """A processor whose stores keep ``{"t": last write (wall clock ms), ...}`` entries,
    each store under its TTL (``ttls``, one per store; None: kept for good)."""

    ttls: tuple[int | None, ...]
    store_names: tuple[str, ...]

    def init(self, context: Any) -> None:
        super().init(context)
        self.stores = [context.get_state_store(name) for name in self.store_names]
        bounded = [ttl for ttl in self.ttls if ttl is not None]
        if bounded:
            interval = max(1, min(*bounded, MAX_PURGE_INTERVAL_MS))
            context.schedule(interval, PunctuationType.WALL_CLOCK_TIME, self.purge)

    def now(self) -> int:
        return self.context.current_system_time_ms()

    def alive(self, entry: dict[str, Any], now: int, store: int = 0) -> bool:
        """Whether an entry of the ``store``-th store is still kept at ``now``."""
        ttl = self.ttls[store]
        return ttl is None or entry["t"] + ttl > now

    def purge(self, now: int) -> None:
        """Drop the expired entries of every store."""
        for i, store in enumerate(self.stores):
            if self.ttls[i] is None:
                continue
            for key, value in list(store.all()):
                kept = self.kept(value, now, i)
                if kept is None:
                    store.delete(key)
                elif kept != value:
                    store.put(key, kept)

    def kept(self, value: Any, now: int, store: int) -> Any:
        """What remains of a value of the ``store``-th store at ``now`` (None: nothing)."""
        return value if self.alive(value, now, store) else None


class ChangelogNormalize(_Expiring):
    """An upsert table's records as changes: a key's new row retracts its previous one."""

    def __init__(self, store: str, ttl_ms: int | None) -> None:
        self.store_names = (store,)
        self.ttls = (ttl_ms,)

    def process(self, record: Record) -> None:
        store = self.stores[0]
        now = self.now()
        entry = store.get(record.key)
        old = entry["row"] if entry is not None and self.alive(entry, now) else None
        new = record.value if isinstance(record.value, dict) else None
        if old is not None and old == new:
            store.put(record.key, {"row": new, "t": now})
            return
        if old is not None:
            self.context.forward(record.with_value(change("-", old)))
        if new is None:
            store.delete(record.key)
            return
        store.put(record.key, {"row": new, "t": now})
        self.context.forward(record.with_value(change("+", new)))


class StreamingJoin(_Expiring):
    """Joins the changes of both sides (values ``{"side": "left" | "right", "op", "row"}``)
    keyed by their join key (a list of the join columns' values).

    Each side's store maps a join key to its rows: ``{"row", "n": times it came, "a": rows
    of the other side it matches, "t": last write}``. A row matches the other side's rows
    of its key for which ``condition(left_row, right_row)`` holds. A row of a side the
    join keeps (``outer``) that matches nothing comes out padded with NULLs; when its
    first match arrives that row is retracted, and when its last match is retracted it
    comes out padded again. A key with a NULL value matches nothing."""

    def __init__(
        self,
        left_store: str,
        right_store: str,
        outer: dict[str, bool],
        condition: Any,
        ttls: tuple[int | None, int | None],
    ) -> None:
        self.store_names = (left_store, right_store)
        self.outer = outer
        self.condition = condition
        self.ttls = ttls

    def kept(self, value: Any, now: int, store: int) -> Any:
        entries = [e for e in value if self.alive(e, now, store)]
        return entries or None

    def process(self, record: Record) -> None:
        value = record.value
        side, op, row = value["side"], value["op"], value["row"]
        other_side = "right" if side == "left" else "left"
        theirs = self.stores[1] if side == "left" else self.stores[0]
        at, other_at = (0, 1) if side == "left" else (1, 0)

        def joined(a: Any, b: Any) -> dict[str, Any]:
            return {side: a, other_side: b}

        def matches(entry: dict[str, Any]) -> bool:
            left, right = (row, entry["row"]) if side == "left" else (entry["row"], row)
            return self.condition(left, right)

        key = record.key
        if not isinstance(key, list) or any(v is None for v in key):
            if self.outer[side]:
                self.emit(record, op, joined(row, None))
            return
        now = self.now()
        others = [e for e in theirs.get(key) or [] if self.alive(e, now, other_at)]
        matched = [e for e in others if matches(e)]
        if op == "+":
            if not matched and self.outer[side]:
                self.emit(record, "+", joined(row, None))
            for entry in matched:
                if self.outer[other_side] and entry["a"] == 0:
                    for _ in range(entry["n"]):
                        self.emit(record, "-", joined(None, entry["row"]))
                for _ in range(entry["n"]):
                    self.emit(record, "+", joined(row, entry["row"]))
                entry["a"] += 1
                entry["t"] = now
        else:
            if not matched and self.outer[side]:
                self.emit(record, "-", joined(row, None))
            for entry in matched:
                for _ in range(entry["n"]):
                    self.emit(record, "-", joined(row, entry["row"]))
                entry["a"] = max(0, entry["a"] - 1)
                entry["t"] = now
                if self.outer[other_side] and entry["a"] == 0:
                    for _ in range(entry["n"]):
                        self.emit(record, "+", joined(None, entry["row"]))
        if matched:
            theirs.put(key, others)
        self.remember(at, key, op, row, sum(e["n"] for e in matched), now)

    def remember(self, at: int, key: Any, op: str, row: Any, matches: int, now: int) -> None:
        """Count ``row`` in (op "+") or out of (op "-") its side's rows of ``key`` (in the
        ``at``-th store)."""
        store = self.stores[at]
        entries = [e for e in store.get(key) or [] if self.alive(e, now, at)]
        found = next((e for e in entries if e["row"] == row), None)
        if op == "+":
            if found is None:
                entries.append({"row": row, "n": 1, "a": matches, "t": now})
            else:
                found["n"] += 1
                found["a"] = matches
                found["t"] = now
        elif found is not None:
            found["n"] -= 1
            found["t"] = now
            if found["n"] == 0:
                entries.remove(found)
        if entries:
            store.put(key, entries)
        else:
            store.delete(key)

    def emit(self, record: Record, op: str, row: dict[str, Any]) -> None:
        self.context.forward(record.with_value(change(op, row)))


class SinkUpsertMaterializer(_Expiring):
    """Changes keyed by the sink key -> (sink key, row) upserts and (sink key, None)
    deletes: the latest row of a key is written; retracting it writes the one before (a
    tombstone when none is left); retracting an older one writes nothing."""

    def __init__(self, store: str, ttl_ms: int | None) -> None:
        self.store_names = (store,)
        self.ttls = (ttl_ms,)

    def process(self, record: Record) -> None:
        store = self.stores[0]
        now = self.now()
        entry = store.get(record.key)
        rows: list[Any] = entry["rows"] if entry is not None and self.alive(entry, now) else []
        op, row = record.value["op"], record.value["row"]
        if op == "+":
            rows.append(row)
            self.context.forward(record.with_value(row))
        else:
            at = next((i for i in range(len(rows) - 1, -1, -1) if rows[i] == row), None)
            if at is None:
                return  # not kept (expired): nothing to take back
            rows.pop(at)
            if at == len(rows):
                self.context.forward(record.with_value(rows[-1] if rows else None))
        if rows:
            store.put(record.key, {"rows": rows, "t": now})
        else:
            store.delete(record.key)


class CountOccurrences(_Expiring):
    """Changes keyed by their whole row -> upserts of a view keyed by the row and its
    occurrence (``column``: 1 for the first copy of a row, 2 for the second ...): an
    insert adds the next occurrence, a retraction deletes the last one, so the view's
    rows are the changelog's multiset (each copy of a row kept apart, as a downstream
    aggregation counts them)."""

    def __init__(self, store: str, column: str, ttl_ms: int | None) -> None:
        self.store_names = (store,)
        self.column = column
        self.ttls = (ttl_ms,)

    def process(self, record: Record) -> None:
        store = self.stores[0]
        now = self.now()
        entry = store.get(record.key)
        count = entry["n"] if entry is not None and self.alive(entry, now) else 0
        op, row = record.value["op"], record.value["row"]
        if op == "+":
            count += 1
            numbered = {**row, self.column: count}
            self.context.forward(Record(numbered, numbered, record.timestamp))
        elif count > 0:
            self.context.forward(Record({**row, self.column: count}, None, record.timestamp))
            count -= 1
        if count:
            store.put(record.key, {"n": count, "t": now})
        else:
            store.delete(record.key)
