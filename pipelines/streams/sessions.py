"""Click sessions: per user, clicks closer than 30 minutes form one session.

clicks -> by ``user_id`` -> session windows (30-minute inactivity gap, 5 minutes of grace),
one final result per session when it closes -> ``click-sessions``, keyed by user id, value
``{"user_id", "session_start", "session_end", "click_count", "pages"}`` (session bounds
are the first and last click times, inclusive; ``pages`` are the distinct pages in first-seen
order). Store (interactive queries): ``click-sessions-store``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines import domain
from pipelines.streams.common import (
    EVENT_TIME,
    KEY_SERDE,
    VALUE_SERDE,
    click_problem,
    dead_letter_gate,
    raw_serde,
)
from pipelines.streams.config import StreamAppConfig
from streaming import (
    EmitStrategy,
    Grouped,
    Materialized,
    Produced,
    SessionWindows,
    StreamsBuilder,
    Topology,
)

APP = "click-sessions"
STORE = "click-sessions-store"


def _init() -> dict[str, Any]:
    return {"click_count": 0, "pages": []}


def _add(key: str, click: dict[str, Any], agg: dict[str, Any]) -> dict[str, Any]:
    page = click.get("page")
    pages = agg["pages"] if page in agg["pages"] else [*agg["pages"], page]
    return {"click_count": agg["click_count"] + 1, "pages": pages}


def _merge(key: str, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    pages = list(left["pages"])
    pages += [p for p in right["pages"] if p not in pages]
    return {"click_count": left["click_count"] + right["click_count"], "pages": pages}


def _publish(windowed: Any, agg: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    key = windowed.key
    if agg is None:
        return key, None
    return key, {
        "user_id": key,
        "session_start": windowed.window.start,
        "session_end": windowed.window.end,
        "click_count": agg["click_count"],
        "pages": agg["pages"],
    }


def build_click_sessions(config: StreamAppConfig | Mapping[str, Any] | None = None) -> Topology:
    """clicks -> by user -> 30-minute-gap sessions (final on close) -> click-sessions."""
    cfg = StreamAppConfig.of(config)
    builder = StreamsBuilder()
    clicks = builder.stream(
        cfg.clicks_topic,
        key_serde=KEY_SERDE,
        value_serde=raw_serde(cfg, domain.CLICKS),
        timestamp_extractor=EVENT_TIME,
    )
    usable = dead_letter_gate(
        clicks, click_problem, cfg.dead_letter_topic(APP), cfg.max_event_time_ahead_ms
    )
    (
        usable.group_by(
            lambda k, v: v["user_id"],
            Grouped(name="clicks-by-user", key_serde=KEY_SERDE, value_serde=VALUE_SERDE),
        )
        .windowed_by(
            SessionWindows.of_inactivity_gap_and_grace(cfg.session_gap_ms, cfg.session_grace_ms)
        )
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(
            _init,
            _add,
            _merge,
            # the default retention (gap + grace): the engine emits every closed session
            # before the store lets it go, also when sparse clicks jump stream time
            Materialized.as_(STORE).with_value_serde(VALUE_SERDE),
        )
        .to_stream()
        .map(_publish)
        .to(cfg.sessions_topic, Produced(key_serde=KEY_SERDE, value_serde=VALUE_SERDE))
    )
    return builder.build()
