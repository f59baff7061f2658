"""A push query's rows reach the client through a bounded hand-over: a client that stops
reading stops the query's polling (the topic is the buffer), and one that reads gets every
row in order. The push query is a stand-in for the Kafka consumer behind it; the HTTP server
and its threads are the real ones."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

import orjson

from streaming.query import QueryServer

ROWS_PER_POLL = 500
#: more than the client's and the server's socket buffers hold together on loopback
SOCKET_BUFFERS_BYTES = 16 * 1024 * 1024


class EndlessPush:
    """A push query over a topic that always has more rows: poll() returns the next ones."""

    def __init__(self) -> None:
        self.polls = 0
        self.closed = threading.Event()

    def poll(self, timeout: float) -> list[dict]:
        start = self.polls * ROWS_PER_POLL
        self.polls += 1
        return [{"n": n, "pad": "x" * 200} for n in range(start, start + ROWS_PER_POLL)]

    def close(self) -> None:
        self.closed.set()


def _serve(push: EndlessPush) -> QueryServer:
    streams = SimpleNamespace(host_info=SimpleNamespace(host="", port=-1), config=None)
    server = QueryServer(streams, bind=("127.0.0.1", 0))
    server.service.sql = lambda text, forwarded=False: push  # type: ignore[method-assign]
    return server.start()


def _request(port: int, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    body = b"SELECT * FROM t EMIT CHANGES"
    sock.sendall(
        b"POST /sql HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    return sock


def _settled(read: Callable[[], int], step: float = 0.5, rounds: int = 40) -> int:
    """The value of read() once it stopped changing for a step."""
    last = read()
    for _ in range(rounds):
        time.sleep(step)
        now = read()
        if now == last:
            return now
        last = now
    raise AssertionError(f"still changing after {step * rounds} s: {last}")


def test_a_client_that_stops_reading_stops_the_polling():
    push = EndlessPush()
    server = _serve(push)
    try:
        sock = _request(server.port, rcvbuf=4096)
        # nothing is read: the socket buffers fill, then the bounded queue, then poll() waits
        polls = _settled(lambda: push.polls)
        # what was polled sits in the kernel's socket buffers (a few MB on loopback) and the
        # hand-over queue; without the bound it was tens of thousands of polls and growing
        assert polls * ROWS_PER_POLL * 200 <= SOCKET_BUFFERS_BYTES, polls
        time.sleep(1.5)
        assert push.polls == polls, "the query kept polling for a client that reads nothing"
        sock.close()
        assert push.closed.wait(10), "the push query was not closed with the connection"
    finally:
        server.stop()


def test_a_reading_client_gets_every_row_in_order():
    push = EndlessPush()
    server = _serve(push)
    try:
        sock = _request(server.port)
        buf = b""
        while buf.count(b"\n") < 20 * ROWS_PER_POLL + 10:
            chunk = sock.recv(1 << 16)
            assert chunk, "the stream ended"
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        lines = body.split(b"\n")[: 20 * ROWS_PER_POLL]
        assert [orjson.loads(line)["n"] for line in lines] == list(range(20 * ROWS_PER_POLL))
        sock.close()
        assert push.closed.wait(10)
    finally:
        server.stop()


def test_head_on_sql_starts_no_query():
    push = EndlessPush()
    server = _serve(push)
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(
            b"HEAD /sql?q=SELECT%20*%20FROM%20t%20EMIT%20CHANGES HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            assert chunk, "the server closed the connection without an answer"
            head += chunk
        assert head.startswith(b"HTTP/1.1 405 "), head
        assert b"Allow: GET, POST" in head, head
        time.sleep(1)
        assert push.polls == 0
        sock.close()
    finally:
        server.stop()


class FailingPush(EndlessPush):
    """A push query that returns one batch, then fails (its application stopped)."""

    def poll(self, timeout: float) -> list[dict]:
        self.polls += 1
        if self.polls > 1:
            raise RuntimeError("push query cancelled: its reader took no rows")
        return [{"n": 0}]


def test_a_failing_push_query_ends_the_stream_with_an_error_line():
    push = FailingPush()
    server = _serve(push)  # type: ignore[arg-type]
    try:
        sock = _request(server.port)
        sock.settimeout(10)
        buf = b""
        while chunk := sock.recv(1 << 16):  # the server closes the connection at the end
            buf += chunk
        body = buf.partition(b"\r\n\r\n")[2]
        assert [orjson.loads(line) for line in body.splitlines()] == [
            {"n": 0},
            {"error": "push query cancelled: its reader took no rows"},
        ]
        assert push.closed.wait(10)
    finally:
        server.stop()


def test_a_push_query_that_starts_after_the_server_stopped_is_closed():
    # the server stops while a worker still starts the push query (a transient one takes
    # seconds): the query it then returns has no connection to stream to, and is closed
    push = EndlessPush()
    starting, release = threading.Event(), threading.Event()

    def slow_start(text: str, forwarded: bool = False) -> EndlessPush:
        starting.set()
        release.wait(10)
        return push

    streams = SimpleNamespace(host_info=SimpleNamespace(host="", port=-1), config=None)
    server = QueryServer(streams, bind=("127.0.0.1", 0))
    server.service.sql = slow_start  # type: ignore[method-assign]
    server.start()
    try:
        sock = _request(server.port)
        assert starting.wait(10)
        server.stop()
        release.set()
        assert push.closed.wait(10), "the push query started for a stopped server leaked"
        assert push.polls == 0
        sock.close()
    finally:
        release.set()
        server.stop()
