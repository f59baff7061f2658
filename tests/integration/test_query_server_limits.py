"""The query server under many clients, with paging, a bearer token and TLS.

One running single-instance application (3 partitions, a key-value and a window store) is
shared by the module; each test starts its own ``QueryServer`` on it with the settings under
test: 2,000 idle connections cost no threads, connections over the cap get 503 +
Retry-After, idle connections time out, pages of ``/all`` and ``/range`` hold every entry
exactly once, 401 without the token, https with a self-signed certificate. A two-instance
application with token + TLS set through its config forwards (over https, with the token)
keys and scan pages of the other instance."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request

import orjson
import pytest
from test_app_support import T0, produce, unique, wait_for

from streaming import Materialized, StreamsBuilder, TimeWindows, serdes
from streaming.app import KafkaStreams, State
from streaming.query import QueryServer

KEYS = 600
#: window store retention 10 min -> 5 min segments; records span ~9.5 min (several segments)
RETENTION_MS = 600_000
STEP_MS = 950


def _topology(source: str):
    builder = StreamsBuilder()
    stream = builder.stream(source, key_serde=serdes.String(), value_serde=serdes.String())
    grouped = stream.group_by_key()
    grouped.count(materialized="counts")
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(1_000)).count(
        materialized=Materialized.as_("windows").with_retention(RETENTION_MS)
    )
    return builder.build()


def _keys() -> list[str]:
    return [f"k{i:04d}" for i in range(KEYS)]


def _records():
    # every key twice, at two times that often fall in different window-store segments, in
    # time order (the windows have no grace)
    keys = _keys()
    records = []
    for i, key in enumerate(keys):
        records.append((key.encode(), b"v", T0 + i * STEP_MS))
        records.append((key.encode(), b"v", T0 + ((i + KEYS // 2) % KEYS) * STEP_MS))
    return sorted(records, key=lambda r: r[2])


def _expected_windows() -> set[tuple[str, int]]:
    out = set()
    for i, key in enumerate(_keys()):
        for ts in (T0 + i * STEP_MS, T0 + ((i + KEYS // 2) % KEYS) * STEP_MS):
            out.add((key, ts // 1000 * 1000))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(
    base: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
    **params: str,
) -> tuple[int, object, dict[str, str]]:
    url = base + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
    request = urllib.request.Request(url, headers=headers or {})
    # straight to the instance, whatever proxy the environment names
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    try:
        with opener.open(request, timeout=30) as reply:
            body, status, got = reply.read(), reply.status, dict(reply.headers)
    except urllib.error.HTTPError as exc:
        body, status, got = exc.read(), exc.code, dict(exc.headers)
    if got.get("Content-Type", "").startswith("application/json"):
        return status, orjson.loads(body), got
    return status, body.decode(), got


def _all_pages(base: str, path: str, limit: int, *, params=None, max_pages: int = 1000, **kw):
    """Follow next_cursor from the first page; returns the pages' entry lists."""
    pages = []
    query = {"limit": str(limit), **(params or {})}
    for _ in range(max_pages):
        status, body, _ = _get(base, path, **kw, **query)
        assert status == 200, body
        assert len(body["entries"]) <= limit
        pages.append(body["entries"])
        if body["next_cursor"] is None:
            return pages
        query["cursor"] = body["next_cursor"]
    raise AssertionError(f"no last page after {max_pages} pages")


def _server_threads(server: QueryServer) -> list[threading.Thread]:
    prefix = f"query-server-{server.bind[0]}:{server.port}"
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


@pytest.fixture(scope="module")
def app(kafka_cluster, tmp_path_factory):
    bootstrap = kafka_cluster.bootstrap_servers
    source = unique("qsl-in")
    kafka_cluster.create_topic(source, partitions=3)
    config = {
        "application.id": unique("qsl"),
        "bootstrap.servers": bootstrap,
        "state.dir": str(tmp_path_factory.mktemp("qsl")),
        "application.server": f"127.0.0.1:{_free_port()}",
        "commit.interval.ms": 100,
    }
    streams = KafkaStreams(_topology(source), config)
    streams.start()
    try:
        assert streams.wait_until(State.RUNNING, 60)
        wait_for(lambda: len(streams.local_tasks()) == 3, 60, "three tasks")
        produce(bootstrap, source, _records())

        def counted():
            try:
                view = streams.store("counts")
                return len(view.all()) == KEYS and all(v == 2 for _, v in view.all())
            except Exception:
                return False

        wait_for(counted, 60, "every key counted twice")
        wait_for(
            lambda: len(streams.store("windows").all()) == len(_expected_windows()),
            60,
            "every window",
        )
        yield streams
    finally:
        streams.close(60)


def test_paging_returns_every_entry_exactly_once(app):
    base = app.query_server.url
    keys = _keys()
    for limit in (7, 250, 1000):
        pages = _all_pages(base, "/stores/counts/all", limit)
        got = [e["key"] for page in pages for e in page]
        assert len(got) == len(set(got)) == KEYS, limit  # exactly once
        assert sorted(got) == keys
        assert all(e["value"] == 2 for page in pages for e in page)
        assert len(pages) >= -(-KEYS // limit)
    # the default limit (1000) answers this store in one page
    status, body, _ = _get(base, "/stores/counts/all")
    assert status == 200 and len(body["entries"]) == KEYS and body["next_cursor"] is None
    # a key range, paged
    pages = _all_pages(base, "/stores/counts/range", 9, params={"from": "k0100", "to": "k0199"})
    got = [e["key"] for page in pages for e in page]
    assert sorted(got) == [k for k in keys if "k0100" <= k <= "k0199"] and len(got) == 100
    # local pages (one instance: the same entries), one partition at a time
    got = [
        e["key"]
        for p in _all_pages(base, "/stores/counts/all", 50, params={"local": "true"})
        for e in p
    ]
    assert sorted(got) == keys
    per_partition = []
    for partition in range(3):
        pages = _all_pages(base, "/stores/counts/all", 40, params={"partition": str(partition)})
        per_partition.append([e["key"] for page in pages for e in page])
    assert all(per_partition) and sorted(k for part in per_partition for k in part) == keys

    # window store: /all and a window-start range, across segments and several windows a key
    expected = _expected_windows()
    for limit in (11, 500):
        pages = _all_pages(base, "/stores/windows/all", limit)
        got = [(e["key"], e["start"]) for page in pages for e in page]
        assert len(got) == len(set(got)) == len(expected), limit
        assert set(got) == expected
        assert all(e["end"] == e["start"] + 1000 and e["value"] == 1 for p in pages for e in p)
    lo, hi = T0 + 100 * STEP_MS, T0 + 400 * STEP_MS
    pages = _all_pages(base, "/stores/windows/range", 13, params={"from": str(lo), "to": str(hi)})
    got = [(e["key"], e["start"]) for page in pages for e in page]
    assert len(got) == len(set(got)) and set(got) == {w for w in expected if lo <= w[1] <= hi}

    # bad parameters
    status, body, _ = _get(base, "/stores/counts/all", cursor="not-a-cursor!")
    assert status == 400 and "cursor" in body["error"]
    status, body, _ = _get(base, "/stores/counts/all", limit="0")
    assert status == 400 and "limit" in body["error"]
    status, body, _ = _get(base, "/stores/counts/all", limit="10001")
    assert status == 400 and "limit" in body["error"]


def test_idle_connections_do_not_make_threads(app):
    n = 2000
    server = QueryServer(
        app, bind=("127.0.0.1", 0), max_connections=n + 100, keepalive_timeout=60
    ).start()
    socks: list[socket.socket] = []
    try:
        threads_before = threading.active_count()
        for _ in range(n):
            socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        wait_for(lambda: server.connections == n, 30, f"{n} open connections", step=0.05)
        # a few of them make a request and stay open (keep-alive), the rest stay silent
        for sock in socks[:50]:
            sock.sendall(b"GET /stores/counts/keys/k0001 HTTP/1.1\r\nHost: x\r\n\r\n")
        for sock in socks[:50]:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(65536)
                assert chunk, "the server closed a keep-alive connection"
                head += chunk
            assert head.startswith(b"HTTP/1.1 200 ")
            assert b"Keep-Alive: timeout=60" in head
        assert server.connections == n
        added = threading.active_count() - threads_before
        own = _server_threads(server)
        print(f"\n{n} open connections: {added} more threads, {len(own)} server threads")
        # the event loop thread and at most the two worker pools, whatever the connections
        assert len(own) <= 1 + 2 * server.worker_threads
        assert added <= 2 * server.worker_threads
        assert server.rejected_connections == 0
    finally:
        for sock in socks:
            sock.close()
        server.stop()


def test_over_the_cap_503_and_idle_timeout(app):
    server = QueryServer(
        app, bind=("127.0.0.1", 0), max_connections=4, keepalive_timeout=1.0
    ).start()
    base = server.url
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(4)]
    try:
        wait_for(lambda: server.connections == 4, 10, "four open connections", step=0.05)
        status, body, headers = _get(base, "/stores/counts/keys/k0001")
        assert status == 503
        assert headers["Retry-After"] == "1"
        assert "too many connections" in body["error"]
        assert server.rejected_connections == 1
        # idle connections are closed after the keep-alive timeout (1 s): EOF, bounded wait
        for sock in socks:
            sock.settimeout(10)
            assert sock.recv(1) == b""
        wait_for(lambda: server.connections == 0, 10, "no connections", step=0.05)
        status, body, _ = _get(base, "/stores/counts/keys/k0001")
        assert status == 200 and body["value"] == 2
        # a client that sends half a request head is cut off too
        slow = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        slow.sendall(b"GET /health HTTP/1.1\r\n")
        assert slow.recv(1) == b""
        slow.close()
    finally:
        for sock in socks:
            sock.close()
        server.stop()


def test_bearer_token(app):
    with QueryServer(app, bind=("127.0.0.1", 0), auth_token="s3cret-token") as server:
        base = server.url
        status, body, headers = _get(base, "/stores/counts/keys/k0002")
        assert status == 401 and "bearer token" in body["error"]
        assert headers["WWW-Authenticate"].startswith("Bearer")
        status, _, _ = _get(base, "/health", headers={"Authorization": "Bearer wrong"})
        assert status == 401
        auth = {"Authorization": "Bearer s3cret-token"}
        status, body, _ = _get(base, "/stores/counts/keys/k0002", headers=auth)
        assert status == 200 and body["value"] == 2
        status, body, _ = _get(base, "/stores/counts/all", headers=auth, limit="5")
        assert status == 200 and len(body["entries"]) == 5 and body["next_cursor"]
        # a keep-alive connection: 401 then 200 on the same connection
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/health")
        reply = conn.getresponse()
        assert reply.status == 401
        reply.read()
        conn.request("GET", "/health", headers=auth)
        reply = conn.getresponse()
        assert reply.status == 200 and orjson.loads(reply.read())["state"] == "RUNNING"
        conn.request("POST", "/health", body=b"{}", headers=auth)
        reply = conn.getresponse()
        assert reply.status == 405
        reply.read()
        conn.close()


def _self_signed(directory) -> tuple[str, str]:
    """A self-signed certificate for localhost / 127.0.0.1: (certfile, keyfile)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:  # pragma: no cover - the openssl CLI instead
        import subprocess

        cert, key = directory / "cert.pem", directory / "key.pem"
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert),
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
        return str(cert), str(key)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = directory / "cert.pem", directory / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(certfile), str(keyfile)


def test_tls_with_a_self_signed_certificate(app, tmp_path):
    certfile, keyfile = _self_signed(tmp_path)
    with QueryServer(app, bind=("127.0.0.1", 0), certfile=certfile, keyfile=keyfile) as server:
        base = server.url
        assert base.startswith("https://127.0.0.1:")
        trusting = ssl.create_default_context(cafile=certfile)
        status, body, _ = _get(base, "/stores/counts/keys/k0003", context=trusting)
        assert status == 200 and body["value"] == 2
        pages = _all_pages(base, "/stores/counts/all", 200, context=trusting)
        assert sorted(e["key"] for p in pages for e in p) == _keys()
        # not trusted by default; plain http gets no answer
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            _get(base, "/health", context=ssl.create_default_context())
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            _get(base.replace("https://", "http://"), "/health")


def test_two_instances_forward_over_tls_with_the_token(kafka_cluster, tmp_path, monkeypatch):
    # forwarding between instances never goes through the environment's proxy
    dead_proxy = f"http://127.0.0.1:{_free_port()}"
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    bootstrap = kafka_cluster.bootstrap_servers
    source = unique("qst-in")
    kafka_cluster.create_topic(source, partitions=4)
    certfile, keyfile = _self_signed(tmp_path)
    token = "shared-token"
    app_id = unique("qst")
    apps: list[KafkaStreams] = []
    keys = [f"key-{i}" for i in range(40)]
    try:
        for i in range(2):
            config = {
                "application.id": app_id,
                "bootstrap.servers": bootstrap,
                "state.dir": str(tmp_path / f"i{i}"),
                # advertised "localhost" (the certificate's name): listens on 127.0.0.1
                "application.server": f"localhost:{_free_port()}",
                "commit.interval.ms": 100,
                "consumer.session.timeout.ms": 6000,
                "interactive.queries.http.auth.token": token,
                "interactive.queries.http.tls.certfile": certfile,
                "interactive.queries.http.tls.keyfile": keyfile,
                "interactive.queries.http.worker.threads": 2,
            }
            app = KafkaStreams(_topology(source), config)
            app.start()
            apps.append(app)
        for app in apps:
            assert app.query_server.bind[0] == "127.0.0.1"
            assert app.query_server.url.startswith("https://localhost:")
            assert app.wait_until(State.RUNNING, 60)
        wait_for(
            lambda: all(len(a.local_tasks()) == 2 and a.state is State.RUNNING for a in apps),
            60,
            "two tasks on each instance",
        )
        produce(bootstrap, source, ((k.encode(), b"v", T0) for k in keys))
        wait_for(
            lambda: sum(len(a.store("counts").all()) for a in apps) == len(keys),
            60,
            "every key counted",
        )
        trusting = ssl.create_default_context(cafile=certfile)
        auth = {"Authorization": f"Bearer {token}"}
        base = apps[0].query_server.url
        status, _, _ = _get(base, "/stores/counts/keys/key-1", context=trusting)
        assert status == 401
        forwarded = 0
        for key in keys:
            status, body, headers = _get(
                base, f"/stores/counts/keys/{key}", headers=auth, context=trusting
            )
            assert status == 200 and body["value"] == 1, body
            forwarded += "X-Streaming-Answered-By" in headers
        assert 0 < forwarded < len(keys)  # the other instance answered its keys over https
        # over kept-alive connections: one TLS handshake each, not one per forwarded request
        pools = apps[0].query_server.service._pool.pools
        (other,) = pools.keys()
        pool = pools[other]
        assert pool.num_connections <= 2, (pool.num_connections, forwarded)
        pages = _all_pages(base, "/stores/counts/all", 3, headers=auth, context=trusting)
        got = [e["key"] for page in pages for e in page]
        assert len(got) == len(set(got)) and sorted(got) == sorted(keys)
        status, body, _ = _get(base, "/stores/counts/all", headers=auth, context=trusting)
        assert status == 200 and len(body["hosts"]) == 2
    finally:
        for app in apps:
            app.close(60)
