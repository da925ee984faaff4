"""``cumulative_sum`` and ``cumulative_prod`` of backend arrays (the standard's dtype rule,
``include_initial``, a carried ``init``), of fused element-wise expressions
(``cumulative_mapped``, ``mapped_launch``), and their host fast path ``cumulative_fast``.
"""

from __future__ import annotations

import threading

import numpy as np

from ...dispatch.scan import cumulative_key, fast_plans, run_fast
from ...dispatch.scan.replay import fast_key
from ...runtime.accumulation import accumulation_dtype
from ...runtime.caches import Cache
from .generic import scan_arrays

_CUMULATIVE = Cache("primitives.scan.CUMULATIVE")


def _op_and_acc(opname, value_dtype, dtype):
    """The operator of ``cumulative_sum`` / ``cumulative_prod`` (``opname``) and its
    accumulator dtypes for values of ``value_dtype`` accumulated in ``dtype``."""
    from ... import ops

    op = ops.add if opname == "cumulative_sum" else ops.multiply
    return op, (accumulation_dtype(value_dtype, dtype, opname),)


def _cumulative_scan(opname, x, axis, dtype, include_initial, out, init=None):
    if x.ndim == 0:
        raise ValueError(f"{opname}: x must have at least one dimension")
    if axis is None and x.ndim > 1:
        raise ValueError(f"{opname}: axis must be given for a {x.ndim}-D array")
    try:
        key = (opname, x.dtype, dtype)
        op, ind, acc = _CUMULATIVE[key]
    except (KeyError, TypeError):
        op, acc = _op_and_acc(opname, x.dtype, dtype)
        ind = (np.dtype(x.dtype),)
        try:
            _CUMULATIVE[key] = (op, ind, acc)
        except TypeError:
            pass
    return scan_arrays(op.fn, False, [x], ind, acc, op.identity, opname,
                       axis=axis, init=init, include_initial=include_initial, exclusive=False,
                       reverse=False, out=out, deterministic=False, flatten=False)


def cumulative_mapped(opname, mapfn, leaves, value_dtype, dtype, include_initial):
    """``cumulative_sum`` / ``cumulative_prod`` (``opname``) of the element-wise expression
    ``mapfn(*leaves)`` (values of ``value_dtype``; a function returning a 1-tuple, as
    :func:`forge_array.fusion.codegen.function_of` builds) over 1-D backend arrays
    ``leaves`` of one length, accumulated in ``dtype`` (None: the standard's rule for
    ``value_dtype``): the expression is computed as the scan loads it, never written.  Needs
    the kernels (``runtime.kernels_available``).

    >>> import numpy as np
    >>> from forge_array import runtime
    >>> x, y = np.arange(4.0), np.full(4, 2.0)
    >>> f = lambda a, b: (a * b,)
    >>> r = cumulative_mapped("cumulative_sum", f, [x, y], x.dtype, None, False) \
    ...     if runtime.kernels_available(x) else np.cumsum(x * y)
    >>> r.tolist()
    [0.0, 2.0, 6.0, 12.0]
    """
    op, acc = _op_and_acc(opname, value_dtype, dtype)
    in_dtypes = tuple(np.dtype(a.dtype) for a in leaves)
    return scan_arrays(op.fn, False, list(leaves), in_dtypes, acc, op.identity, opname,
                       axis=0, init=None, include_initial=include_initial, exclusive=False,
                       reverse=False, out=None, deterministic=False, flatten=False,
                       mapfn=mapfn)


def mapped_launch(opname, mapfn, leaves, value_dtype, dtype, include_initial):
    """The replay of the launch :func:`cumulative_mapped` just made with these arguments, for
    leaves of the same layouts on this thread and stream: ``replay(leaves)`` returns the
    scan (taking the full path when the fresh output is not aligned as planned, or on another
    thread, whose tile states are its own); None when no plan was kept."""
    op, acc = _op_and_acc(opname, value_dtype, dtype)
    fkey = fast_key((op.fn, mapfn), False, list(leaves), acc, 0, include_initial, False, False,
                     False, False)
    plan = fast_plans().get(fkey) if fkey is not None else None
    if plan is None:
        return None
    return _MappedReplay(plan, acc, fkey[-1], (opname, mapfn, value_dtype, dtype, include_initial))


class _MappedReplay:
    __slots__ = ("plan", "acc", "skey", "args", "thread")

    def __init__(self, plan, acc, skey, args):
        self.plan = plan
        self.acc = acc
        self.skey = skey
        self.args = args
        self.thread = threading.get_ident()

    def __call__(self, leaves):
        if threading.get_ident() == self.thread:
            r = run_fast(self.plan, leaves, self.acc, False, self.skey)
            if r is not None:
                return r
        opname, mapfn, value_dtype, dtype, include_initial = self.args
        return cumulative_mapped(opname, mapfn, leaves, value_dtype, dtype, include_initial)


def cumulative_fast(opname, x, axis, dtype, include_initial):
    """``cumulative_sum`` / ``cumulative_prod`` (``opname``) of backend array ``x`` along
    ``axis`` (a normalized int) in ``dtype`` when an earlier call of the same kind and layout
    left a launch plan to replay; None otherwise (the caller then takes the full path).

    >>> import numpy as np
    >>> x = np.arange(4.0)
    >>> r = cumulative_fast("cumulative_sum", x, 0, np.dtype("float64"), False)
    >>> r is None or r.tolist() == [0.0, 1.0, 3.0, 6.0]
    True
    """
    ent = _CUMULATIVE.get((opname, x.dtype, dtype))
    if ent is None:
        return None
    op, _, acc = ent
    fkey = cumulative_key(op.fn, acc, axis, include_initial, x)
    plan = fast_plans().get(fkey)
    if plan is None:
        return None
    return run_fast(plan, (x,), acc, False, fkey[-1])


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False, out=None, init=None):
    """Cumulative sum of backend array ``x`` along ``axis`` (optional for 1-D), accumulated in
    ``dtype`` (default: the standard's rule, int64 / uint64 for smaller integers and bool),
    without converting a copy of ``x`` first. ``include_initial`` prepends a 0 (``init`` when
    given); ``init``, a scalar, is added on the left of every element (a carry from before).

    >>> import numpy as np
    >>> cumulative_sum(np.array([[1, 2], [3, 4]], dtype=np.int8), axis=0).tolist()
    [[1, 2], [4, 6]]
    """
    return _cumulative_scan("cumulative_sum", x, axis, dtype, include_initial, out, init)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False, out=None, init=None):
    """Cumulative product of backend array ``x`` along ``axis`` (optional for 1-D); dtype
    rules as :func:`cumulative_sum`; ``include_initial`` prepends a 1 (``init`` when given);
    ``init`` multiplies every element on the left.

    >>> import numpy as np
    >>> cumulative_prod(np.array([1.0, 2.0, 3.0]), include_initial=True).tolist()
    [1.0, 1.0, 2.0, 6.0]
    """
    return _cumulative_scan("cumulative_prod", x, axis, dtype, include_initial, out, init)
