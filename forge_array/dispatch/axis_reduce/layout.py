"""Layouts of the axis reductions: negative strides flipped, dimensions collapsed, the layout key
of the plan cache, and :func:`run_kernels` (plan, scratch, launch per host-looped slice) of
one :class:`AxisReduction`.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import runtime
from ...runtime.caches import Cache
from .._common import components, first_component, hashable_key
from .plan import execute, plan_launch

array_module = runtime.array_module


class AxisReduction(NamedTuple):
    """What an axis reduction computes, whatever its operands: the map ``f`` (the operands'
    elements, then the logical position along the reduced axes with ``index``), the
    operator ``op``, the reduced ``axes`` (sorted, non-negative), the accumulator dtype
    ``acc`` (a tuple for a tuple operator), the operator's identity ``ident`` (None: none)
    and the initial values ``init_v`` (None: none).

    >>> from forge_array import ops
    >>> AxisReduction(None, ops.add, (1,), np.dtype("float64"), 0.0, None, False).axes
    (1,)
    """

    f: object
    op: object
    axes: tuple
    acc: object
    ident: object
    init_v: object
    index: bool

# --------------------------------------------------------------------------- layout


def _flip(entry, d):
    idx = (slice(None),) * d + (slice(None, None, -1),)
    if isinstance(entry, tuple):
        return tuple(c[idx] for c in entry)
    return entry[idx]


def _strides_of(entry):
    """Element strides of an operand (a tuple of arrays must share them) or None."""
    try:
        st = [runtime.element_strides(c) for c in components(entry)]
    except ValueError:
        return None
    if any(s != st[0] for s in st[1:]):
        return None
    return st[0]


def _contig(entry):
    xp = array_module(first_component(entry))
    if isinstance(entry, tuple):
        return tuple(xp.ascontiguousarray(c) for c in entry)
    return xp.ascontiguousarray(entry)


def _collapse(dims):
    """Merge neighbours (sorted by decreasing |stride| of operand 0) that are contiguous with
    respect to each other in every operand. ``dims``: list of ``[n, strides]``. A dim along
    which operand 0 is broadcast (stride 0) goes outermost, so that the innermost dim is the
    one operand 0 is contiguous along."""
    dims = sorted(dims, key=lambda t: -abs(t[1][0]) if t[1][0] else -math.inf)
    out = []
    for n, st in dims:
        if out and all(so == si * n for so, si in zip(out[-1][1], st)):
            out[-1] = [out[-1][0] * n, st]
        else:
            out.append([n, st])
    return out


PLANS = Cache("dispatch.axis_reduce.PLANS")  # new lambdas per call evict


def layout_key(entry):
    """What a launch plan depends on: dtype, shape, strides, 16-byte phase (and device)."""
    if isinstance(entry, tuple):
        return tuple(layout_key(c) for c in entry)
    if isinstance(entry, np.ndarray):
        return (entry.dtype, entry.shape, entry.strides,
                entry.__array_interface__["data"][0] % 16)
    mp = entry.data
    return (entry.dtype, entry.shape, entry.strides, mp.ptr % 16, mp.device_id)


def run_kernels(call: AxisReduction, arrays, out, cache=True):
    """Launch the kernels of the reduction ``call`` of ``arrays`` into ``out``; plans (kernel,
    launch shape, scalar arguments) are cached by the operands' layout so that a repeated call
    only builds buffers."""
    f, op, axes, acc, ident, init_v, index = call
    key = None
    if cache:
        try:
            key = (f, op, index, acc, hashable_key(init_v), axes,
                   tuple(layout_key(e) for e in arrays), layout_key(out))
            plan = PLANS.get(key)
        except TypeError:  # unhashable operator
            key = plan = None
        if plan is not None:
            execute(plan, arrays, out)
            return plan
    ins = list(arrays)
    for k, e in enumerate(ins):
        if _strides_of(e) is None:
            ins[k] = _contig(e)
            key = None  # the plan would not fit the original operand
    shape = tuple(first_component(ins[0]).shape)
    ndim = len(shape)
    kept = [d for d in range(ndim) if d not in axes]
    # logical (C-order) positions over the reduced axes, for index=True
    L = {}
    m = 1
    for d in reversed(axes):
        L[d] = m
        m *= shape[d]
    kb = 0
    # flip the axes along which operand 0 runs backwards (element offsets of the new origins)
    in_st = [_strides_of(e) for e in ins]
    out_st = _strides_of(out)
    s0 = in_st[0]
    in_off = [0] * len(ins)
    out_off = 0
    for d in range(ndim):
        if shape[d] > 1 and s0[d] < 0:
            for k in range(len(ins)):
                in_off[k] += (shape[d] - 1) * in_st[k][d]
            if d in L:
                kb += (shape[d] - 1) * L[d]
                L[d] = -L[d]
            else:
                out_off += (shape[d] - 1) * out_st[kept.index(d)]
    flip = [d for d in range(ndim) if shape[d] > 1 and s0[d] < 0]
    fin_st = [tuple(-v if d in flip else v for d, v in enumerate(st)) for st in in_st]
    fout_st = tuple(-v if kept[i] in flip else v for i, v in enumerate(out_st))
    kdims = _collapse([[shape[d], tuple(s[d] for s in fin_st) + (fout_st[i],)]
                       for i, d in enumerate(kept) if shape[d] > 1])
    rdims = _collapse([[shape[d], tuple(s[d] for s in fin_st) + (L[d] if index else 0,)]
                       for d in axes if shape[d] > 1])
    if len(rdims) > 2:
        # rare (non-adjacent reduced axes of a >= 5-d view): make the reduced axes
        # contiguous at the end, where they collapse into one
        xp = array_module(first_component(ins[0]))
        perm = tuple(kept) + tuple(axes)
        moved = []
        for e in arrays:
            comps = tuple(xp.ascontiguousarray(xp.transpose(c, perm)) for c in components(e))
            moved.append(comps if isinstance(e, tuple) else comps[0])
        nk = len(kept)
        return run_kernels(call._replace(axes=tuple(range(nk, ndim))), tuple(moved), out, cache=False)
    if len(kdims) > 2:
        # rare: loop over the outermost kept axis (by stride of operand 0) on the host, each
        # slice into a fresh C-contiguous result
        d = max((d for d in kept if shape[d] > 1), key=lambda d: abs(s0[d]))
        i = kept.index(d)
        xp = array_module(first_component(ins[0]))
        for t in range(shape[d]):
            sub_in = tuple(_take(e, d, t) for e in ins)
            sub_axes = tuple(a - (a > d) for a in axes)
            sub_out = _take(out, i, t)
            tmp = tuple(xp.empty(c.shape, c.dtype) for c in components(sub_out))
            tmp = tmp if isinstance(out, tuple) else tmp[0]
            run_kernels(call._replace(axes=sub_axes), sub_in, tmp, cache=False)
            for c, tc in zip(components(sub_out), components(tmp)):
                c[...] = tc
        return None
    # the planner sees the flipped views (for the 16-byte phase of 128-bit loads)
    views = []
    for e in ins:
        for d in flip:
            e = _flip(e, d)
        views.append(e)
    out_ok = not isinstance(out, tuple) and (
        runtime.misalignment(out) + out_off * out.dtype.itemsize) % 16 == 0
    plan = plan_launch(f, op, views, kdims, rdims, kb, acc, ident, init_v, index, out_ok)
    plan["in_off"] = tuple(in_off)
    plan["out_off"] = out_off
    plan["moved"] = any(in_off) or bool(out_off)
    plan["empty"] = array_module(first_component(ins[0])).empty
    plan["scratch"] = {}  # stream key -> (buffers kept alive, partials, ticket) of plan_scratch
    if key is not None:
        PLANS[key] = plan
    execute(plan, ins, out)
    return plan if key is not None else None


def _take(entry, d, t):
    idx = (slice(None),) * d + (t,)
    if isinstance(entry, tuple):
        return tuple(c[idx] for c in entry)
    return entry[idx]


