"""The one rule for the dtype sums and products (and their cumulative forms) accumulate and
return in, shared by the primitives and the namespace: a NumPy-only module of the lowest
layer, which every layer may import without loading numba.

>>> import numpy as np
>>> accumulation_dtype(np.dtype("int8")), accumulation_dtype(np.dtype("uint16"))
(dtype('int64'), dtype('uint64'))
>>> accumulation_dtype(np.dtype("float32")), accumulation_dtype(np.dtype("bool"))
(dtype('float32'), dtype('int64'))
"""

from __future__ import annotations

import numpy as np

__all__ = ["accumulation_dtype"]

_INT64 = np.dtype(np.int64)
_UINT64 = np.dtype(np.uint64)


def accumulation_dtype(dt, dtype=None, name="sum"):
    """``dtype`` when given (a complex input needs a complex ``dtype``); otherwise int64 for
    bool and signed integers, uint64 for unsigned integers, and the input's own dtype (in
    native byte order) for floating point."""
    dt = np.dtype(dt)
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dt.kind == "c" and dtype.kind != "c":
            raise TypeError(f"{name}(): dtype {dtype} would discard the imaginary part")
        return dtype
    if dt.kind in "bi":
        return _INT64
    if dt.kind == "u":
        return _UINT64
    return dt if dt.isnative else dt.newbyteorder("=")
