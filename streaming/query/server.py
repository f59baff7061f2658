"""``QueryServer``: the interactive-query HTTP server of one ``KafkaStreams`` instance.

    app = KafkaStreams(topology, {..., "application.server": "localhost:7070"})
    app.start()
    server = QueryServer(app).start()      # http://localhost:7070/stores/<store>/keys/<key>
    ...
    server.stop()

It binds to ``application.server`` (or ``bind=(host, port)``, e.g. ``("0.0.0.0", 7070)`` in a
container whose advertised name differs), serves on a daemon thread with the standard
library's ``ThreadingHTTPServer`` and answers with ``streaming.query.service.QueryService``
(routes, forwarding, errors are documented there).
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from streaming.query.service import FORWARDED_HEADER, QueryService, Response

log = logging.getLogger(__name__)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    service: QueryService


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        forwarded = self.headers.get(FORWARDED_HEADER) is not None
        self._send(self.server.service.handle(url.path, query, forwarded=forwarded))

    def do_HEAD(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        response = self.server.service.handle(url.path, {}, forwarded=False)
        self._send(response, body=False)

    def _not_allowed(self) -> None:
        self._send(Response(405, b'{"error":"only GET is supported"}', headers={"Allow": "GET"}))

    do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed

    def _send(self, response: Response, body: bool = True) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class QueryServer:
    """Serves interactive queries of ``streams`` over HTTP (see the module docstring)."""

    def __init__(
        self,
        streams: Any,
        *,
        bind: tuple[str, int] | None = None,
        forward_timeout: float = 10.0,
    ) -> None:
        host_info = streams.host_info
        if bind is None:
            if host_info.port < 0:
                raise ValueError(
                    "QueryServer needs application.server=host:port in the KafkaStreams config "
                    "(the address other instances reach this one at), or bind=(host, port)"
                )
            bind = (host_info.host, host_info.port)
        self.streams = streams
        self.bind = bind
        self.service = QueryService(streams, forward_timeout=forward_timeout)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port listened on (the real one when bound to port 0)."""
        return self._httpd.server_address[1] if self._httpd is not None else self.bind[1]

    @property
    def url(self) -> str:
        """``http://host:port`` of this server."""
        return f"http://{self.bind[0]}:{self.port}"

    def start(self) -> QueryServer:
        """Bind and serve on a daemon thread; returns self."""
        if self._httpd is not None:
            return self
        httpd = _Server(self.bind, _Handler)
        httpd.service = self.service
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"query-server-{self.bind[0]}:{self.port}",
            daemon=True,
        )
        self._thread.start()
        log.info("Interactive queries served at %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    close = stop

    def __enter__(self) -> QueryServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["QueryServer"]
