"""``KafkaStreams``: the runtime's client (``streaming.runtime.client``) plus the HTTP query
server, which serves its stores, metadata and SQL pull and push queries to other instances
and to users when ``application.server`` is set. The server sits above the runtime: it reads
through the client's store provider, and the runtime never imports it."""

from __future__ import annotations

from typing import Any

from streaming.query.server import QueryServer
from streaming.runtime.client import State, StreamsClient
from streaming.runtime.config import StreamsConfig


class KafkaStreams(StreamsClient):
    """A Kafka Streams application instance that also answers interactive queries over HTTP
    (``application.server``; ``interactive.queries.http.enabled = false`` turns it off)."""

    def __init__(self, topology: Any, config: dict[str, Any] | StreamsConfig) -> None:
        super().__init__(topology, config)
        if self._serves_http():
            # bad query-server numbers fail here (ConfigException), not at start()
            for setting in (
                "query_server_worker_threads",
                "query_server_max_connections",
                "query_server_keepalive_timeout_ms",
                "query_server_scan_default_limit",
                "query_server_scan_max_limit",
            ):
                getattr(self.config, setting)
        #: the HTTP query server, while running with application.server set
        self.query_server: QueryServer | None = None

    def _serves_http(self) -> bool:
        return bool(self.config.query_server_enabled and self.config.application_server)

    def _start_serving(self) -> None:
        # answers 503 until running; a taken port fails start() before any thread
        if self._serves_http():
            self.query_server = QueryServer(self).start()

    def _stop_serving(self) -> None:
        server, self.query_server = self.query_server, None
        if server is not None:
            server.stop()


__all__ = ["KafkaStreams", "State"]
