"""Host time of matrix-vector products on the GPU machine (session 8 probe): host µs per call
(synchronised before each call) and event-timed µs per call (the bench's method) of our
A @ x and x @ A against CuPy and torch on the n*p = 10^7 shapes, then a cProfile of ours."""
import cupy as cp
import torch

import forge_array as xp
from bench.hosttime import event_us, host_us, profile_calls

for n, p in ((10, 10**6), (10**3, 10**4), (10**4, 10**3), (10**5, 100)):
    cA = cp.random.random((n, p), dtype=cp.float32)
    cv, cu = cp.random.random(p, dtype=cp.float32), cp.random.random(n, dtype=cp.float32)
    A, v, u = xp.asarray(cA), xp.asarray(cv), xp.asarray(cu)
    tA, tv, tu = (torch.as_tensor(a, device="cuda") for a in (cA, cv, cu))
    cases = {"xp A@x": lambda: A @ v, "xp x@A": lambda: u @ A,
             "torch A@x": lambda: tA @ tv, "torch x@A": lambda: tu @ tA,
             "cupy A@x": lambda: cA @ cv, "cupy x@A": lambda: cu @ cA}
    for name, f in cases.items():
        f()
        f()
        print(f"({n:.0e},{p:.0e}) {name:10s} host {host_us(f):7.1f} us  event {event_us(f):7.1f} us")
cA = cp.random.random((10**3, 10**4), dtype=cp.float32)
A, u = xp.asarray(cA), xp.asarray(cp.random.random(10**3, dtype=cp.float32))
profile_calls(lambda: u @ A)
