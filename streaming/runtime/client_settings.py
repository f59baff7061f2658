"""Which keys a configuration may hold and which Kafka client each reaches: Kafka Streams
settings this runtime accepts without implementing them, the client settings this runtime
manages itself, and every client setting checked against the installed librdkafka (names
and values), with the closest known name in the message."""

from __future__ import annotations

import contextlib
import difflib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from streaming.errors import ConfigException
from streaming.runtime.config_keys import (
    APPLICATION_ID,
    AT_LEAST_ONCE,
    BOOTSTRAP_SERVERS,
    CLIENT_ID,
    COMMIT_INTERVAL_MS,
    EXACTLY_ONCE_V2,
    GUARANTEES,
    KNOWN_KEYS,
    PROCESSING_GUARANTEE,
)

log = logging.getLogger(__name__)

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


def route_client_settings(cfg: Mapping[str, Any]) -> dict[str, dict[str, tuple[str, Any]]]:
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


def plain_settings(settings: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    return {name: value for name, (_key, value) in settings.items()}


def parse_guarantee(raw: Any) -> str:
    """``processing.guarantee``, or a ``ConfigException`` listing the valid values."""
    text = str(raw).strip()
    guarantee = GUARANTEES.get(text.lower())
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


def check_bootstrap_value(servers: str) -> None:
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


def check_managed_values(
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
