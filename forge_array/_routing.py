"""The routing seam: one function per routed operation, on BACKEND arrays.

The namespace layer (``_statistical.py``, ``_utility.py``, ``_searching.py``,
``_linear_algebra.py``, ``_creation.py``) has already done all of the standard's
semantics before calling here: argument validation, axes normalised to a sorted
tuple of distinct non-negative ints, the result dtype resolved, empty-reduction
errors raised, operands of matmul/vecdot/tensordot promoted to a common dtype
and checked for matching shapes. ``x``, ``a`` and ``b`` are ``numpy.ndarray`` or
``cupy.ndarray``; ``x`` is the ORIGINAL input (not converted to ``dtype``).

Each function returns a backend array of exactly the right dtype and shape: from our
kernels (:mod:`forge_array.primitives`) when they take the array, else from NumPy / CuPy.
The NumPy / CuPy calls go through the module's pristine namespace
(:func:`forge_array.runtime.array_module`), never through a function that
``forge_array.cupy.patch()`` may have replaced.

>>> import numpy as np
>>> from forge_array import _routing
>>> _routing.reduce_sum(np.arange(4, dtype=np.int32), (0,), np.dtype("int64"), False)
array(6)
"""

from __future__ import annotations

import importlib

import numpy as np

from . import primitives
from .runtime import array_module as _xp
from .runtime import config, kernels_available

# the module (``primitives.reduce`` is the generic function of the same name)
_red = importlib.import_module("forge_array.primitives.reduce")
_scan = importlib.import_module("forge_array.primitives.scan")
_mv = importlib.import_module("forge_array.primitives.matvec")

__all__ = [
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_mean", "reduce_var",
    "reduce_std", "reduce_any", "reduce_all", "argmax", "argmin", "cumulative_sum",
    "cumulative_prod", "matmul", "vecdot", "tensordot", "copy", "full_fast", "axis_fast",
    "matmul_fast", "vecdot_fast", "tensordot_fast",
]


def _ns(x):
    """array-api-compat namespace (numpy or cupy flavour) for a backend array."""
    if isinstance(x, np.ndarray):
        import array_api_compat.numpy as ns  # noqa: PLC0415
    else:
        import array_api_compat.cupy as ns  # noqa: PLC0415
    return ns


def _out(x, res, dtype, shape=None):
    """Backend array (not a NumPy scalar) of ``dtype``."""
    if isinstance(res, np.generic) or not hasattr(res, "dtype"):
        res = np.asarray(res)
    if res.dtype != dtype:
        res = res.astype(dtype)
    return res


def _keep(x, res, axis, keepdims):
    """Reduced result with reduced axes kept as size-1 dims when keepdims."""
    if keepdims and res.ndim != x.ndim:
        shape = tuple(1 if i in axis else n for i, n in enumerate(x.shape))
        res = res.reshape(shape)
    return res


def _cupy_inf_fix(x, res, axis, keepdims, target):
    """CuPy's CUB min/max use +-max-finite as identity: an all-(+-inf) slice
    comes back as +-max-finite (cupy/cupy#7424, #8180). Put the infinity back."""
    if isinstance(x, np.ndarray) or x.dtype.kind != "f" or x.size == 0:
        return res
    ns = _xp(x)
    allinf = ns.all(x == target, axis=axis, keepdims=keepdims)
    return ns.where(allinf, x.dtype.type(target), res)


#: ``full_fast(name, x, dtype, keepdims, extra)``: the replay of a full named reduction's
#: cached launch, or None (see :func:`forge_array.primitives.reduce.full_fast`); the
#: namespace calls it only with arguments it has checked before.
full_fast = _red.full_fast


def axis_fast(name, x, axis, dtype, keepdims):
    """The replay of a named reduction's cached launch along ``axis`` (a sorted tuple of
    non-negative ints) when our kernels are on, or None (see
    :func:`forge_array.primitives.reduce.axis_fast`); the namespace calls it only with
    arguments it has checked before."""
    if config.KERNELS_ENABLED:
        return _red.axis_fast(name, x, axis, dtype, keepdims)
    return None


def matmul_fast(a, b):
    """The replay of ``a @ b``'s cached launch when our kernels are on, or None (see
    :func:`forge_array.primitives.matvec.matmul_fast`); the caller has checked that both
    operands are on the current device."""
    if config.KERNELS_ENABLED:
        return _mv.matmul_fast(a, b)
    return None


def vecdot_fast(a, b, axis):
    """The replay of ``vecdot``'s cached launch along the negative ``axis`` when our kernels
    are on, or None (see :func:`forge_array.primitives.matvec.vecdot_fast`)."""
    if config.KERNELS_ENABLED:
        return _mv.vecdot_fast(a, b, axis)
    return None


def tensordot_fast(a, b, axes):
    """The replay of ``tensordot``'s cached launch over ``axes`` (a pair of tuples of
    non-negative ints) when our kernels are on, or None (see
    :func:`forge_array.primitives.matvec.tensordot_fast`)."""
    if config.KERNELS_ENABLED:
        return _mv.tensordot_fast(a, b, axes)
    return None


def reduce_sum(x, axis, dtype, keepdims):
    """Sum over ``axis`` (tuple), accumulated and returned in ``dtype``."""
    if _red.routes(x, axis):
        return _red.sum(x, axis, dtype, keepdims)
    return _out(x, _xp(x).sum(x, axis=axis, dtype=dtype, keepdims=keepdims), dtype)


def reduce_prod(x, axis, dtype, keepdims):
    """Product over ``axis`` (tuple), accumulated and returned in ``dtype``."""
    if _red.routes(x, axis):
        return _red.prod(x, axis, dtype, keepdims)
    return _out(x, _xp(x).prod(x, axis=axis, dtype=dtype, keepdims=keepdims), dtype)


def reduce_max(x, axis, keepdims):
    """Maximum over ``axis`` (tuple, no empty reductions); NaN propagates."""
    if _red.routes(x, axis):
        return _red.max(x, axis, keepdims)
    res = _xp(x).max(x, axis=axis, keepdims=keepdims)
    return _out(x, _cupy_inf_fix(x, res, axis, keepdims, -np.inf), x.dtype)


def reduce_min(x, axis, keepdims):
    """Minimum over ``axis`` (tuple, no empty reductions); NaN propagates."""
    if _red.routes(x, axis):
        return _red.min(x, axis, keepdims)
    res = _xp(x).min(x, axis=axis, keepdims=keepdims)
    return _out(x, _cupy_inf_fix(x, res, axis, keepdims, np.inf), x.dtype)


def reduce_mean(x, axis, keepdims):
    """Arithmetic mean over ``axis`` (tuple) of a floating-point array."""
    if _red.routes(x, axis):
        return _red.mean(x, axis, keepdims)
    return _out(x, _xp(x).mean(x, axis=axis, keepdims=keepdims), x.dtype)


def reduce_var(x, axis, correction, keepdims):
    """Variance over ``axis`` (tuple) with ``correction`` degrees of freedom removed."""
    if _red.routes(x, axis, moments=True):
        return _red.var(x, axis, correction, keepdims)
    res = _xp(x).var(x, axis=axis, ddof=correction, keepdims=keepdims)
    return _out(x, res, x.dtype)


def reduce_std(x, axis, correction, keepdims):
    """Standard deviation over ``axis`` (tuple) with ``correction``."""
    if _red.routes(x, axis, moments=True):
        return _red.std(x, axis, correction, keepdims)
    res = _xp(x).std(x, axis=axis, ddof=correction, keepdims=keepdims)
    return _out(x, res, x.dtype)


def reduce_any(x, axis, keepdims):
    """Logical OR over ``axis`` (tuple) -> bool."""
    if _red.routes(x, axis):
        return _red.any(x, axis, keepdims)
    return _out(x, _xp(x).any(x, axis=axis, keepdims=keepdims), np.dtype(bool))


def reduce_all(x, axis, keepdims):
    """Logical AND over ``axis`` (tuple) -> bool."""
    if _red.routes(x, axis):
        return _red.all(x, axis, keepdims)
    return _out(x, _xp(x).all(x, axis=axis, keepdims=keepdims), np.dtype(bool))


def _arg_inf_fix(x, res, axis, keepdims, target):
    # see _cupy_inf_fix: an all-(+-inf) slice must give index 0
    if isinstance(x, np.ndarray) or x.dtype.kind != "f" or x.size == 0:
        return res
    ns = _xp(x)
    allinf = ns.all(x == target, axis=axis, keepdims=keepdims)
    return ns.where(allinf, 0, res)


def argmax(x, axis, keepdims):
    """Index of the first maximum along ``axis`` (int, or None for the flattened
    array) -> int64; NaN counts as the maximum."""
    if _red.routes_arg(x, axis):
        return _red.argmax(x, axis, keepdims)
    res = _xp(x).argmax(x, axis=axis, keepdims=keepdims)
    return _out(x, _arg_inf_fix(x, res, axis, keepdims, -np.inf), np.dtype(np.int64))


def argmin(x, axis, keepdims):
    """Index of the first minimum along ``axis`` (int or None) -> int64."""
    if _red.routes_arg(x, axis):
        return _red.argmin(x, axis, keepdims)
    res = _xp(x).argmin(x, axis=axis, keepdims=keepdims)
    return _out(x, _arg_inf_fix(x, res, axis, keepdims, np.inf), np.dtype(np.int64))


def cumulative_fast(name, x, axis, dtype, include_initial):
    """The replayed launch of ``name`` (cumulative_sum / cumulative_prod) when our kernels
    run on ``x`` and a plan for its layout exists; None otherwise."""
    if kernels_available(x):
        return _scan.cumulative_fast(name, x, axis, dtype, include_initial)
    return None


def _backend_scan(x, name, initial, axis, dtype, include_initial):
    """NumPy's / CuPy's ``cumsum`` / ``cumprod`` along ``axis``, with a leading
    ``initial`` when ``include_initial``."""
    xp = _xp(x)
    res = getattr(xp, name)(x, axis=axis, dtype=dtype)
    if include_initial:
        shape = list(res.shape)
        shape[axis] = 1
        res = xp.concatenate([xp.full(shape, initial, dtype=res.dtype), res], axis=axis)
    return res


def cumulative_sum(x, axis, dtype, include_initial):
    """Inclusive scan with + along ``axis`` (non-negative int) in ``dtype``; with
    ``include_initial`` the output starts with a 0 and is one longer."""
    if kernels_available(x):
        return _scan.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)
    res = _backend_scan(x, "cumsum", 0, axis, dtype, include_initial)
    return _out(x, res, dtype)


def cumulative_prod(x, axis, dtype, include_initial):
    """Inclusive scan with * along ``axis`` in ``dtype`` (leading 1 with include_initial)."""
    if kernels_available(x):
        return _scan.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial)
    res = _backend_scan(x, "cumprod", 1, axis, dtype, include_initial)
    return _out(x, res, dtype)


def matmul(a, b):
    """Matrix product; ``a`` and ``b`` share one dtype, shapes already checked."""
    r = _mv.route_matmul(a, b)
    if r is not None:
        return _out(a, r, a.dtype)
    return _out(a, _xp(a).matmul(a, b), a.dtype)


def vecdot(a, b, axis):
    """sum(conj(a) * b) along ``axis`` (a NEGATIVE int, counted from the end of the
    broadcast shape, so operands of different ndim need no broadcasting copy)."""
    r = _mv.route_vecdot(a, b, axis)
    if r is not None:
        return _out(a, r, a.dtype)
    return _out(a, _ns(a).vecdot(a, b, axis=axis), a.dtype)


def tensordot(a, b, axes):
    """Tensor contraction over ``axes = (axes_of_a, axes_of_b)`` (tuples of
    non-negative ints of equal length and matching sizes)."""
    r = _mv.route_tensordot(a, b, axes)
    if r is not None:
        return _out(a, r, a.dtype)
    return _out(a, _ns(a).tensordot(a, b, axes=axes), a.dtype)


def copy(x):
    """A C-contiguous copy of ``x`` on its device."""
    if kernels_available(x):
        return primitives.copy(x)
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True, order="C")
    return _ns(x).asarray(x).copy(order="C")
