"""The axis reductions' host fast path: the launch an earlier call of a named reduction along
some axes left for an array of the same layout, replayed with no planning (``axis_fast``).
"""

from __future__ import annotations

from .. import axis_reduce as _axis


def axis_hot_key(name, x, axes, dtype, keepdims):
    try:
        key = ("axis", name, axes, dtype, keepdims, _axis.layout_key(x))
        hash(key)
    except (TypeError, AttributeError):  # an unhashable argument; not an array
        return None
    return key


def axis_fast(name, x, axes, dtype=None, keepdims=False):
    """The host fast path of the named reduction ``name`` ("sum", "prod", "max", "min",
    "any", "all") of backend array ``x`` along ``axes`` (a sorted tuple of non-negative
    ints, not all of them): replay the launch an earlier call with the same arguments
    (``dtype`` of sum / prod) left for an array of the same layout (dtype, shape, strides,
    16-byte phase, device).  Returns the result, or None when there is none (then call the
    reduction itself, which leaves one).

    >>> import numpy as np
    >>> x = np.ones((2, 3))
    >>> r = axis_fast("sum", x, (0,), np.dtype("float64"))   # None until sum(x, (0,)) ran
    >>> r is None or r.tolist() == [2.0, 2.0, 2.0]
    True
    """
    try:
        ent = _axis.FAST.get(("axis", name, axes, dtype, keepdims, _axis.layout_key(x)))
    except (TypeError, AttributeError):
        return None
    if ent is None:
        return None
    return ent((x,))
