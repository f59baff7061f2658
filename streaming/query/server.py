"""``QueryServer``: the interactive-query HTTP server of one ``KafkaStreams`` instance.

    app = KafkaStreams(topology, {..., "application.server": "localhost:7070"})
    app.start()                            # serves http://localhost:7070/stores/<store>/keys/<key>
    ...                                    # (or QueryServer(app).start() with the setting off)
    app.close()

Routes, forwarding, paging and errors are documented in ``streaming.query.service``.

**Under load.** One asyncio event loop thread owns every connection: it accepts, reads and
parses requests and writes answers, so an idle keep-alive connection costs a socket and a
coroutine, not a thread. Each request is then answered on a bounded worker pool
(``interactive.queries.http.worker.threads``, default 4; requests forwarded by other
instances have a pool of their own, so two instances forwarding to each other cannot
exhaust each other's workers). Few workers also bound how much of the interpreter (the GIL)
queries take from the stream threads, and scans read the stores in short chunks per hold of
the stream thread's lock (see the service), so queries do not starve processing: requests
wait for a worker instead. ``interactive.queries.http.max.connections`` (default 1024) caps
open connections; a connection over the cap is answered ``503`` with ``Retry-After: 1`` and
closed. An idle connection is closed after ``interactive.queries.http.keepalive.timeout.ms``
(default 15 s), a request head must arrive within that time too, and must fit 64 KiB.
asyncio rather than a selector loop of our own because it brings TLS (handshakes included)
and timeouts on non-blocking sockets from the standard library; h11 reads and frames HTTP/1.1
(chunked bodies, ``Expect: 100-continue``, malformed requests answered 400 and closed).

**Where it listens.** ``application.server`` is the *advertised* address (what other
instances and clients connect to). The server binds ``interactive.queries.http.bind`` when
set (``0.0.0.0`` for every interface, e.g. in a container whose advertised name is a
service name); otherwise 127.0.0.1 when the advertised host is loopback-like (``localhost``,
``127.x.y.z``), else the advertised host itself (one interface: never every interface
unless asked), ``bind=(host, port)`` overrides both.

**Security.** ``interactive.queries.http.auth.token``: every request needs
``Authorization: Bearer <token>`` (401 otherwise, ``/health`` and ``/metrics`` included);
forwarded requests carry it, so all instances share one token.
``interactive.queries.http.tls.certfile`` / ``.keyfile`` (PEM) serve https; forwarding then
uses https too and verifies the other instance against ``interactive.queries.http.tls.cafile``
(default: the certfile itself plus the system CAs, enough when instances share a
certificate), with its hostname checked against its advertised host.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import http
import logging
import socket
import ssl
import threading
import urllib.parse
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import h11

from streaming.query.service import FORWARDED_HEADER, QueryService, Response

log = logging.getLogger(__name__)

#: largest request head (request line + headers)
MAX_HEAD_BYTES = 64 * 1024
#: largest request body read (and ignored) to keep a connection usable after a 405
MAX_BODY_BYTES = 1024 * 1024
#: bytes read from a connection at a time
READ_BYTES = 64 * 1024
#: seconds to write an answer before giving up on the client
WRITE_TIMEOUT_S = 30.0
#: polls of a push query waiting for a slow client before the query stops polling
PUSH_QUEUE_BATCHES = 8
#: seconds an over-the-cap connection gets to send its request before its 503
REJECT_READ_TIMEOUT_S = 1.0
RETRY_AFTER_S = 1
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def default_bind_host(advertised: str) -> str:
    """Where to listen for an advertised host: 127.0.0.1 for loopback-like names, else it."""
    host = advertised.strip().lower()
    if not host or host in _LOOPBACK_NAMES or host.startswith("127."):
        return "127.0.0.1"
    return advertised


class _Request:
    __slots__ = ("body", "headers", "keep_alive", "method", "target")

    def __init__(self, method: str, target: str, headers: dict[str, str], keep_alive: bool):
        self.method = method
        self.target = target
        self.headers = headers
        self.keep_alive = keep_alive
        self.body = b""


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Exchange:
    """One connection's HTTP/1.1 framing, parsed and written by h11: keep-alive, chunked
    bodies, ``Expect: 100-continue`` and malformed requests as HTTP says."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)

    async def _next_event(self, timeout: float) -> Any:
        conn = self.conn
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise _BadRequest(exc.error_status_hint, str(exc)) from None
            if event is not h11.NEED_DATA:
                return event
            if conn.they_are_waiting_for_100_continue:
                await self._send(h11.InformationalResponse(status_code=100, headers=[]))
            conn.receive_data(await asyncio.wait_for(self.reader.read(READ_BYTES), timeout))

    async def next_request(self, timeout: float) -> _Request | None:
        """The next request with its body (kept for POST), or None once the client closed.
        TimeoutError when the head or the body does not arrive within ``timeout``."""
        event = await self._next_event(timeout)
        if isinstance(event, h11.ConnectionClosed):
            return None
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers}
        # h11 closes after an HTTP/1.0 request or one that asks to close: answer saying so
        keep_alive = (
            event.http_version != b"1.0" and "close" not in headers.get("connection", "").lower()
        )
        request = _Request(
            event.method.decode("ascii"), event.target.decode("latin-1"), headers, keep_alive
        )
        if int(headers.get("content-length", "0")) > MAX_BODY_BYTES:
            raise _BadRequest(413, "request body too large")
        body = bytearray()
        while not isinstance(event := await self._next_event(timeout), h11.EndOfMessage):
            if isinstance(event, h11.ConnectionClosed):
                return None
            body += event.data
            if len(body) > MAX_BODY_BYTES:
                raise _BadRequest(413, "request body too large")
        if request.method == "POST":
            request.body = bytes(body)
        return request

    async def respond(
        self, response: Response, *, body: bool, keep_alive: bool, keepalive_s: float
    ) -> bool:
        """Write ``response``; True when the connection stays open for the next request."""
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(response.body))),
            *response.headers.items(),
        ]
        if keep_alive:
            headers.append(("Keep-Alive", f"timeout={max(1, int(keepalive_s))}"))
        else:
            headers.append(("Connection", "close"))
        try:
            reason = http.HTTPStatus(response.status).phrase.encode()
        except ValueError:
            reason = b"Unknown"
        await self._send(h11.Response(status_code=response.status, headers=headers, reason=reason))
        if body and response.body:
            await self._send(h11.Data(data=response.body))
        await self._send(h11.EndOfMessage())
        conn = self.conn
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
            return True
        return False

    async def _send(self, event: Any) -> None:
        data = self.conn.send(event)
        if data:
            self.writer.write(data)
            await asyncio.wait_for(self.writer.drain(), WRITE_TIMEOUT_S)


def _error(status: int, message: str, **headers: str) -> Response:
    from streaming.query import codec

    return Response(status, codec.dumps({"error": message}), headers=dict(headers))


class QueryServer:
    """Serves interactive queries of ``streams`` over HTTP(S) (see the module docstring).

    Keyword arguments override the ``interactive.queries.http.*`` settings of
    ``streams.config``; ``keepalive_timeout`` is in seconds.
    """

    def __init__(
        self,
        streams: Any,
        *,
        bind: tuple[str, int] | None = None,
        forward_timeout: float = 10.0,
        worker_threads: int | None = None,
        max_connections: int | None = None,
        keepalive_timeout: float | None = None,
        auth_token: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        cafile: str | None = None,
        scan_default_limit: int | None = None,
        scan_max_limit: int | None = None,
    ) -> None:
        config = getattr(streams, "config", None)

        def setting(value: Any, name: str, default: Any) -> Any:
            return value if value is not None else getattr(config, name, default)

        host_info = streams.host_info
        if bind is None:
            if host_info.port < 0:
                raise ValueError(
                    "QueryServer needs application.server=host:port in the KafkaStreams config "
                    "(the address other instances reach this one at), or bind=(host, port)"
                )
            host = setting(None, "query_server_bind", None) or default_bind_host(host_info.host)
            bind = (host, host_info.port)
        self.streams = streams
        self.bind = bind
        self.worker_threads = int(setting(worker_threads, "query_server_worker_threads", 4))
        self.max_connections = int(setting(max_connections, "query_server_max_connections", 1024))
        if keepalive_timeout is None:
            keepalive_ms = setting(None, "query_server_keepalive_timeout_ms", 15_000)
            keepalive_timeout = keepalive_ms / 1000.0
        self.keepalive_timeout = float(keepalive_timeout)
        self.auth_token = setting(auth_token, "query_server_auth_token", None)
        certfile = setting(certfile, "query_server_tls_certfile", None)
        keyfile = setting(keyfile, "query_server_tls_keyfile", None)
        cafile = setting(cafile, "query_server_tls_cafile", None)
        self._server_ssl: ssl.SSLContext | None = None
        client_ssl: ssl.SSLContext | None = None
        if certfile:
            self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._server_ssl.load_cert_chain(certfile, keyfile)
            client_ssl = ssl.create_default_context()
            client_ssl.load_verify_locations(cafile or certfile)
        elif keyfile:
            raise ValueError("interactive.queries.http.tls.keyfile needs a certfile too")
        self.scheme = "https" if self._server_ssl is not None else "http"
        self.service = QueryService(
            streams,
            forward_timeout=forward_timeout,
            auth_token=self.auth_token,
            scheme=self.scheme,
            ssl_context=client_ssl,
            default_limit=int(setting(scan_default_limit, "query_server_scan_default_limit", 1000)),
            max_limit=int(setting(scan_max_limit, "query_server_scan_max_limit", 10_000)),
        )
        self._expected_auth = (
            f"Bearer {self.auth_token}".encode() if self.auth_token is not None else None
        )
        #: open connections now; connections answered 503 over the cap so far
        self.connections = 0
        self.rejected_connections = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._aserver: asyncio.AbstractServer | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._forwarded_pool: ThreadPoolExecutor | None = None
        self._port = bind[1]
        self._closing = False

    # -- addresses ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port listened on (the real one when bound to port 0)."""
        return self._port

    @property
    def url(self) -> str:
        """``http(s)://host:port`` of this server (the advertised host when there is one)."""
        host_info = self.streams.host_info
        if host_info.port == self.port and host_info.host:
            host = host_info.host
        else:
            host = self.bind[0] if self.bind[0] not in ("", "0.0.0.0") else "127.0.0.1"
        return f"{self.scheme}://{host}:{self.port}"

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> QueryServer:
        """Bind (a taken port raises here) and serve on a daemon thread; returns self."""
        if self._loop is not None:
            return self
        try:
            sock = socket.create_server(self.bind, backlog=min(self.max_connections, 4096))
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"the query server cannot listen on {self.bind[0]}:{self.bind[1]} ({exc}); "
                "free the port, or set interactive.queries.http.bind (e.g. 0.0.0.0) when the "
                "advertised application.server host is not an address of this machine",
            ) from exc
        self._port = sock.getsockname()[1]
        name = f"query-server-{self.bind[0]}:{self._port}"
        self._pool = ThreadPoolExecutor(self.worker_threads, thread_name_prefix=f"{name}-worker")
        self._forwarded_pool = ThreadPoolExecutor(
            self.worker_threads, thread_name_prefix=f"{name}-forwarded"
        )
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._closing = False
        self._thread = threading.Thread(target=self._run_loop, args=(loop,), name=name, daemon=True)
        self._thread.start()
        try:
            self._aserver = asyncio.run_coroutine_threadsafe(self._listen(sock), loop).result(10)
        except BaseException:
            sock.close()
            self.stop()
            raise
        log.info("Interactive queries served at %s (listening on %s)", self.url, self.bind[0])
        return self

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _listen(self, sock: socket.socket) -> asyncio.AbstractServer:
        return await asyncio.start_server(
            self._connection,
            sock=sock,
            ssl=self._server_ssl,
            ssl_handshake_timeout=self.keepalive_timeout if self._server_ssl else None,
            limit=MAX_HEAD_BYTES,
        )

    def stop(self) -> None:
        """Stop serving: close the socket and every connection, stop the workers."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        self._closing = True
        if loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(5)
            except Exception as exc:  # pragma: no cover - best effort
                log.debug("query server shutdown: %s", exc)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        for pool in (self._pool, self._forwarded_pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._forwarded_pool = None

    async def _shutdown(self) -> None:
        if self._aserver is not None:
            self._aserver.close()
            self._aserver = None
        for writer in list(self._writers):
            writer.close()
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)

    close = stop

    def __enter__(self) -> QueryServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connections ----------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        if self.connections >= self.max_connections or self._closing:
            await self._reject(reader, writer)
            return
        self.connections += 1
        self._writers.add(writer)
        try:
            await self._serve_connection(reader, writer)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except Exception:  # pragma: no cover - a bug: log, drop the connection
            log.exception("query server connection failed")
        finally:
            self.connections -= 1
            self._writers.discard(writer)
            writer.close()

    async def _reject(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Over the connection cap: read the request (so that closing does not reset it),
        answer 503 with Retry-After, close."""
        self.rejected_connections += 1
        exchange = _Exchange(reader, writer)
        with contextlib.suppress(Exception):
            await exchange.next_request(REJECT_READ_TIMEOUT_S)
        response = _error(
            503,
            f"too many connections (at most {self.max_connections}); retry after {RETRY_AFTER_S}s",
            **{"Retry-After": str(RETRY_AFTER_S)},
        )
        try:
            await exchange.respond(response, body=True, keep_alive=False, keepalive_s=0)
        except Exception:
            pass
        finally:
            writer.close()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        exchange = _Exchange(reader, writer)
        while not self._closing:
            try:
                request = await exchange.next_request(self.keepalive_timeout)
            except (asyncio.IncompleteReadError, TimeoutError):
                return  # idle for the keep-alive timeout, or a request cut off
            except _BadRequest as exc:
                await self._write(exchange, _error(exc.status, str(exc)), True, False)
                return
            if request is None:
                return  # closed by the client
            response = self._precheck(request)
            if response is None:
                url = urllib.parse.urlsplit(request.target)
                query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
                forwarded = FORWARDED_HEADER.lower() in request.headers
                pool = self._forwarded_pool if forwarded else self._pool
                try:
                    if _is_sql(url.path):
                        text = request.body.decode("utf-8", "replace") or query.get("q", "")
                        answer = await self._sql(pool, text, forwarded)
                        if not isinstance(answer, Response):
                            await self._stream_push(reader, writer, answer)
                            return
                        response = answer
                    else:
                        response = await loop.run_in_executor(
                            pool, self._answer, url.path, query, forwarded
                        )
                except RuntimeError:  # the pool is shut down: stopping
                    response = _error(503, "the query server is stopping")
                    request.keep_alive = False
            keep = request.keep_alive and not self._closing
            if not await self._write(exchange, response, request.method != "HEAD", keep):
                return

    def _precheck(self, request: _Request) -> Response | None:
        """Answers that need no worker: authentication, methods."""
        if self._expected_auth is not None:
            given = request.headers.get("authorization", "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, self._expected_auth):
                return _error(
                    401,
                    "missing or wrong bearer token: send 'Authorization: Bearer <token>'",
                    **{"WWW-Authenticate": 'Bearer realm="interactive-queries"'},
                )
        if _is_sql(urllib.parse.urlsplit(request.target).path):
            if request.method in ("GET", "POST"):
                return None
            # a HEAD would start a push query only to drop its rows
            return _error(405, "/sql answers GET ?q= and POST", Allow="GET, POST")
        if request.method not in ("GET", "HEAD"):
            return _error(405, "only GET is supported (and POST to /sql)", Allow="GET, HEAD")
        return None

    async def _sql(self, pool: ThreadPoolExecutor | None, text: str, forwarded: bool) -> Any:
        """``service.sql`` on a worker. A push query started there after this coroutine
        was cancelled (the server stops while it starts) has no one to stream to: it is
        closed (a transient one's application, topics and group go with it)."""
        if pool is None:
            raise RuntimeError("the query server is stopping")
        future = pool.submit(self.service.sql, text, forwarded)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(_close_unstreamed)
            raise

    def _answer(self, path: str, query: dict[str, str], forwarded: bool) -> Response:
        return self.service.handle(path, query, forwarded=forwarded)

    async def _stream_push(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, push: Any
    ) -> None:
        """Stream a started push query's rows as JSON lines until the client disconnects
        (or the server stops). A thread polls the topic and hands rows to this coroutine
        through a queue of at most ``PUSH_QUEUE_BATCHES`` polls: a client that reads slower
        than the topic grows stops the polling instead of the server's memory. The answer
        has no length and ends when the connection closes; a push query that fails ends it
        with a last line ``{"error": ...}``."""
        from streaming.query import codec

        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue(PUSH_QUEUE_BATCHES)
        finished = asyncio.Event()
        stop = threading.Event()

        def hand_over(rows: list[dict[str, Any]]) -> None:
            """Wait for room in the queue (checking ``stop`` while waiting)."""
            put = asyncio.run_coroutine_threadsafe(queue.put(rows), loop)
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    put.result(0.5)
                    return
            put.cancel()

        def pump() -> None:
            try:
                while not stop.is_set():
                    rows = push.poll(0.5)
                    if rows and not stop.is_set():
                        hand_over(rows)
            except Exception as exc:
                log.warning("push query stopped: %s", exc)
                if not stop.is_set():  # the client still reads: the last line says why
                    hand_over([{"error": str(exc)}])
            finally:
                push.close()
                with contextlib.suppress(RuntimeError):  # the loop is closed: stopping
                    loop.call_soon_threadsafe(finished.set)

        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            "Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
        )
        threading.Thread(target=pump, name="sql-push-query", daemon=True).start()
        eof = asyncio.ensure_future(reader.read(1))  # b"" (or anything) ends the stream
        ended = asyncio.ensure_future(finished.wait())
        try:
            writer.write(head.encode())
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
            while not self._closing:
                get = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({get, eof, ended}, return_when=asyncio.FIRST_COMPLETED)
                if get not in done:
                    get.cancel()
                    if eof in done or queue.empty():
                        return
                    continue  # the pump ended: write what it handed over first
                writer.write(b"".join(codec.dumps(row) + b"\n" for row in get.result()))
                await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
        finally:
            stop.set()
            eof.cancel()
            ended.cancel()

    async def _write(
        self, exchange: _Exchange, response: Response, body: bool, keep_alive: bool
    ) -> bool:
        return await exchange.respond(
            response, body=body, keep_alive=keep_alive, keepalive_s=self.keepalive_timeout
        )


def _close_unstreamed(future: Future[Any]) -> None:
    """Close the push query ``future`` started, if it started one."""
    if future.cancelled() or future.exception() is not None:
        return
    answer = future.result()
    if not isinstance(answer, Response):
        with contextlib.suppress(Exception):
            answer.close()


def _is_sql(path: str) -> bool:
    return path.rstrip("/") == "/sql"


__all__ = ["QueryServer", "default_bind_host"]
