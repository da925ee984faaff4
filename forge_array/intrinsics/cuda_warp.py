"""CUDA intrinsics of a warp: lane and warp ids, shuffles of any scalar or tuple, ballot,
syncwarp, casts, fences, sleep and the global timer.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core.errors import TypingError
from numba.cuda.extending import intrinsic

from .cuda_types import _FULL_MASK, _i1, _i32, _i64

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


