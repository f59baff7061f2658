"""Interactive queries under load do not starve processing.

An application (its own process, ``python -m streaming run``) copies a steady input stream
to an output topic and counts per key. This test produces ~50 records/s carrying their send
time and measures the end-to-end latency (produced -> copy readable) without queries and
while another process runs 200 parallel HTTP clients doing full paged scans of the
5,000-key store and point lookups. Quiet and loaded phases alternate (3 rounds) so that the
other work on the machine weighs on both alike. The loaded p95 must stay within twice the
quiet p95 plus 100 ms; the figures are printed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from test_app_support import produce, spawn_app, stop_app, unique, wait_for

from streaming.testing import free_port

STORE_KEYS = 5_000
CLIENTS = 200
RATE_PER_S = 50
ROUNDS = 3
PHASE_S = 3.0

#: the load generator: CLIENTS threads, each alternating one full paged scan of the store
#: and 10 point lookups on one keep-alive connection while the load is on (a pause keeps
#: each client's place). Commands on
#: stdin: "on", "off" (answers once no request is in flight any more), "quit" (prints stats)
LOAD_SCRIPT = r"""
import http.client, json, random, sys, threading, time
import orjson

port, clients, keys = (int(a) for a in sys.argv[1:4])
lock = threading.Lock()
stats = {"scans": 0, "pages": 0, "entries": 0, "lookups": 0, "statuses": {}, "errors": 0}
durations = []
running = threading.Event()
done = threading.Event()
inflight = [0]

class Paused(Exception):
    pass

def get(conn, path):
    if not running.is_set():
        raise Paused
    with lock:
        inflight[0] += 1
    try:
        began = time.monotonic()
        conn.request("GET", path)
        reply = conn.getresponse()
        body = reply.read()
        durations.append(time.monotonic() - began)
    finally:
        with lock:
            inflight[0] -= 1
    with lock:
        stats["statuses"][str(reply.status)] = stats["statuses"].get(str(reply.status), 0) + 1
    return reply.status, body

def client(i):
    # one scan then ten lookups, over and over; a pause ("off") keeps the position
    rng = random.Random(i)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    cursor, pages, seen, lookups = None, 0, 0, 0
    while not done.is_set():
        if not running.wait(0.1):
            continue
        try:
            if lookups == 0:
                path = "/stores/counts/all" + (f"?cursor={cursor}" if cursor else "")
                status, body = get(conn, path)
                page = orjson.loads(body) if status == 200 else {"entries": [], "next_cursor": None}
                pages += 1
                seen += len(page["entries"])
                cursor = page["next_cursor"]
                if cursor is None:
                    with lock:
                        stats["pages"] += pages
                        stats["entries"] += seen
                        stats["scans"] += seen >= keys
                    pages, seen, lookups = 0, 0, 10
            else:
                status, _ = get(conn, f"/stores/counts/keys/k{rng.randrange(keys)}")
                lookups -= 1
                with lock:
                    stats["lookups"] += status == 200
        except Paused:
            pass
        except Exception:
            with lock:
                stats["errors"] += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            time.sleep(0.05)
    with lock:
        stats["pages"] += pages
        stats["entries"] += seen
    conn.close()

threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
for t in threads:
    t.start()
print("ready", flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "on":
        running.set()
    elif command == "off":
        running.clear()
        deadline = time.monotonic() + 10
        while inflight[0] and time.monotonic() < deadline:
            time.sleep(0.02)
    print(command, flush=True)
    if command == "quit":
        break
done.set()
running.clear()
for t in threads:
    t.join(70)
durations.sort()
if durations:
    stats["request_p50_ms"] = round(durations[len(durations) // 2] * 1000, 1)
    stats["request_p99_ms"] = round(durations[int(len(durations) * 0.99)] * 1000, 1)
print(json.dumps(stats), flush=True)
"""


def copy_and_count(config: dict) -> object:
    """The application (``python -m streaming run test_query_load:copy_and_count``): copy the
    input, and count per key into the store "counts"; topics from ``app.ql.*`` settings."""
    from streaming import StreamsBuilder, serdes

    builder = StreamsBuilder()
    stream = builder.stream(
        config["app.ql.input"], key_serde=serdes.String(), value_serde=serdes.String()
    )
    stream.to(config["app.ql.copy"])
    stream.group_by_key().count(materialized="counts").to_stream().to(
        config["app.ql.counts"], value_serde=serdes.Long()
    )
    return builder


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


class LatencyProbe:
    """Produces timestamped records at a steady rate and reads them back from the copy topic:
    (send time, end-to-end latency) samples."""

    def __init__(self, bootstrap: str, source: str, copy: str) -> None:
        self.source = source
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("probe"),
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 20,
            }
        )
        parts = self.consumer.list_topics(copy, timeout=10).topics[copy].partitions
        self.consumer.assign([TopicPartition(copy, p, OFFSET_END) for p in sorted(parts)])
        self.samples: list[tuple[float, float]] = []
        self.sent = 0
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            for msg in self.consumer.consume(num_messages=100, timeout=0.05):
                if msg.error() or not msg.key() or not msg.key().startswith(b"probe-"):
                    continue
                now = time.time()
                sent = float(msg.value())
                self.samples.append((sent, now - sent))

    def run(self, seconds: float) -> tuple[float, float]:
        """Produce for ``seconds``; returns the (start, end) send-time interval."""
        begin = time.time()
        interval = 1.0 / RATE_PER_S
        next_at = time.monotonic()
        end_at = next_at + seconds
        while next_at < end_at:
            self.producer.produce(
                self.source, key=f"probe-{self.sent % 10}".encode(), value=repr(time.time())
            )
            self.sent += 1
            self.producer.poll(0)
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))
        self.producer.flush(10)
        return begin, time.time()

    def latencies(self, window: tuple[float, float]) -> list[float]:
        return [lat for sent, lat in list(self.samples) if window[0] <= sent <= window[1]]

    def close(self) -> None:
        self._stop.set()
        self._reader.join(5)
        self.consumer.close()


def test_processing_latency_under_query_load(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    source, copy, counts = unique("ql-in"), unique("ql-copy"), unique("ql-counts")
    for topic in (source, copy, counts):
        kafka_cluster.create_topic(topic, partitions=3)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = spawn_app(
        "test_query_load:copy_and_count",
        {
            "application.id": unique("ql"),
            "bootstrap.servers": bootstrap,
            "state.dir": str(tmp_path / "state"),
            "application.server": f"127.0.0.1:{port}",
            "commit.interval.ms": 100,
            "app.ql.input": source,
            "app.ql.copy": copy,
            "app.ql.counts": counts,
        },
        log_path=tmp_path / "app.log",
    )
    probe = None
    load = None
    try:
        produce(bootstrap, source, ((f"k{i}".encode(), b"v", None) for i in range(STORE_KEYS)))

        def store_full() -> bool:
            try:
                url = f"{base}/stores/counts/all?limit=10000&local=true"
                with urllib.request.urlopen(url, timeout=5) as reply:
                    return len(json.loads(reply.read())["entries"]) >= STORE_KEYS
            except OSError:
                return False

        try:
            wait_for(store_full, 40, "the application serving its 5,000-key store", step=0.5)
        except AssertionError:
            print((tmp_path / "app.log").read_text()[-5000:])
            raise
        probe = LatencyProbe(bootstrap, source, copy)
        load = subprocess.Popen(
            [sys.executable, "-c", LOAD_SCRIPT, str(port), str(CLIENTS), str(STORE_KEYS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

        def command(text: str) -> None:
            assert load is not None and load.stdin is not None and load.stdout is not None
            load.stdin.write(text + "\n")
            load.stdin.flush()
            assert load.stdout.readline().strip() == text

        assert load.stdout is not None and load.stdout.readline().strip() == "ready"
        probe.run(1.0)  # warm up
        quiet_windows, loaded_windows = [], []
        for _ in range(ROUNDS):
            quiet_windows.append(probe.run(PHASE_S))
            command("on")
            time.sleep(0.5)  # every client has requests in flight
            loaded_windows.append(probe.run(PHASE_S))
            command("off")  # and the server's queue drained
        command("quit")
        out, _ = load.communicate(timeout=90)
        stats = json.loads(out.strip().splitlines()[-1])
        time.sleep(1.0)  # the last probe records arrive
        baseline = [lat for w in quiet_windows for lat in probe.latencies(w)]
        loaded = [lat for w in loaded_windows for lat in probe.latencies(w)]
    finally:
        if load is not None and load.poll() is None:
            load.kill()
            load.wait()
        if probe is not None:
            probe.close()
        stop_app(proc)

    base_p95, load_p95 = _p95(baseline), _p95(loaded)
    budget = 2 * base_p95 + 0.1
    print(
        f"\nend-to-end latency (produce -> copy visible), {RATE_PER_S} records/s:"
        f"\n  baseline   n={len(baseline):4d}  p50={sorted(baseline)[len(baseline) // 2] * 1000:7.1f} ms"
        f"  p95={base_p95 * 1000:7.1f} ms  max={max(baseline) * 1000:7.1f} ms"
        f"\n  under load n={len(loaded):4d}  p50={sorted(loaded)[len(loaded) // 2] * 1000:7.1f} ms"
        f"  p95={load_p95 * 1000:7.1f} ms  max={max(loaded) * 1000:7.1f} ms"
        f"  (budget {budget * 1000:.1f} ms)"
        f"\n  {ROUNDS} rounds of {PHASE_S:.0f} s quiet + {PHASE_S:.0f} s loaded;"
        f" load: {CLIENTS} clients, {stats['scans']} full scans ({stats['pages']} pages, "
        f"{stats['entries']} entries), {stats['lookups']} lookups, statuses {stats['statuses']},"
        f" errors {stats['errors']},"
        f" request p50 {stats.get('request_p50_ms')} ms p99 {stats.get('request_p99_ms')} ms"
    )
    # the probe's records all came through, before and under load
    expected = RATE_PER_S * PHASE_S * ROUNDS
    assert len(baseline) >= 0.9 * expected and len(loaded) >= 0.9 * expected
    # the load was real: whole-store scans (a page for every client at least) and lookups,
    # all answered
    assert stats["pages"] >= CLIENTS and stats["scans"] >= 20 and stats["lookups"] >= 100
    assert stats["errors"] == 0 and set(stats["statuses"]) == {"200"}
    assert load_p95 <= budget, f"p95 under load {load_p95:.3f}s > budget {budget:.3f}s"
