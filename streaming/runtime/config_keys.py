"""The names of every ``StreamsConfig`` setting, the processing guarantees, and the set of
keys a configuration may hold (``config`` validates values, ``client_settings`` routes the
client settings)."""

from __future__ import annotations

import re

from streaming.dsl.processors import quiet_close

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"
GUARANTEES = {
    AT_LEAST_ONCE: AT_LEAST_ONCE,
    EXACTLY_ONCE_V2: EXACTLY_ONCE_V2,
    "exactly_once_beta": EXACTLY_ONCE_V2,
}

APPLICATION_ID = "application.id"
BOOTSTRAP_SERVERS = "bootstrap.servers"
PROCESSING_GUARANTEE = "processing.guarantee"
COMMIT_INTERVAL_MS = "commit.interval.ms"
STATE_DIR = "state.dir"
NUM_STREAM_THREADS = "num.stream.threads"
#: ours: what runs num.stream.threads > 1: "processes" (default; CPython threads share one
#: core) or "threads" (one process, for processors with in-process side effects)
STREAM_WORKERS = "stream.workers"
STREAM_WORKER_KINDS = ("processes", "threads")
NUM_STANDBY_REPLICAS = "num.standby.replicas"
MAX_TASK_IDLE_MS = "max.task.idle.ms"
CACHE_MAX_BYTES = "statestore.cache.max.bytes"
CACHE_MAX_BYTES_BUFFERING = "cache.max.bytes.buffering"
#: KIP-892: what the transactional stores (exactly-once) of an instance may hold uncommitted
#: in memory, split among its stream threads; reaching it commits early (-1: no limit)
STATESTORE_UNCOMMITTED_MAX_BYTES = "statestore.uncommitted.max.bytes"
APPLICATION_SERVER = "application.server"
DEFAULT_KEY_SERDE = "default.key.serde"
DEFAULT_VALUE_SERDE = "default.value.serde"
DEFAULT_TIMESTAMP_EXTRACTOR = "default.timestamp.extractor"
DESERIALIZATION_HANDLER = "default.deserialization.exception.handler"
DESERIALIZATION_HANDLER_NEW = "deserialization.exception.handler"
PROCESSING_HANDLER = "processing.exception.handler"
PRODUCTION_HANDLER = "default.production.exception.handler"
PRODUCTION_HANDLER_NEW = "production.exception.handler"
DEAD_LETTER_QUEUE_TOPIC = "errors.dead.letter.queue.topic.name"
REPLICATION_FACTOR = "replication.factor"
REPARTITION_PURGE_INTERVAL_MS = "repartition.purge.interval.ms"
BUFFERED_RECORDS_PER_PARTITION = "buffered.records.per.partition"
POLL_MS = "poll.ms"
WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS = "windowstore.changelog.additional.retention.ms"
CLIENT_ID = "client.id"
#: ours (Flink's watermark alignment): while the client's source partitions hold more than
#: ``...lag.records`` unprocessed records or the slowest is ``...lag.ms`` of event time behind
#: the wall clock, a source task more than ``...max.drift.ms`` of event time ahead of the
#: slowest partition waits; a partition with nothing queued stops holding the others after
#: ``...idle.ms`` (see runtime.alignment); a negative drift: off
EVENT_TIME_ALIGNMENT_MAX_DRIFT_MS = "event.time.alignment.max.drift.ms"
EVENT_TIME_ALIGNMENT_LAG_RECORDS = "event.time.alignment.lag.records"
EVENT_TIME_ALIGNMENT_LAG_MS = "event.time.alignment.lag.ms"
EVENT_TIME_ALIGNMENT_IDLE_MS = "event.time.alignment.idle.ms"
#: ours, off by default: the instances of an application align with each other too, through
#: the internal topic ``<application.id>-event-time-alignment`` (see runtime.alignment_exchange)
EVENT_TIME_ALIGNMENT_ACROSS_INSTANCES = "event.time.alignment.across.instances"
#: ours: windows close when the input goes quiet (see streaming.dsl.processors.quiet_close)
WINDOW_CLOSE_QUIET_MS = quiet_close.WINDOW_CLOSE_QUIET_MS
#: ours: a task runs the records it takes from a queue through its batch entry (fused chains
#: of built-in stateless nodes, see streaming.runtime.batch); false: record by record
PROCESSING_BATCH_ENABLED = "processing.batch.enabled"
#: how long a stream thread retries a retriable failure without progress before failing
TASK_TIMEOUT_MS = "task.timeout.ms"
#: the wait between such retries (also passed to the clients, as in Kafka Streams)
RETRY_BACKOFF_MS = "retry.backoff.ms"
#: ours (not Kafka's): how long start() waits for an answer from bootstrap.servers before it
#: fails (only when none of them can be reached; a reachable but slow broker is waited on)
BOOTSTRAP_TIMEOUT_MS = "bootstrap.timeout.ms"
#: ours (not Kafka's): serve interactive queries over HTTP at application.server
QUERY_SERVER_ENABLED = "interactive.queries.http.enabled"
#: ours: the interface the query server listens on (default: 127.0.0.1 when application.server
#: names a loopback host such as localhost, else that host; "0.0.0.0" listens everywhere)
QUERY_SERVER_BIND = "interactive.queries.http.bind"
#: ours: requests need "Authorization: Bearer <token>" (forwarding passes it on)
QUERY_SERVER_AUTH_TOKEN = "interactive.queries.http.auth.token"
#: ours: serve https with this certificate chain / private key (PEM)
QUERY_SERVER_TLS_CERTFILE = "interactive.queries.http.tls.certfile"
QUERY_SERVER_TLS_KEYFILE = "interactive.queries.http.tls.keyfile"
#: ours: CA bundle to verify other instances when forwarding (default: the certfile + system)
QUERY_SERVER_TLS_CAFILE = "interactive.queries.http.tls.cafile"
#: ours: worker threads answering queries (store reads, forwarding)
QUERY_SERVER_WORKER_THREADS = "interactive.queries.http.worker.threads"
#: ours: open connections at most; over it the server answers 503 + Retry-After
QUERY_SERVER_MAX_CONNECTIONS = "interactive.queries.http.max.connections"
#: ours: an idle keep-alive connection is closed after this long
QUERY_SERVER_KEEPALIVE_TIMEOUT_MS = "interactive.queries.http.keepalive.timeout.ms"
#: ours: entries per page of /all and /range (default) and the largest ?limit= allowed
QUERY_SERVER_SCAN_DEFAULT_LIMIT = "interactive.queries.http.scan.default.limit"
QUERY_SERVER_SCAN_MAX_LIMIT = "interactive.queries.http.scan.max.limit"

KNOWN_KEYS = frozenset(
    {
        APPLICATION_ID,
        BOOTSTRAP_SERVERS,
        PROCESSING_GUARANTEE,
        COMMIT_INTERVAL_MS,
        STATE_DIR,
        NUM_STREAM_THREADS,
        STREAM_WORKERS,
        NUM_STANDBY_REPLICAS,
        MAX_TASK_IDLE_MS,
        CACHE_MAX_BYTES,
        CACHE_MAX_BYTES_BUFFERING,
        STATESTORE_UNCOMMITTED_MAX_BYTES,
        APPLICATION_SERVER,
        DEFAULT_KEY_SERDE,
        DEFAULT_VALUE_SERDE,
        DEFAULT_TIMESTAMP_EXTRACTOR,
        DESERIALIZATION_HANDLER,
        DESERIALIZATION_HANDLER_NEW,
        PROCESSING_HANDLER,
        PRODUCTION_HANDLER,
        PRODUCTION_HANDLER_NEW,
        DEAD_LETTER_QUEUE_TOPIC,
        REPLICATION_FACTOR,
        REPARTITION_PURGE_INTERVAL_MS,
        BUFFERED_RECORDS_PER_PARTITION,
        POLL_MS,
        WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS,
        EVENT_TIME_ALIGNMENT_MAX_DRIFT_MS,
        EVENT_TIME_ALIGNMENT_LAG_RECORDS,
        EVENT_TIME_ALIGNMENT_LAG_MS,
        EVENT_TIME_ALIGNMENT_IDLE_MS,
        EVENT_TIME_ALIGNMENT_ACROSS_INSTANCES,
        WINDOW_CLOSE_QUIET_MS,
        PROCESSING_BATCH_ENABLED,
        CLIENT_ID,
        TASK_TIMEOUT_MS,
        RETRY_BACKOFF_MS,
        BOOTSTRAP_TIMEOUT_MS,
        QUERY_SERVER_ENABLED,
        QUERY_SERVER_BIND,
        QUERY_SERVER_AUTH_TOKEN,
        QUERY_SERVER_TLS_CERTFILE,
        QUERY_SERVER_TLS_KEYFILE,
        QUERY_SERVER_TLS_CAFILE,
        QUERY_SERVER_WORKER_THREADS,
        QUERY_SERVER_MAX_CONNECTIONS,
        QUERY_SERVER_KEEPALIVE_TIMEOUT_MS,
        QUERY_SERVER_SCAN_DEFAULT_LIMIT,
        QUERY_SERVER_SCAN_MAX_LIMIT,
        "topology.optimization",
        "upgrade.from",
        "metrics.recording.level",
    }
)

APP_ID_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
HOST_PORT_RE = re.compile(r"^[^:\s]+:\d{1,5}$")
