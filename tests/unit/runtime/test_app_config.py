"""KafkaStreams pieces that need no broker: config validation, the partitioner, the task
layout of topologies, checkpoint files, handlers and the CLI's config loading."""

from __future__ import annotations

import pytest

from streaming import Materialized, Repartitioned, StreamsBuilder, TimeWindows, serdes
from streaming.errors import ConfigException
from streaming.runtime import errors
from streaming.runtime.assignment import TopologyPlan, TopologyValidationError
from streaming.runtime.config import StreamsConfig, load_config_file
from streaming.runtime.partitioner import default_partition, murmur2
from streaming.runtime.state_directory import (
    StateDirectory,
    StateDirectoryLocked,
    read_checkpoint,
    write_checkpoint,
)

BASE = {"application.id": "app", "bootstrap.servers": "localhost:9092"}


# -- config ---------------------------------------------------------------------------------


def test_defaults_follow_kafka_streams():
    cfg = StreamsConfig.from_mapping(BASE)
    assert cfg.processing_guarantee == "at_least_once"
    assert cfg.commit_interval_ms == 30_000
    assert cfg.cache_max_bytes == 10 * 1024 * 1024
    assert cfg.max_task_idle_ms == 0
    assert cfg.num_stream_threads == 1
    eos = StreamsConfig.from_mapping({**BASE, "processing.guarantee": "exactly_once_v2"})
    assert eos.exactly_once and eos.commit_interval_ms == 100


def test_strings_from_properties_files_are_parsed_and_prefixes_split():
    cfg = StreamsConfig.from_mapping(
        {
            **BASE,
            "commit.interval.ms": "250",
            "cache.max.bytes.buffering": "0",
            "default.key.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
            "consumer.session.timeout.ms": "6000",
            "producer.linger.ms": 20,
            "admin.request.timeout.ms": 1000,
        }
    )
    assert cfg.commit_interval_ms == 250
    assert cfg.cache_max_bytes == 0
    assert isinstance(cfg.default_key_serde, serdes.String)
    assert cfg.consumer == {"session.timeout.ms": "6000"}
    assert cfg.producer == {"linger.ms": 20}
    assert cfg.admin == {"request.timeout.ms": 1000}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"application.id": None}, "application.id"),
        ({"application.id": "bad name!"}, "letters, digits"),
        ({"bootstrap.servers": ""}, "bootstrap.servers"),
        ({"processing.guarantee": "exactly_once"}, "exactly_once_v2"),
        ({"commit.interval.ms": "soon"}, "expected an integer"),
        ({"commit.interval.ms": -5}, "at least 0"),
        ({"application.server": "nohostport"}, "host:port"),
        ({"default.value.serde": "avro"}, "unknown serde"),
        ({"default.deserialization.exception.handler": "retry"}, "log_and_continue"),
        ({"num.standby.replicas": -1}, "at least 0"),
        ({"consumer.group.id": "other"}, "KafkaStreams manages it"),
        ({"producer.transactional.id": "x"}, "KafkaStreams manages it"),
    ],
)
def test_misconfiguration_fails_fast_with_what_to_fix(override, message):
    with pytest.raises(ConfigException, match=message):
        StreamsConfig.from_mapping({**BASE, **override})


def test_handlers_by_kafka_class_name_or_callable():
    cfg = StreamsConfig.from_mapping(
        {
            **BASE,
            "default.deserialization.exception.handler": (
                "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler"
            ),
            "processing.exception.handler": lambda ctx, rec, exc: "continue",
        }
    )
    ctx = errors.ErrorHandlerContext("t", 0, 1, 2, (), None, "0_0")
    assert errors.decide(cfg.deserialization_handler, ctx, None, ValueError()) is (
        errors.Response.CONTINUE
    )
    assert errors.decide(cfg.processing_handler, ctx, None, ValueError()) is (
        errors.Response.CONTINUE
    )
    assert errors.decide(cfg.production_handler, ctx, None, ValueError()) is errors.Response.FAIL


def test_dead_letter_headers_follow_kip_1034():
    ctx = errors.ErrorHandlerContext("orders", 3, 42, 7, (), "node", "0_3")
    try:
        raise ValueError("bad value")
    except ValueError as exc:
        headers = dict(errors.dead_letter_headers(ctx, exc))
    assert headers["__streams.errors.exception"] == b"builtins.ValueError: bad value"
    assert headers["__streams.errors.message"] == b"bad value"
    assert headers["__streams.errors.topic"] == b"orders"
    assert headers["__streams.errors.partition"] == b"3"
    assert headers["__streams.errors.offset"] == b"42"
    assert b"Traceback" in headers["__streams.errors.stacktrace"]


@pytest.mark.parametrize("suffix", ["properties", "yaml", "json"])
def test_config_files(tmp_path, suffix):
    text = {
        "properties": "# comment\napplication.id=app\nbootstrap.servers = h:1\nconsumer.x: 1\n",
        "yaml": "application.id: app\nbootstrap.servers: h:1\nconsumer:\n  x: 1\n",
        "json": '{"application.id": "app", "bootstrap.servers": "h:1", "consumer": {"x": 1}}',
    }[suffix]
    path = tmp_path / f"app.{suffix}"
    path.write_text(text)
    loaded = load_config_file(path)
    assert loaded["application.id"] == "app"
    assert loaded["bootstrap.servers"] == "h:1"
    assert str(loaded["consumer.x"]) == "1"


def test_properties_files_read_as_java_reads_them(tmp_path):
    # java.util.Properties#load: continuation lines, escaped separators and backslashes,
    # unicode escapes, whitespace as the separator, "!" comments
    path = tmp_path / "app.properties"
    path.write_text(
        "! comment\n"
        "bootstrap.servers=h1:9092,\\\n"
        "    h2:9092\n"
        "state.dir=C\\:\\\\state\n"
        "app.greeting \\u00e9t\\u00e9\n"
        "app.key\\=with\\:separators = v\n"
    )
    assert load_config_file(path) == {
        "bootstrap.servers": "h1:9092,h2:9092",
        "state.dir": "C:\\state",
        "app.greeting": "\u00e9t\u00e9",
        "app.key=with:separators": "v",
    }


# -- partitioner ----------------------------------------------------------------------------


def test_murmur2_matches_kafka_utils_test():
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for data, expected in cases.items():
        assert murmur2(data) == expected
    assert default_partition(b"foobar", 4) == (-790332482 & 0x7FFFFFFF) % 4


# -- topology layout ------------------------------------------------------------------------


def test_plan_tasks_changelogs_and_repartition_counts():
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=serdes.String(), value_serde=serdes.Json())
    (
        orders.select_key(lambda k, v: v["region"])
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(60_000, 1_000))
        .count(materialized=Materialized.as_("win"))
    )
    orders.group_by_key().count(materialized="per-key")
    plan = TopologyPlan(builder.build(), "app", window_additional_retention_ms=1000)
    plan.resolve(lambda topics: {t: 6 for t in topics})
    assert plan.external_source_topics == ["orders"]
    (repartition,) = plan.internal_topics
    assert repartition.startswith("app-") and repartition.endswith("-repartition")
    assert plan.partitions[repartition] == 6
    specs = {spec.store: (spec, n) for spec, n in plan.changelog_specs()}
    win, n = specs["win"]
    assert n == 6 and win.topic == "app-win-changelog"
    assert win.config["cleanup.policy"] == "compact,delete"
    assert int(win.config["retention.ms"]) == 61_000 + 1000  # retention (size+grace) + extra
    assert specs["per-key"][0].config == {"cleanup.policy": "compact"}
    tasks = plan.tasks_for_partitions([("orders", 2), (repartition, 2), (repartition, 5)])
    sub_of = plan.topic_to_subtopology
    assert tasks == {
        f"{sub_of['orders']}_2": [("orders", 2)],
        f"{sub_of[repartition]}_2": [(repartition, 2)],
        f"{sub_of[repartition]}_5": [(repartition, 5)],
    }


def test_explicit_repartition_count_wins():
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .repartition(Repartitioned.as_("rp").with_number_of_partitions(3))
        .group_by_key()
        .count()
    )
    plan = TopologyPlan(builder.build(), "app")
    plan.resolve(lambda topics: {t: 8 for t in topics})
    assert plan.partitions["app-rp-repartition"] == 3
    assert {n for _, n in plan.changelog_specs()} == {3}


def test_join_of_differently_partitioned_topics_fails_fast():
    builder = StreamsBuilder()
    left = builder.stream("left")
    right = builder.table("right")
    left.join(right, lambda a, b: (a, b)).to("out")
    plan = TopologyPlan(builder.build(), "app")
    with pytest.raises(TopologyValidationError, match="not co-partitioned"):
        plan.resolve(lambda topics: {"left": 2, "right": 3})


def test_missing_source_topic_fails_fast():
    builder = StreamsBuilder()
    builder.stream("absent").to("out")
    plan = TopologyPlan(builder.build(), "app")
    with pytest.raises(TopologyValidationError, match="do not exist"):
        plan.resolve(lambda topics: dict.fromkeys(topics, 0))


# -- state directory ------------------------------------------------------------------------


def test_checkpoint_round_trip_and_corruption(tmp_path):
    assert read_checkpoint(tmp_path) is None
    write_checkpoint(tmp_path, {("app-s-changelog", 3): 42, ("app-t-changelog", 3): 7})
    assert (tmp_path / ".checkpoint").read_text().startswith("0\n2\n")
    assert read_checkpoint(tmp_path) == {("app-s-changelog", 3): 42, ("app-t-changelog", 3): 7}
    (tmp_path / ".checkpoint").write_text("0\n3\napp-s-changelog 3 42\n")
    assert read_checkpoint(tmp_path) is None


def test_state_directory_lock_and_process_id(tmp_path):
    first = StateDirectory(tmp_path, "app")
    first.lock()
    pid = first.process_id()
    second = StateDirectory(tmp_path, "app")
    with pytest.raises(StateDirectoryLocked, match="own state"):
        second.lock()
    first.unlock()
    second.lock()
    assert second.process_id() == pid
    second.unlock()
