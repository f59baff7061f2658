"""``JavaHashSetOrder`` iterates as Java's ``HashSet<Bytes>`` does (the order Kafka's suppression
buffer logs its dirty keys in). The expected orders were printed by Java 17 for the same
insertions (``HashSet<org.apache.kafka.common.utils.Bytes>``)."""

from __future__ import annotations

from streaming.state.java_hash_set import JavaHashSetOrder, bytes_hash_code


def test_hash_code_is_arrays_hash_code():
    assert bytes_hash_code(b"a") == 128
    assert bytes_hash_code(b"") == 1
    assert bytes_hash_code(b"\xff") == 31 - 1  # bytes are signed in Java
    assert (
        bytes_hash_code(b"key-91" * 10) == 488176317
    )  # Java: Arrays.hashCode, overflowing int arithmetic


def test_order_after_the_table_grew_and_after_clear():
    keys = JavaHashSetOrder()
    for i in range(30):  # 30 keys: the table grows from 16 to 64 buckets
        keys.add(f"key-{i * 7919 % 101}".encode())
    assert [k.decode() for k in keys] == [
        "key-91",
        "key-50",
        "key-72",
        "key-94",
        "key-31",
        "key-53",
        "key-75",
        "key-97",
        "key-15",
        "key-37",
        "key-12",
        "key-34",
        "key-56",
        "key-78",
        "key-9",
        "key-0",
        "key-82",
        "key-22",
        "key-3",
        "key-44",
        "key-66",
        "key-88",
        "key-41",
        "key-63",
        "key-85",
        "key-6",
        "key-25",
        "key-47",
        "key-69",
        "key-28",
    ]
    keys.clear()  # keeps its 64 buckets, as Java's clear() does
    for k in ("zz", "a", "b", "key-3"):
        keys.add(k.encode())
    assert [k.decode() for k in keys] == ["a", "zz", "b", "key-3"]
    assert len(keys) == 4 and b"zz" in keys
