"""What the dispatch modules share: an operand entry's components (an array, or a tuple of
them for struct-of-arrays elements), plan-cache keys of values, zeros of accumulator dtypes,
the collapse of a view's dimensions and the operands broadcast from one value.

>>> import numpy as np
>>> components(np.zeros(2)) [0].shape, first_component((np.zeros(3), np.ones(3))).shape
((2,), (3,))
>>> hashable_key(np.float32(0)) == hashable_key(np.float64(0))
False
>>> collapse((4, 5, 6), [(30, 6, 1)])
((120,), [(1,)])
>>> collapse((4, 1, 6), [(6, 99, -1)])
((4, 6), [(6, -1)])
"""

from __future__ import annotations

__all__ = ["components", "first_component", "hashable_key", "zeros_of", "collapse", "uniform_operands"]


def components(entry):
    """The arrays of an operand entry: ``entry`` itself as a 1-tuple, or the tuple it is."""
    return entry if isinstance(entry, tuple) else (entry,)


def first_component(entry):
    """The first array of an operand entry (``entry`` itself when it is not a tuple)."""
    return entry[0] if isinstance(entry, tuple) else entry


def zeros_of(dt):
    """A zero of dtype ``dt`` (a tuple of zeros for a tuple of dtypes)."""
    if isinstance(dt, tuple):
        return tuple(d.type(0) for d in dt)
    return dt.type(0)


def hashable_key(v):
    """A key for a value that tells float32(0) from float64(0) and equals itself for NaN."""
    if isinstance(v, tuple):
        return tuple(hashable_key(x) for x in v)
    if v is None:
        return None
    return (v.dtype.str, v.tobytes())


def collapse(shape, strides_list):
    """Drop size-1 dimensions and merge neighbours that are contiguous with respect to each
    other in *every* operand. ``strides_list`` holds one strides tuple (in elements) per
    operand. Returns the new shape and strides (C order kept; a scalar becomes ``()``).
    """
    dims = [i for i, n in enumerate(shape) if n != 1]
    new_shape = [shape[i] for i in dims]
    new_strides = [[s[i] for i in dims] for s in strides_list]
    k = len(new_shape) - 1
    while k > 0:
        outer, inner = k - 1, k
        if all(st[outer] == st[inner] * new_shape[inner] for st in new_strides):
            new_shape[outer] *= new_shape[inner]
            for st in new_strides:
                st[outer] = st[inner]
            del new_shape[inner]
            for st in new_strides:
                del st[inner]
        k -= 1
    return tuple(new_shape), [tuple(st) for st in new_strides]


def uniform_operands(arrays):
    """Indices of the arrays (of several, not all) whose every stride is 0: one value
    broadcast to every element, read once by the kernels.

    >>> import numpy as np
    >>> uniform_operands([np.ones(3), np.broadcast_to(np.float64(2.0), (3,))])
    (1,)
    """
    if len(arrays) < 2 or arrays[0].size <= 1:
        return ()
    u = tuple(k for k, a in enumerate(arrays) if a.ndim and not any(a.strides))
    return () if len(u) == len(arrays) else u
