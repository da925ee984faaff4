"""float32 arithmetic with the GPU's flush-to-zero rule, one PTX instruction each, for
kernels whose results must equal code compiled with ``-ftz=true`` (CuPy's element-wise
kernels) while the rest of the kernel keeps IEEE subnormals.

``ftz_f32(v)`` reads a subnormal ``v`` as a zero of its sign (``add.ftz.f32 v, -0``);
``ftz_add``/``ftz_sub``/``ftz_mul``/``ftz_div`` are ``add``/``sub``/``mul``/``div`` ``.rn.ftz.f32``:
subnormal operands read, and subnormal results written, as zeros of their sign, each
rounded on its own (never contracted into a fused multiply-add).  Their simulator twins are
in :mod:`.sim_float`.

Example (inside a kernel compiled for the GPU)
-------
>>> from forge_array import intrinsics as fi                      # doctest: +SKIP
>>> def kernel(x, y, out):                                         # doctest: +SKIP
...     out[0] = fi.ftz_add(fi.ftz_mul(x[0], y[0]), fi.ftz_f32(x[1]))
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core.errors import TypingError
from numba.cuda.extending import intrinsic

_F32 = ir.FloatType()


def _pure_asm(builder, text, constraints, args):
    """A pure inline-PTX expression (no side effect: the compiler may hoist, merge or drop
    it like any arithmetic)."""
    fnty = ir.FunctionType(_F32, [_F32] * len(args))
    return builder.call(ir.InlineAsm(fnty, text, constraints, side_effect=False), args)


def _float32_args(context, builder, sig, args):
    return [context.cast(builder, a, t, types.float32) for a, t in zip(args, sig.args)]


def _check(name, *tys):
    for t in tys:
        if not isinstance(t, (types.Float, types.Integer, types.Boolean)):
            raise TypingError(f"{name} takes real numbers, got {t}")


@intrinsic
def ftz_f32(typingctx, v):
    """``v`` as float32, a subnormal read as a zero of its sign (one ``add.ftz.f32``)."""
    _check("ftz_f32", v)

    def codegen(context, builder, sig, args):
        (a,) = _float32_args(context, builder, sig, args)
        return _pure_asm(builder, "add.ftz.f32 $0, $1, 0f80000000;", "=f,f", [a])

    return types.float32(v), codegen


def _make_binary(op):
    text = f"{op}.rn.ftz.f32 $0, $1, $2;"

    def binary(typingctx, a, b):
        _check(f"ftz_{op}", a, b)

        def codegen(context, builder, sig, args):
            return _pure_asm(builder, text, "=f,f,f", _float32_args(context, builder, sig, args))

        return types.float32(a, b), codegen

    binary.__name__ = binary.__qualname__ = f"ftz_{op}"
    binary.__doc__ = f"``a {op} b`` in float32 by ``{op}.rn.ftz.f32``."
    return intrinsic(binary)


ftz_add = _make_binary("add")
ftz_sub = _make_binary("sub")
ftz_mul = _make_binary("mul")
ftz_div = _make_binary("div")
