"""Host time of axis reductions on the GPU machine (session 8 probe): host µs per call
(synchronised before each call) and event-timed µs per call (the bench's method) of our
sum(axis=0) against PyTorch's, on (10, 10^7) and (10, 10^3), then a cProfile of ours."""
import cProfile
import pstats
import statistics
import time

import cupy as cp
import torch

import forge_array as xp


def host_us(f, n=200):
    ts = []
    for _ in range(n):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e6)
    cp.cuda.Device().synchronize()
    return statistics.median(ts)


def event_us(f, n=200, busy=False):
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(n):
        if busy:   # the GPU busy while the host prepares: pre-launch host time hidden
            _spin()
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
    return statistics.median(ts)


_spin_kernel = cp.RawKernel(r'''extern "C" __global__ void spin(long long t) {
    long long s = clock64(); while (clock64() - s < t) {} }''', "spin")


def _spin():
    _spin_kernel((1,), (1,), (cp.int64(200000),))


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
c = cp.random.random((10, 1000), dtype=cp.float32)
x = xp.asarray(c)
xp.sum(x, axis=0)
pr = cProfile.Profile()
pr.enable()
for _ in range(3000):
    xp.sum(x, axis=0)
pr.disable()
cp.cuda.Device().synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(30)
