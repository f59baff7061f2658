"""The foreign-key hash (``mmh3``) against a pure-Python MurmurHash3 x64 128-bit written from
Kafka's ``Murmur3.hash128``, on thousands of random inputs of every tail length."""

from __future__ import annotations

import random

from streaming.dsl.processors.foreign_key.murmur3 import DEFAULT_SEED, hash128

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


def reference_hash128(data: bytes, seed: int = DEFAULT_SEED) -> tuple[int, int]:
    """Kafka's ``Murmur3.hash128`` transcribed line by line (the reference, slow)."""
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


def test_hash128_equals_the_reference_on_random_inputs() -> None:
    rng = random.Random(104729)
    inputs = [rng.randbytes(n) for n in range(200) for _ in range(20)]
    inputs += [rng.randbytes(rng.randrange(200, 4096)) for _ in range(200)]
    mismatches = [d for d in inputs if hash128(d) != reference_hash128(d)]
    assert len(inputs) == 4200
    assert mismatches == []


def test_hash128_equals_the_reference_with_other_seeds() -> None:
    rng = random.Random(7)
    for _ in range(500):
        data = rng.randbytes(rng.randrange(0, 64))
        seed = rng.randrange(0, 1 << 32)
        assert hash128(data, seed) == reference_hash128(data, seed)


def test_hash128_returns_two_signed_longs() -> None:
    h1, h2 = hash128(b"\xff" * 37)
    assert isinstance(h1, int) and isinstance(h2, int)
    assert -(1 << 63) <= h1 < 1 << 63 and -(1 << 63) <= h2 < 1 << 63
