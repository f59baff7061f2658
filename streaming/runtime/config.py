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
and ``bootstrap.servers`` (``bootstrap_probe``, bounded by ``bootstrap.timeout.ms``). The keys
are named in ``config_keys``; client settings are routed and checked in ``client_settings``.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming import serdes as serdes_mod
from streaming.errors import ConfigException
from streaming.runtime.alignment import AlignmentSettings
from streaming.runtime.client_settings import (
    check_bootstrap_value,
    check_managed_values,
    parse_guarantee,
    plain_settings,
    route_client_settings,
)
from streaming.runtime.clients import TRANSACTION_TIMEOUT_MS, ClientConfigs
from streaming.runtime.config_keys import (
    APP_ID_RE,
    APPLICATION_ID,
    APPLICATION_SERVER,
    AT_LEAST_ONCE,
    BOOTSTRAP_SERVERS,
    BOOTSTRAP_TIMEOUT_MS,
    BUFFERED_RECORDS_PER_PARTITION,
    CACHE_MAX_BYTES,
    CACHE_MAX_BYTES_BUFFERING,
    CLIENT_ID,
    COMMIT_INTERVAL_MS,
    DEAD_LETTER_QUEUE_TOPIC,
    DEFAULT_KEY_SERDE,
    DEFAULT_TIMESTAMP_EXTRACTOR,
    DEFAULT_VALUE_SERDE,
    DESERIALIZATION_HANDLER,
    DESERIALIZATION_HANDLER_NEW,
    EVENT_TIME_ALIGNMENT_ACROSS_INSTANCES,
    EVENT_TIME_ALIGNMENT_IDLE_MS,
    EVENT_TIME_ALIGNMENT_LAG_MS,
    EVENT_TIME_ALIGNMENT_LAG_RECORDS,
    EVENT_TIME_ALIGNMENT_MAX_DRIFT_MS,
    EXACTLY_ONCE_V2,
    HOST_PORT_RE,
    MAX_TASK_IDLE_MS,
    NUM_STANDBY_REPLICAS,
    NUM_STREAM_THREADS,
    POLL_MS,
    PROCESSING_BATCH_ENABLED,
    PROCESSING_GUARANTEE,
    PROCESSING_HANDLER,
    PRODUCTION_HANDLER,
    PRODUCTION_HANDLER_NEW,
    QUERY_SERVER_AUTH_TOKEN,
    QUERY_SERVER_BIND,
    QUERY_SERVER_ENABLED,
    QUERY_SERVER_KEEPALIVE_TIMEOUT_MS,
    QUERY_SERVER_MAX_CONNECTIONS,
    QUERY_SERVER_SCAN_DEFAULT_LIMIT,
    QUERY_SERVER_SCAN_MAX_LIMIT,
    QUERY_SERVER_TLS_CAFILE,
    QUERY_SERVER_TLS_CERTFILE,
    QUERY_SERVER_TLS_KEYFILE,
    QUERY_SERVER_WORKER_THREADS,
    REPARTITION_PURGE_INTERVAL_MS,
    REPLICATION_FACTOR,
    RETRY_BACKOFF_MS,
    STATE_DIR,
    STATESTORE_UNCOMMITTED_MAX_BYTES,
    STREAM_WORKER_KINDS,
    STREAM_WORKERS,
    TASK_TIMEOUT_MS,
    WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS,
    WINDOW_CLOSE_QUIET_MS,
)

log = logging.getLogger(__name__)


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


def _check_transaction_timeout(commit_ms: int, producer: Mapping[str, tuple[str, Any]]) -> None:
    """Exactly-once keeps a transaction open for a commit interval: a shorter transaction
    timeout has the broker abort every one (Kafka's ``verifyEOSTransactionTimeoutCompatibility``)."""
    key, raw = producer.get("transaction.timeout.ms", ("producer.transaction.timeout.ms", None))
    timeout = _int({key: raw}, key, TRANSACTION_TIMEOUT_MS, minimum=1)
    if timeout < commit_ms:
        raise ConfigException(
            f"Transaction timeout {timeout} ms ({key}) is lower than the commit interval "
            f"{commit_ms} ms ({COMMIT_INTERVAL_MS}): under exactly-once every transaction would "
            f"time out. Lower {COMMIT_INTERVAL_MS} or raise {key} to at least {commit_ms}"
        )


def _bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    raw = config.get(key, default)
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigException(f"Invalid value {raw!r} for configuration {key}: expected true or false")


#: Kafka's (KIP-892) default of ``statestore.uncommitted.max.bytes``: 64 MiB
DEFAULT_UNCOMMITTED_MAX_BYTES = 64 * 1024 * 1024


def _uncommitted_max_bytes(config: Mapping[str, Any]) -> int:
    """``statestore.uncommitted.max.bytes``: a number of bytes, or -1 for no limit."""
    key = STATESTORE_UNCOMMITTED_MAX_BYTES
    try:
        value = _int(config, key, DEFAULT_UNCOMMITTED_MAX_BYTES, minimum=-1)
    except ConfigException:
        value = -2
    if value < -1:
        raise ConfigException(
            f"Invalid value {config.get(key)!r} for configuration {key}: expected a number of "
            "bytes the exactly-once state stores of an instance may hold uncommitted before "
            f"it commits early (default {DEFAULT_UNCOMMITTED_MAX_BYTES}, 64 MiB), or -1 for "
            "no limit"
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
    #: ``statestore.uncommitted.max.bytes`` (-1: no limit; only under exactly-once)
    uncommitted_max_bytes: int
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
    #: tasks run their queued records through the batch entry (``streaming.runtime.batch``)
    processing_batch_enabled: bool = True
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

    @property
    def thread_uncommitted_max_bytes(self) -> int | None:
        """A stream thread's share of ``statestore.uncommitted.max.bytes`` (None: no limit,
        or not exactly-once)."""
        if not self.exactly_once or self.uncommitted_max_bytes < 0:
            return None
        return self.uncommitted_max_bytes // self.num_stream_threads

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
        clients = route_client_settings(cfg)
        app_id = cfg.get(APPLICATION_ID)
        if not app_id or not isinstance(app_id, str):
            raise ConfigException(
                f"Missing required configuration {APPLICATION_ID!r}: set it to a name for this "
                "application (it names the consumer group and the internal topics)"
            )
        if not APP_ID_RE.match(app_id):
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
        check_bootstrap_value(servers)
        guarantee = parse_guarantee(cfg.get(PROCESSING_GUARANTEE, AT_LEAST_ONCE))
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
        if server is not None and not HOST_PORT_RE.match(str(server)):
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
        check_managed_values(cfg, clients, guarantee)
        if eos:
            _check_transaction_timeout(commit_ms, clients["producer"])
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
            uncommitted_max_bytes=_uncommitted_max_bytes(cfg),
            application_server=None if server is None else str(server),
            query_server_enabled=_bool(cfg, QUERY_SERVER_ENABLED, True),
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
            processing_batch_enabled=_bool(cfg, PROCESSING_BATCH_ENABLED, True),
            alignment=AlignmentSettings(
                max_drift_ms=(
                    _int(cfg, EVENT_TIME_ALIGNMENT_MAX_DRIFT_MS, 0, minimum=-1)
                    if cfg.get(EVENT_TIME_ALIGNMENT_MAX_DRIFT_MS) is not None
                    else None
                ),
                lag_records=_int(cfg, EVENT_TIME_ALIGNMENT_LAG_RECORDS, 1_000, minimum=0),
                lag_ms=_int(cfg, EVENT_TIME_ALIGNMENT_LAG_MS, 60_000, minimum=0),
                idle_ms=_int(cfg, EVENT_TIME_ALIGNMENT_IDLE_MS, 10_000, minimum=0),
                across_instances=_bool(cfg, EVENT_TIME_ALIGNMENT_ACROSS_INSTANCES, False),
            ),
            consumer=plain_settings(clients["consumer"]),
            producer=plain_settings(clients["producer"]),
            admin=plain_settings(clients["admin"]),
            originals=cfg,
            restore_consumer=plain_settings(clients["restore.consumer"]),
            global_consumer=plain_settings(clients["global.consumer"]),
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
