"""The schema registry connection of the Confluent-format serdes.

``schema_registry_client(config)`` builds one ``confluent_kafka.schema_registry``
``SchemaRegistryClient`` from Kafka-style settings: ``schema.registry.url`` (or ``url``),
``basic.auth.user.info`` (``user:password``, with ``basic.auth.credentials.source``) and
``schema.registry.ssl.*`` (``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``) as Confluent's serdes name them; any other key the client knows is
passed through. Clients are shared per configuration, as their schema caches should be.

``call_with_retry`` runs a registry-backed (de)serialization: a registry that cannot be
reached (connection refused, a timeout, a 5xx or 429 answer) is retried with a capped
backoff instead of failing the record, because the record is fine and dead-lettering it
would lose it; a registry that refuses the credentials (401, 403) or whose TLS certificate
is not trusted raises ``StreamsException``: a configuration to fix, not a record to skip;
every other failure
becomes ``SerializationError`` (so the application's deserialization handler and dead-letter
topic see undecodable input).
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.common._httpx_compat import httpx
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import SerializationError as ConfluentSerializationError

from streaming.errors import SerializationError, StreamsException

log = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP answers that mean "the registry is not available now", not "this record is bad"
RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: HTTP answers that refuse the client's credentials
AUTH_STATUS = frozenset({401, 403})
#: the registry's error codes of a schema id, subject or version it does not know
NOT_FOUND_CODES = frozenset({40401, 40402, 40403, 40404, 40405, 40406})
#: where the registry settings of a streams config start (Confluent's serde config names)
PREFIX = "schema.registry."

_CLIENTS: dict[tuple[tuple[str, str], ...], SchemaRegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` in the names ``SchemaRegistryClient`` takes (``schema.registry.`` dropped;
    the serde settings such as ``auto.register.schemas`` left out)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = key.removeprefix(PREFIX)
        if name in _CLIENT_KEYS or name.startswith(("ssl.", "basic.auth.", "bearer.auth.")):
            out[name] = value
    if "url" not in out:
        raise ValueError("the schema registry needs 'schema.registry.url'")
    return out


_CLIENT_KEYS = frozenset(
    {
        "url",
        "proxy",
        "timeout",
        "cache.capacity",
        "cache.latest.ttl.sec",
        "max.retries",
        "retries.wait.ms",
        "retries.max.wait.ms",
    }
)


def schema_registry_client(
    registry: SchemaRegistryClient | Mapping[str, Any] | str,
) -> SchemaRegistryClient:
    """A registry client for a client, a config mapping or a bare URL (one per config)."""
    if isinstance(registry, SchemaRegistryClient):
        return registry
    config = client_config({"url": registry} if isinstance(registry, str) else registry)
    cache_key = tuple(sorted((k, str(v)) for k, v in config.items()))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(cache_key)
        if client is None:
            client = _CLIENTS[cache_key] = SchemaRegistryClient(_without_credentials_source(config))
        return client


def _without_credentials_source(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without ``basic.auth.credentials.source``, which Java's serdes take and
    ``SchemaRegistryClient`` refuses: ``USER_INFO`` (``basic.auth.user.info``) is the only
    source it has, so another one is refused here, by name."""
    source = config.get("basic.auth.credentials.source")
    if source is None:
        return config
    if str(source).upper() != "USER_INFO":
        raise ValueError(
            f"basic.auth.credentials.source={source!r} is not supported: give the "
            "credentials in basic.auth.user.info (USER_INFO)"
        )
    return {k: v for k, v in config.items() if k != "basic.auth.credentials.source"}


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the registry could not answer now (worth retrying)."""
    if isinstance(exc, httpx.TransportError):
        return True
    if isinstance(exc, SchemaRegistryError):
        return exc.http_status_code in RETRIABLE_STATUS
    return False


def _tls_refused(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a failed TLS certificate check."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(exc)


def describe(exc: BaseException) -> str:
    """What went wrong, in words a user acts on (the registry's own message kept)."""
    if isinstance(exc, SchemaRegistryError):
        if exc.http_status_code == 409:
            return f"the schema registry refused the schema as incompatible: {exc.error_message}"
        if exc.http_status_code == 422:
            return f"the schema registry refused the schema as invalid: {exc.error_message}"
        if exc.http_status_code == 404 or exc.error_code in NOT_FOUND_CODES:
            return f"the schema registry does not know it: {exc.error_message}"
        return (
            f"schema registry error {exc.http_status_code} (code {exc.error_code}): "
            f"{exc.error_message}"
        )
    if isinstance(exc, ConfluentSerializationError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def call_with_retry(
    what: str,
    call: Callable[[], T],
    *,
    max_stall_s: float | None = None,
    backoff_s: float = 0.1,
    max_backoff_s: float = 5.0,
) -> T:
    """``call()``, retried while the registry is unavailable (for ever, or ``max_stall_s``);
    any other failure raised as ``SerializationError`` naming ``what``."""
    began = time.monotonic()
    wait = backoff_s
    while True:
        try:
            return call()
        except SerializationError:
            raise
        except Exception as exc:
            if isinstance(exc, SchemaRegistryError) and exc.http_status_code in AUTH_STATUS:
                raise StreamsException(
                    f"{what}: the schema registry refused the credentials "
                    f"({exc.http_status_code}): check basic.auth.user.info"
                ) from exc
            if _tls_refused(exc):
                raise StreamsException(
                    f"{what}: the schema registry's TLS certificate is not trusted: {exc}; "
                    "check schema.registry.ssl.ca.location"
                ) from exc
            if not is_unavailable(exc):
                raise SerializationError(f"{what}: {describe(exc)}") from exc
            stalled = time.monotonic() - began
            if max_stall_s is not None and stalled >= max_stall_s:
                raise SerializationError(
                    f"{what}: the schema registry was unavailable for {stalled:.1f} s: "
                    f"{describe(exc)}"
                ) from exc
            log.warning(
                "%s: the schema registry is unavailable (%s); retrying in %.1f s",
                what,
                describe(exc),
                wait,
            )
            time.sleep(wait)
            wait = min(max_backoff_s, wait * 2)
