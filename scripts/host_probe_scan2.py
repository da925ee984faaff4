"""Pre-launch host time of scans on the GPU machine (session 8 probe): event-timed µs per call
(the bench's method) against the same with the GPU kept busy while the host prepares (GPU time
alone), for our cumulative_sum and PyTorch's cumsum; then a cProfile of ours on a small input."""
import cProfile
import pstats
import statistics

import cupy as cp
import torch

import forge_array as xp

_spin_kernel = cp.RawKernel(r'''extern "C" __global__ void spin(long long t) {
    long long s = clock64(); while (clock64() - s < t) {} }''', "spin")


def event_us(f, n=40, busy=False):
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(n):
        if busy:
            _spin_kernel((1,), (1,), (cp.int64(400000),))
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
    return statistics.median(ts)


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
        a, b = event_us(f), event_us(f, busy=True)
        print(f"{shape} axis {axis} {name:6s} event {a:8.1f} us  GPU alone {b:8.1f} us  pre-launch {a - b:5.1f} us")
c = cp.random.random((100, 10), dtype=cp.float32)
x = xp.asarray(c)
xp.cumulative_sum(x, axis=0)
pr = cProfile.Profile()
pr.enable()
for _ in range(3000):
    xp.cumulative_sum(x, axis=0)
pr.disable()
cp.cuda.Device().synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(30)
