"""Kafka's ``Murmur3.hash128``: MurmurHash3 x64 128-bit with seed 104729, as two signed longs.

The foreign-key join hashes the serialized left value into every subscription and compares it
with the current value's hash when the response comes back (stale responses are dropped).
The hash itself is the ``mmh3`` C extension's, which computes the same function.
"""

from __future__ import annotations

import mmh3

DEFAULT_SEED = 104729


def hash128(data: bytes, seed: int = DEFAULT_SEED) -> tuple[int, int]:
    """The 128-bit hash of ``data`` as Kafka's ``long[]{h1, h2}`` (signed 64-bit ints)."""
    return mmh3.hash64(data, seed, x64arch=True, signed=True)
