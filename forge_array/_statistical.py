"""Statistical functions. All of the standard's semantics live here (validation,
axes, dtypes, empty-input rules); the computation goes through ``_routing``.

>>> import forge_array as xp
>>> xp.sum(xp.asarray([1, 2, 3], dtype=xp.int32, device="cpu")).dtype
dtype('int64')
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from . import _devices as _dev
from . import _dtypes as _dt
from . import _routing
from ._array import Array
from ._helpers import check_array, normalize_axes, scan_axis
from .fusion import build as _fusion
from .fusion.expr import Deferred
from .runtime import current_device
from .runtime.accumulation import accumulation_dtype as _accumulation_dtype
from .runtime.caches import Cache

__all__ = ["cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum",
           "var"]


_CATEGORIES = {k: frozenset(v) for k, v in _dt.categories.items()}


def _check(x, name, kinds):
    check_array(x, name)
    if x.dtype not in _CATEGORIES[kinds]:
        raise TypeError(f"{name}() requires an array of a {kinds} dtype, got {x.dtype}")


# ---------------------------------------------------------------- the hot path of axis=None
#
# A full reduction's checks depend only on (name, x.dtype, the dtype argument, correction);
# its launch only on the layout of x.  Both are cached: the first call of a kind takes the
# checked path below and records its arguments; later ones replay the primitive's cached
# launch (``primitives.reductions.full_fast``) after two dictionary look-ups.

_VALID = Cache("_statistical.VALID")  # (name, x dtype, dtype argument, extra) -> the primitive's dtype argument
_MISSING = object()


def checked(name, x, dtype, extra, resolved):
    """Record that a ``name`` reduction of an array of ``x``'s dtype with these ``dtype``
    and ``extra`` (``correction``) arguments passed every check, and the dtype argument the
    primitive receives (``resolved``).  Only arguments of exact types are recorded, so that
    ``True`` never stands for ``1``."""
    if (dtype is None or isinstance(dtype, np.dtype)) and (
            extra is None or type(extra) is int or type(extra) is float):
        _VALID[(name, x.dtype, dtype, extra)] = resolved


def full_fast(name, x, dtype=None, keepdims=False, extra=None):
    """The result of the full reduction ``name`` of ``x`` when its arguments were checked
    before and the primitive holds a launch for its layout; None otherwise (the caller then
    takes its checked path).

    >>> import forge_array as xp
    >>> x = xp.asarray([1.0, 2.0], device="cpu")
    >>> r = full_fast("sum", x)     # None until sum(x) ran once
    >>> r is None or float(r) == 3.0
    True
    """
    if type(x) is not Array or type(keepdims) is not bool:
        if type(x) is Deferred and _fusion.ON[0] and type(keepdims) is bool:
            return _pending_full(name, x, dtype, keepdims, extra, None)  # a reduction to defer
        return None
    if _fusion.ON[0]:
        mode = _fusion.wanted_mode(x)
        if mode is not None:  # deferred, or (a structure that runs eagerly) replayed below
            r = _pending_full(name, x, dtype, keepdims, extra, mode)
            if r is not None:
                return r
    # only arguments of the types `checked` records: as keys, 1 == True == 1.0
    if dtype is not None and not isinstance(dtype, np.dtype):
        return None
    if extra is not None and type(extra) is not int and type(extra) is not float:
        return None
    a = x._array
    resolved = _VALID.get((name, a.dtype, dtype, extra), _MISSING)
    if resolved is _MISSING:
        return None
    dev = x._device
    if dev.is_cuda and dev.index != current_device():
        return None
    r = _routing.full_fast(name, a, resolved, keepdims, extra)
    if r is None:
        return None
    return Array._new(r, dev)


#: every axis of an array of k dimensions, by k
_ALL_AXES = [tuple(range(k)) for k in range(65)]


def _pending_full(name, x, dtype, keepdims, extra, mode):
    """The deferred full reduction ``name`` of ``x`` (a deferred array, or one whose
    reductions are deferred) when its arguments were checked before (see :func:`full_fast`);
    None otherwise.  Empty reductions, and variances with no degree of freedom left, take
    the checked path."""
    term_dtype = _checked_term(name, x, dtype, extra)
    if term_dtype is None:
        return None
    n = x.size
    if n == 0 or (extra is not None and n - extra <= 0):
        return None
    return _fusion.reduction(name, x, _ALL_AXES[x.ndim], term_dtype, keepdims,
                             0.0 if extra is None else extra, mode)


def _checked_term(name, x, dtype, extra):
    """The dtype the deferred reduction ``name`` of ``x`` is built with, as its checked path
    builds it, when a reduction of these kinds of arguments passed the checks before
    (:func:`checked`); None otherwise."""
    if dtype is not None and not isinstance(dtype, np.dtype):
        return None
    if extra is not None and type(extra) is not int and type(extra) is not float:
        return None
    xdt = x.dtype
    resolved = _VALID.get((name, xdt, dtype, extra), _MISSING)
    if resolved is _MISSING:
        return None
    if name == "sum" or name == "prod":
        return resolved
    if name == "any" or name == "all":
        return _BOOL
    return xdt


_BOOL = np.dtype(np.bool_)


def _axes_of(axis, nd):
    """``axis`` (an int or a tuple of ints) as sorted distinct non-negative axes of an array
    of ``nd`` dimensions, or None (the checked path then raises the error)."""
    if type(axis) is int:
        if not -nd <= axis < nd:
            return None
        return (axis % nd,)
    if type(axis) is tuple:
        for v in axis:
            if type(v) is not int or not -nd <= v < nd:
                return None
        axes = tuple(sorted([v % nd for v in axis]))
        return axes if len(set(axes)) == len(axes) else None
    return None


def _pending_axis(name, x, axis, dtype, keepdims, mode):
    """:func:`_pending_full` of a reduction along ``axis``."""
    term_dtype = _checked_term(name, x, dtype, None)
    if term_dtype is None:
        return None
    shape = x.shape
    axes = _axes_of(axis, len(shape))
    if axes is None or 0 in shape:
        return None
    return _fusion.reduction(name, x, axes, term_dtype, keepdims, 0.0, mode)


def axis_fast(name, x, axis, dtype=None, keepdims=False):
    """The result of the reduction ``name`` (sum, prod, max, min, any, all) of ``x`` along
    ``axis`` (an int or a tuple of ints) when its arguments were checked before and the
    primitive holds a launch for its layout; None otherwise (the caller then takes its
    checked path).

    >>> import forge_array as xp
    >>> x = xp.ones((2, 3), device="cpu")
    >>> r = axis_fast("sum", x, 0)     # None until sum(x, axis=0) ran once
    >>> r is None or r.shape == (3,)
    True
    """
    if type(x) is not Array or type(keepdims) is not bool:
        if type(x) is Deferred and _fusion.ON[0] and type(keepdims) is bool:
            return _pending_axis(name, x, axis, dtype, keepdims, None)  # a reduction to defer
        return None
    if _fusion.ON[0]:
        mode = _fusion.wanted_mode(x)
        if mode is not None:  # deferred, or (a structure that runs eagerly) replayed below
            r = _pending_axis(name, x, axis, dtype, keepdims, mode)
            if r is not None:
                return r
    if dtype is not None and not isinstance(dtype, np.dtype):
        return None
    a = x._array
    resolved = _VALID.get((name, a.dtype, dtype, None), _MISSING)
    if resolved is _MISSING:
        return None
    axes = _axes_of(axis, a.ndim)
    if axes is None:
        return None
    dev = x._device
    if dev.is_cuda and dev.index != current_device():
        return None
    r = _routing.axis_fast(name, a, axes, resolved, keepdims)
    if r is None:
        return None
    return Array._new(r, dev)


def _keepdims(keepdims, name):
    if not isinstance(keepdims, bool):
        raise TypeError(f"{name}(): keepdims must be a bool, got {type(keepdims).__name__}")
    return keepdims


def accumulation_dtype(x_dtype, dtype, name):
    """The result dtype of sum/prod/cumulative_*: ``dtype`` when given (one of the
    standard's dtypes); otherwise the rule of
    :func:`forge_array.runtime.accumulation.accumulation_dtype`."""
    return _accumulation_dtype(x_dtype, None if dtype is None else _dt.to_dtype(dtype), name)


def _reduced_count(x, axes):
    return math.prod(x.shape[a] for a in axes)


def _wrap(res, x):
    return Array._new(res, x.device)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    """Sum of elements over ``axis`` (all by default).

    Integer inputs accumulate in the default integer dtype (uint64 for unsigned).

    >>> import forge_array as xp
    >>> xp.sum(xp.asarray([[1, 2], [3, 4]], device="cpu"), axis=0)
    Array([4, 6], dtype=int64, device=cpu)
    """
    r = (full_fast("sum", x, dtype, keepdims) if axis is None
         else axis_fast("sum", x, axis, dtype, keepdims))
    if r is not None:
        return r
    _check(x, "sum", "any")
    axes = normalize_axes(axis, x.ndim, "sum")
    dt = accumulation_dtype(x.dtype, dtype, "sum")
    checked("sum", x, dtype, None, dt)
    if _fusion.ON[0]:
        r = _fusion.reduction("sum", x, axes, dt, _keepdims(keepdims, "sum"))
        if r is not None:
            return r
    with _dev.on(x.device):
        return _wrap(_routing.reduce_sum(x._array, axes, dt, _keepdims(keepdims, "sum")), x)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """Product of elements over ``axis`` (all by default).

    >>> import forge_array as xp
    >>> xp.prod(xp.asarray([1.0, 2.0, 3.0], device="cpu"))
    Array(6., dtype=float64, device=cpu)
    """
    r = (full_fast("prod", x, dtype, keepdims) if axis is None
         else axis_fast("prod", x, axis, dtype, keepdims))
    if r is not None:
        return r
    _check(x, "prod", "any")
    axes = normalize_axes(axis, x.ndim, "prod")
    dt = accumulation_dtype(x.dtype, dtype, "prod")
    checked("prod", x, dtype, None, dt)
    if _fusion.ON[0]:
        r = _fusion.reduction("prod", x, axes, dt, _keepdims(keepdims, "prod"))
        if r is not None:
            return r
    with _dev.on(x.device):
        return _wrap(_routing.reduce_prod(x._array, axes, dt, _keepdims(keepdims, "prod")), x)


def _extremum(name, x, axis, keepdims):
    r = full_fast(name, x, None, keepdims) if axis is None else axis_fast(name, x, axis, None, keepdims)
    if r is not None:
        return r
    _check(x, name, "real numeric")
    checked(name, x, None, None, None)
    axes = normalize_axes(axis, x.ndim, name)
    if _reduced_count(x, axes) == 0:
        raise ValueError(f"{name}() of an empty reduction (shape {x.shape}, axis {axes}) "
                         "has no value")
    if _fusion.ON[0]:
        r = _fusion.reduction(name, x, axes, x.dtype, _keepdims(keepdims, name))
        if r is not None:
            return r
    fn = _routing.reduce_max if name == "max" else _routing.reduce_min
    with _dev.on(x.device):
        return _wrap(fn(x._array, axes, _keepdims(keepdims, name)), x)


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis``; NaN propagates; ValueError for an empty reduction.

    >>> import forge_array as xp
    >>> xp.max(xp.asarray([1.0, 3.0, 2.0], device="cpu"))
    Array(3., dtype=float64, device=cpu)
    """
    return _extremum("max", x, axis, keepdims)


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis``; NaN propagates; ValueError for an empty reduction.

    >>> import forge_array as xp
    >>> xp.min(xp.asarray([1.0, 3.0, 2.0], device="cpu"))
    Array(1., dtype=float64, device=cpu)
    """
    return _extremum("min", x, axis, keepdims)


def _quiet(fn, *args):
    """Call a routed reduction; silence NumPy's empty-slice warnings (NaN is the
    standard's answer for the mean of nothing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` of a floating-point array (NaN when empty).

    >>> import forge_array as xp
    >>> xp.mean(xp.asarray([1.0, 2.0], device="cpu"))
    Array(1.5, dtype=float64, device=cpu)
    """
    if axis is None:
        r = full_fast("mean", x, None, keepdims)
        if r is not None:
            return r
    _check(x, "mean", "floating-point")
    checked("mean", x, None, None, None)
    axes = normalize_axes(axis, x.ndim, "mean")
    kd = _keepdims(keepdims, "mean")
    if _fusion.ON[0]:
        r = _fusion.reduction("mean", x, axes, x.dtype, kd)
        if r is not None:
            return r
    with _dev.on(x.device):
        if _reduced_count(x, axes) == 0:
            return _wrap(_quiet(_routing.reduce_mean, x._array, axes, kd), x)
        return _wrap(_routing.reduce_mean(x._array, axes, kd), x)


def _spread(name, x, axis, correction, keepdims):
    if axis is None:
        r = full_fast(name, x, None, keepdims, correction)
        if r is not None:
            return r
    _check(x, name, "real floating-point")
    axes = normalize_axes(axis, x.ndim, name)
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"{name}(): correction must be an int or a float")
    if correction < 0:
        raise ValueError(f"{name}(): correction must be non-negative, got {correction}")
    checked(name, x, None, correction, None)
    fn = _routing.reduce_var if name == "var" else _routing.reduce_std
    kd = _keepdims(keepdims, name)
    if _reduced_count(x, axes) - correction > 0:
        if _fusion.ON[0]:
            r = _fusion.reduction(name, x, axes, x.dtype, kd, correction)
            if r is not None:
                return r
    with _dev.on(x.device):
        if _reduced_count(x, axes) - correction <= 0:
            return _wrap(_quiet(fn, x._array, axes, correction, kd), x)
        return _wrap(fn(x._array, axes, correction, kd), x)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance over ``axis``; ``correction=1`` gives the unbiased estimate.

    >>> import forge_array as xp
    >>> xp.var(xp.asarray([1.0, 3.0], device="cpu"))
    Array(1., dtype=float64, device=cpu)
    """
    return _spread("var", x, axis, correction, keepdims)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation over ``axis`` (see :func:`var`).

    >>> import forge_array as xp
    >>> xp.std(xp.asarray([1.0, 3.0], device="cpu"))
    Array(1., dtype=float64, device=cpu)
    """
    return _spread("std", x, axis, correction, keepdims)


def _checked_scan(name, x, axis, dtype, include_initial):
    # hot path: arguments of a kind checked before, a layout with a launch plan
    if (type(x) is Array and type(include_initial) is bool and (axis is None or type(axis) is int)
            and (dtype is None or isinstance(dtype, np.dtype))):
        a = x._array
        dt = _VALID.get((name, a.dtype, dtype, include_initial), _MISSING)
        nd = a.ndim
        ax = 0 if axis is None and nd == 1 else axis
        if dt is not _MISSING and ax is not None and -nd <= ax < nd:
            dev = x._device
            if not (dev.is_cuda and dev.index != current_device()):
                r = _routing.cumulative_fast(name, a, ax % nd, dt, include_initial)
                if r is not None:
                    return Array._new(r, dev)
    _check(x, name, "any")
    if x.ndim == 0:
        raise ValueError(f"{name}() requires an array with at least one dimension")
    ax = scan_axis(axis, x.ndim, name)
    if not isinstance(include_initial, bool):
        raise TypeError(f"{name}(): include_initial must be a bool")
    dt = accumulation_dtype(x.dtype, dtype, name)
    if dtype is None or isinstance(dtype, np.dtype):
        _VALID[(name, x.dtype, dtype, include_initial)] = dt
    if _fusion.ON[0]:  # a pending expression: computed inside the scan
        r = _fusion.scan(name, x, dt, include_initial)
        if r is not None:
            return r
    fn = _routing.cumulative_sum if name == "cumulative_sum" else _routing.cumulative_prod
    with _dev.on(x.device):
        return _wrap(fn(x._array, ax, dt, include_initial), x)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Inclusive cumulative sum along ``axis`` (optional for 1-D input).

    ``include_initial=True`` prepends the 0 of the sum.

    >>> import forge_array as xp
    >>> xp.cumulative_sum(xp.asarray([1, 2, 3], device="cpu"), include_initial=True)
    Array([0, 1, 3, 6], dtype=int64, device=cpu)
    """
    return _checked_scan("cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Inclusive cumulative product along ``axis`` (optional for 1-D input).

    >>> import forge_array as xp
    >>> xp.cumulative_prod(xp.asarray([1, 2, 3], device="cpu"))
    Array([1, 2, 6], dtype=int64, device=cpu)
    """
    return _checked_scan("cumulative_prod", x, axis, dtype, include_initial)
