"""Kafka's default partitioner: ``toPositive(murmur2(key bytes)) % partitions``.

The producer is configured with librdkafka's ``murmur2_random`` partitioner, which computes
the same thing; this module is for the places that need the partition themselves
(interactive-query metadata, custom ``StreamPartitioner`` fallbacks).
"""

from __future__ import annotations

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    end4 = length & ~3
    for i in range(0, end4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[end4 + 2] << 16
    if rest >= 2:
        h ^= data[end4 + 1] << 8
    if rest >= 1:
        h ^= data[end4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a serialized, non-null key."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
