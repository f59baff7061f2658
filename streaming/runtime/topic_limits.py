"""What a topic accepts: the timestamp window and record size its brokers enforce.

A record outside them is refused by the broker, and librdkafka then fails its whole batch
(every record of it reports the same error, none says which one was bad), which under
exactly-once aborts the transaction again on every retry. Checking each record before it is
sent lets the production exception handler skip exactly the bad one. The limits are the
topic's effective configs (``message.timestamp.after.max.ms``,
``message.timestamp.before.max.ms``, ``max.message.bytes``, ``message.timestamp.type``),
read once per topic with the admin client; Kafka 4's defaults stand in while they cannot be
read. A reading that waits on the brokers longer than ``SLOW_CALL_S`` is reported to the
stream thread that asked (``waiting``): its first write to a topic waits for it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any

from streaming.runtime.failures import SLOW_CALL_S

log = logging.getLogger(__name__)

#: Kafka 4's broker defaults
DEFAULT_AFTER_MAX_MS = 3_600_000
DEFAULT_BEFORE_MAX_MS = 2**63 - 1
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
#: bytes of a one-record batch besides its key, value and headers (batch and record headers)
BATCH_OVERHEAD = 100
#: no wall clock in ms reaches this (about 146 million years after 1970)
UNREACHABLE_MS = 2**62
#: records this close to the "before" bound are refused too: the broker checks a bit later
BEFORE_MARGIN_MS = 60_000


@dataclass(frozen=True, slots=True)
class TopicLimits:
    """The bounds a record must meet to be accepted by a topic."""

    after_max_ms: int = DEFAULT_AFTER_MAX_MS
    before_max_ms: int = DEFAULT_BEFORE_MAX_MS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    #: LogAppendTime topics overwrite the timestamp: no timestamp bound applies
    log_append_time: bool = False

    @staticmethod
    def defaults() -> TopicLimits:
        """Kafka 4's defaults (the one shared instance, used while a topic's are unknown)."""
        return _DEFAULTS

    def acceptance_bounds(self) -> tuple[float, float, float]:
        """(ahead, behind, size): a record with a timestamp >= 0 passes ``refusal`` exactly
        when ``timestamp - now_ms <= ahead``, ``now_ms - timestamp <= behind`` and its size
        is at most ``size``. A bound no record can reach is ``math.inf`` (``behind`` with
        the default ``before_max_ms``: no wall clock is that far past 0)."""
        if self.log_append_time:
            return math.inf, math.inf, self.max_message_bytes - BATCH_OVERHEAD
        behind = self.before_max_ms - BEFORE_MARGIN_MS
        return (
            self.after_max_ms,
            math.inf if behind >= UNREACHABLE_MS else behind,
            self.max_message_bytes - BATCH_OVERHEAD,
        )

    def refusal(self, timestamp: int, size: int, now_ms: int) -> tuple[str, str] | None:
        """Why the broker would refuse the record, as (error name, reason), or None."""
        if not self.log_append_time and timestamp >= 0:
            if timestamp - now_ms > self.after_max_ms:
                return (
                    "INVALID_TIMESTAMP",
                    f"timestamp {timestamp} is {timestamp - now_ms} ms ahead of now, more than "
                    f"the topic's message.timestamp.after.max.ms={self.after_max_ms}",
                )
            if now_ms - timestamp > self.before_max_ms - BEFORE_MARGIN_MS:
                return (
                    "INVALID_TIMESTAMP",
                    f"timestamp {timestamp} is {now_ms - timestamp} ms behind now, more than "
                    f"the topic's message.timestamp.before.max.ms={self.before_max_ms}",
                )
        if size + BATCH_OVERHEAD > self.max_message_bytes:
            return (
                "MSG_SIZE_TOO_LARGE",
                f"the record has {size} bytes, more than the topic's "
                f"max.message.bytes={self.max_message_bytes} allows",
            )
        return None


_DEFAULTS = TopicLimits()


class TopicLimitsCache:
    """Reads and caches ``TopicLimits`` per topic (shared by the stream threads)."""

    def __init__(self, admin: Any, timeout: float = 5.0, retry_after_s: float = 60.0) -> None:
        self.admin = admin
        self.timeout = timeout
        self.retry_after_s = retry_after_s
        self._cache: dict[str, TopicLimits] = {}
        #: topic -> when reading its configs last failed (the defaults apply until a retry)
        self._failed_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def __call__(self, topic: str, waiting: Callable[[str], None] | None = None) -> TopicLimits:
        """``topic``'s limits (the defaults while they cannot be read); ``waiting`` is told
        when the reading has waited ``SLOW_CALL_S`` (here or on another thread's reading)."""
        limits = self._cache.get(topic)
        if limits is not None:
            return limits
        if self._failed_recently(topic):
            return _DEFAULTS  # brokers away: do not wait on every write
        if not self._lock.acquire(timeout=SLOW_CALL_S):
            if waiting is not None:
                waiting(f"reading the configs of topic {topic} is waiting for the brokers")
            self._lock.acquire()
        try:
            limits = self._cache.get(topic)
            if limits is None:
                # another thread's reading may just have failed
                limits = _DEFAULTS if self._failed_recently(topic) else self._read(topic, waiting)
        finally:
            self._lock.release()
        return limits

    def _failed_recently(self, topic: str) -> bool:
        failed_at = self._failed_at.get(topic)
        return failed_at is not None and time.monotonic() - failed_at < self.retry_after_s

    def _read(self, topic: str, waiting: Callable[[str], None] | None) -> TopicLimits:
        from confluent_kafka.admin import ConfigResource

        try:
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
            futures = self.admin.describe_configs([resource], request_timeout=self.timeout)
            future = next(iter(futures.values()))
            deadline = time.monotonic() + self.timeout
            try:
                entries = future.result(min(SLOW_CALL_S, self.timeout))
            except FutureTimeoutError:
                if waiting is not None:
                    waiting(f"reading the configs of topic {topic} is waiting for the brokers")
                entries = future.result(max(0.0, deadline - time.monotonic()))
        except Exception as exc:  # brokers away: the defaults, read again later
            log.debug("Could not read the configs of topic %s: %s", topic, exc)
            self._failed_at[topic] = time.monotonic()
            return _DEFAULTS

        def value(name: str, default: int) -> int:
            entry = entries.get(name)
            try:
                return int(entry.value) if entry is not None and entry.value else default
            except ValueError:
                return default

        type_entry = entries.get("message.timestamp.type")
        limits = TopicLimits(
            after_max_ms=value("message.timestamp.after.max.ms", DEFAULT_AFTER_MAX_MS),
            before_max_ms=value("message.timestamp.before.max.ms", DEFAULT_BEFORE_MAX_MS),
            max_message_bytes=value("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES),
            log_append_time=type_entry is not None and type_entry.value == "LogAppendTime",
        )
        self._cache[topic] = limits
        return limits
