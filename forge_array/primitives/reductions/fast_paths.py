"""The reductions' caches and host fast paths: the kernel specifications by call (``SPECS``),
the launch plans of full reductions by call and array layout (``HOT``), and the functions
that replay a cached launch with no planning (``full_fast``, ``mapreduce_fast``,
``axis_fast``).
"""

from __future__ import annotations

import numpy as np

from ... import ops as _ops
from ...runtime import data_address, lazy, stream_key
from ...runtime.caches import Cache
from ...runtime.functions import compilable
from .. import axis_reduce as _axis

_k = lazy.module("forge_array.kernels.reduce", __name__, "_k")
_kl = lazy.module("forge_array.primitives.reductions.launch", __name__, "_kl")

#: kernel specifications (``kernels.reduce.ReduceSpec``) by call
SPECS = Cache("primitives.reductions.SPECS")


def mapreduce_fast(f, op, x, keepdims=False):
    """The host fast path of ``mapreduce(f, op, x, keepdims=keepdims)`` (``reduce`` when
    ``f`` is None) of one backend array ``x`` over all axes without ``init``: replay the
    launch cached by an earlier call with the same ``f`` and ``op`` (the same objects) on an
    array of the same layout.  Returns the result (a tuple when ``f`` returns tuples), or
    None when no launch is cached for the call.

    >>> import numpy as np
    >>> from forge_array import ops
    >>> x = np.arange(4.0)
    >>> r = mapreduce_fast(None, ops.add, x)   # None until reduce(ops.add, x) has run on our kernels
    >>> r is None or float(r) == 6.0
    True
    """
    try:
        key = hot_key("mapreduce", x, None, keepdims, (None if f is None else compilable(f, 1),
                                                        _ops.as_operator(op)))
        hit = HOT.get(key)
    except (TypeError, AttributeError):  # an unhashable function; not an array
        return None
    if hit is None:
        return None
    outs = _kl.replay(hit[0], x, key[-1])
    return outs if hit[1] else outs[0]


#: Launch plans of full named reductions by call: (name, array type, dtype, shape, strides,
#: address mod 16, dtype argument, keepdims, extra argument, stream) -> primitives.reductions.launch.Launch
HOT = Cache("primitives.reductions.HOT", 4096)


def hot_key(name, x, dtype, keepdims, extra):
    return (name, type(x), x.dtype, x.shape, x.strides, data_address(x) & 15, dtype, keepdims,
            extra, stream_key())


def full_fast(name, x, dtype=None, keepdims=False, extra=None):
    """The host fast path of a full named reduction (``name``: "sum", "max", "var", ...) of
    backend array ``x``: replay the launch cached by an earlier call with the same arguments
    (``dtype`` of sum / prod, ``correction`` of var / std as ``extra``) on an array of the
    same layout.  Returns the result, or None when no launch is cached for the call (then
    call the reduction itself, which caches it).

    >>> import numpy as np
    >>> x = np.arange(4.0)
    >>> r = full_fast("sum", x)          # None until sum(x) has run on our kernels
    >>> r is None or float(r) == 6.0
    True
    """
    try:
        key = hot_key(name, x, dtype, keepdims, extra)
        p = HOT.get(key)
    except (TypeError, AttributeError):  # an unhashable argument; not an array
        return None
    if p is None:
        return None
    return _kl.replay(p, x, key[-1])[0]



def remember(key, p):
    """Cache launch ``p`` for the fast paths (raises TypeError for an unhashable key)."""
    HOT[key] = p


def named_spec(name, op, acc, identity, f=None, with_index=False, acc_tuple=False, post=None,
                out_dtypes=None):
    key = (name, tuple(acc), f, post, out_dtypes)
    spec = SPECS.get(key)
    if spec is None:
        spec = SPECS[key] = _k.ReduceSpec(
            op=op.fn, acc_dtypes=tuple(np.dtype(d).str for d in acc), identity=identity, f=f,
            with_index=with_index, acc_tuple=acc_tuple, post=post,
            out_dtypes=None if out_dtypes is None else tuple(np.dtype(d).str for d in out_dtypes),
            commutative=True)
    return spec



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
