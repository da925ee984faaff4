"""Computing pending expressions in as few launches as possible.

:func:`settle` takes the nodes whose values are wanted and computes them and every pending
reduction beneath them:

1. Reductions first, in rounds: a reduction whose input holds no pending reduction is
   ready; ready reductions over inputs of one shape, along the same axes, are computed in
   one launch (:func:`forge_array.primitives.fused_reduce.reduce_terms`), each with its
   element-wise input fused in.  Their results become leaves of what is left, read as one
   broadcast value (``x - mean(x)``).
2. Then the element-wise nodes: nodes of one shape are written by one map launch with
   one output each (:func:`forge_array.kernels.elementwise.map_arrays`).

A settled node keeps its value and drops its operands, so a settled expression holds no
memory but its result.
"""

from __future__ import annotations

import numpy as np

from .. import _devices as _dev
from ..kernels.elementwise import map_arrays
from ..primitives import fused_reduce as _fr
from ..runtime import STATS
from .codegen import function_of, linearize
from .expr import Const, Leaf, Node

__all__ = ["settle", "plan_of", "AXIS_MAX_LEAVES"]

#: most leaves a fused reduction along some axes reads (the axis kernels' operand limit)
AXIS_MAX_LEAVES = 3


def _pending_reductions(roots):
    """Pending reduction nodes reachable from ``roots``, operands before users."""
    out = []
    seen = set()

    def walk(e):
        if not isinstance(e, Node) or e.value is not None or id(e) in seen:
            return
        seen.add(id(e))
        for a in e.args:
            walk(a)
        if e.op == "reduce":
            out.append(e)

    for r in roots:
        walk(r)
    return out


def _holds_pending_reduction(e, memo):
    if not isinstance(e, Node) or e.value is not None:
        return False
    k = id(e)
    r = memo.get(k)
    if r is None:
        r = e.op == "reduce" or any(_holds_pending_reduction(a, memo) for a in e.args)
        memo[k] = r
    return r


def _broadcast(a, shape, xp):
    if tuple(a.shape) == shape:
        return a
    return xp.broadcast_to(a, shape)


def _backend(device):
    return _dev.backend(device)


def _done(node, value):
    node.value = value
    node.args = ()


def settle(nodes):
    """Compute the values of ``nodes`` (pending :class:`~.expr.Node` objects of one device)
    and of every pending reduction they use; see the module docstring."""
    nodes = [n for n in nodes if n.value is None]
    if not nodes:
        return
    device = nodes[0].device
    with _dev.on(device):
        reds = _pending_reductions(nodes)
        while reds:
            memo: dict = {}
            ready = [r for r in reds if not _holds_pending_reduction(r.args[0], memo)]
            groups: dict = {}
            for r in ready:
                term, axes, keepdims = r.extra
                groups.setdefault((r.args[0].shape, axes, keepdims), []).append(r)
            for (shape, axes, keepdims), group in groups.items():
                _reduce_group(group, shape, axes, keepdims, device)
            reds = [r for r in reds if r.value is None]
        maps: dict = {}
        for n in nodes:
            if n.value is None:
                maps.setdefault(n.shape, []).append(n)
        for shape, group in maps.items():
            _map_group(group, shape, device)


def _map_group(group, shape, device):
    program, leaves = linearize(group)
    xp = _backend(device)
    fn = function_of(program)
    if not leaves:  # constants only
        leaves = [xp.zeros((), dtype=np.uint8)]
        program = None
    arrays = [_broadcast(a, shape, xp) for a in leaves]
    if program is None:
        outs = [xp.full(shape, _const_value(n), dtype=n.dtype) for n in group]
    else:
        outs = map_arrays(fn, arrays, tuple(n.dtype for n in group))
    STATS["fused"] += len(group)
    for n, o in zip(group, outs):
        _done(n, o)


def _const_value(node):
    program, _ = linearize([node])
    return function_of(program)()[0]


def _reduce_group(group, shape, axes, keepdims, device):
    xp = _backend(device)
    full = axes is None
    size = 1
    for s in shape:
        size *= s
    roots = [r.args[0] for r in group]
    program, leaves = linearize(roots)
    if size == 0 or (not full and len(leaves) > AXIS_MAX_LEAVES):
        if len(group) > 1:
            for r in group:
                _reduce_group([r], shape, axes, keepdims, device)
            return
        _reduce_materialised(group[0], shape, axes, keepdims, device)
        return
    if not leaves:
        leaves = [xp.zeros((), dtype=np.uint8)]
    expr = function_of(program)
    arrays = [_broadcast(a, shape, xp) for a in leaves]
    terms = tuple(r.extra[0] for r in group)
    outs = _fr.reduce_terms(expr, arrays, terms, axes, keepdims)
    STATS["fused"] += sum(1 for e in roots if isinstance(e, Node) and e.value is None)
    for r, o in zip(group, outs):
        _done(r, o)


def _reduce_materialised(r, shape, axes, keepdims, device):
    """A reduction of an empty input, or along axes with too many leaves: compute the input
    (one map launch), then reduce it as eager code does."""
    from .. import _routing  # noqa: PLC0415 - the namespace's router

    e = r.args[0]
    if isinstance(e, Node) and e.value is None:
        settle([e])
        x = e.value
    elif isinstance(e, Node):
        x = e.value
    elif isinstance(e, Leaf):
        x = e.array
    else:
        x = _backend(device).full(shape, e.value, dtype=e.dtype)
    x = _broadcast(x, shape, _backend(device))
    term = r.extra[0]
    ax = tuple(range(len(shape))) if axes is None else axes
    name = term.name
    if name in ("sum", "prod"):
        fn = _routing.reduce_sum if name == "sum" else _routing.reduce_prod
        v = fn(x, ax, term.dtype, keepdims)
    elif name in ("var", "std"):
        fn = _routing.reduce_var if name == "var" else _routing.reduce_std
        v = fn(x, ax, term.correction, keepdims)
    elif name in ("argmax", "argmin"):
        fn = _routing.argmax if name == "argmax" else _routing.argmin
        v = fn(x, None if axes is None else axes[0], keepdims)
    else:
        v = getattr(_routing, "reduce_" + name)(x, ax, keepdims)
    _done(r, v)


def plan_of(nodes):
    """The launches :func:`settle` would make for ``nodes``, without running them: a list of
    ``(kind, outputs, leaves)`` with ``kind`` "reduce" (the terms and axes) or "map"
    (``outputs`` the shapes and dtypes written, ``leaves`` the shapes and dtypes read)."""
    nodes = [n for n in nodes if n.value is None]
    done = set()
    launches = []
    reds = _pending_reductions(nodes)
    while reds:
        ready = [r for r in reds if all(id(x) in done for x in _pending_reductions([r.args[0]]))]
        if not ready:
            break
        groups: dict = {}
        for r in ready:
            groups.setdefault((r.args[0].shape, r.extra[1], r.extra[2]), []).append(r)
        for (shape, axes, _), group in groups.items():
            leaves = _leaves_of([r.args[0] for r in group], done)
            terms = ", ".join(f"{r.extra[0].name}" for r in group)
            launches.append(("reduce", f"{terms} over {'all axes' if axes is None else axes} "
                             f"of {shape}", leaves))
            done.update(id(r) for r in group)
        reds = [r for r in reds if id(r) not in done]
    maps: dict = {}
    for n in nodes:
        if n.op != "reduce":
            maps.setdefault(n.shape, []).append(n)
    for shape, group in maps.items():
        outs = ", ".join(f"{n.dtype}{list(shape)}" for n in group)
        launches.append(("map", outs, _leaves_of(group, done)))
    return launches


def _leaves_of(roots, done):
    """Descriptions of what ``roots`` read: arrays and the results of earlier reductions."""
    out = []
    seen = set()

    def walk(e):
        if id(e) in seen:
            return
        seen.add(id(e))
        if isinstance(e, Const):
            return
        if isinstance(e, Leaf) or e.value is not None:
            arr = e.array if isinstance(e, Leaf) else e.value
            if id(arr) not in seen:
                seen.add(id(arr))
                out.append(f"{e.dtype}{list(e.shape)}")
        elif e.op == "reduce" and id(e) in done:
            out.append(f"{e.extra[0].name} result")
        else:
            for a in e.args:
                walk(a)

    for r in roots:
        walk(r)
    return out
