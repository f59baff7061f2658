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
- ``/metrics`` Prometheus text; ``/health`` the application state (503 unless running).

Remote keys are FORWARDED: the instance asks the owner (``metadata_for_key``) over HTTP and
relays its answer, so any instance answers for every key; a forwarded request is never
forwarded again (the owner answers from local state even if its metadata moved on).
``range``/``all`` fan out to every instance hosting the store and merge the entries;
``?local=true`` answers from this instance only. Keys are URL path segments (percent-encode
``/``) parsed as described in ``streaming.query.codec``. Errors are JSON ``{"error": ...}``:
404 unknown store/key/path, 400 bad parameters, 503 not running / partition unavailable /
restoring, 502 the owner could not be reached.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.query import codec, prometheus

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Streaming-Forwarded-By"
JSON_TYPE = "application/json"
LONG_MAX = (1 << 63) - 1


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


class QueryService:
    """Answers interactive-query requests for one ``KafkaStreams`` instance."""

    def __init__(self, streams: Any, *, forward_timeout: float = 10.0) -> None:
        self.streams = streams
        self.forward_timeout = forward_timeout

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
            from streaming.runtime.app import IllegalStateException
            from streaming.runtime.queries import InvalidStateStoreException
            from streaming.serdes import SerializationError

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
            "/metadata/<store>/<key>, /metrics, /health",
        )

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

    def scan(self, store: str, op: str, params: Mapping[str, str], forwarded: bool) -> Response:
        builder = self._builder(store)
        kind = self._kind(builder)
        if kind == "session":
            return _error(
                400, f"store {store!r} is a session store: query /stores/{store}/keys/<key>"
            )
        local_only = forwarded or params.get("local", "").lower() in ("1", "true", "yes")
        if local_only:
            return _json(
                200,
                {
                    "store": store,
                    "host": str(self.self_host),
                    "entries": self._local_scan(store, kind, builder, op, params),
                },
            )
        entries: list[Any] = []
        hosts = []
        for meta in self.streams.all_metadata_for_store(store):
            hosts.append(str(meta.host_info))
            if meta.host_info == self.self_host:
                entries.extend(self._local_scan(store, kind, builder, op, params))
                continue
            if meta.host_info.port < 0:
                return _error(503, f"an instance hosting {store!r} has no application.server")
            answer = self._forward(meta.host_info, f"/stores/{_q(store)}/{op}", params)
            if answer.status != 200:
                return answer
            entries.extend(answer.json()["entries"])
        return _json(200, {"store": store, "hosts": hosts, "entries": entries})

    def _local_scan(
        self, store: str, kind: str, builder: Any, op: str, params: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        view = self.streams.store(store)
        if kind == "keyvalue":
            if op == "all":
                rows = view.all()
            else:
                if "from" not in params or "to" not in params:
                    raise _Abort(_error(400, "range needs both ?from=<key>&to=<key>"))
                lo, _ = self._key(store, params["from"], params)
                hi, _ = self._key(store, params["to"], params)
                rows = view.range(lo, hi)
            return [{"key": k, "value": v} for k, v in rows]
        if op == "all":
            rows = view.all()
        else:
            lo = self._int_param(params, "from", 0)
            hi = self._int_param(params, "to", LONG_MAX)
            rows = view.fetch_all(lo, hi)
        return [
            {"key": w.key, "start": w.window.start, "end": w.window.end, "value": v}
            for w, v in rows
        ]

    # -- forwarding -----------------------------------------------------------------------

    def _forward(self, owner: Any, path: str, params: Mapping[str, str]) -> Response:
        query = urllib.parse.urlencode(dict(params))
        url = f"http://{owner.host}:{owner.port}{path}" + (f"?{query}" if query else "")
        request = urllib.request.Request(url, headers={FORWARDED_HEADER: str(self.self_host)})
        try:
            with urllib.request.urlopen(request, timeout=self.forward_timeout) as reply:
                return Response(
                    reply.status,
                    reply.read(),
                    reply.headers.get("Content-Type", JSON_TYPE),
                    {"X-Streaming-Answered-By": str(owner)},
                )
        except urllib.error.HTTPError as exc:
            return Response(
                exc.code,
                exc.read(),
                exc.headers.get("Content-Type", JSON_TYPE),
                {"X-Streaming-Answered-By": str(owner)},
            )
        except (urllib.error.URLError, OSError) as exc:
            return _error(502, f"the owner {owner} could not be reached: {exc}", owner=str(owner))


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


__all__ = ["FORWARDED_HEADER", "QueryService", "Response"]
