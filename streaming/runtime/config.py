"""``StreamsConfig``: Kafka Streams' configuration names, validated up front.

Keys use Kafka Streams' names (``application.id``, ``processing.guarantee``, ...). Values may
be strings (from a properties file) or Python objects. ``consumer.`` / ``producer.`` /
``admin.`` prefixed keys go, without the prefix, to that confluent-kafka client; other keys
that confluent-kafka understands can be given there. A misconfiguration raises
``ConfigException`` naming the key and what to fix.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming import serdes as serdes_mod

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
#: ours (not Kafka's): serve interactive queries over HTTP at application.server
QUERY_SERVER_ENABLED = "interactive.queries.http.enabled"

KNOWN_KEYS = frozenset(
    {
        APPLICATION_ID,
        BOOTSTRAP_SERVERS,
        PROCESSING_GUARANTEE,
        COMMIT_INTERVAL_MS,
        STATE_DIR,
        NUM_STREAM_THREADS,
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
        CLIENT_ID,
        QUERY_SERVER_ENABLED,
        "topology.optimization",
        "upgrade.from",
        "metrics.recording.level",
    }
)

_APP_ID_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
_HOST_PORT_RE = re.compile(r"^[^:\s]+:\d{1,5}$")


class ConfigException(ValueError):
    """An invalid configuration: the message names the key and what to fix."""


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


def _prefixed(config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


@dataclass(frozen=True)
class StreamsConfig:
    """The validated configuration of one ``KafkaStreams`` instance."""

    application_id: str
    bootstrap_servers: str
    processing_guarantee: str
    commit_interval_ms: int
    state_dir: Path
    num_stream_threads: int
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
    query_server_enabled: bool = True
    consumer: dict[str, Any] = field(default_factory=dict)
    producer: dict[str, Any] = field(default_factory=dict)
    admin: dict[str, Any] = field(default_factory=dict)
    originals: dict[str, Any] = field(default_factory=dict)

    @property
    def exactly_once(self) -> bool:
        """True under ``exactly_once_v2``."""
        return self.processing_guarantee == EXACTLY_ONCE_V2

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
        raw_guarantee = str(cfg.get(PROCESSING_GUARANTEE, AT_LEAST_ONCE)).strip().lower()
        guarantee = _GUARANTEES.get(raw_guarantee)
        if guarantee is None:
            raise ConfigException(
                f"Invalid value {raw_guarantee!r} for configuration {PROCESSING_GUARANTEE}: "
                f"use {AT_LEAST_ONCE!r} or {EXACTLY_ONCE_V2!r}"
            )
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
        standbys = _int(cfg, NUM_STANDBY_REPLICAS, 0, minimum=0)
        unknown = [
            k
            for k in cfg
            if k not in KNOWN_KEYS
            and not k.startswith(("consumer.", "producer.", "admin.", "main.consumer."))
            and not k.startswith("__")
        ]
        if unknown:
            log.info("Configs not used by KafkaStreams (available to processors): %s", unknown)
        consumer = {**_prefixed(cfg, "consumer."), **_prefixed(cfg, "main.consumer.")}
        for client, settings in (("consumer", consumer), ("producer", _prefixed(cfg, "producer."))):
            for forbidden in ("enable.auto.commit", "transactional.id", "group.id"):
                if forbidden in settings:
                    raise ConfigException(
                        f"{client}.{forbidden} cannot be set: KafkaStreams manages it "
                        f"(group.id is the {APPLICATION_ID}, commits follow {COMMIT_INTERVAL_MS})"
                    )
        return StreamsConfig(
            application_id=app_id,
            bootstrap_servers=servers,
            processing_guarantee=guarantee,
            commit_interval_ms=commit_ms,
            state_dir=state_dir,
            num_stream_threads=threads,
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
            consumer=consumer,
            producer=_prefixed(cfg, "producer."),
            admin=_prefixed(cfg, "admin."),
            originals=cfg,
        )

    def app_configs(self) -> dict[str, Any]:
        """The dict processors and stores see as ``context.app_configs``."""
        out = dict(self.originals)
        out[DEFAULT_KEY_SERDE] = self.default_key_serde
        out[DEFAULT_VALUE_SERDE] = self.default_value_serde
        out[CACHE_MAX_BYTES] = self.cache_max_bytes
        out[PROCESSING_GUARANTEE] = self.processing_guarantee
        out[COMMIT_INTERVAL_MS] = self.commit_interval_ms
        if self.default_timestamp_extractor is not None:
            out[DEFAULT_TIMESTAMP_EXTRACTOR] = self.default_timestamp_extractor
        return out

    def common_client_config(self) -> dict[str, Any]:
        """Settings every client gets."""
        return {BOOTSTRAP_SERVERS: self.bootstrap_servers}


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``.properties``, ``.yaml``/``.yml`` or ``.json`` config file into a flat dict."""
    p = Path(path)
    text = p.read_text()
    suffix = p.suffix.lower()
    if suffix == ".json":
        import json

        data = json.loads(text)
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigException(f"reading {p} needs PyYAML: pip install pyyaml") from exc
        data = yaml.safe_load(text) or {}
    else:
        data = {}
        for raw_line in text.splitlines():
            line = raw_line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if sep < 0:
                raise ConfigException(f"{p}: cannot parse line {raw_line!r}: expected key=value")
            data[line[:sep].strip()] = line[sep + 1 :].strip()
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
