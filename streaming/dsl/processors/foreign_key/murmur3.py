"""Kafka's ``Murmur3.hash128``: MurmurHash3 x64 128-bit with seed 104729, as two signed longs.

The foreign-key join hashes the serialized left value into every subscription and compares it
with the current value's hash when the response comes back (stale responses are dropped).
"""

from __future__ import annotations

DEFAULT_SEED = 104729

_MASK = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_N1 = 0x52DCE729
_N2 = 0x38495AB5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK
    h ^= h >> 33
    return h


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def hash128(data: bytes, seed: int = DEFAULT_SEED) -> tuple[int, int]:
    """The 128-bit hash of ``data`` as Kafka's ``long[]{h1, h2}`` (signed 64-bit ints)."""
    length = len(data)
    h1 = h2 = seed & _MASK
    nblocks = length >> 4
    from_bytes = int.from_bytes
    for i in range(nblocks):
        base = i << 4
        k1 = from_bytes(data[base : base + 8], "little")
        k2 = from_bytes(data[base + 8 : base + 16], "little")
        k1 = (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
        h1 ^= k1
        h1 = (((_rotl(h1, 27) + h2) & _MASK) * 5 + _N1) & _MASK
        k2 = (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
        h2 ^= k2
        h2 = (((_rotl(h2, 31) + h1) & _MASK) * 5 + _N2) & _MASK
    tail = data[nblocks << 4 :]
    rest = len(tail)
    if rest > 8:
        k2 = from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
    if rest > 0:
        k1 = from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return _signed(h1), _signed(h2)
