"""Scans on the CPU device: one numba-compiled loop per operator and dtypes.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ... import runtime
from ...dispatch.scan import ScanCall
from ...runtime import cpu_cache
from ...runtime.caches import Cache

# --------------------------------------------------------------------------- CPU path


_CPU_FNS = Cache("primitives.scan.cpu.CPU_FNS")


def _cpu_scanner(fn, tuple_op, dtypes):
    key = (fn, tuple_op, dtypes)
    try:
        f = _CPU_FNS.get(key)
    except TypeError:
        key, f = None, None
    if f is not None:
        return f
    K = len(dtypes)
    g = {"njit": numba.njit, "f": numba.njit(getattr(fn, "py_func", fn)), "__name__": __name__}
    for k, d in enumerate(dtypes):
        g[f"T{k}"] = d.type
    ld = ", ".join(f"xs[{k}][b, i]" for k in range(K))
    st = "\n".join(f"    outs[{k}][b, i] = v[{k}]" for k in range(K))
    cast = ", ".join(f"T{k}(r[{k}])" for k in range(K))
    call = "f(a, x)" if tuple_op else "(f(a[0], x[0]),)"
    src = f"""
@njit
def ld(xs, b, i):
    return ({ld},)

@njit
def st(outs, b, i, v):
{st}

@njit
def op(a, x):
    r = {call}
    return ({cast},)

@njit
def scan(xs, outs, init, has_init, shift):
    nb, n = xs[0].shape
    m = outs[0].shape[1]
    for b in range(nb):
        acc = init
        if has_init and shift:
            st(outs, b, 0, acc)
        for i in range(n):
            x = ld(xs, b, i)
            if i == 0 and not has_init:
                acc = x
            else:
                acc = op(acc, x)
            if i + shift < m:
                st(outs, b, i + shift, acc)
"""
    exec(compile(src, "<forge_array.primitives.scan cpu>", "exec"), g)
    # on disk for later processes, keyed by the loop's source, the operator and dtypes
    f = cpu_cache.attach(g["scan"], "scan", src, fn, tuple(d.str for d in dtypes))
    if key is not None:
        _CPU_FNS[key] = f
    return f


def scan_cpu(call: ScanCall, xs, outs):
    """The scan ``call`` of ``xs`` into ``outs`` on the CPU (NumPy arrays; CuPy arrays go
    through the host)."""
    fn, tuple_op, acc_dtypes, axis, init = call.fn, call.tuple_op, call.acc_dtypes, call.axis, call.init
    shift, m, reverse, init_batch = call.shift, call.m, call.reverse, call.init_batch
    on_gpu = runtime.is_cupy_array(xs[0])
    hx = [a.get() if on_gpu else a for a in xs]
    hx = [np.moveaxis(a, axis, -1) for a in hx]
    if reverse:
        hx = [a[..., ::-1] for a in hx]
    bshape = hx[0].shape[:-1]
    n = hx[0].shape[-1]
    nb = math.prod(bshape)
    xs2 = tuple(np.ascontiguousarray(a, dtype=a.dtype).reshape(nb, n) for a in hx)
    res = tuple(np.empty((nb, m), dtype=d) for d in acc_dtypes)
    has_init = init is not None
    iv = init if has_init else tuple(d.type(0) for d in acc_dtypes)
    if init_batch:  # a column of per-scan values, on the host
        iv = tuple((v.get() if on_gpu else np.asarray(v)).reshape(nb, 1) for v in iv)
    from ... import ops

    ufn = {ops.add.fn: np.add, ops.multiply.fn: np.multiply}.get(fn) if not tuple_op else None
    if ufn is not None:
        r = ufn.accumulate(xs2[0], axis=1, dtype=acc_dtypes[0])
        if has_init:
            r = ufn(iv[0], r, dtype=acc_dtypes[0])
            if shift:
                res[0][:, :1] = iv[0]
        res[0][:, shift:] = r[:, : m - shift]
    else:
        xs2 = tuple(a.astype(d, copy=False) for a, d in zip(xs2, acc_dtypes))
        scanner = _cpu_scanner(fn, tuple_op, acc_dtypes)
        with np.errstate(all="ignore"):
            if init_batch:  # a scan per row, each from its own value
                for b in range(nb):
                    scanner(tuple(a[b:b + 1] for a in xs2), tuple(o[b:b + 1] for o in res),
                            tuple(v[b, 0] for v in iv), True, shift)
            else:
                scanner(xs2, res, iv, has_init, shift)
    for o, r in zip(outs, res):
        r = r.reshape(bshape + (m,))
        if reverse:
            r = r[..., ::-1]
        r = np.moveaxis(r, -1, axis)
        if on_gpu:
            o[...] = runtime.cupy().asarray(r)
        else:
            o[...] = r


