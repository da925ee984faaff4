"""Reductions of sharded arrays.

Over axes that leave the split axis alone, every block reduces on its own device and the
result stays split (along the split axis' new position). Over the split axis, every block
reduces to a partial result on its device, the partials are copied to the first device and
combined there:

- ``sum``, ``prod``, ``max``, ``min``, ``any``, ``all``, ``count_nonzero``: the same
  reduction (``sum`` for counts) over the stacked partials;
- ``mean``: partial sums, their sum divided by the count;
- ``var`` / ``std``: per block (count, mean, M2) in one pass (shifted float64 sums where one
  array's ``var`` would take them, else ``mapreduce(welford_map, welford)``), merged with
  Chan's formula (``reduce(welford)``);
- ``argmax`` / ``argmin``: per block (value, global index) pairs, combined with
  ``ops.argmax`` / ``ops.argmin`` (first NaN, ties to the smaller index, as on one device);
- ``reduce`` / ``mapreduce`` with any operator: the partials reduced with the operator,
  ``init`` applied once. An operator not marked commutative needs the split axis to be the
  first reduced axis of size > 1 (the partials are then in the order of the elements).

Empty blocks take no part; with no elements anywhere the first block's own call gives the
result (or the error) of an empty reduction.
"""

from __future__ import annotations

import builtins
import math

from .. import _devices as _dev
from .. import _dtypes as _dt
from .. import ops as _ops
from .._array import Array
from .._helpers import normalize_axes, normalize_axis
from ..fusion import auto as _auto
from ..primitives.reductions import named as _named
from ..runtime import array_module, kernels_available
from ._core import ShardedArray, refusal
from ._dispatch import original, register
from ._elementwise import Blocks, mismatch, wrap
from ._transfer import stack_on

__all__ = ["combine_partials"]


def _nonempty(x: ShardedArray):
    off = x._offsets
    idx = [i for i in range(len(x._shards)) if off[i + 1] > off[i]]
    return idx or [0]


def _out_axis(x, axes, keepdims):
    if keepdims:
        return x._axis
    return x._axis - builtins.sum(1 for a in axes if a < x._axis)


def _keep_shape(x, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(x.shape))


def _per_block(fn, x, *args, out_axis, **kwargs):
    res = []
    for s in x._shards:
        with _dev.on(s.device):
            res.append(fn(s, *args, **kwargs))
    return wrap(res, x, out_axis)


def stacked(parts, devices, dev0):
    """Per-block partials (arrays, or tuples of arrays) stacked along a new axis 0 on
    ``dev0``."""
    p0 = parts[0]
    if isinstance(p0, tuple):
        return tuple(stacked([p[q] for p in parts], devices, dev0) for q in range(len(p0)))
    return Array._new(stack_on([p._array for p in parts], devices, dev0), dev0)


def combine_partials(x, idx, parts, combine, axes, keepdims):
    """``combine(stacked partials)`` on the first device, reshaped for ``keepdims``.  Only the
    partials are computed now: an element-wise block they reduce, still referenced by the
    caller, stays deferred (see :func:`~forge_array.fusion.auto.settle_only`)."""
    _auto.settle_only(parts)
    dev0 = x._sharding.devices[0]
    st = stacked(parts, [x._shards[i].device for i in idx], dev0)
    with _dev.on(dev0):
        r = combine(st)
        if keepdims:
            shape = _keep_shape(x, axes)
            reshape = original("reshape")
            r = tuple(reshape(c, shape) for c in r) if isinstance(r, tuple) else reshape(r, shape)
    return r


def _partials(fn, x, idx, *args, **kwargs):
    """``fn`` of every block in ``idx`` on its device, each launched before the next block's
    host work begins (a deferred partial is computed at once), so that the last device
    starts one call's host time after the first, not all of them."""
    out = []
    for i in idx:
        s = x._shards[i]
        with _dev.on(s.device):
            p = fn(s, *args, **kwargs)
        _auto.settle_only(p)
        out.append(p)
    return out


def _standard(name, combine_name, with_dtype):
    fn = original(name)
    comb = original(combine_name)

    def impl(x, /, *, axis=None, keepdims=False, **kw):
        axes = normalize_axes(axis, x.ndim, name)
        if x._axis not in axes:
            return _per_block(fn, x, axis=axes, keepdims=keepdims, out_axis=_out_axis(x, axes, keepdims),
                              **kw)
        idx = _nonempty(x)
        parts = _partials(fn, x, idx, axis=axes, **kw)
        extra = {"dtype": parts[0].dtype} if with_dtype else {}
        return combine_partials(x, idx, parts, lambda s: comb(s, axis=0, **extra), axes,
                                keepdims)

    impl.__name__ = name
    return impl


for _name, _comb, _dt_kw in (("sum", "sum", True), ("prod", "prod", True), ("max", "max", False),
                             ("min", "min", False), ("any", "any", False), ("all", "all", False),
                             ("count_nonzero", "sum", True)):
    register(_name)(_standard(_name, _comb, _dt_kw))


def _check_float(name, x, kinds="floating-point"):
    ok = _dt.real_floating_dtypes if kinds.startswith("real") else _dt.floating_dtypes
    if x.dtype not in ok:
        raise TypeError(f"{name}() requires an array of a {kinds} dtype, got {x.dtype}")


def _count(x, axes):
    return math.prod(x.shape[a] for a in axes)


@register("mean")
def mean(x, /, *, axis=None, keepdims=False):
    fn = original("mean")
    axes = normalize_axes(axis, x.ndim, "mean")
    if x._axis not in axes:
        return _per_block(fn, x, axis=axes, keepdims=keepdims, out_axis=_out_axis(x, axes, keepdims))
    _check_float("mean", x)
    n = _count(x, axes)
    if n == 0:
        with _dev.on(x._shards[0].device):
            return fn(x._shards[0], axis=axes, keepdims=keepdims)
    idx = _nonempty(x)
    parts = _partials(original("sum"), x, idx, axis=axes)
    total = original("sum")
    return combine_partials(x, idx, parts, lambda s: total(s, axis=0, dtype=s.dtype) / n, axes,
                            keepdims)


def _spread(name, x, axis, correction, keepdims):
    fn = original(name)
    axes = normalize_axes(axis, x.ndim, name)
    if x._axis not in axes:
        return _per_block(fn, x, axis=axes, correction=correction, keepdims=keepdims,
                          out_axis=_out_axis(x, axes, keepdims))
    _check_float(name, x, "real floating-point")
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"{name}(): correction must be an int or a float")
    if correction < 0:
        raise ValueError(f"{name}(): correction must be non-negative, got {correction}")
    n = _count(x, axes)
    dt = x.dtype
    dev0 = x._sharding.devices[0]
    if n - correction <= 0:
        shape = _keep_shape(x, axes) if keepdims else tuple(
            s for i, s in enumerate(x.shape) if i not in axes)
        return original("full")(shape, float("nan"), dtype=dt, device=dev0)
    idx = _nonempty(x)
    # one pass per block: (count, mean, M2) of the block, merged across blocks with Chan's
    # formula; the block's triple from its shifted float64 sums where the single array's
    # var / std would take them (float16, large float32 arrays), else Welford triples
    first = x._shards[idx[0]]._array if idx else None
    if (all(type(x._shards[i]) is Array for i in idx) and kernels_available(first)
            and _named.shifted_pays(first, axes)):
        parts = _shifted_triples(x, idx, axes)
    else:
        wmap = _ops.welford_map(dt)
        parts = _partials(lambda s, axis: original("mapreduce")(wmap, _ops.welford, s, axis=axis),
                          x, idx, axis=axes)
    red = original("reduce")

    def merge(st):
        m2 = red(_ops.welford, st, axis=0)[2]
        v = m2 / (n - correction)
        v = original("sqrt")(v) if name == "std" else v
        return original("astype")(v, dt, copy=False)

    return combine_partials(x, idx, parts, merge, axes, keepdims)


def _shifted_triples(x, idx, axes):
    """(count, mean, M2) in float64 of each block in ``idx`` along ``axes``, from its
    shifted sums (:func:`forge_array.primitives.reductions.named.shifted_sums`): every
    block's pass is launched before any block's few finishing steps, so that no GPU waits
    for the host work of the blocks before it."""
    sums = []
    for i in idx:
        s = x._shards[i]
        with _dev.on(s.device):
            sums.append(_named.shifted_sums(s._array, axes))
    parts = []
    for i, (pivot, count, s1, s2) in zip(idx, sums):
        dev = x._shards[i].device
        with _dev.on(dev):
            mean, m2 = _named.moments_of_sums(pivot, count, s1, s2)
            n = array_module(mean).full(mean.shape, count, dtype=mean.dtype)
            parts.append((Array._new(n, dev), Array._new(mean, dev), Array._new(m2, dev)))
    return parts


@register("var")
def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _spread("var", x, axis, correction, keepdims)


@register("std")
def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _spread("std", x, axis, correction, keepdims)


def _arg(name):
    fn = original(name)
    pair_op = _ops.argmax if name == "argmax" else _ops.argmin

    def impl(x, /, *, axis=None, keepdims=False):
        if axis is not None:
            ax = normalize_axis(axis, x.ndim, name)
            if ax != x._axis:
                out = x._axis if keepdims or ax > x._axis else x._axis - 1
                return _per_block(fn, x, axis=ax, keepdims=keepdims, out_axis=out)
        idx = _nonempty(x)
        if x.size == 0:
            with _dev.on(x._shards[0].device):
                return fn(x._shards[0], axis=axis, keepdims=keepdims)
        kw = {} if axis is None else {"axis": ax, "keepdims": True}
        found = _partials(fn, x, idx, **kw)   # every block's scan of its elements first
        parts = []
        for i, li in zip(idx, found):
            s = x._shards[i]
            d = s.device
            m = _dev.backend(d)   # the indices come from argmax: no bounds check (a host sync)
            with _dev.on(d):
                if axis is None:
                    flat = original("reshape")(s, (-1,))
                    li1 = original("reshape")(li, (1,))
                    v = Array._new(m.take(flat._array, li1._array), d)
                    gi = li1 + _flat_shift(x, i, li1)
                else:
                    v = Array._new(m.take_along_axis(s._array, li._array, axis=ax), d)
                    gi = li + x._offsets[i]
            parts.append((v, gi))
        red = original("reduce")

        def pick(st):
            r = red(pair_op, st, axis=0)[1]
            if axis is None:
                return original("reshape")(r, ())
            return original("squeeze")(r, axis=ax)

        axes = tuple(range(x.ndim)) if axis is None else (ax,)
        return combine_partials(x, idx, parts, pick, axes, keepdims)

    impl.__name__ = name
    return impl


def _flat_shift(x, i, li):
    """What turns flat index ``li`` into block ``i`` into a flat index into ``x``."""
    s = x._axis
    inner = math.prod(x.shape[s + 1:])
    n = x.shape[s]
    off = x._offsets[i]
    b = x._offsets[i + 1] - off
    base = off * inner
    if b == n or math.prod(x.shape[:s]) == 1:
        return base
    return (li // (b * inner)) * ((n - b) * inner) + base


register("argmax")(_arg("argmax"))
register("argmin")(_arg("argmin"))


# ---- generic reductions


def _components(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _check_order(op, ref, axes, name):
    if getattr(op, "commutative", False):
        return
    if any(ref.shape[a] > 1 for a in axes if a < ref._axis):
        raise refusal(f"{name} with an operator not marked commutative over axes before the "
                      "split axis", ref)


@register("reduce")
def reduce(op, x, /, *, axis=None, init=None, keepdims=False):
    fn = original("reduce")
    comps = _components(x)
    ref = next(c for c in comps if isinstance(c, ShardedArray))
    for c in comps:
        if not ref.same_layout(c):
            if isinstance(c, ShardedArray):
                raise mismatch(ref, c)
            raise refusal("reduce of sharded and unsharded components", ref)
    axes = normalize_axes(axis, ref.ndim, "reduce")
    blocks = Blocks(ref, ref.ndim)
    if ref._axis not in axes:
        res = blocks.run(lambda v: fn(op, v, axis=axes, init=init, keepdims=keepdims), (x,), {})
        return wrap(res, ref, _out_axis(ref, axes, keepdims))
    _check_order(op, ref, axes, "reduce")
    idx = _nonempty(ref)
    operands = [blocks.operand(x, i) for i in idx]  # copied before any launch (Blocks.run)
    parts = []
    for i, v in zip(idx, operands):
        with _dev.on(blocks.devices[i]):
            parts.append(fn(op, v, axis=axes))
        _auto.settle_only(parts[-1])   # launched before the next block's host work
    return combine_partials(ref, idx, parts, lambda st: fn(op, st, axis=0, init=init), axes,
                            keepdims)


@register("mapreduce")
def mapreduce(f, op, *arrays, axis=None, init=None, keepdims=False):
    fn = original("mapreduce")
    plan = Blocks.of(arrays, {})
    ref = plan.ref
    if any(getattr(a, "ndim", ref.ndim) != ref.ndim
           for c in arrays for a in _components(c)):
        raise refusal("mapreduce of arrays of different dimensions", ref)
    axes = normalize_axes(axis, ref.ndim, "mapreduce")
    if ref._axis not in axes:
        res = plan.run(lambda *a: fn(f, op, *a, axis=axes, init=init, keepdims=keepdims),
                       arrays, {})
        return wrap(res, ref, _out_axis(ref, axes, keepdims))
    _check_order(op, ref, axes, "mapreduce")
    idx = _nonempty(ref)
    operands = [[plan.operand(v, i) for v in arrays] for i in idx]  # copied first (Blocks.run)
    parts = []
    for i, a in zip(idx, operands):
        with _dev.on(plan.devices[i]):
            parts.append(fn(f, op, *a, axis=axes))
        _auto.settle_only(parts[-1])   # launched before the next block's host work
    red = original("reduce")
    return combine_partials(ref, idx, parts, lambda st: red(op, st, axis=0, init=init), axes,
                            keepdims)
