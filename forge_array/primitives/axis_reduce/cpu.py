"""Axis reductions on the CPU device: one numba-compiled loop nest per operator and dtypes.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import types as nt

from ... import runtime
from ...dispatch.axis_reduce import AxisReduction, entry_dtype
from ...runtime import cpu_cache
from ...runtime.caches import Cache
from .arguments import first_component, hashable_key, zeros_of

# --------------------------------------------------------------------------- CPU (numba)


def run_cpu(call: AxisReduction, arrays, out):
    """The reduction ``call`` of ``arrays`` into ``out`` on the CPU: NumPy moves the reduced
    axes last; a numba loop reduces each row."""
    f, op, axes, acc, ident, init_v, index = call
    shape = tuple(first_component(arrays[0]).shape)
    ndim = len(shape)
    kept = [d for d in range(ndim) if d not in axes]
    perm = tuple(kept) + tuple(axes)
    R = math.prod(shape[d] for d in kept)
    J = math.prod(shape[d] for d in axes)

    def prep(c):
        return np.ascontiguousarray(np.transpose(np.asarray(c), perm)).reshape(R, J)

    ins = tuple(tuple(prep(c) for c in e) if isinstance(e, tuple) else prep(e) for e in arrays)
    outs = out if isinstance(out, tuple) else (out,)
    res = tuple(np.empty(R, dtype=o.dtype) for o in outs)
    ident_missing = ident is None
    ID = zeros_of(acc) if ident_missing else ident
    fn = _cpu_kernel(f, op, len(ins), index, hashable_key(ID), ID, ident_missing,
                     hashable_key(init_v), init_v, _entry_dtype_key(ins))
    try:
        fn(ins, res if isinstance(out, tuple) else res[0])
    except (numba.core.errors.TypingError, numba.core.errors.UnsupportedError) as exc:
        raise runtime.compile_error(exc, f"axis reduction with operator {op.name}") from exc
    for o, r in zip(outs, res):
        o[...] = r.reshape(o.shape)


def _entry_dtype_key(ins):
    return tuple(str(entry_dtype(e)) for e in ins)


_CPU = Cache("primitives.axis_reduce.cpu.CPU")


def _cpu_kernel(f, op, K, index, id_key, ID, flag, init_key, INIT, dkey):
    key = (f, op, K, index, id_key, flag, init_key, dkey)
    fn = _CPU.get(key)
    if fn is not None:
        return fn
    fj = numba.njit(getattr(f, "py_func", f))
    opj = numba.njit(getattr(op.fn, "py_func", op.fn))
    cast = _cpu_cast(ID)
    has_init = INIT is not None
    INITV = INIT if has_init else ID

    if K == 1:
        @numba.njit
        def elem(ins, r, j):
            return (_ld(ins[0], r, j),)
    elif K == 2:
        @numba.njit
        def elem(ins, r, j):
            return (_ld(ins[0], r, j), _ld(ins[1], r, j))
    else:
        @numba.njit
        def elem(ins, r, j):
            return (_ld(ins[0], r, j), _ld(ins[1], r, j), _ld(ins[2], r, j))

    if index:
        @numba.njit
        def call(e, j):
            return cast(fj(*e, j))
    else:
        @numba.njit
        def call(e, j):
            return cast(fj(*e))

    @numba.njit
    def run(ins, out):
        a0 = ins[0]
        R = _rows(a0)
        J = _cols(a0)
        for r in range(R):
            acc = ID
            have = False
            for j in range(J):
                v = call(elem(ins, r, j), j)
                if flag and not have:
                    acc = v
                    have = True
                else:
                    acc = cast(opj(acc, v))
            if has_init:
                acc = cast(opj(INITV, acc))
            _st(out, r, acc)

    # on disk for later processes, keyed by this module's source, the operators and constants
    _CPU[key] = cpu_cache.attach(run, "axis_reduce", cpu_cache.file_hash(__file__), f, op.fn, K, index,
                                 ID, flag, INIT, dkey)
    return run


def _cpu_cast(ID):
    if isinstance(ID, tuple):
        tys = tuple(numba.from_dtype(v.dtype) for v in ID)
        n = len(tys)
        g = {f"t{k}": t for k, t in enumerate(tys)}
        src = "def cast(v):\n    return (" + "".join(f"t{k}(v[{k}]), " for k in range(n)) + ")\n"
        exec(src, g)
        return numba.njit(g["cast"])
    ty = numba.from_dtype(ID.dtype)

    @numba.njit
    def cast(v):
        return ty(v)

    return cast


def _ld(p, r, j):  # pragma: no cover - replaced by the overload in jitted code
    raise NotImplementedError


def _st(p, r, v):  # pragma: no cover
    raise NotImplementedError


def _rows(p):  # pragma: no cover
    raise NotImplementedError


def _cols(p):  # pragma: no cover
    raise NotImplementedError


def _gen(src, name, g=None):
    g = dict(g or {})
    exec(src, g)
    return g[name]


@numba.extending.overload(_ld)
def _ld_ov(p, r, j):
    if isinstance(p, nt.BaseTuple):
        n = len(p)
        return _gen("def impl(p, r, j):\n    return (" + "".join(f"p[{k}][r, j], " for k in range(n))
                    + ")\n", "impl")
    return lambda p, r, j: p[r, j]


@numba.extending.overload(_st)
def _st_ov(p, r, v):
    if isinstance(p, nt.BaseTuple):
        n = len(p)
        return _gen("def impl(p, r, v):\n" + "".join(f"    p[{k}][r] = v[{k}]\n" for k in range(n)),
                    "impl")

    def impl(p, r, v):
        p[r] = v

    return impl


@numba.extending.overload(_rows)
def _rows_ov(p):
    if isinstance(p, nt.BaseTuple):
        return lambda p: p[0].shape[0]
    return lambda p: p.shape[0]


@numba.extending.overload(_cols)
def _cols_ov(p):
    if isinstance(p, nt.BaseTuple):
        return lambda p: p[0].shape[1]
    return lambda p: p.shape[1]
