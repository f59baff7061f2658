"""Misconfiguration fails fast and says what to fix: unknown keys (with the closest known
one), client settings checked against librdkafka, Java-only settings, values, ``state.dir``
that cannot be used, unreachable ``bootstrap.servers`` and the command line's one-line
errors. No broker is needed (see tests/integration/test_app_startup_errors.py for those)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from streaming.errors import ConfigException
from streaming.runtime import client_settings
from streaming.runtime.bootstrap_probe import (
    ClusterUnreachableException,
    bootstrap_addresses,
    check_bootstrap_servers,
    probe_addresses,
)
from streaming.runtime.client_settings import CLIENT_PROPERTIES
from streaming.runtime.config import StreamsConfig
from streaming.runtime.state_directory import StateDirectory, StateDirectoryUnusable

REPO = Path(__file__).resolve().parents[3]
BASE = {"application.id": "app", "bootstrap.servers": "localhost:9092"}


def build(**overrides):
    return StreamsConfig.from_mapping({**BASE, **overrides})


def fails(settings: dict, *fragments: str) -> str:
    with pytest.raises(ConfigException) as info:
        StreamsConfig.from_mapping({**BASE, **settings})
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- unknown Kafka Streams keys ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("processing.guarantees", "processing.guarantee"),
        ("processing_guarantee", "processing.guarantee"),
        ("PROCESSING_GUARANTEE", "processing.guarantee"),
        ("num.streams.threads", "num.stream.threads"),
        ("state_dir", "state.dir"),
        ("comit.interval.ms", "commit.interval.ms"),
        ("application_id", "application.id"),
        ("consumers.session.timeout.ms", "consumer.session.timeout.ms"),
        ("sesion.timeout.ms", "session.timeout.ms"),
    ],
)
def test_misspelt_key_fails_with_the_closest_known_key(key, meant):
    fails({key: "exactly_once_v2"}, f"Unknown configuration {key!r}", f"did you mean {meant!r}?")


def test_the_measured_case_no_longer_runs_at_least_once():
    # before: logged at INFO "not used by KafkaStreams" and ran at-least-once
    with pytest.raises(ConfigException, match=r"did you mean 'processing\.guarantee'"):
        StreamsConfig.from_mapping({**BASE, "processing.guarantees": "exactly_once_v2"})


def test_unknown_key_without_a_close_match_points_at_the_app_prefix():
    fails({"region": "eu"}, "Unknown configuration 'region'", "'app.region'")


def test_every_problem_is_reported_at_once():
    message = fails({"processing.guarantees": "x", "num.streams.threads": 2}, "2 configuration")
    assert "processing.guarantee'?" in message and "num.stream.threads'?" in message


def test_application_settings_under_app_prefix_and_internal_configs_reach_processors():
    cfg = build(
        **{
            "app.region": "eu",
            "app.topics.input": "orders",
            "__emit.interval.ms.kstreams.windowed.aggregation__": 0,
        }
    )
    app_configs = cfg.app_configs()
    assert app_configs["app.region"] == "eu"
    assert app_configs["app.topics.input"] == "orders"
    assert app_configs["__emit.interval.ms.kstreams.windowed.aggregation__"] == 0
    assert cfg.consumer == cfg.producer == cfg.admin == {}


JAVA_STREAMS_PROPERTIES = {
    "acceptable.recovery.lag": "10000",
    "built.in.metrics.version": "latest",
    "default.dsl.store": "rocksDB",
    "dsl.store.suppliers.class": "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers",
    "enable.metrics.push": "true",
    "log.summary.interval.ms": "120000",
    "max.warmup.replicas": "2",
    "metric.reporters": "",
    "metrics.num.samples": "2",
    "metrics.recording.level": "INFO",
    "metrics.sample.window.ms": "30000",
    "num.standby.replicas": "1",
    "poll.ms": "100",
    "probing.rebalance.interval.ms": "600000",
    "processing.exception.handler": "log_and_fail",
    "rack.aware.assignment.strategy": "none",
    "rack.aware.assignment.tags": "",
    "receive.buffer.bytes": "32768",
    "request.timeout.ms": "40000",
    "retries": "10",
    "rocksdb.config.setter": "com.example.CustomRocksDBConfig",
    "send.buffer.bytes": "131072",
    "state.cleanup.delay.ms": "600000",
    "statestore.cache.max.bytes": "10485760",
    "topic.min.insync.replicas": "2",
    "topology.optimization": "all",
    "upgrade.from": "3.4",
    "window.size.ms": "60000",
    "windowed.inner.class.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
    "task.timeout.ms": "300000",
    "retry.backoff.ms": "100",
    "security.protocol": "PLAINTEXT",
}


def test_a_java_streams_properties_file_is_accepted(caplog):
    with caplog.at_level(logging.DEBUG, logger="streaming.runtime.client_settings"):
        cfg = build(**JAVA_STREAMS_PROPERTIES)
    assert cfg.num_standby_replicas == 1
    logged = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert "rocksdb.config.setter" in logged and "topology.optimization" not in logged
    # client settings among them reach the clients they apply to, as in Kafka Streams
    assert cfg.producer["retries"] == "10" and "retries" not in cfg.consumer
    assert cfg.producer["request.timeout.ms"] == "40000"
    assert cfg.consumer["security.protocol"] == "PLAINTEXT" == cfg.admin["security.protocol"]


def test_task_timeout_and_retry_backoff_are_parsed():
    cfg = build()
    assert (cfg.task_timeout_ms, cfg.retry_backoff_ms) == (300_000, 100)
    assert cfg.bootstrap_timeout_ms == 15_000
    cfg = build(**{"task.timeout.ms": "0", "retry.backoff.ms": "250", "bootstrap.timeout.ms": 500})
    assert (cfg.task_timeout_ms, cfg.retry_backoff_ms, cfg.bootstrap_timeout_ms) == (0, 250, 500)
    assert cfg.consumer["retry.backoff.ms"] == "250"  # also passed to the clients
    fails({"task.timeout.ms": "soon"}, "task.timeout.ms", "expected an integer")
    fails({"retry.backoff.ms": -1}, "retry.backoff.ms", "at least 0")
    fails({"bootstrap.timeout.ms": 0}, "bootstrap.timeout.ms", "at least 1")


def test_streams_value_outside_librdkafka_range_is_kept_from_the_clients():
    cfg = build(**{"retry.backoff.ms": 0})  # valid for Kafka Streams, not for librdkafka
    assert cfg.retry_backoff_ms == 0 and "retry.backoff.ms" not in cfg.consumer


# -- processing.guarantee and bootstrap.servers values -----------------------------------------


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("eos", "valid values are 'at_least_once' or 'exactly_once_v2'"),
        ("exactly-once-v2", "did you mean 'exactly_once_v2'?"),
        ("at-least-once", "did you mean 'at_least_once'?"),
        ("exactly_once", "removed in Kafka 4.0"),
    ],
)
def test_unknown_processing_guarantee_lists_the_valid_values(value, fragment):
    fails({"processing.guarantee": value}, "processing.guarantee", fragment)


def test_processing_guarantee_aliases():
    assert build(**{"processing.guarantee": "EXACTLY_ONCE_V2"}).exactly_once
    assert build(**{"processing.guarantee": "exactly_once_beta"}).exactly_once


@pytest.mark.parametrize("servers", ["localhost:9o92", "a:9092,,b:9092", "h:70000"])
def test_malformed_bootstrap_servers(servers):
    fails({"bootstrap.servers": servers}, "bootstrap.servers", "host:port")


def test_bootstrap_addresses():
    assert bootstrap_addresses("a:1, b ,SSL://c:3,[::1]:4") == [
        ("a", 1),
        ("b", 9092),
        ("c", 3),
        ("::1", 4),
    ]


# -- client settings against librdkafka --------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("consumer.session.timeout", "consumer.session.timeout.ms"),
        ("producer.lingr.ms", "producer.linger.ms"),
        ("main.consumer.fetch.min.byte", "main.consumer.fetch.min.bytes"),
        ("restore.consumer.fetch.max.byte", "restore.consumer.fetch.max.bytes"),
        ("global.consumer.auto.offset.rest", "global.consumer.auto.offset.reset"),
        ("admin.socket.timeout", "admin.socket.timeout.ms"),
    ],
)
def test_unknown_client_setting_names_librdkafkas_closest(key, meant):
    fails({key: "1"}, f"Unknown configuration {key!r}", "librdkafka", f"did you mean '{meant}'?")


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("consumer.max.poll.records", "buffered.records.per.partition"),
        ("max.poll.records", "buffered.records.per.partition"),
        ("consumer.key.deserializer", "default.key.serde"),
        ("producer.value.serializer", "default.value.serde"),
        ("producer.buffer.memory", "'producer.queue.buffering.max.kbytes'"),
        ("sasl.jaas.config", "'sasl.username' and 'sasl.password'"),
        ("consumer.ssl.truststore.location", "'consumer.ssl.ca.location'"),
        ("consumer.fetch.max.wait.ms", "'consumer.fetch.wait.max.ms'"),
    ],
)
def test_java_only_client_settings_say_what_to_use(key, fragment):
    fails({key: "x"}, repr(key), "Java client setting", fragment)


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("consumer.linger.ms", "did you mean 'producer.linger.ms'?"),
        ("producer.session.timeout.ms", "did you mean 'consumer.session.timeout.ms'?"),
        ("admin.auto.offset.reset", "did you mean 'consumer.auto.offset.reset'?"),
    ],
)
def test_setting_of_the_wrong_client(key, fragment):
    fails({key: "100"}, repr(key), fragment)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("consumer.auto.offset.reset", "bogus"),
        ("consumer.session.timeout.ms", "soon"),
        ("producer.acks", "some"),
        ("security.protocol", "TLS"),
    ],
)
def test_librdkafka_rejects_the_value(key, value):
    fails({key: value}, f"Invalid value {value!r} for configuration {key}")


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("consumer.group.id", "application.id"),
        ("group.id", "application.id"),
        ("main.consumer.enable.auto.commit", "commit.interval.ms"),
        ("producer.transactional.id", "processing.guarantee"),
        ("consumer.client.id", "set client.id instead"),
        ("consumer.partition.assignment.strategy", "co-partitioned"),
    ],
)
def test_settings_kafka_streams_manages(key, fragment):
    fails({key: "x"}, f"{key} cannot be set: KafkaStreams manages it", fragment)


def test_exactly_once_cannot_be_weakened_by_client_settings():
    eos = {"processing.guarantee": "exactly_once_v2"}
    fails({**eos, "consumer.isolation.level": "read_uncommitted"}, "reads only committed")
    fails({**eos, "producer.enable.idempotence": "false"}, "idempotent producer")
    cfg = build(**{"consumer.isolation.level": "read_uncommitted"})  # fine at least once
    assert cfg.consumer["isolation.level"] == "read_uncommitted"


def test_exactly_once_commit_interval_must_fit_in_the_transaction_timeout():
    eos = {"processing.guarantee": "exactly_once_v2"}
    fails(
        {**eos, "commit.interval.ms": "15000"},
        "Transaction timeout 10000 ms (producer.transaction.timeout.ms)",
        "commit interval 15000 ms",
        "raise producer.transaction.timeout.ms to at least 15000",
    )
    raised = {**eos, "commit.interval.ms": "15000", "producer.transaction.timeout.ms": "15000"}
    assert build(**raised).commit_interval_ms == 15000
    assert build(**{"commit.interval.ms": "15000"}).commit_interval_ms == 15000  # at least once


def test_group_protocol_streams_is_refused():
    fails({"group.protocol": "streams"}, "group.protocol", "classic")
    assert build(**{"group.protocol": "classic"}).consumer == {}


def test_client_settings_reach_their_clients_and_prefixes_override():
    cfg = build(
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "user",
            "sasl.password": "secret",
            "linger.ms": 5,
            "session.timeout.ms": 7000,
            "consumer.session.timeout.ms": 8000,
            "main.consumer.session.timeout.ms": 9000,
            "restore.consumer.fetch.max.bytes": 1000,
            "global.consumer.fetch.max.bytes": 2000,
            "consumer.group.instance.id": "instance-1",
            "admin.request.timeout.ms": 1000,
        }
    )
    security = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "user",
        "sasl.password": "secret",
    }
    assert cfg.consumer == {
        **security,
        "session.timeout.ms": 9000,
        "group.instance.id": "instance-1",
    }
    assert cfg.restore_consumer == {**security, "session.timeout.ms": 8000, "fetch.max.bytes": 1000}
    assert cfg.global_consumer == {**security, "session.timeout.ms": 8000, "fetch.max.bytes": 2000}
    assert cfg.producer == {**security, "linger.ms": 5}
    assert cfg.admin == {**security, "request.timeout.ms": 1000}


def test_state_consumers_fetch_again_quickly_unless_told_otherwise():
    # a restore spent most of its time in librdkafka's fetch.queue.backoff.ms (1 s)
    def restore_config(cfg):
        return cfg.clients().state_consumer(role="restore", client_id="c")

    cfg = build()
    assert restore_config(cfg) == {
        "fetch.queue.backoff.ms": 10,
        "enable.sparse.connections": False,
        "reconnect.backoff.max.ms": 1000,
        "bootstrap.servers": cfg.bootstrap_servers,
        "group.id": f"{cfg.application_id}-restore-unused",
        "client.id": "c",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
    }
    cfg = build(
        **{
            "restore.consumer.fetch.queue.backoff.ms": 50,
            "restore.consumer.isolation.level": "read_uncommitted",
        }
    )
    restore = restore_config(cfg)
    assert restore["fetch.queue.backoff.ms"] == 50  # the user's setting wins over the default
    assert restore["isolation.level"] == "read_committed"  # what the runtime relies on wins


@pytest.mark.parametrize("prefix", ["consumer.", "producer.", "restore.consumer.", "admin."])
def test_every_client_connects_to_every_broker_at_once_unless_told_otherwise(prefix):
    # a client connecting lazily made its first request wait about 50 ms for the connection
    clients = build().clients()
    settings = {
        "consumer.": clients.main_consumer(client_id="c", group_instance_id=None),
        "producer.": clients.producer(client_id="c", transactional_id="t"),
        "restore.consumer.": clients.state_consumer(role="restore", client_id="c"),
        "admin.": clients.admin(client_id="c"),
    }
    assert all(s["enable.sparse.connections"] is False for s in settings.values())
    # ... and, connected for good, tries again within a second once a broker is back
    assert all(s["reconnect.backoff.max.ms"] == 1000 for s in settings.values())
    told = build(**{f"{prefix}enable.sparse.connections": True}).clients()
    given = {
        "consumer.": lambda: told.main_consumer(client_id="c", group_instance_id=None),
        "producer.": lambda: told.producer(client_id="c", transactional_id="t"),
        "restore.consumer.": lambda: told.state_consumer(role="restore", client_id="c"),
        "admin.": lambda: told.admin(client_id="c"),
    }[prefix]()
    assert given["enable.sparse.connections"] is True


def test_confluent_kafka_callbacks_are_client_settings():
    def on_error(err):
        return None

    cfg = build(**{"error_cb": on_error, "producer.on_delivery": on_error})
    assert cfg.consumer["error_cb"] is on_error and cfg.producer["on_delivery"] is on_error
    fails({"consumer.on_delivery": on_error}, "did you mean 'producer.on_delivery'?")
    fails({"consumer.error_cb": "not callable"}, "consumer.error_cb")


def test_validation_never_starts_a_client():
    import threading

    before = threading.active_count()
    build(**{"consumer.session.timeout.ms": 6000, "producer.linger.ms": 1, "debug": "all"})
    assert threading.active_count() == before


def test_the_property_table_matches_the_installed_librdkafka():
    """The table only places settings and suggests names; the installed librdkafka still has
    to know each of them (a newer librdkafka may drop one: update the table then)."""
    unknown = []
    for name, applies in CLIENT_PROPERTIES.items():
        kind = "producer" if applies in ("*", "P") else "consumer"
        verdict = client_settings._librdkafka_verdict(kind, name, "x")
        if verdict is not None and verdict[0] == "unknown":
            unknown.append(name)
    assert unknown == []


# -- state.dir ---------------------------------------------------------------------------------


def test_missing_state_dir_is_created(tmp_path):
    root = tmp_path / "does" / "not" / "exist"
    state = StateDirectory(root, "app")
    assert state.path.is_dir() and state.path == root / "app"
    assert list(state.path.iterdir()) == []  # the write check leaves nothing behind


@pytest.mark.parametrize("below", [("file.txt",), ("file.txt", "state")])
def test_state_dir_that_is_or_is_under_a_file(tmp_path, below):
    (tmp_path / "file.txt").write_text("not a directory")
    root = tmp_path.joinpath(*below)
    with pytest.raises(StateDirectoryUnusable) as info:
        StateDirectory(root, "app")
    message = str(info.value)
    assert isinstance(info.value, ConfigException)
    assert f"state.dir {str(root)!r}" in message
    assert f"{tmp_path / 'file.txt'} is a file, not a directory" in message
    assert "set state.dir to a directory" in message


def test_state_dir_not_writable():
    """Root writes anywhere: as root, a forked child drops to user nobody first."""
    root = Path(tempfile.mkdtemp(prefix="ro-state-", dir="/tmp"))
    os.chmod(root, 0o555)
    try:
        if os.geteuid() != 0:
            outcome = _state_dir_outcome(root)
        else:
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: unprivileged, reports through the pipe
                try:
                    os.setgid(65534)
                    os.setuid(65534)
                    os.write(write, _state_dir_outcome(root).encode())
                finally:
                    os._exit(0)
            os.close(write)
            with os.fdopen(read) as pipe:
                outcome = pipe.read()
            os.waitpid(pid, 0)
        assert outcome.startswith("StateDirectoryUnusable"), outcome
        assert f"state.dir {str(root)!r}" in outcome
        assert "permission denied for user" in outcome
        assert "make it writable by that user" in outcome
    finally:
        os.chmod(root, 0o755)
        for child in root.iterdir():
            child.rmdir()
        root.rmdir()


def _state_dir_outcome(root: Path) -> str:
    try:
        StateDirectory(root, "app")
    except Exception as exc:
        return f"{type(exc).__name__} {exc}"
    return "created"


# -- bootstrap.servers -------------------------------------------------------------------------


def test_unreachable_bootstrap_servers_fail_within_the_bound():
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(ClusterUnreachableException) as info:
        check_bootstrap_servers({"bootstrap.servers": f"127.0.0.1:{port}"}, 1.0)
    assert time.monotonic() - started < 8
    message = str(info.value)
    assert "bootstrap.servers='127.0.0.1:" in message
    assert f"127.0.0.1:{port}: connection refused" in message
    assert "Check that the broker is running" in message and "bootstrap.timeout.ms" in message


def test_probe_tells_reachable_from_refused():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        open_port = server.getsockname()[1]
        refused = closed_port()
        results = probe_addresses([("127.0.0.1", open_port), ("127.0.0.1", refused)], 2.0)
    assert results[("127.0.0.1", open_port)] is None
    assert "connection refused" in results[("127.0.0.1", refused)]


def test_reachable_but_silent_broker_is_not_reported_unreachable(caplog):
    """A listener that accepts and never answers is a slow broker, not a wrong address:
    start-up goes on (with its usual timeouts) after a warning."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        with caplog.at_level(logging.WARNING, logger="streaming.runtime.bootstrap_probe"):
            check_bootstrap_servers({"bootstrap.servers": address}, 1.0)
    assert "accepts connections but has not answered" in caplog.text


# -- the command line --------------------------------------------------------------------------


def run_cli(tmp_path, *settings: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "cli_topology.py").write_text(
        "from streaming import StreamsBuilder\n"
        "def topology():\n"
        "    b = StreamsBuilder()\n"
        "    b.stream('in').to('out')\n"
        "    return b\n"
    )
    cmd = [sys.executable, "-m", "streaming", "run", "cli_topology:topology", "--quiet"]
    cmd += [arg for s in settings for arg in ("--set", s)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_cli_prints_a_misspelt_key_as_one_line(tmp_path):
    proc = run_cli(
        tmp_path,
        "application.id=cli",
        "bootstrap.servers=127.0.0.1:1",
        "processing.guarantees=exactly_once_v2",
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("configuration error: Unknown configuration")
    assert "did you mean 'processing.guarantee'?" in lines[0]


def test_cli_prints_an_unusable_state_dir_as_one_line(tmp_path):
    (tmp_path / "file.txt").write_text("")
    proc = run_cli(
        tmp_path,
        "application.id=cli",
        "bootstrap.servers=127.0.0.1:1",
        f"state.dir={tmp_path / 'file.txt' / 'state'}",
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "state.dir" in ln]
    assert line.startswith("configuration error: state.dir")
    assert "is a file, not a directory" in line


def test_cli_config_file_that_cannot_be_read(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "streaming", "run", "x:y", "--config", str(tmp_path / "no.yaml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "cannot read config file" in proc.stderr


def test_stream_thread_consumer_waits_briefly_for_fetches_unless_told_otherwise():
    # a fetch over partitions without data held each new assignment back for librdkafka's
    # fetch.wait.max.ms (500 ms); the prefetch queue's fetch.queue.backoff.ms (1 s) too
    def main_config(cfg):
        return cfg.clients().main_consumer(client_id="c", group_instance_id=None)

    defaults = main_config(build())
    assert (defaults["fetch.wait.max.ms"], defaults["fetch.queue.backoff.ms"]) == (100, 10)
    mine = main_config(
        build(**{"main.consumer.fetch.wait.max.ms": 400, "consumer.fetch.queue.backoff.ms": 20})
    )
    assert (mine["fetch.wait.max.ms"], mine["fetch.queue.backoff.ms"]) == (400, 20)


def test_stream_thread_consumer_heartbeats_every_half_second_unless_told_otherwise():
    # a member learns of a rebalance from its next heartbeat: with librdkafka's 3 s, a
    # client's second worker joining just after the first left the first holding every
    # partition for up to 3 s
    def main_config(cfg):
        return cfg.clients().main_consumer(client_id="c", group_instance_id=None)

    assert main_config(build())["heartbeat.interval.ms"] == 500
    mine = main_config(build(**{"main.consumer.heartbeat.interval.ms": 3000}))
    assert mine["heartbeat.interval.ms"] == 3000
    assert "heartbeat.interval.ms" not in build().restore_consumer  # only the group members
