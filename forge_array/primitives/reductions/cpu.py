"""Generic reductions on the CPU device: one numba-compiled loop per map, operator and dtypes.
"""
from __future__ import annotations

import numba
import numpy as np

from ...runtime import cpu_cache
from ...runtime.caches import Cache
from ...runtime.compiler import compile_error
from .arguments import identity_of, reshape_outputs

# --------------------------------------------------------------------------- CPU (numba)

_CPU = Cache("primitives.reductions.cpu.CPU")


def _cpu_loop(f, opfn, struct, acc, is_tuple, K, flags):
    """An njit function ``(x0, ..., x{K-1}, out0, ...)`` over 2-D (M, R) inputs reducing each
    row into out[m] (valid-flag array first when there is no identity)."""
    key = (f, opfn, struct, acc, is_tuple, K)
    fn = _CPU.get(key)
    if fn is not None:
        return fn
    A = len(acc)
    args = [f"x{k}" for k in range(K)]
    operands, pos = [], 0
    for s in struct:
        if s == 0:
            operands.append(f"x{pos}[m, i]")
            pos += 1
        else:
            operands.append("(" + ", ".join(f"x{p}[m, i]" for p in range(pos, pos + s)) + ",)")
            pos += s
    if f is None:
        mapped = operands[0] if len(operands) == 1 else "(" + ", ".join(operands) + ",)"
    else:
        mapped = f"_f({', '.join(operands)})"

    def cast(e):
        if not is_tuple:
            return f"_A0({e})"
        return "(" + ", ".join(f"_A{k}({e}[{k}])" for k in range(A)) + ",)"

    outs = [f"o{k}" for k in range(A)]
    src = [f"def _loop({', '.join(args + outs)}, ok):",
           "    M = x0.shape[0]",
           "    R = x0.shape[1]",
           "    for m in range(M):",
           "        if R == 0:",
           "            ok[m] = False",
           "            continue",
           "        i = 0",
           f"        acc = {cast(mapped)}",
           "        for i in range(1, R):",
           f"            _v = {cast(mapped)}",
           f"            acc = {cast('_op(acc, _v)')}",
           "        ok[m] = True"]
    if is_tuple:
        src += [f"        o{k}[m] = acc[{k}]" for k in range(A)]
    else:
        src += ["        o0[m] = acc"]
    g = {"_op": numba.njit(getattr(opfn, "py_func", opfn)), "__name__": __name__}
    if f is not None:
        g["_f"] = numba.njit(getattr(f, "py_func", f))
    for k, d in enumerate(acc):
        g[f"_A{k}"] = np.dtype(d).type
    loc: dict = {}
    text = "\n".join(src) + "\n"
    exec(compile(text, "<forge_array cpu reduce>", "exec"), g, loc)
    # on disk for later processes, keyed by the loop's source, the operators and dtypes
    fn = _CPU[key] = cpu_cache.cached_njit(loc["_loop"], ("reduce", text, f, opfn, acc))
    return fn


def cpu_mapreduce(f, op, flat, struct, axes, acc, is_tuple, init, keepdims):
    x0 = flat[0]
    nd = x0.ndim
    keep = [d for d in range(nd) if d not in axes]
    out_shape = tuple(x0.shape[d] for d in keep)
    M = int(np.prod(out_shape, dtype=np.int64)) if keep else 1
    R = int(np.prod([x0.shape[d] for d in axes], dtype=np.int64)) if axes else 1
    mats = [np.ascontiguousarray(np.transpose(np.asarray(a), keep + list(axes))).reshape(M, R)
            for a in flat]
    outs = [np.empty(M, dtype=d) for d in acc]
    ok = np.empty(M, dtype=np.bool_)
    loop = _cpu_loop(f, op.fn, struct, acc, is_tuple, len(flat), False)
    try:
        loop(*mats, *outs, ok)
    except (numba.core.errors.NumbaError, TypeError) as exc:
        raise compile_error(exc, f"reduction with operator {op.name}") from exc
    ident = identity_of(op, acc, is_tuple)
    if not ok.all():
        if ident is None and init is None:
            raise ValueError(f"reduction of an empty sequence with operator {op.name}, which "
                             "has no identity: pass init")
        fill = init if init is not None else ident
        for o, v in zip(outs, fill):
            o[~ok] = v
        if init is not None:  # init applied below for the non-empty rows only
            okm = ok
        else:
            okm = None
    else:
        okm = ok
    if init is not None:
        _apply_init_cpu(op, outs, init, okm, is_tuple, acc)
    shape = _keep_shape(x0.shape, axes) if keepdims else out_shape
    return reshape_outputs(outs, is_tuple, shape)


def _apply_init_cpu(op, outs, init, okm, is_tuple, acc):
    fn = op.fn
    for m in range(outs[0].shape[0]):
        if okm is not None and not okm[m]:
            continue
        v = tuple(o[m] for o in outs) if is_tuple else outs[0][m]
        r = fn(tuple(init) if is_tuple else init[0], v)
        r = r if is_tuple else (r,)
        for o, x, d in zip(outs, r, acc):
            o[m] = np.asarray(x).astype(d)


def _keep_shape(shape, axes):
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


