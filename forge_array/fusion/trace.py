"""``fuse``: run a function of arrays with its element-wise steps and reductions fused.

While a fused function runs, the namespace's element-wise steps, ``where``, ``astype``,
``clip`` and reductions return deferred arrays (:mod:`.build`); when it returns, its
outputs are computed together (:func:`.evaluate.settle`): element-wise chains inside the
reductions that consume them, sibling reductions of one shape in one pass, element-wise
outputs of one shape in one map launch.  Anything else reads its operands and so computes
what it needs where it stands (a break in the plan).
"""

from __future__ import annotations

import functools
import gc

from .. import _array as _array_module
from .. import _ownership, _routing
from .._array import Array
from .._routing import _LAYER
from .._routing import layer_ready as _layer_ready
from ..runtime import STATS, config, kernels_available
from ..runtime.caches import Cache
from ..runtime.lazy import module as _lazy
from . import auto as _auto
from . import build as _build
from .expr import Deferred, pending
from .replay import MAX_PLANS, Plan, Recorder, signature

_evaluate = _lazy("forge_array.fusion.evaluate", __name__, "_evaluate")  # loads numba at first use

__all__ = ["fuse", "Fused"]


def _flatten(out, acc):
    if isinstance(out, Deferred):
        acc.append(out)
    elif isinstance(out, (tuple, list)):
        for o in out:
            _flatten(o, acc)
    elif isinstance(out, dict):
        for o in out.values():
            _flatten(o, acc)
    return acc


def _plain(out):
    """``out`` with every (settled) deferred array replaced by a plain array of its values."""
    if isinstance(out, Deferred):
        return Array._new(out._array, out._device)
    if isinstance(out, tuple) and type(out) is not tuple:  # a named tuple
        return type(out)(*(_plain(o) for o in out))
    if isinstance(out, (tuple, list)):
        return type(out)(_plain(o) for o in out)
    if isinstance(out, dict):
        return {k: _plain(v) for k, v in out.items()}
    return out


def _by_device(nodes):
    groups: dict = {}
    for n in nodes:
        groups.setdefault(n.device, []).append(n)
    return groups.values()


def _before_write(what="an in-place write"):
    """Settle every pending array of this thread's fused call and every pending array of
    plain code (see ``Array.BEFORE_WRITE``)."""
    _auto.settle_all()
    t = _build.current()
    if t is None:
        return
    t.wrote = True
    nodes = []
    for ref in t.arrays:
        d = ref()
        if d is not None and pending(d) is not None:
            nodes.append(d._node)
    if nodes:
        t.log.append(f"{len(nodes)} pending arrays before {what}")
        for group in _by_device(nodes):
            _evaluate.settle(group)


def _view_taken(source, view_of, view):
    """Note a view of a materialised array taken while this thread traces (see
    ``Array.VIEW_TAKEN``)."""
    if _build.ACTIVE[0]:
        t = _build.current()
        if t is not None:
            t.views.append((source, view_of, view))


def _values_read():
    """Note that array values reached Python while this thread traces (see
    ``Array.VALUE_READ``): the trace depends on them, so its plan is not replayed."""
    if _build.ACTIVE[0]:
        t = _build.current()
        if t is not None:
            t.forced = True


def _before_share():
    """Settle what is pending before memory becomes shared (see ``_ownership.BEFORE_SHARE``):
    another library may write it from then on."""
    _before_write("an export")


_array_module.BEFORE_WRITE[0] = _before_write
_array_module.VIEW_TAKEN[0] = _view_taken
_array_module.VALUE_READ[0] = _values_read


def _load_evaluation():
    if isinstance(_evaluate, _lazy):  # numba and the kernel modules: with the kernel layer's
        _evaluate.load()


_routing.LAYER_LOADS.append(_load_evaluation)
_ownership.BEFORE_SHARE[0] = _before_share


def _kept_pending(trace, collect):
    """The deferred arrays of ``trace`` still alive and pending once its outputs are
    settled.  With ``collect`` (a call that records a plan), an array found alive is looked
    for again after a garbage collection: one held only by a reference cycle (an exception's
    traceback, say) is no array the function kept, and must not cost the call its plan."""
    def alive():
        return [d for d in (ref() for ref in trace.arrays) if d is not None and pending(d) is not None]
    kept = alive()
    if kept and collect:
        del kept
        gc.collect()
        kept = alive()
    return kept


def _settle_left(trace):
    """Compute what a fused call that raised left pending, while its operands still hold
    the values they had (eager code computed each step where it stood)."""
    nodes = [d._node for d in (ref() for ref in trace.arrays)
             if d is not None and pending(d) is not None]
    for group in _by_device(nodes):
        try:
            _evaluate.settle(group)
        except Exception:  # the function's own exception is the one to see
            for n in group:
                if n.value is None:
                    _auto.compute_eagerly(n)


def _own_arrays(args, kwargs):
    """``(args, kwargs, backend)``: the arguments with each array replaced by an array over
    a new backend view of the same memory (one per distinct backend array, so arguments
    that are the same array stay the same), and those views in the order
    :func:`~.replay.signature` lists the arrays."""
    views: dict = {}

    def own(v):
        if isinstance(v, Array):
            a = v._array
            w = views.get(id(a))
            if w is None:
                w = views[id(a)] = (Array._new(a.view(), v._device), a)
            return w[0]
        t = type(v)
        if t is tuple or t is list:
            return t(map(own, v))
        if t is dict:
            return {k: own(x) for k, x in v.items()}
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return t(*map(own, v))
        return v

    args = tuple(map(own, args))
    kwargs = {k: own(v) for k, v in kwargs.items()}
    return args, kwargs, [w[0]._array for w in views.values()]


#: set by :mod:`forge_array.sharding` when it is first used: ``(fn, args, kwargs)`` -> the
#: result of the fused function ``fn`` called with sharded arrays among its arguments, or
#: ``NotImplemented`` when none is sharded (the layer above owns sharded arrays)
SHARDED_CALL = [None]


class Fused:
    """A function fused by :func:`fuse`; call it as the function itself."""

    def __init__(self, fn):
        self.fn = fn
        self._plans = Cache(f"fusion.trace.plans of {getattr(fn, '__qualname__', fn)!r} at {id(self):#x}",
                            MAX_PLANS, evict="oldest")
        functools.update_wrapper(self, fn)

    def _trace(self, args, kwargs, rec=None):
        trace = _build.Trace(rec)
        _build.begin_trace(trace)
        try:
            out = self.fn(*args, **kwargs)
        except BaseException:
            _build.end_trace()
            _settle_left(trace)
            raise
        _build.end_trace()
        return out, trace

    def __call__(self, *args, **kwargs):
        if _build.tracing():  # called from another fused function: part of its trace
            return self.fn(*args, **kwargs)
        sharded = SHARDED_CALL[0]
        if sharded is not None:
            out = sharded(self.fn, args, kwargs)
            if out is not NotImplemented:
                return out
        key, arrays = signature(args, kwargs)
        if arrays and not _LAYER[0] and kernels_available(arrays[0]) and not _layer_ready():
            # background compile mode: while numba and the kernels load off the thread, the
            # function runs as plain code (arrays without kernels never load them), and once
            # more behind the load on that thread (its result dropped), where it is traced and
            # its kernels are queued, so that a later call finds them built
            if key is not None:
                _routing._prepare_later(("fused", id(self), key), lambda: self(*args, **kwargs),
                                        sum(int(a.nbytes) for a in arrays))
            return self.fn(*args, **kwargs)
        if key is None:
            return self._run(args, kwargs, None)
        plan = self._plans.get(key)
        if plan is not None:
            if type(plan) is Plan:
                return plan.run(arrays)
            return self._run(args, kwargs, None)  # a plan that cannot be replayed
        # the function sees its arrays through backend objects of their own, so that the
        # recorder tells an argument from the same array reached another way (a global, a
        # closure value), which a replay must not replace with the next call's argument
        args, kwargs, own = _own_arrays(args, kwargs)
        rec = Recorder(own)
        building = STATS["deferred"]
        out = self._run(args, kwargs, rec)
        if STATS["deferred"] != building:  # a kernel is being built: a later call records
            return out
        plan = rec.plan(out, len(arrays))
        self._plans[key] = plan if plan is not None else rec.reason
        return out

    def _run(self, args, kwargs, rec):
        """Trace the function and compute its outputs, telling ``rec`` the launches."""
        out, trace = self._trace(args, kwargs, rec)
        if rec is not None:
            if trace.forced:
                rec.fail("the function reads values while it runs")
            elif trace.wrote:
                rec.fail("the function writes into an array")
            for view in trace.views:
                rec.view(*view)
        outs = _flatten(out, [])
        for group in _by_device([n for n in map(pending, outs) if n is not None]):
            _evaluate.settle(group, rec)
        # deferred arrays the function kept elsewhere (a global, a closure): computed now,
        # while their operands still hold the values they had
        kept = _kept_pending(trace, collect=rec is not None)
        for d in kept:
            _evaluate.settle([d._node])
        if kept and rec is not None:
            rec.fail("a deferred array is kept outside the outputs")
        return _plain(out)

    def explain(self, *args, **kwargs):
        """The launches a call with these arguments makes, as text: what each computes, reads
        and writes.  Nothing is computed but what the function itself forces (the steps
        listed as settled early).

        >>> import forge_array as xp
        >>> @xp.fuse
        ... def f(x, y):
        ...     return xp.sum(x * y + 1)
        >>> x = xp.ones(8, device="cpu")
        >>> print(f.explain(x, x))                                # doctest: +SKIP
        1 launch
          1. reduce sum over all axes of (8,); reads float64[8], float64[8]
        """
        key, arrays = signature(args, kwargs)
        if arrays and not any(map(kernels_available, arrays)):
            why = ("the array arguments are CPU (NumPy) arrays, on which the function runs "
                   "eagerly, step by step (fusion runs on GPU arrays)"
                   if config.KERNELS_ENABLED else
                   "our kernels are turned off (FORGE_ARRAY_KERNELS=0): the function runs "
                   "eagerly, step by step")
            return f"0 launches\n  not fused: {why}"
        plan = self._plans.get(key) if key is not None else None
        out, trace = self._trace(args, kwargs)
        launches = []
        for group in _by_device([n for n in map(pending, _flatten(out, [])) if n is not None]):
            launches += _evaluate.plan_of(group)
        lines = [f"{len(launches)} launch{'es' if len(launches) != 1 else ''}"]
        if key is None:
            lines.append("  traced at every call: an argument has no signature")
        elif type(plan) is Plan:
            lines.append("  replayed: the plan recorded at the first call with these arguments")
        elif plan is not None:
            lines.append(f"  traced at every call: {plan}")
        for entry in trace.log:
            lines.append(f"  settled early: {entry}")
        for k, (kind, what, reads) in enumerate(launches, 1):
            lines.append(f"  {k}. {kind} {what}; reads {', '.join(reads) or 'nothing'}")
        return "\n".join(lines)

    def __repr__(self):
        return f"fuse({getattr(self.fn, '__qualname__', self.fn)!r})"


def fuse(fn=None):
    """Decorator: run ``fn`` (a function of arrays and Python scalars) with its element-wise
    steps fused into the reductions that consume them, sibling reductions in one pass and
    element-wise results written by one kernel; results equal calling ``fn`` itself.

    Steps that do not fuse (sorting, linear algebra, indexing, anything that reads values)
    run eagerly where they stand.  Python scalars are compiled in as constants (a new value
    compiles new kernels); pass a 0-d array for a value that changes from call to call.
    ``fn`` runs at the first call of each input signature (dtypes, shapes, strides, devices,
    scalar values); later calls replay the launches it made, unless its plan depends on more
    than the signature (see [Fused expressions](fusion.md)).  ``f.explain(*args)`` shows the launches of a
    call.

    Examples:
        >>> import forge_array as xp
        >>> @xp.fuse
        ... def stats(x):
        ...     return xp.mean(x), xp.std(x), xp.max(x)    # one pass over x on the GPU
        >>> m, s, mx = stats(xp.asarray([1.0, 2.0, 3.0, 6.0], device="cpu"))
        >>> float(m), float(mx)
        (3.0, 6.0)
    """
    if fn is None:
        return fuse
    if not callable(fn):
        raise TypeError(f"fuse() needs a function, got {type(fn).__name__}")
    return Fused(fn)
