"""KStream-KStream windowed joins: ``join``, ``left_join``, ``outer_join``.

Port of Kafka Streams 4.1 ``KStreamImpl.doJoin`` / ``repartitionForJoin`` and
``KStreamImplJoin.join``. The topology is the one Kafka builds, with Kafka's names::

    this  -> KSTREAM-WINDOWED-n   (this store)  -> KSTREAM-JOINTHIS-n+2  (other store) \\
                                                                                        KSTREAM-MERGE-n+4
    other -> KSTREAM-WINDOWED-n+1 (other store) -> KSTREAM-JOINOTHER-n+3 (this store)  /

``OUTERTHIS`` replaces ``JOINTHIS`` for outer joins and ``OUTEROTHER`` replaces ``JOINOTHER`` for
left and outer joins. The window stores (``<join-processor>-store``) retain duplicates, with
retention ``before + after + grace`` and window size ``before + after``; left and outer joins
also share the outer-join store ``KSTREAM-OUTERSHARED-n+2-store``. ``StreamJoined.with_name``
names the processors ``<name>-this-windowed``, ``<name>-[outer-]this-join``, ... and
``with_store_name`` the stores ``<store>-[outer-]this-join-store``,
``<store>-{left|outer}-shared-join-store``.

A stream whose key was changed is repartitioned first through ``<name>-left-repartition`` /
``<name>-right-repartition`` (or ``<processor>-repartition`` without a name); like Kafka, a
stream repartitioned for an unnamed join reuses that repartition topic in later joins
(this is also what a self-join of a re-keyed stream does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streaming.dsl.graph_marks import SelfJoinMark
from streaming.dsl.joins.kinds import INNER, LEFT, OUTER, as_joiner
from streaming.dsl.options import StreamJoined
from streaming.dsl.processors import stateless
from streaming.dsl.processors.stream_stream_join import (
    JoinWindowSupplier,
    StreamStreamJoinSupplier,
    TimeTrackerSupplier,
)
from streaming.dsl.repartition import repartition_for_join
from streaming.dsl.subtopology import source_nodes
from streaming.dsl.windows import JoinWindows
from streaming.errors import StreamsException

if TYPE_CHECKING:
    from streaming.dsl.kstream import KStream

WINDOWED_NAME = "KSTREAM-WINDOWED-"
JOINTHIS_NAME = "KSTREAM-JOINTHIS-"
JOINOTHER_NAME = "KSTREAM-JOINOTHER-"
OUTERTHIS_NAME = "KSTREAM-OUTERTHIS-"
OUTEROTHER_NAME = "KSTREAM-OUTEROTHER-"
OUTERSHARED_NAME = "KSTREAM-OUTERSHARED-"
MERGE_NAME = "KSTREAM-MERGE-"

# Kafka's join window stores retain duplicates and are never compacted.
_CLEANUP_POLICY = "cleanup.policy"


def join(
    stream: KStream,
    other: KStream,
    kind: str,
    joiner: Any = None,
    windows: JoinWindows | None = None,
    stream_joined: StreamJoined | None = None,
) -> KStream:
    """Join ``stream`` with ``other`` within ``windows``; ``kind`` is inner, left or outer."""
    if joiner is None or not callable(joiner):
        raise TypeError("joiner cannot be null")
    if not isinstance(windows, JoinWindows):
        raise TypeError(f"a stream-stream join needs JoinWindows, got {windows!r}")
    if stream_joined is None:
        stream_joined = StreamJoined()
    elif not isinstance(stream_joined, StreamJoined):
        raise TypeError(f"stream_joined must be a StreamJoined, got {stream_joined!r}")
    if kind not in (INNER, LEFT, OUTER):
        raise ValueError(f"unknown join kind {kind!r}")
    if other._builder is not stream._builder:
        raise ValueError("join() needs two streams of the same StreamsBuilder")
    sj = stream_joined
    value_joiner = as_joiner(joiner)
    left_outer = kind in (LEFT, OUTER)
    right_outer = kind == OUTER
    user_named = sj.name is not None

    # KStreamImpl.doJoin: repartition key-changed sides
    join_this, join_other = stream, other
    if join_this.repartition_required:
        join_this = repartition_for_join(
            join_this,
            f"{sj.name}-left" if user_named else join_this.name,
            sj.key_serde,
            sj.value_serde,
        )
    if join_other.repartition_required:
        join_other = repartition_for_join(
            join_other,
            f"{sj.name}-right" if user_named else join_other.name,
            sj.key_serde,
            sj.other_value_serde,
        )
    b = stream._builder
    topology = b.topology
    topology.copartition(source_nodes(topology, join_this.name, join_other.name))

    # KStreamImplJoin.join: names (each generated name burns the counter, even when named)
    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    this_windowed = _suffix_or_generate(b, sj.name, "-this-windowed", WINDOWED_NAME)
    other_windowed = _suffix_or_generate(b, sj.name, "-other-windowed", WINDOWED_NAME)
    join_this_generated = b.new_processor_name(OUTERTHIS_NAME if right_outer else JOINTHIS_NAME)
    join_other_generated = b.new_processor_name(OUTEROTHER_NAME if left_outer else JOINOTHER_NAME)
    join_this_name = sj.name + this_suffix if sj.name is not None else join_this_generated
    join_other_name = sj.name + other_suffix if sj.name is not None else join_other_generated
    merge_name = _suffix_or_generate(b, sj.name, "-merge", MERGE_NAME)
    if left_outer:  # both sides flow into the merge
        b.null_key_relaxed_joins.add(merge_name)

    this_supplier, other_supplier = sj.this_store_supplier, sj.other_store_supplier
    if (
        this_supplier is not None
        and other_supplier is not None
        and this_supplier.name == other_supplier.name
    ):
        raise StreamsException(
            "Both StoreSuppliers have the same name.  StoreSuppliers must provide unique names"
        )
    this_store = _window_store_builder(
        sj,
        this_supplier,
        (sj.store_name + this_suffix if sj.store_name is not None else join_this_generated)
        + "-store",
        windows,
        sj.value_serde,
    )
    other_store = _window_store_builder(
        sj,
        other_supplier,
        (sj.store_name + other_suffix if sj.store_name is not None else join_other_generated)
        + "-store",
        windows,
        sj.other_value_serde,
    )
    outer_store = (
        _outer_store_builder(sj, windows, join_this_generated, right_outer) if left_outer else None
    )

    topology.add_processor(this_windowed, JoinWindowSupplier(this_store), join_this.name)
    topology.add_processor(other_windowed, JoinWindowSupplier(other_store), join_other.name)

    spurious_result_fix = bool(getattr(windows, "spurious_result_fix", True))
    trackers = TimeTrackerSupplier()
    common: dict[str, Any] = {
        "before_ms": windows.before_ms,
        "after_ms": windows.after_ms,
        "grace_ms": windows.grace_ms,
        "spurious_result_fix": spurious_result_fix,
        "time_trackers": trackers,
        "outer_store_builder": outer_store,
    }
    join_this_supplier = StreamStreamJoinSupplier(
        left_side=True,
        joiner=value_joiner,
        outer=left_outer,
        other_store_builder=other_store,
        **common,
    )
    join_other_supplier = StreamStreamJoinSupplier(
        left_side=False,
        joiner=lambda key, right, left: value_joiner(key, left, right),
        outer=right_outer,
        other_store_builder=this_store,
        **common,
    )
    topology.add_processor(join_this_name, join_this_supplier, this_windowed)
    topology.add_processor(join_other_name, join_other_supplier, other_windowed)
    topology.add_processor(
        merge_name, stateless.supplier(stateless.PassThrough), join_this_name, join_other_name
    )
    # a self-join when both windowed nodes end up with one parent: the same stream, or
    # (after merge.repartition.topics) two repartitions of one key change: the optimizer
    # decides
    b.graph.self_joins.append(
        SelfJoinMark(
            this_windowed=this_windowed,
            other_windowed=other_windowed,
            join_this=join_this_name,
            join_other=join_other_name,
            merge=merge_name,
            this_store=this_store.name,
            dropped_stores=[s.name for s in (other_store, outer_store) if s is not None],
            before_ms=windows.before_ms,
            after_ms=windows.after_ms,
            retention_ms=windows.before_ms + windows.after_ms + windows.grace_ms,
            joiner=value_joiner,
        )
    )
    # no serde for the joined values; the key serde is not inherited from either side
    return b.new_stream(merge_name, sj.key_serde, None, repartition_required=False)


# ------------------------------------------------------------------------------ helpers


def _suffix_or_generate(b: Any, name: str | None, suffix: str, prefix: str) -> str:
    """Kafka's ``NamedInternal.suffixWithOrElseGet``: the counter is burnt either way."""
    generated = b.new_processor_name(prefix)
    return name + suffix if name is not None else generated


def _window_store_builder(
    sj: StreamJoined, supplier: Any, name: str, windows: JoinWindows, value_serde: Any
) -> Any:
    """A window store retaining duplicates (Kafka's StreamJoinedStoreFactory), or the user's."""
    from streaming.state import Stores

    size = windows.before_ms + windows.after_ms
    retention = size + windows.grace_ms
    if supplier is not None:
        if not supplier.retain_duplicates:
            raise StreamsException(
                "The StoreSupplier must set retainDuplicates=true, found retainDuplicates=false"
            )
        if supplier.retention_period != retention or supplier.window_size != size:
            raise StreamsException(
                f"Window settings mismatch. WindowBytesStoreSupplier settings (name="
                f"{supplier.name}, retention={supplier.retention_period}, window size="
                f"{supplier.window_size}) must match JoinWindows settings (before="
                f"{windows.before_ms}, after={windows.after_ms}, grace={windows.grace_ms}) "
                "for the window size and retention period"
            )
        builder = Stores.window_store_builder(supplier, sj.key_serde, value_serde)
        # Kafka's joinWindowStoreBuilderFromSupplier: the builder's defaults (logging on)
        return builder
    if sj.store_type == "in_memory":
        supplier = Stores.in_memory_window_store(name, retention, size, True)
    else:
        supplier = Stores.persistent_window_store(name, retention, size, True)
    builder = Stores.window_store_builder(supplier, sj.key_serde, value_serde)
    if sj.logging_enabled:
        return builder.with_logging_enabled({**sj.log_config, _CLEANUP_POLICY: "delete"})
    return builder.with_logging_disabled()


def _outer_store_builder(
    sj: StreamJoined, windows: JoinWindows, join_this_generated: str, right_outer: bool
) -> Any:
    """The shared outer-join store (Kafka's OuterStreamJoinStoreFactory)."""
    from streaming.state import Stores
    from streaming.state.list_value_store import ListValueStoreBuilder

    suffix = "-outer-shared-join" if right_outer else "-left-shared-join"
    this_supplier = sj.this_store_supplier
    if this_supplier is not None and this_supplier.name:
        base = this_supplier.name + suffix
    elif sj.store_name is not None:
        base = sj.store_name + suffix
    else:
        prefix = OUTERTHIS_NAME if right_outer else JOINTHIS_NAME
        base = OUTERSHARED_NAME + join_this_generated[len(prefix) :]
    name = base + "-store"
    size = windows.before_ms + windows.after_ms
    retention = size + windows.grace_ms
    if size > retention:
        raise ValueError(
            f"The retention period of the window store {name} must be no smaller than its "
            f"window size. Got size=[{size}], retention=[{retention}]"
        )
    if sj.store_type is not None:
        persistent = sj.store_type != "in_memory"
    elif this_supplier is not None:
        persistent = bool(this_supplier.persistent)
    else:
        persistent = True
    supplier = (
        Stores.persistent_key_value_store(name)
        if persistent
        else Stores.in_memory_key_value_store(name)
    )
    builder = ListValueStoreBuilder(supplier, sj.key_serde, sj.value_serde, sj.other_value_serde)
    if sj.logging_enabled:
        return builder.with_logging_enabled(dict(sj.log_config))
    return builder.with_logging_disabled()
