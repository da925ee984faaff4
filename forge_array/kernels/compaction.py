"""Compaction kernels: what stream compaction needs around the running count of a mask
(our scan), each one grid-stride pass over contiguous 1-D memory.

- :func:`make_run_starts`: ``flags[i] = 1`` where a run of equal values begins in sorted
  ``values`` (``i == 0`` or ``values[i] != values[i - 1]``: NaN differs from NaN, so each NaN
  is a run of its own), else 0.
- :func:`make_select`: given a mask ``flags`` and its inclusive running count ``count``, the
  ``k``-th true element's position goes to ``positions[k]`` (``count[i] - 1`` is ``k`` where
  ``flags[i]``), ``positions[total]`` gets ``n``; with ``picks`` arrays, the element of each
  source at that position goes to the matching output too (a gather in the same pass).
- :func:`make_scatter_ranks`: ``ranks[order[i]] = count[i] - 1``: the index of the run each
  element of a sorted permutation falls in, written back at the element's place (the
  ``inverse_indices`` of ``unique_inverse``).
- :func:`make_gather_rows`: ``out[r, :] = src[positions[r], :]`` for rows of ``width``
  contiguous elements, a warp per row (``x[mask]`` of a row mask: the selected rows).

Bool memory is read and written as uint8. The launches are planned by
:mod:`forge_array.dispatch.compaction`:

>>> import numpy as np
>>> from forge_array.dispatch.compaction import select
>>> flags = np.array([False, True, True, False])
>>> select(flags, np.cumsum(flags), 2)[0].tolist()   # doctest: +SKIP
[1, 2, 4]
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..runtime import i64, ptr_t
from .reduce import buffer_dtype

__all__ = ["make_run_starts", "make_select", "make_scatter_ranks", "make_gather_rows", "PICKS",
           "run_starts_argtypes", "select_argtypes", "scatter_ranks_argtypes", "gather_rows_argtypes"]

#: how many arrays :func:`make_select` gathers at most in its pass
PICKS = 2


def make_run_starts():
    """Kernel ``(values, flags, n)``: mark where runs of equal values begin.

    >>> callable(make_run_starts())
    True
    """
    def run_starts(values, flags, n):
        i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = np.int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < n:
            if i == 0 or values[i] != values[i - 1]:
                flags[i] = 1
            else:
                flags[i] = 0
            i += step
    return run_starts


def make_select(picks: int):
    """Kernel ``(flags, count, positions, n, src_0, out_0, ..., src_{picks-1},
    out_{picks-1})``: the positions of the true elements of ``flags`` (then ``n``), and the
    elements of each ``src_q`` there.

    >>> callable(make_select(1))
    True
    """
    if picks not in range(PICKS + 1):
        raise ValueError(f"make_select: picks must be 0..{PICKS}, got {picks!r}")
    params = "".join(f", src{q}, out{q}" for q in range(picks))
    lines = [
        f"def select(flags, count, positions, n{params}):",
        "    i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x",
        "    step = np.int64(cuda.gridDim.x) * cuda.blockDim.x",
        "    while i < n:",
        "        if flags[i] != 0:",
        "            k = count[i] - 1",
        "            positions[k] = i",
    ]
    lines += [f"            out{q}[k] = src{q}[i]" for q in range(picks)]
    lines += [
        "        if i == n - 1:",
        "            positions[count[i]] = n",
        "        i += step",
    ]
    g = {"cuda": cuda, "np": np}
    exec(compile("\n".join(lines) + "\n", f"<forge_array select {picks}>", "exec"), g)
    return g["select"]


def make_scatter_ranks():
    """Kernel ``(order, count, ranks, n)``: ``ranks[order[i]] = count[i] - 1``.

    >>> callable(make_scatter_ranks())
    True
    """
    def scatter_ranks(order, count, ranks, n):
        i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = np.int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < n:
            ranks[order[i]] = count[i] - 1
            i += step
    return scatter_ranks


def make_gather_rows():
    """Kernel ``(positions, src, out, rows, width)``: ``out[r * width + j] = src[positions[r]
    * width + j]`` for ``r < rows``, ``j < width``; each warp copies whole rows, its lanes
    side by side along the row (grid-stride over rows).

    >>> callable(make_gather_rows())
    True
    """
    def gather_rows(positions, src, out, rows, width):
        lane = cuda.threadIdx.x & 31
        r = np.int64(cuda.blockIdx.x) * (cuda.blockDim.x >> 5) + (cuda.threadIdx.x >> 5)
        step = np.int64(cuda.gridDim.x) * (cuda.blockDim.x >> 5)
        while r < rows:
            s = positions[r] * width
            o = r * width
            j = np.int64(lane)
            while j < width:
                out[o + j] = src[s + j]
                j += 32
            r += step
    return gather_rows


def run_starts_argtypes(dtype):
    """numba types of :func:`make_run_starts`' arguments for values of ``dtype``.

    >>> len(run_starts_argtypes("float32"))
    3
    """
    return (ptr_t(buffer_dtype(dtype)), ptr_t(np.uint8), i64)


def select_argtypes(pick_dtypes=()):
    """numba types of :func:`make_select`' arguments, gathering arrays of ``pick_dtypes``.

    >>> len(select_argtypes(("int64",)))
    6
    """
    types = (ptr_t(np.uint8), ptr_t(np.int64), ptr_t(np.int64), i64)
    for d in pick_dtypes:
        types += (ptr_t(buffer_dtype(d)),) * 2
    return types


def scatter_ranks_argtypes():
    """numba types of :func:`make_scatter_ranks`' arguments.

    >>> len(scatter_ranks_argtypes())
    4
    """
    return (ptr_t(np.int64),) * 3 + (i64,)


def gather_rows_argtypes(dtype):
    """numba types of :func:`make_gather_rows`' arguments for rows of ``dtype``.

    >>> len(gather_rows_argtypes("float32"))
    5
    """
    b = ptr_t(buffer_dtype(dtype))
    return (ptr_t(np.int64), b, b, i64, i64)
