"""The batch entry of a task: the records it takes from one input queue, processed in one go.

The boundary is narrow on purpose, so that a compiled core can implement it later without
touching the DSL or the runtime: :class:`BatchEntry` takes the task's queued records
(``Queued`` tuples) of one input partition (records in) and returns how many it consumed; its
effects leave through the task's two outputs only, the record collector
(``TaskContext.send``: records out) and the stores' changelog writer
(``TaskContext.log_change``: store writes out). Between the two, each record runs through
the sub-topology exactly as ``StreamTask.process_stamped`` would run it.

What is fused is decided from the topology alone, by exact processor class: from each
source, the built-in stateless nodes (``filter``/``filter_not``, ``map``, ``map_values``,
``select_key``, ``flat_map``, ``flat_map_values``, pass-throughs such as ``merge``) reached
through such nodes only, fan-outs included (children in ``forward``'s order, depth first),
become one generated function, without a ``Record``, a ``forward`` or a processor call per
hop. A node of any other kind (a user processor, ``peek``, ``split``, a stateful or emitting
node, a sink) ends its chain and gets each record through its ordinary ``process`` with the
record context set, so punctuation, caches, suppression and every other per-record
behaviour stay as they are; a sink of JSON keys and values (``SinkNode.direct``) and a
folding window aggregation (``WindowFold.process``) take the record's key, value,
timestamp and headers instead of a ``Record``, and do what ``process`` does with it. Records still go
through the fused chain one at a time, in queue order, each reaching the chain's end before
the next starts: user functions are called in the same order as on the per-record path, and
an exception surfaces at the same record, with the same type and message (its traceback, and
so a dead letter's stack-trace header, shows the fused function's frames instead of the
processors').

When every node the chains hand records to is a sink or a cached time-window aggregation,
those aggregations fold each window's records while the entry runs and write each window
once (``window_fold``; the exact conditions are in ``window_aggregate``'s docstring): the
entry turns the folds on, writes what they hold back before handling a failure, and at
its end; the task writes it before firing a punctuation.

When every node a chain hands records to is such a sink or fold, the entry does not build
each record's ``RecordContext``: it leaves the queued record in ``TaskContext.stamped``,
and ``TaskContext.record_context()`` builds its context the first time something asks
(the record collector on a failed send; a fold before handing a record to its
processor's own code, and for each window it writes). The fused functions are given no
context, so every reader gets the context the per-record path would have set.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from streaming.dsl.processors import stateless
from streaming.dsl.processors.window_aggregate import KStreamWindowAggregateProcessor
from streaming.dsl.processors.window_fold import BatchFolds, WindowFold, fold_store
from streaming.errors import StreamsException
from streaming.runtime.config_keys import PROCESSING_BATCH_ENABLED
from streaming.runtime.nodes import FixedKeyNode, ProcessorNode, SinkNode, SourceNode
from streaming.runtime.partition_group import OFFSET, TIMESTAMP, Queued, as_stamped
from streaming.state.caching import CachingWindowStore
from streaming.topology.processor import Record, RecordContext, new_record_context

if TYPE_CHECKING:
    from streaming.runtime.context import TaskContext
    from streaming.runtime.partition_group import StampedRecord
    from streaming.runtime.task import StreamTask

_MAP_RETURNED_NONE = "map() mapper returned None; return a (key, value) tuple"

#: processors that keep the key (the only ones a ``process_values`` node may fuse)
_KEY_PRESERVING = (
    stateless.FilterProcessor,
    stateless.MapValuesProcessor,
    stateless.FlatMapValuesProcessor,
    stateless.PassThrough,
)
_FUSABLE = (
    *_KEY_PRESERVING,
    stateless.MapProcessor,
    stateless.SelectKeyProcessor,
    stateless.FlatMapProcessor,
)

ProcessingErrorHandler = Callable[["StampedRecord", Exception], None]


class BatchEntry(Protocol):
    """Records in (one input partition's queue), records and store writes out (through the
    task's record collector and changelog writer); returns how many records it took."""

    def __call__(
        self,
        tp: tuple[str, int],
        queue: deque[Queued],
        limit: int,
        on_error: ProcessingErrorHandler | None,
        until: int | None,
    ) -> int: ...


def batch_enabled(config: dict[str, Any]) -> bool:
    """``processing.batch.enabled`` of a task's config (default true)."""
    raw = config.get(PROCESSING_BATCH_ENABLED, True)
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise StreamsException(
        f"Invalid value {raw!r} for configuration {PROCESSING_BATCH_ENABLED}: "
        "expected true or false"
    )


def fusable(node: ProcessorNode) -> bool:
    """Whether ``node`` is a built-in stateless node whose ``process`` the fused chain
    reproduces exactly (exact classes only: a subclass may change ``process``)."""
    processor = node.processor
    if type(node) is ProcessorNode:
        return type(processor) in _FUSABLE
    if type(node) is FixedKeyNode:
        return type(processor) in _KEY_PRESERVING
    return False


class _Generator:
    """Writes the fused function of one source: each fusable node inline (its user function
    bound as a name), nested under its parent in ``forward``'s order (children in turn,
    depth first), and each other node handed the record as ``forward`` hands it."""

    def __init__(
        self, context: TaskContext, direct: dict[str, Callable[..., None]] | None = None
    ) -> None:
        #: node name -> a callable taking ``(key, value, timestamp, headers)`` in place of
        #: the node's ``handle`` taking a ``Record`` (the window folds' ``process``)
        self.direct = direct or {}
        self.names: dict[str, Any] = {
            "Record": Record,
            "context": context,
            "MapReturnedNone": _MAP_RETURNED_NONE,
        }
        self.lines = ["def fused(k0, v0, ts, h):"]
        self.fused: list[str] = []
        self.tails: list[str] = []
        self._n = 0

    def _name(self, prefix: str, value: Any) -> str:
        self._n += 1
        name = f"{prefix}{self._n}"
        self.names[name] = value
        return name

    def children(self, nodes: list[ProcessorNode], k: str, v: str, indent: str) -> None:
        """Code handing the record ``(k, v)`` to ``nodes`` in turn."""
        record = None
        for node in nodes:
            if fusable(node):
                self.node(node, k, v, indent)
                continue
            direct = self.direct.get(node.name)
            if direct is not None:
                tail = self._name("t", node)
                call = self._name("d", direct)
                self.lines.append(f"{indent}context.current_node = {tail}")
                self.lines.append(f"{indent}{call}({k}, {v}, ts, h)")
                self.tails.append(node.name)
                continue
            if record is None:
                # one Record for every receiver of this forward, as forward passes one
                record = self._name("r", None)
                self.lines.append(f"{indent}{record} = Record({k}, {v}, ts, h)")
            tail = self._name("t", node)
            handle = self._name("p", node.handle)
            self.lines.append(f"{indent}context.current_node = {tail}")
            self.lines.append(f"{indent}{handle}({record})")
            self.tails.append(node.name)

    def node(self, node: ProcessorNode, k: str, v: str, indent: str) -> None:
        """Code of one fusable node, then of its children."""
        self.fused.append(node.name)
        proc: Any = node.processor
        kind = type(proc)
        lines = self.lines
        if kind is stateless.FilterProcessor:
            fn, negate = self._name("f", proc.predicate), self._name("n", proc.negate)
            lines.append(f"{indent}if bool({fn}({k}, {v})) is not {negate}:")
            indent += "    "
        elif kind is stateless.SelectKeyProcessor:
            fn = self._name("f", proc.selector)
            nk = self._name("k", None)
            lines.append(f"{indent}{nk} = {fn}({k}, {v})")
            k = nk
        elif kind is stateless.MapValuesProcessor:
            fn = self._name("f", proc.mapper)
            nv = self._name("v", None)
            args = f"{k}, {v}" if proc.with_key else v
            lines.append(f"{indent}{nv} = {fn}({args})")
            v = nv
        elif kind is stateless.MapProcessor:
            fn = self._name("f", proc.mapper)
            pair, nk, nv = self._name("q", None), self._name("k", None), self._name("v", None)
            lines.append(f"{indent}{pair} = {fn}({k}, {v})")
            lines.append(f"{indent}if {pair} is None:")
            lines.append(f"{indent}    raise ValueError(MapReturnedNone)")
            lines.append(f"{indent}{nk}, {nv} = {pair}")
            k, v = nk, nv
        elif kind is stateless.FlatMapProcessor:
            fn = self._name("f", proc.mapper)
            nk, nv = self._name("k", None), self._name("v", None)
            lines.append(f"{indent}for {nk}, {nv} in {fn}({k}, {v}):")
            indent += "    "
            k, v = nk, nv
        elif kind is stateless.FlatMapValuesProcessor:
            fn = self._name("f", proc.mapper)
            nv = self._name("v", None)
            args = f"{k}, {v}" if proc.with_key else v
            lines.append(f"{indent}for {nv} in {fn}({args}):")
            indent += "    "
            v = nv
        elif kind is not stateless.PassThrough:  # pragma: no cover - fusable() admits no other
            raise AssertionError(f"not fusable: {node}")
        before = len(lines)
        self.children(node.children, k, v, indent)
        if len(lines) == before and lines[-1].endswith(":"):
            lines.append(f"{indent}pass")

    def compile(self) -> Callable[[Any, Any, int, Any], None]:
        if len(self.lines) == 1:
            self.lines.append("    pass")
        exec("\n".join(self.lines), self.names)  # generated from the node kinds above only
        fused: Callable[[Any, Any, int, Any], None] = self.names["fused"]
        return fused


def compile_source(
    source: SourceNode,
    context: TaskContext,
    direct: dict[str, Callable[..., None]] | None = None,
) -> tuple[Callable[[Any, Any, int, Any], None], list[str], list[str]]:
    """The fused function ``(key, value, timestamp, headers)`` of ``source``'s records, the
    names of the nodes it runs inline and of the nodes it hands records to (``direct``:
    node name -> what takes ``(key, value, timestamp, headers)`` instead of its
    ``handle``)."""
    gen = _Generator(context, direct)
    gen.children(source.children, "k0", "v0", "    ")
    return gen.compile(), gen.fused, gen.tails


def _queue_entry(
    task: StreamTask,
    source: SourceNode,
    fused: Callable[[Any, Any, int, Any], None],
    folds: BatchFolds | None,
    lazy_context: bool,
) -> BatchEntry:
    """The batch entry of one source: ``StreamTask._process_queue``'s steps with
    ``process_stamped``'s body inlined around the fused chain, the task's window
    aggregations folding their windows while it runs (``folds``, if any). With
    ``lazy_context``, a record's ``RecordContext`` is built only if something asks the
    context for it (``TaskContext.stamped``)."""
    context = task.context
    group = task.partition_group
    punctuation_queue = context.stream_time_punctuations
    punctuate = task.maybe_punctuate_stream_time
    source_name = task.id, source.name

    def failure(rec: StampedRecord, exc: Exception) -> StreamsException:
        return StreamsException(
            f"Exception caught in process. taskId={source_name[0]}, "
            f"processor={source_name[1]}, topic={rec.topic}, partition={rec.partition}, "
            f"offset={rec.offset}: {type(exc).__name__}: {exc}"
        )

    def run_one(rec: StampedRecord) -> None:
        ts = rec.timestamp
        h = rec.headers
        context._record_context = RecordContext(ts, rec.offset, rec.partition, rec.topic, h)
        try:
            fused(rec.key, rec.value, ts, h)
        except StreamsException:
            raise
        except Exception as exc:
            raise failure(rec, exc) from exc
        finally:
            context.current_node = None
            context._record_context = None
        task.processed += 1
        task.commit_needed = True

    def entry(
        tp: tuple[str, int],
        queue: deque[Queued],
        limit: int,
        on_error: ProcessingErrorHandler | None,
        until: int | None,
    ) -> int:
        # run_one inlined: one call less per record. Between two records nothing reads the
        # current node or record context (a punctuation sets its own), so they are cleared
        # once, when the run ends or a record fails; the processed count and commit flag
        # too, once, for the records that went through. Nothing adds to or takes from the
        # queue while the entry runs, so the records it takes are counted before it starts
        # (at most ``limit``, and with ``until`` those before the first later one), and
        # the stream time is kept in a local between records and written as it moves
        queued = len(queue)
        count = limit if limit < queued else queued
        if until is not None:
            taken = 0
            for head in queue:
                if taken == count or head[TIMESTAMP] > until:
                    break
                taken += 1
            count = taken
        failed = 0
        rec = None
        popleft = queue.popleft
        punctuations = punctuation_queue.heap
        new_rc = new_record_context
        rc_type = RecordContext
        stream_time = group.stream_time
        if folds is not None:
            folds.begin()
        try:
            for _ in range(count):
                rec = popleft()
                topic, partition, offset, ts, key, value, h, _, _ = rec
                if ts > stream_time:
                    stream_time = group.stream_time = ts
                if lazy_context:
                    # a reader builds it (record_context()), at most once per record
                    context.stamped = rec
                    context._record_context = None
                else:
                    context._record_context = new_rc(rc_type, (ts, offset, partition, topic, h))
                try:
                    fused(key, value, ts, h)
                except Exception as exc:
                    failed += 1
                    context.current_node = None
                    context._record_context = None
                    context.stamped = None
                    if folds is not None:
                        folds.flush()
                    stamped = as_stamped(rec)
                    if on_error is None:
                        if isinstance(exc, StreamsException):
                            raise
                        raise failure(stamped, exc) from exc
                    if isinstance(exc, StreamsException):
                        on_error(stamped, exc)
                    else:
                        try:
                            raise failure(stamped, exc) from exc
                        except StreamsException as wrapped:
                            on_error(stamped, wrapped)
                if punctuations:
                    context.stamped = None
                    punctuate()
        finally:
            context.current_node = None
            context._record_context = None
            context.stamped = None
            n = queued - len(queue)
            if n > failed:
                task.processed += n - failed
                task.commit_needed = True
            if rec is not None:
                group.processed_offsets[tp] = rec[OFFSET]
            if folds is not None:
                folds.end()
        return n

    entry.run_one = run_one  # type: ignore[attr-defined]
    return entry


def _batch_folds(task: StreamTask, tails: list[str]) -> BatchFolds | None:
    """The folds of the window aggregations fused chains hand records to, when every node
    a chain hands records to is a sink or such an aggregation (``window_aggregate``'s
    conditions); else None."""
    nodes = [task.nodes[name] for name in dict.fromkeys(tails)]
    folding: list[tuple[ProcessorNode, CachingWindowStore]] = []
    for node in nodes:
        if type(node) is SinkNode:
            continue
        processor = node.processor
        if (
            type(node) is not ProcessorNode
            or type(processor) is not KStreamWindowAggregateProcessor
        ):
            return None
        caching = fold_store(processor)
        if caching is None:
            return None
        folding.append((node, caching))
    if not folding:
        return None
    caches = {id(caching.cache): caching.cache for _, caching in folding}
    if len(caches) != 1:
        return None
    folds = BatchFolds(next(iter(caches.values())))
    for node, caching in folding:
        WindowFold(node.processor, node, caching, folds)  # type: ignore[arg-type]
    return folds


def _lazy_context(
    task: StreamTask,
    tails: list[str],
    direct: dict[str, Callable[..., None]],
    folds: BatchFolds | None,
) -> bool:
    """Whether a chain may leave each record's ``RecordContext`` unbuilt until something
    asks ``TaskContext.record_context()`` for it: every node the chain hands records to
    is a sink called directly (``SinkNode.direct``: the record collector asks, on a
    failed send) or a folding window aggregation (``WindowFold`` keeps the queued record
    and asks before handing a record to the processor's own code). The fused stateless
    nodes' functions are given no context."""
    folding = set() if folds is None else {fold.node.name for fold in folds.folds}
    return all(
        name in folding or (type(task.nodes[name]) is SinkNode and name in direct) for name in tails
    )


class BatchPlan:
    """The batch entries of a task, one per source node, built once its processors are
    initialized; ``entry(topic)`` is None for a topic without one."""

    def __init__(self, task: StreamTask) -> None:
        self._entries: dict[int, BatchEntry] = {}
        #: (source name, names of the fused nodes, names of the chain's receivers)
        self.chains: list[tuple[str, list[str], list[str]]] = []
        sources = {id(s): s for s in task.nodes.values() if isinstance(s, SourceNode)}
        # the chains hand their records to sinks and window folds without a Record
        direct: dict[str, Callable[..., None]] = {}
        for name, node in task.nodes.items():
            if type(node) is SinkNode:
                sink = node.direct()
                if sink is not None:
                    direct[name] = sink
        #: node name -> what the fused chains call instead of the node's ``handle``
        self.direct = direct
        compiled = {key: compile_source(s, task.context, direct) for key, s in sources.items()}
        #: the task's window aggregations that fold their windows per batch, if any
        self.folds = _batch_folds(task, [t for _, _, tails in compiled.values() for t in tails])
        if self.folds is not None:
            direct.update((fold.node.name, fold.process) for fold in self.folds.folds)
            compiled = {key: compile_source(s, task.context, direct) for key, s in sources.items()}
        for key, (fused, inline, tails) in compiled.items():
            lazy = _lazy_context(task, tails, direct, self.folds)
            self._entries[key] = _queue_entry(task, sources[key], fused, self.folds, lazy)
            self.chains.append((sources[key].name, inline, tails))

    def flush_folds(self) -> None:
        """Write the windows the folds hold back (before something else runs mid-batch)."""
        if self.folds is not None:
            self.folds.flush()

    def entry(self, source: SourceNode) -> BatchEntry | None:
        return self._entries.get(id(source))

    def run_one(self, source: SourceNode) -> Callable[[StampedRecord], None] | None:
        """The per-record half of ``source``'s entry (for a task choosing among partitions
        record by record)."""
        entry = self._entries.get(id(source))
        return None if entry is None else entry.run_one  # type: ignore[attr-defined]
