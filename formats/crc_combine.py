"""CRC32C combine: the CRC32C of two byte strings joined, from their own CRC32Cs and the
second one's length, without the bytes.

:func:`crc32c_combine` is ``crc32c_combine(crc1, crc2, len2)`` of ``formats/_speedups.c``
(``_crc32c.h``) when the C module is built, else :func:`crc32c_combine_py`, its pure twin
(the same arithmetic: ``crc1`` times ``x**(8 * len2)`` modulo the Castagnoli polynomial, plus
``crc2``). :func:`crc32c_concat` folds a run of ``(crc, length)`` pieces. They let a block's
CRC32C come from its spans' (one pass over the bytes instead of two), on the offload and on
the read path, and a file's from its parts'. Pure: ints in, ints out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from formats.framing import _speedups

__all__ = ["crc32c_combine", "crc32c_combine_py", "crc32c_concat"]

_POLY = 0x82F63B78  # CRC32C, reflected


def _multmodp(a: int, b: int) -> int:
    """a(x) * b(x) modulo the polynomial (reflected: bit 31 is x**0)."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _x2n_table() -> tuple[int, ...]:
    p = 1 << 30  # x**1
    table = [p]
    for _ in range(95):
        p = _multmodp(p, p)
        table.append(p)
    return tuple(table)


#: x**(2**n) modulo the polynomial, n < 96: no wrap-around (the Castagnoli polynomial is not
#: irreducible, so x**(2**32) is not x, as it is for zlib's CRC-32): lengths below 2**92 bytes
_X2N = _x2n_table()


def _x2nmodp(n: int, k: int) -> int:
    """x**(n * 2**k) modulo the polynomial."""
    p = 1 << 31  # x**0
    while n:
        if n & 1:
            p = _multmodp(_X2N[k], p)
        n >>= 1
        k += 1
    return p


def crc32c_combine_py(crc1: int, crc2: int, len2: int) -> int:
    """The CRC32C of A + B from ``crc1`` = CRC32C(A), ``crc2`` = CRC32C(B), ``len2`` = len(B)."""
    if not (0 <= crc1 <= 0xFFFFFFFF and 0 <= crc2 <= 0xFFFFFFFF):
        raise ValueError("crc32c_combine: a CRC is not a 32-bit value")
    if len2 < 0:
        raise ValueError("crc32c_combine: a negative length")
    if len2 == 0:  # B is empty: crc2 is not looked at (as the C function)
        return crc1
    return _multmodp(_x2nmodp(len2, 3), crc1) ^ crc2


_C = _speedups()
#: C when built (``formats._speedups``), else the pure twin
crc32c_combine: Callable[[int, int, int], int] = (
    _C.crc32c_combine if _C is not None else crc32c_combine_py
)


def crc32c_concat(pieces: Iterable[tuple[int, int]], crc: int = 0) -> int:
    """The CRC32C of pieces joined in order, each given as ``(its CRC32C, its length)``,
    continuing from ``crc`` (the CRC32C of what came before them; 0 at the start)."""
    combine = crc32c_combine
    for piece_crc, length in pieces:
        crc = combine(crc, piece_crc, length)
    return crc
