"""``StreamsConfig``: Kafka Streams' configuration names, validated up front.

Keys use Kafka Streams' names (``application.id``, ``processing.guarantee``, ...). Values may
be strings (from a properties file) or Python objects. ``consumer.`` / ``producer.`` /
``admin.`` prefixed keys go, without the prefix, to that confluent-kafka client
(``main.consumer.`` / ``restore.consumer.`` / ``global.consumer.`` to one consumer only);
unprefixed client settings (``security.protocol``, ``sasl.username``, ``linger.ms``) go to
every client they apply to, as in Kafka Streams. A misconfiguration raises
``ConfigException`` naming the key and what to fix:

- an unknown key fails with the closest known one ("did you mean 'processing.guarantee'?");
  Kafka Streams settings this runtime does not implement (``rocksdb.config.setter``,
  ``metrics.*``, ...) are accepted with a debug log, so that a
  Java application's properties file works;
- settings of the application's own processors go under the ``app.`` prefix
  (``app.region``): they are not checked and reach processors as ``context.app_configs``;
- client settings are checked against the installed librdkafka (names and values), with the
  closest librdkafka name, and Java-only client settings (``max.poll.records``,
  ``key.deserializer``, ``sasl.jaas.config``) say what to use instead.

``KafkaStreams.start()`` then checks the environment: ``state.dir`` (see ``state_directory``)
and ``bootstrap.servers`` (``check_bootstrap_servers``, bounded by ``bootstrap.timeout.ms``).
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming import serdes as serdes_mod
from streaming.dsl.processors import quiet_close
from streaming.errors import ConfigException, StreamsException
from streaming.runtime.alignment import AlignmentSettings
from streaming.runtime.clients import ClientConfigs

log = logging.getLogger(__name__)

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"
_GUARANTEES = {
    AT_LEAST_ONCE: AT_LEAST_ONCE,
    EXACTLY_ONCE_V2: EXACTLY_ONCE_V2,
    "exactly_once_beta": EXACTLY_ONCE_V2,
}

APPLICATION_ID = "application.id"
BOOTSTRAP_SERVERS = "bootstrap.servers"
PROCESSING_GUARANTEE = "processing.guarantee"
COMMIT_INTERVAL_MS = "commit.interval.ms"
STATE_DIR = "state.dir"
NUM_STREAM_THREADS = "num.stream.threads"
#: ours: what runs num.stream.threads > 1: "processes" (default; CPython threads share one
#: core) or "threads" (one process, for processors with in-process side effects)
STREAM_WORKERS = "stream.workers"
STREAM_WORKER_KINDS = ("processes", "threads")
NUM_STANDBY_REPLICAS = "num.standby.replicas"
MAX_TASK_IDLE_MS = "max.task.idle.ms"
CACHE_MAX_BYTES = "statestore.cache.max.bytes"
CACHE_MAX_BYTES_BUFFERING = "cache.max.bytes.buffering"
APPLICATION_SERVER = "application.server"
DEFAULT_KEY_SERDE = "default.key.serde"
DEFAULT_VALUE_SERDE = "default.value.serde"
DEFAULT_TIMESTAMP_EXTRACTOR = "default.timestamp.extractor"
DESERIALIZATION_HANDLER = "default.deserialization.exception.handler"
DESERIALIZATION_HANDLER_NEW = "deserialization.exception.handler"
PROCESSING_HANDLER = "processing.exception.handler"
PRODUCTION_HANDLER = "default.production.exception.handler"
PRODUCTION_HANDLER_NEW = "production.exception.handler"
DEAD_LETTER_QUEUE_TOPIC = "errors.dead.letter.queue.topic.name"
REPLICATION_FACTOR = "replication.factor"
REPARTITION_PURGE_INTERVAL_MS = "repartition.purge.interval.ms"
BUFFERED_RECORDS_PER_PARTITION = "buffered.records.per.partition"
POLL_MS = "poll.ms"
WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS = "windowstore.changelog.additional.retention.ms"
CLIENT_ID = "client.id"
#: ours (Flink's watermark alignment): while the client's source partitions hold more than
#: ``...lag.records`` unprocessed records or the slowest is ``...lag.ms`` of event time behind
#: the wall clock, a source task more than ``...max.drift.ms`` of event time ahead of the
#: slowest partition waits; a partition with nothing queued stops holding the others after
#: ``...idle.ms`` (see runtime.alignment); a negative drift: off
EVENT_TIME_ALIGNMENT_MAX_DRIFT_MS = "event.time.alignment.max.drift.ms"
EVENT_TIME_ALIGNMENT_LAG_RECORDS = "event.time.alignment.lag.records"
EVENT_TIME_ALIGNMENT_LAG_MS = "event.time.alignment.lag.ms"
EVENT_TIME_ALIGNMENT_IDLE_MS = "event.time.alignment.idle.ms"
#: ours: windows close when the input goes quiet (see streaming.dsl.processors.quiet_close)
WINDOW_CLOSE_QUIET_MS = quiet_close.WINDOW_CLOSE_QUIET_MS
#: how long a stream thread retries a retriable failure without progress before failing
TASK_TIMEOUT_MS = "task.timeout.ms"
#: the wait between such retries (also passed to the clients, as in Kafka Streams)
RETRY_BACKOFF_MS = "retry.backoff.ms"
#: ours (not Kafka's): how long start() waits for an answer from bootstrap.servers before it
#: fails (only when none of them can be reached; a reachable but slow broker is waited on)
BOOTSTRAP_TIMEOUT_MS = "bootstrap.timeout.ms"
#: ours (not Kafka's): serve interactive queries over HTTP at application.server
QUERY_SERVER_ENABLED = "interactive.queries.http.enabled"
#: ours: the interface the query server listens on (default: 127.0.0.1 when application.server
#: names a loopback host such as localhost, else that host; "0.0.0.0" listens everywhere)
QUERY_SERVER_BIND = "interactive.queries.http.bind"
#: ours: requests need "Authorization: Bearer <token>" (forwarding passes it on)
QUERY_SERVER_AUTH_TOKEN = "interactive.queries.http.auth.token"
#: ours: serve https with this certificate chain / private key (PEM)
QUERY_SERVER_TLS_CERTFILE = "interactive.queries.http.tls.certfile"
QUERY_SERVER_TLS_KEYFILE = "interactive.queries.http.tls.keyfile"
#: ours: CA bundle to verify other instances when forwarding (default: the certfile + system)
QUERY_SERVER_TLS_CAFILE = "interactive.queries.http.tls.cafile"
#: ours: worker threads answering queries (store reads, forwarding)
QUERY_SERVER_WORKER_THREADS = "interactive.queries.http.worker.threads"
#: ours: open connections at most; over it the server answers 503 + Retry-After
QUERY_SERVER_MAX_CONNECTIONS = "interactive.queries.http.max.connections"
#: ours: an idle keep-alive connection is closed after this long
QUERY_SERVER_KEEPALIVE_TIMEOUT_MS = "interactive.queries.http.keepalive.timeout.ms"
#: ours: entries per page of /all and /range (default) and the largest ?limit= allowed
QUERY_SERVER_SCAN_DEFAULT_LIMIT = "interactive.queries.http.scan.default.limit"
QUERY_SERVER_SCAN_MAX_LIMIT = "interactive.queries.http.scan.max.limit"

KNOWN_KEYS = frozenset(
    {
        APPLICATION_ID,
        BOOTSTRAP_SERVERS,
        PROCESSING_GUARANTEE,
        COMMIT_INTERVAL_MS,
        STATE_DIR,
        NUM_STREAM_THREADS,
        STREAM_WORKERS,
        NUM_STANDBY_REPLICAS,
        MAX_TASK_IDLE_MS,
        CACHE_MAX_BYTES,
        CACHE_MAX_BYTES_BUFFERING,
        APPLICATION_SERVER,
        DEFAULT_KEY_SERDE,
        DEFAULT_VALUE_SERDE,
        DEFAULT_TIMESTAMP_EXTRACTOR,
        DESERIALIZATION_HANDLER,
        DESERIALIZATION_HANDLER_NEW,
        PROCESSING_HANDLER,
        PRODUCTION_HANDLER,
        PRODUCTION_HANDLER_NEW,
        DEAD_LETTER_QUEUE_TOPIC,
        REPLICATION_FACTOR,
        REPARTITION_PURGE_INTERVAL_MS,
        BUFFERED_RECORDS_PER_PARTITION,
        POLL_MS,
        WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS,
        EVENT_TIME_ALIGNMENT_MAX_DRIFT_MS,
        EVENT_TIME_ALIGNMENT_LAG_RECORDS,
        EVENT_TIME_ALIGNMENT_LAG_MS,
        EVENT_TIME_ALIGNMENT_IDLE_MS,
        WINDOW_CLOSE_QUIET_MS,
        CLIENT_ID,
        TASK_TIMEOUT_MS,
        RETRY_BACKOFF_MS,
        BOOTSTRAP_TIMEOUT_MS,
        QUERY_SERVER_ENABLED,
        QUERY_SERVER_BIND,
        QUERY_SERVER_AUTH_TOKEN,
        QUERY_SERVER_TLS_CERTFILE,
        QUERY_SERVER_TLS_KEYFILE,
        QUERY_SERVER_TLS_CAFILE,
        QUERY_SERVER_WORKER_THREADS,
        QUERY_SERVER_MAX_CONNECTIONS,
        QUERY_SERVER_KEEPALIVE_TIMEOUT_MS,
        QUERY_SERVER_SCAN_DEFAULT_LIMIT,
        QUERY_SERVER_SCAN_MAX_LIMIT,
        "topology.optimization",
        "upgrade.from",
        "metrics.recording.level",
    }
)

_APP_ID_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
_HOST_PORT_RE = re.compile(r"^[^:\s]+:\d{1,5}$")


def _int(config: Mapping[str, Any], key: str, default: int, minimum: int | None = None) -> int:
    raw = config.get(key, default)
    if raw is None:
        return default
    try:
        if isinstance(raw, bool):
            raise TypeError
        value = int(str(raw).strip()) if not isinstance(raw, int) else raw
    except (TypeError, ValueError):
        raise ConfigException(
            f"Invalid value {raw!r} for configuration {key}: expected an integer"
        ) from None
    if minimum is not None and value < minimum:
        raise ConfigException(
            f"Invalid value {value} for configuration {key}: must be at least {minimum}"
        )
    return value


def _serde(config: Mapping[str, Any], key: str) -> Any:
    raw = config.get(key)
    if raw is None:
        return serdes_mod.Json()
    try:
        return serdes_mod.from_config(raw)
    except ValueError as exc:
        raise ConfigException(f"Invalid value {raw!r} for configuration {key}: {exc}") from None


@dataclass(frozen=True)
class StreamsConfig:
    """The validated configuration of one ``KafkaStreams`` instance."""

    application_id: str
    bootstrap_servers: str
    processing_guarantee: str
    commit_interval_ms: int
    state_dir: Path
    num_stream_threads: int
    #: "processes" or "threads": what runs the stream threads when there are several
    stream_workers: str
    num_standby_replicas: int
    max_task_idle_ms: int
    cache_max_bytes: int
    application_server: str | None
    default_key_serde: Any
    default_value_serde: Any
    default_timestamp_extractor: Any
    deserialization_handler: Any
    processing_handler: Any
    production_handler: Any
    dead_letter_queue_topic: str | None
    replication_factor: int
    repartition_purge_interval_ms: int
    buffered_records_per_partition: int
    poll_ms: int
    window_changelog_additional_retention_ms: int
    client_id: str | None
    alignment: AlignmentSettings = field(default_factory=AlignmentSettings)
    #: quiet wall-clock ms after which windows close on the wall clock; -1: off
    window_close_quiet_ms: int = -1
    query_server_enabled: bool = True
    consumer: dict[str, Any] = field(default_factory=dict)
    producer: dict[str, Any] = field(default_factory=dict)
    admin: dict[str, Any] = field(default_factory=dict)
    originals: dict[str, Any] = field(default_factory=dict)
    #: the restore and global consumers' settings (``consumer.`` + ``restore.consumer.`` /
    #: ``global.consumer.`` and the unprefixed consumer settings)
    restore_consumer: dict[str, Any] = field(default_factory=dict)
    global_consumer: dict[str, Any] = field(default_factory=dict)
    task_timeout_ms: int = 300_000
    retry_backoff_ms: int = 100
    bootstrap_timeout_ms: int = 15_000

    @property
    def exactly_once(self) -> bool:
        """True under ``exactly_once_v2``."""
        return self.processing_guarantee == EXACTLY_ONCE_V2

    # -- the interactive-query HTTP server (read from the originals when it starts) ------

    def _query_text(self, key: str) -> str | None:
        raw = self.originals.get(key)
        text = None if raw is None else str(raw).strip()
        return text or None

    @property
    def query_server_bind(self) -> str | None:
        """``interactive.queries.http.bind``: the host to listen on (None: derived)."""
        return self._query_text(QUERY_SERVER_BIND)

    @property
    def query_server_auth_token(self) -> str | None:
        """``interactive.queries.http.auth.token`` (None: no authentication)."""
        return self._query_text(QUERY_SERVER_AUTH_TOKEN)

    @property
    def query_server_tls_certfile(self) -> str | None:
        return self._query_text(QUERY_SERVER_TLS_CERTFILE)

    @property
    def query_server_tls_keyfile(self) -> str | None:
        return self._query_text(QUERY_SERVER_TLS_KEYFILE)

    @property
    def query_server_tls_cafile(self) -> str | None:
        return self._query_text(QUERY_SERVER_TLS_CAFILE)

    @property
    def query_server_worker_threads(self) -> int:
        return _int(self.originals, QUERY_SERVER_WORKER_THREADS, 4, minimum=1)

    @property
    def query_server_max_connections(self) -> int:
        return _int(self.originals, QUERY_SERVER_MAX_CONNECTIONS, 1024, minimum=1)

    @property
    def query_server_keepalive_timeout_ms(self) -> int:
        return _int(self.originals, QUERY_SERVER_KEEPALIVE_TIMEOUT_MS, 15_000, minimum=1)

    @property
    def query_server_scan_default_limit(self) -> int:
        return _int(self.originals, QUERY_SERVER_SCAN_DEFAULT_LIMIT, 1000, minimum=1)

    @property
    def query_server_scan_max_limit(self) -> int:
        return _int(self.originals, QUERY_SERVER_SCAN_MAX_LIMIT, 10_000, minimum=1)

    @property
    def metadata_max_age_ms(self) -> int:
        """``metadata.max.age.ms``: how often pattern-subscribed sources look for new
        matching topics (Kafka's consumer default, 5 minutes)."""
        return _int(self.originals, "metadata.max.age.ms", 300_000, minimum=1)

    @staticmethod
    def from_mapping(config: Mapping[str, Any] | StreamsConfig) -> StreamsConfig:
        """Validate ``config`` (Kafka Streams names) and fill in Kafka's defaults."""
        if isinstance(config, StreamsConfig):
            return config
        if not isinstance(config, Mapping):
            raise ConfigException(
                f"config must be a dict of Kafka Streams settings, got {config!r}"
            )
        cfg = {str(k).strip(): v for k, v in config.items()}
        # unknown keys first: a misspelt required key is reported as a misspelling
        clients = _client_settings(cfg)
        app_id = cfg.get(APPLICATION_ID)
        if not app_id or not isinstance(app_id, str):
            raise ConfigException(
                f"Missing required configuration {APPLICATION_ID!r}: set it to a name for this "
                "application (it names the consumer group and the internal topics)"
            )
        if not _APP_ID_RE.match(app_id):
            raise ConfigException(
                f"Invalid value {app_id!r} for configuration {APPLICATION_ID}: use only "
                "letters, digits, '.', '_' and '-' (it is part of topic names)"
            )
        servers = cfg.get(BOOTSTRAP_SERVERS)
        if isinstance(servers, list | tuple):
            servers = ",".join(servers)
        if not servers or not isinstance(servers, str):
            raise ConfigException(
                f"Missing required configuration {BOOTSTRAP_SERVERS!r}: set it to the broker "
                "list, e.g. 'localhost:9092'"
            )
        _check_bootstrap_value(servers)
        guarantee = _guarantee(cfg.get(PROCESSING_GUARANTEE, AT_LEAST_ONCE))
        eos = guarantee == EXACTLY_ONCE_V2
        commit_ms = _int(cfg, COMMIT_INTERVAL_MS, 100 if eos else 30_000, minimum=0)
        state_dir = Path(
            cfg.get(STATE_DIR) or os.path.join(tempfile.gettempdir(), "kafka-streams")
        ).expanduser()
        if CACHE_MAX_BYTES in cfg:
            cache_bytes = _int(cfg, CACHE_MAX_BYTES, 10 * 1024 * 1024, minimum=0)
        elif CACHE_MAX_BYTES_BUFFERING in cfg:
            log.warning("%s is deprecated; use %s", CACHE_MAX_BYTES_BUFFERING, CACHE_MAX_BYTES)
            cache_bytes = _int(cfg, CACHE_MAX_BYTES_BUFFERING, 10 * 1024 * 1024, minimum=0)
        else:
            cache_bytes = 10 * 1024 * 1024
        server = cfg.get(APPLICATION_SERVER) or None
        if server is not None and not _HOST_PORT_RE.match(str(server)):
            raise ConfigException(
                f"Invalid value {server!r} for configuration {APPLICATION_SERVER}: use "
                "'host:port' (the address interactive queries reach this instance at)"
            )
        from streaming.runtime import errors

        handlers = {}
        for name, keys, kind in (
            ("deserialization", (DESERIALIZATION_HANDLER_NEW, DESERIALIZATION_HANDLER), "fail"),
            ("processing", (PROCESSING_HANDLER,), "fail"),
            ("production", (PRODUCTION_HANDLER_NEW, PRODUCTION_HANDLER), "fail"),
        ):
            key = next((k for k in keys if cfg.get(k) is not None), keys[0])
            try:
                handlers[name] = errors.handler_from_config(cfg.get(key, kind))
            except ValueError as exc:
                raise ConfigException(
                    f"Invalid value {cfg.get(key)!r} for configuration {key}: {exc}"
                ) from None
        extractor = cfg.get(DEFAULT_TIMESTAMP_EXTRACTOR)
        if extractor is not None:
            from streaming.time import as_extractor

            try:
                extractor = as_extractor(extractor)
            except (TypeError, ValueError) as exc:
                raise ConfigException(
                    f"Invalid value {extractor!r} for configuration "
                    f"{DEFAULT_TIMESTAMP_EXTRACTOR}: {exc}"
                ) from None
        threads = _int(cfg, NUM_STREAM_THREADS, 1, minimum=1)
        workers = str(cfg.get(STREAM_WORKERS, "processes")).lower()
        if workers not in STREAM_WORKER_KINDS:
            raise ConfigException(
                f"Invalid value {cfg.get(STREAM_WORKERS)!r} for configuration {STREAM_WORKERS}: "
                f"use one of {', '.join(STREAM_WORKER_KINDS)}"
            )
        standbys = _int(cfg, NUM_STANDBY_REPLICAS, 0, minimum=0)
        _check_managed_values(cfg, clients, guarantee)
        return StreamsConfig(
            application_id=app_id,
            bootstrap_servers=servers,
            processing_guarantee=guarantee,
            commit_interval_ms=commit_ms,
            state_dir=state_dir,
            num_stream_threads=threads,
            stream_workers=workers,
            num_standby_replicas=standbys,
            max_task_idle_ms=_int(cfg, MAX_TASK_IDLE_MS, 0, minimum=-1),
            cache_max_bytes=cache_bytes,
            application_server=None if server is None else str(server),
            query_server_enabled=str(cfg.get(QUERY_SERVER_ENABLED, "true")).lower()
            not in ("false", "0", "no"),
            default_key_serde=_serde(cfg, DEFAULT_KEY_SERDE),
            default_value_serde=_serde(cfg, DEFAULT_VALUE_SERDE),
            default_timestamp_extractor=extractor,
            deserialization_handler=handlers["deserialization"],
            processing_handler=handlers["processing"],
            production_handler=handlers["production"],
            dead_letter_queue_topic=cfg.get(DEAD_LETTER_QUEUE_TOPIC) or None,
            replication_factor=_int(cfg, REPLICATION_FACTOR, -1, minimum=-1),
            repartition_purge_interval_ms=_int(
                cfg, REPARTITION_PURGE_INTERVAL_MS, 30_000, minimum=0
            ),
            # Kafka's default is 1000; pausing a librdkafka partition drops what it prefetched
            # (it fetches again on resume), so a higher bound pauses far less often
            buffered_records_per_partition=_int(
                cfg, BUFFERED_RECORDS_PER_PARTITION, 10_000, minimum=1
            ),
            poll_ms=_int(cfg, POLL_MS, 100, minimum=0),
            window_changelog_additional_retention_ms=_int(
                cfg, WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS, 86_400_000, minimum=0
            ),
            client_id=cfg.get(CLIENT_ID) or None,
            window_close_quiet_ms=_int(cfg, WINDOW_CLOSE_QUIET_MS, -1, minimum=-1),
            alignment=AlignmentSettings(
                max_drift_ms=_int(cfg, EVENT_TIME_ALIGNMENT_MAX_DRIFT_MS, 10_000, minimum=-1),
                lag_records=_int(cfg, EVENT_TIME_ALIGNMENT_LAG_RECORDS, 1_000, minimum=0),
                lag_ms=_int(cfg, EVENT_TIME_ALIGNMENT_LAG_MS, 60_000, minimum=0),
                idle_ms=_int(cfg, EVENT_TIME_ALIGNMENT_IDLE_MS, 10_000, minimum=0),
            ),
            consumer=_plain(clients["consumer"]),
            producer=_plain(clients["producer"]),
            admin=_plain(clients["admin"]),
            originals=cfg,
            restore_consumer=_plain(clients["restore.consumer"]),
            global_consumer=_plain(clients["global.consumer"]),
            task_timeout_ms=_int(cfg, TASK_TIMEOUT_MS, 300_000, minimum=0),
            retry_backoff_ms=_int(cfg, RETRY_BACKOFF_MS, 100, minimum=0),
            bootstrap_timeout_ms=_int(cfg, BOOTSTRAP_TIMEOUT_MS, 15_000, minimum=1),
        )

    @property
    def worker_processes(self) -> bool:
        """Whether the stream threads run as worker processes (several, and not "threads")."""
        return self.num_stream_threads > 1 and self.stream_workers == "processes"

    def app_configs(self) -> dict[str, Any]:
        """The dict processors and stores see as ``context.app_configs``."""
        out = dict(self.originals)
        out[DEFAULT_KEY_SERDE] = self.default_key_serde
        out[DEFAULT_VALUE_SERDE] = self.default_value_serde
        out[CACHE_MAX_BYTES] = self.cache_max_bytes
        out[PROCESSING_GUARANTEE] = self.processing_guarantee
        out[COMMIT_INTERVAL_MS] = self.commit_interval_ms
        out[WINDOW_CLOSE_QUIET_MS] = self.window_close_quiet_ms
        if self.default_timestamp_extractor is not None:
            out[DEFAULT_TIMESTAMP_EXTRACTOR] = self.default_timestamp_extractor
        return out

    def clients(self, logger: Any = None) -> ClientConfigs:
        """The settings of each Kafka client this instance creates (``logger`` receives
        librdkafka's log lines)."""
        return ClientConfigs(self, logger)


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``.properties``, ``.yaml``/``.yml`` or ``.json`` config file into a flat dict."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigException(
            f"cannot read config file {str(p)!r}: {exc.strerror or exc}"
        ) from None
    suffix = p.suffix.lower()
    if suffix == ".json":
        import json

        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigException(f"{p}: not valid JSON: {exc}") from None
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigException(f"reading {p} needs PyYAML: pip install pyyaml") from exc
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigException(f"{p}: not valid YAML: {' '.join(str(exc).split())}") from None
    else:
        # java.util.Properties' format: continuation lines, escapes, ``key value`` lines
        import javaproperties

        try:
            data = javaproperties.loads(text)
        except ValueError as exc:
            raise ConfigException(f"{p}: not a valid properties file: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigException(f"{p}: expected a mapping of settings at the top level")
    return _flatten(data)


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


# -- which keys are accepted ------------------------------------------------------------------

#: settings of the application's own processors (``context.app_configs``), never validated:
#: ``app.region`` or ``app.my-service.url``
APP_CONFIG_PREFIX = "app."
#: Kafka's internal configs (``StreamsConfig.InternalConfig``: ``__name__``)
INTERNAL_CONFIG_PREFIX = "__"

#: Kafka Streams settings that a Java application's properties carry and that this runtime
#: accepts but does not implement (a debug log names them). Those that are also client
#: settings (``retries``, ``request.timeout.ms``, ...) still reach the clients, as in Java.
NOT_IMPLEMENTED_KEYS = frozenset(
    {
        "acceptable.recovery.lag",
        "auto.include.jmx.reporter",
        "built.in.metrics.version",
        "connections.max.idle.ms",
        "default.client.supplier",
        "default.dsl.store",
        "default.list.key.serde.inner",
        "default.list.key.serde.type",
        "default.list.value.serde.inner",
        "default.list.value.serde.type",
        "default.windowed.key.serde.inner",
        "default.windowed.value.serde.inner",
        "dsl.store.suppliers.class",
        "enable.metrics.push",
        "ensure.explicit.internal.resource.naming",
        "group.protocol",
        "log.summary.interval.ms",
        "max.warmup.replicas",
        "metadata.recovery.strategy",
        "metadata.recovery.rebootstrap.trigger.ms",
        "metric.reporters",
        "probing.rebalance.interval.ms",
        "processor.wrapper.class",
        "receive.buffer.bytes",
        "reconnect.backoff.max.ms",
        "reconnect.backoff.ms",
        "request.timeout.ms",
        "retries",
        "rocksdb.config.setter",
        "send.buffer.bytes",
        "state.cleanup.delay.ms",
        "task.assignor.class",
        "window.size.ms",
        "windowed.inner.class.serde",
    }
)
#: prefixes of such settings: metrics, rack-aware assignment, client tags, internal topics
NOT_IMPLEMENTED_PREFIXES = ("metrics.", "rack.aware.assignment.", "client.tag.", "topic.")

#: the prefixes of client settings and the clients they reach (as in Kafka Streams:
#: ``consumer.`` reaches every consumer, ``main.consumer.`` only the stream threads' one)
CLIENT_PREFIXES: dict[str, tuple[str, ...]] = {
    "main.consumer.": ("consumer",),
    "restore.consumer.": ("restore.consumer",),
    "global.consumer.": ("global.consumer",),
    "consumer.": ("consumer", "restore.consumer", "global.consumer"),
    "producer.": ("producer",),
    "admin.": ("admin",),
}
_CLIENTS = ("consumer", "restore.consumer", "global.consumer", "producer", "admin")
#: client settings that KafkaStreams sets itself, with why
_MANAGED = {
    "group.id": (
        ("consumer", "restore.consumer", "global.consumer"),
        f"the consumer group is the {APPLICATION_ID}",
    ),
    "enable.auto.commit": (
        ("consumer", "restore.consumer", "global.consumer"),
        f"commits follow {COMMIT_INTERVAL_MS}",
    ),
    "partition.assignment.strategy": (
        ("consumer",),
        "the range assignor keeps co-partitioned topics together",
    ),
    "client.id": (
        ("consumer",),
        f"it is derived from the unprefixed {CLIENT_ID}, which interactive queries rely on; "
        f"set {CLIENT_ID} instead",
    ),
    "transactional.id": (("producer",), f"it follows {PROCESSING_GUARANTEE}"),
}
#: the consumers' settings that only the stream threads' consumer gets
_MAIN_CONSUMER_ONLY = frozenset({"group.instance.id"})

# librdkafka's configuration properties (``rd_kafka_conf_properties_show()`` of librdkafka
# 2.16.0) by the clients they apply to: "*" all, "C" consumers, "P" producers. The installed
# librdkafka decides what is valid (a throwaway client is configured with the setting, see
# ``_librdkafka_verdict``); this table only decides where a setting goes and what to suggest.
_LIBRDKAFKA_COMMON = """
allow.auto.create.topics api.version.fallback.ms api.version.request
api.version.request.timeout.ms background_event_cb bootstrap.servers broker.address.family
broker.address.ttl broker.version.fallback builtin.features client.dns.lookup client.id
client.rack closesocket_cb connect_cb connections.max.idle.ms debug default_topic_conf
enable.metrics.push enable.random.seed enable.sasl.oauthbearer.unsecure.jwt
enable.ssl.certificate.verification enabled_events error_cb https.ca.location https.ca.pem
interceptors internal.termination.signal log.connection.close log.queue log.thread.name
log_cb log_level max.in.flight max.in.flight.requests.per.connection message.copy.max.bytes
message.max.bytes metadata.broker.list metadata.max.age.ms
metadata.recovery.rebootstrap.trigger.ms metadata.recovery.strategy oauthbearer_token_refresh_cb
opaque open_cb plugin.library.paths receive.message.max.bytes reconnect.backoff.jitter.ms
reconnect.backoff.max.ms reconnect.backoff.ms resolve_cb retry.backoff.max.ms retry.backoff.ms
sasl.kerberos.keytab sasl.kerberos.kinit.cmd sasl.kerberos.min.time.before.relogin
sasl.kerberos.principal sasl.kerberos.service.name sasl.mechanism sasl.mechanisms
sasl.oauthbearer.assertion.algorithm sasl.oauthbearer.assertion.claim.aud
sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss
sasl.oauthbearer.assertion.claim.jti.include sasl.oauthbearer.assertion.claim.nbf.seconds
sasl.oauthbearer.assertion.claim.sub sasl.oauthbearer.assertion.file
sasl.oauthbearer.assertion.jwt.template.file sasl.oauthbearer.assertion.private.key.file
sasl.oauthbearer.assertion.private.key.passphrase sasl.oauthbearer.assertion.private.key.pem
sasl.oauthbearer.client.credentials.client.id
sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.client.id
sasl.oauthbearer.client.secret sasl.oauthbearer.config sasl.oauthbearer.extensions
sasl.oauthbearer.grant.type sasl.oauthbearer.metadata.authentication.type
sasl.oauthbearer.method sasl.oauthbearer.scope sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url sasl.password sasl.username security.protocol
socket.blocking.max.ms socket.connection.setup.timeout.ms socket.keepalive.enable
socket.max.fails socket.nagle.disable socket.receive.buffer.bytes socket.send.buffer.bytes
socket.timeout.ms socket_cb ssl.ca.certificate.stores ssl.ca.location ssl.ca.pem
ssl.certificate.location ssl.certificate.pem ssl.certificate.verify_cb ssl.cipher.suites
ssl.crl.location ssl.curves.list ssl.endpoint.identification.algorithm ssl.engine.id
ssl.engine.location ssl.key.location ssl.key.password ssl.key.pem ssl.keystore.location
ssl.keystore.password ssl.providers ssl.sigalgs.list ssl_ca ssl_certificate
ssl_engine_callback_data ssl_key statistics.interval.ms topic.blacklist
topic.metadata.propagation.max.ms topic.metadata.refresh.fast.cnt
topic.metadata.refresh.fast.interval.ms topic.metadata.refresh.interval.ms
topic.metadata.refresh.sparse
"""
_LIBRDKAFKA_CONSUMER = """
auto.commit.enable auto.commit.interval.ms auto.offset.reset check.crcs
consume.callback.max.messages consume_cb coordinator.query.interval.ms enable.auto.commit
enable.auto.offset.store enable.partition.eof fetch.error.backoff.ms fetch.max.bytes
fetch.message.max.bytes fetch.min.bytes fetch.queue.backoff.ms fetch.wait.max.ms group.id
group.instance.id group.protocol group.protocol.type group.remote.assignor
heartbeat.interval.ms isolation.level max.partition.fetch.bytes max.poll.interval.ms
max.poll.records offset.store.method offset.store.path offset.store.sync.interval.ms
offset_commit_cb partition.assignment.strategy queued.max.messages.kbytes queued.min.messages
rebalance_cb session.timeout.ms share.acknowledgement.mode
"""
_LIBRDKAFKA_PRODUCER = """
acks batch.num.messages batch.size compression.codec compression.level compression.type
delivery.report.only.error delivery.timeout.ms dr_cb dr_msg_cb enable.gapless.guarantee
enable.idempotence linger.ms message.send.max.retries message.timeout.ms msg_order_cmp
partitioner partitioner_cb produce.offset.report queue.buffering.backpressure.threshold
queue.buffering.max.kbytes queue.buffering.max.messages queue.buffering.max.ms queuing.strategy
request.required.acks request.timeout.ms retries sticky.partitioning.linger.ms
transaction.timeout.ms transactional.id
"""
#: name -> "*" / "C" / "P", with confluent-kafka's own (Python) settings
CLIENT_PROPERTIES: dict[str, str] = {
    **dict.fromkeys(_LIBRDKAFKA_COMMON.split(), "*"),
    **dict.fromkeys(_LIBRDKAFKA_CONSUMER.split(), "C"),
    **dict.fromkeys(_LIBRDKAFKA_PRODUCER.split(), "P"),
    **dict.fromkeys(("error_cb", "throttle_cb", "stats_cb", "oauth_cb", "logger"), "*"),
    "on_commit": "C",
    "on_delivery": "P",
}
_APPLIES = {
    "*": frozenset(_CLIENTS),
    "C": frozenset({"consumer", "restore.consumer", "global.consumer"}),
    "P": frozenset({"producer", "admin"}),  # the admin client is a producer handle
}

#: where an unprefixed client setting goes
_FORWARD = {"*": _APPLIES["*"], "C": _APPLIES["C"], "P": frozenset({"producer"})}

_SERDE_HINT = (
    "records are read and written as bytes: set default.key.serde / default.value.serde, "
    "or serdes in the topology; remove it"
)
#: Java client settings that users copy and librdkafka lacks (or does not use): what to do
#: instead ("{p}" is the prefix the setting was given with)
JAVA_CLIENT_KEYS: dict[str, str] = {
    "key.deserializer": _SERDE_HINT,
    "value.deserializer": _SERDE_HINT,
    "key.serializer": _SERDE_HINT,
    "value.serializer": _SERDE_HINT,
    "max.poll.records": (
        "librdkafka's classic consumer has no such limit (it uses max.poll.records only for "
        "share groups); a stream thread's batches follow buffered.records.per.partition and "
        "poll.ms: remove it"
    ),
    "fetch.max.wait.ms": "use '{p}fetch.wait.max.ms'",
    "buffer.memory": "use '{p}queue.buffering.max.kbytes' (in kilobytes)",
    "max.block.ms": "remove it (librdkafka's produce() does not block)",
    "max.request.size": "use '{p}message.max.bytes'",
    "receive.buffer.bytes": "use '{p}socket.receive.buffer.bytes'",
    "send.buffer.bytes": "use '{p}socket.send.buffer.bytes'",
    "default.api.timeout.ms": "remove it (confluent-kafka takes a timeout per call)",
    "interceptor.classes": "Java interceptors cannot run here: remove it",
    "partitioner.class": "remove it: KafkaStreams partitions like Java's default (murmur2)",
    "exclude.internal.topics": "remove it",
    "ssl.truststore.location": "use '{p}ssl.ca.location' (a PEM file of CA certificates)",
    "ssl.truststore.password": "use '{p}ssl.ca.location' (PEM, no password)",
    "ssl.truststore.type": "use '{p}ssl.ca.location' (PEM)",
    "ssl.truststore.certificates": "use '{p}ssl.ca.pem'",
    "ssl.keystore.type": (
        "'{p}ssl.keystore.location' takes a PKCS#12 file; or use '{p}ssl.certificate.location'"
        " and '{p}ssl.key.location' (PEM)"
    ),
    "ssl.keystore.certificate.chain": "use '{p}ssl.certificate.pem'",
    "ssl.keystore.key": "use '{p}ssl.key.pem'",
    "ssl.protocol": "remove it (librdkafka negotiates the TLS version)",
    "ssl.enabled.protocols": "remove it (librdkafka negotiates the TLS version)",
    "ssl.keymanager.algorithm": "remove it",
    "ssl.trustmanager.algorithm": "remove it",
    "ssl.secure.random.implementation": "remove it",
    "security.providers": "remove it",
    "sasl.jaas.config": (
        "use '{p}sasl.username' and '{p}sasl.password' (PLAIN, SCRAM) or "
        "'{p}sasl.oauthbearer.*' (OAUTHBEARER)"
    ),
    "sasl.login.callback.handler.class": "use '{p}sasl.oauthbearer.method=oidc' or oauth_cb",
    "sasl.client.callback.handler.class": "use '{p}sasl.oauthbearer.method=oidc' or oauth_cb",
    "metric.reporters": "use '{p}statistics.interval.ms' with stats_cb for client metrics",
    "metrics.num.samples": "remove it",
    "metrics.sample.window.ms": "remove it",
    "metrics.recording.level": "remove it",
    "auto.include.jmx.reporter": "remove it",
}
#: Java names that librdkafka also has but does not use as Java does
_JAVA_OVER_LIBRDKAFKA = frozenset({"max.poll.records"})


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", ".").replace("-", ".")


def _closest(name: str, candidates: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The candidate ``name`` most likely misspells (``processing_guarantee``,
    ``processing.guarantees`` -> ``processing.guarantee``), or None."""
    pool = list(candidates)
    by_norm = {_norm(c): c for c in pool}
    if _norm(name) in by_norm:
        return by_norm[_norm(name)]
    match = difflib.get_close_matches(_norm(name), list(by_norm), n=1, cutoff=cutoff)
    return by_norm[match[0]] if match else None


_SENTINEL = "zz.streams.config.validation.sentinel"


def _librdkafka_verdict(kind: str, name: str, value: Any) -> tuple[str, str] | None:
    """What the installed confluent-kafka says of ``name=value`` on a ``kind`` client: None
    (valid), ("unknown", message), ("invalid", message) or ("skipped", why).

    It configures a throwaway client with the setting followed by a sentinel setting that
    does not exist: the client fails on the first bad setting, so it never starts (no
    thread, no connection) and the error names either the setting or the sentinel."""
    try:
        from confluent_kafka import Consumer, KafkaException, Producer
        from confluent_kafka.admin import AdminClient
    except ImportError as exc:  # pragma: no cover - confluent-kafka is a dependency
        return ("skipped", str(exc))
    conf: dict[str, Any] = {name: value, _SENTINEL: "1"}
    factory: Any = Producer
    if kind in ("consumer", "restore.consumer", "global.consumer"):
        factory = Consumer
        conf = {"group.id": "config-validation", **conf}
    elif kind == "admin":
        factory = AdminClient
    try:
        client = factory(conf)
    except KafkaException as exc:
        err: Any = exc.args[0] if exc.args else None
        message = err.str() if hasattr(err, "str") else str(exc)
    except (TypeError, ValueError) as exc:
        return ("invalid", str(exc))
    else:  # pragma: no cover - the sentinel is never accepted
        with contextlib.suppress(Exception):
            client.close()
        return None
    if _SENTINEL in message:
        return None
    if "No such configuration property" in message:
        return ("unknown", message)
    return ("invalid", message)


def _describe(kind: str) -> str:
    return {"restore.consumer": "restore consumer", "global.consumer": "global consumer"}.get(
        kind, kind
    )


def _client_key_problem(source: str, prefix: str, name: str, value: Any) -> str | None:
    """Why ``source`` (``prefix`` + librdkafka ``name``) cannot be used, or None."""
    kinds = CLIENT_PREFIXES[prefix]
    if name in JAVA_CLIENT_KEYS and (
        name not in CLIENT_PROPERTIES or name in _JAVA_OVER_LIBRDKAFKA
    ):
        hint = JAVA_CLIENT_KEYS[name].format(p=prefix)
        return (
            f"{source!r} is a Java client setting that confluent-kafka (librdkafka) does not "
            f"have: {hint}"
        )
    applies = CLIENT_PROPERTIES.get(name)
    if applies is not None and not set(kinds) & _APPLIES[applies]:
        other = "consumer." if applies == "C" else "producer."
        return (
            f"{source!r} is a {'consumer' if applies == 'C' else 'producer'} setting that "
            f"librdkafka ignores on the {_describe(kinds[0])}: did you mean '{other}{name}'?"
        )
    verdict = _librdkafka_verdict(kinds[0], name, value)
    if verdict is None or (verdict[0] == "skipped" and applies is not None):
        return None
    if verdict[0] == "invalid":
        return f"Invalid value {value!r} for configuration {source}: {verdict[1]}"
    pool = [n for n, a in CLIENT_PROPERTIES.items() if set(kinds) & _APPLIES[a]]
    guess = _closest(name, pool)
    return (
        f"Unknown configuration {source!r}: librdkafka has no {_describe(kinds[0])} setting "
        f"{name!r}" + (f"; did you mean '{prefix}{guess}'?" if guess else "")
    )


def _unknown_key_message(key: str) -> str:
    guess = None
    head, sep, rest = key.partition(".")
    prefix = _closest(head + sep, CLIENT_PREFIXES, cutoff=0.8) if sep else None
    if prefix is not None:  # "consumers.session.timeout.ms"
        name = rest if rest in CLIENT_PROPERTIES else _closest(rest, CLIENT_PROPERTIES)
        guess = f"{prefix}{name}" if name else None
    if guess is None:
        guess = _closest(key, [*KNOWN_KEYS, *NOT_IMPLEMENTED_KEYS, *CLIENT_PROPERTIES])
    if guess:
        return (
            f"Unknown configuration {key!r}: did you mean {guess!r}? (or, if it is a setting "
            f"of your own processors, name it '{APP_CONFIG_PREFIX}{key}')"
        )
    return (
        f"Unknown configuration {key!r}: it is neither a Kafka Streams nor a client setting; "
        f"settings of your own processors go under the {APP_CONFIG_PREFIX!r} prefix "
        f"('{APP_CONFIG_PREFIX}{key}'), client settings under 'consumer.' / 'producer.' / "
        "'admin.'"
    )


def _client_settings(cfg: Mapping[str, Any]) -> dict[str, dict[str, tuple[str, Any]]]:
    """Check every key of ``cfg``; the settings of each client: name -> (key given, value).

    Unknown keys (with the closest known one), Java-only client settings, settings of the
    wrong client and values librdkafka rejects raise one ``ConfigException`` naming them all.
    Unprefixed client settings (``security.protocol``, ``sasl.username``, ``linger.ms``)
    reach every client they apply to, as in Kafka Streams; prefixed ones override them."""
    problems: list[str] = []
    not_implemented: list[str] = []
    streams_keys = KNOWN_KEYS | NOT_IMPLEMENTED_KEYS
    common: dict[str, dict[str, tuple[str, Any]]] = {c: {} for c in _CLIENTS}
    prefixed: list[tuple[str, str, str, Any]] = []
    for key, value in cfg.items():
        if key.startswith((APP_CONFIG_PREFIX, INTERNAL_CONFIG_PREFIX)):
            continue
        prefix = next((p for p in CLIENT_PREFIXES if key.startswith(p)), None)
        if prefix is not None:
            name = key[len(prefix) :]
            managed = _MANAGED.get(name)
            if managed and set(managed[0]) & set(CLIENT_PREFIXES[prefix]):
                prefixed.append((prefix, name, key, value))  # reported below
                continue
            problem = _client_key_problem(key, prefix, name, value)
            if problem:
                problems.append(problem)
            else:
                prefixed.append((prefix, name, key, value))
            continue
        if key in (APPLICATION_ID, BOOTSTRAP_SERVERS, CLIENT_ID, "group.protocol"):
            continue  # Kafka Streams' own meaning: never passed on as given
        applies = CLIENT_PROPERTIES.get(key)
        java_only = key in JAVA_CLIENT_KEYS and (applies is None or key in _JAVA_OVER_LIBRDKAFKA)
        if java_only:
            applies = None
        elif applies is None and key not in streams_keys:
            verdict = _librdkafka_verdict("producer", key, value)
            if verdict is None or verdict[0] == "invalid":
                applies = "*"  # a newer librdkafka's setting
        if applies is not None:
            kinds = sorted(_FORWARD[applies])
            verdict = _librdkafka_verdict(
                "producer" if "producer" in kinds else "consumer", key, value
            )
            if verdict is not None and verdict[0] != "skipped":
                if key in streams_keys:  # Kafka Streams' own value range may differ
                    log.warning(
                        "%s=%r is not passed to the Kafka clients: %s", key, value, verdict[1]
                    )
                    continue
                problems.append(f"Invalid value {value!r} for configuration {key}: {verdict[1]}")
                continue
            for kind in kinds:
                common[kind][key] = (key, value)
            continue
        if key in KNOWN_KEYS:
            continue
        if key in NOT_IMPLEMENTED_KEYS or key.startswith(NOT_IMPLEMENTED_PREFIXES):
            not_implemented.append(key)
            continue
        if java_only:
            problems.append(
                f"{key!r} is a Java client setting that confluent-kafka (librdkafka) does not "
                f"have: {JAVA_CLIENT_KEYS[key].format(p='')}"
            )
            continue
        problems.append(_unknown_key_message(key))
    if not_implemented:
        log.debug(
            "Kafka Streams settings accepted but not used by this runtime: %s", not_implemented
        )
    out = {kind: dict(common[kind]) for kind in _CLIENTS}
    for kind in ("restore.consumer", "global.consumer"):
        for name in _MAIN_CONSUMER_ONLY:
            out[kind].pop(name, None)
    # "consumer." first, so that "main.consumer." / "restore.consumer." ... override it
    for prefix, name, key, value in sorted(prefixed, key=lambda p: p[0] != "consumer."):
        for kind in CLIENT_PREFIXES[prefix]:
            if prefix == "consumer." and kind != "consumer" and name in _MAIN_CONSUMER_ONLY:
                continue
            out[kind][name] = (key, value)
    for name, (managed_kinds, why) in _MANAGED.items():
        for kind in managed_kinds:
            if name in out[kind]:
                given = out[kind][name][0]
                problems.append(f"{given} cannot be set: KafkaStreams manages it ({why})")
    if problems:
        unique = list(dict.fromkeys(problems))
        if len(unique) == 1:
            raise ConfigException(unique[0])
        raise ConfigException(f"{len(unique)} configuration problems: " + "; ".join(unique))
    return out


def _plain(settings: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    return {name: value for name, (_key, value) in settings.items()}


def _guarantee(raw: Any) -> str:
    """``processing.guarantee``, or a ``ConfigException`` listing the valid values."""
    text = str(raw).strip()
    guarantee = _GUARANTEES.get(text.lower())
    if guarantee is not None:
        return guarantee
    valid = f"{AT_LEAST_ONCE!r} or {EXACTLY_ONCE_V2!r}"
    if text.lower() == "exactly_once":
        hint = f"exactly_once (v1) was removed in Kafka 4.0: use {EXACTLY_ONCE_V2!r}"
    else:
        guess = _closest(text, [AT_LEAST_ONCE, EXACTLY_ONCE_V2], cutoff=0.6)
        hint = f"did you mean {guess!r}? " if guess else ""
        hint += f"valid values are {valid}"
    raise ConfigException(
        f"Invalid value {text!r} for configuration {PROCESSING_GUARANTEE}: {hint}"
    )


def _check_bootstrap_value(servers: str) -> None:
    for entry in servers.split(","):
        item = entry.strip()
        host_port = item.split("://", 1)[-1]
        port = host_port.rpartition("]")[2] if host_port.startswith("[") else host_port
        port = port.rpartition(":")[2] if ":" in port else ""
        if not host_port or (port and not (port.isdigit() and 0 < int(port) < 65536)):
            raise ConfigException(
                f"Invalid value {servers!r} for configuration {BOOTSTRAP_SERVERS}: {item!r} is "
                "not host:port; use a comma-separated list such as 'broker1:9092,broker2:9092'"
            )


def _check_managed_values(
    cfg: Mapping[str, Any], clients: Mapping[str, Mapping[str, tuple[str, Any]]], guarantee: str
) -> None:
    """Client settings that would silently break what KafkaStreams promises."""
    protocol = str(cfg.get("group.protocol") or "classic").strip().lower()
    if protocol != "classic":
        raise ConfigException(
            f"Invalid value {protocol!r} for configuration group.protocol: this runtime uses "
            "the classic consumer group protocol; remove it or set it to 'classic'"
        )
    if guarantee != EXACTLY_ONCE_V2:
        return
    for kind in ("consumer", "restore.consumer", "global.consumer"):
        key, value = clients[kind].get("isolation.level", (None, "read_committed"))
        if str(value).strip().lower() != "read_committed":
            raise ConfigException(
                f"{key}={value!r} cannot be used with {PROCESSING_GUARANTEE}={EXACTLY_ONCE_V2}: "
                "exactly-once reads only committed records; remove it"
            )
    key, value = clients["producer"].get("enable.idempotence", (None, True))
    if str(value).strip().lower() in ("false", "0", "no"):
        raise ConfigException(
            f"{key}={value!r} cannot be used with {PROCESSING_GUARANTEE}={EXACTLY_ONCE_V2}: "
            "transactions need the idempotent producer; remove it"
        )


# -- start-up checks --------------------------------------------------------------------------


class ClusterUnreachableException(StreamsException):
    """No broker of ``bootstrap.servers`` can be reached: the message names the addresses,
    what went wrong with each and what to check."""


def bootstrap_addresses(servers: str) -> list[tuple[str, int]]:
    """(host, port) of each ``bootstrap.servers`` entry (librdkafka's default port 9092)."""
    out = []
    for raw in servers.split(","):
        item = raw.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        if not item:
            continue
        if item.startswith("["):  # [ipv6]:port
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        else:
            host, sep, port = item.rpartition(":")
            if not sep:
                host, port = item, ""
        out.append((host, int(port) if port.isdigit() else 9092))
    return out


def _connect_problem(host: str, port: int, timeout: float) -> str | None:
    """Why a TCP connection to host:port fails (None: it connects)."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as exc:
        return f"cannot resolve host {host!r} ({exc.strerror or exc})"
    except ConnectionRefusedError:
        return "connection refused (nothing listens on that port)"
    except TimeoutError:
        return f"no answer within {timeout:g} s (host down, wrong address or a firewall)"
    except OSError as exc:
        return exc.strerror or str(exc)


def probe_addresses(
    addresses: list[tuple[str, int]], timeout: float
) -> dict[tuple[str, int], str | None]:
    """Connect to every address at once: address -> why it failed (None: reachable)."""
    results: dict[tuple[str, int], str | None] = {}

    def probe(address: tuple[str, int]) -> None:
        results[address] = _connect_problem(address[0], address[1], timeout)

    threads = [
        threading.Thread(target=probe, args=(a,), name="bootstrap-probe", daemon=True)
        for a in addresses
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout + 1.0
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    for address in addresses:  # name resolution may outlast the connect timeout
        results.setdefault(address, f"no answer within {timeout:g} s (name resolution hangs?)")
    return results


#: errors of a broker that answered but refused the client's login or TLS handshake
_REFUSED_CODES = ("_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED")

_PROBE_LOGGER = logging.getLogger(__name__ + ".bootstrap_probe")
_PROBE_LOGGER.propagate = False
_PROBE_LOGGER.addHandler(logging.NullHandler())


def check_bootstrap_servers(admin_config: Mapping[str, Any], timeout_s: float) -> None:
    """Fail within about ``timeout_s`` (``bootstrap.timeout.ms``) when no broker of
    ``bootstrap.servers`` can be reached, naming the addresses and what to check.

    A throwaway admin client (same settings, silent logger) asks for the cluster metadata.
    When no answer comes, each address is tried over TCP: none reachable raises
    ``ClusterUnreachableException``; a reachable one means a slow broker (or a TLS/SASL
    mismatch): a warning is logged and start-up goes on with its usual timeouts."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    servers = str(admin_config.get(BOOTSTRAP_SERVERS, ""))
    errors: list[Any] = []
    conf = {**admin_config, "logger": _PROBE_LOGGER, "error_cb": errors.append}
    started = time.monotonic()
    deadline = started + max(0.1, timeout_s)
    admin = AdminClient(conf)
    reason, code = "", ""
    # short metadata requests, serving error_cb between them: a refused login or TLS
    # handshake shows up there within a second, long before the metadata times out
    while True:
        try:
            admin.list_topics(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            err: Any = exc.args[0] if exc.args else None
            reason = err.str() if hasattr(err, "str") else str(exc)
            code = err.name() if hasattr(err, "name") else ""
        admin.poll(0)
        refused = next((e for e in errors if e.name() in _REFUSED_CODES), None)
        if refused is not None:
            reason, code = refused.str(), refused.name()
            break
        if time.monotonic() >= deadline:
            break
    addresses = bootstrap_addresses(servers)
    results = probe_addresses(addresses, timeout=min(5.0, max(1.0, timeout_s / 2)))
    waited = time.monotonic() - started
    if not any(problem is None for problem in results.values()):
        details = "; ".join(f"{h}:{p}: {problem}" for (h, p), problem in results.items())
        raise ClusterUnreachableException(
            f"Cannot reach the Kafka cluster at {BOOTSTRAP_SERVERS}={servers!r} (waited "
            f"{waited:.0f} s): {details}. Check that the broker is running, that "
            f"{BOOTSTRAP_SERVERS} has its host and listener port right, and that no firewall "
            f"blocks the way; {BOOTSTRAP_TIMEOUT_MS} sets how long to wait"
        )
    if code in _REFUSED_CODES:
        raise ConfigException(
            f"The Kafka cluster at {BOOTSTRAP_SERVERS}={servers!r} is reachable but refused "
            f"the connection: {reason}. Check security.protocol and the sasl.* / ssl.* "
            "settings (unprefixed, or under admin./consumer./producer.)"
        )
    log.warning(
        "%s=%r accepts connections but has not answered within %.0f s (%s): a slow broker? "
        "Start-up goes on with its usual timeouts; if it fails, check that %s is a Kafka "
        "listener and that security.protocol matches it",
        BOOTSTRAP_SERVERS,
        servers,
        waited,
        reason,
        BOOTSTRAP_SERVERS,
    )
