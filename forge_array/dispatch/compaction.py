"""The compaction's dispatch tier: the launches of :mod:`forge_array.kernels.compaction` on
contiguous 1-D backend arrays (CuPy on a GPU, NumPy in the simulator), one grid-stride pass
each, the grid from the tuning table's ``compaction`` entry.

- :func:`run_starts`: where runs of equal values begin in a sorted array (a bool mask);
- :func:`select`: the positions of a mask's true elements from its running count, and the
  elements of up to :data:`~forge_array.kernels.compaction.PICKS` arrays there;
- :func:`scatter_ranks`: each element's run index written back through a permutation;
- :func:`gather_rows`: the rows of a C-contiguous array at given positions, a warp per row
  (the block's warps side by side, the grid from the same entry).

>>> import numpy as np
>>> flags = run_starts(np.array([1, 1, 2, 5, 5]))          # doctest: +SKIP
>>> flags.tolist()                                          # doctest: +SKIP
[True, False, True, True, False]
"""

from __future__ import annotations

import numpy as np

from .. import runtime
from ..runtime import array_module, lazy, tuning

__all__ = ["run_starts", "select", "scatter_ranks", "gather_rows"]

# the kernel module (numba.cuda) loads at first use: CPU arrays never need it
_k = lazy.module("forge_array.kernels.compaction", __name__, "_k")

def _grid(n: int, per_thread: int = 1) -> tuple:
    """(grid, block) of a grid-stride pass over ``n`` items, each taken by ``per_thread``
    threads (the row gather: a warp per row)."""
    p = tuning.params("compaction")
    block = p["block"]
    cap = runtime.device_info()["sm_count"] * p["blocks_per_sm"]
    return max(1, min(-(-n // (block // per_thread)), cap)), block


def _buf(a):
    if runtime.SIMULATE and a.dtype == np.bool_:
        a = a.view(np.uint8)
    return runtime.buffer_of(a)


def _check(*arrays) -> None:
    for a in arrays:
        if a.ndim != 1 or not a.flags.c_contiguous:
            raise ValueError("compaction kernels take contiguous 1-D arrays")


def run_starts(values):
    """A bool array of ``len(values)``: True where a run of equal values begins in sorted
    ``values`` (the first element, and each element unequal to the one before; NaN is
    unequal to NaN)."""
    _check(values)
    n = values.size
    flags = array_module(values).empty(n, dtype=np.bool_)
    if n:
        k = runtime.compile_kernel(_k.make_run_starts, (), _k.run_starts_argtypes(values.dtype))
        grid, block = _grid(n)
        runtime.launch(k, grid, block, (_buf(values), _buf(flags), n))
    return flags


def select(flags, count, total: int, picks=()):
    """``(positions, picked_0, ...)``: the positions (int64) of the true elements of mask
    ``flags`` followed by ``len(flags)``, given ``count``, its inclusive running count in
    int64, and ``total``, its last value; and of each array of ``picks`` (the length of
    ``flags``), its elements at those positions."""
    _check(flags, count, *picks)
    n = flags.size
    xp = array_module(flags)
    positions = xp.empty(total + 1, dtype=np.int64)
    picked = [xp.empty(total, dtype=p.dtype) for p in picks]
    if n == 0:
        positions[0] = 0
        return (positions, *picked)
    args = (_buf(flags), _buf(count), _buf(positions), n)
    for src, out in zip(picks, picked):
        args += (_buf(src), _buf(out))
    k = runtime.compile_kernel(_k.make_select, (len(picks),), _k.select_argtypes(tuple(p.dtype for p in picks)))
    grid, block = _grid(n)
    runtime.launch(k, grid, block, args)
    return (positions, *picked)


def scatter_ranks(order, count):
    """An int64 array ``ranks`` with ``ranks[order[i]] = count[i] - 1``: ``order`` a
    permutation (int64), ``count`` the inclusive running count (int64) of where runs begin in
    the array ``order`` sorts."""
    _check(order, count)
    n = order.size
    ranks = array_module(order).empty(n, dtype=np.int64)
    if n:
        k = runtime.compile_kernel(_k.make_scatter_ranks, (), _k.scatter_ranks_argtypes())
        grid, block = _grid(n)
        runtime.launch(k, grid, block, (_buf(order), _buf(count), _buf(ranks), n))
    return ranks


def gather_rows(src, positions, rows: int):
    """The rows ``src[positions[r]]`` for ``r < rows`` as a new C-contiguous array of shape
    ``(rows, *src.shape[1:])``: ``src`` C-contiguous of at least 2 dimensions, ``positions``
    int64 (at least ``rows`` of them, each a row of ``src``)."""
    if src.ndim < 2 or not src.flags.c_contiguous:
        raise ValueError("gather_rows takes C-contiguous arrays of 2 or more dimensions")
    _check(positions)
    out = array_module(src).empty((rows,) + tuple(src.shape[1:]), dtype=src.dtype)
    width = out.size // rows if rows else 0
    if rows and width:
        k = runtime.compile_kernel(_k.make_gather_rows, (), _k.gather_rows_argtypes(src.dtype))
        grid, block = _grid(rows, 32)
        runtime.launch(k, grid, block, (_buf(positions), _buf(src.reshape(-1)), _buf(out.reshape(-1)), rows, width))
    return out
