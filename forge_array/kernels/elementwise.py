"""Element-wise map in one launch: ``out_q[i] = f(x_0[i], ..., x_{K-1}[i])[q]``.

The kernel behind materialised fused expressions (:mod:`forge_array.fusion`): every input
is read once and every output written once, however many steps ``f`` has.

- Contiguous inputs and outputs of one item size and one 16-byte phase: grid-stride over
  128-bit vectors (``vload`` / ``vstore``), ``items`` vectors per thread in flight, a
  scalar head that brings the addresses to 16 bytes and a scalar tail.
- Anything else (views of any strides, mixed item sizes): grid-stride over the C-order
  flat index, decomposed into up to :data:`MAX_DIMS` collapsed dimensions per input; the
  outputs are contiguous.
- *Uniform* inputs (every stride 0: a broadcast scalar, such as a reduction's result
  feeding a map) are read once per thread, outside the layout.

Outputs of dtype bool are stored as uint8 (numba cannot store an i1 through a bool
pointer); bool inputs are read as uint8 and compared with 0.

The launch is planned and replayed by :mod:`forge_array.dispatch.elementwise`:

>>> import numpy as np
>>> from forge_array.dispatch.elementwise import map_arrays
>>> def f(a, b):
...     return (a * b + 1.0,)
>>> map_arrays(f, [np.arange(4.0), np.full(4, 2.0)], ("float64",))   # doctest: +SKIP
(array([1., 3., 5., 7.]),)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import intrinsics as fi
from ..runtime import i64, ptr_t
from .reduce import MAX_DIMS, MODE_FLAT, MODE_STRIDED, MODE_VEC, buffer_dtype, vector_loads

#: the map kernel's modes are the reduction kernel's (contiguous 128-bit, contiguous scalar,
#: strided up to MAX_DIMS collapsed dims)
__all__ = ["make_map_kernel", "map_argtypes", "MAX_DIMS", "MODE_VEC", "MODE_FLAT", "MODE_STRIDED"]

def _build_source(K, out_dtypes, in_bool, mode, ndim, items, vec, block, uniform):
    O = len(out_dtypes)
    lines = []
    emit = lines.append
    params = [f"x{k}" for k in range(K)] + [f"o{q}" for q in range(O)] + ["n", "peel"]
    if mode == MODE_STRIDED:
        params += [f"sh{d}" for d in range(ndim)]
        params += [f"st{k}_{d}" for k in range(K) for d in range(ndim) if k not in uniform]

    def val(k, src):
        return f"({src} != 0)" if in_bool[k] else src

    def store(q, dst, expr):
        if np.dtype(out_dtypes[q]).kind == "b":
            expr = f"(_u8(1) if {expr} else _u8(0))"
        else:
            expr = f"_O{q}({expr})"
        return f"{dst} = {expr}"

    def offs(idx, tag):
        pre = []
        if mode != MODE_STRIDED:
            return pre, {k: idx for k in range(K)}
        pre.append(f"_q{tag} = {idx}")
        for d in range(ndim - 1, 0, -1):
            pre.append(f"_c{tag}_{d} = _q{tag} % sh{d}")
            pre.append(f"_q{tag} = _q{tag} // sh{d}")
        coords = [f"_q{tag}"] + [f"_c{tag}_{d}" for d in range(1, ndim)]
        return pre, {k: " + ".join(f"{coords[d]} * st{k}_{d}" for d in range(ndim))
                     for k in range(K) if k not in uniform}

    def scalar_at(idx, tag, ind):
        pre, off = offs(idx, tag)
        args = [f"_uniform{k}" if k in uniform else val(k, f"x{k}[{off[k]}]") for k in range(K)]
        out = [ind + s for s in pre]
        out.append(ind + f"_r{tag} = _f({', '.join(args)})")
        out += [ind + store(q, f"o{q}[{idx}]", f"_r{tag}[{q}]") for q in range(O)]
        return out

    emit(f"def map_kernel({', '.join(params)}):")
    I = "    "
    emit(I + f"g = cuda.blockIdx.x * {block} + cuda.threadIdx.x")
    emit(I + f"gs = cuda.gridDim.x * {block}")
    for k in uniform:
        emit(I + f"_uniform{k} = {val(k, f'x{k}[0]')}")
    if mode == MODE_VEC:
        emit(I + "if g < peel and g < n:")
        lines.extend(scalar_at("g", "h", I * 2))
        emit(I + "m = n - peel")
        emit(I + "if m < 0:")
        emit(I * 2 + "m = 0")
        emit(I + f"nvec = m // {vec}")
        emit(I + "j = g")
        loops = [(items, f"j + {items - 1} * gs < nvec")]
        if items > 1:  # the vectors left over, one at a time
            loops.append((1, "j < nvec"))
        for u_count, cond in loops:
            emit(I + f"while {cond}:")
            lines.extend(vector_loads(u_count, K, uniform, vec, I * 2))
            for u in range(u_count):
                for lane in range(vec):
                    args = [f"_uniform{k}" if k in uniform else val(k, f"_v{k}_{u}[{lane}]")
                            for k in range(K)]
                    emit(I * 2 + f"_r{u}_{lane} = _f({', '.join(args)})")
                for q in range(O):
                    vals = ", ".join(f"_O{q}(_r{u}_{lane}[{q}])" for lane in range(vec))
                    emit(I * 2 + f"fi.vstore(o{q}, _b{u}, ({vals},))")
            emit(I * 2 + f"j += {u_count} * gs")
        emit(I + f"t = peel + nvec * {vec} + g")
        emit(I + "if t < n:")
        lines.extend(scalar_at("t", "t", I * 2))
    else:
        emit(I + "j = g")
        emit(I + "while j < n:")
        lines.extend(scalar_at("j", "j", I * 2))
        emit(I * 2 + "j += gs")
    return "\n".join(lines) + "\n"


def make_map_kernel(f, in_dtypes, out_dtypes, mode, ndim, items, vec, block, uniform=()):
    """Kernel factory: the map kernel of ``f`` (a Python function of ``len(in_dtypes)``
    element values returning a tuple of ``len(out_dtypes)`` values) for one layout.

    >>> def f(a):
    ...     return (a + 1.0,)
    >>> callable(make_map_kernel(f, ("float32",), ("float32",), "vec", 1, 2, 4, 64))
    True
    """
    in_bool = tuple(np.dtype(d).kind == "b" for d in in_dtypes)
    src = _build_source(len(in_dtypes), out_dtypes, in_bool, mode, ndim, items, vec, block,
                        uniform)
    g = {"cuda": cuda, "fi": fi, "_u8": np.uint8}
    for q, d in enumerate(out_dtypes):
        g[f"_O{q}"] = np.dtype(d).type
    g["_f"] = cuda.jit(device=True)(f)
    loc: dict = {}
    name = getattr(f, "__qualname__", "f")
    exec(compile(src, f"<forge_array map kernel {name}>", "exec"), g, loc)
    return loc["map_kernel"]


def map_argtypes(in_dtypes, out_dtypes, mode, ndim, uniform=()):
    """numba types of the map kernel's arguments (bool memory is uint8).

    >>> len(map_argtypes(("float32", "float32"), ("float32",), "vec", 1))
    5
    """
    K = len(in_dtypes)
    a = [ptr_t(buffer_dtype(d)) for d in in_dtypes]
    a += [ptr_t(buffer_dtype(d)) for d in out_dtypes] + [i64, i64]
    if mode == MODE_STRIDED:
        a += [i64] * (ndim + (K - len(uniform)) * ndim)
    return tuple(a)
