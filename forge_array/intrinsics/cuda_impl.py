"""CUDA implementation of the intrinsics: numba ``@intrinsic`` functions emitting NVVM IR
and inline PTX, for kernels compiled by numba-cuda to PTX.

Every public name here has a plain-Python twin in :mod:`.sim_impl`; kernels import them from
:mod:`forge_array.intrinsics`, which picks one of the two.

Example (inside a kernel compiled for the GPU)
-------
>>> from forge_array import intrinsics as fi                      # doctest: +SKIP
>>> def kernel(p, n):                                              # doctest: +SKIP
...     v = fi.shfl_down(p[fi.lane_id()], 1)
"""

from __future__ import annotations

import re

import numpy as np
from llvmlite import ir
from numba import cuda, types
from numba.core.errors import TypingError
from numba.cuda.extending import intrinsic
from numba.np import numpy_support

WARP = 32

_i1 = ir.IntType(1)
_i8 = ir.IntType(8)
_i16 = ir.IntType(16)
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_FULL_MASK = 0xFFFFFFFF

__all__ = [
    "WARP", "VEC", "lane_id", "warp_id", "ballot", "syncwarp", "shfl_idx", "shfl_up", "shfl_down", "shfl_xor",
    "fence_block", "fence_device", "fence_system", "load_acquire", "store_release",
    "load_relaxed", "atomic_add", "atomic_exch", "atomic_cas", "load", "store", "vload",
    "vstore", "vstore_shared", "vload_shared", "vload_hinted", "vstore_hinted", "nanosleep", "cast_like",
    "with_shared_scratch", "device_op", "globaltimer",
]


def VEC(dtype) -> int:
    """Elements of ``dtype`` per 128-bit access (a plain Python function for factories).

    >>> VEC("float32"), VEC("float64"), VEC("uint8"), VEC("complex128")
    (4, 2, 16, 1)
    """
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    return 16 // np.dtype(dtype).itemsize


# --------------------------------------------------------------------------- lane / warp


def _sreg(builder, name):
    fnty = ir.FunctionType(_i32, [])
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, fnty, name)
    return builder.call(fn, [])


@intrinsic
def lane_id(typingctx):
    """Lane of the calling thread in its warp (``threadIdx.x & 31``), as int32."""
    def codegen(context, builder, sig, args):
        tid = _sreg(builder, "llvm.nvvm.read.ptx.sreg.tid.x")
        return builder.and_(tid, ir.Constant(_i32, 31))

    return types.int32(), codegen


@intrinsic
def warp_id(typingctx):
    """Warp of the calling thread in its (1-D) block (``threadIdx.x >> 5``), as int32."""
    def codegen(context, builder, sig, args):
        tid = _sreg(builder, "llvm.nvvm.read.ptx.sreg.tid.x")
        return builder.lshr(tid, ir.Constant(_i32, 5))

    return types.int32(), codegen


# --------------------------------------------------------------------------- shuffles

# mode -> (NVVM intrinsic, c operand: clamp 31 for idx/down/bfly, 0 for up)
_SHFL = {
    "idx": ("llvm.nvvm.shfl.sync.idx.i32", 0x1F),
    "up": ("llvm.nvvm.shfl.sync.up.i32", 0x0),
    "down": ("llvm.nvvm.shfl.sync.down.i32", 0x1F),
    "bfly": ("llvm.nvvm.shfl.sync.bfly.i32", 0x1F),
}


def _shufflable(ty) -> bool:
    if isinstance(ty, types.BaseTuple):
        return all(_shufflable(t) for t in ty.types)
    return isinstance(ty, (types.Boolean, types.Integer, types.Float, types.Complex))


def _shfl_i32(builder, mode, val, b):
    name, c = _SHFL[mode]
    fnty = ir.FunctionType(_i32, [_i32, _i32, _i32, _i32])
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, fnty, name)
    return builder.call(fn, [ir.Constant(_i32, _FULL_MASK), val, b, ir.Constant(_i32, c)])


def _shfl_bits(builder, mode, bits, b):
    """Shuffle an integer LLVM value of any width in 32-bit pieces."""
    width = bits.type.width
    if width < 32:
        r = _shfl_i32(builder, mode, builder.zext(bits, _i32), b)
        return builder.trunc(r, bits.type)
    if width == 32:
        return _shfl_i32(builder, mode, bits, b)
    pieces = []
    for k in range(width // 32):
        part = builder.trunc(builder.lshr(bits, ir.Constant(bits.type, 32 * k)), _i32)
        pieces.append(_shfl_i32(builder, mode, part, b))
    out = ir.Constant(bits.type, 0)
    for k, part in enumerate(pieces):
        wide = builder.zext(part, bits.type)
        if k:
            wide = builder.shl(wide, ir.Constant(bits.type, 32 * k))
        out = builder.or_(out, wide)
    return out


def _shfl_value(context, builder, ty, val, mode, b):
    """Recursive codegen: tuples member by member, complex as two floats."""
    if isinstance(ty, types.BaseTuple):
        members = [
            _shfl_value(context, builder, t, builder.extract_value(val, k), mode, b)
            for k, t in enumerate(ty.types)
        ]
        return context.make_tuple(builder, ty, members)
    if isinstance(ty, types.Complex):
        cin = context.make_complex(builder, ty, value=val)
        cout = context.make_complex(builder, ty)
        cout.real = _shfl_value(context, builder, ty.underlying_float, cin.real, mode, b)
        cout.imag = _shfl_value(context, builder, ty.underlying_float, cin.imag, mode, b)
        return cout._getvalue()
    if isinstance(ty, types.Float):
        ity = ir.IntType(ty.bitwidth)
        r = _shfl_bits(builder, mode, builder.bitcast(val, ity), b)
        return builder.bitcast(r, val.type)
    # integers and booleans (i1)
    return _shfl_bits(builder, mode, val, b)


def _make_shfl(mode, doc):
    def shfl(typingctx, v, b):
        if not _shufflable(v):
            raise TypingError(f"cannot shuffle a value of type {v} (numeric scalars or tuples)")
        if not isinstance(b, types.Integer):
            raise TypingError(f"shuffle lane/offset must be an integer, got {b}")

        def codegen(context, builder, sig, args):
            val, bv = args
            b32 = context.cast(builder, bv, sig.args[1], types.int32)
            return _shfl_value(context, builder, sig.args[0], val, mode, b32)

        return v(v, b), codegen

    shfl.__name__ = shfl.__qualname__ = f"shfl_{mode}"
    shfl.__doc__ = doc
    return intrinsic(shfl)


shfl_idx = _make_shfl("idx", "Value of ``v`` in lane ``src_lane & 31`` (all lanes call).")
shfl_up = _make_shfl("up", "Value of lane ``lane - delta``; own value when out of range.")
shfl_down = _make_shfl("down", "Value of lane ``lane + delta``; own value when out of range.")
shfl_xor = _make_shfl("bfly", "Value of lane ``lane ^ mask``.")


@intrinsic
def ballot(typingctx, pred):
    """uint32 mask of the lanes whose ``pred`` is true (all 32 lanes call)."""
    if not isinstance(pred, (types.Boolean, types.Integer)):
        raise TypingError(f"ballot takes a boolean or integer predicate, got {pred}")

    def codegen(context, builder, sig, args):
        p = context.cast(builder, args[0], sig.args[0], types.boolean)
        fnty = ir.FunctionType(_i32, [_i32, _i1])
        name = "llvm.nvvm.vote.ballot.sync"
        fn = builder.module.globals.get(name)
        if fn is None:
            fn = ir.Function(builder.module, fnty, name)
        return builder.call(fn, [ir.Constant(_i32, _FULL_MASK), p])

    return types.uint32(pred), codegen


@intrinsic
def syncwarp(typingctx):
    """Barrier of the 32 lanes of the warp, with memory ordering among them
    (``bar.warp.sync``)."""
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [_i32])
        name = "llvm.nvvm.bar.warp.sync"
        fn = builder.module.globals.get(name)
        if fn is None:
            fn = ir.Function(builder.module, fnty, name)
        builder.call(fn, [ir.Constant(_i32, _FULL_MASK)])
        return context.get_dummy_value()

    return types.void(), codegen


# --------------------------------------------------------------------------- casting


@intrinsic
def cast_like(typingctx, value, like):
    """``value`` converted to the type of ``like`` (member-wise for tuples): keeps loop-carried
    values of generic operators type-stable."""
    def codegen(context, builder, sig, args):
        return context.cast(builder, args[0], sig.args[0], sig.args[1])

    if isinstance(like, types.BaseTuple):
        if not isinstance(value, types.BaseTuple) or len(value) != len(like):
            raise TypingError(f"cannot convert {value} to {like}")
    return like(value, like), codegen


# --------------------------------------------------------------------------- fences, sleep


def _asm(builder, retty, argtys, text, constraints, args):
    fnty = ir.FunctionType(retty, argtys)
    return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=True), args)


def _make_fence(scope):
    def fence(typingctx):
        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), [], f"fence.acq_rel.{scope};", "~{memory}", [])
            return context.get_dummy_value()

        return types.void(), codegen

    fence.__name__ = fence.__qualname__ = f"fence_{scope}"
    return intrinsic(fence)


fence_block = _make_fence("cta")
fence_device = _make_fence("gpu")
fence_system = _make_fence("sys")


@intrinsic
def nanosleep(typingctx, ns):
    """Suspend the thread for about ``ns`` nanoseconds (``nanosleep.u32``)."""
    if not isinstance(ns, types.Integer):
        raise TypingError("nanosleep takes an integer number of nanoseconds")

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.uint32)
        _asm(builder, ir.VoidType(), [_i32], "nanosleep.u32 $0;", "r,~{memory}", [v])
        return context.get_dummy_value()

    return types.void(ns), codegen


@intrinsic
def globaltimer(typingctx):
    """The GPU's global nanosecond timer (``%globaltimer``, one clock for every SM), as
    ``uint64``: for diagnostic time stamps (its resolution depends on the GPU)."""

    def codegen(context, builder, sig, args):
        return _asm(builder, _i64, [], "mov.u64 $0, %globaltimer;", "=l", [])

    return types.uint64(), codegen


# --------------------------------------------------------------------------- memory ordering

_WORD_TYPES = (types.int32, types.uint32, types.int64, types.uint64)


def _check_word_ptr(what, p, i, allow_float=True):
    if not isinstance(p, types.CPointer):
        raise TypingError(f"{what}: expected a buffer pointer, got {p}")
    ok = p.dtype in _WORD_TYPES or (allow_float and p.dtype in (types.float32, types.float64))
    if not ok:
        raise TypingError(f"{what}: unsupported element type {p.dtype} "
                          "(int32, uint32, int64, uint64)")
    if not isinstance(i, types.Integer):
        raise TypingError(f"{what}: index must be an integer, got {i}")


def _elem_ptr(context, builder, pty, p, ity, i):
    idx = context.cast(builder, i, ity, types.int64)
    return builder.gep(p, [idx])


def _bits_of(context, builder, ty, val):
    if isinstance(ty, types.Float):
        return builder.bitcast(val, ir.IntType(ty.bitwidth))
    return val


def _from_bits(ty, builder, bits):
    if isinstance(ty, types.Float):
        return builder.bitcast(bits, ir.FloatType() if ty.bitwidth == 32 else ir.DoubleType())
    return bits


def _make_load(sem):
    def load_ord(typingctx, p, i):
        _check_word_ptr(f"load_{sem}", p, i)

        def codegen(context, builder, sig, args):
            pty, ity = sig.args
            ptr = _elem_ptr(context, builder, pty, args[0], ity, args[1])
            bits = pty.dtype.bitwidth
            ity_ll = ir.IntType(bits)
            iptr = builder.bitcast(ptr, ity_ll.as_pointer())
            reg = "r" if bits == 32 else "l"
            r = _asm(builder, ity_ll, [iptr.type], f"ld.{sem}.gpu.global.b{bits} $0, [$1];",
                     f"={reg},l,~{{memory}}", [iptr])
            return _from_bits(pty.dtype, builder, r)

        return p.dtype(p, i), codegen

    load_ord.__name__ = load_ord.__qualname__ = f"load_{sem}"
    return intrinsic(load_ord)


load_acquire = _make_load("acquire")
load_relaxed = _make_load("relaxed")


@intrinsic
def store_release(typingctx, p, i, v):
    """``p[i] = v`` with release semantics at device scope (``st.release.gpu``)."""
    _check_word_ptr("store_release", p, i)

    def codegen(context, builder, sig, args):
        pty, ity, vty = sig.args
        ptr = _elem_ptr(context, builder, pty, args[0], ity, args[1])
        val = context.cast(builder, args[2], vty, pty.dtype)
        bits = pty.dtype.bitwidth
        ity_ll = ir.IntType(bits)
        iptr = builder.bitcast(ptr, ity_ll.as_pointer())
        reg = "r" if bits == 32 else "l"
        _asm(builder, ir.VoidType(), [iptr.type, ity_ll],
             f"st.release.gpu.global.b{bits} [$0], $1;", f"l,{reg},~{{memory}}",
             [iptr, _bits_of(context, builder, pty.dtype, val)])
        return context.get_dummy_value()

    return types.void(p, i, v), codegen


def _make_atomic(op):
    nargs = 2 if op == "cas" else 1

    def atomic(typingctx, p, i, *vals):
        _check_word_ptr(f"atomic_{op}", p, i, allow_float=False)
        if len(vals) != nargs:
            raise TypingError(f"atomic_{op} takes {2 + nargs} arguments")

        def codegen(context, builder, sig, args):
            pty, ity = sig.args[:2]
            ptr = _elem_ptr(context, builder, pty, args[0], ity, args[1])
            bits = pty.dtype.bitwidth
            ity_ll = ir.IntType(bits)
            ops = [context.cast(builder, a, t, pty.dtype) for a, t in zip(args[2:], sig.args[2:])]
            reg = "r" if bits == 32 else "l"
            kind = f"u{bits}" if op == "add" else f"b{bits}"
            operands = ", ".join(f"${k + 2}" for k in range(nargs))
            text = f"atom.relaxed.gpu.global.{op}.{kind} $0, [$1], {operands};"
            cons = f"={reg},l," + ",".join([reg] * nargs) + ",~{memory}"
            return _asm(builder, ity_ll, [ptr.type] + [ity_ll] * nargs, text, cons, [ptr] + ops)

        return p.dtype(p, i, *vals), codegen

    if nargs == 1:
        def wrapper(typingctx, p, i, v):
            return atomic(typingctx, p, i, v)
    else:
        def wrapper(typingctx, p, i, expected, new):
            return atomic(typingctx, p, i, expected, new)
    wrapper.__name__ = wrapper.__qualname__ = f"atomic_{op}"
    return intrinsic(wrapper)


atomic_add = _make_atomic("add")
atomic_exch = _make_atomic("exch")
atomic_cas = _make_atomic("cas")


# --------------------------------------------------------------------------- load / store


def _ptr_value_type(p):
    """Value type of ``load`` from a pointer / 1-D C array / tuple of them; None if invalid."""
    if isinstance(p, types.CPointer):
        return p.dtype
    if isinstance(p, types.Array) and p.ndim == 1 and p.layout == "C":
        return p.dtype
    if isinstance(p, types.BaseTuple) and len(p) > 0:
        subs = [_ptr_value_type(t) for t in p.types]
        if any(s is None for s in subs):
            return None
        return types.Tuple(tuple(subs)) if len(set(subs)) > 1 else types.UniTuple(subs[0], len(subs))
    return None


def _data_ptr(context, builder, pty, p):
    if isinstance(pty, types.Array):
        return context.make_array(pty)(context, builder, p).data
    return p


def _load_rec(context, builder, pty, p, idx):
    if isinstance(pty, types.BaseTuple):
        vals = [_load_rec(context, builder, t, builder.extract_value(p, k), idx)
                for k, t in enumerate(pty.types)]
        return context.make_tuple(builder, _ptr_value_type(pty), vals)
    ptr = builder.gep(_data_ptr(context, builder, pty, p), [idx])
    return context.unpack_value(builder, pty.dtype, ptr)


def _store_rec(context, builder, pty, p, idx, vty, v):
    if isinstance(pty, types.BaseTuple):
        for k, t in enumerate(pty.types):
            _store_rec(context, builder, t, builder.extract_value(p, k), idx,
                       vty.types[k], builder.extract_value(v, k))
        return
    ptr = builder.gep(_data_ptr(context, builder, pty, p), [idx])
    val = context.cast(builder, v, vty, pty.dtype)
    context.pack_value(builder, pty.dtype, val, ptr)


def _tuple_shape_ok(pty, vty) -> bool:
    if isinstance(pty, types.BaseTuple):
        return (isinstance(vty, types.BaseTuple) and len(vty) == len(pty)
                and all(_tuple_shape_ok(a, b) for a, b in zip(pty.types, vty.types)))
    return not isinstance(vty, types.BaseTuple)


@intrinsic
def load(typingctx, p, i):
    """``p[i]`` for a buffer, or the tuple of ``q[i]`` for a tuple of buffers."""
    vt = _ptr_value_type(p)
    if vt is None:
        raise TypingError(f"load: expected a buffer or a tuple of buffers, got {p}")
    if not isinstance(i, types.Integer):
        raise TypingError(f"load: index must be an integer, got {i}")

    def codegen(context, builder, sig, args):
        idx = context.cast(builder, args[1], sig.args[1], types.int64)
        return _load_rec(context, builder, sig.args[0], args[0], idx)

    return vt(p, i), codegen


@intrinsic
def store(typingctx, p, i, v):
    """``p[i] = v`` for a buffer, or member-wise for a tuple of buffers and a tuple value."""
    vt = _ptr_value_type(p)
    if vt is None:
        raise TypingError(f"store: expected a buffer or a tuple of buffers, got {p}")
    if not isinstance(i, types.Integer):
        raise TypingError(f"store: index must be an integer, got {i}")
    if not _tuple_shape_ok(p, v):
        raise TypingError(f"store: value of type {v} does not match the buffers {p}")

    def codegen(context, builder, sig, args):
        idx = context.cast(builder, args[1], sig.args[1], types.int64)
        _store_rec(context, builder, sig.args[0], args[0], idx, sig.args[2], args[2])
        return context.get_dummy_value()

    return types.void(p, i, v), codegen


# --------------------------------------------------------------------------- 128-bit access


def _vec_layout(context, ty):
    """(LLVM element type of the 16-byte vector, vector length, elements per value)."""
    n = VEC(ty)
    if isinstance(ty, types.Complex):
        fl = ir.FloatType() if ty.bitwidth == 64 else ir.DoubleType()
        return fl, 2 * n, n
    return context.get_data_type(ty), n, n


def _vec_ptr(context, builder, pty, p, ity, i):
    """Element pointer, moved to the global address space, as a pointer to a 16-byte vector."""
    ptr = _elem_ptr(context, builder, pty, p, ity, i)
    gptr = builder.addrspacecast(ptr, ptr.type.pointee.as_pointer(1))
    return builder.bitcast(gptr, _V4I32.as_pointer(1))


# the memory access is always <4 x i32> (one ld/st.global.v4 for every element size; a
# <16 x i8> access would be split into four 4-byte accesses), bitcast to the element vector
_V4I32 = ir.VectorType(_i32, 4)


def _elem_vec_type(context, ty):
    el, count, _ = _vec_layout(context, ty)
    return ir.VectorType(el, count)


def _unpack_narrow(context, builder, ty, words, k):
    size = 16 // VEC(ty)
    bits = 8 * size
    word = builder.extract_element(words, ir.Constant(_i32, k * size // 4))
    part = builder.trunc(builder.lshr(word, ir.Constant(_i32, (k * size % 4) * 8)),
                         ir.IntType(bits))
    dt = context.get_data_type(ty)
    if dt != part.type:
        part = builder.bitcast(part, dt)
    return context.data_model_manager[ty].from_data(builder, part)


def _pack_narrow(context, builder, ty, xs):
    size = 16 // VEC(ty)
    bits = 8 * size
    words = [ir.Constant(_i32, 0)] * 4
    for k, x in enumerate(xs):
        d = context.data_model_manager[ty].as_data(builder, x)
        if d.type != ir.IntType(bits):
            d = builder.bitcast(d, ir.IntType(bits))
        w = builder.shl(builder.zext(d, _i32), ir.Constant(_i32, (k * size % 4) * 8))
        words[k * size // 4] = builder.or_(words[k * size // 4], w)
    vec = ir.Constant(_V4I32, ir.Undefined)
    for j, w in enumerate(words):
        vec = builder.insert_element(vec, w, ir.Constant(_i32, j))
    return vec


def _check_vec_ptr(what, p, i):
    if not isinstance(p, types.CPointer) or not isinstance(
        p.dtype, (types.Boolean, types.Integer, types.Float, types.Complex)
    ):
        raise TypingError(f"{what}: expected a pointer to a numeric buffer, got {p}")
    if not isinstance(i, types.Integer):
        raise TypingError(f"{what}: index must be an integer, got {i}")


def _words_to_tuple(context, builder, ty, rty, words):
    """The tuple of ``VEC(ty)`` elements held in a ``<4 x i32>`` value."""
    n = VEC(ty)
    if n > 4:  # 1- and 2-byte elements: unpack the words with shifts (a bitcast to
        # <16 x i8> lets the optimizer split the load into 4-byte pieces)
        vals = [_unpack_narrow(context, builder, ty, words, k) for k in range(n)]
        return context.make_tuple(builder, rty, vals)
    vec = builder.bitcast(words, _elem_vec_type(context, ty))
    vals = []
    for k in range(n):
        if isinstance(ty, types.Complex):
            c = context.make_complex(builder, ty)
            c.real = builder.extract_element(vec, ir.Constant(_i32, 2 * k))
            c.imag = builder.extract_element(vec, ir.Constant(_i32, 2 * k + 1))
            vals.append(c._getvalue())
        else:
            x = builder.extract_element(vec, ir.Constant(_i32, k))
            vals.append(context.data_model_manager[ty].from_data(builder, x))
    return context.make_tuple(builder, rty, vals)


def _tuple_to_words(context, builder, ty, tty, values):
    """The ``<4 x i32>`` value holding the ``VEC(ty)`` members of tuple ``values``."""
    n = VEC(ty)
    if n > 4:  # 1- and 2-byte elements: pack them into the words with shifts
        xs = [context.cast(builder, builder.extract_value(values, k), tty.types[k], ty)
              for k in range(n)]
        return _pack_narrow(context, builder, ty, xs)
    vec = ir.Constant(_elem_vec_type(context, ty), ir.Undefined)
    for k in range(n):
        x = context.cast(builder, builder.extract_value(values, k), tty.types[k], ty)
        if isinstance(ty, types.Complex):
            c = context.make_complex(builder, ty, value=x)
            vec = builder.insert_element(vec, c.real, ir.Constant(_i32, 2 * k))
            vec = builder.insert_element(vec, c.imag, ir.Constant(_i32, 2 * k + 1))
        else:
            d = context.data_model_manager[ty].as_data(builder, x)
            vec = builder.insert_element(vec, d, ir.Constant(_i32, k))
    return builder.bitcast(vec, _V4I32)


def _check_vec_tuple(what, p, values):
    n = VEC(p.dtype)
    if not isinstance(values, types.BaseTuple) or len(values) != n:
        raise TypingError(f"{what}: expected a tuple of {n} values for {p.dtype}, got {values}")


@intrinsic
def vload(typingctx, p, i):
    """128-bit load of ``VEC(dtype)`` elements ``p[i], ..., p[i + VEC - 1]`` (the address of
    ``p[i]`` must be 16-byte aligned) -> UniTuple."""
    _check_vec_ptr("vload", p, i)
    rty = types.UniTuple(p.dtype, VEC(p.dtype))

    def codegen(context, builder, sig, args):
        pty, ity = sig.args
        vptr = _vec_ptr(context, builder, pty, args[0], ity, args[1])
        words = builder.load(vptr, align=16)
        return _words_to_tuple(context, builder, pty.dtype, sig.return_type, words)

    return rty(p, i), codegen


@intrinsic
def vstore(typingctx, p, i, values):
    """128-bit store of the ``VEC(dtype)`` values of a tuple at ``p[i], ...`` (16-byte
    aligned)."""
    _check_vec_ptr("vstore", p, i)
    _check_vec_tuple("vstore", p, values)

    def codegen(context, builder, sig, args):
        pty, ity, tty = sig.args
        vptr = _vec_ptr(context, builder, pty, args[0], ity, args[1])
        words = _tuple_to_words(context, builder, pty.dtype, tty, args[2])
        builder.store(words, vptr, align=16)
        return context.get_dummy_value()

    return types.void(p, i, values), codegen


@intrinsic
def vstore_shared(typingctx, a, i, values):
    """128-bit store (``st.shared.v4``) of the ``VEC(dtype)`` values of a tuple at ``a[i], ...``
    of a 1-D block-shared array (the address must be 16-byte aligned): one conflict-free
    store per warp-wide 512 bytes instead of ``VEC`` scalar stores at a ``VEC``-word stride."""
    if not (isinstance(a, types.Array) and a.ndim == 1
            and isinstance(a.dtype, (types.Boolean, types.Integer, types.Float, types.Complex))):
        raise TypingError(f"vstore_shared: expected a 1-D shared numeric array, got {a}")
    if not isinstance(i, types.Integer):
        raise TypingError(f"vstore_shared: index must be an integer, got {i}")
    n = VEC(a.dtype)
    if not isinstance(values, types.BaseTuple) or len(values) != n:
        raise TypingError(f"vstore_shared: expected a tuple of {n} values for {a.dtype}, got {values}")

    def codegen(context, builder, sig, args):
        aty, ity, tty = sig.args
        data = _data_ptr(context, builder, aty, args[0])
        ptr = _elem_ptr(context, builder, aty, data, ity, args[1])
        sptr = builder.addrspacecast(ptr, ptr.type.pointee.as_pointer(3))
        words = _tuple_to_words(context, builder, aty.dtype, tty, args[2])
        builder.store(words, builder.bitcast(sptr, _V4I32.as_pointer(3)), align=16)
        return context.get_dummy_value()

    return types.void(a, i, values), codegen


@intrinsic
def vload_shared(typingctx, a, i):
    """128-bit load (``ld.shared.v4``) of the ``VEC(dtype)`` elements ``a[i], ...`` of a 1-D
    block-shared array (16-byte aligned) -> UniTuple: the mirror of :func:`vstore_shared`."""
    if not (isinstance(a, types.Array) and a.ndim == 1
            and isinstance(a.dtype, (types.Boolean, types.Integer, types.Float, types.Complex))):
        raise TypingError(f"vload_shared: expected a 1-D shared numeric array, got {a}")
    if not isinstance(i, types.Integer):
        raise TypingError(f"vload_shared: index must be an integer, got {i}")
    rty = types.UniTuple(a.dtype, VEC(a.dtype))

    def codegen(context, builder, sig, args):
        aty, ity = sig.args
        data = _data_ptr(context, builder, aty, args[0])
        ptr = _elem_ptr(context, builder, aty, data, ity, args[1])
        sptr = builder.addrspacecast(ptr, ptr.type.pointee.as_pointer(3))
        words = builder.load(builder.bitcast(sptr, _V4I32.as_pointer(3)), align=16)
        return _words_to_tuple(context, builder, aty.dtype, sig.return_type, words)

    return rty(a, i), codegen


_HINT_RE = re.compile(r"(\.[A-Za-z0-9_:]+)*")
_HINTED: dict = {}


def _check_hint(hint):
    if not isinstance(hint, str) or not _HINT_RE.fullmatch(hint):
        raise ValueError(f"cache hint {hint!r}: expected PTX qualifiers such as '.nc.L2::256B' or ''")


def _asm_addr(builder, vptr):
    return builder.ptrtoint(vptr, _i64)


def vload_hinted(hint: str):
    """:func:`vload` issued as ``ld.global<hint>.v4.u32`` (inline PTX), e.g. ``hint=".nc"``
    (read-only path: the memory must not be written while the kernel runs),
    ``".L1::no_allocate.L2::256B"`` or ``".cs"``; ``""`` is :func:`vload` itself. A plain
    Python function for kernel factories (the hint is fixed at compile time).

    >>> vload_hinted("") is vload
    True
    """
    _check_hint(hint)
    if not hint:
        return vload
    key = ("ld", hint)
    if key in _HINTED:
        return _HINTED[key]
    text = f"ld.global{hint}.v4.u32 {{$0, $1, $2, $3}}, [$4];"
    ret = ir.LiteralStructType([_i32] * 4)

    def vload_h(typingctx, p, i):
        _check_vec_ptr("vload", p, i)
        rty = types.UniTuple(p.dtype, VEC(p.dtype))

        def codegen(context, builder, sig, args):
            pty, ity = sig.args
            vptr = _vec_ptr(context, builder, pty, args[0], ity, args[1])
            fnty = ir.FunctionType(ret, [_i64])
            # a non-.nc load may see stores of this kernel: keep it ordered (side effect)
            asm = ir.InlineAsm(fnty, text, "=r,=r,=r,=r,l", side_effect=".nc" not in hint)
            st = builder.call(asm, [_asm_addr(builder, vptr)])
            words = ir.Constant(_V4I32, ir.Undefined)
            for k in range(4):
                words = builder.insert_element(words, builder.extract_value(st, k), ir.Constant(_i32, k))
            return _words_to_tuple(context, builder, pty.dtype, sig.return_type, words)

        return rty(p, i), codegen

    vload_h.__name__ = vload_h.__qualname__ = "vload" + hint.replace(".", "_").replace(":", "_")
    _HINTED[key] = intrinsic(vload_h)
    return _HINTED[key]


def vstore_hinted(hint: str):
    """:func:`vstore` issued as ``st.global<hint>.v4.u32`` (inline PTX), e.g. ``hint=".cs"``
    (streaming, evict first) or ``".L1::no_allocate"``; ``""`` is :func:`vstore` itself.

    >>> vstore_hinted("") is vstore
    True
    """
    _check_hint(hint)
    if not hint:
        return vstore
    key = ("st", hint)
    if key in _HINTED:
        return _HINTED[key]
    text = f"st.global{hint}.v4.u32 [$0], {{$1, $2, $3, $4}};"

    def vstore_h(typingctx, p, i, values):
        _check_vec_ptr("vstore", p, i)
        _check_vec_tuple("vstore", p, values)

        def codegen(context, builder, sig, args):
            pty, ity, tty = sig.args
            vptr = _vec_ptr(context, builder, pty, args[0], ity, args[1])
            words = _tuple_to_words(context, builder, pty.dtype, tty, args[2])
            ws = [builder.extract_element(words, ir.Constant(_i32, k)) for k in range(4)]
            fnty = ir.FunctionType(ir.VoidType(), [_i64] + [_i32] * 4)
            asm = ir.InlineAsm(fnty, text, "l,r,r,r,r,~{memory}", side_effect=True)
            builder.call(asm, [_asm_addr(builder, vptr)] + ws)
            return context.get_dummy_value()

        return types.void(p, i, values), codegen

    vstore_h.__name__ = vstore_h.__qualname__ = "vstore" + hint.replace(".", "_").replace(":", "_")
    _HINTED[key] = intrinsic(vstore_h)
    return _HINTED[key]


# --------------------------------------------------------------------------- shared scratch


def device_op(fn):
    """``fn`` as a numba CUDA device function (itself when it already is one).

    >>> f = device_op(lambda a, b: a + b)
    >>> device_op(f) is f
    True
    """
    if type(fn).__name__ == "CUDADispatcher":
        return fn
    return cuda.jit(device=True)(getattr(fn, "py_func", fn))


def _alloc_src(ttype, g):
    if isinstance(ttype, (tuple, list)):
        return "(" + "".join(_alloc_src(t, g) + ", " for t in ttype) + ")"
    name = f"_T{len(g)}"
    g[name] = numpy_support.from_dtype(np.dtype(ttype))
    return f"cuda.shared.array(_N, {name})"


def with_shared_scratch(n: int, ttype, body, nargs: int = 1):
    """Device function ``(a_1, ..., a_nargs) -> body(s, a_1, ..., a_nargs)`` where ``s`` is
    an array of ``n`` elements of block-shared memory of dtype ``ttype``, or a tuple of such
    arrays (one per member) when ``ttype`` is a tuple of dtypes. Every call of this factory
    gets its own shared memory. (numba cannot return a shared array from a device function,
    hence the callback shape.)

    >>> def body(s, v):                                  # doctest: +SKIP
    ...     store(s, warp_id(), v)
    >>> f = with_shared_scratch(4, ("float32", "int64"), body)   # doctest: +SKIP
    """
    g = {}
    expr = _alloc_src(ttype, g)
    g.update(cuda=cuda, _N=int(n), _body=device_op(body))
    args = ", ".join(f"a{k}" for k in range(nargs))
    call = "s" + "".join(f", a{k}" for k in range(nargs))
    src = f"def with_scratch({args}):\n    s = {expr}\n    return _body({call})\n"
    exec(compile(src, "<forge_array.intrinsics shared scratch>", "exec"), g)
    return cuda.jit(device=True)(g["with_scratch"])


# --------------------------------------------------------------------------- asynchronous
# bulk copies (sm_90 TMA, 1-D), memory barriers in shared memory, named barriers

__all__ += ["mbar_init", "mbar_fence_init", "mbar_arrive", "mbar_arrive_tx", "mbar_try_wait",
            "bulk_load", "bulk_store", "bulk_commit", "bulk_wait_read", "fence_proxy_async",
            "bar_sync"]


def _check_shared_array(what, a, i):
    if not (isinstance(a, types.Array) and a.ndim == 1):
        raise TypingError(f"{what}: expected a 1-D block-shared array, got {a}")
    if not isinstance(i, types.Integer):
        raise TypingError(f"{what}: index must be an integer, got {i}")


def _shared_addr(context, builder, aty, a, ity, i):
    """32-bit shared-window address of ``a[i]`` (``a`` a block-shared array)."""
    data = _data_ptr(context, builder, aty, a)
    ptr = _elem_ptr(context, builder, aty, data, ity, i)
    sptr = builder.addrspacecast(ptr, ptr.type.pointee.as_pointer(3))
    return builder.ptrtoint(sptr, _i32)


def _global_addr(context, builder, pty, p, ity, i):
    ptr = _elem_ptr(context, builder, pty, _data_ptr(context, builder, pty, p), ity, i)
    return builder.ptrtoint(builder.addrspacecast(ptr, ptr.type.pointee.as_pointer(1)), _i64)


def _u32(context, builder, ty, v):
    return context.cast(builder, v, ty, types.uint32)


def _check_bars(what, bars, i):
    _check_shared_array(what, bars, i)
    if bars.dtype not in (types.uint64, types.int64):
        raise TypingError(f"{what}: memory barriers are 64-bit shared words, got {bars.dtype}")


@intrinsic
def mbar_init(typingctx, bars, i, count):
    """``mbarrier.init``: barrier ``bars[i]`` (a 64-bit shared word) expects ``count``
    arrivals per phase."""
    _check_bars("mbar_init", bars, i)

    def codegen(context, builder, sig, args):
        a = _shared_addr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        c = _u32(context, builder, sig.args[2], args[2])
        _asm(builder, ir.VoidType(), [_i32, _i32], "mbarrier.init.shared::cta.b64 [$0], $1;",
             "r,r,~{memory}", [a, c])
        return context.get_dummy_value()

    return types.void(bars, i, count), codegen


@intrinsic
def mbar_fence_init(typingctx):
    """Makes initialised memory barriers visible to the asynchronous proxy (bulk copies);
    followed by a block barrier before any thread uses them."""
    def codegen(context, builder, sig, args):
        _asm(builder, ir.VoidType(), [], "fence.mbarrier_init.release.cluster;", "~{memory}", [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def mbar_arrive(typingctx, bars, i):
    """``mbarrier.arrive`` (release, block scope) on ``bars[i]``."""
    _check_bars("mbar_arrive", bars, i)

    def codegen(context, builder, sig, args):
        a = _shared_addr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        _asm(builder, ir.VoidType(), [_i32],
             "{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [$0];\n}", "r,~{memory}", [a])
        return context.get_dummy_value()

    return types.void(bars, i), codegen


@intrinsic
def mbar_arrive_tx(typingctx, bars, i, nbytes):
    """``mbarrier.arrive.expect_tx``: one arrival on ``bars[i]`` that also expects
    ``nbytes`` more bytes of bulk copies completing on it in the current phase."""
    _check_bars("mbar_arrive_tx", bars, i)

    def codegen(context, builder, sig, args):
        a = _shared_addr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        nb = _u32(context, builder, sig.args[2], args[2])
        _asm(builder, ir.VoidType(), [_i32, _i32],
             "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [$0], $1;\n}",
             "r,r,~{memory}", [a, nb])
        return context.get_dummy_value()

    return types.void(bars, i, nbytes), codegen


@intrinsic
def mbar_try_wait(typingctx, bars, i, parity):
    """``mbarrier.try_wait.parity`` (acquire, block scope): whether the phase of ``bars[i]``
    with parity ``parity`` has completed (the hardware suspends the thread a while before
    answering False); callers loop."""
    _check_bars("mbar_try_wait", bars, i)

    def codegen(context, builder, sig, args):
        a = _shared_addr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        ph = _u32(context, builder, sig.args[2], args[2])
        r = _asm(builder, _i32, [_i32, _i32],
                 "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\n"
                 "selp.u32 $0, 1, 0, p;\n}", "=r,r,r,~{memory}", [a, ph])
        return builder.icmp_unsigned("!=", r, ir.Constant(_i32, 0))

    return types.boolean(bars, i, parity), codegen


@intrinsic
def bulk_load(typingctx, sh, k, src, i, nbytes, bars, b):
    """``cp.async.bulk`` global -> shared: ``nbytes`` (a multiple of 16) from ``src + i``
    (16-byte aligned) to ``sh + k`` (16-byte aligned), completing on barrier ``bars[b]``
    (which must expect the bytes: :func:`mbar_arrive_tx`)."""
    _check_shared_array("bulk_load", sh, k)
    _check_bars("bulk_load", bars, b)
    if not isinstance(src, types.CPointer) or not isinstance(i, types.Integer):
        raise TypingError(f"bulk_load: expected a buffer pointer and an index, got {src}, {i}")

    def codegen(context, builder, sig, args):
        d = _shared_addr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        g = _global_addr(context, builder, sig.args[2], args[2], sig.args[3], args[3])
        nb = _u32(context, builder, sig.args[4], args[4])
        m = _shared_addr(context, builder, sig.args[5], args[5], sig.args[6], args[6])
        _asm(builder, ir.VoidType(), [_i32, _i64, _i32, _i32],
             "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];",
             "r,l,r,r,~{memory}", [d, g, nb, m])
        return context.get_dummy_value()

    return types.void(sh, k, src, i, nbytes, bars, b), codegen


@intrinsic
def bulk_store(typingctx, dst, i, sh, k, nbytes):
    """``cp.async.bulk`` shared -> global (bulk group): ``nbytes`` (a multiple of 16) from
    ``sh + k`` to ``dst + i`` (both 16-byte aligned); the shared memory may be reused after
    :func:`bulk_commit` and :func:`bulk_wait_read`. Shared-memory writes of other threads must
    be made visible to the copy first (a barrier, then :func:`fence_proxy_async`)."""
    _check_shared_array("bulk_store", sh, k)
    if not isinstance(dst, types.CPointer) or not isinstance(i, types.Integer):
        raise TypingError(f"bulk_store: expected a buffer pointer and an index, got {dst}, {i}")

    def codegen(context, builder, sig, args):
        g = _global_addr(context, builder, sig.args[0], args[0], sig.args[1], args[1])
        s = _shared_addr(context, builder, sig.args[2], args[2], sig.args[3], args[3])
        nb = _u32(context, builder, sig.args[4], args[4])
        _asm(builder, ir.VoidType(), [_i64, _i32, _i32],
             "cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], $2;", "l,r,r,~{memory}",
             [g, s, nb])
        return context.get_dummy_value()

    return types.void(dst, i, sh, k, nbytes), codegen


def _make_plain(name, text, doc):
    def plain(typingctx):
        def codegen(context, builder, sig, args):
            _asm(builder, ir.VoidType(), [], text, "~{memory}", [])
            return context.get_dummy_value()

        return types.void(), codegen

    plain.__name__ = plain.__qualname__ = name
    plain.__doc__ = doc
    return intrinsic(plain)


bulk_commit = _make_plain("bulk_commit", "cp.async.bulk.commit_group;",
                          "Closes the thread's group of bulk stores issued so far.")
bulk_wait_read = _make_plain("bulk_wait_read", "cp.async.bulk.wait_group.read 0;",
                             "Waits until every committed bulk store has read its shared memory.")
fence_proxy_async = _make_plain("fence_proxy_async", "fence.proxy.async.shared::cta;",
                                "Orders the thread's shared-memory accesses with the asynchronous "
                                "proxy (bulk copies).")


@intrinsic
def bar_sync(typingctx, bid, nthreads):
    """Named block barrier ``bar.sync bid, nthreads`` (``bid`` 1-15; barrier 0 is
    ``syncthreads``): waits until ``nthreads`` threads (a multiple of 32, whole warps) have
    arrived."""
    if not isinstance(bid, types.Integer) or not isinstance(nthreads, types.Integer):
        raise TypingError("bar_sync takes a barrier id and a thread count")

    def codegen(context, builder, sig, args):
        b = _u32(context, builder, sig.args[0], args[0])
        n = _u32(context, builder, sig.args[1], args[1])
        _asm(builder, ir.VoidType(), [_i32, _i32], "bar.sync $0, $1;", "r,r,~{memory}", [b, n])
        return context.get_dummy_value()

    return types.void(bid, nthreads), codegen
