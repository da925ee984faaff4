"""Stream compaction: the positions of a boolean mask's true elements through our scan, what
``x[mask]``, ``nonzero(x)`` and the ``unique_*`` functions run on a GPU.

The mask's running count (an inclusive ``cumulative_sum`` in int64, one pass at the copy
rate) ends in the number of true elements, which the caller needs on the host anyway to
size the result (the one device-to-host read every library makes here); the ``k``-th true
element sits where the running count first reaches ``k + 1`` (a binary search per result
element, ``searchsorted``).  CuPy's own boolean indexing scans the mask with a naive
block scan that moves it several times (0.3-0.5 ms per mask of 200,000 elements on an
H100, against PyTorch's 0.05 ms: ``bench.suite_sklearn``'s LinearDiscriminantAnalysis
makes eight of them).

>>> import numpy as np
>>> [a.tolist() for a in nonzero(np.array([[True, False], [False, True]]))]
[[0, 1], [0, 1]]

``unique`` sorts, marks where a run of equal values begins and compacts those marks the same
way, where CuPy's ``unique`` compacts them with its boolean indexing: on 200,000 int64 labels
on an H200, ``unique_values`` / ``unique_inverse`` / ``unique_counts`` 0.27 / 0.37 / 0.51 ms
against CuPy's 0.27 / 0.46 / 0.68 in the same process (PyTorch's 0.12-0.16: what is left is
the host time of CuPy's sort and search calls).
"""

from __future__ import annotations

import numpy as np

from ..runtime import array_module
from .scan.cumulative import cumulative_sum

__all__ = ["nonzero", "unique"]


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


def _true_positions(flags, xp):
    """``(count, positions)`` of 1-D bool backend array ``flags`` (non-empty): the running
    count of its true elements (int64), and the positions of the true elements followed by
    the length of ``flags`` (the ``k``-th true element is where the count first reaches
    ``k + 1``: one binary search per result element, and one more for the end)."""
    count = cumulative_sum(flags, dtype=np.int64)
    total = int(count[-1])
    found = xp.searchsorted(count, xp.arange(1, total + 2, dtype=np.int64), side="left")
    return count, found.astype(np.int64, copy=False)


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
    flat = x.reshape(-1)
    n = flat.size
    as_bool = flat.dtype == np.bool_
    if as_bool:
        flat = flat.view(np.uint8)
    perm = None
    if index or inverse:
        perm = xp.argsort(flat, kind="stable")   # equal values keep their order: the first comes first
        ordered = flat[perm]
    else:
        ordered = xp.sort(flat)
    if n == 0:
        run, bounds = None, xp.zeros(1, dtype=np.int64)
    else:
        begins = xp.empty(n, dtype=np.bool_)
        begins[:1] = True
        xp.not_equal(ordered[1:], ordered[:-1], out=begins[1:])   # NaN != NaN: each NaN begins a run
        run, bounds = _true_positions(begins, xp)   # where each run begins, then n
    starts = bounds[:-1]
    values = ordered[starts]
    if as_bool:
        values = values.view(np.bool_)
    first = perm[starts].astype(np.int64, copy=False) if index else None
    where = None
    if inverse:
        where = xp.empty(n, dtype=np.int64)
        if n:
            where[perm] = run - 1
    many = bounds[1:] - starts if counts else None
    return values, first, where, many
