"""scan: cumulative sums and generic scans, against CuPy, torch and cuda.compute.

- cumulative_sum of float32, float64 and int32, 10^3 .. 10^9 (result in the input
  dtype everywhere: ``dtype=`` is passed for int32)
- axis scans of float32 (10,10^7), (10^3,10^5), (10^4,10^4), (10^5,10^3), (10^6,100),
  (10^7,10) along axis 0 and 1
- ``cumulative_sum(axis=0)`` of 10^8 float32 in 40, 64, 100 and 200 columns (``columns`` in
  the name: the narrow kernel's range beyond 32 columns, ``scan_columns.narrow_max``)
- a generic scan: the affine-map composition on float32 (a, b) pairs at 10^8,
  ``forge_array.accumulate(lambda p, q: (p[0]*q[0], q[0]*p[1] + q[1]), (a, b))``
  (the linear recurrence h_t = a_t h_(t-1) + b_t); no peer has it
- ``accumulate(ops.add, x, deterministic=True)`` vs the default, 10^7 to 10^9
"""

from __future__ import annotations

import numpy as np

from .common import cc_inclusive_scan, fa, fa_out, native, torch_builder, torch_dtype
from .harness import Case, Impl

SUITE = "scan"


def _affine(p, q):
    return (p[0] * q[0], q[0] * p[1] + q[1])


def _cumsum_impls(ctx, dt, axis=None):
    dt = np.dtype(dt)
    int_dtype = dt.kind in "iu"
    name = dt.name  # read here, not in the timed call: NumPy builds a dtype's name on each read

    def fa_call(xp, x):
        if axis is not None:
            return xp.cumulative_sum(x, axis=axis)
        if int_dtype:
            return xp.cumulative_sum(x, dtype=getattr(xp, name))
        return xp.cumulative_sum(x)

    def ref_call(x):
        return ctx.xp.cumsum(x, axis=axis, dtype=dt)

    tdt: list = []  # torch's dtype, looked up at the first call (outside the timed ones)

    def torch_call(torch, t):
        if not tdt:
            tdt.append(torch_dtype(torch, dt))
        return torch.cumsum(t, dim=0 if axis is None else axis, dtype=tdt[0])

    impls = {
        "forge_array": fa(fa_call),
        ctx.ref: native(ref_call),
        "torch": torch_builder(ctx, torch_call),
    }
    if axis is None:
        impls["cuda.compute"] = cc_inclusive_scan(ctx, "PLUS")
        # like for like: both scanning into an output allocated once, both allocating theirs
        impls["forge_array out="] = Impl(
            fa_out(lambda xp, o, x: xp.accumulate(xp.ops.add, x, out=o)),
            note="accumulate(ops.add, x, out=o): o allocated once, outside the timed calls",
        )
        impls["cuda.compute alloc"] = Impl(
            cc_inclusive_scan(ctx, "PLUS", alloc=True),
            note="cuda.compute scanning into a cupy.empty_like output allocated in each call",
        )
    return impls


def cases(ctx):
    S = ctx.sizes
    out = []
    for dt in (np.float32, np.float64, np.int32):
        dt = np.dtype(dt)
        for n in S.sweep(3, 9):
            out.append(Case(
                SUITE, f"cumulative_sum {dt.name}", n, 2 * n * dt.itemsize,
                lambda k, n=n, dt=dt: (ctx.random((n,), dt, k),),
                _cumsum_impls(ctx, dt), shape=(n,), dtype=dt.name, reference=ctx.ref,
                input_bytes=n * dt.itemsize, mem_bytes=5 * n * dt.itemsize,
            ))
    for axis in (0, 1):
        for shape in (S.shape(1, 7), S.shape(3, 5), S.shape(4, 4), S.shape(5, 3), S.shape(6, 2),
                      S.shape(7, 1)):
            if shape is None:
                continue
            r, c = shape
            out.append(Case(
                SUITE, f"cumulative_sum axis={axis} float32", r * c, 8 * r * c,
                lambda k, shape=shape: (ctx.random(shape, np.float32, k),),
                _cumsum_impls(ctx, np.float32, axis=axis), shape=shape, dtype="float32",
                reference=ctx.ref, input_bytes=4 * r * c, mem_bytes=20 * r * c,
                params={"axis": axis},
            ))
    total = S.n(8)
    for c in (40, 64, 100, 200) if total is not None else ():
        r = max(total // c, 1)
        out.append(Case(
            SUITE, f"cumulative_sum axis=0 float32 columns={c}", r * c, 8 * r * c,
            lambda k, shape=(r, c): (ctx.random(shape, np.float32, k),),
            _cumsum_impls(ctx, np.float32, axis=0), shape=(r, c), dtype="float32",
            reference=ctx.ref, input_bytes=4 * r * c, mem_bytes=20 * r * c, params={"axis": 0},
        ))
    n = S.n(8)
    if n is not None:
        out.append(Case(
            SUITE, "accumulate affine (a,b) float32", n, 16 * n,
            lambda k, n=n: (ctx.random((n,), np.float32, k), ctx.random((n,), np.float32, k + 99)),
            {"forge_array": fa(lambda xp, a, b: xp.accumulate(_affine, (a, b)))},
            shape=(n,), dtype="float32", reference="forge_array", input_bytes=8 * n,
            mem_bytes=40 * n,
            note="affine scan: reads a and b, writes both components (16 bytes/element)",
        ))

    for n in S.sweep(7, 9):
        impls = {
            "forge_array": fa(lambda xp, x: xp.accumulate(xp.ops.add, x, deterministic=True)),
            "forge_array default": Impl(
                fa(lambda xp, x: xp.accumulate(xp.ops.add, x)),
                note="accumulate(ops.add, x) without deterministic=True",
            ),
            ctx.ref: native(lambda x: ctx.xp.cumsum(x)),
            "torch": torch_builder(ctx, lambda torch, t: torch.cumsum(t, dim=0)),
            "cuda.compute": cc_inclusive_scan(ctx, "PLUS"),
        }
        out.append(Case(
            SUITE, "accumulate add deterministic=True float32", n, 8 * n,
            lambda k, n=n: (ctx.random((n,), np.float32, k),),
            impls, shape=(n,), dtype="float32", reference=ctx.ref, input_bytes=4 * n,
            mem_bytes=20 * n,
        ))
    return out
