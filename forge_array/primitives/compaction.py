"""Stream compaction: the positions of a boolean mask's true elements through our scan, what
``x[mask]``, ``nonzero(x)`` and the ``unique_*`` functions run on a GPU.

The mask's running count (an inclusive ``cumulative_sum`` in int64, one pass at the copy
rate) ends in the number of true elements, which the caller needs on the host anyway to
size the result (the one device-to-host read every library makes here); one more pass
(:func:`forge_array.dispatch.compaction.select`) writes each true element's position to
the slot its count names, and gathers the elements of the arrays asked for there.

>>> import numpy as np
>>> [a.tolist() for a in nonzero(np.array([[True, False], [False, True]]))]
[[0, 1], [0, 1]]

``unique`` of integers whose values span at most :func:`span_limit` consecutive integers
(labels, class ids) needs no sort: one pass finds the smallest and largest value, one marks
which values of that span occur (:func:`~forge_array.dispatch.compaction.mark_values`), the
scan's compaction of those marks lists them in ascending order, and each element's index
among them is the running count at its value
(:func:`~forge_array.dispatch.compaction.ranks_of`).  Otherwise (and for first indices and
counts) ``unique`` sorts (the backend's sort), marks where a run of equal values begins
(:func:`~forge_array.dispatch.compaction.run_starts`), counts the marks with the scan and
selects the run starts with their values (and first positions) in one pass; the inverse
indices are the running count scattered back through the sort's permutation
(:func:`~forge_array.dispatch.compaction.scatter_ranks`).  Each step is one launch where
NumPy's algorithm, which CuPy follows, takes three to five (``python -m bench.suite_hostops
--only unique`` has the figures beside PyTorch's and CuPy's).
"""

from __future__ import annotations

import numpy as np

from ..dispatch import compaction as _dc
from ..runtime import array_module
from .reductions import named as _named
from .scan.cumulative import cumulative_sum

__all__ = ["nonzero", "compress_rows", "unique", "span_limit", "SPAN_MIN"]


def nonzero(mask):
    """The indices of the true (non-zero) elements of backend array ``mask`` (at least 1-D),
    one int64 array per dimension, in C order: NumPy's ``nonzero``.

    >>> import numpy as np
    >>> [a.tolist() for a in nonzero(np.array([0, 3, 0, 4]))]
    [[1, 3]]
    """
    xp = array_module(mask)
    if mask.ndim == 0:
        raise ValueError("nonzero of a 0-d array: index with a 0-d mask instead")
    if mask.dtype != np.bool_:
        mask = mask != 0
    if mask.size == 0:
        return tuple(xp.zeros(0, dtype=np.int64) for _ in range(mask.ndim))
    flat = _true_positions(mask.reshape(-1), xp)[1][:-1]
    if mask.ndim == 1:
        return (flat,)
    return tuple(a.astype(np.int64, copy=False) for a in xp.unravel_index(flat, mask.shape))


def compress_rows(x, mask):
    """``x[mask]`` of backend array ``x`` (2 or more dimensions) and a 1-D bool ``mask`` over
    its first axis: the selected rows, in order, as a new C-contiguous array (the mask's
    running count, then one pass writing the rows' positions and one copying the rows).

    >>> import numpy as np
    >>> compress_rows(np.arange(6).reshape(3, 2), np.array([True, False, True])).tolist()
    [[0, 1], [4, 5]]
    """
    xp = array_module(x)
    if x.ndim < 2 or mask.ndim != 1 or mask.dtype != np.bool_ or mask.shape[0] != x.shape[0]:
        raise ValueError("compress_rows: a 1-D bool mask as long as the first axis of an array of "
                         "2 or more dimensions")
    if mask.size == 0:
        return xp.empty((0,) + tuple(x.shape[1:]), dtype=x.dtype)
    _, positions, _ = _true_positions(mask, xp)
    return _dc.gather_rows(xp.ascontiguousarray(x), positions, positions.size - 1)


def _true_positions(flags, xp, picks=()):
    """``(count, positions, picked)`` of 1-D bool backend array ``flags`` (non-empty): the
    running count of its true elements (int64), the positions of the true elements followed
    by the length of ``flags``, and the elements of each array of ``picks`` at those
    positions."""
    flags = xp.ascontiguousarray(flags)
    count = cumulative_sum(flags, dtype=np.int64)
    total = int(count[-1])
    positions, *picked = _dc.select(flags, count, total, picks)
    return count, positions, picked


def unique(x, index=False, inverse=False, counts=False):
    """``(values, index, inverse, counts)`` of backend array ``x`` flattened: its distinct
    values in ascending order (each NaN a value of its own, NaNs last), and where asked (else
    None) the position of each value's first occurrence, the position in ``values`` of each
    element of ``x`` (flat) and how often each value occurs, all int64: the standard's
    ``unique_*`` functions.

    >>> import numpy as np
    >>> v, i, inv, c = unique(np.array([3, 1, 3, 2, 1]), index=True, inverse=True, counts=True)
    >>> v.tolist(), i.tolist(), inv.tolist(), c.tolist()
    ([1, 2, 3], [1, 3, 0], [2, 0, 2, 1, 0], [2, 1, 2])
    """
    xp = array_module(x)
    flat = xp.ascontiguousarray(x.reshape(-1))
    n = flat.size
    as_bool = flat.dtype == np.bool_
    if as_bool:
        flat = flat.view(np.uint8)
    if n and not index and not counts and flat.dtype.kind in "iu":
        r = _unique_in_span(flat, xp, inverse)
        if r is not None:
            values, where = r
            return (values.view(np.bool_) if as_bool else values), None, where, None
    perm = None
    if index or inverse:
        perm = xp.argsort(flat, kind="stable").astype(np.int64, copy=False)   # equal values keep their order
        ordered = flat[perm]
    else:
        ordered = xp.sort(flat)
    run = first = where = None
    if n == 0:
        bounds, values = xp.zeros(1, dtype=np.int64), ordered
        if index:
            first = xp.zeros(0, dtype=np.int64)
    else:
        picks = (ordered, perm) if index else (ordered,)
        run, bounds, picked = _true_positions(_dc.run_starts(ordered), xp, picks)
        values = picked[0]
        first = picked[1] if index else None
    if as_bool:
        values = values.view(np.bool_)
    if inverse:
        where = _dc.scatter_ranks(perm, run) if n else xp.empty(0, dtype=np.int64)
    many = bounds[1:] - bounds[:-1] if counts else None
    return values, first, where, many


#: the span of integers (largest value - smallest + 1) that :func:`unique` marks rather than
#: sorts, at the least: an array may span up to its own length, as a sort's buffers do
SPAN_MIN = 1 << 16


def span_limit(n: int) -> int:
    """The widest span of values :func:`unique` marks for an integer array of ``n`` elements.

    >>> span_limit(10), span_limit(10**6)
    (65536, 1000000)
    """
    return max(n, SPAN_MIN)


def _unique_in_span(flat, xp, inverse):
    """``(values, inverse or None)`` of the contiguous 1-D integer array ``flat`` (not empty)
    through the marks of which values of its span occur, or None when its span is wider
    than :func:`span_limit` (or beyond int64)."""
    lo_hi = (_named.min(flat), _named.max(flat))   # both launched (replayed plans) before a read
    lo, hi = int(lo_hi[0]), int(lo_hi[1])
    if hi - lo + 1 > span_limit(flat.size) or hi >= 1 << 63:
        return None
    flags = _dc.mark_values(flat, lo, hi - lo + 1)
    count, positions, _ = _true_positions(flags, xp)
    values = positions[:-1]
    if lo:
        values += lo
    values = values.astype(flat.dtype, copy=False)
    return values, (_dc.ranks_of(flat, lo, count) if inverse else None)
