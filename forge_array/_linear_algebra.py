"""Linear algebra functions of the main namespace: matmul, matrix_transpose,
tensordot, vecdot. Shapes and dtypes are checked here; products go through
``_routing``.

>>> import forge_array as xp
>>> a = xp.ones((2, 3), device="cpu")
>>> xp.matmul(a, xp.ones((3, 4), device="cpu")).shape
(2, 4)
"""

from __future__ import annotations

from . import _array as _array_module
from . import _devices as _dev
from . import _dtypes as _dt
from . import _routing
from ._array import Array
from ._helpers import as_int, check_array
from .runtime import current_device

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]


def _pair(name, x1, x2):
    check_array(x1, name, "x1")
    check_array(x2, name, "x2")
    # without strict promotion a boolean operand beside a numeric one promotes to its dtype
    lenient = not _dt.STRICT[0] and (x1.dtype in _dt.numeric_dtypes
                                     or x2.dtype in _dt.numeric_dtypes)
    for x, arg in ((x1, "x1"), (x2, "x2")):
        if x.dtype not in _dt.numeric_dtypes and not (lenient and x.dtype == _dt.bool):
            raise TypeError(f"{name}() requires numeric arrays, got {arg} of dtype {x.dtype}")
    dev = _dev.check_same_device(x1.device, x2.device)
    dt = _dt.promote(x1.dtype, x2.dtype)
    a = x1._array if x1.dtype == dt else x1._array.astype(dt)
    b = x2._array if x2.dtype == dt else x2._array.astype(dt)
    return a, b, dev


def _current_pair(x1, x2):
    """The device of Arrays ``x1`` and ``x2`` when they share it and it is the current one
    (the hot paths launch there), else None."""
    dev = x1._device
    if dev is not x2._device and dev != x2._device:
        return None
    if dev.is_cuda and dev.index != current_device():
        return None
    return dev


def _batch(name, s1, s2):
    try:
        from ._manipulation import broadcast_shapes  # noqa: PLC0415
        return broadcast_shapes(s1, s2)
    except ValueError:
        raise ValueError(f"{name}(): batch dimensions {s1} and {s2} do not broadcast") from None


def matmul(x1, x2, /):
    """Matrix product (``@``) with the standard's rules for 1-D operands and batches.

    >>> import forge_array as xp
    >>> v = xp.asarray([1.0, 2.0], device="cpu")
    >>> xp.matmul(v, v)
    Array(5., dtype=float64, device=cpu)
    """
    if type(x1) is Array and type(x2) is Array:
        # hot path: operands of layouts whose product ran on our kernels before (so of one
        # numeric dtype and matching shapes) replay its launch
        dev = _current_pair(x1, x2)
        if dev is not None:
            a, b = x1._array, x2._array
            if (a.ndim == 2 and b.ndim == 2 and a.dtype == b.dtype and a.dtype.kind in "iufc"
                    and a.shape[0] > 1 and b.shape[1] > 1 and a.shape[1] == b.shape[0]):
                # a product of two matrices (no matrix-vector work for our kernels): the
                # backend's (cuBLAS) with no more steps
                return Array._new(_routing.backend_matmul(a, b), dev)
            r = _routing.matmul_fast(a, b)
            if r is not None:
                return Array._new(r, dev)
    a, b, dev = _pair("matmul", x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul(): operands must have at least one dimension (0-d given)")
    k1 = a.shape[-1]
    k2 = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if k1 != k2:
        raise ValueError(f"matmul(): contracted dimensions differ: {x1.shape} @ {x2.shape}")
    if a.ndim > 2 or b.ndim > 2:
        _batch("matmul", tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    with _dev.on(dev):
        return Array._new(_routing.matmul(a, b), dev)


def matrix_transpose(x, /):
    """Transpose the last two axes of ``x`` (a view).

    >>> import forge_array as xp
    >>> xp.matrix_transpose(xp.ones((2, 3, 4), device="cpu")).shape
    (2, 4, 3)
    """
    check_array(x, "matrix_transpose")
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose(): x must have at least 2 dimensions, got {x.ndim}")
    return x.mT


def tensordot(x1, x2, /, *, axes=2):
    """Contract ``x1`` and ``x2`` over ``axes`` (an int N for the last N / first N axes,
    or a pair of axis sequences).

    >>> import forge_array as xp
    >>> xp.tensordot(xp.ones((2, 3), device="cpu"), xp.ones((3, 4), device="cpu"),
    ...              axes=1).shape
    (2, 4)
    """
    if type(x1) is Array and type(x2) is Array and type(axes) is int:
        # hot path (int axes): a contraction of these layouts ran on our kernels before
        a, b = x1._array, x2._array
        if 0 < axes <= a.ndim and axes <= b.ndim:
            dev = _current_pair(x1, x2)
            if dev is not None:
                r = _routing.tensordot_fast(a, b, (tuple(range(a.ndim - axes, a.ndim)),
                                                   tuple(range(axes))))
                if r is not None:
                    return Array._new(r, dev)
    a, b, dev = _pair("tensordot", x1, x2)
    if isinstance(axes, (tuple, list)):
        if len(axes) != 2:
            raise ValueError("tensordot(): axes must be an int or a pair of axis sequences")
        ax1 = [as_int(v, "tensordot", "axes") for v in axes[0]]
        ax2 = [as_int(v, "tensordot", "axes") for v in axes[1]]
        if len(ax1) != len(ax2):
            raise ValueError("tensordot(): axes sequences must have the same length")
    else:
        n = as_int(axes, "tensordot", "axes")
        if n < 0:
            raise ValueError("tensordot(): axes must be non-negative")
        if n > a.ndim or n > b.ndim:
            raise ValueError(f"tensordot(): cannot contract {n} axes of {x1.shape} and "
                             f"{x2.shape}")
        ax1 = list(range(a.ndim - n, a.ndim))
        ax2 = list(range(n))
    norm = []
    for axs, x, arg in ((ax1, a, "x1"), (ax2, b, "x2")):
        out = []
        for v in axs:
            if not -x.ndim <= v < x.ndim:
                raise IndexError(f"tensordot(): axis {v} out of bounds for {arg} of "
                                 f"dimension {x.ndim}")
            out.append(v % x.ndim)
        if len(set(out)) != len(out):
            raise ValueError(f"tensordot(): repeated axes for {arg}")
        norm.append(tuple(out))
    for i, j in zip(*norm):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot(): axis {i} of x1 (size {a.shape[i]}) and axis {j} "
                             f"of x2 (size {b.shape[j]}) differ")
    with _dev.on(dev):
        return Array._new(_routing.tensordot(a, b, tuple(norm)), dev)


def vecdot(x1, x2, /, *, axis=-1):
    """Dot product sum(conj(x1) * x2) along ``axis`` of the broadcast shape.

    >>> import forge_array as xp
    >>> xp.vecdot(xp.ones((2, 3), device="cpu"), xp.ones(3, device="cpu"))
    Array([3., 3.], dtype=float64, device=cpu)
    """
    if type(x1) is Array and type(x2) is Array and type(axis) is int:
        # hot path: a dot product of these layouts along this axis ran on our kernels before
        a, b = x1._array, x2._array
        n = a.ndim if a.ndim >= b.ndim else b.ndim
        if -n <= axis < n:
            dev = _current_pair(x1, x2)
            if dev is not None:
                r = _routing.vecdot_fast(a, b, axis - n if axis >= 0 else axis)
                if r is not None:
                    return Array._new(r, dev)
    a, b, dev = _pair("vecdot", x1, x2)
    shape = _batch("vecdot", tuple(a.shape), tuple(b.shape))
    n = len(shape)
    ax = as_int(axis, "vecdot", "axis")
    if not -n <= ax < n:
        raise IndexError(f"vecdot(): axis {ax} out of bounds for dimension {n}")
    neg = ax - n if ax >= 0 else ax
    for x, arg in ((a, "x1"), (b, "x2")):
        if -neg > x.ndim:
            raise ValueError(f"vecdot(): axis {axis} does not exist in {arg} of shape "
                             f"{tuple(x.shape)}")
    if a.shape[neg] != b.shape[neg]:
        raise ValueError(f"vecdot(): sizes along axis {axis} differ: {a.shape[neg]} and "
                         f"{b.shape[neg]}")
    with _dev.on(dev):
        return Array._new(_routing.vecdot(a, b, neg), dev)


_array_module.OPERATORS["matmul"] = matmul
