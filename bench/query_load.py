"""Interactive queries under load: end-to-end processing latency with and without 200 HTTP
clients scanning and looking up the store, as a ratio (``python -m bench.query_load``).

An application (its own process, ``python -m streaming run``) copies a steady input stream
to an output topic and counts per key into a 5,000-key store. A probe produces ~50
records/s carrying their send time and measures produced -> copy readable, without queries
and while another process runs 200 parallel HTTP clients doing full paged scans and point
lookups. Quiet and loaded phases alternate, so other work on the machine weighs on both
alike."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

from streaming.testing import LocalKafkaCluster, free_port

REPO = Path(__file__).resolve().parent.parent
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
    """The application (``python -m streaming run bench.query_load:copy_and_count``): copy the
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


def p95(values: list[float]) -> float:
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
                "group.id": f"probe-{uuid.uuid4().hex[:8]}",
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
                key, value = msg.key(), msg.value()
                if msg.error() or not key or not key.startswith(b"probe-") or value is None:
                    continue
                now = time.time()
                sent = float(value)
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

    def wait_for_all(self, timeout: float) -> None:
        """Wait until every record sent came back, for at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while len(self.samples) < self.sent and time.monotonic() < deadline:
            time.sleep(0.05)

    def latencies(self, window: tuple[float, float]) -> list[float]:
        return [lat for sent, lat in list(self.samples) if window[0] <= sent <= window[1]]

    def close(self) -> None:
        self._stop.set()
        self._reader.join(5)
        self.consumer.close()


@dataclass
class QueryLoadResult:
    """The latency samples of the quiet and the loaded phases, and the load's own figures."""

    baseline: list[float]
    loaded: list[float]
    stats: dict[str, Any]

    @property
    def expected_samples(self) -> float:
        """The probe records each kind of phase sent in all."""
        return RATE_PER_S * PHASE_S * ROUNDS

    def summary(self) -> str:
        base, load, stats = self.baseline, self.loaded, self.stats
        base_p95, load_p95 = p95(base), p95(load)
        return (
            f"query-load: p95 quiet {base_p95 * 1000:.1f} ms, under load {load_p95 * 1000:.1f} ms,"
            f" ratio {load_p95 / base_p95:.2f}"
            f"\n  quiet      n={len(base):4d}  p50={sorted(base)[len(base) // 2] * 1000:7.1f} ms"
            f"  max={max(base) * 1000:7.1f} ms"
            f"\n  under load n={len(load):4d}  p50={sorted(load)[len(load) // 2] * 1000:7.1f} ms"
            f"  max={max(load) * 1000:7.1f} ms"
            f"\n  {ROUNDS} rounds of {PHASE_S:.0f} s quiet + {PHASE_S:.0f} s loaded at"
            f" {RATE_PER_S} records/s; load: {CLIENTS} clients, {stats['scans']} full scans"
            f" ({stats['pages']} pages, {stats['entries']} entries), {stats['lookups']} lookups,"
            f" statuses {stats['statuses']}, errors {stats['errors']}, request p50"
            f" {stats.get('request_p50_ms')} ms p99 {stats.get('request_p99_ms')} ms"
        )


def _spawn_app(settings: dict[str, Any], log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "streaming", "run", "bench.query_load:copy_and_count", "--quiet"]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={value}"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with log_path.open("ab") as out:
        return subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _produce_keys(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(STORE_KEYS):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v")
        producer.poll(0)
    producer.flush(30)


def _store_full(base: str) -> bool:
    try:
        url = f"{base}/stores/counts/all?limit=10000&local=true"
        with urllib.request.urlopen(url, timeout=5) as reply:
            return len(json.loads(reply.read())["entries"]) >= STORE_KEYS
    except OSError:
        return False


def measure(cluster: LocalKafkaCluster, workdir: Path) -> QueryLoadResult:
    """Run the scenario on ``cluster`` (topics and state under fresh names and ``workdir``)."""
    bootstrap = cluster.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    source, copy, counts = f"ql-in-{tag}", f"ql-copy-{tag}", f"ql-counts-{tag}"
    for topic in (source, copy, counts):
        cluster.create_topic(topic, partitions=3)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = workdir / "query-load-app.log"
    proc = _spawn_app(
        {
            "application.id": f"ql-{tag}",
            "bootstrap.servers": bootstrap,
            "state.dir": str(workdir / "state"),
            "application.server": f"127.0.0.1:{port}",
            "commit.interval.ms": 100,
            "app.ql.input": source,
            "app.ql.copy": copy,
            "app.ql.counts": counts,
        },
        log_path,
    )
    probe = None
    load = None
    try:
        _produce_keys(bootstrap, source)
        deadline = time.monotonic() + 40
        while not _store_full(base):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "the application did not serve its 5,000-key store within 40 s:\n"
                    + log_path.read_text()[-5000:]
                )
            time.sleep(0.5)
        probe = LatencyProbe(bootstrap, source, copy)
        load = subprocess.Popen(
            [sys.executable, "-c", LOAD_SCRIPT, str(port), str(CLIENTS), str(STORE_KEYS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert load.stdin is not None and load.stdout is not None
        stdin, stdout = load.stdin, load.stdout

        def command(text: str) -> None:
            stdin.write(text + "\n")
            stdin.flush()
            answer = stdout.readline().strip()
            if answer != text:
                raise RuntimeError(f"the load generator answered {answer!r} to {text!r}")

        if stdout.readline().strip() != "ready":
            raise RuntimeError("the load generator did not start")
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
        probe.wait_for_all(10.0)  # the last probe records arrive
        baseline = [lat for w in quiet_windows for lat in probe.latencies(w)]
        loaded = [lat for w in loaded_windows for lat in probe.latencies(w)]
    finally:
        if load is not None and load.poll() is None:
            load.kill()
            load.wait()
        if probe is not None:
            probe.close()
        if proc.poll() is None:
            proc.terminate()
        proc.wait(60)
    return QueryLoadResult(baseline, loaded, stats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    import tempfile

    with LocalKafkaCluster(nodes=1) as cluster, tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            workdir = Path(tmp) / f"run-{i}"
            workdir.mkdir()
            print(measure(cluster, workdir).summary(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
