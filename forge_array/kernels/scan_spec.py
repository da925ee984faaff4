"""The scan kernels' parameters and layout rules, without numba: what the dispatch tier plans
with (:mod:`forge_array.dispatch.scan`) and the kernel factories
(:mod:`forge_array.kernels.scan`) specialise on — the status words of the look-back, the
statistics and trace words of the counter buffer, when tiles move as 128-bit vectors, the
pipelined scan's block and shared memory, the narrow scan's tile rows.

>>> status_words(("float32",)), packable(("float64",), wide=False), pipeline_shape("float64", 2, 1, 2)
(2, False, (192, 128, 2048))
"""

from __future__ import annotations

import numpy as np

from ..runtime.flags import FLAGS
from ..runtime.packed_words import vector_elems, words_for

__all__ = ["STAT_SPINS", "STAT_AGG_WINDOWS", "STAT_WORDS", "packable", "status_words", "vec_ok", "ovec_ok",
           "TRACE", "TRACE_STAMPS", "trace_words", "pipeline_shape", "pipeline_scratch_bytes",
           "MAX_COLUMNS", "MAX_PACKED_COLUMNS", "tile_rows"]

#: Counter buffer layout: [0] tile ticket, [1] spins on a not-yet-published predecessor,
#: [2] look-back steps that combined an AGGREGATE (went further back).
STAT_SPINS, STAT_AGG_WINDOWS, STAT_WORDS = 1, 2, 4


def packable(acc_dtypes, wide: bool = True) -> bool:
    """Whether status and value share one word: 8 bytes for one value of <= 4 bytes, 16
    bytes (one 128-bit access, CUB's ``longlong2`` transaction word) for values of <= 12
    bytes (float64, int64, complex64, (float32, float32) pairs, ...) when ``wide``.

    >>> packable(("float32",)), packable(("float64",)), packable(("float32", "float32"))
    (True, True, True)
    >>> packable(("float64",), wide=False), packable(("float64", "float64"))
    (False, False)
    """
    sw = status_words(acc_dtypes)
    return sw is not None and (wide or sw == 2)


def status_words(acc_dtypes):
    """32-bit pieces of a packed status word (2 or 4), None when the value needs flag + slots.

    >>> status_words(("int8",)), status_words(("int64",)), status_words(("float64", "float64"))
    (2, 4, None)
    """
    return words_for(tuple(np.dtype(d) for d in acc_dtypes))


def vec_ok(in_dtypes, acc_dtypes, block, items, mapped=False) -> bool:
    """Whether the tile scan can load its inputs as 128-bit vectors: one input (or, for a
    mapped scan, inputs of one item size) of < 16 bytes, items a multiple of the vector.

    >>> vec_ok(("float32",), ("float32",), 256, 16), vec_ok(("float32", "int64"), ("float64",), 256, 16, True)
    (True, False)
    """
    sizes = {np.dtype(d).itemsize for d in in_dtypes}
    return (len(in_dtypes) == 1 or mapped) and len(sizes) == 1 and sizes.pop() < 16 and (
        items % vector_elems(in_dtypes[0]) == 0)


def ovec_ok(in_dtypes, acc_dtypes, items, mapped=False) -> bool:
    """Whether 128-bit output stores are possible at all: one value whose size is the
    input's (so that input and output tiles have the same 16-byte phase); a mapped scan's
    inputs all of that size.

    >>> ovec_ok(("float32",), ("float32",), 16), ovec_ok(("int8",), ("int64",), 8)
    (True, False)
    >>> ovec_ok(("float32", "int32"), ("float32",), 16, mapped=True)
    True
    """
    osz = np.dtype(acc_dtypes[0]).itemsize
    return (len(acc_dtypes) == 1 and (len(in_dtypes) == 1 or mapped)
            and all(np.dtype(d).itemsize == osz for d in in_dtypes) and osz < 16
            and items % vector_elems(acc_dtypes[0]) == 0)


# ---- the pipelined scan (sm_90)

#: Time-stamp every tile of the pipelined scan (a diagnostic: ``FORGE_ARRAY_SCAN_TRACE=1``,
#: part of the kernels' cache key): ``%globaltimer`` when the producer took its ticket, when
#: the reduce squad published its state, when its look-back ended and when its store had
#: left the buffer, and the block that ran it; ``TRACE_STAMPS`` words per tile in the counter
#: buffer after its ``STAT_WORDS`` statistics words (:func:`trace_words` of them; the host
#: makes room).
TRACE = FLAGS["scan_trace"].cell[0]
TRACE_STAMPS = 5


def trace_words(ntiles: int) -> int:
    """Words of the counter buffer a traced launch of ``ntiles`` tiles writes (statistics
    words included).

    >>> trace_words(10)
    54
    """
    return STAT_WORDS + TRACE_STAMPS * int(ntiles)


def pipeline_shape(dtype, warps: int, vectors: int, stages: int, lookers: int = 1):
    """``(threads per block, tile elements, bytes of the tile buffers)`` of a pipeline of
    ``warps`` warps per squad (reduce, scan-store) with ``vectors`` 16-byte vectors per
    thread and ``stages`` buffers (plus the producer warp and ``lookers`` look-back warps).

    >>> pipeline_shape("float64", warps=2, vectors=1, stages=2)
    (192, 128, 2048)
    >>> pipeline_shape("float32", warps=4, vectors=13, stages=4, lookers=2)[0]
    352
    """
    dt = np.dtype(dtype)
    tile = warps * 32 * vectors * vector_elems(dt)
    return (2 * warps + 1 + lookers) * 32, tile, stages * tile * dt.itemsize


def pipeline_scratch_bytes(dtype, warps: int, stages: int) -> int:
    """Static shared memory besides the tile buffers: the tagged slots (warp, tile and
    thread totals, prefixes: an int64 kind and a value each), tile ids and mbarriers.

    >>> pipeline_scratch_bytes("float32", warps=4, stages=3)
    4944
    """
    nslot = stages * (warps + 2 + warps * 32)
    return nslot * (8 + np.dtype(dtype).itemsize) + stages * 8 + 4 * stages * 8


# ---- the narrow-matrix scan

#: Widest matrix the flag-word layout takes: one look-back lane of warp 0 per column.
MAX_COLUMNS = 32
#: Widest matrix the packed layout takes (a thread per column, at most the block's threads).
MAX_PACKED_COLUMNS = 1024


def tile_rows(block: int, items: int, p: int) -> tuple[int, int, int]:
    """``(G, R, T)`` of a tile for ``p`` columns: ``G`` groups of ``p`` threads (at most 32),
    ``R`` rows per thread with ``R = 1 (mod 32 / gcd(p, 32))`` (conflict-free shared-memory
    reads), ``T = G * R`` rows per tile (``T * p <= block * items``). The kernel computes
    the same from its runtime ``p``.

    >>> tile_rows(128, 64, 10)
    (12, 65, 780)
    >>> tile_rows(128, 64, 32)
    (4, 64, 256)
    """
    G = min(block // p, 32)
    lsb = min(p & -p, 32)
    M = 32 // lsb
    R = ((block * items) // (G * p) - 1) // M * M + 1
    return G, R, G * R
