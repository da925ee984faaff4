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

>>> import numpy as np
>>> from forge_array.kernels.elementwise import map_arrays
>>> def f(a, b):
...     return (a * b + 1.0,)
>>> map_arrays(f, [np.arange(4.0), np.full(4, 2.0)], ("float64",))   # doctest: +SKIP
(array([1., 3., 5., 7.]),)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import intrinsics as fi
from ..runtime import (
    array_module,
    buffer_of,
    compile_kernel,
    data_address,
    device_info,
    element_strides,
    i64,
    launch,
    ptr_t,
    tuning,
)
from ..runtime.caches import Cache
from ..runtime.config import SIMULATE as _SIM
from ..runtime.memory import misalignment
from .reduce import MAX_DIMS, MODE_FLAT, MODE_STRIDED, MODE_VEC, buffer_dtype, collapse, uniform_operands, vector_loads

__all__ = ["make_map_kernel", "map_argtypes", "map_arrays", "map_plan", "MapLaunch", "MAX_DIMS"]

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


def _layout(arrays, outs, uniform):
    lay = [a for k, a in enumerate(arrays) if k not in uniform]
    if not lay:  # every input uniform: one value, written everywhere
        return MODE_FLAT, 1, None, None, 0
    if all(a.flags.c_contiguous for a in lay):
        size = lay[0].dtype.itemsize
        mis = misalignment(outs[0])
        if (size < 16 and all(a.dtype.itemsize == size and misalignment(a) == mis for a in lay)
                and all(o.dtype.itemsize == size and o.dtype.kind != "b" for o in outs)
                and mis % size == 0):
            return MODE_VEC, 1, None, None, ((16 - mis) % 16) // size
        return MODE_FLAT, 1, None, None, 0
    shape, st = collapse(lay[0].shape, [element_strides(a) for a in lay])
    if len(shape) == 1 and all(s[0] == 1 for s in st):
        return MODE_FLAT, 1, None, None, 0
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{len(shape)} dims after collapsing")
    return MODE_STRIDED, len(shape), st, shape, 0


_PLANS = Cache("kernels.elementwise.PLANS")


def _kernel(f, in_dtypes, out_dtypes, mode, ndim, uniform):
    key = (f, in_dtypes, out_dtypes, mode, ndim, uniform)
    kp = _PLANS.get(key)
    if kp is None:
        p = tuning.params("map")
        block = p["block"]
        lead = next((k for k in range(len(in_dtypes)) if k not in uniform), 0)
        vec = 16 // np.dtype(in_dtypes[lead]).itemsize if mode == MODE_VEC else 1
        items = p["items"] if mode == MODE_VEC else 1
        kernel = compile_kernel(make_map_kernel,
                                (f, in_dtypes, out_dtypes, mode, ndim, items, vec, block, uniform),
                                map_argtypes(in_dtypes, out_dtypes, mode, ndim, uniform))
        gmax = max(1, device_info()["sm_count"] * p["blocks_per_sm"])
        kp = _PLANS[key] = (kernel, block, block * items * vec, gmax)
    return kp


_MAX_CACHED = 4096
_MAP_PLANS = Cache("kernels.elementwise.MAP_PLANS", _MAX_CACHED)


def _plan(f, arrays, out_dtypes, out):
    """(kernel, grid, block, tail arguments, bool inputs, bool outputs) of a map launch."""
    n = int(arrays[0].size)
    uniform = uniform_operands(arrays)
    try:
        mode, ndim, strides, cshape, peel = _layout(arrays, out, uniform)
    except ValueError:  # more dims than the strided path takes: the caller gathers first
        return None
    in_dtypes = tuple(a.dtype.str for a in arrays)
    kernel, block, per_block, gmax = _kernel(f, in_dtypes, out_dtypes, mode, ndim, uniform)
    grid = max(1, min(gmax, (n + per_block - 1) // per_block))
    tail = (n, peel)
    if mode == MODE_STRIDED:
        tail += tuple(cshape) + tuple(s for st in strides for s in st)
    return (kernel, grid, block, tail, tuple(a.dtype.kind == "b" for a in arrays),
            tuple(np.dtype(d).kind == "b" for d in out_dtypes))


def _buffer(a, is_bool):
    return buffer_of(a.view(np.uint8) if is_bool else a)


class MapLaunch:
    """A map launch replayed on new arrays of the layouts it was planned for (see
    :func:`map_plan`): ``launch(arrays)`` allocates the outputs, launches, returns them."""

    __slots__ = ("f", "plan", "shape", "dtypes", "empty", "mis")

    def __init__(self, f, plan, shape, dtypes, empty, mis):
        self.f, self.plan, self.shape, self.dtypes = f, plan, shape, dtypes
        self.empty, self.mis = empty, mis

    def launch(self, arrays):
        out = tuple([self.empty(self.shape, dtype=d) for d in self.dtypes])
        kernel, grid, block, tail, in_bool, out_bool = self.plan
        if _SIM:
            if misalignment(out[0]) != self.mis:  # a host allocation of another phase
                return map_arrays(self.f, arrays, self.dtypes, out)
            args = tuple(map(_buffer, arrays, in_bool)) + tuple(map(_buffer, out, out_bool))
        else:
            args = tuple([a.data.ptr for a in arrays]) + tuple([o.data.ptr for o in out])
        launch(kernel, grid, block, args + tail)
        return out


def map_plan(f, arrays, out_dtypes):
    """The :class:`MapLaunch` of ``map_arrays(f, arrays, out_dtypes)`` for arrays of these
    layouts, or None (empty arrays; views that must be gathered first).  Its launch takes
    the arrays' addresses only: the arrays it is given may be the unbroadcast operands of
    ``arrays`` (the same first element), the strides are those of ``arrays``."""
    x0 = arrays[0]
    if x0.size == 0:
        return None
    out_dtypes = tuple(np.dtype(d).str for d in out_dtypes)
    xp = array_module(x0)
    out = tuple(xp.empty(x0.shape, dtype=d) for d in out_dtypes)
    p = _plan(f, list(arrays), out_dtypes, out)
    if p is None:
        return None
    return MapLaunch(f, p, tuple(x0.shape), out_dtypes, xp.empty, misalignment(out[0]))


def map_arrays(f, arrays, out_dtypes, out=None):
    """Run ``f`` over the backend arrays ``arrays`` (one shape: broadcast views are fine)
    in one launch; returns the tuple of new C-contiguous outputs of ``out_dtypes`` (or
    fills ``out``, a tuple of C-contiguous arrays of that shape).  ``f`` returns a tuple of
    ``len(out_dtypes)`` values.  The launch is planned once per layout of the inputs
    (type, dtype, shape, strides, address mod 16 of each) and replayed after."""
    x0 = arrays[0]
    shape = tuple(x0.shape)
    out_dtypes = tuple(np.dtype(d).str for d in out_dtypes)
    fresh = out is None
    if fresh:
        xp = array_module(x0)
        out = tuple(xp.empty(shape, dtype=d) for d in out_dtypes)
    if x0.size == 0:
        return out
    p = None
    if fresh:
        key = (f, out_dtypes, misalignment(out[0])) + tuple(
            (type(a), a.dtype, a.shape, a.strides, data_address(a) & 15) for a in arrays)
        p = _MAP_PLANS.get(key)
        if p is None:
            p = _plan(f, arrays, out_dtypes, out)
            if p is not None:
                _MAP_PLANS[key] = p
    else:
        p = _plan(f, arrays, out_dtypes, out)
    if p is None:  # gather the views first
        uniform = uniform_operands(arrays)
        arrays = [a if k in uniform else a.copy() for k, a in enumerate(arrays)]
        p = _plan(f, arrays, out_dtypes, out)
    kernel, grid, block, tail, in_bool, out_bool = p
    args = tuple(map(_buffer, arrays, in_bool)) + tuple(map(_buffer, out, out_bool)) + tail
    launch(kernel, grid, block, args)
    return out
