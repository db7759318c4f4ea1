"""SplitMix64 payloads exactly as the golden manifest's generator describes them.

Used by tests and benchmarks to regenerate the entries Pulsar encoded (manifest
``generator.prng``): per entry, optionally a length drawn in ``[lo, hi]``, then
``ceil(len / 8)`` outputs written little-endian and truncated to ``len``.
"""

from __future__ import annotations

from collections.abc import Iterator

_MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed: int) -> None:
        self.state = seed & _MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def payload(self, length: int) -> bytes:
        words = (length + 7) // 8
        return b"".join(self.next().to_bytes(8, "little") for _ in range(words))[:length]


def fixed_length_payloads(seed: int, lengths: list[int]) -> Iterator[bytes]:
    rng = SplitMix64(seed)
    for length in lengths:
        yield rng.payload(length)


def drawn_length_payloads(seed: int, count: int, lo: int, hi: int) -> Iterator[bytes]:
    rng = SplitMix64(seed)
    for _ in range(count):
        length = lo + rng.next() % (hi - lo + 1)
        yield rng.payload(length)
