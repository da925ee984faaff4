"""The compaction's dispatch tier: the launches of :mod:`forge_array.kernels.compaction` on
contiguous 1-D backend arrays (CuPy on a GPU, NumPy in the simulator), one grid-stride pass
each, the grid from the tuning table's ``compaction`` entry.

- :func:`run_starts`: where runs of equal values begin in a sorted array (a bool mask);
- :func:`select`: the positions of a mask's true elements from its running count, and the
  elements of up to :data:`~forge_array.kernels.compaction.PICKS` arrays there;
- :func:`scatter_ranks`: each element's run index written back through a permutation;
- :func:`gather_rows`: the rows of a C-contiguous array at given positions, a warp per row
  (the block's warps side by side, the grid from the same entry);
- :func:`mark_values` / :func:`ranks_of`: which integers of a span occur in an array, and
  each element's index among them (distinct integer labels without a sort).

>>> import numpy as np
>>> flags = run_starts(np.array([1, 1, 2, 5, 5]))          # doctest: +SKIP
>>> flags.tolist()                                          # doctest: +SKIP
[True, False, True, True, False]
"""

from __future__ import annotations

import numpy as np

from .. import runtime
from ..runtime import array_module, lazy, tuning
from ..runtime.caches import Cache

__all__ = ["run_starts", "select", "scatter_ranks", "gather_rows", "mark_values", "ranks_of"]

# the kernel modules (numba.cuda) load at first use: CPU arrays never need them
_k = lazy.module("forge_array.kernels.compaction", __name__, "_k")
_ks = lazy.module("forge_array.kernels.spans", __name__, "_ks")

#: (kernel, its dtypes, device) -> (kernel, block, most blocks of a grid-stride pass) of the
#: launches below: a call pays a look-up, not the tuning table, the device's properties and
#: the kernel's argument types (``python -m bench.suite_hostops --only "X[c == 1],unique"``)
_KERNELS = Cache("dispatch.compaction.KERNELS")


def _device() -> int:
    return 0 if runtime.SIMULATE else runtime.cupy().cuda.runtime.getDevice()


def _planned(key, build) -> tuple:
    """``(kernel, block, grid cap)`` of the kernel ``key`` names on the current device;
    ``build()`` compiles (or loads) it the first time."""
    key = key + (_device(),)
    hit = _KERNELS.get(key)
    if hit is None:
        p = tuning.params("compaction")
        cap = runtime.device_info()["sm_count"] * p["blocks_per_sm"]
        hit = _KERNELS[key] = (build(), p["block"], cap)
    return hit


def _grid(n: int, block: int, cap: int, per_thread: int = 1) -> int:
    """Blocks of a grid-stride pass over ``n`` items, each taken by ``per_thread`` threads
    (the row gather: a warp per row), at most ``cap``."""
    return max(1, min(-(-n // (block // per_thread)), cap))


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
        k, block, cap = _planned(("run_starts", values.dtype), lambda: runtime.compile_kernel(
            _k.make_run_starts, (), _k.run_starts_argtypes(values.dtype)))
        runtime.launch(k, _grid(n, block, cap), block, (_buf(values), _buf(flags), n))
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
    dts = tuple([p.dtype for p in picks])
    k, block, cap = _planned(("select", dts), lambda: runtime.compile_kernel(
        _k.make_select, (len(dts),), _k.select_argtypes(dts)))
    runtime.launch(k, _grid(n, block, cap), block, args)
    return (positions, *picked)


def scatter_ranks(order, count):
    """An int64 array ``ranks`` with ``ranks[order[i]] = count[i] - 1``: ``order`` a
    permutation (int64), ``count`` the inclusive running count (int64) of where runs begin in
    the array ``order`` sorts."""
    _check(order, count)
    n = order.size
    ranks = array_module(order).empty(n, dtype=np.int64)
    if n:
        k, block, cap = _planned(("scatter_ranks",), lambda: runtime.compile_kernel(
            _k.make_scatter_ranks, (), _k.scatter_ranks_argtypes()))
        runtime.launch(k, _grid(n, block, cap), block, (_buf(order), _buf(count), _buf(ranks), n))
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
        k, block, cap = _planned(("gather_rows", src.dtype), lambda: runtime.compile_kernel(
            _k.make_gather_rows, (), _k.gather_rows_argtypes(src.dtype)))
        runtime.launch(k, _grid(rows, block, cap, 32), block,
                       (_buf(positions), _buf(src.reshape(-1)), _buf(out.reshape(-1)), rows, width))
    return out


def mark_values(values, lo: int, size: int):
    """A bool array of ``size``: True at ``v - lo`` for each value ``v`` of the contiguous 1-D
    integer array ``values`` (every one in ``[lo, lo + size)``), else False."""
    _check(values)
    n = values.size
    flags = array_module(values).zeros(size, dtype=np.bool_)
    if n:
        k, block, cap = _planned(("mark_values", values.dtype), lambda: runtime.compile_kernel(
            _ks.make_mark_values, (), _ks.mark_values_argtypes(values.dtype)))
        runtime.launch(k, _grid(n, block, cap), block, (_buf(values), int(lo), _buf(flags), n))
    return flags


def ranks_of(values, lo: int, count):
    """An int64 array of ``count[v - lo] - 1`` for each value ``v`` of the contiguous 1-D
    integer array ``values``: ``count`` the inclusive running count (int64) of
    :func:`mark_values`' flags, so each element's index among the distinct values."""
    _check(values, count)
    n = values.size
    ranks = array_module(values).empty(n, dtype=np.int64)
    if n:
        k, block, cap = _planned(("ranks_of", values.dtype), lambda: runtime.compile_kernel(
            _ks.make_ranks_of, (), _ks.ranks_of_argtypes(values.dtype)))
        runtime.launch(k, _grid(n, block, cap), block, (_buf(values), int(lo), _buf(count), _buf(ranks), n))
    return ranks
