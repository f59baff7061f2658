"""The query server's HTTP/1.1 framing (h11 on the asyncio server): a chunked ``POST /sql``,
``Expect: 100-continue``, conflicting ``Content-Length`` headers and keep-alive, over raw
sockets as clients send them. The SQL answer is a stand-in that echoes the statement; the
server, its event loop and its workers are the real ones."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import orjson
import pytest

from streaming.query import QueryServer
from streaming.query.service import Response


@pytest.fixture(scope="module")
def server():
    streams = SimpleNamespace(host_info=SimpleNamespace(host="", port=-1), config=None)
    server = QueryServer(streams, bind=("127.0.0.1", 0))
    server.service.sql = lambda text, forwarded=False: Response(  # type: ignore[method-assign]
        200, orjson.dumps({"statement": text})
    )
    server.start()
    yield server
    server.stop()


def _answers(sock: socket.socket, count: int) -> list[tuple[bytes, bytes]]:
    """``count`` answers (status line, body) read off ``sock``, framed by Content-Length."""
    buf, answers = b"", []
    while len(answers) < count:
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if sep:
            lines = head.split(b"\r\n")
            fields = dict(line.lower().split(b": ", 1) for line in lines[1:])
            length = int(fields.get(b"content-length", b"0"))
            if len(rest) >= length:
                answers.append((lines[0], rest[:length]))
                buf = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"closed after {answers}"
        buf += chunk
    return answers


def _connect(server: QueryServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def test_a_chunked_sql_post_is_read_whole(server: QueryServer) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"POST /sql HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"7\r\nSELECT \r\n8\r\n* FROM t\r\n0\r\n\r\n"
            b"GET /sql?q=SELECT%201 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        (first, body), (second, again) = _answers(sock, 2)  # the connection stayed usable
    assert first == b"HTTP/1.1 200 OK" and orjson.loads(body) == {"statement": "SELECT * FROM t"}
    assert second == b"HTTP/1.1 200 OK" and orjson.loads(again) == {"statement": "SELECT 1"}


def test_expect_100_continue_is_answered_before_the_body(server: QueryServer) -> None:
    statement = b"SELECT region FROM orders"
    with _connect(server) as sock:
        sock.sendall(
            b"POST /sql HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(statement)
        )
        interim = sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 "), interim
        sock.sendall(statement)
        ((status, body),) = _answers(sock, 1)
    assert status == b"HTTP/1.1 200 OK"
    assert orjson.loads(body) == {"statement": statement.decode()}


@pytest.mark.parametrize(
    "head",
    [
        b"POST /sql HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabc",
        b"GET /health HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n",
        b"GET /health HTTP/1.1\r\n\r\n",  # HTTP/1.1 needs a Host
    ],
    ids=["conflicting content-length", "malformed header", "no host"],
)
def test_a_malformed_request_gets_400_and_the_connection_closes(
    server: QueryServer, head: bytes
) -> None:
    with _connect(server) as sock:
        sock.sendall(head)
        ((status, body),) = _answers(sock, 1)
        assert status.startswith(b"HTTP/1.1 400 "), (status, body)
        assert "error" in orjson.loads(body)
        assert sock.recv(1) == b""


def test_a_body_over_the_limit_is_refused_unread(server: QueryServer) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"POST /sql HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: 999999999\r\n\r\n"
        )
        ((status, _),) = _answers(sock, 1)
    assert status.startswith(b"HTTP/1.1 413 ")
