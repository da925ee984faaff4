"""Indexing steps on backend arrays (NumPy / CuPy) that the array class and the indexing
functions share: the bounds check of integer index arrays and the single-value write through a
boolean mask, each done without waiting for the GPU more than the result needs."""

from __future__ import annotations

import numpy as np

from . import _devices as _dev
from . import _routing

__all__ = ["indices_outside", "masked_fill", "HOST_CHECK_MAX"]


#: index arrays up to this many elements are checked on the host: one copy of them, where
#: the two reductions below cost two launches and two reads (``take`` of 16 indices on an
#: H200: ``python -m bench.suite_hostops --only take``)
HOST_CHECK_MAX = 4096


def indices_outside(k, n) -> bool:
    """Whether non-empty backend integer array ``k`` holds an index outside ``[-n, n)``: a
    small array copied to the host and checked there; a larger one by its two bounds, a
    reduction each (our kernels on a GPU), both launched before the host reads either, and
    no temporaries (a mask of the bad indices costs four launches).

    >>> import numpy as np
    >>> indices_outside(np.array([2, -3]), 3), indices_outside(np.array([0, 3]), 3)
    (False, True)
    """
    if k.size <= HOST_CHECK_MAX:
        h = k.get() if _dev.is_cupy_array(k) else k
        return bool(h.min() < -n or h.max() >= n)
    axes = tuple(range(k.ndim))
    lo = _routing.reduce_min(k, axes, False)
    hi = _routing.reduce_max(k, axes, False)
    return int(lo) < -n or int(hi) >= n


def masked_fill(a, k, v) -> bool:
    """``a[k] = v`` for CuPy array ``a`` where ``k`` is one boolean mask over ``a``'s leading
    dimensions and ``v`` a single value: written through ``copyto(..., where=mask)``, one
    kernel, where CuPy's boolean assignment compacts the mask first and waits for the GPU
    (``std[std == 0] = 1.0``, scikit-learn's guard before every division by a scale).  False
    (nothing written) for any other key or value.

    >>> import numpy as np
    >>> masked_fill(np.zeros(3), (np.array([True, False, True]),), np.float64(2.0))
    False
    """
    if type(k) is tuple:
        if len(k) != 1:
            return False
        k = k[0]
    if not _dev.is_cupy_array(k) or k.dtype != np.bool_ or k.ndim == 0 or getattr(v, "ndim", 0) != 0:
        return False
    if k.shape != a.shape[:k.ndim]:
        return False   # the backend raises its IndexError
    _dev.cupy_module().copyto(a, v, where=k.reshape(k.shape + (1,) * (a.ndim - k.ndim)))
    return True
