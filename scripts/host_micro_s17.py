"""Session 17 probe: host µs of the pieces of a small call on the GPU machine (timeit, best of
7 x 20000): CuPy output allocation (ndarray, pool malloc, ndarray over a pointer), the driver
launch of a cached kernel, and torch's allocation for reference."""
import timeit

import cupy as cp
import numpy as np
import torch

import forge_array as xp
from forge_array import runtime

x = xp.asarray(cp.random.random(1000, dtype=cp.float32))
xp.sum(x)
f32 = np.dtype(np.float32)
pool = cp.get_default_memory_pool()
m = cp.cuda.alloc(4000)
alloc = cp.cuda.memory.alloc
nd = cp.ndarray
t = torch.empty(1000, device="cuda")
cases = {
    "cp.ndarray((1000,), f32)": lambda: nd((1000,), f32),
    "cp.ndarray((), f32)": lambda: nd((), f32),
    "cp.cuda.memory.alloc(4000)": lambda: alloc(4000),
    "pool.malloc(4000)": lambda: pool.malloc(4000),
    "cp.ndarray((1000,), f32, memptr=m)": lambda: nd((1000,), f32, memptr=m),
    "cp.ndarray((), f32, memptr=m)": lambda: nd((), f32, memptr=m),
    "torch.empty(1000)": lambda: torch.empty(1000, device="cuda"),
    "x.data.ptr": lambda: x._array.data.ptr if hasattr(x, "_array") else None,
    "runtime.stream_key()": runtime.stream_key,
    "cp.cuda.get_current_stream().ptr": lambda: cp.cuda.get_current_stream().ptr,
    "xp.sum(x) (1e3)": lambda: xp.sum(x),
    "torch sum (1e3)": lambda: t.sum(),
}
for name, f in cases.items():
    n = 20000
    best = min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6
    cp.cuda.Device().synchronize()
    print(f"{name:40s} {best:7.2f} us", flush=True)
