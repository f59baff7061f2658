"""Nexmark's three event kinds as this benchmark writes them to Kafka.

The schema follows Flink's Nexmark DDL (``nexmark/nexmark``, ``ddl_kafka.sql``) so that SQL
versions of the queries can read the same topics: JSON values with Nexmark's camelCase field
names, ids / prices / category as JSON integers, ``dateTime`` / ``expires`` as TIMESTAMP(3)
text the way Flink's JSON format writes it (``'yyyy-MM-dd HH:mm:ss.SSS'``, UTC):

- ``nexmark-person``: key ``str(id)``; ``id, name, emailAddress, creditCard, city, state,
  dateTime, extra``
- ``nexmark-auction``: key ``str(id)``; ``id, itemName, description, initialBid, reserve,
  dateTime, expires, seller, category, extra``
- ``nexmark-bid``: key ``str(auction)``; ``auction, bidder, price, channel, url, dateTime,
  extra``

Keys are raw UTF-8 strings (``serdes.String``). A record's Kafka timestamp is its
``dateTime`` (event time). The event-time watermark delay is 4 s, as in Flink's DDL
(``WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND``); windowed queries use it as
their grace period.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

PERSON_TOPIC = "nexmark-person"
AUCTION_TOPIC = "nexmark-auction"
BID_TOPIC = "nexmark-bid"
TOPICS = (PERSON_TOPIC, AUCTION_TOPIC, BID_TOPIC)

#: the watermark delay of Flink's Nexmark DDL: the grace of every windowed query
WATERMARK_DELAY = timedelta(seconds=4)
WATERMARK_DELAY_MS = int(WATERMARK_DELAY.total_seconds() * 1000)


#: the three topics as Flink SQL tables (Nexmark's DDL over these Kafka topics): Nexmark's
#: queries in SQL (``streaming.sql``, ``bench/nexmark/flink_sql/``) start from it. A
#: statement builds sources only for the tables it reads.
SQL_DDL = f"""
CREATE TABLE person (
  id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING,
  dateTime TIMESTAMP(3), extra STRING,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH ('connector' = 'kafka', 'topic' = '{PERSON_TOPIC}', 'format' = 'json');

CREATE TABLE auction (
  id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,
  dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH ('connector' = 'kafka', 'topic' = '{AUCTION_TOPIC}', 'format' = 'json');

CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,
  dateTime TIMESTAMP(3), extra STRING,
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH ('connector' = 'kafka', 'topic' = '{BID_TOPIC}', 'format' = 'json');
"""


@dataclass(frozen=True, slots=True)
class Event:
    """One generated record: its topic, key, JSON value and timestamp (= ``dateTime``).

    ``seq`` is the event's position in the generated sequence (the order a producer writes
    it in); ``value`` is the row exactly as it is serialized to the topic."""

    seq: int
    topic: str
    key: str
    value: dict[str, Any]
    timestamp: int
