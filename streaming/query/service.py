"""What the query server answers: routes over a ``KafkaStreams`` instance, HTTP-free.

``QueryService.handle(path, query, forwarded=...)`` returns a ``Response``; the HTTP layer
(``streaming.query.server``) only moves bytes. Routes (GET):

- ``/stores`` the queryable stores and their kinds;
- ``/stores/<store>/keys/<key>`` a key-value ``get``; for a window store the windows of the
  key (``?from=&to=`` window-start bounds, default all); for a session store its sessions;
- ``/stores/<store>/range?from=&to=`` key range (key-value) or window-start range (window);
- ``/stores/<store>/all`` every entry;
- ``/metadata`` every instance: host, stores, partitions, tasks;
  ``/metadata/<store>`` the instances hosting the store; ``/metadata/<store>/<key>`` the
  instance and partition of a key;
- ``/metrics`` Prometheus text; ``/health`` the application state (503 unless running);
- ``/sql`` (POST the statement as the body, or GET ``?q=``) of an application compiled
  from SQL: a pull query answers a JSON list of rows (from the instance that owns the key,
  forwarded like ``/keys``); a push query (``EMIT CHANGES``) is a started ``PushStream``
  (or ``TransientPushStream``) that the HTTP layer streams as JSON lines (``sql``); one
  that cannot start is answered 400 (a bad query) or 503 (e.g. too many running).

Remote keys are FORWARDED: the instance asks the owner (``metadata_for_key``) over HTTP and
relays its answer, so any instance answers for every key; a forwarded request is never
forwarded again (the owner answers from local state even if its metadata moved on).
Forwarding uses https when the server has TLS and passes the bearer token on.

``range`` and ``all`` are PAGED: ``?limit=`` entries per page (default 1000, at most 10000:
``interactive.queries.http.scan.default.limit`` / ``.max.limit``) and the answer's
``next_cursor`` (opaque, URL-safe base64 of partition and last store key; null on the last
page) goes back as ``?cursor=`` for the next page. A page walks the store's partitions in
order, each in store order (key bytes; windows: segment, then key bytes), reading the owner
of each partition (locally or forwarded), so the pages of one scan hold every entry once
while the store does not change (entries written meanwhile may or may not show up).
``?local=true`` pages this instance's partitions only; ``?partition=<n>`` one partition.
Store reads never hold the stream thread's lock for long: raw entries are read in chunks of
a few hundred per lock hold (a fresh range read after the last key each time, so processing
and retention may change the store in between), and are decoded and encoded to JSON after
the lock is released.

Keys are URL path segments (percent-encode ``/``) parsed as described in
``streaming.query.codec``. Errors are JSON ``{"error": ...}``: 404 unknown store/key/path,
400 bad parameters, 503 not running / partition unavailable / restoring, 502 the owner could
not be reached.
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import urllib3

from streaming.errors import IllegalStateException, InvalidStateStoreException, SerializationError
from streaming.query import codec, prometheus
from streaming.runtime.store_pages import LONG_MAX, SCAN_CHUNK, read_page

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Streaming-Forwarded-By"
JSON_TYPE = "application/json"
_CURSOR_VERSION = 1
_CURSOR_HEAD = struct.Struct(">BIB")  # version, partition, has-key


@dataclass
class Response:
    """An answer: status, body bytes, content type, extra headers."""

    status: int
    body: bytes
    content_type: str = JSON_TYPE
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        """The body parsed as JSON."""
        import orjson

        return orjson.loads(self.body)


def _json(status: int, payload: Any) -> Response:
    return Response(status, codec.dumps(payload))


def _error(status: int, message: str, **extra: Any) -> Response:
    return _json(status, {"error": message, **extra})


class _Abort(Exception):
    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


@dataclass(frozen=True)
class Cursor:
    """Where a paged scan goes on: after store key ``after`` (raw bytes; None: from the start)
    of ``partition``. Travels as opaque URL-safe base64."""

    partition: int
    after: bytes | None = None

    def encode(self) -> str:
        head = _CURSOR_HEAD.pack(_CURSOR_VERSION, self.partition, self.after is not None)
        return base64.urlsafe_b64encode(head + (self.after or b"")).decode().rstrip("=")

    @staticmethod
    def decode(text: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            version, partition, has_key = _CURSOR_HEAD.unpack_from(raw)
        except (binascii.Error, ValueError, struct.error):
            raise ValueError(f"cursor {text!r} is not a cursor this server returned") from None
        if version != _CURSOR_VERSION or has_key not in (0, 1):
            raise ValueError(f"cursor {text!r} is not a cursor this server returned")
        rest = raw[_CURSOR_HEAD.size :]
        return Cursor(partition, rest if has_key else None)


@dataclass
class _Page:
    entries: list[dict[str, Any]] = field(default_factory=list)
    next_cursor: Cursor | None = None


class QueryService:
    """Answers interactive-query requests for one ``KafkaStreams`` instance.

    ``auth_token`` and ``ssl_context`` (a client context, with ``scheme="https"``) are used
    when forwarding to other instances; ``default_limit`` / ``max_limit`` bound scan pages.
    """

    def __init__(
        self,
        streams: Any,
        *,
        forward_timeout: float = 10.0,
        auth_token: str | None = None,
        scheme: str = "http",
        ssl_context: Any = None,
        default_limit: int = 1000,
        max_limit: int = 10_000,
        scan_chunk: int = SCAN_CHUNK,
    ) -> None:
        self.streams = streams
        self.forward_timeout = forward_timeout
        self.auth_token = auth_token
        self.scheme = scheme
        self.ssl_context = ssl_context
        # kept-alive connections to the other instances (one TLS handshake per connection,
        # not per request); the environment's proxy settings never apply between instances
        self._pool = urllib3.PoolManager(
            num_pools=32,
            maxsize=4,
            ssl_context=ssl_context,
            timeout=urllib3.Timeout(total=forward_timeout),
            retries=False,
        )
        self.default_limit = max(1, default_limit)
        self.max_limit = max(self.default_limit, max_limit)
        self.scan_chunk = max(1, scan_chunk)

    @property
    def self_host(self) -> Any:
        return self.streams.host_info

    # -- dispatch -------------------------------------------------------------------------

    def handle(
        self, path: str, query: Mapping[str, str] | None = None, *, forwarded: bool = False
    ) -> Response:
        """Answer ``GET path?query`` (``forwarded``: sent by another instance)."""
        params = dict(query or {})
        parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
        try:
            return self._route(parts, params, forwarded)
        except _Abort as abort:
            return abort.response
        except Exception as exc:
            if isinstance(exc, IllegalStateException | InvalidStateStoreException):
                return _error(503, str(exc), state=self.streams.state.name)
            if isinstance(exc, SerializationError):
                return _error(
                    400, f"the key does not fit the store's key serde ({exc}); check key_type"
                )
            log.exception("query %s failed", path)
            return _error(500, f"{type(exc).__name__}: {exc}")

    def _route(self, parts: list[str], params: dict[str, str], forwarded: bool) -> Response:
        if parts == ["health"]:
            return self.health()
        if parts == ["metrics"]:
            return self.metrics()
        if parts and parts[0] == "metadata" and len(parts) <= 3:
            if len(parts) == 1:
                return _json(200, [self._instance(m) for m in self.streams.all_metadata()])
            self._builder(parts[1])
            if len(parts) == 2:
                metas = self.streams.all_metadata_for_store(parts[1])
                return _json(200, [self._instance(m) for m in metas])
            return self.key_metadata(parts[1], parts[2], params)
        if parts == ["stores"]:
            return _json(
                200,
                [
                    {"store": name, "kind": self._kind(builder)}
                    for name, builder in sorted(self.streams.topology.store_builders.items())
                    if name in self.streams.plan.store_to_subtopology
                ],
            )
        if len(parts) == 4 and parts[0] == "stores" and parts[2] == "keys":
            return self.get_key(parts[1], parts[3], params, forwarded)
        if len(parts) == 3 and parts[0] == "stores" and parts[2] in ("range", "all"):
            return self.scan(parts[1], parts[2], params, forwarded)
        return _error(
            404,
            f"unknown path /{'/'.join(parts)}; try /stores, /stores/<store>/keys/<key>, "
            "/stores/<store>/range?from=&to=, /stores/<store>/all, /metadata, "
            "/metadata/<store>/<key>, /metrics, /health, /sql",
        )

    # -- SQL ------------------------------------------------------------------------------

    def sql(self, text: str, forwarded: bool = False) -> Response | Any:
        """The answer to a SQL query: a ``Response`` (pull query rows, or an error), or a
        started ``PushStream`` (``TransientPushStream``) for a push query."""
        from streaming import serdes
        from streaming.sql.errors import SqlError
        from streaming.sql.queries import PullQuery, execute_pull, plan, start_push
        from streaming.sql.results import catalog_of

        catalog = catalog_of(self.streams.topology)
        if catalog is None:
            return _error(404, "this application was not compiled from SQL: no /sql queries")
        if not text.strip():
            return _error(400, "send the SQL statement as the POST body (or ?q=)")
        try:
            query = plan(catalog, text)
        except SqlError as exc:
            return _error(400, str(exc))
        if not isinstance(query, PullQuery):
            try:
                return start_push(self.streams, query)
            except SqlError as exc:
                return _error(400, str(exc))
            except Exception as exc:
                return _error(503, f"cannot start the push query: {exc}")
        store = query.result.store
        try:
            if query.key is None:
                return self._sql_scan(query, text, forwarded)
            meta = self.streams.metadata_for_key(store, query.key, serdes.Json())
            owner = meta.active_host
            if not forwarded and owner != self.self_host:
                if owner.port < 0:
                    return _error(
                        503,
                        f"no instance hosts partition {meta.partition} of store {store!r} "
                        "right now (the application is rebalancing); retry",
                    )
                return self._forward(owner, "/sql", {"q": text})
            self._require_local_task(store, meta.partition)
            return _json(200, execute_pull(query, self.streams.store(store)))
        except _Abort as abort:
            return abort.response
        except Exception as exc:
            if isinstance(exc, IllegalStateException | InvalidStateStoreException):
                return _error(503, str(exc), state=self.streams.state.name)
            log.exception("SQL query failed")
            return _error(500, f"{type(exc).__name__}: {exc}")

    def _sql_scan(self, query: Any, text: str, forwarded: bool) -> Response:
        """A SQL pull scan: this instance's rows, and (unless forwarded) those of every
        other instance hosting a partition of the store, once all partitions are hosted."""
        from streaming.sql.queries import execute_pull

        store = query.result.store
        rows = execute_pull(query, self.streams.store(store))
        if forwarded:
            return _json(200, rows)
        sub = self.streams.plan.subtopology_for_store(store)
        prefix = f"{sub.id}_"
        owners: dict[int, Any] = {}
        for meta in self.streams.all_metadata_for_store(store):
            for task in meta.tasks:
                if task.startswith(prefix):
                    owners[int(task[len(prefix) :])] = meta.host_info
        unserved = [p for p in range(sub.num_tasks) if p not in owners or owners[p].port < 0]
        if unserved:
            return _error(
                503,
                f"no instance serves partition {unserved[0]} of store {store!r} right now "
                "(the application is rebalancing); retry",
            )
        for partition in range(sub.num_tasks):
            if owners[partition] == self.self_host:
                self._require_local_task(store, partition)
        for host in sorted({h for h in owners.values() if h != self.self_host}, key=str):
            answer = self._forward(host, "/sql", {"q": text})
            if answer.status != 200:
                return answer
            rows.extend(answer.json())
        if query.limit is not None:
            rows = rows[: query.limit]
        return _json(200, rows)

    # -- health and metrics ---------------------------------------------------------------

    def health(self) -> Response:
        state = self.streams.state
        healthy = state.is_running_or_rebalancing()
        return _json(
            200 if healthy else 503,
            {"state": state.name, "healthy": healthy, "host": str(self.self_host)},
        )

    def metrics(self) -> Response:
        text = prometheus.render(self.streams.metrics(), self.streams.config.application_id)
        return Response(200, text.encode(), prometheus.CONTENT_TYPE)

    # -- metadata -------------------------------------------------------------------------

    @staticmethod
    def _instance(meta: Any) -> dict[str, Any]:
        return {
            "host": meta.host_info.host,
            "port": meta.host_info.port,
            "stores": sorted(meta.state_store_names),
            "topic_partitions": [
                {"topic": t, "partition": p} for t, p in sorted(meta.topic_partitions)
            ],
            "tasks": sorted(meta.tasks),
        }

    def key_metadata(self, store: str, key_text: str, params: Mapping[str, str]) -> Response:
        key, serde = self._key(store, key_text, params)
        meta = self.streams.metadata_for_key(store, key, serde)
        return _json(
            200,
            {
                "store": store,
                "key": key,
                "partition": meta.partition,
                "active_host": None if meta.active_host.port < 0 else str(meta.active_host),
                "standby_hosts": sorted(str(h) for h in meta.standby_hosts),
            },
        )

    # -- stores ---------------------------------------------------------------------------

    def _builder(self, store: str) -> Any:
        builder = self.streams.topology.store_builders.get(store)
        if builder is None or store not in self.streams.plan.store_to_subtopology:
            known = sorted(
                n
                for n in self.streams.topology.store_builders
                if n in self.streams.plan.store_to_subtopology
            )
            raise _Abort(_error(404, f"unknown store {store!r}; stores: {known}", store=store))
        return builder

    @staticmethod
    def _kind(builder: Any) -> str:
        from streaming.state.stores import SessionStoreBuilder, WindowStoreBuilder

        if isinstance(builder, WindowStoreBuilder):
            return "window"
        if isinstance(builder, SessionStoreBuilder):
            return "session"
        return "keyvalue"

    def _key(self, store: str, text: str, params: Mapping[str, str]) -> tuple[Any, Any]:
        builder = self._builder(store)
        serde = builder.key_serde or self.streams.config.default_key_serde
        key_type = params.get("key_type") or codec.default_key_type(serde)
        try:
            return codec.parse_key(text, key_type), serde
        except codec.BadKey as exc:
            raise _Abort(_error(400, str(exc))) from None

    @staticmethod
    def _int_param(params: Mapping[str, str], name: str, default: int) -> int:
        raw = params.get(name)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise _Abort(
                _error(400, f"parameter {name}={raw!r} must be an integer (epoch ms)")
            ) from None

    def get_key(
        self, store: str, key_text: str, params: Mapping[str, str], forwarded: bool
    ) -> Response:
        builder = self._builder(store)
        kind = self._kind(builder)
        key, serde = self._key(store, key_text, params)
        meta = self.streams.metadata_for_key(store, key, serde)
        owner = meta.active_host
        if not forwarded and owner != self.self_host:
            if owner.port < 0:
                return _error(
                    503,
                    f"no instance hosts partition {meta.partition} of store {store!r} right now "
                    "(the application is rebalancing); retry",
                    store=store,
                    partition=meta.partition,
                )
            return self._forward(owner, f"/stores/{_q(store)}/keys/{_q(key_text)}", params)
        self._require_local_task(store, meta.partition)
        view = self.streams.store(store)
        answer: dict[str, Any] = {
            "store": store,
            "key": key,
            "partition": meta.partition,
            "host": str(self.self_host),
        }
        if kind == "keyvalue":
            value = view.get(key)
            if value is None:
                return _error(404, f"key {key!r} not found in store {store!r}", **answer)
            answer["value"] = value
        elif kind == "window":
            size = builder.supplier.window_size
            lo = self._int_param(params, "from", 0)
            hi = self._int_param(params, "to", LONG_MAX)
            found = view.fetch(key, lo, hi)
            if not found:
                return _error(404, f"key {key!r} has no windows in store {store!r}", **answer)
            answer["windows"] = [
                {"start": start, "end": min(start + size, LONG_MAX), "value": value}
                for start, value in found
            ]
        else:
            found = view.fetch(key)
            if not found:
                return _error(404, f"key {key!r} has no sessions in store {store!r}", **answer)
            answer["sessions"] = [
                {"start": w.window.start, "end": w.window.end, "value": value} for w, value in found
            ]
        return _json(200, answer)

    def _require_local_task(self, store: str, partition: int) -> None:
        sub = self.streams.plan.subtopology_for_store(store)
        task = f"{sub.id}_{partition}"
        state = self.streams.local_tasks().get(task)
        if state is None:
            raise _Abort(
                _error(
                    503,
                    f"task {task} (partition {partition} of store {store!r}) is not on this "
                    "instance any more (rebalance in progress); retry",
                    store=store,
                    partition=partition,
                )
            )
        if state != "RUNNING":
            raise _Abort(
                _error(
                    503,
                    f"task {task} of store {store!r} is {state} (restoring its state); retry",
                    store=store,
                    partition=partition,
                )
            )

    # -- paged scans ----------------------------------------------------------------------

    def scan(self, store: str, op: str, params: Mapping[str, str], forwarded: bool) -> Response:
        builder = self._builder(store)
        kind = self._kind(builder)
        if kind == "session":
            return _error(
                400, f"store {store!r} is a session store: query /stores/{store}/keys/<key>"
            )
        limit = self._limit(params)
        cursor = self._cursor(params)
        only = self._partition_param(params)
        if only is not None and cursor is not None and cursor.partition != only:
            raise _Abort(_error(400, "the cursor belongs to another partition"))
        bounds = self._bounds(store, kind, op, params)
        local_only = forwarded or params.get("local", "").lower() in ("1", "true", "yes")
        if local_only:
            page = self._local_page(store, kind, bounds, cursor, limit, only)
            return _json(
                200,
                {
                    "store": store,
                    "host": str(self.self_host),
                    "entries": page.entries,
                    "next_cursor": None if page.next_cursor is None else page.next_cursor.encode(),
                },
            )
        sub = self.streams.plan.subtopology_for_store(store)
        owners: dict[int, Any] = {}
        prefix = f"{sub.id}_"
        for meta in self.streams.all_metadata_for_store(store):
            for task in meta.tasks:
                if task.startswith(prefix):
                    owners[int(task[len(prefix) :])] = meta.host_info
        first = cursor.partition if cursor is not None else 0
        if max(first, only or 0) >= sub.num_tasks:
            raise _Abort(_error(400, f"store {store!r} has partitions 0..{sub.num_tasks - 1} only"))
        partitions = [only] if only is not None else list(range(first, sub.num_tasks))
        entries: list[Any] = []
        hosts: set[str] = set()
        next_cursor: Cursor | None = None
        for partition in partitions:
            remaining = limit - len(entries)
            if remaining <= 0:
                next_cursor = Cursor(partition)
                break
            after = cursor.after if cursor is not None and cursor.partition == partition else None
            owner = owners.get(partition)
            if owner is None or owner.port < 0:
                return _error(
                    503,
                    f"no instance serves partition {partition} of store {store!r} right now "
                    "(the application is rebalancing, or an instance has no "
                    "application.server); retry",
                    store=store,
                    partition=partition,
                )
            hosts.add(str(owner))
            if owner == self.self_host:
                self._require_local_task(store, partition)
                page = self._local_page(
                    store, kind, bounds, Cursor(partition, after), remaining, partition
                )
                entries.extend(page.entries)
                if page.next_cursor is not None:
                    next_cursor = page.next_cursor
                    break
                continue
            sub_params = {k: v for k, v in params.items() if k not in ("cursor", "local")}
            sub_params["partition"] = str(partition)
            sub_params["limit"] = str(remaining)
            if after is not None:
                sub_params["cursor"] = Cursor(partition, after).encode()
            answer = self._forward(owner, f"/stores/{_q(store)}/{_q(op)}", sub_params)
            if answer.status != 200:
                return answer
            body = answer.json()
            entries.extend(body["entries"])
            if body.get("next_cursor"):
                next_cursor = Cursor.decode(body["next_cursor"])
                break
        return _json(
            200,
            {
                "store": store,
                "hosts": sorted(hosts),
                "entries": entries,
                "next_cursor": None if next_cursor is None else next_cursor.encode(),
            },
        )

    def _limit(self, params: Mapping[str, str]) -> int:
        raw = params.get("limit")
        if raw is None or raw == "":
            return self.default_limit
        try:
            limit = int(raw)
        except ValueError:
            limit = 0
        if limit < 1 or limit > self.max_limit:
            raise _Abort(
                _error(400, f"parameter limit={raw!r} must be an integer in 1..{self.max_limit}")
            )
        return limit

    @staticmethod
    def _cursor(params: Mapping[str, str]) -> Cursor | None:
        raw = params.get("cursor")
        if not raw:
            return None
        try:
            return Cursor.decode(raw)
        except ValueError as exc:
            raise _Abort(_error(400, str(exc))) from None

    @staticmethod
    def _partition_param(params: Mapping[str, str]) -> int | None:
        raw = params.get("partition")
        if raw is None or raw == "":
            return None
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if value < 0:
            raise _Abort(_error(400, f"parameter partition={raw!r} must be an integer >= 0"))
        return value

    def _bounds(self, store: str, kind: str, op: str, params: Mapping[str, str]) -> tuple:
        """The typed bounds of a scan: (from key, to key) or (from time, to time)."""
        if kind == "keyvalue":
            if op == "all":
                return (None, None)
            if "from" not in params or "to" not in params:
                raise _Abort(_error(400, "range needs both ?from=<key>&to=<key>"))
            lo, _ = self._key(store, params["from"], params)
            hi, _ = self._key(store, params["to"], params)
            return (lo, hi)
        if op == "all":
            return (0, LONG_MAX)
        return (self._int_param(params, "from", 0), self._int_param(params, "to", LONG_MAX))

    def _local_page(
        self,
        store: str,
        kind: str,
        bounds: tuple,
        cursor: Cursor | None,
        limit: int,
        only: int | None = None,
    ) -> _Page:
        """Up to ``limit`` entries of this instance's partitions of ``store`` from ``cursor``."""
        page = _Page()
        local = self.streams.store_provider.partition_stores(store)
        if only is not None:
            if not any(p == only for p, _, _ in local):
                self._require_local_task(store, only)  # 503: moved or restoring
                raise _Abort(_error(503, f"partition {only} of {store!r} is not served here"))
            local = [entry for entry in local if entry[0] == only]
        first = cursor.partition if cursor is not None else 0
        for partition, lock, typed in local:
            if partition < first:
                continue
            remaining = limit - len(page.entries)
            if remaining <= 0:
                page.next_cursor = Cursor(partition)
                break
            after = cursor.after if cursor is not None and cursor.partition == partition else None
            read = getattr(typed, "read_page", None)  # a worker process's store reads there
            if read is not None:
                entries, more, last = read(kind, bounds, after, remaining, self.scan_chunk)
            else:
                entries, more, last = read_page(
                    lock, typed, kind, bounds, after, remaining, self.scan_chunk
                )
            page.entries.extend(entries)
            if more:
                page.next_cursor = Cursor(partition, last)
                break
        return page

    # -- forwarding -----------------------------------------------------------------------

    def _forward(self, owner: Any, path: str, params: Mapping[str, str]) -> Response:
        query = urllib.parse.urlencode(dict(params))
        url = f"{self.scheme}://{owner.host}:{owner.port}{path}" + (f"?{query}" if query else "")
        headers = {FORWARDED_HEADER: str(self.self_host)}
        if self.auth_token:
            headers["Authorization"] = f"Bearer {self.auth_token}"
        try:
            reply = self._pool.request("GET", url, headers=headers)
        except urllib3.exceptions.HTTPError as exc:
            return _error(502, f"the owner {owner} could not be reached: {exc}", owner=str(owner))
        extra = {"X-Streaming-Answered-By": str(owner)}
        if reply.status >= 400 and reply.headers.get("Retry-After"):
            extra["Retry-After"] = reply.headers["Retry-After"]
        return Response(
            reply.status, reply.data, reply.headers.get("Content-Type", JSON_TYPE), extra
        )


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


__all__ = ["FORWARDED_HEADER", "Cursor", "QueryService", "Response"]
