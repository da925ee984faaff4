"""Pre-launch host time of scans on the GPU machine (session 8 probe): event-timed µs per call
(the bench's method) against the same with the GPU kept busy while the host prepares (GPU time
alone), for our cumulative_sum and PyTorch's cumsum; then a cProfile of ours on a small input."""
import cupy as cp
import torch

import forge_array as xp
from bench.hosttime import event_us, profile_calls

for shape, axis in (((10**8,), 0), ((10**7, 10), 0), ((10**4, 10**4), 1), ((10**4, 10**4), 0),
                    ((10, 10**7), 1), ((10**7, 10), 1)):
    c = cp.random.random(shape, dtype=cp.float32)
    x = xp.asarray(c)
    t = torch.as_tensor(c, device="cuda")
    impls = {"xp": lambda: xp.cumulative_sum(x, axis=axis), "torch": lambda: torch.cumsum(t, axis)}
    if shape == (10**7, 10) and axis == 0:
        del impls["torch"]   # 2.7 s per call
    for name, f in impls.items():
        f()
        f()
        a, b = event_us(f, 40), event_us(f, 40, busy=True)
        print(f"{shape} axis {axis} {name:6s} event {a:8.1f} us  GPU alone {b:8.1f} us  pre-launch {a - b:5.1f} us")
x = xp.asarray(cp.random.random((100, 10), dtype=cp.float32))
profile_calls(lambda: xp.cumulative_sum(x, axis=0))
