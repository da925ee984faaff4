"""Status words of single-pass algorithms: a small value and its status in ONE 8- or 16-byte
word, written and read with a single relaxed vector access.

CUB's ``ScanTileState`` packs a tile's status and value into one transaction word (8 bytes
for values of <= 4 bytes, 16 bytes — ``longlong2`` — for 8-byte values), stored and loaded
with relaxed ``st/ld.relaxed.gpu`` vector accesses: a reader that sees the status sees the
value of the same store, so no fence and no release/acquire is needed (nothing else is
communicated through the word). Here a word is ``n`` 32-bit pieces (``n`` in 1, 2, 4):

``pack_words(head, value, n)``
    ``(head, bits of value...)``: ``head`` (uint32) in piece 0, the members of ``value`` (a
    tuple of scalars, at most ``4 * (n - 1)`` bytes) packed one after the other from piece 1.
``unpack_words(words, like)``
    the value (a tuple of the member types of ``like``) from pieces ``1 ..``.
``store_relaxed_words(p, i, words)`` / ``load_relaxed_words(p, i, n)``
    one ``st/ld.relaxed.gpu.global.v{n}.b32`` at ``p + i`` (``p`` a uint32 buffer, ``p + i``
    aligned to ``4 n`` bytes).

On the GPU these are numba ``@intrinsic`` functions (inline PTX); under the simulator
(``FORGE_ARRAY_SIMULATE=1``) plain Python on NumPy memory, where the ``n`` pieces of a word
are published and read as one value of the simulator's memory model (stale reads return a
whole older word, never a mix).

Example
-------
>>> import numpy as np
>>> from forge_array.intrinsics import words as fw
>>> w = fw.pack_words(np.uint32(9), (np.float64(1.5),), 4)   # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from ..runtime.packed_words import value_bytes, words_for
from ._impl import SIMULATE

__all__ = ["pack_words", "unpack_words", "store_relaxed_words", "load_relaxed_words",
           "value_bytes", "words_for"]


if SIMULATE:
    from . import sim_memory as _sim

    class _Wide:
        """``n`` consecutive uint32 elements of a buffer seen as one element (a tuple)."""

        __slots__ = ("p", "n")

        def __init__(self, p, n):
            self.p, self.n = p, n

        def address(self, i):
            return _sim._address(self.p, i)

        def __getitem__(self, i):
            return tuple(np.uint32(self.p[i + k]) for k in range(self.n))

        def __setitem__(self, i, v):
            for k in range(self.n):
                self.p[i + k] = v[k]

    def _scalar_bytes(x):
        if isinstance(x, np.generic):
            return x.tobytes()
        if isinstance(x, (bool, np.bool_)):
            return np.bool_(x).tobytes()
        if isinstance(x, int):
            return np.int64(x).tobytes()
        if isinstance(x, float):
            return np.float64(x).tobytes()
        if isinstance(x, complex):
            return np.complex128(x).tobytes()
        return np.asarray(x).tobytes()

    def pack_words(head, value, n):
        raw = b"".join(_scalar_bytes(x) for x in value)
        room = 4 * (n - 1)
        if len(raw) > room:
            raise ValueError(f"pack_words: a value of {len(raw)} bytes does not fit {n} words")
        body = np.frombuffer(raw + bytes(room - len(raw)), dtype=np.uint32)
        return (np.uint32(head),) + tuple(np.uint32(w) for w in body)

    def unpack_words(words, like):
        raw = b"".join(np.uint32(w).tobytes() for w in words[1:])
        out = []
        off = 0
        for x in like:
            dt = x.dtype if isinstance(x, np.generic) else np.asarray(x).dtype
            out.append(np.frombuffer(raw[off:off + dt.itemsize], dtype=dt)[0])
            off += dt.itemsize
        return tuple(out)

    def store_relaxed_words(p, i, words):
        if np.dtype(p.dtype) != np.dtype(np.uint32):
            raise TypeError("store_relaxed_words: expected a uint32 buffer")
        n = len(words)
        if n > 1 and _sim._address(p, i) % (4 * n):
            raise ValueError(f"store_relaxed_words: misaligned {4 * n}-byte word")
        _sim.memory_model.publish(_Wide(p, n), i, tuple(np.uint32(w) for w in words))

    def load_relaxed_words(p, i, n):
        if np.dtype(p.dtype) != np.dtype(np.uint32):
            raise TypeError("load_relaxed_words: expected a uint32 buffer")
        if n > 1 and _sim._address(p, i) % (4 * n):
            raise ValueError(f"load_relaxed_words: misaligned {4 * n}-byte word")
        return _sim.memory_model.read(_Wide(p, n), i)

else:
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    _i32 = ir.IntType(32)

    def _members(ty):
        if isinstance(ty, types.BaseTuple):
            return list(ty.types)
        return [ty]

    def _size(t):
        if isinstance(t, types.Boolean):
            return 1
        if isinstance(t, (types.Integer, types.Float)):
            return t.bitwidth // 8
        if isinstance(t, types.Complex):
            return t.bitwidth // 8
        raise TypingError(f"pack_words: unsupported member type {t}")

    def _to_bits(context, builder, t, v):
        """(integer LLVM value, bytes) of one scalar."""
        if isinstance(t, types.Boolean):
            return builder.zext(v, ir.IntType(8)), 1
        if isinstance(t, types.Integer):
            return v, t.bitwidth // 8
        if isinstance(t, types.Float):
            return builder.bitcast(v, ir.IntType(t.bitwidth)), t.bitwidth // 8
        c = context.make_complex(builder, t, value=v)
        half = t.bitwidth // 2
        re = builder.zext(builder.bitcast(c.real, ir.IntType(half)), ir.IntType(t.bitwidth))
        im = builder.zext(builder.bitcast(c.imag, ir.IntType(half)), ir.IntType(t.bitwidth))
        return builder.or_(re, builder.shl(im, ir.Constant(ir.IntType(t.bitwidth), half))), t.bitwidth // 8

    def _from_bits(context, builder, t, bits):
        if isinstance(t, types.Boolean):
            return builder.icmp_unsigned("!=", bits, ir.Constant(bits.type, 0))
        if isinstance(t, types.Integer):
            return bits
        if isinstance(t, types.Float):
            return builder.bitcast(bits, ir.FloatType() if t.bitwidth == 32 else ir.DoubleType())
        half = t.bitwidth // 2
        fl = ir.FloatType() if half == 32 else ir.DoubleType()
        c = context.make_complex(builder, t)
        c.real = builder.bitcast(builder.trunc(bits, ir.IntType(half)), fl)
        c.imag = builder.bitcast(builder.trunc(builder.lshr(bits, ir.Constant(bits.type, half)),
                                               ir.IntType(half)), fl)
        return c._getvalue()

    def _literal_int(n, what):
        if not isinstance(n, types.IntegerLiteral) or n.literal_value not in (1, 2, 4):
            raise TypingError(f"{what}: the number of words must be a literal 1, 2 or 4, got {n}")
        return n.literal_value

    @intrinsic
    def pack_words(typingctx, head, value, n):
        """``(head, value's bits ...)`` as a UniTuple of ``n`` uint32 (``n`` a literal)."""
        nw = _literal_int(n, "pack_words")
        if not isinstance(head, types.Integer):
            raise TypingError(f"pack_words: head must be an integer, got {head}")
        mem = _members(value)
        room = 4 * (nw - 1)
        if sum(_size(t) for t in mem) > room:
            raise TypingError(f"pack_words: {value} does not fit {nw} words")
        rty = types.UniTuple(types.uint32, nw)

        def codegen(context, builder, sig, args):
            hty, vty, _ = sig.args
            h = context.cast(builder, args[0], hty, types.uint32)
            vals = ([builder.extract_value(args[1], k) for k in range(len(vty.types))]
                    if isinstance(vty, types.BaseTuple) else [args[1]])
            out = [h]
            if nw > 1:
                W = ir.IntType(32 * (nw - 1))
                big = ir.Constant(W, 0)
                off = 0
                for t, v in zip(_members(vty), vals):
                    bits, size = _to_bits(context, builder, t, v)
                    wide = builder.zext(bits, W) if bits.type.width < W.width else bits
                    if off:
                        wide = builder.shl(wide, ir.Constant(W, 8 * off))
                    big = builder.or_(big, wide)
                    off += size
                for k in range(nw - 1):
                    part = builder.lshr(big, ir.Constant(W, 32 * k)) if k else big
                    out.append(builder.trunc(part, _i32) if W.width > 32 else part)
            return context.make_tuple(builder, rty, out)

        return rty(head, value, n), codegen

    @intrinsic
    def unpack_words(typingctx, words, like):
        """The value packed by :func:`pack_words`, typed like the tuple ``like``."""
        if not (isinstance(words, types.UniTuple) and words.dtype == types.uint32):
            raise TypingError(f"unpack_words: expected a UniTuple of uint32, got {words}")
        nw = len(words)
        mem = _members(like)
        if sum(_size(t) for t in mem) > 4 * (nw - 1):
            raise TypingError(f"unpack_words: {like} does not fit {nw} words")
        rty = like if isinstance(like, types.BaseTuple) else types.UniTuple(like, 1)

        def codegen(context, builder, sig, args):
            W = ir.IntType(32 * (nw - 1))
            big = ir.Constant(W, 0)
            for k in range(nw - 1):
                w = builder.extract_value(args[0], k + 1)
                w = builder.zext(w, W) if W.width > 32 else w
                if k:
                    w = builder.shl(w, ir.Constant(W, 32 * k))
                big = builder.or_(big, w)
            vals = []
            off = 0
            for t in mem:
                size = _size(t)
                part = builder.lshr(big, ir.Constant(W, 8 * off)) if off else big
                it = ir.IntType(8 * size)
                if it.width < W.width:
                    part = builder.trunc(part, it)
                vals.append(_from_bits(context, builder, t, part))
                off += size
            return context.make_tuple(builder, rty, vals)

        return rty(words, like), codegen

    def _word_ptr(context, builder, pty, p, ity, i):
        idx = context.cast(builder, i, ity, types.int64)
        ptr = builder.gep(p, [idx])
        return ptr

    @intrinsic
    def store_relaxed_words(typingctx, p, i, words):
        """One ``st.relaxed.gpu.global.v{n}.b32`` of the ``n`` pieces at ``p + i``."""
        if not (isinstance(p, types.CPointer) and p.dtype == types.uint32):
            raise TypingError(f"store_relaxed_words: expected a uint32 buffer, got {p}")
        if not (isinstance(words, types.UniTuple) and len(words) in (1, 2, 4)
                and isinstance(words.dtype, types.Integer)):
            raise TypingError(f"store_relaxed_words: expected 1, 2 or 4 uint32, got {words}")
        nw = len(words)

        def codegen(context, builder, sig, args):
            pty, ity, wty = sig.args
            ptr = _word_ptr(context, builder, pty, args[0], ity, args[1])
            ws = [context.cast(builder, builder.extract_value(args[2], k), wty.dtype, types.uint32)
                  for k in range(nw)]
            vec = ".v%d" % nw if nw > 1 else ""
            regs = ", ".join(f"${k + 1}" for k in range(nw))
            regs = "{" + regs + "}" if nw > 1 else regs
            fnty = ir.FunctionType(ir.VoidType(), [ptr.type] + [_i32] * nw)
            asm = ir.InlineAsm(fnty, f"st.relaxed.gpu.global{vec}.b32 [$0], {regs};",
                               "l," + ",".join(["r"] * nw) + ",~{memory}", side_effect=True)
            builder.call(asm, [ptr] + ws)
            return context.get_dummy_value()

        return types.void(p, i, words), codegen

    @intrinsic
    def load_relaxed_words(typingctx, p, i, n):
        """One ``ld.relaxed.gpu.global.v{n}.b32`` at ``p + i`` -> UniTuple of ``n`` uint32."""
        if not (isinstance(p, types.CPointer) and p.dtype == types.uint32):
            raise TypingError(f"load_relaxed_words: expected a uint32 buffer, got {p}")
        nw = _literal_int(n, "load_relaxed_words")
        rty = types.UniTuple(types.uint32, nw)

        def codegen(context, builder, sig, args):
            pty, ity, _ = sig.args
            ptr = _word_ptr(context, builder, pty, args[0], ity, args[1])
            vec = ".v%d" % nw if nw > 1 else ""
            outs = ", ".join(f"${k}" for k in range(nw))
            outs = "{" + outs + "}" if nw > 1 else outs
            if nw > 1:
                sty = ir.LiteralStructType([_i32] * nw)
            else:
                sty = _i32
            fnty = ir.FunctionType(sty, [ptr.type])
            asm = ir.InlineAsm(fnty, f"ld.relaxed.gpu.global{vec}.b32 {outs}, [${nw}];",
                               ",".join(["=r"] * nw) + ",l,~{memory}", side_effect=True)
            r = builder.call(asm, [ptr])
            vals = [builder.extract_value(r, k) for k in range(nw)] if nw > 1 else [r]
            return context.make_tuple(builder, rty, vals)

        return rty(p, i, n), codegen
