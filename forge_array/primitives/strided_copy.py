"""Copies of one dtype on our kernels: contiguous (128-bit, any misalignment) or any view
(the plans and launches: :mod:`forge_array.dispatch.copy`).

Example
-------
>>> import numpy as np
>>> from forge_array.primitives import copy
>>> x = np.arange(10.0)[::-3]
>>> copy(x).tolist()
[9.0, 6.0, 3.0, 0.0]
"""

from __future__ import annotations

from .. import runtime
from ..dispatch import copy as _dispatch

__all__ = ["copy"]


def copy(x, out=None):
    """Copy backend array ``x`` (NumPy or CuPy, any view) into ``out`` (a new C-contiguous
    array when None; else an array of the same shape and dtype, possibly a view) and return
    ``out``. Runs on our kernels when they are available for ``x``.

    >>> import numpy as np
    >>> copy(np.arange(6).reshape(2, 3).T).tolist()
    [[0, 3], [1, 4], [2, 5]]
    """
    if out is None:
        out = runtime.array_module(x).empty(x.shape, dtype=x.dtype)
    elif out.shape != x.shape or out.dtype != x.dtype:
        raise ValueError(f"copy: out has shape {out.shape} and dtype {out.dtype}, "
                         f"expected {x.shape} and {x.dtype}")
    _dispatch.run(x, out)
    return out
