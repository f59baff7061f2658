"""Per-window pre-aggregation of the time-window aggregations a batch feeds.

Within one batch entry run, a :class:`WindowFold` folds the records of each (key, window)
into one pending aggregate and writes it to the store once, when the batch ends or before
anything could see the store (see ``window_aggregate``'s module docstring for when a
processor folds and why the outputs are those of the per-record path). :class:`BatchFolds`
holds the folds of one task and bounds the cache bytes their deferred puts may take, so
that no put the per-record path would have made could have made the cache evict.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming import serdes
from streaming.state import ValueAndTimestamp
from streaming.state.cache import ThreadCache, context_size
from streaming.state.caching import CachingWindowStore
from streaming.state.value_and_timestamp import ValueAndTimestampSerde
from streaming.state.window_store import TimestampedWindowStore, WindowStore
from streaming.topology.processor import Record, RecordContext, context_of

if TYPE_CHECKING:
    from streaming.dsl.processors.window_aggregate import KStreamWindowAggregateProcessor

_INF = float("inf")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63
_INT_MIN, _INT_MAX = -(2**31), 2**31
#: bytes of a cache node besides its key and entry (cache._NODE_OVERHEAD) plus an entry's
#: dirty flag byte and its value's 8-byte timestamp
_PUT_OVERHEAD = 24 + 1 + 8
#: the longest JSON orjson writes for an int of 64 bits ("-9223372036854775808") and for a
#: finite double (shortest round-trip form, at most 24 characters)
_JSON_INT_LEN, _JSON_FLOAT_LEN = 20, 32

#: serdes whose serialize and deserialize are pure functions of their argument
_PURE_SERDES = (
    serdes.Long,
    serdes.Integer,
    serdes.Short,
    serdes.Double,
    serdes.Float,
    serdes.String,
    serdes.Bytes,
    serdes.Json,
)


def _long(v: Any) -> int:
    return 8 if type(v) is int and _LONG_MIN <= v < _LONG_MAX else -1


def _integer(v: Any) -> int:
    return 4 if type(v) is int and _INT_MIN <= v < _INT_MAX else -1


def _double(v: Any) -> int:
    return 8 if type(v) is float and -_INF < v < _INF else -1


def _json(v: Any) -> int:
    kind = type(v)
    if kind is float:
        return _JSON_FLOAT_LEN if -_INF < v < _INF else -1
    if kind is int:
        return _JSON_INT_LEN if _LONG_MIN <= v < _LONG_MAX else -1
    return 5 if kind is bool else -1


#: per serde: the most bytes a value takes when its serde's round trip gives back an equal
#: value of the same type (so it need not be serialized to be passed on), else -1
_SCALARS: dict[type, Callable[[Any], int]] = {
    serdes.Long: _long,
    serdes.Integer: _integer,
    serdes.Double: _double,
    serdes.Json: _json,
}


_UNSET = object()


def _last_update(item: tuple[Any, list[Any]]) -> int:
    seq: int = item[1][4]
    return seq


def _no_scalar(v: Any) -> int:
    return -1


def _built(rc: Any) -> RecordContext | None:
    """A pending window's record context: ``rc`` itself, or that of the queued record (a
    tuple) the batch entry left it unbuilt for."""
    if isinstance(rc, tuple) and not isinstance(rc, RecordContext):
        return context_of(rc)
    return rc


def fold_store(processor: KStreamWindowAggregateProcessor) -> CachingWindowStore | None:
    """The caching layer a processor's pending windows go to, when the processor may fold
    (window_aggregate's conditions on the store and the emit strategy), else None."""
    if processor.forward_updates or not processor.time_windows:
        return None
    store = processor.window_store
    if type(store) is not TimestampedWindowStore or store.retain_duplicates:
        return None
    caching = store.wrapped
    if type(caching) is not CachingWindowStore or type(caching.cache) is not ThreadCache:
        return None
    value_serde = store.resolved_value_serde
    if type(value_serde) is not ValueAndTimestampSerde:
        return None
    if type(value_serde.inner) not in _PURE_SERDES:
        return None
    if type(store.resolved_key_serde) not in _PURE_SERDES:
        return None
    return caching


class BatchFolds:
    """The folding window aggregations of one task: turned on for a batch entry's run,
    flushed together (before a punctuation, a forward, a failure, and at the run's end)."""

    def __init__(self, cache: ThreadCache) -> None:
        self.cache = cache
        self.folds: list[WindowFold] = []
        #: bytes the pending windows' puts could have added to the cache, per record put
        self.reserved = 0

    def begin(self) -> None:
        for fold in self.folds:
            fold.processor.folding = fold

    def flush(self) -> None:
        """Write every pending window to its store."""
        for fold in self.folds:
            if fold.pending:
                fold.flush()
        self.reserved = 0

    def end(self) -> None:
        try:
            self.flush()
        finally:
            for fold in self.folds:
                fold.processor.folding = None


class WindowFold:
    """One processor's pending windows: (key bytes, window start) -> [aggregate, timestamp,
    record context of the last record folded in (or that record, queued, whose context is
    built when the window is written), its bytes if already serialized, the number of its
    last update]."""

    def __init__(
        self,
        processor: KStreamWindowAggregateProcessor,
        node: Any,
        caching: CachingWindowStore,
        batch: BatchFolds,
    ) -> None:
        self.processor = processor
        self.node = node
        self.batch = batch
        #: the task context (its record context and current node are set per record)
        self.context: Any = processor.context
        store: WindowStore = processor.window_store
        self.store = store
        self.caching = caching
        self.raw_key = store.raw_key
        self.raw_value = store.raw_value
        self.value_from = store.value_from
        self.initializer = processor.s.initializer
        self.aggregator = processor.s.aggregator
        self.size_ms: int = processor.size_ms
        self.advance_ms: int = processor.advance_ms
        self.scalar = _SCALARS.get(type(store.resolved_value_serde.inner), _no_scalar)
        # cache key: 8-byte segment prefix + the schema key around the key bytes
        self.key_overhead = 8 + len(caching.key_schema.store_key(b"", 0, 0)) + _PUT_OVERHEAD
        self.pending: dict[tuple[bytes, int], list[Any]] = {}
        self._key_bytes: dict[str, bytes] = {}
        #: (topic, headers, size) of the last record context measured
        self._context_size: tuple[Any, Any, int] = (_UNSET, _UNSET, 0)
        #: update counter: a pending window's last update, the order they are written in
        self._seq = 0
        batch.folds.append(self)

    def process(self, key: Any, value: Any, timestamp: int, headers: Any) -> None:
        """The processor's ``process`` of the record ``(key, value, timestamp, headers)``
        without building a ``Record``, where the record takes the plain path: folding on,
        a key, no emit before expiry, every window of the record open and not emitted
        before a restart. Any other record goes to ``process`` itself, which decides the
        same way from the same state (only the stream time may be advanced already, as
        ``process`` advances it first)."""
        proc = self.processor
        if proc.folding is None or key is None:
            self._process(key, value, timestamp, headers)
            return
        if timestamp > proc.observed_stream_time:
            if timestamp > proc.emit_before_puts_after:
                self._process(key, value, timestamp, headers)
                return
            proc.observed_stream_time = timestamp
        window_close_time = proc.observed_stream_time - proc.grace_ms
        size = self.size_ms
        advance = self.advance_ms
        window_start = max(0, timestamp - size + advance) // advance * advance
        first_end = window_start + size
        emit_final = proc.emit_final
        if first_end <= window_close_time or (
            emit_final and first_end <= proc.last_emit_window_close_time
        ):
            # a window closed, or emitted before a restart: the late-record paths
            self._process(key, value, timestamp, headers)
            return
        # window ends grow with their starts: every later window is open too
        update = self.update
        if advance == size and window_start <= timestamp:
            update(key, window_start, timestamp, value)
        else:
            for start in range(window_start, timestamp + 1, advance):
                update(key, start, timestamp, value)
        if emit_final:
            self.context.record_context()  # built for the forwards, if left unbuilt
            proc.maybe_forward_final_result(
                Record(key, value, timestamp, headers), window_close_time
            )

    def _process(self, key: Any, value: Any, timestamp: int, headers: Any) -> None:
        """The processor's own ``process`` of the record, its record context built first
        where the batch entry left it unbuilt (the processor reads it and forwards)."""
        self.context.record_context()
        self.processor.process(Record(key, value, timestamp, headers))

    def update(self, key: Any, window_start: int, timestamp: int, value: Any) -> None:
        """The per-record path's fetch, aggregate and put of one window, the put deferred
        while its cache bytes fit the budget."""
        try:
            if type(key) is str:
                kb = self._key_bytes.get(key)
                if kb is None:
                    kb = self._key_bytes[key] = self.raw_key(key)
            else:
                kb = self.raw_key(key)
            pk = (kb, window_start)
            pending = self.pending
            entry = pending.get(pk)
            if entry is None:
                raw = self.caching.fetch(kb, window_start)
                vat = None if raw is None else self.value_from(raw)
                agg, agg_ts = (None, 0) if vat is None else vat
            else:
                agg, agg_ts = entry[0], entry[1]
            if agg is None:
                agg = self.initializer()
                new_ts = timestamp
            else:
                new_ts = timestamp if timestamp > agg_ts else agg_ts
            new_agg = self.aggregator(key, value, agg)
            size = self.scalar(new_agg)
            raw = None
            if size < 0:
                # serialized now, as the per-record path's put would, and read back as the
                # next record's fetch would see it
                raw = self.raw_value(ValueAndTimestamp.make(new_agg, new_ts))
                if raw is None:
                    size, agg = -8, None
                else:
                    size = len(raw) - 8
                    vat = self.value_from(raw)
                    agg = None if vat is None else vat.value
            else:
                agg = new_agg
            context = self.context
            rc: Any = context._record_context
            if rc is not None:
                rc_topic, rc_headers = rc.topic, rc.headers
            else:
                # left unbuilt by the batch entry: the queued record (a tuple), whose
                # context is built if the window is written with it
                rc = context.stamped
                rc_topic, rc_headers = (None, None) if rc is None else (rc[0], rc[6])
            # a context's size depends on its topic and headers only: records of one
            # partition without new headers share it
            topic, headers, rc_size = self._context_size
            if rc is None or rc_topic is not topic or rc_headers is not headers:
                rc_size = context_size(_built(rc))
                if rc is not None and type(rc_headers) is tuple:
                    self._context_size = (rc_topic, rc_headers, rc_size)
            bound = self.key_overhead + len(kb) + size + rc_size
            batch = self.batch
            cache = batch.cache
            if cache.size_bytes + batch.reserved + bound > cache.max_bytes:
                # this put could make the cache evict: from the state the per-record path has
                # now, the put itself
                batch.flush()
                self.store.put(key, ValueAndTimestamp.make(new_agg, new_ts), window_start)
                return
            batch.reserved += bound
            self._seq = seq = self._seq + 1
            if entry is None:
                pending[pk] = [agg, new_ts, rc, raw, seq]
            else:
                entry[0], entry[1], entry[2], entry[3], entry[4] = agg, new_ts, rc, raw, seq
        except BaseException:
            # the per-record path failed at this window, its puts so far made and this
            # window read (which refreshes its place in the cache's LRU order)
            self.batch.flush()
            with contextlib.suppress(Exception):
                self.store.fetch(key, window_start)
            raise

    def flush(self) -> None:
        """Put the pending windows, each with the record context of its last record."""
        context = self.context
        saved_rc, saved_node = context._record_context, context.current_node
        context.current_node = self.node
        put = self.caching.put
        raw_value = self.raw_value
        make = ValueAndTimestamp.make
        pending = self.pending
        try:
            # in the order of their last update
            for (kb, window_start), (agg, ts, rc, raw, _) in sorted(
                pending.items(), key=_last_update
            ):
                context._record_context = _built(rc)
                put(kb, raw if raw is not None else raw_value(make(agg, ts)), window_start)
        finally:
            pending.clear()
            self._key_bytes.clear()
            context._record_context = saved_rc
            context.current_node = saved_node
