"""Repartitions: a stream written through an internal topic and read back, so that records
land on the partition of their (new) key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streaming.dsl.graph_marks import RepartitionMark
from streaming.dsl.naming import is_generated_name
from streaming.dsl.processors import stateless
from streaming.time import RecordTimestampExtractor

if TYPE_CHECKING:
    from streaming.dsl.builder import InternalBuilder
    from streaming.dsl.kstream import KStream


class NullKeyFilter:
    """The filter in front of every repartition sink: drops null keys unless a left/outer
    join is downstream (set by ``InternalBuilder.rewrite_repartition_nodes``)."""

    __slots__ = ("relaxed",)

    def __init__(self) -> None:
        self.relaxed = False

    def __call__(self, key: Any, value: Any) -> bool:
        return self.relaxed or key is not None


def create_repartition(
    builder: InternalBuilder,
    parent: str,
    topic_prefix: str,
    key_serde: Any,
    value_serde: Any,
    partitioner: Any = None,
    number_of_partitions: int | None = None,
    null_key_filter: NullKeyFilter | None = None,
    *,
    optimizable: bool = True,
) -> str:
    """Add filter -> sink -> internal topic -> source; return the new source's name.

    Names follow Kafka's ``createRepartitionedSource``: generated names always burn three
    counter values; user-derived prefixes give ``<topic>-filter/-sink/-source``.
    """
    topic = topic_prefix if topic_prefix.endswith("-repartition") else f"{topic_prefix}-repartition"
    gen_sink = builder.new_processor_name("KSTREAM-SINK-")
    gen_filter = builder.new_processor_name("KSTREAM-FILTER-")
    gen_source = builder.new_processor_name("KSTREAM-SOURCE-")
    if is_generated_name(topic_prefix):
        sink, filter_name, source = gen_sink, gen_filter, gen_source
    else:
        sink, filter_name, source = f"{topic}-sink", f"{topic}-filter", f"{topic}-source"
    topology = builder.topology
    predicate = null_key_filter if null_key_filter is not None else NullKeyFilter()
    builder.repartitions.append((source, predicate))
    topology.add_processor(
        filter_name,
        stateless.supplier(lambda: stateless.FilterProcessor(predicate, False)),
        parent,
    )
    topology.add_internal_topic(topic, number_of_partitions=number_of_partitions)
    topology.add_sink(
        sink,
        topic,
        filter_name,
        key_serde=key_serde,
        value_serde=value_serde,
        partitioner=partitioner,
    )
    # Kafka's FailOnInvalidTimestamp: a repartition topic's records keep the timestamps
    # they were written with (the default extractor ran before the repartition)
    topology.add_source(
        source,
        topic,
        key_serde=key_serde,
        value_serde=value_serde,
        timestamp_extractor=RecordTimestampExtractor(),
    )
    builder.graph.repartitions.append(
        RepartitionMark(filter_name, sink, source, topic, optimizable)
    )
    return source


def repartition_for_join(
    stream: KStream,
    repartition_name: str,
    key_serde: Any,
    value_serde: Any,
) -> KStream:
    """Kafka's ``KStreamImpl.repartitionForJoin``: the stream written through
    ``<repartition_name>-repartition`` and read back.

    Names are always generated (burning three counter values) for Kafka's topology
    compatibility; an earlier join repartition of the same stream is reused when
    ``repartition_name`` is the stream's own name (unnamed joins). Left/outer joins let null
    keys through the repartition."""
    b = stream._builder
    key_serde = key_serde if key_serde is not None else stream.key_serde
    value_serde = value_serde if value_serde is not None else stream.value_serde
    previous: tuple[str, NullKeyFilter] | None = getattr(stream, "_join_repartition", None)
    if previous is not None and stream.name == repartition_name:
        for prefix in ("KSTREAM-SINK-", "KSTREAM-FILTER-", "KSTREAM-SOURCE-"):
            b.new_processor_name(prefix)
    else:
        null_key_filter = NullKeyFilter()
        source = create_repartition(
            b,
            stream.name,
            repartition_name,
            key_serde,
            value_serde,
            null_key_filter=null_key_filter,
        )
        previous = (source, null_key_filter)
        stream._join_repartition = previous
    return b.new_stream(previous[0], key_serde, value_serde, repartition_required=False)
