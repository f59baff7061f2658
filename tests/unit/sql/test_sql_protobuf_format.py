"""Flink's ``protobuf`` format: tables whose values are the messages of a generated class
(``tests/protos/orders.proto``), read and written through a query in the test driver, with
Flink's NULL rules for unset fields and errors that name what to fix."""

from __future__ import annotations

import re

import orders_pb2  # generated from tests/protos/orders.proto
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile

PAYMENTS = """
CREATE TABLE payments (
  payment_id STRING,
  amount_cents BIGINT,
  fee DOUBLE,
  refunded BOOLEAN,
  paid_at BIGINT,
  attempts INT
) WITH ('connector' = 'kafka', 'topic' = 'payments', 'format' = 'protobuf',
        'protobuf.message-class-name' = 'orders_pb2.Payment'{read_defaults});
CREATE TABLE checked (
  payment_id STRING, amount_cents BIGINT, fee DOUBLE, refunded BOOLEAN, attempts INT
) WITH ('connector' = 'kafka', 'topic' = 'checked', 'format' = '{out_format}'{out_options});
INSERT INTO checked
SELECT payment_id, amount_cents, fee * 2, NOT refunded, attempts + 1 FROM payments
WHERE fee >= 0;
"""


def _compile(out_format: str = "json", read_defaults: str | None = None):
    return compile(
        PAYMENTS.format(
            read_defaults=""
            if read_defaults is None
            else f", 'protobuf.read-default-values' = '{read_defaults}'",
            out_format=out_format,
            out_options=", 'protobuf.message-class-name' = 'orders_pb2.Payment'"
            if out_format == "protobuf"
            else "",
        )
    )


def _run(topology, payments: list[orders_pb2.Payment], out_serde) -> list:
    with TopologyTestDriver(topology) as driver:
        src = driver.create_input_topic(
            "payments", key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        for payment in payments:
            src.pipe_input(payment.payment_id, payment.SerializeToString(), timestamp=0)
        out = driver.create_output_topic(
            "checked", key_serde=serdes.String(), value_serde=out_serde
        )
        return [r.value for r in out.read_records_to_list()]


def test_a_query_reads_protobuf_messages_with_flinks_null_rules():
    payments = [
        orders_pb2.Payment(
            payment_id="p1", amount_cents=1250, fee=0.5, refunded=False, paid_at=1000, attempts=1
        ),
        orders_pb2.Payment(payment_id="p2", fee=1.25, refunded=True, paid_at=2000),
        orders_pb2.Payment(payment_id="p3", amount_cents=0, fee=-1.0, paid_at=3000),
    ]
    rows = _run(_compile(), payments, serdes.Json())
    assert rows == [
        {"payment_id": "p1", "amount_cents": 1250, "fee": 1.0, "refunded": True, "attempts": 2},
        # amount_cents is optional and unset: NULL; fee, refunded, attempts have no presence
        # in proto3, so unset reads as their defaults
        {"payment_id": "p2", "amount_cents": None, "fee": 2.5, "refunded": False, "attempts": 1},
    ]
    with_defaults = _run(_compile(read_defaults="true"), payments, serdes.Json())
    assert with_defaults[1]["amount_cents"] == 0
    assert with_defaults[0] == rows[0]


def test_a_query_writes_protobuf_messages():
    payments = [
        orders_pb2.Payment(payment_id="p1", amount_cents=7, fee=0.25, paid_at=1000, attempts=2),
        orders_pb2.Payment(payment_id="p2", fee=1.0, refunded=True, paid_at=2000),
    ]
    written = _run(_compile("protobuf"), payments, serdes.Bytes())
    messages = [orders_pb2.Payment.FromString(value) for value in written]
    assert [(m.payment_id, m.amount_cents, m.fee, m.refunded, m.attempts) for m in messages] == [
        ("p1", 7, 0.5, True, 3),
        ("p2", 0, 2.0, False, 1),
    ]
    # a NULL column leaves its field unset: presence shows it
    assert messages[0].HasField("amount_cents") and not messages[1].HasField("amount_cents")


def test_bytes_that_are_no_such_message_are_a_deserialization_error():
    from streaming.errors import StreamsException

    with TopologyTestDriver(_compile()) as driver:
        src = driver.create_input_topic(
            "payments", key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        with pytest.raises(StreamsException, match=r"not a streamplatform\.tests\.Payment"):
            src.pipe_input("p1", b"\xff\xff\xff", timestamp=0)


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("(a STRING) WITH ('format' = 'protobuf')", "needs 'protobuf.message-class-name'"),
        (
            "(a STRING) WITH ('format' = 'protobuf', "
            "'protobuf.message-class-name' = 'com.example.proto.Order')",
            "a Java class name cannot load here",
        ),
        (
            "(order_id STRING, total BIGINT) WITH ('format' = 'protobuf', "
            "'protobuf.message-class-name' = 'orders_pb2.Order')",
            "column total: message streamplatform.tests.Order has no such field",
        ),
        (
            "(order_id STRING, items STRING) WITH ('format' = 'protobuf', "
            "'protobuf.message-class-name' = 'orders_pb2.Order')",
            "column items: the 'protobuf' format maps STRING, BIGINT, DOUBLE and BOOLEAN",
        ),
        (
            "(order_id BIGINT) WITH ('format' = 'protobuf', "
            "'protobuf.message-class-name' = 'orders_pb2.Order')",
            "column order_id: BIGINT does not fit",
        ),
        (
            "(order_id STRING) WITH ('format' = 'protobuf', "
            "'protobuf.message-class-name' = 'orders_pb2.Order', "
            "'protobuf.read-default-values' = 'yes')",
            "'protobuf.read-default-values' must be 'true' or 'false'",
        ),
    ],
)
def test_protobuf_table_errors_name_what_to_fix(ddl, message):
    with pytest.raises(SqlError, match=rf"line 2, column \d+: .*{re.escape(message)}"):
        compile(f"\nCREATE TABLE t {ddl};")
