"""Session 16: registers, local memory and occupancy of the short-row scan's specialisations
(plain, init, reverse, include_initial, exclusive; float32 and float64 rows of 10 and 1000)."""
import cupy as cp

import forge_array as xp
from forge_array.primitives import scan as pscan

for dt in ("float32", "float64"):
    for cols in (10, 1000):
        x = xp.asarray(cp.random.standard_normal((4096, cols)).astype(dt))
        for kw in ({}, {"init": 1.0}, {"reverse": True}, {"include_initial": True},
                   {"exclusive": True}, {"reverse": True, "include_initial": True}):
            pscan._fast_plans().clear()
            xp.accumulate(xp.ops.add, x, axis=1, **kw)
            cp.cuda.Device().synchronize()
            plans = list(pscan._fast_plans().values())
            p = plans[-1] if plans else None
            if p is None:   # (an init is not replayed: take the kernel from the memory cache)
                from forge_array.runtime import compiler
                k = [v for v in compiler._MEMORY.values() if v.name == "make_row_scan"][-1]
                block, grid = None, None
            else:
                k, block, grid = p.kernel, p.block, p.grid
            fn = k.function()
            name = "+".join(f"{a}" for a in kw) or "plain"
            print(f"{dt} rows of {cols:5d} {name:26s} {k.name:14s} regs {fn.num_regs:3d} local "
                  f"{fn.local_size_bytes:4d} B shared {fn.shared_size_bytes:6d} B block {block} grid {grid}",
                  flush=True)
