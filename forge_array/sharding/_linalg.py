"""Products with a sharded operand: ``matmul`` / ``vecdot`` with a vector, ``matvec`` /
``vecmat`` with any semiring.

- Split along the axis that the product keeps (``A`` split by rows in ``A @ x``, by
  columns in ``x @ A``): every block multiplies on its own device with the vector copied
  there; the result is split the same way.
- Split along the contracted axis (``A`` split by columns in ``A @ x``, by rows in
  ``x @ A``, either operand of ``vecdot`` along ``axis``): every block multiplies with its
  part of the other operand (a block of it when it is split the same way, else cut from it),
  the partial results are copied to the first device and reduced there (``sum``, or the
  semiring's ``op`` with its ``init`` applied once).
- ``matmul`` of a matrix split by rows and an unsharded matrix (or of an unsharded matrix
  and one split by columns) multiplies block by block.
"""

from __future__ import annotations

from .. import _devices as _dev
from .. import ops as _ops
from .._array import Array
from .._helpers import as_int
from ._core import ShardedArray, refusal
from ._dispatch import original, register
from ._elementwise import Blocks, mismatch, wrap
from ._reductions import stacked
from ._transfer import block_slice, move, replicate

__all__ = []


def _part(v, ref, i, axis):
    """Block ``i`` of operand ``v`` along its ``axis``, matched to ``ref``'s blocks along
    the contracted axis: its own block when it is split the same way, else cut from it."""
    dev = ref._sharding.devices[i]
    if isinstance(v, ShardedArray):
        if (v._axis != axis or v._sharding.devices != ref._sharding.devices
                or v._offsets != ref._offsets):
            raise mismatch(ref, v)
        return v._shards[i]
    lo, hi = ref._offsets[i], ref._offsets[i + 1]
    part = v._array[block_slice(v.ndim, axis, lo, hi)]
    return Array._new(move(part, v.device, dev), dev)


def _contracted(ref, fn, operands, combine):
    """Partials ``fn(*blocks)`` on every block's device, combined on the first device."""
    dev0 = ref._sharding.devices[0]
    parts = []
    for d, blocks in zip(ref._sharding.devices, _operands(ref, operands)):
        with _dev.on(d):
            parts.append(fn(*blocks))
    st = stacked(parts, list(ref._sharding.devices), dev0)
    with _dev.on(dev0):
        return combine(st)


def _operands(ref, operands):
    """Every block's operands, all copied before any block's product is launched: a peer copy
    from the first device is ordered after the work queued there, so a copy made after
    block 0's product would make every other device wait for it."""
    return [[op(i) for op in operands] for i in range(len(ref._sharding.devices))]


def _kept(ref, fn, operands, out_axis):
    res = []
    for d, blocks in zip(ref._sharding.devices, _operands(ref, operands)):
        with _dev.on(d):
            res.append(fn(*blocks))
    return wrap(res, ref, out_axis)


def _same(v):
    return lambda i: v


def _rep(v, ref):
    if isinstance(v, ShardedArray):
        raise refusal("a product of two arrays split along different axes", ref)
    r = replicate(v)
    return lambda i: r.on(ref._sharding.devices[i])


def _cut(v, ref, axis):
    return lambda i: _part(v, ref, i, axis)


def _blocks_of(v):
    return lambda i: v._shards[i]


def _sum0(st):
    return original("sum")(st, axis=0, dtype=st.dtype)


@register("matmul", "linalg.matmul")
def matmul(x1, x2, /):
    fn = original("matmul")
    for a in (x1, x2):
        if not isinstance(a, Array):
            raise TypeError(f"matmul() requires forge_array arrays, got {type(a).__name__}")
    if x1.ndim > 2 or x2.ndim > 2 or x1.ndim == 0 or x2.ndim == 0:
        raise refusal("matmul of batched or 0-d operands", _ref(x1, x2))
    if x1.shape[-1] != x2.shape[0]:
        raise ValueError(f"matmul(): shapes {x1.shape} and {x2.shape} do not align")
    if isinstance(x1, ShardedArray):
        ref = x1
        contracted = x1._axis == x1.ndim - 1
        if contracted:  # split along the inner dimension
            return _contracted(ref, fn, [_blocks_of(x1), _cut(x2, x1, 0)], _sum0)
        if isinstance(x2, ShardedArray):
            raise refusal("matmul of two sharded arrays split along kept axes", ref)
        return _kept(ref, fn, [_blocks_of(x1), _rep(x2, ref)], x1._axis)
    ref = x2
    contracted = x2._axis == 0
    if contracted:
        return _contracted(ref, fn, [_cut(x1, x2, x1.ndim - 1), _blocks_of(x2)], _sum0)
    # x2 split by columns: the result's last axis
    return _kept(ref, fn, [_rep(x1, ref), _blocks_of(x2)], x1.ndim - 1)


def _ref(*xs):
    return next((x for x in xs if isinstance(x, ShardedArray)), None)


@register("vecdot", "linalg.vecdot")
def vecdot(x1, x2, /, *, axis=-1):
    fn = original("vecdot")
    plan = Blocks.of((x1, x2), {})
    n = plan.ndim
    ax = as_int(axis, "vecdot", "axis")
    if not -n <= ax < n:
        raise IndexError(f"vecdot(): axis {ax} out of bounds for dimension {n}")
    ax %= n
    neg = ax - n
    if ax != plan.axis:
        out = plan.axis - (1 if ax < plan.axis else 0)
        return plan.wrap(plan.run(lambda a, b: fn(a, b, axis=neg), (x1, x2), {}), out)
    parts = plan.run(lambda a, b: fn(a, b, axis=neg), (x1, x2), {})
    dev0 = plan.devices[0]
    st = stacked(parts, list(plan.devices), dev0)
    with _dev.on(dev0):
        return _sum0(st)


def _check2(A, name):
    if not isinstance(A, ShardedArray) or A.ndim != 2:
        raise refusal(f"{name} with this operand layout (a sharded 2-D A is needed)", _ref(A))


def _combine_op(op, init):
    red = original("reduce")
    op = _ops.add if op is None else op
    return lambda st: red(op, st, axis=0, init=init)


@register("matvec")
def matvec(A, x, /, *, f=None, op=None, init=None):
    fn = original("matvec")
    _check2(A, "matvec")
    if A._axis == 0:  # rows: kept
        xs = _same(None) if x is None else _rep(x, A)
        return _kept(A, lambda a, v: fn(a, v, f=f, op=op, init=init), [_blocks_of(A), xs], 0)
    xs = _same(None) if x is None else _cut(x, A, 0)
    return _contracted(A, lambda a, v: fn(a, v, f=f, op=op), [_blocks_of(A), xs],
                       _combine_op(op, init))


@register("vecmat")
def vecmat(x, A, /, *, f=None, op=None, init=None):
    fn = original("vecmat")
    _check2(A, "vecmat")
    if A._axis == 1:  # columns: kept
        xs = _same(None) if x is None else _rep(x, A)
        return _kept(A, lambda v, a: fn(v, a, f=f, op=op, init=init), [xs, _blocks_of(A)], 0)
    xs = _same(None) if x is None else _cut(x, A, 0)
    return _contracted(A, lambda v, a: fn(v, a, f=f, op=op), [xs, _blocks_of(A)],
                       _combine_op(op, init))
