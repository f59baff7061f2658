"""Creating topics while the brokers refuse for a while: a KRaft broker whose heartbeats came
late on a busy machine is fenced, and every creation fails with INVALID_REPLICATION_FACTOR
("All brokers are currently fenced") until it is back. A start asks again instead of
failing; any other refusal, or one that outlasts the timeout, is raised."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from streaming.runtime.topics import (
    InternalTopicError,
    InternalTopicManager,
    TopicCreationError,
    create_topics,
)

FENCED = KafkaError(
    KafkaError.INVALID_REPLICATION_FACTOR,
    "Unable to replicate the partition 1 time(s): All brokers are currently fenced.",
)


class ScriptedAdmin:
    """An admin whose create_topics answers each topic with the next scripted error (None:
    created)."""

    def __init__(self, script: dict[str, list[KafkaError | None]]) -> None:
        self.script = script
        self.calls: list[list[str]] = []

    def create_topics(self, new, **_timeouts):
        self.calls.append([t.topic for t in new])
        futures = {}
        for t in new:
            future: Future = Future()
            error = self.script[t.topic].pop(0)
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(KafkaException(error))
            futures[t.topic] = future
        return futures


def test_fenced_brokers_are_asked_again_until_they_take_the_topic():
    admin = ScriptedAdmin({"a": [FENCED, FENCED, None], "b": [None]})
    create_topics(admin, [NewTopic("a", 1), NewTopic("b", 1)], timeout=10, backoff_s=0.01)
    assert admin.calls == [["a", "b"], ["a"], ["a"]]


def test_a_topic_that_exists_already_is_fine():
    exists = KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "exists")
    admin = ScriptedAdmin({"a": [exists]})
    create_topics(admin, [NewTopic("a", 1)], timeout=10, backoff_s=0.01)
    assert admin.calls == [["a"]]


def test_other_refusals_and_refusals_past_the_timeout_are_raised():
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed")
    admin = ScriptedAdmin({"a": [denied]})
    with pytest.raises(TopicCreationError, match=r"a: .*not allowed"):
        create_topics(admin, [NewTopic("a", 1)], timeout=10, backoff_s=0.01)
    assert admin.calls == [["a"]]

    fenced_for_good = ScriptedAdmin({"a": [FENCED] * 1000})
    with pytest.raises(TopicCreationError, match="fenced"):
        create_topics(fenced_for_good, [NewTopic("a", 1)], timeout=0.2, backoff_s=0.05)
    assert fenced_for_good.calls  # asked, then gave up at the timeout


class _Meta:
    topics: dict = {}
    brokers: dict = {}


def test_internal_topics_wait_for_fenced_brokers_and_name_the_topic_otherwise():
    denied = KafkaError(KafkaError.POLICY_VIOLATION, "no such topics here")
    admin = ScriptedAdmin({"app-store-changelog": [FENCED, denied]})
    admin.list_topics = lambda **_: _Meta()  # type: ignore[attr-defined]
    manager = InternalTopicManager(admin, replication_factor=1, timeout=5)
    with pytest.raises(InternalTopicError, match=r"internal topic app-store-changelog: .*no such"):
        manager.ensure({"app-store-changelog": (1, {})})
    assert admin.calls == [["app-store-changelog"], ["app-store-changelog"]]
