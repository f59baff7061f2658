"""Kappa replay: reprocess a stream application from the earliest offsets under a new
application id, into replay topics, and compare its results with the live ones.

``replay(runner_factory, ...)`` runs the replay until it has caught up (lag 0 for a moment)
and stops it; ``compare(app, live, replayed)`` matches records by identity (per application)
and reports equal / different / missing ones. Results only one side has at the edges are
expected (the live application may have started later or may not have closed the latest
windows yet); values that differ for the same identity are drift.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from assets.streams.apps import StreamApp
from assets.streams.config import StreamAppConfig
from assets.streams.monitor import consumer_lag, list_topics, read_tail

# identity and compared value of a result record, per application's first output topic
IDENTITY: dict[str, tuple[Callable[[str, dict], Any], Callable[[dict], Any]]] = {
    "windowed-revenue": (
        lambda k, v: (v.get("region"), v.get("window_start")),
        lambda v: (v.get("revenue_cents"), v.get("order_count")),
    ),
    "enriched-orders": (
        lambda k, v: v.get("order_id"),
        lambda v: (v.get("customer_known"), v.get("within_credit_limit")),
    ),
    "fraud-alerts": (
        lambda k, v: (v.get("rule"), v.get("order_id")),
        lambda v: v.get("customer_id"),
    ),
    "click-sessions": (
        lambda k, v: (v.get("user_id"), v.get("session_start")),
        lambda v: (v.get("session_end"), v.get("click_count")),
    ),
    "orders-dedup": (lambda k, v: v.get("order_id"), lambda v: v.get("event_time")),
}


@dataclass
class Comparison:
    """How a replay's results compare with the live results."""

    live: int = 0
    replayed: int = 0
    equal: int = 0
    different: list[tuple[Any, Any, Any]] = field(default_factory=list)  # (id, live, replay)
    only_live: int = 0
    only_replayed: int = 0

    @property
    def compared(self) -> int:
        return self.equal + len(self.different)

    @property
    def agreement(self) -> float:
        """Share of identities on both sides with equal values (1.0 when none)."""
        return self.equal / self.compared if self.compared else 1.0


def _latest(app: str, records: list[tuple[str | None, Any, int]]) -> dict[Any, Any]:
    ident, value = IDENTITY[app]
    out: dict[Any, Any] = {}
    for key, v, _ in records:
        if isinstance(v, dict):
            out[ident(key, v)] = value(v)  # the last update wins (eager outputs)
    return out


def compare(app: str, live: list, replayed: list) -> Comparison:
    """Compare live and replayed records (lists of (key, value, timestamp))."""
    a, b = _latest(app, live), _latest(app, replayed)
    c = Comparison(live=len(a), replayed=len(b))
    for ident, value in a.items():
        if ident not in b:
            c.only_live += 1
        elif b[ident] == value:
            c.equal += 1
        else:
            c.different.append((ident, value, b[ident]))
    c.only_replayed = sum(1 for i in b if i not in a)
    return c


def replay_config(app: StreamApp, base: StreamAppConfig, suffix: str) -> StreamAppConfig:
    """``base`` with the application's output topics renamed ``<topic>-<suffix>``."""
    changes = {f: f"{getattr(base, f)}-{suffix}" for f in app.outputs}
    return replace(base, **changes)


def group_lag(bootstrap: str, group: str, inputs: list[str]) -> dict[str, int]:
    """Lag of ``group`` on its input topics and on its repartition topics
    (``<group>-...-repartition``: caught up on the inputs is not done while they still lag).
    Named topics, so the committed offsets are read the safe way (``monitor._committed``)."""
    internal = sorted(
        t
        for t in list_topics(bootstrap)
        if t.startswith(f"{group}-") and t.endswith("-repartition")
    )
    return consumer_lag(bootstrap, group, [*inputs, *internal])


def run_until_caught_up(
    runner: Any,
    bootstrap: str,
    *,
    timeout_s: float = 600.0,
    settle_s: float = 5.0,
    log: Callable[[str], None] = print,
) -> float:
    """Start ``runner`` and stop it once its consumer group has no lag for ``settle_s``;
    return the seconds it ran."""
    began = time.monotonic()
    runner.start()
    try:
        caught_up_since = None
        inputs = runner.app.input_topics(runner.config)
        while time.monotonic() - began < timeout_s:
            time.sleep(1.0)
            if runner.state in ("ERROR", "PENDING_ERROR", "NOT_RUNNING"):
                raise RuntimeError(f"replay of {runner.app.name} failed: state {runner.state}")
            try:
                lag = group_lag(bootstrap, runner.application_id, inputs)
            except Exception:
                continue
            if lag and sum(lag.values()) == 0:
                caught_up_since = caught_up_since or time.monotonic()
                if time.monotonic() - caught_up_since >= settle_s:
                    break
            else:
                caught_up_since = None
        else:
            raise TimeoutError(f"replay of {runner.app.name} did not catch up in {timeout_s}s")
        log(f"replay of {runner.app.name} caught up after {time.monotonic() - began:.1f}s")
    finally:
        runner.close()
    return time.monotonic() - began


def read_all(bootstrap: str, topic: str) -> list:
    """Every record of ``topic`` (read_committed)."""
    return read_tail(bootstrap, topic, per_partition=10**9, timeout=60.0)
