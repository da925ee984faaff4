"""The fused row programs' dispatch tier: whether a row of ``p`` elements takes the row
kernel (:mod:`forge_array.kernels.row_programs`), its block and items per thread (tuning
``rows``), the kernel compiled for a program, its grid, and the launch replayed on new
leaves of the same layouts (:class:`RowLaunch`).

>>> fits(0, 64)       # no rows: nothing for the row kernel
False
"""

from __future__ import annotations

import numpy as np

from ..kernels import row_programs as _rk
from ..runtime import array_module, buffer_of, compile_kernel, device_info, launch, tuning

__all__ = ["fits", "shape_of", "RowLaunch", "plan"]


def fits(n, p):
    """Whether ``n`` rows of ``p`` elements take the row kernel (tuning ``rows``'s
    ``min_row`` up to the kernel's ``MAX_ROW``)."""
    return n > 0 and int(tuning.params("rows")["min_row"]) <= p <= _rk.MAX_ROW


def shape_of(p, row_leaves, leaves):
    """(block, items per thread) of a row program over rows of ``p`` elements reading
    ``row_leaves`` arrays along the row, of ``leaves`` in all; None when it does not fit."""
    pt = tuning.params("rows")
    shape = _rk.row_shape(p, row_leaves, int(pt["block_max"]), int(pt["target"]))
    if shape is None or leaves > _rk.MAX_LEAVES:
        return None
    return shape


class RowLaunch:
    """One row program's launch, replayed on new leaves of the same layouts (replays are
    keyed by the leaves' layouts, so their strides are computed once): ``(*leaves)``
    returns the full outputs, the row outputs and the reductions' results."""

    __slots__ = ("kernel", "block", "grid", "S", "n", "p", "full_dtypes", "row_shapes",
                 "red_shapes", "bools", "strides")

    def __call__(self, *leaves):
        xp = array_module(leaves[0])
        outs = [xp.empty(self.S, dtype=d) for d in self.full_dtypes]
        outs += [xp.empty(s, dtype=d) for s, d in self.row_shapes]
        outs += [xp.empty(s, dtype=d) for s, d in self.red_shapes]
        bufs = [buffer_of(a.view(np.uint8) if b else a) for a, b in zip(leaves, self.bools)]
        bufs += [buffer_of(o.view(np.uint8) if o.dtype.kind == "b" else o) for o in outs]
        launch(self.kernel, self.grid, self.block, tuple(bufs) + (self.n, self.p) + self.strides)
        return tuple(outs)


def plan(rounds, outs, row_outs, leaves, reds, rows, S, block, items, strides):
    """The :class:`RowLaunch` of a row program (``rounds`` of reductions, full outputs
    ``outs``, row outputs ``row_outs``, as :func:`forge_array.kernels.row_programs.make_row_kernel`
    takes them) over ``leaves`` (arrays; their row ``strides`` flattened in order) into the
    nodes ``rows`` and ``reds`` of rows of ``S[-1]`` elements, compiled for ``block`` threads
    of ``items`` elements each."""
    leaf_dtypes = tuple(a.dtype.str for a in leaves)
    red_dtypes = tuple(r.dtype.str for r in reds)
    out_dtypes = outs[2] if outs else ()
    row_dtypes = row_outs[2] if row_outs else ()
    n = 1
    for d in S[:-1]:
        n *= d
    step = RowLaunch()
    step.kernel = compile_kernel(
        _rk.make_row_kernel,
        (tuple(rounds), outs, row_outs, leaf_dtypes, red_dtypes, block, items),
        _rk.row_argtypes(leaf_dtypes, out_dtypes, row_dtypes, red_dtypes),
        launch_bounds=(block, 1))  # registers capped so that a block of any size launches
    step.block, step.S, step.n, step.p = block, S, n, S[-1]
    step.grid = max(1, min(n, device_info()["sm_count"] * int(tuning.params("rows")["blocks_per_sm"])))
    step.full_dtypes = out_dtypes
    step.row_shapes = tuple((nd.shape, nd.dtype) for nd in rows)
    step.red_shapes = tuple((r.shape, r.dtype) for r in reds)
    step.bools = tuple(a.dtype.kind == "b" for a in leaves)
    step.strides = tuple(v for st in strides for v in st)
    return step
