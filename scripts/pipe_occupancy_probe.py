"""Session 13: resident blocks per SM of the pipelined scan as planned (the driver's occupancy
calculator with the launch's dynamic shared memory) against the planner's own estimate."""
import cupy as cp
import numpy as np

import forge_array as xp
from forge_array.primitives import scan as pscan

for dt in ("float32", "float64", "int32"):
    x = xp.asarray(cp.random.standard_normal(10**8).astype(np.dtype(dt)))
    xp.cumulative_sum(x)
    cp.cuda.runtime.deviceSynchronize()
    p = [q for q in pscan._fast_plans().values() if q.kernel.name.startswith("pipeline")
         or "pipeline" in q.kernel.name][-1]
    fn = p.kernel.function()
    ptr = fn.ptr if hasattr(fn, "ptr") else fn.kernel.ptr
    occ = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(ptr, p.block, p.shared)
    k = getattr(fn, "kernel", fn)
    print(f"{dt}: kernel {p.kernel.name} block {p.block} grid {p.grid} dynamic shared {p.shared} B, "
          f"static {getattr(k, 'shared_size_bytes', '?')} B, registers {getattr(k, 'num_regs', '?')}, "
          f"driver: {occ} blocks/SM (planned {p.grid // 132})", flush=True)
    pscan._fast_plans().clear()
