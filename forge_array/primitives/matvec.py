"""Matrix-vector and vector-matrix products over any semiring, on the row / column kernels.

``matvec(A, x)``: ``y[..., i] = op-reduce_j f(A[..., i, j], x[..., j])``;
``vecmat(x, A)``: ``z[..., j] = op-reduce_i f(x[..., i], A[..., i, j])``. Defaults:
``f = multiply``, ``op = add`` (the ordinary products, for every dtype: integer products
included). ``x = None`` reduces the rows (matvec) or columns (vecmat) of ``A`` with ``op``
(``f`` then maps single elements). Leading (batch) dimensions broadcast.

Kernel choice follows ``A``'s memory layout, never a copy: a row-major ``A @ x`` reduces
along the contiguous axis (row kernel), ``x @ A`` across it (column kernel), and a
transposed / column-major ``A`` swaps the two (see :mod:`.axis_reduce`).

Dtypes: with the default ``f`` / ``op`` the result has the standard's promoted dtype of
``A`` and ``x`` (bool: or-and, as NumPy's ``matmul``); with a custom ``f`` / ``op`` the type
numba infers for ``op(f(a, x), f(a, x))``, kept at the promoted dtype when it is a scalar
of the same kind (``int32`` min-plus stays ``int32``).

Example
-------
>>> import numpy as np
>>> A = np.array([[0.0, 2.0], [1.0, 0.0]])
>>> matvec(A, np.array([1.0, 1.0])).tolist()
[2.0, 1.0]
>>> from forge_array import ops
>>> matvec(A, np.array([0.0, 5.0]), f=lambda a, b: a + b, op=ops.minimum).tolist()   # min-plus
[0.0, 1.0]
"""

from __future__ import annotations

import math

import numpy as np

from .. import ops as _ops
from .. import runtime
from ..dispatch.axis_reduce import FAST, fast_key, layout_key, remember
from ..runtime import lazy, stored
from ..runtime.caches import Cache
from ..runtime.functions import compilable
from .axis_reduce import axis_mapreduce

__all__ = ["matvec", "vecmat", "result_dtype", "route_matmul", "route_vecdot", "route_tensordot",
           "matmul_fast", "vecdot_fast", "tensordot_fast"]


_xp = runtime.array_module
# numba types user functions only: the standard products never load it
numba = lazy.module("numba", __name__, "numba")
numpy_support = lazy.module("numba.np.numpy_support", __name__, "numpy_support")


def _promote(a, b):
    try:
        from .._dtypes import promote
    except ImportError:  # pragma: no cover
        return np.result_type(a, b)
    try:
        return np.dtype(promote(a, b))
    except TypeError:
        # mixed kinds (integer with floating): outside the standard's table; NumPy's rule
        return np.result_type(a, b)


_SWAPPED = Cache("primitives.matvec.SWAPPED")


def _swap(f):
    """``lambda a, v: f(v, a)``, one object per ``f`` (kernel caches key on it)."""
    g = _SWAPPED.get(f)
    if g is None:
        from numba.extending import register_jitable  # noqa: PLC0415

        fd = register_jitable(getattr(f, "py_func", f))

        def swapped(a, v):
            return fd(v, a)

        g = _SWAPPED[f] = swapped
    return g


def _numba_dtype(t):
    if isinstance(t, numba.types.BaseTuple):
        return tuple(_numba_dtype(s) for s in t.types)
    try:
        return np.dtype(numpy_support.as_dtype(t))
    except Exception as exc:
        raise TypeError(f"operator result type {t} is not a NumPy scalar type") from exc


def result_dtype(f, op, dta, dtx):
    """Result dtype of a (generalised) product of elements of dtypes ``dta`` and ``dtx``
    (``dtx`` None: ``f`` of one element); TypeError with numba's message when ``f`` or
    ``op`` cannot be compiled.

    >>> result_dtype(None, None, np.dtype("int8"), np.dtype("int16"))
    dtype('int16')
    >>> result_dtype(lambda a, b: a + b, min, np.dtype("float32"), np.dtype("float32"))
    dtype('float32')
    """
    if f is None and op is None:
        return _promote(dta, dtx) if dtx is not None else np.dtype(dta)
    base = _promote(dta, dtx) if dtx is not None else np.dtype(dta)
    opf = _ops.as_operator(op).fn if op is not None else _ops.add.fn
    if f is None:
        fn = _ops.multiply.fn if dtx is not None else (lambda a: a)
    else:
        fn = f
    args = (runtime.numba_type(dta),) + ((runtime.numba_type(dtx),) if dtx is not None else ())
    rt = runtime.result_type(fn, args)
    rt = runtime.result_type(opf, (rt, rt))
    dt = _numba_dtype(rt)
    if not isinstance(dt, tuple) and dt.kind == base.kind:
        return base
    if not isinstance(dt, tuple) and base.kind == "b" and dt.kind in "iu" and f is None:
        return base
    return dt


def _check(A, x, what):
    if not hasattr(A, "ndim") or A.ndim < 2:
        raise ValueError(f"{what}: A must have at least 2 dimensions, got shape "
                         f"{getattr(A, 'shape', None)}")
    if x is not None:
        if not hasattr(x, "ndim") or x.ndim < 1:
            raise ValueError(f"{what}: x must have at least 1 dimension")
        if _xp(A) is not _xp(x):
            raise ValueError(f"{what}: A and x are on different devices (NumPy and CuPy)")
        if not isinstance(A, np.ndarray) and A.device != x.device:
            raise ValueError(f"{what}: A and x are on different devices: {A.device}, {x.device}")


def _defaults(f, op, dta, dtx):
    """(f, op) for the kernels; bool standard products are or-and."""
    if op is None:
        op = _ops.add
        if f is None and dta.kind == "b" and (dtx is None or dtx.kind == "b"):
            op = _ops.logical_or
            f = _ops.logical_and.fn if dtx is not None else None
    if f is None and dtx is not None:
        f = _ops.multiply.fn
    return f, _ops.as_operator(op)


def matvec(A, x, /, *, f=None, op=None, init=None):
    """``y[..., i] = op-reduce_j f(A[..., i, j], x[..., j])`` on backend arrays (NumPy or
    CuPy); ``x = None`` reduces each row of ``A``. See the module docstring.

    >>> import numpy as np
    >>> from forge_array import ops
    >>> A = np.arange(6, dtype=np.int32).reshape(2, 3)
    >>> matvec(A, np.array([1, 0, 2], dtype=np.int32)).tolist()
    [4, 13]
    >>> matvec(A, None, op=ops.maximum).tolist()               # row maxima
    [2, 5]
    """
    key = None
    f = None if f is None else compilable(f, 2)
    op = None if op is None else _ops.as_operator(op)
    if init is None and x is not None:
        key = fast_key("matvec", f, op, (A, x), None, False, None, False)
        ent = FAST.get(key) if key is not None else None
        if ent is not None:   # replay the launch plan of an identical earlier call
            return ent((A, x))
    _check(A, x, "matvec")
    n, p = A.shape[-2:]
    dta = A.dtype
    dtx = x.dtype if x is not None else None
    out = result_dtype(f, op, dta, dtx)
    xp = _xp(A)
    if x is None:
        ff, opo = _defaults(f, op, dta, None)
        return axis_mapreduce(ff, opo, (A,), -1, init, False, out)
    if x.shape[-1] != p:
        raise ValueError(f"matvec: shapes {tuple(A.shape)} and {tuple(x.shape)} do not match "
                         f"(A has {p} columns, x has {x.shape[-1]} elements)")
    try:
        batch = np.broadcast_shapes(tuple(A.shape[:-2]), tuple(x.shape[:-1]))
    except ValueError:
        raise ValueError(f"matvec: batch shapes {tuple(A.shape[:-2])} and "
                         f"{tuple(x.shape[:-1])} do not broadcast") from None
    if (f is None and op is None and init is None and not runtime.kernels_available(A)
            and dta.kind != "b"):
        # CPU: NumPy's matmul (BLAS for floats)
        r = xp.matmul(A.astype(out, copy=False), x.astype(out, copy=False)[..., None])[..., 0]
        return r.astype(out, copy=False)
    ff, opo = _defaults(f, op, dta, dtx)
    Ab = xp.broadcast_to(A, batch + (n, p))
    xb = xp.broadcast_to(x[..., None, :], batch + (n, p))
    return axis_mapreduce(ff, opo, (Ab, xb), -1, init, False, out, _replay=key)


def vecmat(x, A, /, *, f=None, op=None, init=None):
    """``z[..., j] = op-reduce_i f(x[..., i], A[..., i, j])`` on backend arrays; ``x = None``
    reduces each column of ``A``. See the module docstring.

    >>> import numpy as np
    >>> from forge_array import ops
    >>> A = np.arange(6.0).reshape(2, 3)
    >>> vecmat(np.array([1.0, 2.0]), A).tolist()
    [6.0, 9.0, 12.0]
    >>> vecmat(np.array([0.0, 1.0]), A, f=lambda a, b: a + b, op=ops.minimum).tolist()
    [0.0, 1.0, 2.0]
    """
    key = None
    f = None if f is None else compilable(f, 2)
    op = None if op is None else _ops.as_operator(op)
    if init is None and x is not None:
        key = fast_key("vecmat", f, op, (A, x), None, False, None, False)
        ent = FAST.get(key) if key is not None else None
        if ent is not None:
            return ent((A, x))
    _check(A, x, "vecmat")
    n, p = A.shape[-2:]
    dta = A.dtype
    dtx = x.dtype if x is not None else None
    out = result_dtype(None if f is None else _swap(f), op, dta, dtx)
    xp = _xp(A)
    if x is None:
        ff, opo = _defaults(f, op, dta, None)
        return axis_mapreduce(ff, opo, (A,), -2, init, False, out)
    if x.shape[-1] != n:
        raise ValueError(f"vecmat: shapes {tuple(x.shape)} and {tuple(A.shape)} do not match "
                         f"(x has {x.shape[-1]} elements, A has {n} rows)")
    try:
        batch = np.broadcast_shapes(tuple(x.shape[:-1]), tuple(A.shape[:-2]))
    except ValueError:
        raise ValueError(f"vecmat: batch shapes {tuple(x.shape[:-1])} and "
                         f"{tuple(A.shape[:-2])} do not broadcast") from None
    if (f is None and op is None and init is None and not runtime.kernels_available(A)
            and dta.kind != "b"):
        r = xp.matmul(x.astype(out, copy=False)[..., None, :], A.astype(out, copy=False))[..., 0, :]
        return r.astype(out, copy=False)
    ff, opo = _defaults(f, op, dta, dtx)
    if f is not None:
        ff = _swap(f)
    Ab = xp.broadcast_to(A, batch + (n, p))
    xb = xp.broadcast_to(x[..., :, None], batch + (n, p))
    return axis_mapreduce(ff, opo, (Ab, xb), -2, init, False, out, _replay=key)


# --------------------------------------------------------------------------- namespace routing


def _mul(a, b):
    return a * b


def _conj_mul(a, b):
    return a.conjugate() * b


def _mul_conj(b, a):
    return a.conjugate() * b


def route_matmul(a, b):
    """``a @ b`` on the kernels when it is matrix-vector work (2-d @ 1-d, 1-d @ 2-d,
    batched stacks @ a vector or a stack of one-column matrices, 1-d @ 1-d), else None.
    ``a`` and ``b`` share a numeric dtype; shapes are checked. The launch is remembered for
    :func:`matmul_fast` on operands of the same layouts.

    >>> import numpy as np
    >>> route_matmul(np.ones((2, 3)), np.arange(3.0)).tolist()
    [3.0, 3.0]
    >>> route_matmul(np.ones((2, 3)), np.ones((3, 2))) is None
    True
    """
    if not runtime.kernels_available(a) or a.dtype.kind == "b" or a.size == 0 or b.size == 0:
        return None
    if a.ndim == 1 and b.ndim == 1:
        A, x, tag = a[None, :], b, "matvec"
        r = matvec(A, x).reshape(())
        fshape = ()
    elif b.ndim == 1:
        A, x, tag = a, b, "matvec"
        r = matvec(A, x)
        fshape = None
    elif a.ndim == 1:
        A, x, tag = b, a, "vecmat"
        r = vecmat(x, A)
        fshape = None
    elif b.shape[-1] == 1:
        A, x, tag = a, b[..., 0], "matvec"
        r = matvec(A, x)
        fshape = r.shape + (1,)
        r = r[..., None]
    elif a.shape[-2] == 1:
        A, x, tag = b, a[..., 0, :], "vecmat"
        r = vecmat(x, A)
        fshape = r.shape[:-1] + (1, r.shape[-1])
        r = r[..., None, :]
    else:
        return None
    if a.dtype == b.dtype:
        # every operand above is a view of a or b at the same address: the launch replays
        # on (a, b) themselves
        pk = _pair_key("matmul", None, a, b)
        _alias(fast_key(tag, None, None, (A, x), None, False, None, False), pk, tag == "vecmat", fshape)
        if not runtime.SIMULATE:   # for a later process's first call (runtime.stored)
            ent = FAST.get(pk) if pk is not None else None
            if ent is not None:
                stored.save(stored.pair_key("matmul", a, b), ent.stored_form((b, a) if ent.swap else (a, b), (a, b)))
    return r


def matmul_fast(a, b):
    """``a @ b`` by replaying the launch :func:`route_matmul` made for operands of the same
    layouts (dtype, shape, strides, 16-byte phase, device), or None when there is none.
    The caller makes sure that our kernels are on and that ``a``'s device is current.

    >>> import numpy as np
    >>> r = matmul_fast(np.ones((2, 3)), np.arange(3.0))   # None until route_matmul ran
    >>> r is None or r.tolist() == [3.0, 3.0]
    True
    """
    try:
        key = ("matmul", None, layout_key(a), layout_key(b))
    except (TypeError, AttributeError):
        return None
    return _replay(key, a, b)


def route_vecdot(a, b, axis):
    """``sum(conj(a) * b)`` along the negative ``axis`` of the broadcast shape on the
    kernels (no broadcasting copy), else None. The launch is remembered for
    :func:`vecdot_fast` on operands of the same layouts.

    >>> import numpy as np
    >>> route_vecdot(np.ones((2, 3)), np.arange(3.0), -1).tolist()
    [3.0, 3.0]
    """
    if not runtime.kernels_available(a) or a.dtype.kind == "b":
        return None
    xp = _xp(a)
    shape = np.broadcast_shapes(a.shape, b.shape)
    if math.prod(shape) == 0:
        return None
    ab = xp.broadcast_to(a, shape)
    bb = xp.broadcast_to(b, shape)
    cplx = a.dtype.kind == "c"
    swap = b.size > a.size   # the larger operand decides the layout (operand 0)
    if swap:
        f, arrays = (_mul_conj if cplx else _mul), (bb, ab)
    else:
        f, arrays = (_conj_mul if cplx else _mul), (ab, bb)
    r = axis_mapreduce(f, _ops.add, arrays, axis, None, False, a.dtype)
    if a.dtype == b.dtype:
        # the broadcast views start at a's and b's addresses: the launch replays on them
        _alias(fast_key("amr", f, _ops.add, arrays, axis, False, a.dtype, False),
               _pair_key("vecdot", axis, a, b), swap)
    return r


def _pair_key(tag, arg, a, b):
    try:
        return (tag, arg, layout_key(a), layout_key(b))
    except (TypeError, AttributeError):
        return None


def _alias(src, key, swap, fshape=None):
    """Remember the replay cached under ``src`` (if any) under ``key`` too."""
    ent = FAST.get(src) if src is not None else None
    if ent is not None and key is not None:
        remember(key, ent.variant(fshape, swap))


def _replay(key, a, b):
    try:
        ent = FAST.get(key)
    except TypeError:
        return None
    if ent is None:
        return None
    return ent((b, a) if ent.swap else (a, b))


def vecdot_fast(a, b, axis):
    """``vecdot(a, b)`` along the negative ``axis`` by replaying the launch
    :func:`route_vecdot` made for operands of the same layouts, or None when there is none.
    The caller makes sure that our kernels are on and that ``a``'s device is current.

    >>> import numpy as np
    >>> r = vecdot_fast(np.ones((2, 3)), np.arange(3.0), -1)   # None until route_vecdot ran
    >>> r is None or r.tolist() == [3.0, 3.0]
    True
    """
    try:
        key = ("vecdot", axis, layout_key(a), layout_key(b))
    except (TypeError, AttributeError):
        return None
    return _replay(key, a, b)


def route_tensordot(a, b, axes):
    """``tensordot(a, b, axes)`` on the kernels when one operand is contracted entirely
    (a matrix-vector product in disguise), else None. ``axes = (axes_a, axes_b)``. The
    launch is remembered for :func:`tensordot_fast` on operands of the same layouts.

    >>> import numpy as np
    >>> route_tensordot(np.ones((2, 3, 4)), np.ones((4, 3)), ((1, 2), (1, 0))).tolist()
    [12.0, 12.0]
    """
    if not runtime.kernels_available(a) or a.dtype.kind == "b":
        return None
    xa, xb = tuple(axes[0]), tuple(axes[1])
    if not xa or a.size == 0 or b.size == 0:
        return None
    if len(xb) == b.ndim:
        big, small, xbig, xsmall = a, b, xa, xb
    elif len(xa) == a.ndim:
        big, small, xbig, xsmall = b, a, xb, xa
    else:
        return None
    xp = _xp(a)
    order = sorted(range(len(xbig)), key=lambda k: xbig[k])
    sm = xp.transpose(small, tuple(xsmall[k] for k in order))
    free = tuple(d for d in range(big.ndim) if d not in xbig)
    if free:
        sm = xp.expand_dims(sm, free)
    sm = xp.broadcast_to(sm, big.shape)
    red = tuple(sorted(xbig))
    r = axis_mapreduce(_mul, _ops.add, (big, sm), red, None, False, a.dtype)
    if a.dtype == b.dtype:
        # sm is a view of the small operand at its address: the launch replays on a and b
        _alias(fast_key("amr", _mul, _ops.add, (big, sm), red, False, a.dtype, False),
               _pair_key("tensordot", (xa, xb), a, b), big is b)
    return r


def tensordot_fast(a, b, axes):
    """``tensordot(a, b, axes)`` (``axes``: a pair of tuples of non-negative ints) by
    replaying the launch :func:`route_tensordot` made for operands of the same layouts, or
    None when there is none. The caller makes sure that our kernels are on and that ``a``'s
    device is current.

    >>> import numpy as np
    >>> r = tensordot_fast(np.ones((2, 3)), np.ones(3), ((1,), (0,)))   # None until routed
    >>> r is None or r.tolist() == [3.0, 3.0]
    True
    """
    try:
        key = ("tensordot", axes, layout_key(a), layout_key(b))
    except (TypeError, AttributeError):
        return None
    return _replay(key, a, b)
