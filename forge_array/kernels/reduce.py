"""Full reduction in one launch: map, reduce every element, write one value.

The algorithm (as CUB's single-pass reduce, KernelForge's mapreduce):

1. A fixed grid of a few blocks per SM.  For a *commutative* operator every thread walks
   the input grid-stride; contiguous inputs are read with 128-bit loads (``vload``) after a
   host-computed peel of ``peel`` scalar elements that brings the address to 16 bytes,
   several vectors per iteration (``items``), combined in a balanced tree (pairwise-like
   accuracy for floats) before entering the thread's accumulator; a scalar tail follows.
   Views of any strides go through a strided path (up to ``MAX_DIMS`` collapsed dims, the
   flat index decomposed in the kernel): one launch, no copy.  For a *non-commutative*
   operator each thread owns a contiguous chunk instead, so that every combination keeps
   the operands in order.
2. The map ``f`` is applied to each element (or to the tuple of elements of several
   arrays: mapreduce), optionally with the element's flat index (argmax / argmin), and the
   result is cast to the accumulator type.
3. Warp-shuffle and block reduction through ``intrinsics.make_block_reduce``.
4. Each block writes its partial to temporary storage, fences, and takes a ticket with
   ``atomic_add``; the last block to arrive reduces the partials in block order (so results
   are identical run to run: no float atomics), applies ``init`` and the finishing function
   ``post`` (mean = sum / n, var = M2 / (n - correction), argmax = index, ...), writes the
   result and resets the ticket to 0, so the counter is reused without a memset.

Operators without an identity (generic user operators) carry a validity flag in their
state: ``(valid, components...)``.

The kernel source is generated per specialisation (number of arrays, tuple structure,
mode, unroll) by :func:`make_reduce_kernel`, a factory compiled by
:func:`forge_array.runtime.compile_kernel`; :mod:`forge_array.dispatch.reduce` plans (layout, grid,
scratch) and launches it.

Example (simulator or GPU; the primitives in :mod:`forge_array.primitives.reductions` are the
public way in):

>>> import numpy as np
>>> from forge_array import ops
>>> from forge_array.kernels.reduce import ReduceSpec
>>> from forge_array.dispatch.reduce import full_reduce
>>> spec = ReduceSpec(op=ops.add.fn, acc_dtypes=("float64",), identity=(0.0,))
>>> full_reduce(spec, [np.arange(10.0)])   # doctest: +SKIP
(array([45.]),)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import intrinsics as fi
from .reduce_spec import (
    MAX_DIMS,
    MODE_FLAT,
    MODE_STRIDED,
    MODE_VEC,
    ReduceSpec,
    buffer_dtype,
    kernel_argtypes,
    spec_name,
)

__all__ = ["ReduceSpec", "make_reduce_kernel", "kernel_argtypes", "MAX_DIMS", "MODE_VEC", "MODE_FLAT",
           "MODE_STRIDED", "buffer_dtype", "vector_loads", "spec_name"]

# --------------------------------------------------------------------------- code generation


def _tuple_src(items):
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _cast_src(names, acc_is_tuple, expr):
    """Source casting ``expr`` (the map's or operator's result) to the accumulator types."""
    if not acc_is_tuple:
        return f"{names[0]}({expr})"
    return _tuple_src(f"{n}(_r[{k}])" for k, n in enumerate(names))


def _is_bool(dt):
    return np.dtype(dt).kind == "b"


def _store_src(dt, expr):
    return f"(_u8(1) if {expr} else _u8(0))" if _is_bool(dt) else expr


def _load_src(dt, expr):
    return f"({expr} != 0)" if _is_bool(dt) else expr


def vector_loads(count, K, uniform, vec, ind):
    """Source lines of the vectorised grid-stride loops: ``count`` 16-byte loads of each
    array ``x{k}`` not in ``uniform`` (``_v{k}_{u}``, at element ``_b{u}``), strided by the
    grid from vector ``j``."""
    out = []
    for u in range(count):
        out.append(ind + f"_b{u} = peel + (j + {u} * gs) * {vec}")
        for k in range(K):
            if k not in uniform:
                out.append(ind + f"_v{k}_{u} = fi.vload(x{k}, _b{u})")
    return out


def _build_source(spec, in_dtypes, mode, ndim, items, vec, block, uniform=()):
    """Python source of the kernel and its device helpers for one specialisation.
    ``uniform``: indices of the arrays that hold one value for every element (broadcast
    scalars, e.g. a reduction's result feeding a map): read once, outside the layout."""
    K = len(in_dtypes)
    A = len(spec.acc_dtypes)
    flags = spec.identity is None
    struct = spec.struct if spec.struct is not None else (0,) * K
    lines = []
    emit = lines.append

    # ---- element -> state: elem(a0, ..., a{K-1}, idx)
    args = [f"a{k}" for k in range(K)]
    operands = []
    pos = 0
    for s in struct:
        if s == 0:
            operands.append(args[pos])
            pos += 1
        else:
            operands.append(_tuple_src(args[pos:pos + s]))
            pos += s
    if spec.f is None:
        mapped = operands[0] if len(operands) == 1 else _tuple_src(operands)
    else:
        call_args = operands + (["idx"] if spec.with_index else [])
        mapped = f"_f({', '.join(call_args)})"
    emit(f"def _elem({', '.join(args + ['idx'])}):")
    emit(f"    _r = {mapped}")
    cast = _cast_src([f"_A{k}" for k in range(A)], spec.acc_tuple, "_r")
    if flags:
        if spec.acc_tuple:
            emit(f"    _c = {cast}")
            emit("    return " + _tuple_src(["True"] + [f"_c[{k}]" for k in range(A)]))
        else:
            emit(f"    return (True, {cast})")
    else:
        emit(f"    return {cast}")

    # ---- state op
    emit("def _sop(a, b):")
    if not flags:
        emit("    _r = _op(a, b)")
        emit(f"    return {_cast_src([f'_A{k}' for k in range(A)], spec.acc_tuple, '_r')}")
    else:
        if spec.acc_tuple:
            va = _tuple_src(f"a[{k + 1}]" for k in range(A))
            vb = _tuple_src(f"b[{k + 1}]" for k in range(A))
        else:
            va, vb = "a[1]", "b[1]"
        emit("    if not a[0]:")
        emit("        return b")
        emit("    if not b[0]:")
        emit("        return a")
        emit(f"    _r = _op({va}, {vb})")
        if spec.acc_tuple:
            emit(f"    _c = {_cast_src([f'_A{k}' for k in range(A)], True, '_r')}")
            emit("    return " + _tuple_src(["True"] + [f"_c[{k}]" for k in range(A)]))
        else:
            emit("    return (True, _A0(_r))")

    # ---- identity state
    if flags:
        ident = _tuple_src(["False"] + [f"_A{k}(0)" for k in range(A)])
    elif spec.acc_tuple:
        ident = _tuple_src(f"_A{k}(_ID[{k}])" for k in range(A))
    else:
        ident = "_A0(_ID[0])"

    # ---- the kernel signature
    params = [f"x{k}" for k in range(K)] + ["n", "peel"]
    if mode == MODE_STRIDED:
        params += [f"sh{d}" for d in range(ndim)]
        params += [f"st{k}_{d}" for k in range(K) for d in range(ndim) if k not in uniform]
    params += [f"p{k}" for k in range(A)] + ["pf", "ticket"]
    out_dtypes = spec.out_dtypes or spec.acc_dtypes
    O = len(out_dtypes)
    params += [f"o{k}" for k in range(O)]
    if spec.has_init:
        params += [f"i{k}" for k in range(A)]
    params += ["param"]

    def offsets(idx, tag):
        """Lines computing o_{k}{tag} (element offsets of each array) for flat index idx."""
        out = []
        if mode != MODE_STRIDED:
            return out, [idx] * K
        if ndim == 1:
            return out, [None if k in uniform else f"({idx}) * st{k}_0" for k in range(K)]
        out.append(f"_q{tag} = {idx}")
        for d in range(ndim - 1, 0, -1):
            out.append(f"_c{tag}_{d} = _q{tag} % sh{d}")
            out.append(f"_q{tag} = _q{tag} // sh{d}")
        coords = [f"_q{tag}"] + [f"_c{tag}_{d}" for d in range(1, ndim)]
        offs = [None if k in uniform else " + ".join(f"{coords[d]} * st{k}_{d}" for d in range(ndim))
                for k in range(K)]
        return out, offs

    def at(k, i):
        """Source of array k's element at offset i."""
        return f"_uniform{k}" if k in uniform else f"x{k}[{i}]"

    def elem_at(idx, tag, ind):
        pre, offs = offsets(idx, tag)
        call = f"_elem({', '.join(at(k, offs[k]) for k in range(K))}, {idx})"
        return [ind + s for s in pre], call

    def tree(names):
        """Balanced pairwise combination of state expressions; returns (lines, expr)."""
        out = []
        level = list(names)
        t = 0
        while len(level) > 1:
            nxt = []
            for a in range(0, len(level) - 1, 2):
                out.append(f"_t{t} = _sop({level[a]}, {level[a + 1]})")
                nxt.append(f"_t{t}")
                t += 1
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return out, level[0]

    emit(f"def reduce_kernel({', '.join(params)}):")
    I = "    "
    emit(I + "tid = cuda.threadIdx.x")
    emit(I + "bid = cuda.blockIdx.x")
    emit(I + "nb = cuda.gridDim.x")
    emit(I + f"g = bid * {block} + tid")
    emit(I + f"gs = nb * {block}")
    emit(I + f"acc = {ident}")
    for k in uniform:
        emit(I + f"_uniform{k} = x{k}[0]")

    if not spec.commutative:
        # chunked: thread g owns [g*c, (g+1)*c), in order
        emit(I + "c = (n + gs - 1) // gs")
        emit(I + "lo = g * c")
        emit(I + "hi = min(lo + c, n)")
        emit(I + "i = lo")
        emit(I + "while i < hi:")
        pre, call = elem_at("i", "a", I * 2)
        lines.extend(pre)
        emit(I * 2 + f"acc = _sop(acc, {call})")
        emit(I * 2 + "i += 1")
    elif mode == MODE_VEC:
        # head: peel scalar elements to reach a 16-byte boundary
        emit(I + "if g < peel and g < n:")
        emit(I * 2 + f"acc = _sop(acc, _elem({', '.join(at(k, 'g') for k in range(K))}, g))")
        emit(I + "m = n - peel")
        emit(I + "if m < 0:")
        emit(I * 2 + "m = 0")
        emit(I + f"nvec = m // {vec}")
        emit(I + "j = g")
        # unrolled main loop: `items` vectors per array, tree-combined
        emit(I + f"while j + {items - 1} * gs < nvec:")
        names = []
        lines.extend(vector_loads(items, K, uniform, vec, I * 2))
        for u in range(items):
            for lane in range(vec):
                emit(I * 2 + f"_e{u}_{lane} = _elem("
                     + ", ".join(f"_uniform{k}" if k in uniform else f"_v{k}_{u}[{lane}]" for k in range(K))
                     + f", _b{u} + {lane})")
                names.append(f"_e{u}_{lane}")
        tl, te = tree(names)
        for s in tl:
            emit(I * 2 + s)
        emit(I * 2 + f"acc = _sop(acc, {te})")
        emit(I * 2 + f"j += {items} * gs")
        # remaining single vectors
        emit(I + "while j < nvec:")
        emit(I * 2 + f"_b = peel + j * {vec}")
        for k in range(K):
            if k not in uniform:
                emit(I * 2 + f"_w{k} = fi.vload(x{k}, _b)")
        names = []
        for lane in range(vec):
            emit(I * 2 + f"_f{lane} = _elem("
                 + ", ".join(f"_uniform{k}" if k in uniform else f"_w{k}[{lane}]" for k in range(K))
                 + f", _b + {lane})")
            names.append(f"_f{lane}")
        tl, te = tree(names)
        for s in tl:
            emit(I * 2 + s)
        emit(I * 2 + f"acc = _sop(acc, {te})")
        emit(I * 2 + "j += gs")
        # tail
        emit(I + f"t = peel + nvec * {vec} + g")
        emit(I + "if t < n:")
        emit(I * 2 + f"acc = _sop(acc, _elem({', '.join(at(k, 't') for k in range(K))}, t))")
    else:
        # flat or strided, grid-stride with `items` independent loads per iteration
        emit(I + "j = g")
        emit(I + f"while j + {items - 1} * gs < n:")
        names = []
        for u in range(items):
            emit(I * 2 + f"_i{u} = j + {u} * gs")
            pre, call = elem_at(f"_i{u}", f"u{u}", I * 2)
            lines.extend(pre)
            emit(I * 2 + f"_e{u} = {call}")
            names.append(f"_e{u}")
        tl, te = tree(names)
        for s in tl:
            emit(I * 2 + s)
        emit(I * 2 + f"acc = _sop(acc, {te})")
        emit(I * 2 + f"j += {items} * gs")
        emit(I + "while j < n:")
        pre, call = elem_at("j", "r", I * 2)
        lines.extend(pre)
        emit(I * 2 + f"acc = _sop(acc, {call})")
        emit(I * 2 + "j += gs")

    # ---- block reduce, partials, ticket
    comps = ["_s"] if (A == 1 and not flags and not spec.acc_tuple) else None
    emit(I + "_s = _block_reduce(acc)")
    emit(I + "last = cuda.shared.array(1, _i32)")
    emit(I + "if tid == 0:")
    if flags:
        emit(I * 2 + "pf[bid] = 1 if _s[0] else 0")
        for k in range(A):
            emit(I * 2 + f"p{k}[bid] = {_store_src(spec.acc_dtypes[k], f'_s[{k + 1}]')}")
    elif comps:
        emit(I * 2 + f"p0[bid] = {_store_src(spec.acc_dtypes[0], '_s')}")
    else:
        for k in range(A):
            emit(I * 2 + f"p{k}[bid] = {_store_src(spec.acc_dtypes[k], f'_s[{k}]')}")
    emit(I * 2 + "fi.fence_device()")
    emit(I * 2 + "_tk = fi.atomic_add(ticket, 0, _u32(1))")
    emit(I * 2 + "last[0] = 1 if _tk == _u32(nb - 1) else 0")
    emit(I + "cuda.syncthreads()")
    emit(I + "if last[0] == 0:")
    emit(I * 2 + "return")
    emit(I + "fi.fence_device()")
    emit(I + f"c2 = (nb + {block - 1}) // {block}")
    emit(I + "b = tid * c2")
    emit(I + "bh = min(b + c2, nb)")
    emit(I + f"acc = {ident}")
    emit(I + "while b < bh:")
    pl = [_load_src(spec.acc_dtypes[k], f"p{k}[b]") for k in range(A)]
    if flags:
        emit(I * 2 + f"acc = _sop(acc, (pf[b] != 0, {', '.join(pl)}))")
    elif comps:
        emit(I * 2 + f"acc = _sop(acc, {pl[0]})")
    else:
        emit(I * 2 + f"acc = _sop(acc, {_tuple_src(pl)})")
    emit(I * 2 + "b += 1")
    emit(I + "_s = _block_reduce(acc)")
    emit(I + "if tid == 0:")
    emit(I * 2 + "ticket[0] = _u32(0)")
    if flags:
        val = _tuple_src(f"_s[{k + 1}]" for k in range(A)) if spec.acc_tuple else "_s[1]"
    else:
        val = "_s"
    emit(I * 2 + f"_v = {val}")
    if spec.has_init:
        il = [_load_src(spec.acc_dtypes[k], f"i{k}[0]") for k in range(A)]
        init = _tuple_src(il) if spec.acc_tuple else il[0]
        emit(I * 2 + f"_r = _op({init}, _v)")
        emit(I * 2 + f"_v = {_cast_src([f'_A{k}' for k in range(A)], spec.acc_tuple, '_r')}")
    if spec.post is not None:
        emit(I * 2 + "_v = _post(_v, param)")
    if spec.out_tuple or (spec.post is None and spec.acc_tuple):
        for k in range(O):
            emit(I * 2 + f"o{k}[0] = {_store_src(out_dtypes[k], f'_O{k}(_v[{k}])')}")
    else:
        emit(I * 2 + f"o0[0] = {_store_src(out_dtypes[0], '_O0(_v)')}")
    return "\n".join(lines) + "\n", params


def make_reduce_kernel(spec, in_dtypes, mode, ndim, items, vec, block, uniform=()):
    """Kernel factory: the full-reduction kernel for ``spec`` on arrays of ``in_dtypes``
    (see the module docstring); ``mode`` is ``"vec"``, ``"flat"`` or ``"strided"``.

    >>> from forge_array import ops
    >>> spec = ReduceSpec(op=ops.add.fn, acc_dtypes=("float32",), identity=(0.0,))
    >>> callable(make_reduce_kernel(spec, ("float32",), "vec", 1, 2, 4, 64))
    True
    """
    src, _ = _build_source(spec, in_dtypes, mode, ndim, items, vec, block, uniform)
    A = len(spec.acc_dtypes)
    out_dtypes = spec.out_dtypes or spec.acc_dtypes
    flags = spec.identity is None
    g = {"cuda": cuda, "fi": fi, "min": min, "_i32": np.int32, "_u32": np.uint32,
         "_u8": np.uint8}
    for k, d in enumerate(spec.acc_dtypes):
        g[f"_A{k}"] = np.dtype(d).type
    for k, d in enumerate(out_dtypes):
        g[f"_O{k}"] = np.dtype(d).type
    if not flags:
        g["_ID"] = tuple(spec.identity)
    dev = cuda.jit(device=True)
    g["_op"] = dev(spec.op)
    if spec.f is not None:
        g["_f"] = dev(spec.f)
    if spec.post is not None:
        g["_post"] = dev(spec.post)
    loc: dict = {}
    exec(compile(src, f"<forge_array reduce kernel {spec_name(spec)}>", "exec"), g, loc)
    g["_elem"] = dev(loc["_elem"])
    sop = dev(loc["_sop"])
    g["_sop"] = sop
    acc_np = [np.dtype(d) for d in spec.acc_dtypes]
    if flags:
        ttype = (np.dtype("bool"),) + tuple(acc_np)
    elif spec.acc_tuple:
        ttype = tuple(acc_np)
    else:
        ttype = acc_np[0]
    g["_block_reduce"] = fi.make_block_reduce(sop, block, ttype)
    del A
    return loc["reduce_kernel"]
