"""Row programs in one launch: reductions along the last axis, the element-wise steps that
use their results, and the outputs, with each row read once.

A *row program* over ``n`` rows of ``p`` elements (``p`` at most :data:`MAX_ROW`) runs in
*rounds*: round ``k`` reduces, for every row, the values of its terms' expression (a
function of the leaves' elements and of the per-row results of earlier rounds) with the
terms' combined operator; then the outputs are written: *full* outputs of ``(n, p)``
elements (an expression of the leaves and of every round's results, such as ``exp(x -
max) / sum``), *row* outputs of one value per row (``log(sum) + max``), and the rounds'
results themselves.  Row softmax is two rounds and one full output: the row is loaded
into registers once, reduced twice and written once (one read and one write of ``x``
instead of three reads and one write).

One block of ``block`` threads per row (grid-stride over rows); thread ``t`` holds the
row's elements ``t, t + block, ...`` (``items`` of them, loaded with clamped indices so
every load is valid, masked in the reductions) of every leaf in registers; each round is
one block-wide reduction (:func:`forge_array.intrinsics.make_block_reduce`) whose result
every thread gets.  Leaves are strided 2-D views (element strides ``(s0, s1)``, 0 for a
broadcast dimension); bool memory is read and written as uint8.

>>> import numpy as np
>>> callable(make_row_kernel((), None, None, ("float32",), (), 64, 2))
True
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from .. import intrinsics as fi
from ..runtime import i64, ptr_t
from .reduce import buffer_dtype

__all__ = ["make_row_kernel", "row_argtypes", "row_shape", "MAX_ROW", "MAX_ROW_VALUES", "MAX_LEAVES"]

#: longest row a row program takes (elements)
MAX_ROW = 16384
#: most register-held values per thread (items times the leaves read along the row)
MAX_ROW_VALUES = 64
#: most leaves (arrays read) of a row program
MAX_LEAVES = 8


def row_shape(p, nrow_leaves, block_max=1024, target=128):
    """``(block, items)`` for rows of ``p`` elements with ``nrow_leaves`` leaves read along
    the row: ``target`` threads (fewer for short rows, a multiple of 32, up to
    ``block_max``) and the fewest items (a power of two) covering the row; None when the
    row does not fit in registers.

    >>> row_shape(1000, 1), row_shape(20, 2), row_shape(10000, 1), row_shape(10**6, 1)
    ((128, 8), (32, 1), (1024, 16), None)
    """
    if p > MAX_ROW:
        return None
    block = min(target, max(32, 1 << max(0, (p - 1).bit_length())))
    block = -(-block // 32) * 32
    items = 1
    while block * items < p:
        if items < 16:
            items *= 2
        elif block < block_max:
            block = min(block_max, block * 2)
        else:
            return None
    if items * max(1, nrow_leaves) > MAX_ROW_VALUES:
        return None
    return block, items


def _lit(v, dt):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return repr(bool(v))
    if dt.kind == "f":
        f = float(v)
        return f"float('{f}')" if math.isinf(f) or math.isnan(f) else repr(f)
    return repr(int(v))


def _source(rounds, outs, row_outs, leaf_dtypes, red_dtypes, block, items):
    """The kernel's source: see :func:`make_row_kernel` for the arguments."""
    L, R = len(leaf_dtypes), len(red_dtypes)
    O = len(outs[2]) if outs else 0
    Q = len(row_outs[2]) if row_outs else 0
    in_bool = [np.dtype(d).kind == "b" for d in leaf_dtypes]
    params = ([f"l{k}" for k in range(L)] + [f"o{q}" for q in range(O)]
              + [f"q{q}" for q in range(Q)] + [f"r{m}" for m in range(R)] + ["n", "p"]
              + [f"a{k}_{d}" for k in range(L) for d in (0, 1)])
    lines = [f"def row_kernel({', '.join(params)}):"]
    emit = lines.append
    I = "    "
    emit(I + "tid = cuda.threadIdx.x")
    emit(I + "row = np.int64(cuda.blockIdx.x)")
    for i in range(items):
        emit(I + f"j{i} = np.int64(tid + {i * block})")
        emit(I + f"c{i} = j{i} if j{i} < p else p - 1")
    emit(I + "while row < n:")
    I2 = I * 2
    used = sorted({g for rd in rounds for g in rd[5] if g >= 0}
                  | ({g for g in outs[1] if g >= 0} if outs else set()))
    for k in range(L):
        emit(I2 + f"b{k} = row * a{k}_0")
    for k in used:
        for i in range(items):
            v = f"l{k}[b{k} + c{i} * a{k}_1]"
            emit(I2 + f"x{k}_{i} = {'(' + v + ' != 0)' if in_bool[k] else v}")
    row_used = sorted({g for g in row_outs[1] if g >= 0}) if row_outs else []
    for k in row_used:
        v = f"l{k}[b{k}]"
        emit(I2 + f"y{k} = {'(' + v + ' != 0)' if in_bool[k] else v}")

    def args(leaf_map, i):
        return ", ".join(f"x{g}_{i}" if g >= 0 else f"R{-g - 1}" for g in leaf_map)

    for k, (_, _, _, ident, acc, leaf_map, red_ids, with_index) in enumerate(rounds):
        init = ", ".join(f"_A{k}_{c}({_lit(v, d)})" for c, (v, d) in enumerate(zip(ident, acc)))
        emit(I2 + f"s{k} = ({init},)")
        for i in range(items):
            idx = f", j{i}" if with_index else ""
            emit(I2 + f"if j{i} < p:")
            emit(I2 + I + f"s{k} = _op{k}(s{k}, _elem{k}({args(leaf_map, i)}{idx}))")
        emit(I2 + f"s{k} = _br{k}(s{k})")
        emit(I2 + f"t{k} = _post{k}(s{k}, _f64(p))")
        for c, m in enumerate(red_ids):
            emit(I2 + f"R{m} = _R{m}(t{k}[{c}])")
    if outs:
        fmap = outs[1]
        for i in range(items):
            emit(I2 + f"if j{i} < p:")
            emit(I2 + I + f"w = _out({args(fmap, i)})")
            for q, d in enumerate(outs[2]):
                v = f"(_u8(1) if w[{q}] else _u8(0))" if np.dtype(d).kind == "b" else f"_O{q}(w[{q}])"
                emit(I2 + I + f"o{q}[row * p + j{i}] = {v}")
    emit(I2 + "if tid == 0:")
    emit(I2 + I + "pass")
    if row_outs:
        rargs = ", ".join(f"y{g}" if g >= 0 else f"R{-g - 1}" for g in row_outs[1])
        emit(I2 + I + f"wq = _rowout({rargs})")
        for q, d in enumerate(row_outs[2]):
            v = f"(_u8(1) if wq[{q}] else _u8(0))" if np.dtype(d).kind == "b" else f"_Q{q}(wq[{q}])"
            emit(I2 + I + f"q{q}[row] = {v}")
    for m, d in enumerate(red_dtypes):
        v = f"(_u8(1) if R{m} else _u8(0))" if np.dtype(d).kind == "b" else f"R{m}"
        emit(I2 + I + f"r{m}[row] = {v}")
    emit(I2 + "row += cuda.gridDim.x")
    return "\n".join(lines) + "\n"


def make_row_kernel(rounds, outs, row_outs, leaf_dtypes, red_dtypes, block, items):
    """Kernel factory of a row program.

    ``rounds``: one entry per round, ``(elem, op, post, identity, acc_dtypes, leaf_map,
    red_ids, with_index)``: ``elem(*values[, j])`` maps a row element to the round's
    accumulator tuple, ``op`` combines two, ``post(acc, p)`` finishes the round's results,
    ``identity`` the accumulator's identity values, ``leaf_map`` what ``elem`` reads (``g >=
    0``: leaf ``g``'s element, ``-m - 1``: the per-row result ``m`` of an earlier round),
    ``red_ids`` the result numbers of the round's terms.  ``outs``: ``(fn, leaf_map,
    dtypes)`` of the full outputs or None; ``row_outs``: the same for one value per row
    (``leaf_map`` entries ``g >= 0`` read leaf ``g`` at the row's first element).
    ``leaf_dtypes`` / ``red_dtypes``: the leaves' and the results' dtypes.  Arguments: the
    leaves, full outputs (C-contiguous ``(n, p)``), row outputs and results (``(n,)``),
    ``n``, ``p`` and each leaf's two element strides.
    """
    src = _source(rounds, outs, row_outs, leaf_dtypes, red_dtypes, block, items)
    dev = cuda.jit(device=True)
    g = {"cuda": cuda, "np": np, "_u8": np.uint8, "_f64": np.float64}
    for k, (elem, op, post, _, acc, _, _, _) in enumerate(rounds):
        g[f"_elem{k}"], g[f"_op{k}"], g[f"_post{k}"] = dev(elem), dev(op), dev(post)
        acc = tuple(np.dtype(d) for d in acc)
        for c, d in enumerate(acc):
            g[f"_A{k}_{c}"] = d.type
        g[f"_br{k}"] = fi.make_block_reduce(op, block, acc)
    for m, d in enumerate(red_dtypes):
        g[f"_R{m}"] = np.dtype(d).type
    if outs:
        g["_out"] = dev(outs[0])
        for q, d in enumerate(outs[2]):
            g[f"_O{q}"] = np.dtype(d).type
    if row_outs:
        g["_rowout"] = dev(row_outs[0])
        for q, d in enumerate(row_outs[2]):
            g[f"_Q{q}"] = np.dtype(d).type
    loc: dict = {}
    exec(compile(src, "<forge_array row kernel>", "exec"), g, loc)
    return loc["row_kernel"]


def row_argtypes(leaf_dtypes, out_dtypes, row_dtypes, red_dtypes):
    """numba types of a row kernel's arguments (bool memory is uint8).

    >>> len(row_argtypes(("float32",), ("float32",), (), ("float32", "float32")))
    8
    """
    a = [ptr_t(buffer_dtype(d)) for d in (*leaf_dtypes, *out_dtypes, *row_dtypes, *red_dtypes)]
    return tuple(a) + (i64, i64) + (i64,) * (2 * len(leaf_dtypes))
