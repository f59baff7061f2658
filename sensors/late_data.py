"""Late-data sensor: finds orders that arrived after their window closed (beyond grace,
so the stream dropped them) and requests a batch re-run of the affected hour partitions,
whose batch result is the corrected value.

Each tick reads the ``orders`` topic from the offsets in the cursor (the first tick starts
at the beginning), tracks stream time (the largest event time seen), counts late orders per
hour, and requests a run for an hour when its late count grew since the last request and the
hour itself is complete (its end + grace passed).

Offsets only mean something on one Kafka cluster: the cursor records the cluster id. When
the cluster is another one (a new broker), or a partition ends below the cursor (the topic
was re-created), the tick logs a warning, says so in its result ("cluster changed from X to
Y: re-reading from the earliest offset") and reads the topic from the start again, instead
of reading nothing.
"""

import json
import logging
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from assets.keys import HOURLY_JOB
from pipelines import domain
from pipelines.connection import Kafka, KafkaConnection
from resources.kafka import KafkaResource
from sensors.hours import HOUR_MS, hour_key, hour_start_ms
from sensors.runs import latest_run_created, partition_in_flight

MAX_RECORDS_PER_TICK = 50_000

log = logging.getLogger(__name__)


@dataclass
class LateDataState:
    """What the sensor remembers between ticks (its cursor)."""

    offsets: dict[str, int] = field(default_factory=dict)  # partition -> next offset
    stream_time: int = -1
    late: dict[str, int] = field(default_factory=dict)  # hour key -> late orders seen
    requested: dict[str, int] = field(default_factory=dict)  # hour -> late count at request
    cluster_id: str | None = None  # the Kafka cluster the offsets refer to
    late_at: dict[str, float] = field(default_factory=dict)  # hour -> when it last grew (s)

    @staticmethod
    def from_cursor(cursor: str | None) -> "LateDataState":
        if not cursor:
            return LateDataState()
        data = json.loads(cursor)
        return LateDataState(
            offsets=data.get("offsets", {}),
            stream_time=data.get("stream_time", -1),
            late=data.get("late", {}),
            requested=data.get("requested", {}),
            cluster_id=data.get("cluster_id"),
            late_at=data.get("late_at", {}),
        )

    def to_cursor(self) -> str:
        return json.dumps(
            {
                "offsets": self.offsets,
                "stream_time": self.stream_time,
                "late": self.late,
                "requested": self.requested,
                "cluster_id": self.cluster_id,
                "late_at": self.late_at,
            },
            sort_keys=True,
        )

    def follow_cluster(self, cluster_id: str | None, end_offsets: Mapping[int, int]) -> str | None:
        """Check the offsets refer to cluster ``cluster_id`` whose topic partitions end at
        ``end_offsets``. On another cluster, or when a partition ends below the cursor (the
        topic was re-created; or a cursor without a cluster id from a replaced cluster), forget
        the offsets and the stream time (the new records are read from the earliest offset,
        in their own order) and return what happened. Late counts and requests are kept: the
        hours already re-run stay re-run."""
        went_back = sorted(
            (int(p), o, end_offsets.get(int(p), 0))
            for p, o in self.offsets.items()
            if o > end_offsets.get(int(p), 0)
        )
        if self.cluster_id is not None and cluster_id is not None and cluster_id != self.cluster_id:
            message = (
                f"cluster changed from {self.cluster_id} to {cluster_id}: re-reading from the "
                "earliest offset"
            )
        elif went_back:
            p, cursor, end = went_back[0]
            what = (
                f"cluster changed from an unrecorded one to {cluster_id}"
                if self.cluster_id is None
                else f"the topic was re-created on cluster {cluster_id}"
            )
            message = (
                f"{what} (partition {p} ends at offset {end}, the cursor was at {cursor}): "
                "re-reading from the earliest offset"
            )
        else:
            if cluster_id is not None:
                self.cluster_id = cluster_id
            return None
        self.offsets = {}
        self.stream_time = -1
        self.cluster_id = cluster_id
        return message

    def observe(
        self,
        event_times: Iterable[int],
        *,
        window_ms: int = domain.REVENUE_WINDOW_MS,
        grace_ms: int = domain.REVENUE_GRACE_MS,
        now: float | None = None,
    ) -> int:
        """Account for orders in arrival order, read at ``now`` (epoch seconds); return how
        many were late (their window had closed: window end + grace <= stream time)."""
        now = time.time() if now is None else now
        late = 0
        for t in event_times:
            window_end = t - t % window_ms + window_ms
            if self.stream_time >= 0 and window_end + grace_ms <= self.stream_time:
                key = hour_key(t)
                self.late[key] = self.late.get(key, 0) + 1
                self.late_at[key] = now
                late += 1
            if t > self.stream_time:
                self.stream_time = t
        return late

    def hours_to_rerun(
        self,
        grace_ms: int = domain.REVENUE_GRACE_MS,
        *,
        quiet_s: float = 0.0,
        now: float | None = None,
    ) -> list[str]:
        """Complete hours with late orders not yet covered by a re-run request, and none
        for ``quiet_s`` seconds before ``now``: late orders trickle in for as long as the
        producers' lateness lasts, and one run after the trickle lands them all."""
        now = time.time() if now is None else now
        return sorted(
            h for h in self.settling(grace_ms) if now - self.late_at.get(h, 0.0) >= quiet_s
        )

    def settling(self, grace_ms: int = domain.REVENUE_GRACE_MS) -> list[str]:
        """Complete hours with late orders not yet covered by a re-run request."""
        return sorted(
            h
            for h, n in self.late.items()
            if n > self.requested.get(h, 0)
            and hour_start_ms(h) + HOUR_MS + grace_ms <= self.stream_time
        )


def hours_to_request(
    state: LateDataState, instance: Any, job_name: str, hours: list[str]
) -> tuple[list[str], list[str]]:
    """Of ``hours`` (complete, with late orders not requested yet): those to run now, and
    those left for a later tick because a run of the hour is queued or running (its late
    count stays unrequested until that run's result is in). A run of the hour created after
    its last late order was read (the watermark sensor's, one from the UI) lands that order
    itself: the hour counts as requested, no second run."""
    busy = [h for h in hours if partition_in_flight(instance, job_name, h)]
    todo = []
    for h in hours:
        if h in busy:
            continue
        created = latest_run_created(instance, job_name, h)
        if created is not None and created >= state.late_at.get(h, 0.0):
            state.requested[h] = state.late[h]
        else:
            todo.append(h)
    return todo, busy


def cluster_positions(
    kafka: Kafka, topic: str, timeout: float = 10.0
) -> tuple[str | None, dict[int, int]]:
    """The cluster id of ``kafka`` and the end offset of each partition of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        KafkaConnection.of(kafka).client_config(**{"group.id": f"late-data-{uuid.uuid4().hex[:8]}"})
    )
    try:
        meta = consumer.list_topics(topic, timeout=timeout)
        described = meta.topics.get(topic)
        if described is None or described.error is not None:
            return meta.cluster_id, {}
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
            for p in sorted(described.partitions)
        }
        return meta.cluster_id, ends
    finally:
        consumer.close()


def read_orders(
    kafka: Kafka,
    topic: str,
    offsets: dict[str, int],
    max_records: int,
    ends: Mapping[int, int] | None = None,
) -> tuple[list[int], dict[str, int]]:
    """Event times of orders after ``offsets``, in the order a stream application reading
    the partitions aligned by event time takes them, and the new offsets.

    Each partition is read up to its end (``ends``, read when None) or its share of
    ``max_records``; the partitions are then merged smallest event time first, each in its
    own order, so an order counts as late only if it is late for such a reader (a backlog
    read partition after partition would make every other partition's orders look late).
    The merge stops where a partition not read to its end runs dry: the next tick goes on
    from there."""
    from confluent_kafka import Consumer, TopicPartition

    from pipelines.streams.monitor import end_offsets

    if ends is None:
        ends = end_offsets(kafka, topic)
    new_offsets = dict(offsets)
    assignment = [
        TopicPartition(topic, p, offsets.get(str(p), 0))
        for p, end in ends.items()
        if offsets.get(str(p), 0) < end
    ]
    if not assignment:
        return [], new_offsets
    share = max(1, max_records // len(assignment))
    # per partition: (offset, event time, or None for a record that is no order)
    read: dict[int, deque[tuple[int, int | None]]] = {tp.partition: deque() for tp in assignment}
    unfinished = {tp.partition for tp in assignment}
    consumer = Consumer(
        {
            **KafkaConnection.of(kafka).client_config(),
            "group.id": f"late-data-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign(assignment)
        reading, idle = set(unfinished), 0
        while reading and idle < 10:
            msgs = consumer.consume(num_messages=1000, timeout=1.0)
            idle = 0 if msgs else idle + 1
            if not msgs:  # at its end past a transaction marker, which is no message
                for tp in consumer.position([TopicPartition(topic, p) for p in reading]):
                    if tp.offset >= ends[tp.partition]:
                        unfinished.discard(tp.partition)
                        reading.discard(tp.partition)
            for msg in msgs:
                p, offset = msg.partition(), msg.offset()
                if msg.error() is not None or p not in reading or offset is None:
                    continue
                row = domain.parse_record(topic, msg.value())
                read[p].append((offset, None if row is None else row["event_time"]))
                if offset + 1 >= ends[p]:
                    unfinished.discard(p)
                    reading.discard(p)
                elif len(read[p]) >= share:
                    consumer.pause([TopicPartition(topic, p)])
                    reading.discard(p)
    finally:
        consumer.close()
    times: list[int] = []
    while not any(p in unfinished and not queue for p, queue in read.items()):
        heads = [p for p, queue in read.items() if queue]
        if not heads:
            break
        p = min(heads, key=lambda p: read[p][0][1] or -1)
        offset, event_time = read[p].popleft()
        new_offsets[str(p)] = offset + 1
        if event_time is not None:
            times.append(event_time)
    return times, new_offsets


def build_late_data_sensor(
    job_name: str = HOURLY_JOB,
    *,
    topic: str = domain.ORDERS,
    partitions_def: Any = None,
    minimum_interval_seconds: int = 60,
    quiet_seconds: float = 180.0,
    default_status: DefaultSensorStatus = DefaultSensorStatus.RUNNING,
) -> Any:
    """The late-data sensor requesting ``job_name`` re-runs of affected hours, each once no
    late order of the hour came for ``quiet_seconds``."""

    @sensor(
        name="late_data_sensor",
        job_name=job_name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Re-runs the batch recompute of hours that received orders after their "
        "windows closed (late beyond grace: the stream dropped them).",
    )
    def late_data_sensor(context: SensorEvaluationContext, kafka: KafkaResource):
        state = LateDataState.from_cursor(context.cursor)
        cluster_id, ends = cluster_positions(kafka.connection, topic)
        change = state.follow_cluster(cluster_id, ends)
        if change:
            context.log.warning(f"late_data_sensor ({topic}): {change}")
            log.warning("late_data_sensor (%s): %s", topic, change)
        times, state.offsets = read_orders(
            kafka.connection, topic, state.offsets, MAX_RECORDS_PER_TICK, ends
        )
        state.observe(times)
        hours = state.hours_to_rerun(quiet_s=quiet_seconds)
        waiting = [h for h in state.settling() if h not in hours]
        if partitions_def is not None:
            hours = [h for h in hours if partitions_def.has_partition_key(h)]
        hours, busy = hours_to_request(state, context.instance, job_name, hours)
        requests = []
        for h in hours:
            tags = {"trigger": "late-data", "late_orders": str(state.late[h])}
            if change:
                tags["cluster_change"] = change[:200]
            requests.append(
                RunRequest(run_key=f"late-{h}-{state.late[h]}", partition_key=h, tags=tags)
            )
            state.requested[h] = state.late[h]
        if not requests:
            reason = f"read {len(times)} orders from cluster {state.cluster_id}; no new late data"
            if busy:
                reason += f" to request (a run of {', '.join(busy)} is queued or running)"
            if waiting:
                reason += (
                    f"; late orders of {', '.join(waiting)} still arriving (a re-run once "
                    f"none came for {quiet_seconds:.0f} s)"
                )
            if change:
                reason = f"{change}; {reason}"
            return SensorResult(skip_reason=SkipReason(reason), cursor=state.to_cursor())
        return SensorResult(run_requests=requests, cursor=state.to_cursor())

    return late_data_sensor
