"""Replaying the scan's plans: the plans kept per thread by call (operator, dtypes, flags,
the operands' layouts and stream: :func:`fast_key`), replayed on new operands of the same
layouts with no planning (:func:`run_fast`, :func:`run_into` with ``out=``), and the launch
of a new call that plans it, keeps its plan and describes it for a later process
(:func:`launch`).
"""

from __future__ import annotations

import threading

from ... import runtime
from ...runtime import stored
from ...runtime.caches import Cache
from .plan import ScanCall, launch_scan
from .state import THREAD_LOCAL, state_key

__all__ = ["fast_plans", "fast_key", "cumulative_key", "out_key", "run_into", "run_fast", "remember",
           "replayed", "launch", "layout_key", "STORES"]

#: whether a call's launch is described for a later process's first call (on a GPU)
STORES = not runtime.SIMULATE


def _buf_at(x, off):
    """Kernel buffer of array ``x`` with its origin moved by ``off`` elements."""
    if runtime.SIMULATE:
        b = runtime.SimBuffer.of(x)
        return runtime.SimBuffer(b.array, b.origin + off, b.owner) if off else b
    return int(x.data.ptr) + off * x.dtype.itemsize


layout_key = runtime.layout_key


#: replayable plans kept per thread (a plan holds its thread's tile state)
PLANS_PER_THREAD = 1024


def fast_plans():
    """This thread's replayable plans by :func:`fast_key` / :func:`out_key`: a
    :class:`~forge_array.runtime.caches.Cache` of its own per thread, so that
    ``runtime.caches.clear_all()`` empties every thread's."""
    d = getattr(THREAD_LOCAL, "plans", None)
    if d is None:
        d = THREAD_LOCAL.plans = Cache(f"dispatch.scan.PLANS.{threading.get_ident()}", PLANS_PER_THREAD)
    return d


def fast_key(fn, tuple_op, xs, acc_dtypes, axis, include_initial, exclusive, reverse, det,
              flatten):
    """Key of a call whose plan can be replayed: operator, dtypes, flags and the operands'
    layouts (shape, strides, 16-byte phase, device) on this stream; None if unhashable."""
    if not (axis is None or type(axis) is int) or not runtime.kernels_available(xs[0]):
        return None
    try:
        key = _key(fn, tuple_op, acc_dtypes, axis, include_initial, exclusive, reverse, det,
                   flatten, tuple(layout_key(a) for a in xs), xs[0])
        hash(key)
    except (TypeError, AttributeError):
        return None
    return key


def cumulative_key(fn, acc_dtypes, axis, include_initial, x):
    """:func:`fast_key` of a scan of one array ``x`` our kernels take, with no flag but
    ``include_initial`` and no flattening, without :func:`fast_key`'s checks: the key the
    cumulative functions' host fast path looks up."""
    return _key(fn, False, acc_dtypes, axis, include_initial, False, False, False, False,
                (layout_key(x),), x)


def _key(fn, tuple_op, acc_dtypes, axis, include_initial, exclusive, reverse, det, flatten,
         layouts, x0):
    return (fn, tuple_op, acc_dtypes, axis, include_initial, exclusive, reverse, det, flatten,
            layouts, state_key(x0))


def out_key(fkey, out, tuple_op):
    """Key of a call with ``out=``: the key :func:`fast_key` gave, with the layouts of the
    output arrays (a plan writes outputs of the layouts it was planned for); None when
    ``out`` is not of the form the operator takes (the full path then says why)."""
    outs = out if tuple_op else (out,)
    if type(outs) is not tuple:
        return None
    try:
        return ("out", fkey, tuple(layout_key(o) for o in outs))
    except (TypeError, AttributeError, ValueError):
        return None


def run_into(plan, xs, out, tuple_op, key=None):
    """Replay ``plan`` writing into ``out``, arrays of the layouts the plan was made for
    (:func:`out_key` matched them, so their shapes and dtypes were checked by the call that
    made it); returns ``out``."""
    on = key if type(key) is tuple and len(key) > 1 else None
    if plan.flat:
        xs = [a.reshape(-1) for a in xs]
    outs = out if tuple_op else (out,)
    plan.launch(tuple(_buf_at(a, plan.in_off) for a in xs),
                tuple(_buf_at(o, plan.out_off) for o in outs), on)
    return out


def run_fast(plan, xs, acc_dtypes, tuple_op, key=None):
    """Replay ``plan`` on new operands of the planned layouts; None when the fresh output is
    not aligned as planned (the caller then takes the full path). ``key``: the operands'
    :func:`state_key` when the caller has it (the launch then asks CuPy for no stream)."""
    on = key if type(key) is tuple and len(key) > 1 else None
    empty = plan.empty
    if not tuple_op and len(xs) == 1:  # one operand, one output: no generators
        x = xs[0].reshape(-1) if plan.flat else xs[0]
        alloc = plan.alloc
        if alloc is not None:  # the output's memory first, its array built while the kernel runs
            mem = alloc(plan.nbytes)
            ptr = mem.ptr
            if ptr % 16 != plan.out_mis:
                return None
            plan.launch((_buf_at(x, plan.in_off),), (ptr + plan.out_boff,), on)
            return plan.ndarray(plan.shape, acc_dtypes[0], memptr=mem)
        out = empty(plan.shape, dtype=acc_dtypes[0])
        if runtime.misalignment(out) != plan.out_mis:
            return None
        plan.launch((_buf_at(x, plan.in_off),), (_buf_at(out, plan.out_off),), on)
        return out
    if plan.flat:
        xs = [a.reshape(-1) for a in xs]
    outs = [empty(plan.shape, dtype=d) for d in acc_dtypes]
    if runtime.misalignment(outs[0]) != plan.out_mis:
        return None
    plan.launch(tuple(_buf_at(a, plan.in_off) for a in xs),
                tuple(_buf_at(o, plan.out_off) for o in outs), on)
    return tuple(outs) if tuple_op else outs[0]


def remember(key, plan):
    if key is None or plan is None:
        return
    fast_plans()[key] = plan


def replayed(key_fn, tuple_op, xs, acc_dtypes, axis, include_initial, exclusive, reverse,
             deterministic, flatten, out):
    """``(key, result)``: the plan key of a call without ``init`` (with the outputs' layouts
    when ``out`` is given; None when unhashable) and the result of replaying the plan kept
    under it, or None when there is none (or the fresh output is not aligned as planned)."""
    fkey = fast_key(key_fn, tuple_op, xs, acc_dtypes, axis, include_initial, exclusive,
                    reverse, deterministic, flatten)
    if fkey is None:
        return None, None
    if out is None:
        plan = fast_plans().get(fkey)
        return fkey, (None if plan is None else run_fast(plan, xs, acc_dtypes, tuple_op, fkey[-1]))
    okey = out_key(fkey, out, tuple_op)
    plan = fast_plans().get(okey) if okey is not None else None
    return okey, (None if plan is None else run_into(plan, xs, out, tuple_op, fkey[-1]))


def launch(call: ScanCall, xs, outs, flat, fkey, stored_key=None):
    """Plan and launch the scan ``call`` of ``xs`` into ``outs`` (:func:`.plan.launch_scan`),
    keep its plan under ``fkey`` (the call's :func:`fast_key`, None: not replayable) with the
    operands' flattening ``flat``, and, on a GPU, describe it for a later process's first
    call under ``stored_key`` (:mod:`forge_array.runtime.stored`; None: not stored)."""
    plan = launch_scan(call, xs, outs)
    if plan is None or fkey is None:
        return
    plan.flat = flat
    remember(fkey, plan)
    if stored_key is not None and STORES:
        stored.save(stored_key, plan.stored_form(xs[0], outs[0]))
