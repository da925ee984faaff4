"""Computing pending expressions in as few launches as possible.

:func:`settle` takes the nodes whose values are wanted and computes them and every pending
reduction beneath them:

1. Reductions first, in rounds: a reduction whose input holds no pending reduction is
   ready; ready reductions over inputs of one shape, along the same axes, are computed in
   one launch (:func:`forge_array.primitives.fused_reduce.reduce_terms`), each with its
   element-wise input fused in.  Their results become leaves of what is left, read as one
   broadcast value (``x - mean(x)``).
2. Then the element-wise nodes: nodes of one shape are written by one map launch with
   one output each (:func:`forge_array.dispatch.elementwise.map_arrays`).

A settled node keeps its value and drops its operands, so a settled expression holds no
memory but its result.  Outside a fused call the launches of a settlement are noted, and a
later settlement of expressions with the same signatures over leaves of the same layouts
replays them without walking its expressions (:mod:`.resettle`).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _devices as _dev
from ..dispatch import reduce as _kl
from ..dispatch.elementwise import map_arrays, map_plan
from ..primitives import fused_reduce as _fr
from ..primitives import scan as _scan
from ..runtime import STATS, kernels_available, layout_key, stream_key
from ..runtime import background as _background
from ..runtime.caches import Cache
from . import auto as _auto
from . import expr as _expr
from . import resettle as _resettle
from . import state as _state
from .codegen import ConstantsVary, function_of, linearize
from .expr import EPOCH, Const, Leaf, Node, pending_reductions
from .row_programs import describe, row_program

__all__ = ["settle", "replayed_settlement", "scan_of", "plan_of", "AXIS_MAX_LEAVES",
           "MAX_LAUNCH_OPERANDS", "MAX_LAUNCH_STATE"]

#: most leaves a fused reduction along some axes reads (the axis kernels' operand limit)
AXIS_MAX_LEAVES = 3


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
    EPOCH[0] += 1


def settle(nodes, rec=None, forced=True):
    """Compute the values of ``nodes`` (pending :class:`~.expr.Node` objects of one device)
    and of every pending reduction they use; see the module docstring.  ``rec``: a
    :class:`~.replay.Recorder` that is told each launch (what it reads, what it returns).
    ``forced``: whether a running fused call needs the values now (its plan then depends
    on them); False for a settlement its trace decided itself (:func:`.build.cut`)."""
    nodes = [n for n in nodes if n.value is None]
    if not nodes:
        return
    t = _state.current()
    if t is not None and forced:  # values read while the function runs: its plan depends on them
        t.forced = True
    if not _outermost_background_call():
        _compute(nodes, rec)
    elif rec is None and replayed_settlement(nodes):  # built kernels only: nothing to wait for
        return
    elif rec is None and _still_building(nodes):
        _eagerly(nodes, rec)
    else:
        done = _background.finished()
        if _background.attempt(_compute, nodes, rec) is _background.PENDING:
            if rec is None:
                _building(nodes, done)
            _eagerly(nodes, rec)


#: settlements that fell back while a kernel they need was being built: their
#: :func:`.resettle.find` key -> :func:`forge_array.runtime.background.finished` before the try
_BUILDING = Cache("fusion.evaluate.BUILDING", 1024)


def _building(roots, done) -> None:
    """Note that settling ``roots`` fell back to eager evaluation: a kernel it needs was queued
    while ``done`` background jobs had finished."""
    with _dev.on(roots[0].device):
        found = _resettle.find(roots)
    if found is not None:
        _BUILDING[found[0]] = done


def _still_building(roots) -> bool:
    """Whether a settlement of these signatures and layouts fell back before and no
    background job has finished since: the kernels it waits for are still being built, so it
    takes the eager fallback at once instead of walking and planning the expressions again."""
    if not _BUILDING:
        return False
    with _dev.on(roots[0].device):
        found = _resettle.find(roots)
    return found is not None and _BUILDING.get(found[0], -1) == _background.finished()


def _outermost_background_call():
    """Whether a kernel this call needs would be built in the background with the call
    itself falling back (background compile mode, and no enclosing call of the thread
    already takes that fallback: :func:`forge_array.runtime.background.deferring`)."""
    return _background.mode() == "background" and not _background.deferring()


def replayed_settlement(roots):
    """Whether the pending nodes ``roots`` (of one device) were computed by replaying the
    launches of an earlier settlement of the same signatures (:mod:`.resettle`): never
    inside a fused call (whose plan must know that values were read)."""
    if _state.current() is not None:
        return False
    with _dev.on(roots[0].device):
        found = _resettle.find(roots)
        return found is not None and found[2] is not None and _ran(roots, found[2], found[1])


def _ran(roots, plan, leaves):
    """Whether ``plan`` ran on ``leaves`` and gave ``roots`` their values."""
    values = plan.run(leaves)
    if values is None:
        return False
    for r, v in zip(roots, values):
        _done(r, v)
    return True


def _eagerly(nodes, rec):
    """Compute what is left of ``nodes`` with the namespace's eager functions: a kernel they
    need is being built in the background (see :mod:`forge_array.runtime.background`), and
    eager evaluation is their fallback (the same values).  A fused call being recorded then
    records no plan (a later call will)."""
    if rec is not None:
        rec.fail("a kernel is being built")
    with _state.untraced():
        for n in nodes:
            if n.value is None:
                _auto.compute_eagerly(n)


def _compute(nodes, rec):
    """:func:`settle` of pending ``nodes`` without marking the running fused call."""
    device = nodes[0].device
    if rec is not None:
        rec.device = device
    with _dev.on(device):
        if rec is None:
            _settle_roots(nodes)
        else:
            _settle_nodes(nodes, rec)


def _settle_roots(roots):
    """Settle the expressions ``roots`` outside a fused call: replay the launches of an
    earlier settlement of the same signatures over leaves of the same layouts
    (:mod:`.resettle`) without walking them, or settle them as usual and note the launches
    for the next time."""
    found = _resettle.find(roots)
    if found is None:
        _settle_nodes(roots, None)
        return
    key, leaves, plan = found
    if plan is not None and _ran(roots, plan, leaves):
        return
    note = _resettle.begin(leaves)
    try:
        _settle_nodes(roots, None)
    finally:
        _resettle.end()
    plan = note.plan(roots)
    if plan is not None:
        _resettle.keep(key, plan)


def _int_min_fault(r):
    """Whether reduction ``r`` is an integer minimum of a pending expression on a GPU: such a
    fused minimum can come out wrong on the H200 (docs/reductions.md, "Known issue"), so its
    input is computed first and reduced as eager code does."""
    term = r.extra[0]
    e = r.args[0]
    return (term.name in ("min", "argmin") and term.dtype.kind in "iu" and type(e) is Node
            and e.value is None and r.device.is_cuda)


def _settle_nodes(nodes, rec):
    """Settle ``nodes`` (see the module docstring); the device is current."""
    device = nodes[0].device
    reds = pending_reductions(nodes)
    if reds and not any(map(_int_min_fault, reds)) and _row_program(nodes, reds, rec):
        return
    while reds:
        memo: dict = {}
        ready = [r for r in reds if not _holds_pending_reduction(r.args[0], memo)]
        groups: dict = {}
        for r in ready:
            term, axes, keepdims = r.extra
            groups.setdefault((r.args[0].shape, axes, keepdims), []).append(r)
        for (shape, axes, keepdims), group in groups.items():
            for part in _launchable(group, _reduced, _state_size):
                _reduce_group(part, shape, axes, keepdims, device, rec)
        reds = [r for r in reds if r.value is None]
    maps: dict = {}
    for n in nodes:
        if n.value is None:
            maps.setdefault(n.shape, []).append(n)
    for shape, group in maps.items():
        for part in _launchable(group, lambda g: g):
            _map_group(part, shape, device, rec)


#: most operands (leaves read and outputs written) of one launch: a settlement of more is
#: split into several launches (a kernel's parameter space holds a few kilobytes, and the
#: generated kernel passes its operands and results as tuples, which numba compiles only up
#: to 30 items: CPython builds longer ones through a list)
MAX_LAUNCH_OPERANDS = 24
#: most values in the state of one launch's reductions (one flat tuple: 3 values for var
#: and std, 2 for argmax and argmin, 1 for the others)
MAX_LAUNCH_STATE = 24
def _state_size(group):
    return sum(_fr.state_size(r.extra[0].name) for r in group)


def _launchable(group, roots_of, state=None):
    """``group`` (nodes computed by one launch) split into parts whose launches read and
    write at most :data:`MAX_LAUNCH_OPERANDS` arrays and, with ``state`` (the state size of
    a part's reductions), hold at most :data:`MAX_LAUNCH_STATE` values; ``roots_of(part)``:
    the expressions a part's launch computes."""
    if len(group) == 1:
        return [group]
    half = len(group) // 2
    if state is not None and state(group) > MAX_LAUNCH_STATE:
        return (_launchable(group[:half], roots_of, state)
                + _launchable(group[half:], roots_of, state))
    roots = roots_of(group)
    # a bound first (each root's array reads as built): most settlements stop here
    if sum(getattr(e, "reads", 1) for e in roots) + len(group) <= MAX_LAUNCH_OPERANDS:
        return [group]
    _, leaves = linearize(roots)
    if len(leaves) + len(group) <= MAX_LAUNCH_OPERANDS:
        return [group]
    return _launchable(group[:half], roots_of, state) + _launchable(group[half:], roots_of, state)


def _reduced(group):
    return [r.args[0] for r in group]


#: launches of settlements outside a fused call, by program and the leaves' layouts: a
#: plain-code expression met again replays its launch on the new leaves' addresses
_MAX_LAUNCHES = 1024
_LAUNCHES = Cache("fusion.evaluate.LAUNCHES", _MAX_LAUNCHES, evict="oldest")


def _launch_key(program, leaves, *rest):
    return (program, tuple(map(layout_key, leaves)), rest, stream_key())


def _replayed(key, leaves, fused):
    """The outputs of the launch kept under ``key`` run on ``leaves``, or None."""
    d = _LAUNCHES.get(key)
    if d is None:
        return None
    outs = d(*leaves)
    STATS["fused"] += fused
    _resettle.note(d, leaves, outs, fused)
    return outs


def _run(step, leaves, fused, rec, direct=None, key=None):
    """Run one launch ``step(*leaves)`` (a tuple of backend arrays back), counting the
    ``fused`` expressions it computes, and tell ``rec``: ``direct()`` (when given and not
    None) is what replays the same launch on the leaves' addresses alone.  Without ``rec``,
    ``key`` (see :func:`_launch_key`) keeps that replay for the next settlement of the same
    expression over leaves of the same layouts (:func:`_replayed`), and the settlement
    being noted (:mod:`.resettle`) is told the launch."""
    outs = step(*leaves)
    STATS["fused"] += fused
    d = None
    if rec is not None:
        d = direct() if direct is not None else None
        rec.add(step if d is None else d, leaves, outs, fused)
        return outs
    if key is not None and direct is not None:
        d = direct()
        if d is not None:
            _LAUNCHES[key] = d
    _resettle.note(step if d is None else d, leaves, outs, fused)
    return outs


class _DirectReduce:
    """A full fused reduction replayed from its :class:`~forge_array.dispatch.reduce.Launch`
    (the leaves' layouts are fixed by the signature; bool leaves are read as uint8, as the
    launch was planned)."""

    __slots__ = ("launch", "single", "bools")

    def __init__(self, launch, single, bools):
        self.launch = launch
        self.single = single
        self.bools = bools

    def __call__(self, *arrays):
        if self.bools:
            arrays = tuple([a.view(np.uint8) if a.dtype.kind == "b" else a for a in arrays])
        return _kl.replay(self.launch, arrays[0] if self.single else arrays)


class _DirectMap:
    """A map launch replayed from its :class:`~forge_array.dispatch.elementwise.MapLaunch`."""

    __slots__ = ("launch",)

    def __init__(self, launch):
        self.launch = launch

    def __call__(self, *arrays):
        return self.launch.launch(arrays)


def _direct_map(xp, fn, shape, dtypes, leaves):
    m = map_plan(fn, [_broadcast(a, shape, xp) for a in leaves], dtypes)
    return None if m is None else _DirectMap(m)


def _direct_reduce(xp, expr, shape, terms, keepdims, leaves):
    p = _fr.full_launch(expr, [_broadcast(a, shape, xp) for a in leaves], terms, keepdims)
    return None if p is None else _DirectReduce(p, len(leaves) == 1,
                                                any(a.dtype.kind == "b" for a in leaves))


class _DirectAxis:
    """A launch replayed from its plan: here a fused reduction along some axes, of one
    output or of a tuple of them (the launch reads nothing of its operands but their
    addresses: the leaves' own are those of their broadcast views)."""

    __slots__ = ("launch",)

    def __init__(self, launch):
        self.launch = launch

    def __call__(self, *arrays):
        r = self.launch(arrays)
        return r if type(r) is tuple else (r,)


def _direct_axis(xp, expr, shape, terms, axes, keepdims, leaves):
    p = _fr.axis_launch(expr, [_broadcast(a, shape, xp) for a in leaves], terms, axes, keepdims)
    return None if p is None else _DirectAxis(p)


def _map_step(xp, fn, shape, dtypes, *arrays):
    return map_arrays(fn, [_broadcast(a, shape, xp) for a in arrays], dtypes)


def _fill_step(xp, shape, values, dtypes):
    return tuple(xp.full(shape, v, dtype=d) for v, d in zip(values, dtypes))


def _row_program(nodes, reds, rec):
    """Settle ``nodes`` as one row program (:mod:`.row_programs`) when it applies; whether it did."""
    rp = row_program(nodes, reds)
    if rp is None:
        return False
    rkey, make_step, leaves, targets, fused = rp
    outs = key = None
    if rec is None:
        key = _launch_key(rkey, leaves)
        outs = _replayed(key, leaves, fused)
    if outs is None:
        step = make_step()
        outs = _run(step, leaves, fused, rec, lambda: step, key)
    for t, o in zip(targets, outs):
        _done(t, o)
    return True


def _map_group(group, shape, device, rec):
    program, leaves = linearize(group)
    dtypes = tuple(n.dtype for n in group)
    direct = key = None
    if leaves and rec is None:
        key = _launch_key(program, leaves, "map", shape, dtypes)
        outs = _replayed(key, leaves, len(group))
        if outs is not None:
            for n, o in zip(group, outs):
                _done(n, o)
            return
    xp = _backend(device)
    if leaves:
        fn = function_of(program)
        step = functools.partial(_map_step, xp, fn, shape, dtypes)
        direct = functools.partial(_direct_map, xp, fn, shape, dtypes, leaves)
    else:  # constants only
        step = functools.partial(_fill_step, xp, shape, tuple(map(_const_value, group)), dtypes)
    outs = _run(step, leaves, len(group), rec, direct, key)
    for n, o in zip(group, outs):
        _done(n, o)


def _const_value(node):
    program, _ = linearize([node])
    return function_of(program)()[0]


def _reduce_step(xp, expr, shape, terms, axes, keepdims, *arrays):
    if not arrays:
        arrays = (xp.zeros((), dtype=np.uint8),)
    arrays = [_broadcast(a, shape, xp) for a in arrays]
    return tuple(_fr.reduce_terms(expr, arrays, terms, axes, keepdims))


def _reduce_group(group, shape, axes, keepdims, device, rec):
    if any(map(_int_min_fault, group)):
        if len(group) > 1:
            for r in group:
                _reduce_group([r], shape, axes, keepdims, device, rec)
        else:
            _reduce_materialised(group[0], shape, axes, keepdims, device, rec)
        return
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
                _reduce_group([r], shape, axes, keepdims, device, rec)
            return
        _reduce_materialised(group[0], shape, axes, keepdims, device, rec)
        return
    terms = tuple(r.extra[0] for r in group)
    fused = sum(1 for e in roots if isinstance(e, Node) and e.value is None)
    direct = key = None
    if leaves and rec is None:
        key = _launch_key(program, leaves, "reduce", shape, terms, axes, keepdims)
        outs = _replayed(key, leaves, fused)
        if outs is not None:
            for r, o in zip(group, outs):
                _done(r, o)
            return
    expr = function_of(program)
    step = functools.partial(_reduce_step, xp, expr, shape, terms, axes, keepdims)
    if full and leaves:
        direct = functools.partial(_direct_reduce, xp, expr, shape, terms, keepdims, leaves)
    elif leaves:
        direct = functools.partial(_direct_axis, xp, expr, shape, terms, axes, keepdims, leaves)
    outs = _run(step, leaves, fused, rec, direct, key)
    for r, o in zip(group, outs):
        _done(r, o)


def scan_of(name, node, dtype, include_initial):
    """``cumulative_sum`` / ``cumulative_prod`` (``name``) of the pending 1-D expression
    ``node`` accumulated in ``dtype``, the expression computed as the scan loads its leaves
    (pending reductions inside it are computed first); the backend array, or None when the
    leaves do not suit the scan's loads (a broadcast or boolean leaf, no kernels) or, in
    background compile mode, while its kernel is being built."""
    if not _outermost_background_call():
        return _scan_of(name, node, dtype, include_initial)
    r = _background.attempt(_scan_of, name, node, dtype, include_initial)
    if r is _background.PENDING:
        t = _state.current()
        if t is not None and t.rec is not None:
            t.rec.fail("a kernel is being built")
        return None
    return r


def _scan_of(name, node, dtype, include_initial):
    t = _state.current()
    rec = t.rec if t is not None else None  # a fused call records the scan as a launch
    device = node.device
    with _dev.on(device):
        reds = pending_reductions([node])
        if reds:
            _compute(reds, rec)
        program, leaves = linearize([node])
        if (not leaves or any(tuple(a.shape) != node.shape or a.dtype.kind == "b" for a in leaves)
                or not kernels_available(leaves[0])):
            return None
        if rec is not None:
            rec.device = device
        plain, was = _expr.PLAIN, getattr(_expr.PLAIN, "on", False)
        plain.on = t is None
        try:
            fn = function_of(program)
        except ConstantsVary:  # plain code: the namespace scans the expression's values
            return None
        finally:
            plain.on = was
        step = functools.partial(_scan_step, name, fn, node.dtype, dtype, include_initial)
        direct = functools.partial(_direct_scan, name, fn, node.dtype, dtype, include_initial,
                                   leaves)
        (r,) = _run(step, leaves, 1, rec, direct)
    if t is not None:
        t.log.append(f"{name} of {node.dtype}{list(node.shape)}, its expression fused in")
    return r


def _scan_step(name, fn, value_dtype, dtype, include_initial, *leaves):
    return (_scan.cumulative_mapped(name, fn, leaves, value_dtype, dtype, include_initial),)


class _DirectScan(_DirectAxis):
    """A scan of an expression replayed from its launch plan (see
    :func:`forge_array.primitives.scan.mapped_launch`)."""

    __slots__ = ()


def _direct_scan(name, fn, value_dtype, dtype, include_initial, leaves):
    p = _scan.mapped_launch(name, fn, leaves, value_dtype, dtype, include_initial)
    return None if p is None else _DirectScan(p)


def _eager_reduce_step(xp, shape, term, axes, keepdims, x):
    from .. import _routing  # noqa: PLC0415 - the namespace's router

    x = _broadcast(x, shape, xp)
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
    return (v,)


def _reduce_materialised(r, shape, axes, keepdims, device, rec):
    """A reduction of an empty input, or along axes with too many leaves: compute the input
    (one map launch), then reduce it as eager code does."""
    e = r.args[0]
    if isinstance(e, Node) and e.value is None:
        settle([e], rec)
    if isinstance(e, Node):
        x = e.value
    elif isinstance(e, Leaf):
        x = e.array
    else:  # a constant
        x = None
    xp = _backend(device)
    step = functools.partial(_eager_reduce_step, xp, shape, r.extra[0], axes, keepdims)
    if x is None:
        step = functools.partial(_const_reduce_step, step, xp, shape, e.value, e.dtype)
        (v,) = _run(step, [], 0, rec)
    else:
        (v,) = _run(step, [x], 0, rec)
    _done(r, v)


def _const_reduce_step(reduce_step, xp, shape, value, dtype):
    return reduce_step(xp.full(shape, value, dtype=dtype))


def plan_of(nodes):
    """The launches :func:`settle` would make for ``nodes``, without running them: a list of
    ``(kind, outputs, leaves)`` with ``kind`` "reduce" (the terms and axes) or "map"
    (``outputs`` the shapes and dtypes written, ``leaves`` the shapes and dtypes read), or
    one "row program" (:mod:`.row_programs`)."""
    nodes = [n for n in nodes if n.value is None]
    done = set()
    launches = []
    reds = pending_reductions(nodes)
    rp = row_program(nodes, reds) if reds else None
    if rp is not None:  # one launch: see :mod:`.row_programs`
        outs = [f"{t.dtype}{list(t.shape)}" for t in rp[3] if t.op != "reduce"]
        what = describe(reds) + (f", writing {', '.join(outs)}" if outs else "")
        return [("row program", what, [f"{a.dtype}{list(a.shape)}" for a in rp[2]])]
    while reds:
        ready = [r for r in reds if all(id(x) in done for x in pending_reductions([r.args[0]]))]
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


_expr.SETTLE[0] = settle
_expr.REPLAYED[0] = replayed_settlement
