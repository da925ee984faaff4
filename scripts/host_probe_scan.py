"""Where a large cumulative_sum spends its host time on the GPU machine (session 4 probe):
host µs of CuPy / torch allocations and of our call, and a cProfile of our call."""
import cupy as cp
import torch

import forge_array as xp
from bench.hosttime import host_us, profile_calls

for n in (10**6, 10**8):
    print(f"n={n:.0e} cupy.empty {host_us(lambda: cp.empty(n, cp.float32)):.1f} us, "
          f"torch.empty {host_us(lambda: torch.empty(n, device='cuda')):.1f} us")
    x = xp.asarray(cp.random.random(n, dtype=cp.float32))
    t = torch.as_tensor(cp.asarray(x), device="cuda")
    xp.cumulative_sum(x)
    print(f"n={n:.0e} xp.cumulative_sum {host_us(lambda: xp.cumulative_sum(x)):.1f} us, "
          f"xp.sum {host_us(lambda: xp.sum(x)):.1f} us, torch.cumsum {host_us(lambda: torch.cumsum(t, 0)):.1f} us")
profile_calls(lambda: xp.cumulative_sum(x), n=200, top=18)
