"""The platform's event domain: topic names, record schemas and the business rules.

Stream applications (``pipelines/streams``), the lake, the batch recompute and the
reconciliation all read their constants from here, so both halves of the lambda
architecture compute the same thing:

- raw topics: ``orders`` (key ``order_id``), ``customers`` (compacted, key ``customer_id``),
  ``payments`` (key ``payment_id``), ``clicks`` (key ``user_id``); JSON values, event time
  in epoch milliseconds in ``event_time`` (also the Kafka record timestamp).
- windowed revenue: per ``region``, tumbling ``REVENUE_WINDOW`` windows ``[start, end)``
  with ``REVENUE_GRACE`` grace; value ``{"region", "window_start", "window_end", "revenue",
  "order_count"}``; hopping variant ``HOPPING_SIZE`` every ``HOPPING_ADVANCE``.
- fraud rules: ``high_value`` (``amount > HIGH_VALUE_THRESHOLD``), ``rapid_burst`` (more
  than ``BURST_MAX_ORDERS`` orders of one customer in one tumbling ``BURST_WINDOW``),
  ``new_location`` (order ``location`` not in the customer's ``known_locations``).
  Alert value ``{"rule", "customer_id", "order_id", "event_time", "evidence", ...}``;
  burst alerts carry ``window_start``. The SQL fraud application (``fraud.sql``) adds
  ``small_then_large``: a charge under ``CARD_TESTING_SMALL`` followed by one of at least
  ``CARD_TESTING_LARGE`` from the same customer within ``CARD_TESTING_WITHIN``; and
  ``impossible_travel``: two consecutive orders of a customer from locations in different
  regions within ``IMPOSSIBLE_TRAVEL_WITHIN``.
- click sessions: per ``user_id``, ``SESSION_GAP`` inactivity gap; value ``{"user_id",
  "session_start", "session_end", "click_count", "pages"}`` (bounds: first and last click).
- money: sums are taken in integer cents (``round(amount * 100)``) in stream and batch.
- dedup: orders by ``order_id`` within ``DEDUP_WINDOW``; the first occurrence wins.
"""

from __future__ import annotations

from typing import Any

import orjson

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS

REVENUE_WINDOW_MS = 5 * MINUTE_MS
REVENUE_GRACE_MS = 1 * MINUTE_MS
HOPPING_SIZE_MS = 10 * MINUTE_MS
HOPPING_ADVANCE_MS = 5 * MINUTE_MS
BURST_WINDOW_MS = 5 * MINUTE_MS
BURST_MAX_ORDERS = 3
HIGH_VALUE_THRESHOLD = 10_000.0
CARD_TESTING_SMALL = 5.0
CARD_TESTING_LARGE = 500.0
CARD_TESTING_WITHIN_MS = 5 * MINUTE_MS
IMPOSSIBLE_TRAVEL_WITHIN_MS = 10 * MINUTE_MS
SESSION_GAP_MS = 30 * MINUTE_MS
DEDUP_WINDOW_MS = 10 * MINUTE_MS
# Stream apps dead-letter records whose event time is further ahead of the wall clock
# (brokers refuse timestamps more than message.timestamp.after.max.ms, 1 h, in the future).
MAX_EVENT_TIME_AHEAD_MS = 15 * MINUTE_MS

REGIONS = ("EU", "NA", "APAC", "LATAM")
LOCATIONS = {
    "EU": ("Berlin", "Paris", "Madrid", "Rome", "Vienna"),
    "NA": ("New York", "Toronto", "Chicago", "Austin", "Denver"),
    "APAC": ("Tokyo", "Sydney", "Singapore", "Seoul", "Mumbai"),
    "LATAM": ("Sao Paulo", "Mexico City", "Bogota", "Lima", "Santiago"),
}
TIERS = ("bronze", "silver", "gold", "platinum")
PAGES = ("/", "/search", "/product", "/cart", "/checkout", "/account", "/help")
PAYMENT_METHODS = ("card", "paypal", "bank_transfer", "wallet")

# Raw topics the generator writes.
ORDERS = "orders"
CUSTOMERS = "customers"
PAYMENTS = "payments"
CLICKS = "clicks"
RAW_TOPICS = (ORDERS, CUSTOMERS, PAYMENTS, CLICKS)

# Topics the stream applications write.
REVENUE_5M = "revenue-per-region-5m"
REVENUE_HOPPING = "revenue-per-region-hopping"
ENRICHED_ORDERS = "enriched-orders"
FRAUD_ALERTS = "fraud-alerts"
CLICK_SESSIONS = "click-sessions"
ORDERS_DEDUPED = "orders-deduped"
# Topics the SQL versions of two applications write (pipelines/streams/sql/*.sql).
REVENUE_5M_SQL = "revenue-per-region-5m-sql"
ENRICHED_ORDERS_SQL = "enriched-orders-sql"
FRAUD_ALERTS_SQL = "fraud-alerts-sql"
# The records a windowed application dropped as late, one per (record, window):
# "<app>-late" (pipelines/streams/late.py); reconciliation explains differences with them.
LATE_SUFFIX = "-late"
REVENUE_LATE = "windowed-revenue" + LATE_SUFFIX
FRAUD_LATE = "fraud-alerts" + LATE_SUFFIX
REVENUE_SQL_LATE = "windowed-revenue-sql" + LATE_SUFFIX
LATE_TOPICS = (REVENUE_LATE, FRAUD_LATE, REVENUE_SQL_LATE)
DERIVED_TOPICS = (
    REVENUE_5M,
    REVENUE_HOPPING,
    ENRICHED_ORDERS,
    FRAUD_ALERTS,
    CLICK_SESSIONS,
    ORDERS_DEDUPED,
    REVENUE_5M_SQL,
    ENRICHED_ORDERS_SQL,
    FRAUD_ALERTS_SQL,
    *LATE_TOPICS,
)
DEAD_LETTER_SUFFIX = "-dlq"
# Stream applications (pipelines/streams); each writes undecodable input to "<app>-dlq".
STREAM_APPS = (
    "windowed-revenue",
    "enriched-orders",
    "fraud-alerts",
    "click-sessions",
    "orders-dedup",
    "windowed-revenue-sql",
    "enriched-orders-sql",
    "fraud-alerts-sql",
)
DEAD_LETTER_TOPICS = tuple(app + DEAD_LETTER_SUFFIX for app in STREAM_APPS)

FRAUD_RULES = ("high_value", "rapid_burst", "new_location")

# Column name -> type ("str", "float", "int", "bool", "list") per topic; required columns
# must be present and non-null for a record to be valid.
SCHEMAS: dict[str, dict[str, str]] = {
    ORDERS: {
        "order_id": "str",
        "customer_id": "str",
        "amount": "float",
        "region": "str",
        "location": "str",
        "event_time": "int",
    },
    CUSTOMERS: {
        "customer_id": "str",
        "name": "str",
        "tier": "str",
        "home_region": "str",
        "known_locations": "list",
        "credit_limit": "float",
        "event_time": "int",
    },
    PAYMENTS: {
        "payment_id": "str",
        "order_id": "str",
        "customer_id": "str",
        "amount": "float",
        "method": "str",
        "status": "str",
        "event_time": "int",
    },
    CLICKS: {"user_id": "str", "page": "str", "event_time": "int"},
    REVENUE_5M: {
        "region": "str",
        "window_start": "int",
        "window_end": "int",
        "revenue": "float",
        "order_count": "int",
        "revenue_cents": "int",
    },
    REVENUE_HOPPING: {
        "region": "str",
        "window_start": "int",
        "window_end": "int",
        "revenue": "float",
        "order_count": "int",
        "revenue_cents": "int",
    },
    ENRICHED_ORDERS: {
        "order_id": "str",
        "customer_id": "str",
        "amount": "float",
        "region": "str",
        "location": "str",
        "event_time": "int",
        "customer_known": "bool",
        "customer_name": "str",
        "tier": "str",
        "known_locations": "list",
        "credit_limit": "float",
        "within_credit_limit": "bool",
    },
    FRAUD_ALERTS: {
        "rule": "str",
        "customer_id": "str",
        "order_id": "str",
        "amount": "float",
        "event_time": "int",
        "window_start": "int",
        "evidence": "str",
    },
    CLICK_SESSIONS: {
        "user_id": "str",
        "session_start": "int",
        "session_end": "int",
        "click_count": "int",
        "pages": "list",
    },
    ORDERS_DEDUPED: {
        "order_id": "str",
        "customer_id": "str",
        "amount": "float",
        "region": "str",
        "location": "str",
        "event_time": "int",
    },
}
# the SQL apps write the DSL apps' columns (enriched: without the known_locations list,
# which the SQL dialect has no type for)
SCHEMAS[REVENUE_5M_SQL] = SCHEMAS[REVENUE_5M]
SCHEMAS[ENRICHED_ORDERS_SQL] = {
    k: v for k, v in SCHEMAS[ENRICHED_ORDERS].items() if k != "known_locations"
}
# an alert of fraud.sql: the order that completed the pattern and the first order of it
SCHEMAS[FRAUD_ALERTS_SQL] = {
    "rule": "str",
    "customer_id": "str",
    "order_id": "str",
    "amount": "float",
    "event_time": "int",
    "location": "str",
    "first_order_id": "str",
    "first_amount": "float",
    "first_event_time": "int",
    "first_location": "str",
    "risk": "float",
}
LATE_SCHEMA = {
    "result": "str",
    "window_start": "int",
    "window_end": "int",
    "stream_time": "int",
    **SCHEMAS[ORDERS],
}
SCHEMAS.update({topic: LATE_SCHEMA for topic in LATE_TOPICS})
REQUIRED: dict[str, tuple[str, ...]] = {
    ORDERS: ("order_id", "customer_id", "amount", "region", "event_time"),
    CUSTOMERS: ("customer_id",),
    PAYMENTS: ("payment_id", "order_id", "amount", "event_time"),
    CLICKS: ("user_id", "event_time"),
    REVENUE_5M: ("region", "window_start", "revenue", "order_count"),
    REVENUE_HOPPING: ("region", "window_start", "revenue", "order_count"),
    ENRICHED_ORDERS: ("order_id", "customer_id", "event_time"),
    FRAUD_ALERTS: ("rule", "customer_id"),
    CLICK_SESSIONS: ("user_id", "session_start", "session_end"),
    ORDERS_DEDUPED: ("order_id", "event_time"),
    REVENUE_5M_SQL: ("region", "window_start", "revenue", "order_count"),
    ENRICHED_ORDERS_SQL: ("order_id", "customer_id", "event_time"),
    FRAUD_ALERTS_SQL: ("rule", "customer_id", "order_id", "first_order_id", "event_time"),
    **{topic: ("result", "window_start", "event_time") for topic in LATE_TOPICS},
}
# The column whose hour places a record in the lake (falls back to the record timestamp).
EVENT_TIME_COLUMN: dict[str, str] = {
    REVENUE_5M: "window_start",
    REVENUE_HOPPING: "window_start",
    REVENUE_5M_SQL: "window_start",
    CLICK_SESSIONS: "session_start",
    **{topic: "window_start" for topic in LATE_TOPICS},
}


def window_start(ts_ms: int, size_ms: int) -> int:
    """Start of the tumbling window of ``size_ms`` containing ``ts_ms`` (epoch aligned)."""
    return ts_ms - ts_ms % size_ms


def dead_letter_topic(app: str) -> str:
    """The dead-letter topic of stream application ``app`` (records it cannot use)."""
    return app + DEAD_LETTER_SUFFIX


def _coerce(value: Any, kind: str) -> Any:
    """``value`` as ``kind``, or ``None`` when it does not fit."""
    if value is None:
        return None
    try:
        if kind == "str":
            if isinstance(value, dict | list):
                return orjson.dumps(value).decode()
            return value if isinstance(value, str) else str(value)
        if kind == "float":
            if isinstance(value, bool):
                return None
            return float(value)
        if kind == "int":
            if isinstance(value, bool):
                return None
            return int(value)
        if kind == "bool":
            return value if isinstance(value, bool) else None
        if kind == "list":
            return [str(v) for v in value] if isinstance(value, list) else None
    except (TypeError, ValueError):
        return None
    return None


def parse_record(topic: str, value: bytes | None) -> dict[str, Any] | None:
    """The typed record of ``topic`` decoded from JSON ``value``, or ``None`` if invalid."""
    if value is None:
        return None
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return typed_record(topic, data)


def typed_record(topic: str, data: Any) -> dict[str, Any] | None:
    """``data`` (a decoded value) as the typed record of ``topic``, or ``None`` if invalid:
    not an object, or a required column missing."""
    if not isinstance(data, dict):
        return None
    schema = SCHEMAS.get(topic)
    if schema is None:
        return data
    row = {name: _coerce(data.get(name), kind) for name, kind in schema.items()}
    if any(row[name] is None for name in REQUIRED.get(topic, ())):
        return None
    return row
