"""Argument handling of the axis reductions: axes, identities, dtype tuples and the default maps.
"""
from __future__ import annotations

import numpy as np

from ... import runtime
from ...dispatch._common import components, first_component, hashable_key, zeros_of

try:
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover
    from numpy import AxisError


# --------------------------------------------------------------------------- arguments


def normalize_axes(axis, ndim):
    """Tuple of sorted non-negative axes; AxisError (a ValueError and an IndexError) when out
    of range, ValueError on duplicates.

    >>> normalize_axes(-1, 3), normalize_axes(None, 2), normalize_axes((2, 0), 3)
    ((2,), (0, 1), (0, 2))
    """
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        axis = (axis,)
    out = []
    for a in axis:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"axis must be an int or a tuple of ints, got {a!r}")
        a = int(a)
        if not -ndim <= a < ndim:
            raise AxisError(a, ndim)
        out.append(a % ndim if ndim else a)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {tuple(axis)}")
    return tuple(sorted(out))


array_module = runtime.array_module


def dtypes_of(dt):
    return tuple(np.dtype(d) for d in dt) if isinstance(dt, (tuple, list)) else np.dtype(dt)


def scalars_of(v, dt):
    """``v`` as NumPy scalar(s) of ``dt`` (a dtype or a tuple of dtypes)."""
    if isinstance(dt, tuple):
        if not isinstance(v, (tuple, list)) or len(v) != len(dt):
            raise TypeError(f"init must be a tuple of {len(dt)} values, got {v!r}")
        return tuple(scalars_of(a, d) for a, d in zip(v, dt))
    with np.errstate(all="ignore"):
        return np.asarray(v).astype(dt)[()]


# the maps below are kernel constants: their module and name are part of the kernels' cache
# keys (runtime.fingerprint), so renaming one misses every shipped kernel built with it


def _f_identity(a):
    return a


def _f_tuple2(a, b):
    return (a, b)


def _f_tuple3(a, b, c):
    return (a, b, c)


def _f_pair_index(v, k):
    return (v, k)


DEFAULT_MAPS = {1: _f_identity, 2: _f_tuple2, 3: _f_tuple3}

__all__ = ["normalize_axes", "array_module", "components", "first_component", "dtypes_of", "scalars_of",
           "zeros_of", "hashable_key", "DEFAULT_MAPS"]
