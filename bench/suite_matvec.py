"""matvec: matrix-vector products, against cuBLAS (through CuPy) and torch.

- float32 A @ x and x @ A for (10,10^7) .. (10^7,10) (n*p = 10^8), plus sweeps at
  n*p = 10^7 and 10^9: forge_array ``xp.matmul``, CuPy ``A @ x`` (cuBLAS gemv), torch
- int32 A @ x and x @ A on (10^4,10^4), (10^3,10^5), (10^5,10^3) (cuBLAS has no
  integer gemv: CuPy falls back to its own kernels)
- the min-plus product ``forge_array.matvec(A, x, f=lambda a, b: a + b,
  op=ops.minimum)`` next to the float32 product of the same shape; CuPy and torch
  compute it as ``(A + x).min(axis=1)``, materialising n*p temporaries
"""

from __future__ import annotations

import numpy as np

from .common import fa, native, torch_builder
from .harness import Case, Impl

SUITE = "matvec"


def _plus(a, b):
    return a + b


def _mv_case(ctx, name_prefix, shape, dt, side):
    r, c = shape
    dt = np.dtype(dt)
    vec_n = c if side == "A@x" else r
    out_n = r if side == "A@x" else c
    if side == "A@x":
        def make(k):
            return (ctx.random(shape, dt, k), ctx.random((c,), dt, k + 500))

        impls = {
            "forge_array": fa(lambda xp, A, x: xp.matmul(A, x)),
            ctx.ref: native(lambda A, x: A @ x),
            "torch": torch_builder(ctx, lambda torch, A, x: A @ x),
        }
    else:
        def make(k):
            return (ctx.random((r,), dt, k + 500), ctx.random(shape, dt, k))

        impls = {
            "forge_array": fa(lambda xp, x, A: xp.matmul(x, A)),
            ctx.ref: native(lambda x, A: x @ A),
            "torch": torch_builder(ctx, lambda torch, x, A: x @ A),
        }
    item = dt.itemsize
    return Case(
        SUITE, f"{name_prefix} {side} {dt.name}", r * c,
        item * (r * c + vec_n + out_n), make, impls, shape=shape, dtype=dt.name,
        reference=ctx.ref, input_bytes=item * (r * c + vec_n),
        mem_bytes=3 * item * (r * c + vec_n + out_n), params={"side": side},
        rtol=1e-3 if dt.kind == "f" else None,
    )


def cases(ctx):
    S = ctx.sizes
    out = []
    for side in ("A@x", "x@A"):
        for shape in S.shapes(8):
            out.append(_mv_case(ctx, "matvec", shape, np.float32, side))
    for total in (7, 9):
        for side in ("A@x", "x@A"):
            for shape in S.shapes(total):
                out.append(_mv_case(ctx, f"matvec n*p=1e{total}", shape, np.float32, side))
    for side in ("A@x", "x@A"):
        for shape in (S.shape(4, 4), S.shape(3, 5), S.shape(5, 3)):
            if shape is not None:
                out.append(_mv_case(ctx, "matvec", shape, np.int32, side))
    # A @ x of short rows (16 .. 128 elements, 10^8 in all): the staged short-row kernel
    if S.max_exp >= 8:
        total = 10 ** max(8 - S.shift, 2)
        for p in (16, 32, 64, 100, 128):
            out.append(_mv_case(ctx, "matvec short rows", (total // p, p), np.float32, "A@x"))

    # min-plus next to the float32 product of the same shape
    for shape in (S.shape(4, 4), S.shape(3, 5), S.shape(5, 3)):
        if shape is None:
            continue
        r, c = shape

        def make(k, shape=shape, c=c):
            return (ctx.random(shape, np.float32, k), ctx.random((c,), np.float32, k + 500))

        impls = {
            "forge_array": fa(
                lambda xp, A, x: xp.matvec(A, x, f=_plus, op=xp.ops.minimum)
            ),
            "forge_array matmul": Impl(
                fa(lambda xp, A, x: xp.matmul(A, x)), check=False,
                note="the float32 product A @ x of the same shape, for comparison",
            ),
            ctx.ref: native(lambda A, x: (A + x[None, :]).min(axis=1)),
            "cupy A@x" if not ctx.dry_run else "numpy A@x": Impl(
                native(lambda A, x: A @ x), check=False,
                note="cuBLAS A @ x of the same shape, for comparison",
            ),
            "torch": torch_builder(ctx, lambda torch, A, x: (A + x[None, :]).amin(dim=1)),
        }
        out.append(Case(
            SUITE, "min-plus A@x float32", r * c, 4 * (r * c + c + r), make, impls,
            shape=shape, dtype="float32", reference=ctx.ref, input_bytes=4 * (r * c + c),
            mem_bytes=16 * r * c,
            note="min-plus: CuPy/torch materialise A + x (n*p temporaries, not counted)",
        ))
    return out
