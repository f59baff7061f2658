"""Kappa replay: reprocess a stream application from the earliest offsets under a new
application id, into replay topics, and compare its results with the live ones.

``replay_to_end_offsets(runner, kafka)`` captures the end offsets of every input
partition (last stable offsets: what a read_committed consumer sees) before the replay
starts, runs the replay until its committed offsets reach them (and the records they sent
through its repartition topics), logging records done / total and the rate every few
seconds, and stops it cleanly: it finishes while producers keep writing, and fails after its
timeout saying how far it got. ``compare(app, live, replayed)`` matches records by identity
(per application) and reports equal / different / missing ones. Results only one side has at
the edges are expected (the live application may have started later or may not have closed
the latest windows yet); values that differ for the same identity are drift.

``run_until_caught_up`` (no lag for a moment) suits an application whose input stopped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pipelines.connection import Kafka, KafkaConnection
from pipelines.streams.apps import StreamApp
from pipelines.streams.common import cents
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.monitor import consumer_lag, list_topics, read_tail


def _fraud_identity(_key: str | None, v: dict) -> Any:
    """An alert per order, except a burst: one per customer and window. Which of a
    customer's orders crosses the burst limit depends on how orders of several input
    partitions interleave (within the alignment's drift in a replay, within a slice of
    arrival live); whether the window holds more than the limit does not."""
    if v.get("rule") == "rapid_burst":
        return (v.get("rule"), v.get("customer_id"), v.get("window_start"))
    return (v.get("rule"), v.get("order_id"))


# identity and compared value of a result record, per application's first output topic
IDENTITY: dict[str, tuple[Callable[[str | None, dict], Any], Callable[[dict], Any]]] = {
    "windowed-revenue": (
        lambda k, v: (v.get("region"), v.get("window_start")),
        lambda v: (v.get("revenue_cents"), v.get("order_count")),
    ),
    "enriched-orders": (
        lambda k, v: v.get("order_id"),
        lambda v: (v.get("customer_known"), v.get("within_credit_limit")),
    ),
    "fraud-alerts": (_fraud_identity, lambda v: v.get("customer_id")),
    "click-sessions": (
        lambda k, v: (v.get("user_id"), v.get("session_start")),
        lambda v: (v.get("session_end"), v.get("click_count")),
    ),
    "orders-dedup": (lambda k, v: v.get("order_id"), lambda v: v.get("event_time")),
}
# the SQL versions write the DSL applications' columns
IDENTITY["windowed-revenue-sql"] = IDENTITY["windowed-revenue"]
IDENTITY["enriched-orders-sql"] = IDENTITY["enriched-orders"]
# an alert of fraud.sql: its rule and the order that completed the pattern
IDENTITY["fraud-alerts-sql"] = (
    lambda k, v: (v.get("rule"), v.get("customer_id"), v.get("order_id")),
    lambda v: (v.get("first_order_id"), v.get("risk")),
)


@dataclass(frozen=True)
class LateEffect:
    """How a late row (``pipelines.streams.late``) bears on the compared results: the
    ``result`` it was left out of (None: the application's only one), the identity of the
    result it would have counted in, and what it would have added to its value (None: the
    value is not a sum; a late row for the identity on either side explains a difference)."""

    result: str | None
    identity: Callable[[dict], Any]
    adds: Callable[[dict], tuple[int, ...]] | None = None


def _cents_and_one(row: dict) -> tuple[int, int]:
    return (cents(row["amount"]), 1)


LATE_EFFECT: dict[str, LateEffect] = {
    "windowed-revenue": LateEffect(
        "revenue_5m", lambda r: (r.get("region"), r.get("window_start")), _cents_and_one
    ),
    "windowed-revenue-sql": LateEffect(
        None, lambda r: (r.get("region"), r.get("window_start")), _cents_and_one
    ),
    "fraud-alerts": LateEffect(
        "rapid_burst", lambda r: ("rapid_burst", r.get("customer_id"), r.get("window_start"))
    ),
}


@dataclass
class Comparison:
    """How a replay's results compare with the live results."""

    live: int = 0
    replayed: int = 0
    equal: int = 0
    different: list[tuple[Any, Any, Any]] = field(default_factory=list)  # (id, live, replay)
    only_live: int = 0
    only_replayed: int = 0
    #: the identities only one side has, with their values
    only_live_results: dict[Any, Any] = field(default_factory=dict)
    only_replayed_results: dict[Any, Any] = field(default_factory=dict)
    #: the different values that the records each side dropped as late do not account
    #: for (``explain``): (id, live, replay)
    unexplained: list[tuple[Any, Any, Any]] = field(default_factory=list)

    @property
    def compared(self) -> int:
        return self.equal + len(self.different)

    @property
    def agreement(self) -> float:
        """Share of identities on both sides with equal values (1.0 when none)."""
        return self.equal / self.compared if self.compared else 1.0


def _latest(app: str, records: list[tuple[str | None, Any, int]]) -> dict[Any, Any]:
    ident, value = IDENTITY[app]
    out: dict[Any, Any] = {}
    for key, v, _ in records:
        if isinstance(v, dict):
            out[ident(key, v)] = value(v)  # the last update wins (eager outputs)
    return out


def compare(app: str, live: list, replayed: list) -> Comparison:
    """Compare live and replayed records (lists of (key, value, timestamp))."""
    a, b = _latest(app, live), _latest(app, replayed)
    c = Comparison(live=len(a), replayed=len(b))
    for ident, value in a.items():
        if ident not in b:
            c.only_live_results[ident] = value
        elif b[ident] == value:
            c.equal += 1
        else:
            c.different.append((ident, value, b[ident]))
    c.only_replayed_results = {i: v for i, v in b.items() if i not in a}
    c.only_live, c.only_replayed = len(c.only_live_results), len(c.only_replayed_results)
    c.unexplained = list(c.different)
    return c


def explain(app: str, c: Comparison, live_late: list[dict], replay_late: list[dict]) -> None:
    """Keep in ``c.unexplained`` only the different values that the late rows of each side
    do not account for: a sum that differs by exactly what one side dropped as late and the
    other counted (or, for a value that is not a sum, either side dropped records of it)."""
    effect = LATE_EFFECT.get(app)
    if effect is None:
        return
    totals: list[dict[Any, tuple[int, ...]]] = []
    for rows in (live_late, replay_late):
        by_ident: dict[Any, tuple[int, ...]] = {}
        for row in rows:
            if effect.result is not None and row.get("result") != effect.result:
                continue
            ident = effect.identity(row)
            adds = effect.adds(row) if effect.adds is not None else (1,)
            before = by_ident.get(ident, (0,) * len(adds))
            by_ident[ident] = tuple(x + y for x, y in zip(before, adds, strict=True))
        totals.append(by_ident)
    live_dropped, replay_dropped = totals

    def accounted(ident: Any, live: Any, replay: Any) -> bool:
        if effect.adds is None:
            return ident in live_dropped or ident in replay_dropped
        zero = (0,) * len(live)
        gap = tuple(x - y for x, y in zip(live, replay, strict=True))
        dropped = tuple(
            r - lv
            for r, lv in zip(
                replay_dropped.get(ident, zero), live_dropped.get(ident, zero), strict=True
            )
        )
        return gap == dropped

    c.unexplained = [d for d in c.unexplained if not accounted(*d)]


def replay_config(app: StreamApp, base: StreamAppConfig, suffix: str) -> StreamAppConfig:
    """``base`` with the application's output topics renamed ``<topic>-<suffix>``, its
    dead-letter (and late-record) topics too: a replay never writes into the live ones."""
    changes: dict[str, Any] = {f: f"{getattr(base, f)}-{suffix}" for f in app.outputs}
    for name in ("dead_letter_suffix", "late_suffix"):
        if hasattr(base, name):
            changes[name] = f"{getattr(base, name)}-{suffix}"
    return replace(base, **changes)


def group_lag(kafka: Kafka, group: str, inputs: list[str]) -> dict[str, int]:
    """Lag of ``group`` on its input topics and on its repartition topics
    (``<group>-...-repartition``: caught up on the inputs is not done while they still lag).
    Named topics, so the committed offsets are read the safe way (``monitor._committed``)."""
    internal = sorted(
        t for t in list_topics(kafka) if t.startswith(f"{group}-") and t.endswith("-repartition")
    )
    return consumer_lag(kafka, group, [*inputs, *internal])


def run_until_caught_up(
    runner: Any,
    kafka: Kafka,
    *,
    timeout_s: float = 600.0,
    settle_s: float = 5.0,
    log: Callable[[str], None] = print,
) -> float:
    """Start ``runner`` and stop it once its consumer group has no lag for ``settle_s``;
    return the seconds it ran."""
    began = time.monotonic()
    runner.start()
    try:
        caught_up_since = None
        inputs = runner.app.input_topics(runner.config)
        while time.monotonic() - began < timeout_s:
            time.sleep(1.0)
            if runner.state in ("ERROR", "PENDING_ERROR", "NOT_RUNNING"):
                raise RuntimeError(f"replay of {runner.app.name} failed: state {runner.state}")
            try:
                lag = group_lag(kafka, runner.application_id, inputs)
            except Exception:
                continue
            if lag and sum(lag.values()) == 0:
                caught_up_since = caught_up_since or time.monotonic()
                if time.monotonic() - caught_up_since >= settle_s:
                    break
            else:
                caught_up_since = None
        else:
            raise TimeoutError(f"replay of {runner.app.name} did not catch up in {timeout_s}s")
        log(f"replay of {runner.app.name} caught up after {time.monotonic() - began:.1f}s")
    finally:
        runner.close()
    return time.monotonic() - began


def late_rows(kafka: Kafka, app: StreamApp, config: StreamAppConfig) -> list[dict] | None:
    """The rows of the records ``app`` (under ``config``) reported its windows dropped as
    late (read committed), or None when it reports none."""
    if not getattr(app, "reports_late", False) or not hasattr(config, "late_topic"):
        return None
    return [v for _k, v, _ts in read_all(kafka, config.late_topic(app.name)) if isinstance(v, dict)]


def late_records(kafka: Kafka, app: StreamApp, config: StreamAppConfig) -> int | None:
    """How many records ``app`` reported dropping as late (its late topic's offsets would
    also count transaction markers and aborted writes), or None when it reports none."""
    rows = late_rows(kafka, app, config)
    return None if rows is None else len(rows)


def read_all(kafka: Kafka, topic: str) -> list:
    """Every record of ``topic`` (read_committed)."""
    return read_tail(kafka, topic, per_partition=10**9, timeout=60.0)


# -- a replay that finishes ------------------------------------------------------------------

Partition = tuple[str, int]


def _name(tp: Partition) -> str:
    return f"{tp[0]}-{tp[1]}"


def capture_offsets(
    kafka: Kafka, topics: list[str], timeout: float = 30.0
) -> dict[Partition, tuple[int, int]]:
    """``(topic, partition) -> (start, end)`` of every partition of ``topics`` now: the log
    start offset and the last stable offset (the read_committed end: a transaction still open
    is not in the range). Raises when a topic does not exist."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(KafkaConnection.of(kafka).client_config())
    meta = admin.list_topics(timeout=timeout)
    parts = []
    for topic in topics:
        t = meta.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            raise RuntimeError(f"input topic {topic!r} does not exist (or has no partitions)")
        parts += [TopicPartition(topic, p) for p in sorted(t.partitions)]
    out: dict[Partition, list[int]] = {(tp.topic, tp.partition): [0, 0] for tp in parts}
    for i, spec in enumerate((OffsetSpec.earliest(), OffsetSpec.latest())):
        futures = admin.list_offsets(
            dict.fromkeys(parts, spec),
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=timeout,
        )
        for tp, future in futures.items():
            out[(tp.topic, tp.partition)][i] = future.result(timeout).offset
    return {tp: (start, max(start, end)) for tp, (start, end) in out.items()}


@dataclass
class ReplayProgress:
    """How far a replay got: committed input records of the captured range."""

    app: str
    done: int
    total: int
    elapsed_s: float
    rate: float  # committed input records per second since the last report
    phase: str  # "inputs", then "repartition" (records derived from the range), then "done"
    behind: list[tuple[str, int, int]] = field(default_factory=list)  # (partition, at, end)
    repartition_done: int = 0
    repartition_total: int = 0
    state: str = ""

    @property
    def share(self) -> float:
        return self.done / self.total if self.total else 1.0

    def summary(self) -> str:
        """``12,345 / 50,000 input records (24.7%), 980 records/s, 12 s; ...``"""
        text = (
            f"{self.done:,} / {self.total:,} input records ({self.share:.1%}), "
            f"{self.rate:,.0f} records/s, {self.elapsed_s:.0f} s"
        )
        if self.phase == "repartition":
            text += (
                f"; inputs done, repartition topics {self.repartition_done:,} / "
                f"{self.repartition_total:,}"
            )
        if self.behind:
            slowest = ", ".join(f"{p} at {at:,} of {end:,}" for p, at, end in self.behind[:3])
            text += f"; behind: {slowest}"
        return text


class ReplayError(RuntimeError):
    """The replay did not finish; ``progress`` says how far it got."""

    def __init__(self, message: str, progress: ReplayProgress | None) -> None:
        super().__init__(message)
        self.progress = progress


class ReplayTimeout(ReplayError, TimeoutError):
    """The replay did not reach the captured end offsets in time."""


@dataclass
class ReplayResult:
    """A finished replay: the captured input range, what it took, the final committed offsets."""

    app: str
    application_id: str
    captured: dict[Partition, tuple[int, int]]  # (start, end) per input partition
    committed: dict[Partition, int]
    repartition: dict[Partition, int]  # end offsets of the records derived from the range
    seconds: float
    closed_cleanly: bool

    @property
    def input_records(self) -> int:
        """Offsets in the captured range (transaction markers included)."""
        return sum(end - start for start, end in self.captured.values())

    @property
    def rate(self) -> float:
        return self.input_records / self.seconds if self.seconds > 0 else 0.0

    def end_offsets(self) -> dict[str, int]:
        """``"topic-partition" -> captured end offset``."""
        return {_name(tp): end for tp, (_, end) in sorted(self.captured.items())}


class _CommittedOffsets:
    """Committed offsets of one consumer group, read by a consumer that never joins it
    (OffsetFetch; read_committed: only offsets of committed transactions)."""

    def __init__(self, kafka: Kafka, group: str, timeout: float = 10.0) -> None:
        from confluent_kafka import Consumer

        from pipelines.streams.monitor import _quiet_logger

        self.timeout = timeout
        self._consumer = Consumer(
            KafkaConnection.of(kafka).client_config(
                **{
                    "group.id": group,
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "logger": _quiet_logger(),
                }
            )
        )

    def read(self, partitions: list[Partition]) -> dict[Partition, int]:
        """``partition -> committed offset`` (-1: none yet)."""
        from confluent_kafka import TopicPartition

        if not partitions:
            return {}
        got = self._consumer.committed(
            [TopicPartition(t, p) for t, p in partitions], timeout=self.timeout
        )
        return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else -1 for tp in got}

    def close(self) -> None:
        with contextlib.suppress(Exception):  # best effort
            self._consumer.close()


def repartition_topics(kafka: Kafka, group: str) -> list[str]:
    """The repartition topics of application ``group`` (``<group>-...-repartition``)."""
    return sorted(
        t for t in list_topics(kafka) if t.startswith(f"{group}-") and t.endswith("-repartition")
    )


def _progress(
    app: str,
    captured: dict[Partition, tuple[int, int]],
    committed: dict[Partition, int],
    targets: dict[Partition, tuple[int, int]],
    read: dict[Partition, int],
    phase: str,
) -> ReplayProgress:
    """Progress from the committed offsets: ``committed`` on the inputs, ``read`` on
    ``targets`` (the inputs, or the repartition topics). A partition is done once its
    committed offset reaches the end, or when the range is empty (start = end)."""
    done = sum(
        max(0, min(committed.get(tp, -1), end) - start) for tp, (start, end) in captured.items()
    )
    behind = sorted(
        (
            (_name(tp), max(read.get(tp, -1), 0), end)
            for tp, (start, end) in targets.items()
            if end > start and read.get(tp, -1) < end
        ),
        key=lambda b: b[1] - b[2],
    )
    progress = ReplayProgress(
        app=app,
        done=done,
        total=sum(end - start for start, end in captured.values()),
        elapsed_s=0.0,
        rate=0.0,
        phase=phase,
        behind=behind,
    )
    if phase == "repartition":
        progress.repartition_total = sum(end - start for start, end in targets.values())
        progress.repartition_done = sum(
            max(0, min(read.get(tp, -1), end) - start) for tp, (start, end) in targets.items()
        )
    return progress


def replay_to_end_offsets(
    runner: Any,
    kafka: Kafka,
    *,
    timeout_s: float = 600.0,
    progress_interval_s: float = 5.0,
    poll_s: float = 1.0,
    log: Callable[[str], None] = print,
) -> ReplayResult:
    """Reprocess the input of ``runner``'s application from the earliest offsets up to the
    end offsets its input partitions have now, however much is produced meanwhile.

    Captures every input partition's range (log start to last stable offset) before the
    application starts, runs it until its committed offsets reach the captured ends on every
    partition, then waits until it also committed the records those inputs sent through its
    repartition topics (their end offsets at that moment, once per repartition level), and
    closes it cleanly. ``log`` gets a progress line (records done / total, rate) every
    ``progress_interval_s``. Raises ``ReplayTimeout`` after ``timeout_s`` and ``ReplayError``
    when the application dies; both say how far the replay got."""
    app = runner.app.name
    group = runner.application_id
    captured = capture_offsets(kafka, runner.app.input_topics(runner.config))
    total = sum(end - start for start, end in captured.values())
    log(
        f"replay of {app} (application.id {group}): {total:,} input records in "
        f"{len(captured)} partition{'' if len(captured) == 1 else 's'}, up to the end offsets "
        + ", ".join(f"{_name(tp)}={end:,}" for tp, (_, end) in sorted(captured.items()))
    )
    began = time.monotonic()
    reader = _CommittedOffsets(kafka, group)
    progress: ReplayProgress | None = None
    # what the committed offsets must reach: the inputs' range, then the repartition topics'
    targets: dict[Partition, tuple[int, int]] = dict(captured)
    repartition: dict[Partition, int] = {}
    levels = 0  # repartition levels waited for
    phase = "inputs"
    committed: dict[Partition, int] = {}
    last_report = (began, 0)
    closed = False
    runner.start()
    try:
        while True:
            time.sleep(poll_s)
            now = time.monotonic()
            if runner.state in ("ERROR", "PENDING_ERROR", "NOT_RUNNING"):
                summary = progress.summary() if progress else "nothing committed"
                why = getattr(runner, "_died_with", None)
                raise ReplayError(
                    f"replay of {app} failed (application state {runner.state}"
                    + (f": {why}" if why else "")
                    + f") after {now - began:.0f} s: {summary}",
                    progress,
                )
            try:
                read = reader.read(sorted(targets))
            except Exception as exc:  # the broker is busy or away: the next poll retries
                log(f"replay of {app}: committed offsets unavailable ({exc}); retrying")
                read = {}
            if read:
                if phase == "inputs":
                    committed = read
                progress = _progress(app, captured, committed, targets, read, phase)
                progress.elapsed_s = now - began
                progress.rate = (progress.done - last_report[1]) / max(1e-3, now - last_report[0])
                progress.state = runner.state
                if not progress.behind:
                    internal = repartition_topics(kafka, group)
                    if levels < len(internal):
                        # the records the range sent through the repartition topics are there
                        # now (written before, or in the transaction of, the input offsets'
                        # commit): wait for them too, once per level of repartitioning
                        levels += 1
                        phase = "repartition"
                        targets = capture_offsets(kafka, internal)
                        repartition = {tp: end for tp, (_, end) in targets.items()}
                        continue
                    progress.phase = "done"
                    break
                if now - last_report[0] >= progress_interval_s:
                    log(f"replay of {app}: {progress.summary()}")
                    last_report = (now, progress.done)
            if now - began > timeout_s:
                summary = progress.summary() if progress else "no committed offsets read yet"
                raise ReplayTimeout(
                    f"replay of {app} did not reach the captured end offsets within "
                    f"{timeout_s:.0f} s: {summary}; application state {runner.state}. Raise "
                    "timeout_s, or replay when the application keeps up with its input",
                    progress,
                )
    finally:
        try:
            closed = runner.close()
        finally:
            reader.close()
    seconds = time.monotonic() - began
    result = ReplayResult(
        app=app,
        application_id=group,
        captured=captured,
        committed=committed,
        repartition=repartition,
        seconds=seconds,
        closed_cleanly=bool(closed),
    )
    log(
        f"replay of {app} reached the captured end offsets: {result.input_records:,} input "
        f"records in {seconds:.1f} s ({result.rate:,.0f} records/s), closed "
        + ("cleanly" if closed else "(timed out)")
    )
    return result
