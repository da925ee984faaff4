"""Host time of axis reductions on the GPU machine (session 8 probe): host µs per call
(synchronised before each call) and event-timed µs per call (the bench's method) of our
sum(axis=0) against PyTorch's, on (10, 10^7) and (10, 10^3), then a cProfile of ours."""
import cupy as cp
import torch

import forge_array as xp
from bench.hosttime import event_us, host_us, profile_calls

for shape in ((10, 10**7), (10, 10**3), (10**3, 10**5), (10**3, 10**4)):
    c = cp.random.random(shape, dtype=cp.float32)
    x = xp.asarray(c)
    t = torch.as_tensor(c, device="cuda")
    u = xp.asarray(cp.random.random(shape[0], dtype=cp.float32))
    tu = torch.as_tensor(cp.asarray(u), device="cuda")
    for name, f in {"xp sum0": lambda: xp.sum(x, axis=0), "torch sum0": lambda: t.sum(0),
                    "xp sum1": lambda: xp.sum(x, axis=1), "torch sum1": lambda: t.sum(1),
                    "xp x@A": lambda: u @ x, "torch x@A": lambda: tu @ t}.items():
        f()
        f()
        print(f"{shape} {name:10s} host {host_us(f):7.1f} us  event {event_us(f):7.1f} us  "
              f"event after a busy GPU {event_us(f, busy=True):7.1f} us")
x = xp.asarray(cp.random.random((10, 1000), dtype=cp.float32))
profile_calls(lambda: xp.sum(x, axis=0))
