"""Host-side layout helpers shared by the primitives: collapsing dimensions of views.

Example
-------
>>> collapse((4, 5, 6), [(30, 6, 1)])
((120,), [(1,)])
>>> collapse((4, 1, 6), [(6, 99, -1)])
((4, 6), [(6, -1)])
"""

from __future__ import annotations


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
