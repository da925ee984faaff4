"""reduce: full and axis reductions, against CuPy (CUB), torch and cuda.compute.

- sum and max of float32, 10^3 .. 10^9
- sum of uint8 and of int32 at 10^8 and 10^9 (default result dtypes: the sums
  accumulate in 64-bit integers; cuda.compute sums int32 into int32 and uint8 into
  uint64 where it can)
- sum of the stride-2 view x[::2] with 10^8 elements (bytes counted: the elements used)
- axis sums of (10,10^7) .. (10^7,10), axis 0 and axis 1
- sum of squares at 10^8: forge_array ``xp.mapreduce(lambda a: a*a, ops.add, x)``
  (one pass, no temporary) vs ``(x*x).sum()``
- var and std at 10^8 (population: ddof=0 / correction=0)
- argmax and argmin at 10^8
"""

from __future__ import annotations

import numpy as np

from .common import cc_reduce, fa, native, torch_builder
from .harness import Case, Impl, Skip

SUITE = "reduce"


def _square(a):
    return a * a


def _case(ctx, name, n, make, impls, *, dtype, bytes_moved, shape=None, **kw):
    return Case(
        SUITE, name, n, bytes_moved, make, impls, shape=shape or (n,), dtype=dtype,
        reference=ctx.ref, **kw,
    )


def _full(ctx, kind, dtype, n):
    dt = np.dtype(dtype)
    out_item = 8 if dt.kind in "iu" else dt.itemsize

    def make(k, n=n):
        return (ctx.random((n,), dt, k),)

    if kind == "sum":
        impls = {
            "forge_array": fa(lambda xp, x: xp.sum(x)),
            ctx.ref: native(lambda x: x.sum()),
            "torch": torch_builder(ctx, lambda torch, t: t.sum()),
        }
        if dt == np.uint8:
            impls["cuda.compute"] = cc_reduce(ctx, "PLUS", np.uint64, 0)
        elif dt.kind == "i":
            impls["cuda.compute"] = Impl(
                cc_reduce(ctx, "PLUS", dt, 0), note="accumulates in the input dtype"
            )
        else:
            impls["cuda.compute"] = cc_reduce(ctx, "PLUS", dt, 0)
    else:  # max
        impls = {
            "forge_array": fa(lambda xp, x: xp.max(x)),
            ctx.ref: native(lambda x: x.max()),
            "torch": torch_builder(ctx, lambda torch, t: t.max()),
            "cuda.compute": cc_reduce(ctx, "MAXIMUM", dt, -np.inf if dt.kind == "f" else 0),
        }
    return _case(
        ctx, f"{kind} {dt.name}", n, make, impls, dtype=dt.name,
        bytes_moved=n * dt.itemsize + out_item, mem_bytes=3 * n * dt.itemsize,
    )


def cases(ctx):
    S = ctx.sizes
    out = []
    for kind in ("sum", "max"):
        for n in S.sweep(3, 9):
            out.append(_full(ctx, kind, np.float32, n))
    for dtype in (np.uint8, np.int32):
        for e in (8, 9):
            n = S.n(e)
            if n is not None:
                out.append(_full(ctx, "sum", dtype, n))

    # stride-2 view
    n = S.n(8)
    if n is not None:
        def no_cc(x):
            raise Skip("cuda.compute reduce_into takes contiguous input (x[::2] is not)")

        out.append(_case(
            ctx, "sum float32 x[::2]", n,
            lambda k, n=n: (ctx.random((2 * n,), np.float32, k)[::2],),
            {
                "forge_array": fa(lambda xp, x: xp.sum(x)),
                ctx.ref: native(lambda x: x.sum()),
                "torch": torch_builder(ctx, lambda torch, t: t.sum()),
                "cuda.compute": no_cc,
            },
            dtype="float32", bytes_moved=4 * n + 4, input_bytes=8 * n, mem_bytes=12 * n,
            note="x[::2]: bytes counted are the elements used (half the lines read)",
        ))

    # axis sums
    for axis in (0, 1):
        for shape in S.shapes(8):
            r, c = shape
            out_n = c if axis == 0 else r
            out.append(_case(
                ctx, f"sum axis={axis} float32", r * c,
                lambda k, shape=shape: (ctx.random(shape, np.float32, k),),
                {
                    "forge_array": fa(lambda xp, x, a=axis: xp.sum(x, axis=a)),
                    ctx.ref: native(lambda x, a=axis: x.sum(axis=a)),
                    "torch": torch_builder(ctx, lambda torch, t, a=axis: t.sum(dim=a)),
                },
                shape=shape, dtype="float32", bytes_moved=4 * (r * c + out_n),
                params={"axis": axis},
            ))

    n = S.n(8)
    if n is not None:
        def make(k, n=n):
            return (ctx.random((n,), np.float32, k),)

        out.append(_case(
            ctx, "sum of squares float32", n, make,
            {
                "forge_array": fa(lambda xp, x: xp.mapreduce(_square, xp.ops.add, x)),
                ctx.ref: native(lambda x: (x * x).sum()),
                "torch": torch_builder(ctx, lambda torch, t: (t * t).sum()),
            },
            dtype="float32", bytes_moved=4 * n + 4, mem_bytes=16 * n,
            note="sum of squares: CuPy and torch materialise x*x (not counted in bytes)",
        ))
        out.append(_case(
            ctx, "var float32", n, make,
            {
                "forge_array": fa(lambda xp, x: xp.var(x)),
                ctx.ref: native(lambda x: x.var()),
                "torch": torch_builder(ctx, lambda torch, t: t.var(correction=0)),
            },
            dtype="float32", bytes_moved=4 * n + 4, mem_bytes=16 * n,
        ))
        out.append(_case(
            ctx, "std float32", n, make,
            {
                "forge_array": fa(lambda xp, x: xp.std(x)),
                ctx.ref: native(lambda x: x.std()),
                "torch": torch_builder(ctx, lambda torch, t: t.std(correction=0)),
            },
            dtype="float32", bytes_moved=4 * n + 4, mem_bytes=16 * n,
        ))
        out.append(_case(
            ctx, "argmax float32", n, make,
            {
                "forge_array": fa(lambda xp, x: xp.argmax(x)),
                ctx.ref: native(lambda x: x.argmax()),
                "torch": torch_builder(ctx, lambda torch, t: torch.argmax(t)),
            },
            dtype="float32", bytes_moved=4 * n + 8, mem_bytes=8 * n,
        ))
        out.append(_case(
            ctx, "argmin float32", n, make,
            {
                "forge_array": fa(lambda xp, x: xp.argmin(x)),
                ctx.ref: native(lambda x: x.argmin()),
                "torch": torch_builder(ctx, lambda torch, t: torch.argmin(t)),
            },
            dtype="float32", bytes_moved=4 * n + 8, mem_bytes=8 * n,
        ))
    return out
