"""Generic semiring matrix-vector products on forge_array arrays: ``matvec``, ``vecmat``.

Thin wrappers over :mod:`forge_array.primitives.matvec`: unwrap the arrays, check devices,
call the primitive, wrap the result. See docs/matvec.md.

>>> import numpy as np
>>> import forge_array as xp
>>> A = xp.asarray([[0.0, 3.0], [1.0, 0.0]])
>>> np.from_dlpack(xp.matvec(A, xp.asarray([1.0, 2.0]))).tolist()
[6.0, 1.0]
"""

from __future__ import annotations

from . import _devices as _dev
from ._array import Array
from ._kernel_layer import binding

__all__ = ["matvec", "vecmat"]

_prim = binding("matvec", __name__, "_prim")  # loads numba at first use


def _unwrap(a, what, name):
    if a is None:
        return None
    if not isinstance(a, Array):
        raise TypeError(f"{name}: {what} must be a forge_array array, got {type(a).__name__}; "
                        "convert with forge_array.asarray()")
    return a._array


def _devices(name, A, x):
    if x is not None and A.device != x.device:
        raise ValueError(f"{name}: A and x are on different devices: {A.device} and {x.device}")
    return A.device


def matvec(A, x, /, *, f=None, op=None, init=None):
    """``y[..., i] = op-reduce_j f(A[..., i, j], x[..., j])`` (default: ``A @ x``);
    ``x = None`` reduces each row of ``A`` with ``op``. ``f`` and ``op`` are Python
    functions numba compiles (or [`forge_array.ops`][forge_array.ops] operators); ``op`` associative and
    commutative. Leading dimensions broadcast (batches).

    Examples:
        >>> import numpy as np
        >>> import forge_array as xp
        >>> from forge_array import ops
        >>> INF = float("inf")
        >>> W = xp.asarray([[0.0, 4.0, 1.0], [INF, 0.0, INF], [INF, 2.0, 0.0]])  # W[i, j]: j -> i
        >>> d = xp.asarray([0.0, INF, INF])                                      # distances from 0
        >>> np.from_dlpack(xp.matvec(W, d, f=lambda w, v: w + v, op=ops.minimum)).tolist()
        [0.0, inf, inf]
        >>> np.from_dlpack(xp.matvec(W.mT, d, f=lambda w, v: w + v, op=ops.minimum)).tolist()
        [0.0, 4.0, 1.0]
    """
    dev = _devices("matvec", _check(A, "A", "matvec"), _check_opt(x, "x", "matvec"))
    with _dev.on(dev):   # the arrays' GPU, whichever is current
        r = _prim.matvec(_unwrap(A, "A", "matvec"), _unwrap(x, "x", "matvec"), f=f, op=op, init=init)
    return Array._new(r, dev)


def vecmat(x, A, /, *, f=None, op=None, init=None):
    """``z[..., j] = op-reduce_i f(x[..., i], A[..., i, j])`` (default: ``x @ A``);
    ``x = None`` reduces each column of ``A`` with ``op``.

    Examples:
        >>> import numpy as np
        >>> import forge_array as xp
        >>> A = xp.asarray([[1, 2], [3, 4]], dtype=xp.int32)
        >>> np.from_dlpack(xp.vecmat(xp.asarray([1, 1], dtype=xp.int32), A)).tolist()
        [4, 6]
    """
    dev = _devices("vecmat", _check(A, "A", "vecmat"), _check_opt(x, "x", "vecmat"))
    with _dev.on(dev):
        r = _prim.vecmat(_unwrap(x, "x", "vecmat"), _unwrap(A, "A", "vecmat"), f=f, op=op, init=init)
    return Array._new(r, dev)


def _check(a, what, name):
    _unwrap(a, what, name)
    return a


def _check_opt(a, what, name):
    if a is None:
        return None
    return _check(a, what, name)
