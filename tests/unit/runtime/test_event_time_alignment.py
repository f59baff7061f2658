"""Event-time alignment's bound (``runtime.alignment``): who holds the others back, when."""

from __future__ import annotations

import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from streaming import JoinWindows, SessionWindows, StreamsBuilder, TimeWindows
from streaming.dsl.lateness import smallest_grace_ms
from streaming.errors import ConfigException
from streaming.runtime.alignment import (
    BEFORE_ANY,
    DEFAULT_MAX_DRIFT_MS,
    STALE_MS,
    AlignmentReport,
    AlignmentSettings,
    AlignmentTable,
    EventTimeAlignment,
)
from streaming.runtime.alignment_exchange import PEER_STALE_MS, PeerReports, encode
from streaming.runtime.config import StreamsConfig
from streaming.runtime.partition_group import PartitionGroup, StampedRecord

NOW = 1_800_000_000_000
OLD = NOW - 3_600_000  # an hour behind the wall clock: a replay


def _group(tp: tuple[str, int], *timestamps: int, stream_time: int = -1) -> PartitionGroup:
    group = PartitionGroup([tp])
    queue = group.queue(tp)
    for i, ts in enumerate(timestamps):
        queue.append(StampedRecord(tp[0], tp[1], i, ts, None, None, ()))
    group.stream_time = stream_time
    return group


def _member(settings: AlignmentSettings | None = None, name: str = "t1"):
    return EventTimeAlignment(settings or AlignmentSettings(max_drift_ms=10_000)).member(name, 0)


def test_the_slowest_queued_partition_sets_the_bound():
    a, b = ("in", 0), ("in", 1)
    sources = [(a, _group(a, OLD + 5_000)), (b, _group(b, OLD + 900_000))]
    assert _member().limit(sources, lambda tp: 500, NOW) == OLD + 5_000 + 10_000


def test_live_traffic_is_not_aligned():
    a, b = ("in", 0), ("in", 1)
    sources = [(a, _group(a, NOW - 1_000)), (b, _group(b, NOW + 30_000))]
    assert _member().limit(sources, lambda tp: 0, NOW) is None


def test_a_large_record_backlog_aligns_even_live_records():
    a, b = ("in", 0), ("in", 1)
    sources = [(a, _group(a, NOW - 1_000)), (b, _group(b, NOW + 30_000))]
    assert _member().limit(sources, lambda tp: 5_000, NOW) == NOW - 1_000 + 10_000


def test_an_idle_partition_never_holds_the_others_back():
    a, b = ("in", 0), ("in", 1)
    # b has nothing queued and nothing on its way (lag 0): idle at once
    sources = [(a, _group(a, OLD + 900_000)), (b, _group(b, stream_time=OLD))]
    assert _member().limit(sources, lambda tp: 0, NOW) == OLD + 900_000 + 10_000


def test_an_empty_partition_with_records_on_their_way_holds_until_its_idle_time():
    a, b = ("in", 0), ("in", 1)
    member = _member(AlignmentSettings(max_drift_ms=10_000, idle_ms=1_000))
    sources = [(a, _group(a, OLD + 900_000)), (b, _group(b, stream_time=OLD))]
    lag = {a: 10, b: 700}.__getitem__
    # what b processed last bounds what comes next from it
    assert member.limit(sources, lag, NOW) == OLD + 10_000
    assert member.limit(sources, lag, NOW + 999) == OLD + 10_000
    # nothing came for the idle time: b no longer holds a back
    assert member.limit(sources, lag, NOW + 1_000) == OLD + 900_000 + 10_000


def test_a_partition_not_read_yet_holds_everything_until_its_records_come():
    a, b = ("in", 0), ("in", 1)
    sources = [(a, _group(a, OLD)), (b, _group(b))]
    assert _member().limit(sources, lambda tp: 100, NOW) == BEFORE_ANY


def test_threads_of_one_client_align_with_each_other():
    shared = EventTimeAlignment(AlignmentSettings(max_drift_ms=10_000))
    first, second = shared.member("t1", 0), shared.member("t2", 1)
    a, b = ("in", 0), ("in", 1)
    assert first.limit([(a, _group(a, OLD))], lambda tp: 5_000, NOW) == OLD + 10_000
    # the second thread's partition is an hour ahead: it waits for the first thread's
    assert second.limit([(b, _group(b, NOW))], lambda tp: 5_000, NOW) == OLD + 10_000
    first.forget()  # the first thread ended: nothing holds the second back but itself
    assert second.limit([(b, _group(b, NOW))], lambda tp: 5_000, NOW) == NOW + 10_000


def test_settings_come_from_the_config_and_a_negative_drift_turns_it_off():
    base = {"application.id": "a", "bootstrap.servers": "localhost:9092"}
    default = StreamsConfig.from_mapping(base).alignment
    assert default.enabled and default.max_drift_ms is None  # decided per topology
    assert default.drift_ms == DEFAULT_MAX_DRIFT_MS == 10_000
    custom = StreamsConfig.from_mapping(
        {
            **base,
            "event.time.alignment.max.drift.ms": 2_000,
            "event.time.alignment.lag.records": 50,
            "event.time.alignment.lag.ms": 5_000,
            "event.time.alignment.idle.ms": 250,
        }
    ).alignment
    assert custom == AlignmentSettings(
        max_drift_ms=2_000, lag_records=50, lag_ms=5_000, idle_ms=250
    )
    off = StreamsConfig.from_mapping({**base, "event.time.alignment.max.drift.ms": -1})
    assert not off.alignment.enabled
    with pytest.raises(ConfigException, match=r"event\.time\.alignment\.max\.drift\.ms"):
        StreamsConfig.from_mapping({**base, "event.time.alignment.max.drift.ms": "soon"})


def test_idle_time_counts_only_while_others_are_held_back():
    a, b = ("in", 0), ("in", 1)
    member = _member(AlignmentSettings(max_drift_ms=10_000, idle_ms=1_000))
    nothing_yet = [(a, _group(a)), (b, _group(b))]
    # neither partition fetched yet (a consumer joining its group): no clock runs
    assert member.limit(nothing_yet, lambda tp: None, NOW) == BEFORE_ANY
    assert member.limit(nothing_yet, lambda tp: None, NOW + 5_000) == BEFORE_ANY
    # a's records come first: b holds them back for its idle time from now on
    arrived = [(a, _group(a, OLD)), (b, _group(b))]
    assert member.limit(arrived, lambda tp: None, NOW + 5_001) == BEFORE_ANY
    assert member.limit(arrived, lambda tp: None, NOW + 6_001) == OLD + 10_000


def test_worker_processes_align_through_the_clients_table(tmp_path):
    settings = AlignmentSettings(max_drift_ms=10_000)
    path = tmp_path / "table"
    client = AlignmentTable(path, create=True)
    # each worker process maps the client's file: two separate objects, as in two processes
    first = EventTimeAlignment(settings, AlignmentTable(path)).member("w1", 0)
    second = EventTimeAlignment(settings, AlignmentTable(path)).member("w2", 1)
    a, b = ("in", 0), ("in", 1)
    assert first.limit([(a, _group(a, OLD))], lambda tp: 5_000, NOW) == OLD + 10_000
    assert second.limit([(b, _group(b, NOW))], lambda tp: 5_000, NOW) == OLD + 10_000
    assert set(client.read(NOW)) == {0, 1}
    # a worker that died without clearing its slot stops holding the others once stale
    later = NOW + STALE_MS + 1
    assert second.limit([(b, _group(b, NOW))], lambda tp: 5_000, later) == NOW + 10_000
    first.forget()
    assert set(client.read(later)) == {1}


def test_a_thread_whose_tasks_still_restore_holds_the_other_threads_back():
    # after a rebalance a worker's new tasks restore before they run; their partitions
    # were missing from its report, and another worker's kept tasks ran an hour ahead
    # (a CI run dropped 22,330 of 24,000 clicks as late)
    from types import SimpleNamespace

    from streaming.runtime.active_task import RESTORING, SUSPENDED
    from streaming.runtime.task_manager import TaskManager

    shared = EventTimeAlignment(AlignmentSettings(max_drift_ms=10_000))
    restoring_thread = TaskManager(
        config=None,
        plan=None,
        task_creator=None,
        consumer=None,
        standby=lambda: None,
        stall=None,
        metrics=None,
        changelog_end=lambda topic, partition: 0,
        alignment=shared.member("t2", 1),
    )
    b, c = ("in", 1), ("in", 2)

    def task(state, tp):
        return SimpleNamespace(
            state=state, reads_sources=True, partition_group=_group(tp), source_partitions=[tp]
        )

    restoring_thread.tasks = {"0_1": task(RESTORING, b), "0_2": task(SUSPENDED, c)}
    assert [tp for tp, _ in restoring_thread._source_partitions()] == [b]
    assert restoring_thread.process(100, NOW, lambda tp: 100) == 0
    a = ("in", 0)
    assert shared.member("t1", 0).limit([(a, _group(a, OLD))], lambda tp: 5_000, NOW) == (
        BEFORE_ANY
    )


def test_a_thread_in_a_rebalance_holds_the_others_until_it_says_what_it_got():
    shared = EventTimeAlignment(AlignmentSettings(max_drift_ms=10_000))
    first, second = shared.member("t1", 0), shared.member("t2", 1)
    a = ("in", 0)
    second.hold()  # starting, or its partitions revoked: which it gets is not known yet
    assert first.limit([(a, _group(a, OLD))], lambda tp: 5_000, NOW) == BEFORE_ANY
    second.limit([], lambda tp: None, NOW)  # assigned no source partition
    assert first.limit([(a, _group(a, OLD))], lambda tp: 5_000, NOW) == OLD + 10_000


def _joining_thread(alignment):
    """A stream thread (no clients) that subscribed and waits for its first assignment:
    its consumer returns nothing yet."""
    import threading
    import time

    from streaming.runtime.metrics import ThreadMetrics
    from streaming.runtime.task_manager import TaskManager
    from streaming.runtime.thread import STARTING, StreamThread

    thread = object.__new__(StreamThread)
    threading.Thread.__init__(thread, name="t2")
    thread.config = SimpleNamespace(commit_interval_ms=100, poll_ms=0, exactly_once=True)
    thread.plan = SimpleNamespace(patterns=[], internal_topics=set())
    thread.metrics = ThreadMetrics()
    thread.lock = threading.RLock()
    thread.listener = SimpleNamespace(on_thread_state_change=lambda t: None)
    thread.consumer = SimpleNamespace(consume=lambda num_messages, timeout: [])
    thread.collector = SimpleNamespace(poll=lambda: None)
    thread.committer = SimpleNamespace(pending=lambda: False, commit=lambda: False)
    thread.task_manager = TaskManager(
        config=thread.config,
        plan=thread.plan,
        task_creator=None,
        consumer=thread.consumer,
        standby=lambda: None,
        stall=None,
        metrics=thread.metrics,
        changelog_end=lambda topic, partition: 0,
        alignment=alignment,
    )
    thread._busy = thread._closing = False
    thread._last_commit = thread._last_lag = time.monotonic()
    thread.state = STARTING
    return thread


def test_a_thread_joining_the_group_holds_the_others_until_its_first_assignment():
    # a second instance started, joined the group and restored the tasks it got, and its
    # passes before its first assignment had reported that nothing of it holds anyone
    # back: the first instance ran its half of the partitions minutes of event time ahead
    # of the other half meanwhile, and sessions downstream came out split
    from streaming.runtime.thread import PARTITIONS_ASSIGNED

    shared = EventTimeAlignment(AlignmentSettings(max_drift_ms=10_000))
    first, joining = shared.member("t1", 0), _joining_thread(shared.member("t2", 1))
    a = ("in", 0)
    joining._hold_alignment()  # as it starts
    for _ in range(3):
        joining.run_once()  # polls while the group rebalances
    assert first.limit([(a, _group(a, OLD))], lambda tp: 5_000, NOW) == BEFORE_ANY
    joining.state = PARTITIONS_ASSIGNED  # its assignment: no source partition
    joining.run_once()
    assert first.limit([(a, _group(a, OLD))], lambda tp: 5_000, NOW) == OLD + 10_000


def test_instances_align_through_each_others_combined_reports(tmp_path):
    settings = AlignmentSettings(max_drift_ms=10_000)
    here = EventTimeAlignment(settings)
    # the other instance runs worker processes: its client reads their table
    path = tmp_path / "table"
    there = EventTimeAlignment(settings, AlignmentTable(path, create=True))
    worker = EventTimeAlignment(settings, AlignmentTable(path)).member("w1", 0)
    a, b, c = ("in", 0), ("in", 1), ("in", 2)
    thread = here.member("t1", 0)
    assert thread.limit([(a, _group(a, NOW))], lambda tp: 5_000, NOW) == NOW + 10_000
    assert worker.limit([(b, _group(b, OLD)), (c, _group(c, OLD + 60_000))], lambda tp: 5_000, NOW)
    # what each instance's exchange publishes, and hands the other
    published = there.local_summary(NOW)
    assert published == AlignmentReport(OLD, 10_002, True)
    here.set_peers(published, NOW)
    there.set_peers(here.local_summary(NOW), NOW)
    # this instance's partition, an hour ahead, waits for the other instance's slowest one
    assert thread.limit([(a, _group(a, NOW))], lambda tp: 5_000, NOW) == OLD + 10_000
    # the peers' report is not part of what this instance publishes
    assert here.local_summary(NOW) == AlignmentReport(NOW, 5_001, True)
    # nothing holds back the other instance's worker but its own partitions
    assert worker.limit([(b, _group(b, OLD))], lambda tp: 5_000, NOW) == OLD + 10_000
    here.set_peers(None, NOW)
    assert thread.limit([(a, _group(a, NOW))], lambda tp: 5_000, NOW) == NOW + 10_000


def test_peer_reports_expire_and_are_withdrawn():
    peers = PeerReports(idle_ms=10_000)
    assert peers.combined(NOW) is None
    peers.update(b"p1", encode(AlignmentReport(OLD, 10, True), NOW))
    peers.update(b"p2", encode(AlignmentReport(None, 3, False), NOW - PEER_STALE_MS + 1_000))
    assert peers.combined(NOW) == AlignmentReport(OLD, 13, True)
    # p2 stopped refreshing (killed): its report no longer counts
    assert peers.combined(NOW + 1_001) == AlignmentReport(OLD, 10, True)
    peers.update(b"p1", None)  # p1 closed and withdrew its report
    assert peers.combined(NOW) == AlignmentReport(None, 3, False)


def test_a_peer_that_does_not_know_its_event_time_holds_the_others_for_its_idle_time():
    peers = PeerReports(idle_ms=10_000)
    peers.update(b"p1", encode(AlignmentReport(BEFORE_ANY, 500, False), NOW))
    # still restoring: its refreshed reports do not restart its idle time
    peers.update(b"p1", encode(AlignmentReport(BEFORE_ANY, 500, False), NOW + 9_000))
    assert peers.combined(NOW + 9_999).low == BEFORE_ANY
    assert peers.combined(NOW + 10_000) == AlignmentReport(None, 500, False)
    # it reads its partitions: its watermark holds the others again
    peers.update(b"p1", encode(AlignmentReport(OLD, 400, True), NOW + 11_000))
    assert peers.combined(NOW + 11_000) == AlignmentReport(OLD, 400, True)
    # a later rebalance starts a new idle time
    peers.update(b"p1", encode(AlignmentReport(BEFORE_ANY, 400, False), NOW + 12_000))
    assert peers.combined(NOW + 12_000).low == BEFORE_ANY


def test_alignment_across_instances_is_switched_on_and_typos_fail_fast():
    base = {"application.id": "a", "bootstrap.servers": "localhost:9092"}
    assert not StreamsConfig.from_mapping(base).alignment.across_instances
    on = {**base, "event.time.alignment.across.instances": "true"}
    assert StreamsConfig.from_mapping(on).alignment.across_instances
    with pytest.raises(ConfigException, match=r"across\.instances.*true or false"):
        StreamsConfig.from_mapping({**base, "event.time.alignment.across.instances": "flase"})


def test_an_unset_drift_is_a_quarter_of_the_smallest_grace_and_at_least_the_default():
    unset = AlignmentSettings()
    assert unset.for_grace(None).max_drift_ms == DEFAULT_MAX_DRIFT_MS  # no window, no join
    assert unset.for_grace(30_000).max_drift_ms == DEFAULT_MAX_DRIFT_MS
    assert unset.for_grace(7_200_000).max_drift_ms == 1_800_000
    assert AlignmentSettings(max_drift_ms=2_000).for_grace(7_200_000).max_drift_ms == 2_000
    assert not AlignmentSettings(max_drift_ms=-1).for_grace(7_200_000).enabled


def _windowed_and_joined(window_grace: timedelta, join_grace: timedelta) -> Any:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks")
    views = builder.stream("views")
    clicks.group_by_key().windowed_by(
        TimeWindows.of_size_and_grace(timedelta(minutes=5), window_grace)
    ).count().to_stream().to("counts")
    clicks.join(
        views,
        lambda c, v: (c, v),
        JoinWindows.of_time_difference_and_grace(timedelta(seconds=10), join_grace),
    ).to("joined")
    return builder.build()


def test_the_smallest_grace_of_the_topologys_windows_and_joins_decides_the_drift():
    topology = _windowed_and_joined(timedelta(hours=2), timedelta(minutes=4))
    assert smallest_grace_ms(topology) == 240_000
    assert AlignmentSettings().for_grace(smallest_grace_ms(topology)).max_drift_ms == 60_000
    sessions = StreamsBuilder()
    sessions.stream("clicks").group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(timedelta(minutes=1), timedelta(minutes=8))
    ).count()
    assert smallest_grace_ms(sessions.build()) == 480_000
    stateless = StreamsBuilder()
    stateless.stream("clicks").map_values(str.upper).to("upper")
    assert smallest_grace_ms(stateless.build()) is None


@pytest.mark.parametrize("state", ["STARTING", "PARTITIONS_REVOKED", "PARTITIONS_ASSIGNED"])
def test_a_thread_without_a_running_assignment_polls_briefly(state):
    # librdkafka serves the assignment inside the poll and then waits on for records until
    # the poll's timeout: the new tasks' restoration started up to a whole poll later
    from streaming.runtime.thread import ASSIGNMENT_POLL_S, THREAD_RUNNING

    thread = _joining_thread(None)
    thread.config.poll_ms = 100
    timeouts: list[float] = []
    thread.consumer.consume = lambda num_messages, timeout: timeouts.append(timeout) or []
    thread.state = state
    thread.run_once()
    assert max(timeouts) == ASSIGNMENT_POLL_S
    timeouts.clear()
    thread.state = THREAD_RUNNING
    thread._last_commit = time.monotonic()
    thread.run_once()
    assert max(timeouts) > 5 * ASSIGNMENT_POLL_S


def test_an_idle_thread_looks_again_soon_while_the_threads_pace_each_other():
    # what lets a held task go on is another worker's next report or this thread's own
    # acknowledged records, and neither wakes its consumer: waiting a whole poll for a
    # record each time made two workers trade turns a poll apart
    from streaming.runtime.thread import ALIGNMENT_RECHECK_S, THREAD_RUNNING

    shared = EventTimeAlignment(AlignmentSettings(max_drift_ms=10_000))
    member = shared.member("t2", 1)
    thread = _joining_thread(member)
    thread.state = THREAD_RUNNING  # (a thread without a running assignment polls briefly)
    thread.config.poll_ms = 100
    timeouts: list[float] = []
    thread.consumer.consume = lambda num_messages, timeout: timeouts.append(timeout) or []
    a = ("in", 0)
    assert member.limit([(a, _group(a, OLD))], lambda tp: 5_000, NOW) == OLD + 10_000
    thread._last_commit = time.monotonic()
    thread.run_once()
    assert max(timeouts) == ALIGNMENT_RECHECK_S
    timeouts.clear()
    assert member.limit([(a, _group(a, NOW))], lambda tp: 0, NOW) is None  # caught up
    thread._last_commit = time.monotonic()
    thread.run_once()
    assert max(timeouts) > 10 * ALIGNMENT_RECHECK_S
