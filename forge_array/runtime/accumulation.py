"""The one home of the reductions' dtype rules: the dtype sums and products (and their
cumulative forms) accumulate and return in, and the float dtype of means, variances and
standard deviations; shared by the primitives, the namespace and the drop-in: a NumPy-only
module of the lowest layer, which every layer may import without loading numba.

>>> import numpy as np
>>> accumulation_dtype(np.dtype("int8")), accumulation_dtype(np.dtype("uint16"))
(dtype('int64'), dtype('uint64'))
>>> accumulation_dtype(np.dtype("float32")), accumulation_dtype(np.dtype("bool"))
(dtype('float32'), dtype('int64'))
>>> float_result(np.dtype("int8")), float_result(np.dtype("float32"))
(dtype('float64'), dtype('float32'))
"""

from __future__ import annotations

import numpy as np

__all__ = ["accumulation_dtype", "float_result"]

_INT64 = np.dtype(np.int64)
_UINT64 = np.dtype(np.uint64)
_FLOAT64 = np.dtype(np.float64)


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


def float_result(dt):
    """The dtype ``mean``, ``var`` and ``std`` compute and return in without ``dtype=``:
    float64 for bool and integers, the dtype itself for floating point (and complex)."""
    dt = np.dtype(dt)
    return dt if dt.kind in "fc" else _FLOAT64
