"""CUDA intrinsics of shared memory and asynchrony: shared scratch for device functions,
memory barriers in shared memory, bulk (TMA) copies, named barriers.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import cuda, types
from numba.core.errors import TypingError
from numba.cuda.extending import intrinsic
from numba.np import numpy_support

from .cuda_memory import _data_ptr, _elem_ptr
from .cuda_types import _i32, _i64
from .cuda_warp import _asm

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
