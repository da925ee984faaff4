"""Block-by-block operations: element-wise functions and operators, casts, views,
indexing, and functions along an axis other than the split one.

Operands of an element-wise call: sharded arrays split the same way (same devices, axis
and blocks after broadcasting), unsharded arrays (copied to every device once per call,
or cut into the blocks when they span the split axis) and Python scalars.
"""

from __future__ import annotations

import builtins

import numpy as np

from .. import _devices as _dev
from .._array import Array
from .._elementwise import __all__ as _ELEMENTWISE
from .._helpers import normalize_axes, normalize_axis
from . import _core
from ._core import ShardedArray, refusal
from ._dispatch import original, register
from ._transfer import block_slice, move, replicate

__all__ = ["Blocks", "shardwise", "in_place", "getitem", "setitem", "wrap"]


def _array_leaves(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (tuple, list)):
            for b in a:
                if isinstance(b, Array):
                    yield b
        elif isinstance(a, Array):
            yield a


def mismatch(a: ShardedArray, b: ShardedArray) -> ValueError:
    return ValueError(
        f"mismatched shardings: an array split along axis {a._axis} over {a.device} in "
        f"blocks at {a._offsets} and one split along axis {b._axis} over {b.device} in blocks "
        f"at {b._offsets}; bring both to the same blocks with a.to_device(sharding) on each "
        "(a Sharding splits into blocks that differ by at most one)")


class Blocks:
    """How the operands of one call map onto the blocks of its sharded result: the result
    has ``ndim`` dimensions and is split along ``axis`` like ``ref``."""

    def __init__(self, ref: ShardedArray, ndim: int):
        self.ref = ref
        self.ndim = ndim
        self.axis = ref._axis + ndim - ref.ndim
        self.devices = ref._sharding.devices
        self.offsets = ref._offsets
        self._copies: dict = {}

    @classmethod
    def of(cls, args, kwargs, ndim=None):
        arrays = list(_array_leaves(args, kwargs))
        sharded = [a for a in arrays if isinstance(a, ShardedArray)]
        ref = sharded[0]
        if ndim is None:
            ndim = builtins.max(a.ndim for a in arrays)
        plan = cls(ref, ndim)
        n = ref.shape[ref._axis]
        for s in sharded[1:]:
            if (s._axis + ndim - s.ndim != plan.axis or s._sharding.devices != plan.devices
                    or s._offsets != plan.offsets):
                raise mismatch(ref, s)
        for a in arrays:
            if not isinstance(a, ShardedArray):
                d = plan.axis - (ndim - a.ndim)
                if d >= 0 and a.shape[d] not in (1, n):
                    raise ValueError(f"an operand of shape {a.shape} does not broadcast against "
                                     f"a sharded array of shape {ref.shape}")
        return plan

    def operand(self, v, i):
        """Operand ``v`` of block ``i``."""
        if isinstance(v, ShardedArray):
            return v._shards[i]
        if isinstance(v, (tuple, list)):
            return type(v)(self.operand(b, i) for b in v)
        if not isinstance(v, Array):
            return v
        dev = self.devices[i]
        d = self.axis - (self.ndim - v.ndim)
        if d < 0 or v.shape[d] == 1:
            rep = self._copies.get(id(v))
            if rep is None:
                rep = self._copies[id(v)] = (replicate(v), v)
            return rep[0].on(dev)
        part = v._array[block_slice(v.ndim, d, self.offsets[i], self.offsets[i + 1])]
        return Array._new(move(part, v.device, dev), dev)

    def run(self, fn, args, kwargs):
        """``fn`` on every block, on the block's device: the list of results.  Every block's
        operands are copied first (a peer copy from a device is ordered after the work
        queued there, so copying after block 0's launch would make the others wait)."""
        ops = [([self.operand(v, i) for v in args],
                {key: self.operand(v, i) for key, v in kwargs.items()})
               for i in range(len(self.devices))]
        out = []
        for dev, (a, k) in zip(self.devices, ops):
            with _dev.on(dev):
                out.append(fn(*a, **k))
        return out

    def wrap(self, results, axis=None):
        return wrap(results, self.ref, self.axis if axis is None else axis)


def wrap(results, ref: ShardedArray, axis: int):
    """Per-block results as a sharded array split like ``ref`` along ``axis`` (a tuple of
    sharded arrays for per-block tuples)."""
    r0 = results[0]
    if isinstance(r0, tuple):
        return tuple(wrap([r[q] for r in results], ref, axis) for q in range(len(r0)))
    return ShardedArray._from_shards(results, ref._sharding, axis)


def shardwise(name):
    """The sharded implementation of element-wise function ``name``."""
    fn = original(name)

    def impl(*args, **kwargs):
        plan = Blocks.of(args, kwargs)
        return plan.wrap(plan.run(fn, args, kwargs))

    impl.__name__ = name
    return impl


for _name in list(_ELEMENTWISE) + ["where"]:
    register(_name)(shardwise(_name))

# metadata functions: they read only dtypes
for _name in ("result_type", "can_cast", "isdtype", "finfo", "iinfo"):
    register(_name)(original(_name))


def in_place(x: ShardedArray, other, name):
    """``x <op>= other`` block by block (each block checks dtype and shape)."""
    plan = Blocks.of((x, other), {}, x.ndim)
    new = []
    for i, dev in enumerate(plan.devices):
        with _dev.on(dev):
            r = x._shards[i]._iop(plan.operand(other, i), name)
        if r is NotImplemented:
            return r
        new.append(r)
    x._shards = tuple(new)
    return x


@register("astype")
def astype(x, dtype, /, *, copy=True, device=None):
    from ._core import Sharding  # noqa: PLC0415

    fn = original("astype")
    if not isinstance(x, ShardedArray):  # device= a Sharding
        return fn(x, dtype, copy=copy).to_device(device)
    if device is not None and not isinstance(device, Sharding):
        raise refusal("astype to one device", x)
    shards = []
    for s in x._shards:
        with _dev.on(s.device):
            shards.append(fn(s, dtype, copy=copy))
    if all(a is b for a, b in zip(shards, x._shards)):
        res = x
    else:
        res = ShardedArray._from_shards(shards, x._sharding, x._axis, x.shape)
    return res if device is None else res.to_device(device)


# ---- views


def _per_block(x, fn, *args, out_axis, **kwargs):
    shards = []
    for s in x._shards:
        with _dev.on(s.device):
            shards.append(fn(s, *args, **kwargs))
    return ShardedArray._from_shards(shards, x._sharding, out_axis)


@register("permute_dims")
def permute_dims(x, /, axes):
    ax = [normalize_axis(a, x.ndim, "permute_dims") for a in axes]
    if sorted(ax) != list(range(x.ndim)):
        raise ValueError(f"permute_dims(): {tuple(axes)} is not a permutation of the "
                         f"{x.ndim} axes")
    return _per_block(x, original("permute_dims"), tuple(ax), out_axis=ax.index(x._axis))


@register("matrix_transpose", "linalg.matrix_transpose")
def matrix_transpose(x, /):
    if x.ndim < 2:
        raise ValueError("matrix_transpose() requires at least 2 dimensions")
    n = x.ndim
    axis = {n - 1: n - 2, n - 2: n - 1}.get(x._axis, x._axis)
    return _per_block(x, original("matrix_transpose"), out_axis=axis)


@register("expand_dims")
def expand_dims(x, /, axis):
    axes = axis if isinstance(axis, tuple) else (axis,)
    norm = normalize_axes(axes, x.ndim + len(axes), "expand_dims")
    pos = [i for i in range(x.ndim + len(norm)) if i not in norm]
    return _per_block(x, original("expand_dims"), axis, out_axis=pos[x._axis])


@register("squeeze")
def squeeze(x, /, axis):
    norm = normalize_axes(axis, x.ndim, "squeeze")
    if x._axis in norm:
        raise refusal("squeeze of the split axis", x)
    new = x._axis - builtins.sum(1 for a in norm if a < x._axis)
    return _per_block(x, original("squeeze"), axis, out_axis=new)


def _along(name, default_axis, none_refused=True):
    """Sharded ``name(x, ..., axis=...)`` for an axis other than the split one."""
    fn = original(name)

    def impl(x, /, *args, **kwargs):
        if not isinstance(x, ShardedArray):
            raise refusal(name, None)
        axis = kwargs.get("axis", default_axis)
        if axis is None:
            raise refusal(f"{name} over all axes", x)
        axes = normalize_axes(axis, x.ndim, name)
        if x._axis in axes:
            raise refusal(f"{name} along the split axis", x)
        return _per_block(x, fn, *args, out_axis=x._axis, **kwargs)

    return impl


for _name, _default in (("sort", -1), ("argsort", -1), ("flip", None), ("diff", -1)):
    register(_name)(_along(_name, _default))


def _tri(name):
    fn = original(name)

    def impl(x, /, *, k=0):
        n = x.ndim
        shards = []
        for i, s in enumerate(x._shards):
            off = x._offsets[i]
            kk = k + off if x._axis == n - 2 else (k - off if x._axis == n - 1 else k)
            with _dev.on(s.device):
                shards.append(fn(s, k=kk))
        return ShardedArray._from_shards(shards, x._sharding, x._axis, x.shape)

    return impl


register("tril")(_tri("tril"))
register("triu")(_tri("triu"))


# ---- indexing


def _local_slice(start, step, count, lo, hi):
    """The part of ``range(start, start + count*step, step)`` (step > 0) inside ``[lo, hi)``
    as a slice of the block starting at ``lo``."""
    t0 = builtins.max(0, -(-(lo - start) // step))
    t1 = builtins.min(count, -(-(hi - start) // step))
    if t0 >= t1:
        return slice(0, 0)
    return slice(start + t0 * step - lo, start + (t1 - 1) * step - lo + 1, step)


def _split_key(x: ShardedArray, key):
    """(per-block keys, result axis) of a basic index, or (block, local key) when it picks
    one position of the split axis."""
    items = list(key) if isinstance(key, tuple) else [key]
    for k in items:
        if isinstance(k, (Array, np.ndarray, builtins.bool, np.bool_)) or _dev.is_cupy_array(k):
            raise refusal("indexing with arrays or booleans", x)
    consumed = builtins.sum(1 for k in items if k is not None and k is not Ellipsis)
    if items.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but "
                         f"{consumed} were indexed")
    if Ellipsis in items:
        e = items.index(Ellipsis)
        items[e:e + 1] = [slice(None)] * (x.ndim - consumed)
    else:
        items += [slice(None)] * (x.ndim - consumed)
    dim = out = 0
    pos = None
    for j, k in enumerate(items):
        if k is None:
            out += 1
            continue
        if dim == x._axis:
            pos = j
            res_axis = out
        if isinstance(k, slice):
            out += 1
        dim += 1
    k = items[pos]
    n = x.shape[x._axis]
    off = x._offsets
    if not isinstance(k, slice):
        g = int(k)
        if not -n <= g < n:
            raise IndexError(f"index {g} is out of bounds for axis {x._axis} with size {n}")
        g %= n
        i = next(i for i in range(len(x._shards)) if off[i] <= g < off[i + 1])
        items[pos] = g - off[i]
        return i, tuple(items)
    start, stop, step = k.indices(n)
    if step < 0:
        raise refusal("indexing the split axis with a negative step", x)
    count = len(range(start, stop, step))
    keys = []
    for i in range(len(x._shards)):
        loc = list(items)
        loc[pos] = _local_slice(start, step, count, off[i], off[i + 1])
        keys.append(tuple(loc))
    return keys, res_axis


def getitem(x: ShardedArray, key):
    """``x[key]`` for basic indices: a sharded view; an integer on the split axis gives an
    array on the device of the block that holds it."""
    keys, axis = _split_key(x, key)
    if isinstance(keys, int):
        return x._shards[keys][axis]
    shards = []
    for s, k in zip(x._shards, keys):
        with _dev.on(s.device):
            shards.append(s[k])
    return ShardedArray._from_shards(shards, x._sharding, axis)


def setitem(x: ShardedArray, key, value):
    """``x[key] = value`` for basic indices and a scalar, 0-d or same-split value."""
    keys, axis = _split_key(x, key)
    if isinstance(keys, int):
        s = x._shards[keys]
        if isinstance(value, ShardedArray):
            raise refusal("assigning a sharded array into one block", x)
        if isinstance(value, Array) and value.device != s.device:
            value = value.to_device(s.device)
        with _dev.on(s.device):
            s[axis] = value
        return
    if isinstance(value, Array) and not isinstance(value, ShardedArray) and value.ndim:
        raise refusal("assigning an unsharded array into a sharded one", x)
    for i, (s, k) in enumerate(zip(x._shards, keys)):
        v = value
        if isinstance(value, ShardedArray):
            v = value._shards[i]
        elif isinstance(value, Array):
            v = value.to_device(s.device)
        with _dev.on(s.device):
            s[k] = v

_core.METHODS["getitem"] = getitem
_core.METHODS["setitem"] = setitem
_core.METHODS["in_place"] = in_place
