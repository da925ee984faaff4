"""CUDA intrinsics of memory: acquire / release / relaxed loads and stores, atomics on
pointers, element access of tuples of buffers, 128-bit vector loads and stores.
"""

from __future__ import annotations

import re

from llvmlite import ir
from numba import types
from numba.core.errors import TypingError
from numba.cuda.extending import intrinsic

from .cuda_types import VEC, _i32, _i64
from .cuda_warp import _asm

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


