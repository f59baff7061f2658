"""The start-up check of ``bootstrap.servers``: each address is probed (DNS, TCP), then an
admin client lists the cluster, all within ``bootstrap.timeout.ms``; an unreachable
cluster fails with a message naming every address and what went wrong with it."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

from streaming.errors import ConfigException, StreamsException
from streaming.runtime.config_keys import (
    BOOTSTRAP_SERVERS,
    BOOTSTRAP_TIMEOUT_MS,
)

log = logging.getLogger(__name__)

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

_PROBE_LOGGER = logging.getLogger(__name__ + ".admin")
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
